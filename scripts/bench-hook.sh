#!/usr/bin/env bash
# Benchmarks car-gate (`car policy-check-hook`) against an equivalent Python hook (benches/hook/hook.py)
# with the same 20 rules (benches/hook/policies/): one process per call, interleaved, with
# /bin/true as the floor. See benches/hook.rs.
#
# Usage: scripts/bench-hook.sh [--calls N]   (or BENCH_HOOK_CALLS=N; default 300 per hook)
# PYTHON picks the interpreter (default: the one `python3` runs; it needs tomllib, Python ≥ 3.11).
# Results: bench-results/hook.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

cargo build --release --bin car --bin car-gate

export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}
# The interpreter itself, not a version manager's shim (a pyenv shim is a bash script that
# costs more than the hook).
export PYTHON=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}

cargo bench --bench hook -- "$@"
echo "results: $root/bench-results/hook.json"
