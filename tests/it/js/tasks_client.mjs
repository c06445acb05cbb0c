#!/usr/bin/env node
// Calls one MCP tool as a 2026-07-28 Tasks client, using the official
// TypeScript packages `@modelcontextprotocol/client` (v2) and
// `@modelcontextprotocol/ext-tasks` (its `/client` entry point), follows the
// task to its end and prints one JSON line:
//   {"task": bool, "taskId": string|null, "statuses": [...], "result": CallToolResult}
// Usage: node tasks_client.mjs <mcp-url> <tool-name> '<arguments JSON>'
// Packages come from $CAR_TEST_NODE_MODULES when set, else normal resolution.
// Any failure: message on stderr, exit 1.

import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const PROTOCOL_VERSION = "2026-07-28";
const PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion";
const TIMEOUT_MS = Number(process.env.CAR_TEST_TASKS_TIMEOUT_MS ?? 120_000);

function fail(message) {
  process.stderr.write(`tasks_client: ${message}\n`);
  process.exit(1);
}

// Import `pkg` + `subpath` ("." or "./client") from CAR_TEST_NODE_MODULES by
// reading the package's `exports` "import" target (both packages are ESM and
// ext-tasks has no `require` condition, so createRequire().resolve cannot be
// used). ext-tasks' own `import "@modelcontextprotocol/client"` resolves from
// the same node_modules, so both sides share one Client module instance.
async function load(pkg, subpath) {
  const root = process.env.CAR_TEST_NODE_MODULES;
  if (!root) return import(subpath === "." ? pkg : `${pkg}/${subpath.slice(2)}`);
  const dir = path.join(path.resolve(root), ...pkg.split("/"));
  const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  let target = manifest.exports?.[subpath];
  if (target && typeof target === "object") target = target.import ?? target.default;
  if (target && typeof target === "object") target = target.default;
  if (typeof target !== "string") {
    if (subpath !== ".") throw new Error(`${pkg} has no import export for ${subpath}`);
    target = manifest.module ?? manifest.main ?? "index.js";
  }
  return import(pathToFileURL(path.join(dir, target)).href);
}

// Standard SEP-2243 `Mcp-Name` sources (same table as the SDK transport).
const MCP_NAME_SOURCE = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "tasks/get": "taskId",
  "tasks/update": "taskId",
  "tasks/cancel": "taskId",
};
const RESERVED_HEADERS = new Set([
  "content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id",
]);

function headerValue(value) {
  const plain = value.length > 0 && value === value.trim() && /^[\t\x20-\x7e]*$/.test(value) &&
    !(value.startsWith("=?base64?") && value.endsWith("?="));
  return plain ? value : `=?base64?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

// Reads a response body as SSE until the JSON-RPC response with `id` arrives.
async function readSseResponse(body, id) {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  let data = [];
  const dispatchEvent = () => {
    if (data.length === 0) return undefined;
    const text = data.join("\n");
    data = [];
    let message;
    try { message = JSON.parse(text); } catch { return undefined; }
    return message && typeof message === "object" && message.id === id ? message : undefined;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buffer += decoder.decode(value, { stream: true });
      if (done) buffer += "\n\n";
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          const found = dispatchEvent();
          if (found) return found;
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
      if (done) return undefined;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function makeRawDispatch(url, DispatchError) {
  let next = 1;
  return async function rawDispatch(request, options = {}) {
    const id = `ext-tasks-${next++}`;
    const { method, params } = request;
    const message = { jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) };
    const headers = {};
    for (const [name, value] of Object.entries(options.context?.headers ?? {}))
      if (!RESERVED_HEADERS.has(name.toLowerCase())) headers[name] = value;
    headers["content-type"] = "application/json";
    headers["accept"] = "application/json, text/event-stream";
    headers["mcp-protocol-version"] = params?._meta?.[PROTOCOL_VERSION_META] ?? PROTOCOL_VERSION;
    headers["mcp-method"] = method;
    const nameField = MCP_NAME_SOURCE[method];
    if (nameField && typeof params?.[nameField] === "string") headers["mcp-name"] = headerValue(params[nameField]);

    const timeout = AbortSignal.timeout(options.context?.requestTimeoutMs ?? 60_000);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let response;
    try {
      response = await fetch(url, { method: "POST", headers, body: JSON.stringify(message), signal });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw new DispatchError(`${method}: HTTP request failed: ${error.message}`, true, { cause: error });
    }
    const contentType = (response.headers.get("content-type") ?? "").toLowerCase();
    let reply;
    if (contentType.includes("text/event-stream") && response.body) {
      reply = await readSseResponse(response.body, id);
    } else {
      const text = await response.text();
      try { reply = JSON.parse(text); } catch {
        throw new DispatchError(`${method}: HTTP ${response.status} with non-JSON body: ${text.slice(0, 300)}`, response.status >= 500);
      }
    }
    if (!reply || typeof reply !== "object" || (reply.id !== id && !reply.error))
      throw new DispatchError(`${method}: HTTP ${response.status} without a JSON-RPC response for ${id}`, response.status >= 500);
    if (process.env.CAR_TEST_TASKS_DEBUG)
      process.stderr.write(`tasks_client: ${method} -> HTTP ${response.status} ${JSON.stringify(reply).slice(0, 4000)}\n`);
    if (reply.error) return { kind: "error", error: reply.error };
    if (!response.ok)
      throw new DispatchError(`${method}: HTTP ${response.status}`, response.status >= 500);
    return { kind: "result", result: reply.result };
  };
}

async function main() {
  const [url, toolName, argsJson = "{}"] = process.argv.slice(2);
  if (!url || !toolName) fail("usage: node tasks_client.mjs <mcp-url> <tool-name> '<arguments JSON>'");
  let args;
  try { args = JSON.parse(argsJson); } catch (error) { fail(`arguments are not JSON: ${error.message}`); }
  if (args === null || typeof args !== "object" || Array.isArray(args)) fail("arguments must be a JSON object");

  const { Client, StreamableHTTPClientTransport } = await load("@modelcontextprotocol/client", ".");
  const { createTaskSessionFromClient, resultFromTaskOutcome, DispatchError } =
    await load("@modelcontextprotocol/ext-tasks", "./client");

  const clientInfo = { name: "car-tasks-test-client", version: "0.1.0" };
  const client = new Client(clientInfo, {
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
    capabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
  const overall = AbortSignal.timeout(TIMEOUT_MS);
  await client.connect(new StreamableHTTPClientTransport(new URL(url)), { signal: overall });
  if (client.getProtocolEra() !== "modern")
    throw new Error(`server did not negotiate ${PROTOCOL_VERSION} (era ${client.getProtocolEra()})`);

  const rawDispatch = makeRawDispatch(url, DispatchError);
  const protocolVersion = client.getNegotiatedProtocolVersion() ?? PROTOCOL_VERSION;
  const framing = { protocolVersion, clientInfo, clientCapabilities: {} };

  // Exactly what the packages do on their own: the session lists the tools
  // through the SDK Client and decodes the final CallToolResult with ext-tasks'
  // V2 codec, both of which check the 2026-07-28 shapes (resultType and all).
  const backgroundErrors = [];
  const session = createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch,
    v2RequestFraming: framing,
    onError: (error) => backgroundErrors.push(error),
    signal: overall,
  });
  try {
    if (!session.capabilities.execution)
      throw new Error(`server does not advertise the ${TASKS_EXTENSION} extension`);
    const execution = await session.callTool(toolName, args, { signal: overall });
    const statuses = [];
    // Task snapshots and the outcome, consecutive repeats collapsed.
    const record = (status) => {
      if (typeof status === "string" && statuses.at(-1) !== status) statuses.push(status);
    };
    const { outcome, lastTask } = await execution.settle({
      signal: overall,
      onEvent: (event) => record(event.type === "task" ? event.task.status : event.outcome.status),
    });
    if (statuses.length === 0) record(lastTask?.status ?? outcome.status);
    const result = resultFromTaskOutcome(outcome);
    const isTask = execution.kind === "task";
    process.stdout.write(`${JSON.stringify({ task: isTask, taskId: isTask ? execution.handle.taskId : null, statuses, result })}\n`);
    if (backgroundErrors.length > 0)
      process.stderr.write(`tasks_client: background errors: ${backgroundErrors.map((e) => e.message).join("; ")}\n`);
  } finally {
    await session.close().catch(() => {});
    await client.close().catch(() => {});
  }
}

// The error, its cause chain, JSON-RPC data and schema issues, on one line.
function describe(error) {
  const parts = [];
  const seen = new Set();
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 6 && !seen.has(e); e = e.cause, depth++) {
    seen.add(e);
    let text = typeof e === "object" ? `${e.name ?? "Error"}: ${e.message ?? String(e)}` : String(e);
    if (typeof e === "object" && e.code !== undefined) text += ` code=${JSON.stringify(e.code)}`;
    if (typeof e === "object" && e.data !== undefined) text += ` data=${JSON.stringify(e.data)}`;
    if (typeof e === "object" && Array.isArray(e.issues)) text += ` issues=${JSON.stringify(e.issues).slice(0, 800)}`;
    parts.push(text);
  }
  return parts.join(" <- caused by: ");
}

main().then(
  () => process.exit(0),
  (error) => fail(describe(error)),
);
