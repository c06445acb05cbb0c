#!/usr/bin/env bash
# Benchmarks car-server's dashboard in Debian's headless Chromium (over the DevTools protocol):
# first contentful paint of `/` and of a search at 10,000 facts (cold and warm), a policy deny's
# way to 10 open live pages (Server-Sent Events), the daemon's memory with those pages open, and
# the embedded assets' size. See benches/dashboard.rs.
#
# Usage: scripts/bench-dashboard.sh [--facts N] [--rounds N]
# Results: bench-results/dashboard.md and bench-results/dashboard.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v chromium >/dev/null 2>&1; then
    echo "installing Debian's chromium" >&2
    apt-get install -y --no-install-recommends chromium >&2
fi

cargo build --release --bin car-server --bin car-gate
export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/release}
cargo bench --bench dashboard -- "$@"
