#!/usr/bin/env bash
# Benchmarks CAR's task tracker on a 100,000-task graph with 200,000 dependencies: the ready
# queue in-process, task_manager over MCP (in-process command) against a `car` process per call,
# and claims. See benches/tasks.rs.
#
# Usage: scripts/bench-tasks.sh   (BENCH_TASKS, BENCH_DEPS_PER_TASK, BENCH_CALLS override the
# sizes). Results: bench-results/tasks.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

cargo build --release --bins
export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}
cargo bench --bench tasks
echo "results: $root/bench-results/tasks.json"
