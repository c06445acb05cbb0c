#!/usr/bin/env bash
# Per-call cost of reaching a remote MCP server through a CAR connector, against mcp-remote
# (the usual stdio-to-HTTP proxy) and against calling the server directly. One server-everything
# over streamable HTTP; the official Python MCP SDK drives all three paths
# (benches/connectors/client.py), interleaved.
#
# Usage: scripts/bench-connectors.sh   (BENCH_CALLS=N, default 300 per path)
# Needs: node/npm (installs the pinned peers into tools/), python3 with `mcp` (scripts/test.sh).
# Results: bench-results/connectors.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
EVERYTHING=2026.8.31
MCP_REMOTE=0.15.1

cargo build --release --bin car --bin car-mcp
for pkg in "@modelcontextprotocol/server-everything@$EVERYTHING" "mcp-remote@$MCP_REMOTE"; do
  name=${pkg%@*}
  want=${pkg##*@}
  have=$(node -p "require('./tools/node_modules/$name/package.json').version" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error "$pkg"
  fi
done

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$port tools/node_modules/.bin/mcp-server-everything streamableHttp >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null && break
  sleep 0.1
done
url="http://127.0.0.1:$port/mcp"

export CAR_HOME=$work/home
mkdir -p "$work/project" && cd "$work/project"
"$root/target/release/car" connector add bench --url "$url" >/dev/null
"$root/target/release/car" connector enable bench echo >/dev/null
# mcp-remote keeps its state under HOME; give it a throwaway one.
export HOME=$work

mkdir -p "$root/bench-results"
python3 "$root/benches/connectors/client.py" "$url" "$root/target/release/car-mcp" \
  "$root/tools/node_modules/.bin/mcp-remote" bench | tee "$root/bench-results/connectors.json"
