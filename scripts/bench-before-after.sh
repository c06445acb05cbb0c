#!/usr/bin/env bash
# Did a change make CAR slower? Builds the release `car` and `car-mcp` of REV (default HEAD~1)
# in a worktree beside this tree's, then, in one run with the two interleaved call by call:
#   - `car --json task list --status ready` as a process per call (10,000 tasks);
#   - `task_manager {"action":"list","args":["--status","ready"]}` over one `car-mcp` each;
#   - with --build: the debug build time of a one-line change in src/memory/text.rs
#     (incremental, after a full build), for each tree.
# Prints medians and ratios (after / before); results in bench-results/before-after.json.
#
# Usage: scripts/bench-before-after.sh [REV] [--build] [--calls N] [--tasks N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
rev=HEAD~1
build=0
calls=200
tasks=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=1 ;;
    --calls) calls=$2; shift ;;
    --tasks) tasks=$2; shift ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) rev=$1 ;;
  esac
  shift
done

before=$root/target/before-after/tree
if [ ! -d "$before" ]; then
  git worktree add --detach "$before" "$rev" >/dev/null
else
  git -C "$before" checkout --quiet --detach "$rev"
fi
echo "==> before: $(git -C "$before" log --oneline -1)"
echo "==> after:  $(git log --oneline -1) (+ the work tree)"

(cd "$before" && CARGO_TARGET_DIR=$root/target/before-after/target cargo build --release --bin car --bin car-mcp)
cargo build --release --bin car --bin car-mcp

edit_time() { # tree target-dir: seconds for a debug build after a one-line change in src/memory
  local tree=$1 target=$2
  (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --bin car >/dev/null 2>&1)
  local file=$tree/src/memory/text.rs
  cp "$file" "$file.orig"
  printf '\n// a one-line change\n' >>"$file"
  local start end
  start=$(date +%s.%N)
  (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --bin car >/dev/null 2>&1)
  end=$(date +%s.%N)
  mv "$file.orig" "$file"
  (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --bin car >/dev/null 2>&1)
  echo "$end - $start" | bc
}

build_before=null
build_after=null
if [ "$build" = 1 ]; then
  echo "==> incremental debug builds (a one-line change in src/memory/text.rs)"
  build_before=$(edit_time "$before" "$root/target/before-after/target")
  build_after=$(edit_time "$root" "$root/target")
fi

mkdir -p bench-results
python3 - "$root/target/before-after/target/release" "$root/target/release" "$calls" "$tasks" \
  "$build_before" "$build_after" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time

before_bin, after_bin, calls, tasks, build_before, build_after = sys.argv[1:7]
calls, tasks = int(calls), int(tasks)

def place(bindir):
    tmp = tempfile.mkdtemp(prefix="car-ba-")
    home, project = os.path.join(tmp, "home"), os.path.join(tmp, "project")
    os.makedirs(os.path.join(project, ".car"))
    env = {"PATH": os.environ["PATH"], "HOME": tmp, "CAR_HOME": home, "CAR_AGENT_ID": "bench"}
    lines = "".join(json.dumps({"ref": f"t{i}", "title": f"Move service {i} to the new pipeline",
                                "priority": f"P{i % 4}",
                                "depends_on": [f"t{i - 1}"] if i % 3 == 0 and i else []}) + "\n"
                    for i in range(tasks))
    path = os.path.join(tmp, "tasks.jsonl")
    open(path, "w").write(lines)
    subprocess.run([os.path.join(bindir, "car"), "task", "import", path], env=env, cwd=project,
                   check=True, stdout=subprocess.DEVNULL)
    return {"bin": bindir, "env": env, "project": project}

def cli_call(p):
    start = time.perf_counter()
    out = subprocess.run([os.path.join(p["bin"], "car"), "--json", "task", "list", "--status", "ready"],
                         env=p["env"], cwd=p["project"], check=True, stdout=subprocess.PIPE).stdout
    elapsed = time.perf_counter() - start
    assert json.loads(out)["success"]
    return elapsed * 1000

class Mcp:
    def __init__(self, p):
        self.proc = subprocess.Popen([os.path.join(p["bin"], "car-mcp")], env=p["env"], cwd=p["project"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.notify("notifications/initialized")

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def notify(self, method):
        self.send({"jsonrpc": "2.0", "method": method})

    def request(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.id:
                return message

    def call(self):
        start = time.perf_counter()
        answer = self.request("tools/call", {"name": "task_manager",
                                             "arguments": {"action": "list", "args": ["--status", "ready"]}})
        elapsed = time.perf_counter() - start
        assert not answer["result"]["isError"], answer
        return elapsed * 1000

before, after = place(before_bin), place(after_bin)
samples = {"cli_before": [], "cli_after": [], "mcp_before": [], "mcp_after": []}
for i in range(min(calls, 60)):  # a process per call is slow: fewer of them
    for name, p in (("before", before), ("after", after))[:: 1 if i % 2 == 0 else -1]:
        samples[f"cli_{name}"].append(cli_call(p))
mcps = {"before": Mcp(before), "after": Mcp(after)}
for name in mcps:  # warm: the first call opens the index
    mcps[name].call()
for i in range(calls):
    for name in (("before", "after") if i % 2 == 0 else ("after", "before")):
        samples[f"mcp_{name}"].append(mcps[name].call())
for m in mcps.values():
    m.proc.stdin.close()
    m.proc.wait()

def p(values, q):
    values = sorted(values)
    return values[round((len(values) - 1) * q)]

result = {"tasks": tasks, "calls": calls}
for what in ("cli", "mcp"):
    b, a = samples[f"{what}_before"], samples[f"{what}_after"]
    result[what] = {"before_p50_ms": round(p(b, .5), 3), "after_p50_ms": round(p(a, .5), 3),
                    "before_p90_ms": round(p(b, .9), 3), "after_p90_ms": round(p(a, .9), 3),
                    "after_over_before_p50": round(p(a, .5) / p(b, .5), 3), "n": len(a)}
if build_before != "null":
    result["incremental_debug_build_s"] = {"before": float(build_before), "after": float(build_after),
                                           "after_over_before": round(float(build_after) / float(build_before), 3)}
print(json.dumps(result, indent=2))
open("bench-results/before-after.json", "w").write(json.dumps(result, indent=2) + "\n")
PY
