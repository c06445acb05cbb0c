#!/usr/bin/env bash
# Benchmarks car-mcp against the reference MCP memory server (@modelcontextprotocol/server-memory)
# with one stdio JSON-RPC client: spawn → initialize, memory_query vs search_nodes at 10k and 100k
# facts, and memory_add_fact throughput with 1 and 4 writer processes. See benches/mcp.rs.
#
# Usage: scripts/bench.sh [--quick] [--sizes 10000,100000] [--queries N] [--spawns N] [--writes N]
# The same settings can come from BENCH_QUICK=1, BENCH_SIZES, BENCH_QUERIES, BENCH_SPAWNS and
# BENCH_WRITES. PEER_CMD=none skips the peer. Results: bench-results/mcp.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

peer_version=${PEER_VERSION:-2026.8.31}
peer_dir=$root/tools/node_modules/@modelcontextprotocol/server-memory

installed=$(node -p "require('$peer_dir/package.json').version" 2>/dev/null || true)
if [[ $installed != "$peer_version" ]]; then
    echo "installing @modelcontextprotocol/server-memory@$peer_version into tools/" >&2
    npm install --prefix "$root/tools" --save-exact --no-audit --no-fund \
        "@modelcontextprotocol/server-memory@$peer_version" >&2
fi

cargo build --release --bins

export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}
export PEER_CMD=${PEER_CMD:-node $peer_dir/dist/index.js}
export PEER_VERSION=$peer_version

cargo bench --bench mcp -- "$@"
echo "results: $root/bench-results/mcp.json"
