#!/usr/bin/env python3
"""A scripted Gemini API (generativelanguage v1beta) server, playing the model for the real
Gemini CLI.

    python3 gemini_model.py --script script.json --record requests.jsonl --port-file port.txt

Point Gemini CLI at it with GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port> and
GEMINI_API_KEY=<anything> (see /tmp/hostlab-report.md). Python 3 standard library only.

Script: see scripted_http.py. Each call is {"name": ..., "arguments": {...}} and becomes one
`functionCall` part (name, args, id). A call may carry "parts": [...] to send verbatim instead.

Routes (any API version prefix, /v1beta or /v1):
  POST models/<m>:streamGenerateContent   SSE (`data: {...}` chunks, the way ?alt=sse streams)
  POST models/<m>:generateContent         one JSON GenerateContentResponse
  POST models/<m>:countTokens             {"totalTokens": <rough count>}
  POST models/<m>:embedContent / :batchEmbedContents   zero vectors
  GET  models[/<m>]                        a minimal model list / model
The main loop is a generate request that offers run_shell_command or one of the script's tools:
it gets calls[N] when its contents already carry N functionResponse parts, then script["final"].
Other generate requests are side requests (routing classifier, next-speaker check, loop
detection, summaries): a request with a JSON response schema gets a minimal instance of it
(first enum value, "ok" strings, numbers 1 or the minimum, false booleans), else script["side"] as text.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scripted_http import halves, serve, sse_event  # noqa: E402

SHELL_TOOL = "run_shell_command"
USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}


def declared_names(body):
    names = set()
    for tool in body.get("tools") or []:
        for decl in (tool or {}).get("functionDeclarations") or []:
            if decl.get("name"):
                names.add(decl["name"])
    return names


def function_responses(body):
    count = 0
    for content in body.get("contents") or []:
        for part in (content or {}).get("parts") or []:
            if isinstance(part, dict) and "functionResponse" in part:
                count += 1
    return count


def instance_of(schema, depth=0):
    """A minimal value that satisfies a (JSON or OpenAPI-style) schema."""
    if not isinstance(schema, dict) or depth > 8:
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance_of(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    kind = (kind or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required")
        keys = required if required is not None else list(props)
        # fill every declared property: classifiers read optional fields too
        keys = list(dict.fromkeys(list(keys) + list(props)))
        return {k: instance_of(props.get(k, {}), depth + 1) for k in keys}
    if kind == "array":
        n = schema.get("minItems") or 0
        return [instance_of(schema.get("items", {}), depth + 1) for _ in range(n)]
    if kind in ("number", "integer"):
        # at least 1 (the routing classifier's score is 1..100 without saying so)
        low = schema.get("minimum", 1)
        high = schema.get("maximum", low if low > 1 else 1)
        return max(low, min(1, high))
    if kind == "boolean":
        return False
    return "ok"


def candidate(parts, finish="STOP"):
    return {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}


def response(parts, model):
    return {"candidates": [candidate(parts)], "usageMetadata": USAGE, "modelVersion": model,
            "responseId": "scripted"}


def stream(parts, model):
    """SSE chunks: text split in two chunks; a function call whole, then the finish."""
    chunks = []
    if len(parts) == 1 and "text" in parts[0]:
        first, second = halves(parts[0]["text"])
        chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": first}]},
                                       "index": 0}], "modelVersion": model, "responseId": "scripted"})
        chunks.append({"candidates": [candidate([{"text": second}])], "usageMetadata": USAGE,
                       "modelVersion": model, "responseId": "scripted"})
    else:
        chunks.append(response(parts, model))
    # the API streams "data: <json>\r\n\r\n"; plain \n\n is accepted by the SDK as well
    return "".join(sse_event(c) for c in chunks)


def generate(body, script, model):
    names = declared_names(body)
    wanted = {c["name"] for c in script["calls"]}
    main = bool(names & ({SHELL_TOOL} | wanted))
    if main:
        turn = function_responses(body)
        if turn < len(script["calls"]):
            call = script["calls"][turn]
            parts = call.get("parts") or [
                {"functionCall": {"name": call["name"], "args": call["arguments"], "id": call["id"]}}
            ]
            return parts, {"kind": "main", "turn": turn, "answer": call["name"]}
        return [{"text": script["final"]}], {"kind": "main-final", "turn": turn, "answer": "text"}
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema or config.get("responseMimeType") == "application/json":
        value = instance_of(schema) if schema else {}
        return [{"text": json.dumps(value)}], {"kind": "side-json", "turn": None, "answer": value}
    return [{"text": script["side"]}], {"kind": "side", "turn": None, "answer": "text"}


def respond(method, path, headers, body, script):
    route = path.split("?")[0].rstrip("/")
    body = body if isinstance(body, dict) else {}
    tail = route.rsplit("/models/", 1)[-1] if "/models/" in route else ""
    model, _, action = tail.partition(":")
    model = model or "gemini-scripted"
    if method == "POST" and action in ("streamGenerateContent", "generateContent"):
        parts, extra = generate(body, script, model)
        if action == "streamGenerateContent":
            return 200, "text/event-stream", stream(parts, model), extra
        return 200, "application/json", json.dumps(response(parts, model)), extra
    if method == "POST" and action == "countTokens":
        size = len(json.dumps(body))
        return 200, "application/json", json.dumps({"totalTokens": max(1, size // 4)}), {"kind": "countTokens"}
    if method == "POST" and action in ("embedContent", "batchEmbedContents"):
        vec = {"values": [0.0] * 8}
        n = len(body.get("requests") or []) or 1
        payload = {"embedding": vec} if action == "embedContent" else {"embeddings": [vec] * n}
        return 200, "application/json", json.dumps(payload), {"kind": action}
    if method == "GET" and (route.endswith("/models") or "/models/" in route):
        m = {"name": f"models/{model}", "displayName": model, "inputTokenLimit": 1048576,
             "outputTokenLimit": 65536,
             "supportedGenerationMethods": ["generateContent", "countTokens"]}
        payload = m if tail else {"models": [m]}
        return 200, "application/json", json.dumps(payload), {"kind": "models"}
    return 404, "application/json", json.dumps(
        {"error": {"code": 404, "message": f"scripted server: no route {method} {path}",
                   "status": "NOT_FOUND"}}
    ), {"kind": "unknown"}


if __name__ == "__main__":
    serve("Gemini API (scripted, for Gemini CLI)", respond)
