package facade_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
	"github.com/lakewrite/lakewrite/internal/restcatalog"
)

// restEnv is a facade writing through iceberg-go's REST client to a
// restcatalog server (OAuth2 client credentials, a catalog prefix).
type restEnv struct {
	pols *contract.Policies // the per-dataset schema policies the contract sets
	f    *facade.Facade
	srv  *restcatalog.Server
	cat  *rest.Catalog
	mem  *memory.CheckedAllocator
}

const (
	restClientID     = "lakewrite-writer"
	restClientSecret = "s3cret"
)

// newRESTEnv starts a REST catalog over a local warehouse (or over cfg's
// storage when cfg.Warehouse is set) and opens the facade on it.
func newRESTEnv(t *testing.T, cfg restcatalog.Config, opts ...rest.Option) *restEnv {
	t.Helper()
	if cfg.Warehouse == "" {
		cfg.Warehouse = "file://" + filepath.ToSlash(t.TempDir())
	}
	if cfg.Clients == nil {
		cfg.Clients = map[string]string{restClientID: restClientSecret}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wh1"
	}
	return newRESTEnvOn(t, restcatalog.Start(t, cfg), opts...)
}

// newRESTEnvOn opens a facade (a new client session) on a running server.
func newRESTEnvOn(t *testing.T, srv *restcatalog.Server, opts ...rest.Option) *restEnv {
	t.Helper()
	cat, err := facade.OpenRESTCatalog(context.Background(), "lake", srv.URL(),
		append([]rest.Option{rest.WithCredential(restClientID + ":" + restClientSecret)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	pols := &contract.Policies{}
	f, err := facade.New(cat, &facade.Config{Allocator: mem, RetryMinWait: time.Millisecond, RetryMaxWait: 20 * time.Millisecond, CommitRetries: 6,
		SchemaPolicyFor: pols.For})
	require.NoError(t, err)
	return &restEnv{f: f, srv: srv, cat: cat, mem: mem, pols: pols}
}

// tableName is the REST table name of a dataset.
func (e *restEnv) tableName(t *testing.T, datasetID string) string {
	ident, err := e.f.TableIdentifier(datasetID)
	require.NoError(t, err)
	return ident[len(ident)-1]
}

func restContractEnv(storage func(t *testing.T) restcatalog.Config) func(t *testing.T) *contract.Env {
	return func(t *testing.T) *contract.Env {
		var cfg restcatalog.Config
		if storage != nil {
			cfg = storage(t)
		}
		e := newRESTEnv(t, cfg)
		return &contract.Env{
			LH:       e.f,
			Mem:      e.mem,
			Policies: e.pols,
			FailCommits: func(id string, kind error, n int) {
				name := e.tableName(t, id)
				if n == 0 {
					e.srv.ClearFaults(restcatalog.OpCommitTable, name)
					return
				}
				status := http.StatusConflict
				if errors.Is(kind, facade.ErrCommitStateUnknown) {
					status = http.StatusInternalServerError // refused before applying
				}
				e.srv.Inject(restcatalog.Fault{Op: restcatalog.OpCommitTable, Table: name, Status: status, Times: n})
			},
		}
	}
}

// TestRESTContract runs the facade's contract over the REST catalog:
// iceberg-go's REST client against restcatalog (metadata files written by
// the server, commits validated server-side), data on a local warehouse.
func TestRESTContract(t *testing.T) { contract.Run(t, restContractEnv(nil)) }

// TestRESTS3Contract runs the contract over the production topology: the
// REST catalog with the warehouse in an S3-compatible bucket (gofakes3
// over HTTP, path-style, static keys). The server writes the metadata
// files to the bucket; the client gets the S3 settings from the catalog's
// table config, as a catalog service vends them.
func TestRESTS3Contract(t *testing.T) {
	contract.Run(t, restContractEnv(func(t *testing.T) restcatalog.Config {
		backend := s3mem.New()
		require.NoError(t, backend.CreateBucket("lake"))
		s3srv := httptest.NewServer(gofakes3.New(backend).Server())
		t.Cleanup(s3srv.Close)
		props := facade.S3Properties(facade.S3Config{Endpoint: s3srv.URL, Region: "us-east-1",
			AccessKeyID: "test-key", SecretAccessKey: "test-secret", PathStyle: true})
		return restcatalog.Config{Warehouse: "s3://lake/warehouse", IOProps: props, TableConfig: props}
	}))
}

// TestRESTS3ClientProps: the documented recipe when the catalog vends no
// storage settings: the client passes S3Properties with
// rest.WithAdditionalProps.
func TestRESTS3ClientProps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("lake"))
	s3srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3srv.Close)
	props := facade.S3Properties(facade.S3Config{Endpoint: s3srv.URL, Region: "us-east-1",
		AccessKeyID: "test-key", SecretAccessKey: "test-secret", PathStyle: true})
	e := newRESTEnv(t, restcatalog.Config{Warehouse: "s3://lake/wh", IOProps: props}, rest.WithAdditionalProps(props))
	bs := e.batches(t, 0, 300)
	res, err := e.write("s3p", facade.Replace, bs, "t1")
	require.NoError(t, err)
	for _, df := range res.DataFiles {
		require.True(t, strings.HasPrefix(df.Path, "s3://lake/wh/"), df.Path)
	}
	sum, err := e.f.Checksum(ctx, "s3p", 0)
	require.NoError(t, err)
	require.Equal(t, res.Checksum, sum)
	objs, err := backend.ListBucket("lake", &gofakes3.Prefix{HasPrefix: true, Prefix: "wh/"}, gofakes3.ListBucketPage{})
	require.NoError(t, err)
	var meta int
	for _, o := range objs.Contents {
		if strings.HasSuffix(o.Key, ".metadata.json") {
			meta++
		}
	}
	require.Positive(t, meta, "the server wrote the metadata files to the bucket")
}
