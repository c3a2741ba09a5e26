#!/usr/bin/env bash
# compare-small.sh — small-write latency of two builds, alternating.
#
#   examples/bench/compare-small.sh [OLD [NEW]]
#
# Builds examples/bench at OLD (default 760cb30, the library before the
# small-write work) and NEW (default HEAD) and runs their small-write mode
# in turns: ROUNDS rounds (default 4) of, for each row count in ROWS
# (default "1 1000"), the old build then the new one, WRITES writes per arm
# each (default 60). Each run starts its own throwaway Postgres cluster from
# the system binaries (or uses DATABASE_URL; then each build gets its own
# database, created if missing) and writes its warehouse under WAREHOUSE
# (default: a directory next to the clone, removed at the end).
#
# Builds older than the small-write mode (it arrived after 760cb30) get the
# NEW build's small.go, ported to their API: no Observer or statement
# tracer (phases and statement counts are then not printed, only the p50
# and p90 of each arm) and the writer-flag names of that time.
#
# A row with 1 row per write is the fixed cost of a write; the p50 of each
# arm is printed per run, then the median of the runs per build.
set -euo pipefail

OLD=${1:-760cb30}
NEW=${2:-HEAD}
ROUNDS=${ROUNDS:-4}
WRITES=${WRITES:-60}
ROWS=${ROWS:-"1 1000"}

repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d "${repo}/../lakewrite-compare.XXXXXX")
trap 'git -C "$repo" worktree remove --force "$work/old" >/dev/null 2>&1 || true;
      git -C "$repo" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
WAREHOUSE=${WAREHOUSE:-$work/warehouse}

build() { # name commit
	local dir=$work/$1
	git -C "$repo" worktree add --detach "$dir" "$2" >/dev/null 2>&1
	if [ ! -f "$dir/examples/bench/small.go" ]; then
		port "$dir"
	fi
	(cd "$dir" && go build -o "$work/bench_$1" ./examples/bench)
}

port() { # dir: give an older build the small-write mode
	local dir=$1 f=$1/examples/bench/small.go
	cp "$repo/examples/bench/small.go" "$f"
	perl -0pi -e '
		s/func \(p \*phaseTimes\) PhaseStart.*?\n}\n\nfunc \(p \*phaseTimes\) PhaseEnd.*?\n}\n\n//s;
		s/, Tracer: obs\}\)/})/; s/, Observer: obs\}\)/})/;
		s/sink\.Postgres/sink.ModePG/g; s/sink\.Iceberg\b/sink.ModeIcebergNative/g;
		s/\t\t\tif p == string\(writestrategy\.PhaseWrite\) \{\n\t\t\t\tcontinue\n\t\t\t\}\n//;
	' "$f"
	perl -0pi -e '
		s/(\tflag\.Parse\(\)\n)/\tvar small smallConfig\n\tflag.IntVar(&small.Writes, "small", 0, "")\n\tflag.IntVar(&small.Rows, "small-rows", 1000, "")\n$1/;
		s/(\tif hist\.Writes > 0 \{\n)/\tif small.Writes > 0 {\n\t\tsmall.DatabaseURL, small.Warehouse, small.Log = cfg.DatabaseURL, cfg.Warehouse, os.Stderr\n\t\tr, err := runSmall(ctx, small)\n\t\treturn output(r, err, asJSON, func() { printSmall(os.Stdout, r, false) })\n\t}\n$1/;
	' "$dir/examples/bench/main.go"
}

build old "$OLD"
build new "$NEW"

url() { # build -> database URL for it (empty: throwaway cluster per run)
	[ -z "${DATABASE_URL:-}" ] && return 0
	psql "$DATABASE_URL" -qAtc "CREATE DATABASE lw_compare_$1" >/dev/null 2>&1 || true
	python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/lw_compare_"+sys.argv[2])))' "$DATABASE_URL" "$1"
}

results=$work/results
: >"$results"
for r in $(seq 1 "$ROUNDS"); do
	for rows in $ROWS; do
		for b in old new; do
			mkdir -p "$WAREHOUSE/$b"
			line=$(DATABASE_URL=$(url $b) "$work/bench_$b" -small "$WRITES" -small-rows "$rows" \
				-warehouse "$WAREHOUSE/$b" 2>/dev/null | awk '($1=="postgres"||$1=="iceberg") && $2 ~ /^[0-9]/{printf "%s=%s ", $1, $2}')
			echo "round=$r rows=$rows build=$b $line" | tee -a "$results"
		done
	done
done

echo
echo "median p50 ms over $ROUNDS runs ($WRITES writes per arm per run)"
printf '%-6s %-6s %10s %10s\n' rows build postgres iceberg
for rows in $ROWS; do
	for b in old new; do
		grep " rows=$rows build=$b " "$results" | python3 -c '
import sys, statistics
pg, ice = [], []
for line in sys.stdin:
    kv = dict(f.split("=") for f in line.split())
    pg.append(float(kv["postgres"])); ice.append(float(kv["iceberg"]))
print("%-6s %-6s %10.2f %10.2f" % (sys.argv[1], sys.argv[2], statistics.median(pg), statistics.median(ice)))
' "$rows" "$b"
	done
done
