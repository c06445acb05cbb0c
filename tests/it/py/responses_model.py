#!/usr/bin/env python3
"""A scripted OpenAI Responses API server, playing the model for the real Codex CLI.

    python3 responses_model.py --script script.json --record requests.jsonl --port-file port.txt

Point Codex at it with a model provider whose base_url is http://127.0.0.1:<port>/v1 and
wire_api = "responses" (see /tmp/hostlab-report.md). Python 3 standard library only.

Script: see scripted_http.py. Each call is {"name": ..., "arguments": {...}} and becomes a
`function_call` output item (arguments JSON-encoded). Codex 0.169 offers each MCP server's tools
as a `namespace` tool ("mcp__car" with members "memory_add_fact", ...) and only accepts a call
that names the member plus `"namespace": "mcp__car"`; a script may write the flat
"mcp__car__memory_add_fact" and this server splits it. Optional per call:
  "namespace": "..."  -> sent as the item's `namespace` as given,
  "type": "custom_tool_call" with "input": "..." -> a freeform call (e.g. apply_patch),
  "item": {...}       -> sent verbatim as the output item.
A call may name "$shell" to mean whichever shell tool this Codex offers (exec_command,
shell_command or shell), with "arguments": {"command": "..."} adapted to that tool's schema.

Routes:
  POST .../responses            main loop (streamed SSE when "stream": true, else JSON)
  POST .../responses/compact    minimal compaction answer
  GET  .../models               empty-ish model list
  anything else                 404 JSON error (recorded)
The main loop is a /responses request that offers a shell tool or one of the script's tools;
other /responses requests (no such tool) are side requests answered with script["side"].
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scripted_http import halves, serve, sse_event  # noqa: E402

SHELL_TOOLS = ("exec_command", "shell_command", "shell", "local_shell", "container.exec")
OUTPUT_TYPES = (
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "mcp_tool_call_output",
    "tool_search_output",
)


def tool_names(body):
    """Names the request offers: plain function tools by name, and each member of a `namespace`
    tool (Codex puts MCP servers' tools there: namespace "mcp__car", member "memory_add_fact")
    by its bare name and by "<namespace>__<member>", mapped to (namespace, member)."""
    names = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "local_shell":
            names["local_shell"] = (None, "local_shell")
        if tool.get("type") == "namespace":
            space = tool.get("name", "")
            for member in tool.get("tools") or []:
                if isinstance(member, dict) and member.get("name"):
                    names.setdefault(member["name"], (space, member["name"]))
                    names[f"{space}__{member['name']}"] = (space, member["name"])
        elif tool.get("name"):
            names[tool["name"]] = (None, tool["name"])
    return names


def tool_results(body):
    items = body.get("input")
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and i.get("type") in OUTPUT_TYPES]


def shell_call(names, call):
    """`$shell` -> the shell tool this Codex offers, with its argument shape."""
    command = call["arguments"].get("command", "")
    if "exec_command" in names:
        return "exec_command", {"cmd": command, **{k: v for k, v in call["arguments"].items() if k != "command"}}
    if "shell_command" in names:
        return "shell_command", dict(call["arguments"])
    if "shell" in names:
        return "shell", {**call["arguments"], "command": ["bash", "-lc", command]}
    return "exec_command", {"cmd": command}


def output_item(call, names):
    if "item" in call:
        return call["item"]
    if call.get("type") == "custom_tool_call":
        return {"type": "custom_tool_call", "id": f"ctc_{call['id']}", "call_id": call["id"],
                "name": call["name"], "input": call.get("input", ""), "status": "completed"}
    name, arguments = call["name"], call["arguments"]
    if name == "$shell":
        name, arguments = shell_call(names, call)
    namespace = call.get("namespace")
    if namespace is None and name in names and names[name][0]:
        # "mcp__car__memory_add_fact" -> namespace "mcp__car", name "memory_add_fact": Codex
        # answers "unsupported call" to the flat name.
        namespace, name = names[name]
    item = {"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"],
            "name": name, "arguments": json.dumps(arguments), "status": "completed"}
    if namespace:
        item["namespace"] = namespace
    return item


def message_item(text, n):
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


USAGE = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}


def response_object(rid, model, status, output):
    return {"id": rid, "object": "response", "created_at": 0, "status": status, "model": model,
            "output": output, "usage": USAGE if status == "completed" else None}


def stream(rid, model, item):
    events = []
    seq = 0

    def add(event):
        nonlocal seq
        event["sequence_number"] = seq
        seq += 1
        events.append(sse_event(event, event["type"]))

    add({"type": "response.created", "response": response_object(rid, model, "in_progress", [])})
    add({"type": "response.in_progress", "response": response_object(rid, model, "in_progress", [])})
    if item["type"] == "message":
        text = item["content"][0]["text"]
        empty = {**item, "status": "in_progress", "content": []}
        add({"type": "response.output_item.added", "output_index": 0, "item": empty})
        add({"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
             "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        for part in halves(text):
            add({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                 "content_index": 0, "delta": part})
        add({"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
             "content_index": 0, "text": text})
        add({"type": "response.content_part.done", "item_id": item["id"], "output_index": 0,
             "content_index": 0, "part": item["content"][0]})
    elif item["type"] == "function_call":
        add({"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "arguments": "", "status": "in_progress"}})
        for part in halves(item["arguments"]):
            add({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                 "output_index": 0, "delta": part})
        add({"type": "response.function_call_arguments.done", "item_id": item["id"],
             "output_index": 0, "arguments": item["arguments"]})
    else:
        add({"type": "response.output_item.added", "output_index": 0, "item": item})
    add({"type": "response.output_item.done", "output_index": 0, "item": item})
    add({"type": "response.completed", "response": response_object(rid, model, "completed", [item])})
    return "".join(events)


COUNTER = {"n": 0}


def respond(method, path, headers, body, script):
    route = path.split("?")[0].rstrip("/")
    body = body if isinstance(body, dict) else {}
    model = body.get("model") or "scripted"
    if method == "GET" and route.endswith("/models"):
        return 200, "application/json", json.dumps({"object": "list", "data": [], "models": []}), {"kind": "models"}
    if method == "POST" and route.endswith("/responses/compact"):
        out = [message_item("(compacted)", 0)]
        return 200, "application/json", json.dumps({"output": out}), {"kind": "compact"}
    if method == "POST" and route.endswith("/responses"):
        COUNTER["n"] += 1
        rid = f"resp_{COUNTER['n']}"
        names = tool_names(body)
        wanted = {c["name"] for c in script["calls"]} - {"$shell"}
        main = bool(set(names) & (set(SHELL_TOOLS) | wanted))
        turn = len(tool_results(body)) if main else None
        if main and turn < len(script["calls"]):
            item = output_item(script["calls"][turn], names)
            kind = "main"
        elif main:
            item = message_item(script["final"], COUNTER["n"])
            kind = "main-final"
        else:
            item = message_item(script["side"], COUNTER["n"])
            kind = "side"
        extra = {"kind": kind, "turn": turn, "answer": item.get("name") or item["type"]}
        if body.get("stream"):
            return 200, "text/event-stream", stream(rid, model, item), extra
        return 200, "application/json", json.dumps(response_object(rid, model, "completed", [item])), extra
    return 404, "application/json", json.dumps(
        {"error": {"message": f"scripted server: no route {method} {path}", "type": "not_found"}}
    ), {"kind": "unknown"}


if __name__ == "__main__":
    serve("OpenAI Responses API (scripted, for Codex)", respond)
