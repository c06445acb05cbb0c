"""Shared plumbing for the scripted model servers (`responses_model.py`, `gemini_model.py`).

Python 3 standard library only. A scripted server plays the model for a real host CLI (Codex,
Gemini CLI) in the end-to-end tests: it listens on 127.0.0.1 (port 0, written to --port-file),
records every request as one JSON line in --record, and answers the host's main loop turn by turn
from --script.

Script file (JSON):

    {"calls": [{"name": "<tool name as the host offers it>", "arguments": {...}}, ...],
     "final": "text that ends the turn",
     "side": "answer to side requests (titles, summaries...)"}

A bare JSON list is taken as "calls". The main-loop request that already carries N tool results
gets calls[N] (or the final text once the calls are used up), so a host that retries a request
gets the same answer again.

Record file: one JSON object per request:
    {"n": 1, "t": <unix time>, "method": "POST", "path": "/v1/responses", "headers": {...},
     "body": <parsed JSON body, or {"_raw": "..."} when it is not JSON>, "kind": "main"|"side"|...,
     "turn": <index answered or null>}
"""

import argparse
import base64
import gzip
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--script", required=True, help="JSON script (see module doc)")
    parser.add_argument("--record", required=True, help="JSON-lines file of received requests")
    parser.add_argument("--port-file", required=True, help="file to write the chosen port to")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument("--quiet", action="store_true", help="no per-request log on stderr")
    return parser.parse_args()


def load_script(path):
    with open(path, encoding="utf-8") as f:
        script = json.load(f)
    if isinstance(script, list):
        script = {"calls": script}
    script.setdefault("calls", [])
    script.setdefault("final", "done")
    script.setdefault("side", "ok")
    for i, call in enumerate(script["calls"]):
        if "name" not in call:
            raise SystemExit(f"script call {i} has no name: {call!r}")
        call.setdefault("arguments", {})
        call.setdefault("id", f"call_{i + 1}")
    return script


class Recorder:
    """Appends one JSON line per request, flushed at once (the test reads it while we run)."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.count = 0
        self.file = open(path, "a", encoding="utf-8")

    def write(self, entry):
        with self.lock:
            self.count += 1
            entry = {"n": self.count, "t": round(time.time(), 3), **entry}
            self.file.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.file.flush()
            return self.count


def decode_body(raw, encoding):
    """The request body as JSON (after gzip/deflate), else {"_raw": text or base64}."""
    encoding = (encoding or "").lower()
    try:
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
    except Exception:  # noqa: BLE001 - keep the raw bytes
        pass
    if not raw:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except Exception:  # noqa: BLE001
        try:
            return {"_raw": raw.decode("utf-8")}
        except UnicodeDecodeError:
            return {"_raw_b64": base64.b64encode(raw).decode("ascii"), "_encoding": encoding}


def sse_event(data, event=None):
    """One Server-Sent Event; `data` is JSON-encoded unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def halves(text):
    """`text` in two pieces (streams split text anywhere; the host must join them)."""
    middle = len(text) // 2
    return text[:middle], text[middle:]


def serve(description, respond):
    """Runs the server. `respond(method, path, headers, body, script)` returns
    `(status, content_type, payload_str_or_bytes, record_extra_dict)`."""
    args = parse_args(description)
    script = load_script(args.script)
    recorder = Recorder(args.record)
    quiet = args.quiet

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "scripted-model"

        def log_message(self, fmt, *a):  # our own log line below
            pass

        def read_body(self):
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        # trailers until the empty line
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def handle_any(self):
            raw = self.read_body()
            body = decode_body(raw, self.headers.get("content-encoding"))
            headers = {k.lower(): v for k, v in self.headers.items()}
            for secret in ("authorization", "x-goog-api-key", "api-key"):
                if secret in headers:
                    headers[secret] = "<redacted>"
            try:
                status, ctype, payload, extra = respond(self.command, self.path, headers, body, script)
            except Exception as e:  # noqa: BLE001 - answer 500 and keep serving
                import traceback

                traceback.print_exc()
                status, ctype, payload, extra = 500, "application/json", json.dumps(
                    {"error": {"code": 500, "message": f"scripted server error: {e}"}}
                ), {"kind": "error"}
            n = recorder.write(
                {"method": self.command, "path": self.path, "headers": headers, "body": body, **extra}
            )
            if not quiet:
                print(
                    f"[scripted] #{n} {self.command} {self.path} -> {status} {extra}",
                    file=sys.stderr,
                    flush=True,
                )
            data = payload.encode("utf-8") if isinstance(payload, str) else payload
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            if ctype.startswith("text/event-stream"):
                self.send_header("cache-control", "no-cache")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = handle_any

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    if not quiet:
        print(f"[scripted] {description} listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
