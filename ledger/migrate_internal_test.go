package ledger

import (
	"testing"
	"testing/fstest"
)

func TestLoadMigrationsRejectsGapsAndBadNames(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/001_a.sql": sql, "m/003_c.sql": sql},
		"duplicate": {"m/001_a.sql": sql, "m/001_b.sql": sql},
		"bad name":  {"m/001_a.sql": sql, "m/2_b.sql": sql},
		"no first":  {"m/002_b.sql": sql},
	} {
		if _, err := loadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"m/002_b.sql": sql, "m/001_a.sql": sql}, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "001_a.sql" {
		t.Fatalf("got %v, %v", ms, err)
	}
}
