//! The real Claude Code CLI (pinned, offline) for the plugin tests, and the scripted Messages API
//! server that plays the model. The model is the one part that cannot run here: the server answers
//! the main loop with a fixed list of tool calls, one per turn, then ends the turn; Claude Code
//! itself loads the plugin, runs its hook, launches its MCP server and calls its tools.
//!
//! Claude Code comes from `scripts/test.sh`, which installs `@anthropic-ai/claude-code` into
//! `tools/`; `CAR_CLAUDE_BIN` points the tests at another copy.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::CAR;

pub const CLAUDE_VERSION: &str = "2.1.332";

/// How long one `claude -p` run may take before the test fails with the logs.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The pinned Claude Code binary; panics with how to install it when it is missing.
pub fn claude_bin() -> PathBuf {
    let path = match std::env::var_os("CAR_CLAUDE_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/node_modules/.bin/claude"),
    };
    assert!(
        path.exists(),
        "Claude Code is not installed at {}: run scripts/test.sh (it installs it), or \
         `npm install --prefix tools --save-exact @anthropic-ai/claude-code@{CLAUDE_VERSION}`, \
         or set CAR_CLAUDE_BIN to a claude {CLAUDE_VERSION} binary",
        path.display()
    );
    path
}

/// One request the scripted server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Value,
}

/// One tool call of the script: the `tool_use` block the model sends.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: &'static str,
    pub name: String,
    pub input: Value,
}

impl ToolCall {
    pub fn bash(id: &'static str, command: String) -> ToolCall {
        ToolCall {
            id,
            name: "Bash".to_string(),
            input: json!({"command": command, "description": "scripted"}),
        }
    }
}

/// The model's whole part: its tool calls in order, then the text that ends the turn.
struct Script {
    calls: Vec<ToolCall>,
    last_words: &'static str,
    /// The answer to requests that offer no Bash (Claude Code's titles, `car reason`).
    side_words: &'static str,
    /// Other conversations, told apart by their system prompt (a subagent's, `car do`'s).
    routes: Vec<Route>,
}

/// A conversation whose system prompt contains `marker`, with its own script.
pub struct Route {
    pub marker: &'static str,
    pub calls: Vec<ToolCall>,
    pub last_words: &'static str,
}

/// A request's system prompt as one text (a string, or text blocks).
pub fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::Null => String::new(),
        system => result_text(system),
    }
}

/// What the scripted model says next.
enum Turn<'a> {
    ToolUse(&'a ToolCall),
    Text(&'a str),
}

/// A Messages API server on 127.0.0.1 whose answers follow a fixed script.
pub struct ScriptedModel {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl ScriptedModel {
    /// The main loop (the request that offers Bash) gets `calls[n]` when it carries `n` tool
    /// results, then `last_words`; side requests (titles, summaries) get "ok".
    pub fn start(calls: Vec<ToolCall>, last_words: &'static str) -> ScriptedModel {
        ScriptedModel::start_answering(calls, last_words, "ok")
    }

    /// As [`ScriptedModel::start`], with `side_words` as the answer to requests without Bash.
    pub fn start_answering(
        calls: Vec<ToolCall>,
        last_words: &'static str,
        side_words: &'static str,
    ) -> ScriptedModel {
        ScriptedModel::start_routed(calls, last_words, side_words, Vec::new())
    }

    /// As [`ScriptedModel::start_answering`], with other conversations (those whose system
    /// prompt contains a route's marker, first match) following their own route's script.
    pub fn start_routed(
        calls: Vec<ToolCall>,
        last_words: &'static str,
        side_words: &'static str,
        routes: Vec<Route>,
    ) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let script = Arc::new(Script {
            calls,
            last_words,
            side_words,
            routes,
        });
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || serve_connection(stream, &seen, &script));
            }
        });
        ScriptedModel { port, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// One line per request, for failure messages.
    pub fn log(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let body = r.body.to_string();
                let end = body.char_indices().nth(300).map_or(body.len(), |(i, _)| i);
                format!("{} {} {}\n", r.method, r.path, &body[..end])
            })
            .collect()
    }
}

/// Serves HTTP/1.1 requests on one keep-alive connection until the client closes it.
fn serve_connection(stream: TcpStream, seen: &Mutex<Vec<Recorded>>, script: &Script) -> Option<()> {
    let mut writer = stream.try_clone().ok()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).ok()? == 0 {
            return None;
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next()?.to_string();
        let path = parts.next()?.to_string();
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).ok()?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':')?;
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            read_chunked(&mut reader)?
        } else {
            let length: usize = headers
                .get("content-length")
                .map_or(Some(0), |v| v.parse().ok())?;
            let mut body = vec![0; length];
            reader.read_exact(&mut body).ok()?;
            body
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        seen.lock().unwrap().push(Recorded {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        let (status, content_type, payload) = respond(&method, &path, &body, script);
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nrequest-id: req_scripted\r\n\r\n",
            payload.len()
        );
        writer.write_all(head.as_bytes()).ok()?;
        writer.write_all(payload.as_bytes()).ok()?;
        writer.flush().ok()?;
    }
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// The scripted answer: `(status line, content type, body)`.
fn respond(
    method: &str,
    path: &str,
    body: &Value,
    script: &Script,
) -> (&'static str, &'static str, String) {
    let route = path.split('?').next().unwrap_or(path);
    match (method, route) {
        ("POST", "/v1/messages/count_tokens") => (
            "200 OK",
            "application/json",
            json!({"input_tokens": 100}).to_string(),
        ),
        ("POST", "/v1/messages") => {
            // Only the main loop offers Bash; side requests (titles, summaries) get text.
            let offers_bash = body["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
            let system = system_text(body);
            let (calls, last_words) = script
                .routes
                .iter()
                .find(|r| system.contains(r.marker))
                .map_or((&script.calls, script.last_words), |r| (&r.calls, r.last_words));
            let turn = match (offers_bash, calls.get(tool_results(body).len())) {
                (true, Some(call)) => Turn::ToolUse(call),
                (true, None) => Turn::Text(last_words),
                (false, _) => Turn::Text(script.side_words),
            };
            let model = body["model"].as_str().unwrap_or("claude-scripted");
            if body["stream"] == true {
                ("200 OK", "text/event-stream", sse(model, &turn))
            } else {
                ("200 OK", "application/json", message(model, &turn).to_string())
            }
        }
        // The OpenAI-compatible shape, for `car do --provider openai`.
        ("POST", "/v1/chat/completions") => {
            let offers_bash = body["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == "Bash"));
            let answered = body["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
            let message = match (offers_bash, script.calls.get(answered)) {
                (true, Some(call)) => json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.name, "arguments": call.input.to_string()}}]}),
                (true, None) => json!({"role": "assistant", "content": script.last_words}),
                (false, _) => json!({"role": "assistant", "content": script.side_words}),
            };
            let finish = if message["tool_calls"].is_array() { "tool_calls" } else { "stop" };
            if body["stream"] == true {
                return ("200 OK", "text/event-stream", openai_chunks(&body["model"], &message, finish));
            }
            (
                "200 OK",
                "application/json",
                json!({"id": "chatcmpl-scripted", "object": "chat.completion",
                       "model": body["model"], "choices": [{"index": 0, "message": message,
                       "finish_reason": finish}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
                .to_string(),
            )
        }
        _ => (
            "404 Not Found",
            "application/json",
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {method} {path}")}})
                .to_string(),
        ),
    }
}

/// Asserts that no request the model server received carries `secret`.
pub fn assert_never_sent(requests: &[Recorded], secret: &str, context: &str) {
    for request in requests {
        assert!(
            !request.body.to_string().contains(secret),
            "the secret reached the model in {} {}\n{context}",
            request.method,
            request.path
        );
    }
}

/// The `tool_result` blocks of the last Messages request that carries `count` of them, by
/// `tool_use_id`.
pub fn final_results(requests: &[Recorded], count: usize, context: &str) -> Vec<Value> {
    let last = requests
        .iter()
        .rfind(|r| r.path.starts_with("/v1/messages") && tool_results(&r.body).len() == count)
        .unwrap_or_else(|| panic!("no request carried all {count} tool results\n{context}"));
    tool_results(&last.body)
}

/// The result of tool call `id` among `results`.
pub fn result_of(results: &[Value], id: &str, context: &str) -> Value {
    results
        .iter()
        .find(|r| r["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}\n{context}"))
        .clone()
}

/// Every `tool_result` block in a request's messages.
pub fn tool_results(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .cloned()
        .collect()
}

fn content_and_stop(turn: &Turn) -> (Value, &'static str) {
    match turn {
        Turn::ToolUse(call) => (
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}),
            "tool_use",
        ),
        Turn::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
    }
}

/// The non-streaming answer.
fn message(model: &str, turn: &Turn) -> Value {
    let (content, stop) = content_and_stop(turn);
    json!({"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
           "content": [content], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 100, "output_tokens": 10}})
}

/// `text` in two pieces (a stream splits text and JSON anywhere; the reader must join them).
fn halves(text: &str) -> (String, String) {
    let middle = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(text.len(), |(i, _)| i);
    (text[..middle].to_string(), text[middle..].to_string())
}

/// The same answer as Server-Sent Events, the way the Messages API streams it.
fn sse(model: &str, turn: &Turn) -> String {
    let (content, stop) = content_and_stop(turn);
    let (start, deltas) = match turn {
        Turn::ToolUse(call) => {
            let (a, b) = halves(&content["input"].to_string());
            (
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                [a, b].map(|part| json!({"type": "input_json_delta", "partial_json": part})),
            )
        }
        Turn::Text(text) => {
            let (a, b) = halves(text);
            (
                json!({"type": "text", "text": ""}),
                [a, b].map(|part| json!({"type": "text_delta", "text": part})),
            )
        }
    };
    let [first, second] = deltas;
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message",
               "role": "assistant", "model": model, "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": first}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": second}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 10}}),
        json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// An OpenAI-compatible streamed answer: the text or the tool call's arguments in two chunks,
/// the finish reason, the usage chunk (`stream_options.include_usage`), then `[DONE]`.
fn openai_chunks(model: &Value, message: &Value, finish: &str) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    match message["tool_calls"].get(0) {
        Some(call) => {
            let (a, b) = halves(call["function"]["arguments"].as_str().unwrap_or(""));
            chunks.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": a}}]}),
                Value::Null,
            ));
            chunks.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                Value::Null,
            ));
        }
        None => {
            let (a, b) = halves(message["content"].as_str().unwrap_or(""));
            chunks.push(chunk(json!({"content": a}), Value::Null));
            chunks.push(chunk(json!({"content": b}), Value::Null));
        }
    }
    chunks.push(chunk(json!({}), json!(finish)));
    chunks.push(
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    );
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

/// The directory of this build's `car` and `car-mcp`, first on `PATH` so that the plugin's
/// `car-gate`, `car hook` and `car-mcp` are this build's.
pub fn path_with_car() -> std::ffi::OsString {
    let bin_dir = Path::new(CAR).parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&rest))).unwrap()
}

/// A `claude` command with a throwaway home (`root/home`), `CAR_HOME` at `root/car-home`, this
/// build's binaries first on `PATH`, and no way to reach anything but `base_url`.
pub fn claude(root: &Path, base_url: &str) -> Command {
    let mut cmd = Command::new(claude_bin());
    cmd.env_clear()
        .env("PATH", path_with_car())
        .env("HOME", root.join("home"))
        .env("CAR_HOME", root.join("car-home"))
        .env("RUST_LOG", "debug")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-dummy")
        .stdin(Stdio::null());
    cmd
}

/// What one `claude -p` run left: its exit code, its stream-json lines, and everything to show
/// when an assertion fails (the model's requests, stdout, stderr).
pub struct Run {
    pub code: Option<i32>,
    pub lines: Vec<Value>,
    pub context: String,
}

/// Runs `cmd` (a `claude -p … --output-format stream-json --verbose`) to the end against `model`,
/// failing the test with the logs if it takes longer than [`RUN_TIMEOUT`].
pub fn run_against(mut cmd: Command, root: &Path, model: &ScriptedModel) -> Run {
    let stdout_path = root.join("claude.stdout");
    let stderr_path = root.join("claude.stderr");
    let mut child = cmd
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let Some(status) = crate::support::wait_within(&mut child, RUN_TIMEOUT) else {
        panic!(
            "claude -p did not finish in {RUN_TIMEOUT:?}\nrequests:\n{}\nstderr:\n{}",
            model.log(),
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        );
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let context = format!(
        "requests:\n{}\nstdout:\n{stdout}\nstderr:\n{}",
        model.log(),
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{context}")))
        .collect();
    Run {
        code: status.code(),
        lines,
        context,
    }
}

/// The text of a tool_result's content, a string or a list of text blocks.
pub fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// `<projects>/<escaped cwd>/<session id>.jsonl`.
pub fn find_transcript(projects: &Path, session_id: &str) -> Option<PathBuf> {
    std::fs::read_dir(projects)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(format!("{session_id}.jsonl")))
        .find(|path| path.exists())
}
