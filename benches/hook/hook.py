# The Python PreToolUse hook that benches/hook.rs times against `car policy-check-hook`: reads the same rule files and prints the same deny line.
import glob, json, os, re, sys, tomllib
p = json.load(sys.stdin); tool, args = p["tool_name"], p.get("tool_input") or {}
home = os.environ.get("CAR_HOME") or os.path.expanduser("~/.car")
rules = [tomllib.load(open(f, "rb")) for d in (home + "/policies", p["cwd"] + "/.car/policies") for f in sorted(glob.glob(d + "/*.toml"))]
why = [f"deny_tool:{tool}" for r in rules if tool in r.get("deny_tool", [])] + [f"deny_keyword:{k}" for r in rules for k in r.get("deny_keyword", []) if any(k in str(v) for v in args.values())]
why += [f"deny_tool_param:{tool}.{d['param']}" for r in rules for d in r.get("deny_tool_param", []) if d["tool"] == tool and d["param"] in args and d.get("contains", "") in str(args[d["param"]])]
why += [f"deny_tool_param_matching:{tool}.{d['param']}" for r in rules for d in r.get("deny_tool_param_matching", []) if d["tool"] == tool and d["param"] in args and re.search(d["matches"], str(args[d["param"]]))]
text = " ".join(str(args.get(k, "")) for k in ("command", "url")) if tool in ("Bash", "WebFetch") else ""
why += ["egress:raw_socket"] * bool(re.search(r"(^|[\s|;&()])(nc|ncat|netcat)(\s|$)|/dev/(tcp|udp)/", text))
allowed = ["github.com", "githubusercontent.com", "crates.io", "docs.rs", "npmjs.org", "npmjs.com", "pypi.org", "pythonhosted.org"] + [h for r in rules for h in r.get("egress", {}).get("allow_hosts", [])]
for host in re.findall(r"(?:https?|ftp|wss?)://(?:[^/?#\s@]*@)?([^/:?#\s]+)", text):
    if not any(host == a or host.endswith("." + a) for a in allowed): print(f"warning: egress:unlisted_host {host}", file=sys.stderr)
if why: print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "CAR policy: " + "; ".join(why)}}))
