#!/usr/bin/env bash
# Load over streamable HTTP MCP, same run, same client (examples/http_load.rs): C concurrent
# sessions for S seconds against car-server (memory_query with 500 different several-word
# questions, 10k facts) and
# against @modelcontextprotocol/server-everything (its echo tool) and a car-server with nothing
# to search (the transport's own cost), each with rmcp's client and with plain HTTP POSTs, then
# an idle car-server's RSS and CPU over a minute (IDLE=0 skips that).
#
# Usage: scripts/bench-http.sh [CLIENTS] [SECONDS]   (defaults 16 10)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
clients=${1:-16}
seconds=${2:-10}
cargo build --release --bin car --bin car-server --example http_load
target=${CARGO_TARGET_DIR:-target}/release
home=$(mktemp -d)
trap 'kill "${car_pid:-}" "${peer_pid:-}" 2>/dev/null || true; rm -rf "$home"' EXIT
export CAR_HOME=$home/car
python3 - "$home/notes.json" <<'PY'
import json, random, sys
random.seed(7)
words = "payout ledger invoice deploy release migration schema cache token session webhook queue backup snapshot config secret certificate build artifact index search billing refund account tenant region cluster metrics alerts logs".split()
notes = [{"subject": f"service-{i}", "body": f"service-{i} {random.choice(words)} {random.choice(words)} nightly for team-{random.choice(words)}", "kind": "fact"} for i in range(10000)]
json.dump({"notes": notes}, open(sys.argv[1], "w"))
# 500 different questions of several words, as agents ask them (no two clients repeat in step).
questions = [{"query": f"which team owns the service that runs the {random.choice(words)} {random.choice(words)} job nightly, and who handles its {random.choice(words)}?"} for _ in range(500)]
json.dump(questions, open(sys.argv[1].replace("notes.json", "questions.json"), "w"))
PY
"$target/car" memory import "$home/notes.json" >/dev/null
"$target/car-server" --mcp-bind 127.0.0.1:0 --port 0 2>"$home/log" &
car_pid=$!
for _ in $(seq 100); do grep -q "MCP at" "$home/log" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^car-server: MCP at //p' "$home/log")
echo "car-server: $url (10k facts)" >&2
# An empty home: the same call with nothing to search, i.e. what transport and dispatch cost.
CAR_HOME=$home/empty "$target/car-server" --mcp-bind 127.0.0.1:0 --port 0 2>"$home/empty.log" &
empty_pid=$!
for _ in $(seq 100); do grep -q "MCP at" "$home/empty.log" 2>/dev/null && break; sleep 0.05; done
empty_url=$(sed -n 's/^car-server: MCP at //p' "$home/empty.log")
peer=$root/tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js
peer_url=
if [[ -f $peer ]]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    PORT=$port node "$peer" streamableHttp >"$home/peer.log" 2>&1 &
    peer_pid=$!
    for _ in $(seq 100); do grep -q "listening" "$home/peer.log" 2>/dev/null && break; sleep 0.1; done
    peer_url=http://127.0.0.1:$port/mcp
fi
# Interleaved, each with rmcp's MCP client and with plain HTTP POSTs.
for client in rmcp raw; do
    "$target/examples/http_load" "$url" memory_query "@$home/questions.json" "$clients" "$seconds" "$client"
    [[ -n $peer_url ]] && "$target/examples/http_load" "$peer_url" echo '{"message": "hi"}' "$clients" "$seconds" "$client"
    "$target/examples/http_load" "$empty_url" memory_query "@$home/questions.json" "$clients" "$seconds" "$client"
done
kill "$empty_pid" 2>/dev/null || true
if [[ ${IDLE:-1} != 0 ]]; then
    ticks() { awk '{print $14 + $15}' "/proc/$car_pid/stat"; }
    before=$(ticks); sleep 60; after=$(ticks)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$car_pid/status")
    cpu=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
    echo "{\"idle_seconds\": 60, \"cpu_seconds\": $cpu, \"rss_kib\": $rss}"
fi
