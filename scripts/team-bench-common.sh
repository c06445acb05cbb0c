# shellcheck shell=bash
# Sourced, not run, by the team benchmarks (scripts/bench-team.sh, scripts/bench-team-ab.sh):
# a work directory and a temporary PostgreSQL (scripts/pg-temp.sh), both removed at exit with
# the processes listed in `pids`, and the helpers both use.
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
. scripts/pg-temp.sh
start_temp_pg
trap 'cleanup; stop_temp_pg' EXIT

# The memory entries still without a vector.
LACKS_VECTOR="SELECT count(*) FROM memory_nodes n WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.node_id = n.id)"

wait_url() { # LOG: the MCP URL car-server prints
    for _ in $(seq 200); do grep -q "MCP at" "$1" 2>/dev/null && break; sleep 0.05; done
    sed -n 's/^car-server: MCP at \([^ ]*\).*/\1/p' "$1"
}

team_unembedded() { # DATABASE_URL: entries of every project without a vector
    "$PG_BIN/psql" -At "$1" -c "$LACKS_VECTOR"
}
