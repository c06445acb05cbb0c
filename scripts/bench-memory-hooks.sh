#!/usr/bin/env bash
# Benchmarks the memory hooks (`car hook session-start`, `car hook prompt`) through the release
# binary: reminder precision/recall on the held-out prompts of benches/memory_hooks/cases.json
# against always-inject in the same run, briefing sizes, and latency against /bin/true
# (interleaved). See benches/memory_hooks.rs.
#
# Usage: scripts/bench-memory-hooks.sh [--distractors N] [--calls N]
# Results: bench-results/memory_hooks.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

cargo build --release --bin car
export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}
cargo bench --bench memory_hooks -- "$@"
echo "results: $root/bench-results/memory_hooks.json"
