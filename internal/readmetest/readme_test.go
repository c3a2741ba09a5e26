package readmetest_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The orders the README's snippet reads: three days of orders, amounts
// 1..10.
const readmeOrders = `SELECT g::bigint AS id,
	timestamptz '2026-01-01 00:00:00+00' + (g % 3) * interval '1 day' + g * interval '1 second' AS ts,
	(g % 10 + 1)::int AS amount
FROM generate_series(1, 300) g`

// TestREADMEEmbedIt runs the Go snippets of README.md's "## Embed it"
// section as written: each becomes the body of a function of a program
// that provides what the snippets assume (ctx, a pgx pool on a fresh
// database, logger, an "orders" source dataset in the row store, a
// working directory for the relative warehouse), built inside this module
// and run. The program fails when a snippet returns an error or leaves a
// declared value nil; the test then checks the first snippet's write:
// daily_revenue is an Iceberg table under the warehouse holding the
// revenue per day that Postgres computes from the orders.
func TestREADMEEmbedIt(t *testing.T) {
	blocks := readmeGoBlocks(t, filepath.Join("..", "..", "README.md"), "## Embed it")
	if len(blocks) == 0 {
		t.Fatal(`README.md: no go block under "## Embed it"`)
	}
	src, err := embedProgram(blocks)
	if err != nil {
		t.Fatalf("README.md %q snippets: %v", "## Embed it", err)
	}

	// The program lives inside the module (so that it imports it); a
	// directory starting with "_" is left out of ./... patterns.
	dir, err := os.MkdirTemp(".", "_readme_embed_")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "embed")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+filepath.ToSlash(dir)).CombinedOutput(); err != nil {
		t.Fatalf("building the README snippets failed: %v\n%s\nprogram:\n%s", err, out, numbered(src))
	}

	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	seedOrders(t, ctx, pool)

	work := t.TempDir()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("running the README snippets failed: %v\n%s\nprogram:\n%s", err, out, numbered(src))
	}

	// The write's effect: the Iceberg table under ./lakewrite-data holds
	// the revenue per day.
	want := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT date_trunc('day', ts)::text, sum(amount)::text FROM (`+readmeOrders+`) o GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var day, revenue string
		if err := rows.Scan(&day, &revenue); err != nil {
			t.Fatal(err)
		}
		want[day] = revenue
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	warehouse := filepath.Join(work, "lakewrite-data")
	cat, err := facade.NewPostgresCatalog(ctx, pool, facade.CatalogConfig{Warehouse: warehouse})
	if err != nil {
		t.Fatal(err)
	}
	fac, err := facade.New(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fac.LoadTable(ctx, "daily_revenue")
	if err != nil {
		t.Fatalf("daily_revenue is not an Iceberg table after the README snippet: %v", err)
	}
	if loc := tbl.Location(); !strings.Contains(loc, filepath.ToSlash(warehouse)) {
		t.Fatalf("daily_revenue lives at %s, not under the snippet's warehouse %s", loc, warehouse)
	}
	var revenues []string
	for b, err := range fac.Scan(ctx, "daily_revenue", facade.ScanOptions{Columns: []string{"revenue"}}) {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(b.NumRows()) {
			revenues = append(revenues, b.Column(0).ValueStr(i))
		}
		b.Release()
	}
	var wantRevenues []string
	for _, r := range want {
		wantRevenues = append(wantRevenues, r)
	}
	slices.Sort(revenues)
	slices.Sort(wantRevenues)
	if !slices.Equal(revenues, wantRevenues) {
		t.Fatalf("daily_revenue revenues = %v, want %v", revenues, wantRevenues)
	}
}

// readmeGoBlocks returns the ```go blocks of the section of file under
// heading (up to the next heading of the same level).
func readmeGoBlocks(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil:
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, cur.String())
				cur = nil
				continue
			}
			cur.WriteString(line + "\n")
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "## "):
			return blocks
		case in && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s: no %q heading", file, heading)
	}
	return blocks
}

// embedImports are the packages a snippet may name, by package name.
var embedImports = map[string]string{
	"facade":        "github.com/lakewrite/lakewrite/facade",
	"ledger":        "github.com/lakewrite/lakewrite/ledger",
	"sink":          "github.com/lakewrite/lakewrite/sink",
	"writestrategy": "github.com/lakewrite/lakewrite/writestrategy",
	"cursor":        "github.com/lakewrite/lakewrite/cursor",
	"incremental":   "github.com/lakewrite/lakewrite/incremental",
	"pgx":           "github.com/jackc/pgx/v5",
	"time":          "time",
}

// embedProgram makes a program running each block as the body of a
// function of (ctx, pool, logger) returning an error: after the block, an
// err it declared is returned and any other value it declared must not be
// nil (a snippet that drops an error with _ leaves a nil value).
func embedProgram(blocks []string) (string, error) {
	imports := map[string]bool{}
	var funcs strings.Builder
	for i, block := range blocks {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "", "package p\nfunc f() {\n"+block+"\n}\n", parser.SkipObjectResolution)
		if err != nil {
			return "", fmt.Errorf("block %d does not parse as statements: %w", i+1, err)
		}
		var declared []string
		seen := map[string]bool{}
		body := f.Decls[0].(*ast.FuncDecl).Body
		for _, st := range body.List {
			as, ok := st.(*ast.AssignStmt)
			if !ok || as.Tok != token.DEFINE {
				continue
			}
			for _, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
					seen[id.Name] = true
					declared = append(declared, id.Name)
				}
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && embedImports[id.Name] != "" {
					imports[id.Name] = true
				}
			}
			return true
		})
		fmt.Fprintf(&funcs, "\nfunc snippet%d(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {\n", i+1)
		funcs.WriteString("// README.md snippet, as written:\n")
		funcs.WriteString(block)
		funcs.WriteString("// end of the snippet\n")
		for _, name := range declared {
			if name == "err" {
				funcs.WriteString("\tif err != nil {\n\t\treturn err\n\t}\n")
				continue
			}
			fmt.Fprintf(&funcs, "\tif isNil(%s) {\n\t\treturn fmt.Errorf(\"%s is nil\")\n\t}\n", name, name)
		}
		funcs.WriteString("\treturn nil\n}\n")
	}
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"log/slog\"\n\t\"os\"\n\t\"reflect\"\n\n\t\"github.com/jackc/pgx/v5/pgxpool\"\n")
	names := make([]string, 0, len(imports))
	for name := range imports {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "\t%q\n", embedImports[name])
	}
	b.WriteString(")\n")
	b.WriteString(`
func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for i, snippet := range []func(context.Context, *pgxpool.Pool, *slog.Logger) error{`)
	for i := range blocks {
		fmt.Fprintf(&b, "snippet%d, ", i+1)
	}
	b.WriteString(`} {
		if err := snippet(ctx, pool, logger); err != nil {
			fmt.Fprintf(os.Stderr, "README snippet %d: %v\n", i+1, err)
			pool.Close()
			os.Exit(1)
		}
	}
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.Func, reflect.Chan:
		return r.IsNil()
	}
	return false
}
`)
	b.WriteString(funcs.String())
	return b.String(), nil
}

// seedOrders registers the "orders" source dataset and fills it in the
// row store.
func seedOrders(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnsureDataset(ctx, "orders", "orders", nil); err != nil {
		t.Fatal(err)
	}
	_, err = l.WithTx(ctx, ledger.OpenParams{DatasetID: "orders", WriterID: "seed", Sink: sink.Postgres, WriteMode: facade.Replace},
		func(ctx context.Context, tx pgx.Tx, in *ledger.Intent) (ledger.Outcome, error) {
			n, cols, err := writestrategy.RowStoreInsert(ctx, tx, nil, "orders", in.ID, readmeOrders)
			return ledger.Outcome{RowCount: n, CommittedAt: time.Now(), Schema: cols.JSON()}, err
		})
	if err != nil {
		t.Fatal(err)
	}
}

func numbered(src string) string {
	var b strings.Builder
	for i, line := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
