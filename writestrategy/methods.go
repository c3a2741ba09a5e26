package writestrategy

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
)

// The WriteStrategy methods of each strategy: Apply and ComputeRows as
// methods, for callers holding a strategy value. Apply writes each output
// into the dataset_rows row store inside tx (the caller's transaction,
// which the caller commits) and returns one result per output; nothing is
// written to the datasets table or the ledger. An output column of a type
// the row store cannot hold is refused (ErrUnsupportedType) before
// anything is written.

// Apply writes the output(s) into the row store inside tx.
func (t Transform) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, t)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (t Transform) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, t, opts)
}

// Apply writes the output(s) into the row store inside tx.
func (j Join) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, j)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (j Join) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, j, opts)
}

// Apply writes the output(s) into the row store inside tx.
func (s Split) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, s)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (s Split) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, s, opts)
}

// Apply writes the output(s) into the row store inside tx.
func (d Deploy) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return applyStrategy(ctx, tx, env, d)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (d Deploy) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, d, opts)
}
