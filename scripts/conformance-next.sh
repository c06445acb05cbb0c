#!/usr/bin/env bash
# The MCP conformance suite's 0.2.0 alpha (the 2026-07-28 revision) in server mode, exactly the
# scenarios that revision requires (`--requirements 2026-07-28`), against car-server and against
# the fixture server built from its adapter (examples/conformance_server.rs). Prints each
# server's SUMMARY. The alpha and the draft it tests still move; the pinned 0.1.16 suite is the
# one the tests hold CAR to (tests/it/conformance.rs, tests/it/server.rs).
#
# Usage: scripts/conformance-next.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=0.2.0-alpha.12
suite=tools/conformance-next/node_modules/.bin/conformance
if [[ "$(node -p "require('./tools/conformance-next/node_modules/@modelcontextprotocol/conformance/package.json').version" 2>/dev/null || true)" != "$version" ]]; then
    npm install --prefix tools/conformance-next --save-exact --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/conformance@$version"
fi
[[ -x tools/node22/node_modules/.bin/node ]] || { echo "run scripts/test.sh first: it installs Node 22 into tools/node22" >&2; exit 1; }
cargo build --bin car-server --example conformance_server
home=$(mktemp -d)
trap 'kill "${car_pid:-}" "${fix_pid:-}" 2>/dev/null || true; rm -rf "$home"' EXIT
CAR_HOME=$home/car target/debug/car-server --mcp-bind 127.0.0.1:0 --port 0 2>"$home/car.log" &
car_pid=$!
target/debug/examples/conformance_server >"$home/fix.log" &
fix_pid=$!
for _ in $(seq 100); do grep -q "MCP at" "$home/car.log" && grep -q "server at" "$home/fix.log" && break; sleep 0.1; done
car_url=$(sed -n 's/^car-server: MCP at //p' "$home/car.log")
fix_url=$(sed -n 's/^conformance server at //p' "$home/fix.log")
for target in "car-server $car_url" "fixture-server $fix_url"; do
    set -- $target
    echo "==> $1 ($2): conformance $version --requirements 2026-07-28"
    PATH=$PWD/tools/node22/node_modules/.bin:$PATH "$suite" server --url "$2" --requirements 2026-07-28 2>&1 |
        sed -n '/=== SUMMARY ===/,$p' || true
done
