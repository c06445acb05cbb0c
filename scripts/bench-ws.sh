#!/usr/bin/env bash
# Runs a proposal of N independent actions with D ms callbacks through car-server's WebSocket
# protocol (examples/ws_client.rs) against a fresh daemon in a temporary CAR_HOME, and reports
# the wall time against the critical path (levels run concurrently, so it should be near D ms,
# not N × D).
#
# Usage: scripts/bench-ws.sh [ACTIONS] [DELAY_MS] [RUNS]   (defaults 100 10 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
actions=${1:-100}
delay=${2:-10}
runs=${3:-5}
cargo build --release --bin car-server --example ws_client
target=${CARGO_TARGET_DIR:-target}/release
home=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$home"' EXIT
CAR_HOME=$home/car "$target/car-server" --mcp-bind 127.0.0.1:0 --port 0 2>"$home/log" &
pid=$!
for _ in $(seq 100); do grep -q "WebSocket at" "$home/log" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^car-server: WebSocket at //p' "$home/log")
token=$(cat "$home/car/daemon/token")
for _ in $(seq "$runs"); do
    "$target/examples/ws_client" "$url" "$token" "$actions" "$delay"
done
