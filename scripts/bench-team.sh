#!/usr/bin/env bash
# The team server on PostgreSQL against the one-person car-server on SQLite, in one run, with
# one client (examples/http_load.rs, plain HTTP POSTs, bearer token for the team):
#   1. writes: 10,000 memory_add_fact calls (distinct facts) from C concurrent clients, each
#      store in turn, ROUNDS rounds (new facts each round; the order of the stores alternates);
#      calls per second over the time they took; after each storm, the time until the server's
#      background embedder has embedded them all (it runs in the idle scheduling class; the next
#      storm starts once it is done);
#   2. reads: memory_query with 500 different several-word questions over all those facts,
#      C clients for S seconds, ROUNDS rounds alternating the two servers; p50/p99 and calls/s;
#   3. freshness across instances: a fact written through team instance A, polled for through
#      instance B until found (every ms), 200 times; p50/p99 in ms.
# PostgreSQL is a temporary cluster of Debian's packages (scripts/pg-temp.sh; fsync off unless
# PG_FSYNC=on; SQLite's daemon runs as shipped, WAL with synchronous=NORMAL).
#
# Usage: scripts/bench-team.sh [CLIENTS] [SECONDS] [ROUNDS]   (defaults 16 10 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clients=${1:-16}
seconds=${2:-10}
rounds=${3:-3}
cargo build --release --bin car --bin car-server --example http_load
target=${CARGO_TARGET_DIR:-$PWD/target}/release
. scripts/team-bench-common.sh

python3 - "$work" "$rounds" <<'PY'
import json, random, sys
random.seed(7)
work = sys.argv[1]
words = "payout ledger invoice deploy release migration schema cache token session webhook queue backup snapshot config secret certificate build artifact index search billing refund account tenant region cluster metrics alerts logs".split()
for r in range(1, int(sys.argv[2]) + 1):
    facts = [{"subject": f"service-{r}-{i}", "body": f"service-{r}-{i} {random.choice(words)} {random.choice(words)} nightly for team-{random.choice(words)}"} for i in range(10000)]
    json.dump(facts, open(f"{work}/facts-{r}.json", "w"))
questions = [{"query": f"which team owns the service that runs the {random.choice(words)} {random.choice(words)} job nightly, and who handles its {random.choice(words)}?"} for _ in range(500)]
json.dump(questions, open(f"{work}/questions.json", "w"))
PY

# The one-person daemon on SQLite.
CAR_HOME=$work/sqlite "$target/car-server" --mcp-bind 127.0.0.1:0 --port 0 2>"$work/sqlite.log" &
pids+=($!)
sqlite_url=$(wait_url "$work/sqlite.log")

# The team: a database, a project, a user; two instances on it.
db_url=${PG_ADMIN_URL%/*}/car_bench
psql_run() { "$PG_BIN/psql" -q "$PG_ADMIN_URL" -c "$1" >/dev/null; }
psql_run "CREATE DATABASE car_bench"
export CAR_DATABASE_URL=$db_url
"$target/car" team project add web >/dev/null
token=$("$target/car" --json team user add bench --grant web | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
for name in a b; do
    "$target/car-server" --mcp-bind 127.0.0.1:0 --database "$db_url" 2>"$work/team-$name.log" &
    pids+=($!)
done
team_a=$(wait_url "$work/team-a.log")/web
team_b=$(wait_url "$work/team-b.log")/web
echo "SQLite daemon: $sqlite_url; team instances: $team_a, $team_b" >&2

load() { # URL TOOL ARGS [extra env…]
    local url=$1 tool=$2 args=$3
    shift 3
    env "$@" "$target/examples/http_load" "$url" "$tool" "@$args" "$clients" "$seconds" raw
}

unembedded() { # sqlite|team: entries without a vector
    if [ "$1" = sqlite ]; then
        python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$work/sqlite/car.db" "$LACKS_VECTOR"
    else
        team_unembedded "$db_url"
    fi
}
wait_embedded() { # sqlite|team OUT: seconds until every entry has its vector
    local start=$(date +%s.%N)
    while [ "$(unembedded "$1")" != 0 ]; do sleep 0.2; done
    python3 -c "import sys; print('{\"embedded_after_s\": %.1f}' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)" | tee "$2"
}

echo "== writes: 10,000 memory_add_fact, $clients clients, $rounds rounds" >&2
write_sqlite() { # ROUND
    load "$sqlite_url" memory_add_fact "$work/facts-$1.json" HTTP_LOAD_COUNT=10000 | tee "$work/w-sqlite-$1.json"
    wait_embedded sqlite "$work/e-sqlite-$1.json"
}
write_team() { # ROUND
    load "$team_a" memory_add_fact "$work/facts-$1.json" HTTP_LOAD_COUNT=10000 HTTP_LOAD_TOKEN="$token" | tee "$work/w-team-$1.json"
    wait_embedded team "$work/e-team-$1.json"
}
for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then write_sqlite "$round"; write_team "$round"; else write_team "$round"; write_sqlite "$round"; fi
done

echo "== reads: memory_query, 500 questions, $clients clients × ${seconds}s, $rounds rounds" >&2
for round in $(seq "$rounds"); do
    load "$sqlite_url" memory_query "$work/questions.json" | tee "$work/r-sqlite-$round.json"
    load "$team_a" memory_query "$work/questions.json" HTTP_LOAD_TOKEN="$token" | tee "$work/r-team-$round.json"
done

echo "== freshness: written through A, found through B" >&2
python3 - "$team_a" "$team_b" "$token" >"$work/fresh.json" <<'PY'
import http.client, json, sys, time, urllib.parse
a, b, token = sys.argv[1:4]
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port), u.path
def call(c, path, tool, args):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args, "_meta": META}})
    c.request("POST", path, body, {"content-type": "application/json", "accept": "application/json, text/event-stream",
              "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool, "authorization": f"Bearer {token}"})
    return c.getresponse().read().decode()
ca, pa = conn(a)
cb, pb = conn(b)
lags = []
for i in range(200):
    marker = f"fresh{i}x{int(time.time()*1000)}"
    call(ca, pa, "memory_add_fact", {"subject": f"freshness probe {marker}", "body": f"probe {marker} was written through instance a"})
    written = time.perf_counter()
    while marker not in call(cb, pb, "memory_query", {"query": f"what was probe {marker}?"}):
        time.sleep(0.001)
    lags.append((time.perf_counter() - written) * 1000)
lags.sort()
print(json.dumps({"samples": len(lags), "p50_ms": lags[len(lags)//2], "p99_ms": lags[int(len(lags)*0.99)], "max_ms": lags[-1]}))
PY
cat "$work/fresh.json"

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{work}/{name}.json"))
ws = [load(f"w-sqlite-{r}") for r in range(1, rounds + 1)]
wt = [load(f"w-team-{r}") for r in range(1, rounds + 1)]
rs = [load(f"r-sqlite-{r}") for r in range(1, rounds + 1)]
rt = [load(f"r-team-{r}") for r in range(1, rounds + 1)]
med = lambda runs, key: statistics.median(r[key] for r in runs)
f = load("fresh")
es = [load(f"e-sqlite-{r}") for r in range(1, rounds + 1)]
et = [load(f"e-team-{r}") for r in range(1, rounds + 1)]
print()
print("| measure | SQLite daemon | team server (PostgreSQL) | ratio team/SQLite |")
print("|---|---|---|---|")
print(f"| writes/s (10k memory_add_fact, {ws[0]['clients']} clients, median of {rounds}) | {med(ws,'calls_per_second'):.0f} | {med(wt,'calls_per_second'):.0f} | {med(wt,'calls_per_second')/med(ws,'calls_per_second'):.2f}× |")
each = lambda runs: " / ".join("%.0f" % r["calls_per_second"] for r in runs)
print(f"| writes/s, each round | {each(ws)} | {each(wt)} | |")
print(f"| then all embedded after (s, median) | {med(es,'embedded_after_s'):.1f} | {med(et,'embedded_after_s'):.1f} | |")
print(f"| memory_query p50 ms (median of {rounds}) | {med(rs,'p50_ms'):.2f} | {med(rt,'p50_ms'):.2f} | {med(rt,'p50_ms')/med(rs,'p50_ms'):.2f}× |")
print(f"| memory_query p99 ms | {med(rs,'p99_ms'):.2f} | {med(rt,'p99_ms'):.2f} | {med(rt,'p99_ms')/med(rs,'p99_ms'):.2f}× |")
print(f"| memory_query calls/s | {med(rs,'calls_per_second'):.0f} | {med(rt,'calls_per_second'):.0f} | {med(rt,'calls_per_second')/med(rs,'calls_per_second'):.2f}× |")
print(f"| errors (writes, reads) | {sum(w['errors'] for w in ws)}, {sum(r['errors'] for r in rs)} | {sum(w['errors'] for w in wt)}, {sum(r['errors'] for r in rt)} | |")
print(f"| cross-instance freshness p50 / p99 / max ms ({f['samples']} writes) | — | {f['p50_ms']:.1f} / {f['p99_ms']:.1f} / {f['max_ms']:.1f} | |")
PY
