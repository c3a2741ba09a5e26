package main

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// machineIdle returns the idle (idle + iowait) and total CPU ticks of the
// machine, all CPUs together, from /proc/stat (0, 0 where it is missing).
func machineIdle() (idle, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		if i == 8 || i == 9 { // guest time is already counted in user time
			continue
		}
		all += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return idle, all
}

// procCounters is what the bench reads of a server process.
type procCounters struct {
	cpu      time.Duration
	switches ctxSwitches
}

// serverProcs returns the CPU time and context switches of each client
// backend of the database when the server runs on this machine (nil
// otherwise): read from /proc/<pid>/ of the backends pg_stat_activity
// lists.
func (b *bench) serverProcs(ctx context.Context) map[int]procCounters {
	rows, err := b.env.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]procCounters{}
	for _, pid := range pids {
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmd), "postgres") {
			continue // not local, or gone
		}
		t, ok1 := pidCPU(int(pid))
		sw, ok2 := pidCtxSwitches(int(pid))
		if ok1 && ok2 {
			out[int(pid)] = procCounters{t, sw}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func describeMachine() machine {
	m := machine{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemTotal = kb << 10
				break
			}
		}
	}
	return m
}
