#!/usr/bin/env bash
# Measures task-master-ai's ready queue (next_task) and claims (set_task_status → in-progress)
# through its MCP server, on the same 100,000-task graph as benches/tasks.rs (the driver's
# --generate ports graph() byte for byte). See scripts/taskmaster-bench.mjs.
#
# Usage: scripts/bench-taskmaster.sh [--tasks N] [--deps N] [--calls N] [--timeout-s S] [--out FILE]
# The same settings can come from BENCH_TASKS (100000), BENCH_DEPS_PER_TASK (2), BENCH_CALLS (50),
# BENCH_TIMEOUT_S (120 per call) and BENCH_OUT. TASKMASTER_VERSION overrides the pinned version,
# TASKMASTER_CMD the server command line. Results: bench-results/taskmaster.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

tasks=${BENCH_TASKS:-100000}
deps=${BENCH_DEPS_PER_TASK:-2}
calls=${BENCH_CALLS:-50}
timeout_s=${BENCH_TIMEOUT_S:-120}
out=${BENCH_OUT:-$root/bench-results/taskmaster.json}
while [[ $# -gt 0 ]]; do
    case $1 in
        --tasks) tasks=$2; shift 2 ;;
        --deps) deps=$2; shift 2 ;;
        --calls) calls=$2; shift 2 ;;
        --timeout-s) timeout_s=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--tasks N] [--deps N] [--calls N] [--timeout-s S] [--out FILE]" >&2; exit 2 ;;
    esac
done

# The package's engines field says node >= 20 (a few Google SDK dependencies want 22, but the
# MCP server and its non-AI tools run on 20).
peer_version=${TASKMASTER_VERSION:-0.43.1}
peer_dir=$root/tools/taskmaster/node_modules/task-master-ai

installed=$(node -p "require('$peer_dir/package.json').version" 2>/dev/null || true)
if [[ $installed != "$peer_version" ]]; then
    echo "installing task-master-ai@$peer_version into tools/taskmaster/ (its own prefix: it depends on an older Claude Code)" >&2
    npm install --prefix "$root/tools/taskmaster" --save-exact --no-audit --no-fund \
        "task-master-ai@$peer_version" >&2
fi

server=${TASKMASTER_CMD:-node $peer_dir/dist/mcp-server.js}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "generating $tasks tasks with ~$((tasks * deps)) dependencies" >&2
node "$root/scripts/taskmaster-bench.mjs" --generate "$tasks" --deps "$deps" >"$scratch/graph.jsonl"

node "$root/scripts/taskmaster-bench.mjs" "$scratch/graph.jsonl" --calls "$calls" \
    --timeout-s "$timeout_s" --server "$server" >"$scratch/result.json"

mkdir -p "$(dirname "$out")"
mv "$scratch/result.json" "$out"
cat "$out"
echo "results: $out" >&2
