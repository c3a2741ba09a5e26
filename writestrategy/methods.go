package writestrategy

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/cursor"
)

// The WriteStrategy methods of each strategy: Apply and ComputeRows as
// methods, for callers holding a strategy value.

// Apply writes the output(s) into the row store inside tx; see [Apply].
func (t Transform) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return Apply(ctx, tx, env, t)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (t Transform) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, t, opts)
}

// Apply writes the output(s) into the row store inside tx; see [Apply].
func (j Join) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return Apply(ctx, tx, env, j)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (j Join) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, j, opts)
}

// Apply writes the output(s) into the row store inside tx; see [Apply].
func (s Split) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return Apply(ctx, tx, env, s)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (s Split) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, s, opts)
}

// Apply writes the output(s) into the row store inside tx; see [Apply].
func (d Deploy) Apply(ctx context.Context, tx pgx.Tx, env *Env) ([]WriteResult, error) {
	return Apply(ctx, tx, env, d)
}

// ComputeRows streams the output(s) from tx without writing; see [ComputeRows].
func (d Deploy) ComputeRows(ctx context.Context, tx pgx.Tx, env *Env, opts *cursor.Options) ([]Computed, error) {
	return ComputeRows(ctx, tx, env, d, opts)
}
