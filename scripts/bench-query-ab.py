#!/usr/bin/env python3
"""Did a change make memory_query slower? Two builds' car-mcp on one CAR home, call by call.

Both servers answer the same queries, interleaved (the order flips every query and round), over
stdio JSON-RPC; prints each one's p50 over all queries and over questions of five words or more,
and the ratio. Make the home once with the newer build, e.g.

    BENCH_KEEP=1 BENCH_SIZES=100000 scripts/bench.sh     # prints "kept the generated data in DIR"
    scripts/bench-query-ab.py DIR/size-100000 OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]

where each BIN_DIR holds that build's `car-mcp` (or a link named car-mcp to its `car`). The
queries are the bench's (DIR/size-N/queries.json) and benches/paraphrase/'s 72 questions.
Standard library only.
"""
import json, os, statistics, subprocess, sys, time
if len(sys.argv) < 4:
    sys.exit(__doc__)
size_dir, old_bin, new_bin = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
home, project = os.path.join(size_dir, "car-home"), os.path.join(size_dir, "project")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def start(bin_dir):
    env = dict(os.environ, CAR_HOME=home, HOME=os.path.dirname(home))
    p = subprocess.Popen([os.path.join(bin_dir, "car-mcp")], cwd=project, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    p.n = 0
    def rpc(method, params):
        p.n += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": p.n, "method": method, "params": params}) + "\n"); p.stdin.flush()
        while True:
            msg = json.loads(p.stdout.readline())
            if msg.get("id") == p.n:
                return msg
    p.rpc = rpc
    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ab", "version": "0"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); p.stdin.flush()
    return p

qs = json.load(open(os.path.join(size_dir, "queries.json")))
para = json.load(open(os.path.join(root, "benches", "paraphrase", "cases.json")))
qs += [c["question"] for c in para]
servers = {"old": start(old_bin), "new": start(new_bin)}
for name, s in servers.items():  # first call waits for the index
    t = time.perf_counter(); s.rpc("tools/call", {"name": "memory_query", "arguments": {"query": "warm up the index", "k": 5}})
    print(name, "first call", round((time.perf_counter() - t) * 1000), "ms")
times = {k: [] for k in servers}
for r in range(rounds):
    order = list(servers) if r % 2 == 0 else list(reversed(servers))
    for q in qs:
        for name in order:
            t = time.perf_counter()
            reply = servers[name].rpc("tools/call", {"name": "memory_query", "arguments": {"query": q, "k": 5}})
            times[name].append((time.perf_counter() - t) * 1000)
            assert "result" in reply and not reply["result"].get("isError"), reply
        order.reverse()
long = [i for i, q in enumerate(qs * rounds) if len(q.split()) >= 5]
for name, ts in times.items():
    ql = sorted(ts[i] for i in long)
    print(f"{name}: questions of 5+ words ({len(ql)} calls) p50 {statistics.median(ql):.3f} ms")
for name, ts in times.items():
    ts.sort()
    print(f"{name}: {len(ts)} calls, p50 {statistics.median(ts):.3f} ms, p90 {ts[int(len(ts)*0.9)]:.3f} ms, mean {statistics.mean(ts):.3f} ms")
print("new/old p50", round(statistics.median(times["new"]) / statistics.median(times["old"]), 3))
