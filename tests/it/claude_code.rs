//! The real Claude Code CLI (pinned, offline) running `car policy-check-hook` as a plugin's
//! PreToolUse hook. The model is the one part that cannot run here, so a scripted Messages API
//! server in this module plays it: it asks for a Bash command a project rule denies, then for an
//! allowed one, then ends the turn. Claude Code itself loads the plugin, runs the hook, enforces
//! the deny and runs the allowed command.
//!
//! Claude Code comes from `scripts/test.sh`, which installs `@anthropic-ai/claude-code` into
//! `tools/`; `CAR_CLAUDE_BIN` points the test at another copy.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::CAR;

const CLAUDE_VERSION: &str = "2.1.332";

/// How long one `claude -p` run may take before the test fails with the logs.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The pinned Claude Code binary; panics with how to install it when it is missing.
fn claude_bin() -> PathBuf {
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
struct Recorded {
    method: String,
    path: String,
    body: Value,
}

/// What the scripted model says next.
enum Turn {
    ToolUse { id: &'static str, command: String },
    Text(&'static str),
}

/// A Messages API server on 127.0.0.1 whose answers follow a fixed script.
struct ScriptedModel {
    port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl ScriptedModel {
    /// `denied` and `allowed` are the Bash commands of the first and second tool call.
    fn start(denied: String, allowed: String) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let script = Arc::new((denied, allowed));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || serve_connection(stream, &seen, &script));
            }
        });
        ScriptedModel { port, requests }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// One line per request, for failure messages.
    fn log(&self) -> String {
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
fn serve_connection(
    stream: TcpStream,
    seen: &Mutex<Vec<Recorded>>,
    script: &(String, String),
) -> Option<()> {
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
    (denied, allowed): &(String, String),
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
            let results = tool_results(body).len();
            let turn = match (offers_bash, results) {
                (true, 0) => Turn::ToolUse {
                    id: "toolu_denied",
                    command: denied.clone(),
                },
                (true, 1) => Turn::ToolUse {
                    id: "toolu_allowed",
                    command: allowed.clone(),
                },
                (true, _) => Turn::Text("Both commands were tried."),
                (false, _) => Turn::Text("ok"),
            };
            let model = body["model"].as_str().unwrap_or("claude-scripted");
            if body["stream"] == true {
                ("200 OK", "text/event-stream", sse(model, &turn))
            } else {
                ("200 OK", "application/json", message(model, &turn).to_string())
            }
        }
        _ => (
            "404 Not Found",
            "application/json",
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {method} {path}")}})
                .to_string(),
        ),
    }
}

/// Every `tool_result` block in a request's messages.
fn tool_results(body: &Value) -> Vec<Value> {
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
        Turn::ToolUse { id, command } => (
            json!({"type": "tool_use", "id": id, "name": "Bash",
                   "input": {"command": command, "description": "scripted"}}),
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

/// The same answer as Server-Sent Events, the way the Messages API streams it.
fn sse(model: &str, turn: &Turn) -> String {
    let (content, stop) = content_and_stop(turn);
    let (start, delta) = match turn {
        Turn::ToolUse { .. } => (
            json!({"type": "tool_use", "id": content["id"], "name": "Bash", "input": {}}),
            json!({"type": "input_json_delta", "partial_json": content["input"].to_string()}),
        ),
        Turn::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
    };
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message",
               "role": "assistant", "model": model, "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
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

/// Writes a plugin whose only part is the PreToolUse hook running this build's `car`.
fn write_plugin(dir: &Path) {
    std::fs::create_dir_all(dir.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(
        dir.join(".claude-plugin/plugin.json"),
        json!({"name": "car", "version": "0.0.0", "description": "CAR policy hook under test",
               "author": {"name": "CAR tests"}, "license": "MIT"})
        .to_string(),
    )
    .unwrap();
    let command = format!("'{}' policy-check-hook; exit 0", CAR.replace('\'', r"'\''"));
    std::fs::write(
        dir.join("hooks/hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
               "hooks": [{"type": "command", "command": command, "timeout": 10}]}]}})
        .to_string(),
    )
    .unwrap();
}

/// A `claude` command with a throwaway home and no way to reach anything but `base_url`.
fn claude(root: &Path, base_url: &str) -> Command {
    let mut cmd = Command::new(claude_bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("CAR_HOME", root.join("car-home"))
        .env("RUST_LOG", "debug")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-dummy")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn claude_code_runs_the_plugin_hook_which_blocks_a_denied_bash_command_and_lets_another_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let project = root.join("project");
    let plugin = root.join("plugin");
    std::fs::create_dir_all(project.join(".car/policies")).unwrap();
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::write(
        project.join(".car/policies/shell.toml"),
        "[[deny_tool_param_matching]]\ntool = \"Bash\"\nparam = \"command\"\nmatches = '\\brm\\s+-rf\\b'\n",
    )
    .unwrap();
    write_plugin(&plugin);

    let version = claude(root, "http://127.0.0.1:9")
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with(CLAUDE_VERSION),
        "expected Claude Code {CLAUDE_VERSION}: {version:?}"
    );
    let validate = claude(root, "http://127.0.0.1:9")
        .args(["plugin", "validate"])
        .arg(&plugin)
        .output()
        .unwrap();
    assert!(validate.status.success(), "plugin validate: {validate:?}");

    let denied_marker = project.join("denied.marker");
    let allowed_marker = project.join("allowed.marker");
    let model = ScriptedModel::start(
        format!("touch '{}' && rm -rf scratch", denied_marker.display()),
        format!("touch '{}'", allowed_marker.display()),
    );
    let stdout_path = root.join("claude.stdout");
    let stderr_path = root.join("claude.stderr");
    let mut child = claude(root, &format!("http://127.0.0.1:{}", model.port))
        .current_dir(&project)
        .args(["-p", "Clean up, then mark the project."])
        .arg("--plugin-dir")
        .arg(&plugin)
        // Root may not use bypassPermissions; allowing Bash still leaves the hook in charge.
        .args(["--allowedTools", "Bash"])
        .args(["--output-format", "stream-json", "--verbose"])
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "claude -p did not finish in {RUN_TIMEOUT:?}\nrequests:\n{}\nstderr:\n{}",
                model.log(),
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let context = format!(
        "requests:\n{}\nstdout:\n{stdout}\nstderr:\n{}",
        model.log(),
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    assert_eq!(status.code(), Some(0), "{context}");

    assert!(!denied_marker.exists(), "the denied command ran\n{context}");
    assert!(
        allowed_marker.exists(),
        "the allowed command did not run\n{context}"
    );

    // The model saw the deny reason in the tool result of the denied call.
    let reason = "CAR policy: deny_tool_param_matching:Bash.command (param 'command' matches a denied pattern)";
    let final_request = model
        .requests()
        .into_iter()
        .rfind(|r| r.path.starts_with("/v1/messages") && tool_results(&r.body).len() == 2)
        .unwrap_or_else(|| panic!("no request carried both tool results\n{context}"));
    let results = tool_results(&final_request.body);
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r["tool_use_id"] == id)
            .unwrap_or_else(|| panic!("no tool_result for {id}\n{context}"))
            .clone()
    };
    let denied = by_id("toolu_denied");
    assert_eq!(denied["is_error"], true, "{denied}");
    let text = result_text(&denied["content"]);
    assert!(text.contains(reason), "{text}");
    assert_eq!(by_id("toolu_allowed")["is_error"], false);

    // Claude Code's own output and its transcript file carry the same reason.
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{context}")))
        .collect();
    let streamed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "user")
        .flat_map(|l| l["message"]["content"].as_array().into_iter().flatten())
        .filter(|b| b["tool_use_id"] == "toolu_denied")
        .collect();
    assert_eq!(streamed.len(), 1, "{context}");
    assert!(result_text(&streamed[0]["content"]).contains(reason));
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["type"], &last["subtype"], &last["result"]),
        (
            &json!("result"),
            &json!("success"),
            &json!("Both commands were tried.")
        ),
        "{context}"
    );
    let transcript = last["session_id"]
        .as_str()
        .and_then(|id| find_transcript(&root.join("home/.claude/projects"), id))
        .unwrap_or_else(|| panic!("no transcript file\n{context}"));
    assert!(std::fs::read_to_string(&transcript)
        .unwrap()
        .contains(reason));
}

/// The text of a tool_result's content, a string or a list of text blocks.
fn result_text(content: &Value) -> String {
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
fn find_transcript(projects: &Path, session_id: &str) -> Option<PathBuf> {
    std::fs::read_dir(projects)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(format!("{session_id}.jsonl")))
        .find(|path| path.exists())
}
