#!/usr/bin/env bash
# Two builds of the team server against each other, interleaved, on one PostgreSQL: what a change
# did to team writes, with the run-to-run drift of a shared machine cancelled out.
#
#   scripts/bench-team-ab.sh OLD_RELEASE_DIR NEW_RELEASE_DIR
#
# Each directory holds a release build's `car` and `car-server` (build an older commit with
# `git worktree add /tmp/old REV && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo
# build --release --bin car --bin car-server)`, then pass /tmp/old-target/release). Both
# servers run at once, each on a database of its own in one PostgreSQL, and take turns: ROUNDS
# rounds (default 3) of COUNT (10,000) distinct memory_add_fact calls from CLIENTS (16) clients,
# each round waiting until the server's background embedder has embedded everything. With
# DELAY=0.001 the servers reach PostgreSQL through a proxy that holds every packet 1 ms each way
# (a database across a network; the proxy is Python, so it limits throughput too: compare
# latencies with CLIENTS=1). Prints writes/s, p50 and car-server's CPU (clock ticks) per round,
# then both builds' medians and in how many rounds the new one was faster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
old=${1:?usage: scripts/bench-team-ab.sh OLD_RELEASE_DIR NEW_RELEASE_DIR}
new=${2:?usage: scripts/bench-team-ab.sh OLD_RELEASE_DIR NEW_RELEASE_DIR}
rounds=${ROUNDS:-3}
count=${COUNT:-10000}
clients=${CLIENTS:-16}
cargo build --release --example http_load
load_bin=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/http_load
. scripts/team-bench-common.sh

python3 - "$work" "$rounds" "$count" <<'PY'
import json, random, sys
random.seed(7)
work, rounds, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
words = "payout ledger invoice deploy release migration schema cache token session webhook queue backup snapshot config secret certificate build artifact index search billing refund account tenant region cluster metrics alerts logs".split()
for r in range(rounds):
    for side in ("old", "new"):
        facts = [{"subject": f"service-{side}-{r}-{i}", "body": f"service-{side}-{r}-{i} {random.choice(words)} {random.choice(words)} nightly for team-{random.choice(words)}"} for i in range(count)]
        json.dump(facts, open(f"{work}/facts-{side}-{r}.json", "w"))
PY

# Each build has a database of its own in the one cluster, so that a build with newer
# migrations leaves the other's alone.
declare -A pid url db served token
proxy_port=
if [ -n "${DELAY:-}" ]; then
    pg_port=${PG_ADMIN_URL##*:}
    pg_port=${pg_port%%/*}
    proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 - "$proxy_port" "$pg_port" "$DELAY" <<'PY' &
import asyncio, socket, sys
port, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
async def pipe(reader, writer):
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            loop.call_later(delay, writer.write, data)  # each chunk held, none queued behind another
    finally:
        await asyncio.sleep(delay)
        writer.close()
async def handle(r, w):
    tr, tw = await asyncio.open_connection("127.0.0.1", target)
    for s in (w, tw):
        s.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await asyncio.gather(pipe(r, tw), pipe(tr, w), return_exceptions=True)
async def main():
    async with await asyncio.start_server(handle, "127.0.0.1", port) as server:
        await server.serve_forever()
asyncio.run(main())
PY
    pids+=($!)
    sleep 0.5
    echo "PostgreSQL through a proxy holding packets ${DELAY}s each way" >&2
fi
for side in old new; do
    dir=$old
    [ "$side" = new ] && dir=$new
    "$PG_BIN/psql" -q "$PG_ADMIN_URL" -c "CREATE DATABASE car_bench_$side"
    db[$side]=${PG_ADMIN_URL%/*}/car_bench_$side
    served[$side]=${db[$side]}
    [ -n "$proxy_port" ] && served[$side]=${db[$side]/:$pg_port\//:$proxy_port/}
    CAR_DATABASE_URL=${db[$side]} "$dir/car" team project add "$side" >/dev/null
    token[$side]=$(CAR_DATABASE_URL=${db[$side]} "$dir/car" --json team user add bench --grant "$side" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
    "$dir/car-server" --mcp-bind 127.0.0.1:0 --database "${served[$side]}" 2>"$work/$side.log" &
    pid[$side]=$!
    pids+=($!)
    url[$side]=$(wait_url "$work/$side.log")/$side
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq 0 $((rounds - 1))); do
    sides=(old new)
    [ $((r % 2)) = 1 ] && sides=(new old)
    for side in "${sides[@]}"; do
        before=$(cpu "${pid[$side]}")
        out=$(HTTP_LOAD_COUNT=$count HTTP_LOAD_TOKEN="${token[$side]}" "$load_bin" "${url[$side]}" memory_add_fact "@$work/facts-$side-$r.json" "$clients" 10 raw)
        after=$(cpu "${pid[$side]}")
        echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%s round %s: %.0f writes/s, p50 %.2f ms, errors %d, car-server CPU %s ticks" % (sys.argv[1], sys.argv[2], d["calls_per_second"], d["p50_ms"], d["errors"], sys.argv[3]))' "$side" "$r" "$((after - before))" | tee -a "$work/rounds.txt"
        while [ "$(team_unembedded "${db[$side]}")" != 0 ]; do sleep 0.2; done
    done
done
python3 - "$work/rounds.txt" <<'PY'
import re, statistics, sys
rates = {"old": [], "new": []}
for line in open(sys.argv[1]):
    m = re.match(r"(old|new) round \d+: (\d+) writes/s", line)
    if m:
        rates[m.group(1)].append(int(m.group(2)))
old, new = statistics.median(rates["old"]), statistics.median(rates["new"])
wins = sum(n > o for o, n in zip(rates["old"], rates["new"]))
print(f"medians: old {old:.0f}, new {new:.0f} writes/s ({new / old:.2f}x); new faster in {wins} of {len(rates['new'])} rounds")
PY
