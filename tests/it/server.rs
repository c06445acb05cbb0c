//! `car-server`: the same engine over streamable HTTP MCP, checked with real clients (the
//! Python SDK, the official conformance suite in server mode) and at its access checks.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::{TestHome, CAR_SERVER};

/// A running car-server on ports it chose (asked for port 0; it prints where it listens).
pub(crate) struct Server {
    _child: crate::support::Reaped,
    base: String,
    ws: String,
}

impl Server {
    pub(crate) fn start(home: &TestHome, args: &[&str]) -> Server {
        Server::start_with(home, args, &[])
    }

    /// With extra environment variables.
    pub(crate) fn start_with(home: &TestHome, args: &[&str], envs: &[(&str, &str)]) -> Server {
        let mut child = home
            .command(CAR_SERVER)
            .args(["--mcp-bind", "127.0.0.1:0", "--port", "0"])
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut base, mut ws) = (None, None);
        while base.is_none() || ws.is_none() {
            let line = lines
                .next()
                .expect("car-server exited before listening")
                .unwrap();
            if let Some(url) = line.strip_prefix("car-server: MCP at ") {
                base = Some(url.trim_end_matches("/mcp").to_string());
            }
            if let Some(url) = line.strip_prefix("car-server: WebSocket at ") {
                ws = Some(url.to_string());
            }
        }
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            _child: crate::support::Reaped(child),
            base: base.unwrap(),
            ws: ws.unwrap(),
        }
    }

    pub(crate) fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "car-test", "version": "1"}}})
}

pub fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value, headers)
    })
}

fn get(url: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
}

#[test]
fn health_and_the_access_checks_in_front_of_mcp() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let health = get(&format!("{}/health", server.base));
    assert_eq!(health["status"], "ok");
    assert_eq!(health["server_name"], "car-server");
    assert!(health["protocol_versions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));

    let init = initialize().to_string();
    let (status, _, headers) = post(&server.mcp(), &[], init.clone());
    assert_eq!(status, 200);
    assert!(
        headers.contains_key("mcp-session-id"),
        "a 2025-11-25 session gets an id"
    );

    let (status, body, _) = post(
        &server.mcp(),
        &[("origin", "http://evil.example")],
        init.clone(),
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("origin not allowed"))
    );
    let (status, _, _) = post(&server.mcp(), &[("origin", "null")], init.clone());
    assert_eq!(status, 403, "the literal null origin is foreign");
    let (status, _, _) = post(
        &server.mcp(),
        &[("origin", "http://localhost:6274")],
        init.clone(),
    );
    assert_eq!(status, 200, "a loopback origin is fine");
    let (status, body, _) = post(
        &server.mcp(),
        &[("host", "evil.example:9102")],
        init.clone(),
    );
    assert_eq!(status, 403, "DNS rebinding: {body}");
    let (status, body, _) = post(
        &server.mcp(),
        &[("mcp-protocol-version", "1999-01-01")],
        init.clone(),
    );
    assert_eq!(status, 400);
    assert_eq!(body["id"], 1, "the error answers the request: {body}");
    assert_eq!(body["error"]["code"], -32022, "{body}");
    assert!(
        body["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-06-18")),
        "{body}"
    );

    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(5 << 20)
    );
    let (status, _, _) = post(&server.mcp(), &[], huge);
    assert_eq!(status, 413, "a body over 4 MiB is refused");
    let (status, _, _) = post(&server.mcp(), &[], init);
    assert_eq!(status, 200, "and the server is still up");
}

#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let home = TestHome::new();
    // Loopback still, but served as a remote bind would be: the token is what admits.
    let server = Server::start(&home, &["--allow-remote"]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.home.join("daemon/token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let init = initialize().to_string();
    let (status, _, headers) = post(&server.mcp(), &[], init.clone());
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], "Bearer realm=\"car\"");
    let (status, _, _) = post(
        &server.mcp(),
        &[("authorization", "Bearer wrong")],
        init.clone(),
    );
    assert_eq!(status, 401);
    let bearer = format!("Bearer {}", token.trim());
    let (status, _, _) = post(&server.mcp(), &[("authorization", &bearer)], init);
    assert_eq!(status, 200);

    let refused = home
        .command(CAR_SERVER)
        .args(["--mcp-bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--allow-remote"),
        "a non-loopback bind without --allow-remote says how"
    );
}

#[test]
fn the_python_mcp_sdk_lists_and_calls_tools_over_http() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/py/sdk_client.py");
    let out = home
        .command("python3")
        .args([script, &server.mcp()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python SDK client failed over HTTP:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["server"], "car-server");
    // car-mcp's 23 and the daemon's assistant_start, assistant_poll, assistant_cancel.
    assert_eq!(report["tools"].as_array().unwrap().len(), 26);
    assert_eq!(report["recalled"][0]["subject"], "deploys");
    assert_eq!(report["error_is_error"], true);
    assert!(report["prompt"].as_str().unwrap().contains("canary"));
}

/// The suite's scenarios that need no fixture tools, prompts or resources: car-server itself
/// must pass each.
const PROTOCOL_SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "logging-set-level",
    "completion-complete",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[test]
fn the_conformance_suite_passes_every_protocol_scenario_over_http() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let tools = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools");
    let conformance = tools.join("node_modules/.bin/conformance");
    let node22 = tools.join("node22/node_modules/.bin");
    assert!(
        conformance.exists(),
        "run scripts/test.sh: it installs the conformance suite into tools/"
    );
    let path = format!(
        "{}:{}",
        node22.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failed = Vec::new();
    for scenario in PROTOCOL_SCENARIOS {
        let out = std::process::Command::new(&conformance)
            .args(["server", "--url", &server.mcp(), "--scenario", scenario])
            .env("PATH", &path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !text.contains(" 0 failed") {
            failed.push(format!("{scenario}:\n{text}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn claude_code_connects_to_car_server_over_http() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let claude = crate::claude::claude_bin();
    let added = home
        .command(claude.to_str().unwrap())
        .args(["mcp", "add", "--transport", "http", "car", &server.mcp()])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let listed = home
        .command(claude.to_str().unwrap())
        .args(["mcp", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("car: "))
        .unwrap_or_else(|| panic!("car is not listed:\n{text}"));
    assert!(line.contains("Connected"), "{line}");
}

#[test]
fn car_daemon_starts_one_server_per_home_reports_it_and_stops_it() {
    let home = TestHome::new();
    let status = home.car_json(&["daemon", "status"]);
    assert_eq!(status["running"], false);
    let started = home.car_json(&[
        "daemon",
        "start",
        "--mcp-bind",
        "127.0.0.1:0",
        "--port",
        "0",
    ]);
    assert_eq!(started["started"], true, "{started}");
    let url = started["mcp_url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let status = home.car_json(&["daemon", "status"]);
    assert_eq!(
        (status["running"].clone(), status["healthy"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(status["pid"], started["pid"]);
    let again = home.car_json(&["daemon", "start"]);
    assert_eq!(
        (again["started"].clone(), again["pid"].clone()),
        (json!(false), started["pid"].clone())
    );
    let second = home
        .command(CAR_SERVER)
        .args(["--mcp-bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains("already runs") && said.contains(&url),
        "{said}"
    );
    let (code, _, _) = post(&url, &[], initialize().to_string());
    assert_eq!(code, 200, "the daemon serves MCP");
    let doctor = home.car(&["doctor"]);
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains(&url),
        "car doctor reports the daemon"
    );

    let stopped = home.car_json(&["daemon", "stop"]);
    assert_eq!(stopped["stopped"], true);
    assert_eq!(home.car_json(&["daemon", "status"])["running"], false);
    assert!(
        !home.home.join("daemon/state.json").exists(),
        "a graceful stop removes its state"
    );
    let logs = home.car_json(&["daemon", "logs"]);
    assert!(logs["lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().contains(&url)));
    assert_eq!(
        home.car_json(&["daemon", "stop"])["stopped"],
        false,
        "stopping twice is fine"
    );
}

#[test]
fn car_daemon_install_writes_a_login_unit_and_uninstall_removes_it() {
    let home = TestHome::new();
    // --no-enable: a test must not talk to the developer's own service manager.
    let installed = home.car_json(&[
        "daemon",
        "install",
        "--no-enable",
        "--mcp-bind",
        "127.0.0.1:9333",
    ]);
    let path = std::path::PathBuf::from(installed["path"].as_str().unwrap());
    assert!(
        path.starts_with(home.user_home()),
        "inside the test's own home: {}",
        path.display()
    );
    let unit = std::fs::read_to_string(&path).unwrap();
    assert!(
        unit.contains("car-server") && unit.contains("127.0.0.1:9333"),
        "{unit}"
    );
    assert!(
        unit.contains(&home.home.display().to_string()),
        "the unit names this CAR_HOME: {unit}"
    );
    assert!(installed["manager"].is_null());
    let removed = home.car_json(&["daemon", "uninstall", "--no-disable"]);
    assert_eq!(removed["changed"], true);
    assert!(!path.exists());
    assert_eq!(
        home.car_json(&["daemon", "uninstall", "--no-disable"])["changed"],
        false
    );
}

fn run_ws<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

fn tool(name: &str) -> car::server::ws::ClientTool {
    car::server::ws::ClientTool {
        name: name.into(),
        description: format!("the test's {name}"),
        parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    }
}

#[test]
fn a_websocket_client_runs_a_verified_plan_with_its_own_tools() {
    use car::server::ws::client::{run_proposal, Execute};
    use car::server::ws::ActionStatus;

    let home = TestHome::new();
    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/ws.toml"),
        "deny_tool = [\"forbidden\"]\n",
    )
    .unwrap();
    let server = Server::start(&home, &[]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let tools: Vec<_> = ["echo", "flaky", "slow", "forbidden"]
        .into_iter()
        .map(tool)
        .collect();
    let proposal = json!({"id": "p1", "actions": [
        {"id": "ready", "type": "state_write", "parameters": {"key": "ready", "value": true}},
        {"id": "say", "type": "tool_call", "tool": "echo", "parameters": {"text": "hi"},
         "dependencies": ["ready"], "preconditions": [{"key": "ready", "value": true}],
         "expected_effects": {"said": "hi"}},
        {"id": "retry", "type": "tool_call", "tool": "flaky", "dependencies": ["ready"],
         "failure_behavior": "retry", "max_retries": 2},
        {"id": "hang", "type": "tool_call", "tool": "slow", "dependencies": ["say"],
         "timeout_ms": 300, "failure_behavior": "skip"},
        {"id": "after", "type": "assertion", "dependencies": ["hang"]},
        {"id": "nope", "type": "tool_call", "tool": "forbidden", "dependencies": ["say"],
         "failure_behavior": "skip"},
        {"id": "own", "type": "tool_call", "tool": "memory_add_fact", "dependencies": ["ready"],
         "parameters": {"subject": "ws", "body": "plans run CAR's own tools in the daemon"}}
    ]});
    let flaky_calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = flaky_calls.clone();
    let executed = run_ws(run_proposal(
        &server.ws,
        token.trim(),
        &tools,
        proposal,
        move |call: Execute| {
            let counter = counter.clone();
            async move {
                match call.tool.as_str() {
                    "echo" => Ok(json!({"echoed": call.parameters["text"]})),
                    "flaky" if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
                        Err("first attempt fails".to_string())
                    }
                    "flaky" => Ok(json!({"attempt": call.attempt})),
                    _ => {
                        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                        Ok(json!("too late"))
                    }
                }
            }
        },
    ))
    .unwrap();
    let by: std::collections::HashMap<&str, &car::server::ws::ActionResult> = executed
        .results
        .iter()
        .map(|r| (r.action_id.as_str(), r))
        .collect();
    assert_eq!(executed.proposal_id, "p1");
    assert_eq!(by["ready"].status, ActionStatus::Ok);
    assert_eq!(
        by["ready"].state_changes,
        json!({"ready": true}).as_object().unwrap().clone()
    );
    assert_eq!(
        (by["say"].status, by["say"].output.clone()),
        (ActionStatus::Ok, json!({"echoed": "hi"}))
    );
    assert_eq!(by["say"].state_changes["said"], "hi");
    assert_eq!(
        (by["retry"].status, by["retry"].attempts),
        (ActionStatus::Ok, 2),
        "{:?}",
        by["retry"]
    );
    assert_eq!(by["hang"].status, ActionStatus::Failed);
    assert!(
        by["hang"].error.as_deref().unwrap().contains("300 ms"),
        "{:?}",
        by["hang"]
    );
    assert_eq!(
        by["after"].status,
        ActionStatus::Skipped,
        "its dependency failed"
    );
    assert_eq!(by["nope"].status, ActionStatus::Denied);
    assert!(by["nope"]
        .error
        .as_deref()
        .unwrap()
        .contains("denied by policy"));
    assert_eq!(by["own"].status, ActionStatus::Ok, "{:?}", by["own"]);
    assert_eq!(
        by["own"].output["subject"], "ws",
        "CAR's own tool ran in the daemon"
    );
    assert_eq!(by["own"].attempts, 1);
    assert_eq!(executed.cost.retries, 1);
    assert_eq!(executed.cost.levels, 4);

    // A plan that does not verify runs nothing.
    let refused = run_ws(run_proposal(
        &server.ws,
        token.trim(),
        &tools,
        json!({"actions": [{"id": "a", "type": "tool_call", "tool": "unknown_tool"}]}),
        |_: Execute| async { Ok(json!(null)) },
    ));
    match refused {
        Err(car::server::ws::client::ClientError::Refused { method, data, .. }) => {
            assert_eq!(method, "proposal.submit");
            assert!(data.unwrap().to_string().contains("unknown_tool"));
        }
        other => panic!("an invalid plan ran: {other:?}"),
    }
    // The wrong token is refused at the first frame.
    let wrong = run_ws(run_proposal(
        &server.ws,
        "wrong",
        &tools,
        json!({}),
        |_: Execute| async { Ok(json!(null)) },
    ));
    assert!(
        matches!(wrong, Err(car::server::ws::client::ClientError::Refused { ref method, .. }) if method == "session.auth"),
        "{wrong:?}"
    );
}

/// Sends requests in order on one WebSocket and returns each answer.
fn ws_requests(url: &str, requests: &[Value]) -> Vec<Value> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    run_ws(async {
        let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut answers = Vec::new();
        for (n, request) in requests.iter().enumerate() {
            let mut frame = request.clone();
            frame["jsonrpc"] = json!("2.0");
            frame["id"] = json!(n + 1);
            socket
                .send(Message::Text(frame.to_string().into()))
                .await
                .unwrap();
            loop {
                match socket.next().await {
                    Some(Ok(Message::Text(text))) => {
                        let answer: Value = serde_json::from_str(&text).unwrap();
                        if answer["id"] == json!(n + 1) || answer["id"].is_null() {
                            answers.push(answer);
                            break;
                        }
                    }
                    Some(Ok(_)) => continue,
                    None | Some(Err(_)) => return answers,
                }
            }
        }
        answers
    })
}

#[test]
fn websocket_state_verify_and_simulate_use_the_session_and_the_registry() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let plan = json!({"actions": [
        {"id": "w", "type": "state_write", "parameters": {"key": "x", "value": 2}},
        {"id": "c", "type": "tool_call", "tool": "deploy", "dependencies": ["w"]}]});
    let answers = ws_requests(
        &server.ws,
        &[
            json!({"method": "session.auth", "params": {"token": token.trim()}}),
            json!({"method": "session.init", "params": {"tools": [{"name": "deploy"}]}}),
            json!({"method": "state.set", "params": {"key": "region", "value": "eu"}}),
            json!({"method": "state.get", "params": {"key": "region"}}),
            json!({"method": "state.keys"}),
            json!({"method": "verify", "params": {"proposal": plan}}),
            json!({"method": "simulate", "params": {"proposal": plan}}),
            json!({"method": "no.such.method"}),
        ],
    );
    assert_eq!(
        answers[3]["result"],
        json!({"key": "region", "exists": true, "value": "eu"})
    );
    assert_eq!(answers[4]["result"]["keys"], json!(["region"]));
    assert_eq!(
        answers[5]["result"]["valid"], true,
        "the client's own tool counts: {}",
        answers[5]
    );
    assert_eq!(
        answers[6]["result"]["final_state"],
        json!({"region": "eu", "x": 2}),
        "simulated from the session's state"
    );
    assert_eq!(answers[7]["error"]["code"], -32601);
    let executions = home.car_json(&["executions", "--limit", "5"]);
    assert!(
        executions.to_string().contains("\"simulate\""),
        "the registry logged it: {executions}"
    );

    // Anything but session.auth first: an error, then the server closes.
    let refused = ws_requests(
        &server.ws,
        &[
            json!({"method": "state.keys"}),
            json!({"method": "state.keys"}),
        ],
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["error"]["code"], -32001);
}

/// The JSON-RPC message of a response body: plain JSON, or the last `data:` line of an SSE
/// stream that carries one.
pub fn message_of(body: &Value) -> Value {
    match body {
        Value::String(text) => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|m| m.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC message in {text}")),
        other => other.clone(),
    }
}

/// 2026-07-28 has no `initialize` and no session: every request carries its revision and the
/// client's capabilities. car-server and car-mcp both serve it from the same adapter.
#[test]
fn the_2026_07_28_revision_is_served_statelessly_over_http_and_stdio() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let version = [("mcp-protocol-version", "2026-07-28")];
    // The revision's routing headers name the method (and the tool) outside the body.
    let (status, body, headers) = post(
        &server.mcp(),
        &[version[0], ("mcp-method", "server/discover")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
            .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let discovered = message_of(&body);
    assert!(
        discovered["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{discovered}"
    );
    assert!(
        headers.get("mcp-session-id").is_none(),
        "no session is opened"
    );
    let call = |id: u64, name: &str, arguments: Value| {
        let (status, body, _) = post(
            &server.mcp(),
            &[version[0], ("mcp-method", "tools/call"), ("mcp-name", name)],
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments, "_meta": meta}})
            .to_string(),
        );
        assert_eq!(status, 200, "{body}");
        message_of(&body)
    };
    let added = call(
        2,
        "memory_add_fact",
        json!({"subject": "deploys", "body": "we deploy on fridays after the freeze"}),
    );
    assert_eq!(added["result"]["isError"], false, "{added}");
    let found = call(
        3,
        "memory_query",
        json!({"query": "when do we deploy to production?"}),
    );
    assert!(
        found["result"]["structuredContent"]
            .to_string()
            .contains("fridays"),
        "a stateless request sees what an earlier one wrote: {found}"
    );
    let (status, body, _) = post(
        &server.mcp(),
        &[version[0], ("mcp-method", "tools/list")],
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}).to_string(),
    );
    assert_eq!(
        status, 400,
        "a request without its _meta is refused: {body}"
    );

    let mut mcp = home.spawn_mcp();
    mcp.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                     "params": {"_meta": meta}}),
    );
    let discovered = mcp.wait(&json!(1));
    assert!(
        discovered["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{discovered}"
    );
    mcp.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "memory_query", "arguments": {"query": "when do we deploy to production?"},
        "_meta": meta}}),
    );
    let found = mcp.wait(&json!(2));
    assert!(
        found["result"]["structuredContent"]
            .to_string()
            .contains("fridays"),
        "stdio, no initialize: {found}"
    );
    mcp.finish();
}

/// The server's resident memory in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

fn post_typed(url: &str, content_type: &str, body: Vec<u8>) -> (u16, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(url)
            .header("content-type", content_type)
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await;
        match response {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            // The server may close the connection on a body it refused before reading it all.
            Err(e) => (0, e.to_string()),
        }
    })
}

#[test]
fn bad_http_input_and_abandoned_sessions_get_clear_errors_and_memory_stays_bounded() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let url = server.mcp();
    for garbage in [
        &b"}{ not json"[..],
        b"\xff\xfe\x00",
        b"[1, 2, 3]",
        b"{\"jsonrpc\": \"2.0\"}",
    ] {
        let (status, body) = post_typed(&url, "application/json", garbage.to_vec());
        assert!(
            (400..500).contains(&status),
            "{:?} → {status} {body}",
            String::from_utf8_lossy(garbage)
        );
    }
    let (status, body) = post_typed(&url, "text/plain", initialize().to_string().into_bytes());
    assert_eq!(status, 415, "a wrong content type: {body}");
    let (status, body) = post_typed(&url, "application/json", vec![b' '; 100 << 20]);
    assert!(
        status == 413 || status == 0,
        "a 100 MB body is refused: {status} {body}"
    );

    // Sessions opened and abandoned, up to the cap: memory stays bounded, the next is refused
    // with a message, and ending one makes room.
    let pid = server._child.0.id();
    let before = rss_kib(pid);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ids: Vec<String> = runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut ids = Vec::new();
        for chunk in 0..car::server::MAX_SESSIONS / 64 {
            let opened: Vec<_> = (0..64)
                .map(|n| {
                    let client = client.clone();
                    let url = url.clone();
                    let mut init = initialize();
                    init["id"] = json!(chunk * 64 + n);
                    async move {
                        let response = client
                            .post(&url)
                            .header("content-type", "application/json")
                            .header("accept", "application/json, text/event-stream")
                            .body(init.to_string())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(response.status(), 200);
                        response.headers()["mcp-session-id"]
                            .to_str()
                            .unwrap()
                            .to_string()
                    }
                })
                .collect();
            ids.extend(futures_util::future::join_all(opened).await);
        }
        ids
    });
    let after = rss_kib(pid);
    assert!(
        after < before + 256 * 1024,
        "{} abandoned sessions grew the server from {before} KiB to {after} KiB",
        ids.len()
    );
    let (status, body, _) = post(&url, &[], initialize().to_string());
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DELETE"),
        "{body}"
    );
    runtime.block_on(async {
        let ended = reqwest::Client::new()
            .delete(&url)
            .header("mcp-session-id", &ids[0])
            .send()
            .await
            .unwrap();
        assert!(ended.status().is_success(), "{}", ended.status());
    });
    let (status, body, _) = post(&url, &[], initialize().to_string());
    assert_eq!(status, 200, "ending a session makes room: {body}");
    assert_eq!(get(&format!("{}/health", server.base))["status"], "ok");
}

#[test]
fn session_policies_from_session_init_gate_the_plans_actions() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let plan = json!({"actions": [
        {"id": "ship", "type": "tool_call", "tool": "deploy", "parameters": {"env": "prod-eu"},
         "failure_behavior": "skip"},
        {"id": "recall", "type": "tool_call", "tool": "memory_query",
         "parameters": {"query": "what region do we deploy to?"}, "failure_behavior": "skip"}]});
    let answers = ws_requests(
        &server.ws,
        &[
            json!({"method": "session.auth", "params": {"token": token.trim()}}),
            json!({"method": "session.init", "params": {"tools": [{"name": "deploy"}],
                "policies": [{"name": "no-prod", "rule": "deny_tool_param"}]}}),
            json!({"method": "session.init", "params": {"tools": [{"name": "deploy"}], "policies": [
                {"name": "no-prod", "rule": "deny_tool_param", "target": "deploy", "key": "env", "pattern": "prod"},
                {"name": "region-first", "rule": "require_state", "key": "region", "value": "eu"}]}}),
            json!({"method": "proposal.submit", "params": {"proposal": plan}}),
        ],
    );
    assert_eq!(answers[1]["error"]["code"], -32602, "{}", answers[1]);
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs target, key, pattern"),
        "{}",
        answers[1]
    );
    assert_eq!(
        answers[2]["result"]["policies"],
        json!(["no-prod", "region-first"])
    );
    let results = &answers[3]["result"]["results"];
    assert_eq!(results[0]["status"], "denied", "{results}");
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("session policy 'no-prod'"),
        "{results}"
    );
    assert_eq!(results[1]["status"], "denied", "{results}");
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("state['region'] must be \"eu\""),
        "{results}"
    );
}

#[test]
fn a_session_may_write_its_rules_as_a_rule_files_tables_and_every_kind_holds() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let plan = json!({"actions": [
        {"id": "first", "type": "tool_call", "tool": "memory_query",
         "parameters": {"query": "what region do we deploy to?"}, "failure_behavior": "skip"},
        {"id": "second", "type": "tool_call", "tool": "memory_query", "dependencies": ["first"],
         "parameters": {"query": "which database do we use?"}, "failure_behavior": "skip"},
        {"id": "ship", "type": "tool_call", "tool": "deploy", "parameters": {"env": "prod-eu"},
         "failure_behavior": "skip"}]});
    let answers = ws_requests(
        &server.ws,
        &[
            json!({"method": "session.auth", "params": {"token": token.trim()}}),
            json!({"method": "session.init", "params": {"tools": [{"name": "deploy"}],
                "policies": {"deny_tools": ["deploy"]}}}),
            json!({"method": "session.init", "params": {"tools": [{"name": "deploy"}], "policies": {
                "rate_limit_tool": [{"tool": "memory_query", "max_calls": 1, "interval_secs": 600}],
                "deny_tool_param_matching": [{"tool": "deploy", "param": "env", "matches": "^prod"}]}}}),
            json!({"method": "proposal.submit", "params": {"proposal": plan}}),
        ],
    );
    assert_eq!(answers[1]["error"]["code"], -32602, "{}", answers[1]);
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deny_tools"),
        "a typo in a table's name is refused, naming it: {}",
        answers[1]
    );
    assert_eq!(
        answers[2]["result"]["policies"],
        json!([
            "deny_tool_param_matching:deploy.env",
            "rate_limit_tool:memory_query"
        ])
    );
    let results = &answers[3]["result"]["results"];
    assert_eq!(results[0]["status"], "ok", "{results}");
    assert_eq!(
        (
            results[1]["status"].as_str(),
            results[1]["error_code"].as_str()
        ),
        (Some("denied"), Some("denied")),
        "the session's rate limit holds: {results}"
    );
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("session policy 'rate_limit_tool:memory_query'"),
        "{results}"
    );
    assert_eq!(results[2]["status"], "denied", "{results}");
    assert_eq!(
        results[2]["attempts"], 0,
        "a denied call is never made: {results}"
    );
}

#[test]
fn bad_websocket_frames_and_a_client_that_vanishes_mid_proposal_leave_the_daemon_up() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let token = token.trim().to_string();
    run_ws(async {
        type Socket = tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >;
        async fn next_json(socket: &mut Socket) -> Option<Value> {
            loop {
                match tokio::time::timeout(std::time::Duration::from_secs(30), socket.next())
                    .await
                    .expect("an answer within 30 s")
                {
                    Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).ok(),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                    Some(Ok(_)) => continue,
                }
            }
        }
        let open = || async {
            let (mut socket, _) = tokio_tungstenite::connect_async(&server.ws).await.unwrap();
            let auth = json!({"jsonrpc": "2.0", "id": 0, "method": "session.auth",
                              "params": {"token": token}});
            socket
                .send(Message::Text(auth.to_string().into()))
                .await
                .unwrap();
            let answer = next_json(&mut socket).await.unwrap();
            assert_eq!(answer["result"]["authenticated"], true, "{answer}");
            socket
        };
        let keys = json!({"jsonrpc": "2.0", "id": 7, "method": "state.keys"}).to_string();

        // Garbage, and an answer to a callback nobody asked for: an error or nothing, and the
        // connection goes on.
        let mut socket = open().await;
        socket
            .send(Message::Text("not json {".into()))
            .await
            .unwrap();
        let error = next_json(&mut socket).await.unwrap();
        assert_eq!(error["error"]["code"], -32700, "{error}");
        let stray = json!({"jsonrpc": "2.0", "id": "cb-999", "result": {"ok": true}});
        socket
            .send(Message::Text(stray.to_string().into()))
            .await
            .unwrap();
        socket
            .send(Message::Text(keys.clone().into()))
            .await
            .unwrap();
        let answer = next_json(&mut socket).await.unwrap();
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["result"]["keys"], json!([]));

        // A frame over the limit closes the connection.
        let huge = format!(
            "{{\"pad\": \"{}\"}}",
            "x".repeat(car::server::ws::MAX_FRAME_BYTES + 1)
        );
        let _ = socket.send(Message::Text(huge.into())).await;
        assert!(
            next_json(&mut socket).await.is_none(),
            "an oversized frame closes the socket"
        );

        // A client that vanishes while the daemon waits on its callback.
        let mut socket = open().await;
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "session.init",
                          "params": {"tools": [{"name": "slow"}]}});
        socket
            .send(Message::Text(init.to_string().into()))
            .await
            .unwrap();
        next_json(&mut socket).await.unwrap();
        let submit = json!({"jsonrpc": "2.0", "id": 2, "method": "proposal.submit", "params": {
            "proposal": {"actions": [{"id": "a", "type": "tool_call", "tool": "slow"}]}}});
        socket
            .send(Message::Text(submit.to_string().into()))
            .await
            .unwrap();
        let callback = next_json(&mut socket).await.unwrap();
        assert_eq!(callback["method"], "tools.execute", "{callback}");
        drop(socket);

        // The daemon is up and serves the next client as before.
        let mut socket = open().await;
        socket.send(Message::Text(keys.into())).await.unwrap();
        let answer = next_json(&mut socket).await.unwrap();
        assert_eq!(answer["result"]["keys"], json!([]), "{answer}");
    });
    assert_eq!(get(&format!("{}/health", server.base))["status"], "ok");
}

#[test]
fn the_log_file_rotates_while_the_server_runs() {
    let home = TestHome::new();
    let log = home.home.join("daemon/car-server.log");
    let child = home
        .command(CAR_SERVER)
        .args([
            "--mcp-bind",
            "127.0.0.1:0",
            "--port",
            "0",
            "--log-max-bytes",
            "4096",
        ])
        .arg("--log-file")
        .arg(&log)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = crate::support::Reaped(child);
    let previous = home.home.join("daemon/car-server.log.1");
    let mut url = None;
    for _ in 0..300 {
        let text = std::fs::read_to_string(&log).unwrap_or_default()
            + &std::fs::read_to_string(&previous).unwrap_or_default();
        url = text
            .lines()
            .find_map(|l| l.split("car-server: MCP at ").nth(1))
            .map(str::to_string);
        if url.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = url.expect("car-server logged where it listens");
    for _ in 0..20 {
        let (status, _, _) = post(&url, &[], initialize().to_string());
        assert_eq!(status, 200);
    }
    // Right after a rotation the new file is empty until the next record: one more request
    // writes one.
    let mut now = std::fs::metadata(&log).unwrap().len();
    for _ in 0..50 {
        if now > 0 {
            break;
        }
        let (status, _, _) = post(&url, &[], initialize().to_string());
        assert_eq!(status, 200);
        now = std::fs::metadata(&log).unwrap().len();
    }
    let before = std::fs::metadata(&previous)
        .expect("the log rotated while the server ran")
        .len();
    assert!(now > 0 && before > 0, "{now} {before}");
    assert!(
        before <= 4096,
        "a generation stays within the limit: {before}"
    );
}

/// The real Claude Code, in a `claude -p` run against the scripted model, calls car-server's
/// tools over HTTP: what it saves there is in the daemon's memory.
#[test]
fn claude_code_calls_car_server_tools_over_http_in_a_print_run() {
    use crate::claude::{claude, result_text, run_against, tool_results, ScriptedModel, ToolCall};
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let config = root.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"car": {"type": "http", "url": server.mcp()}}}).to_string(),
    )
    .unwrap();
    let fact = "The staging database is rebuilt from the nightly snapshot at 02:00 UTC.";
    let model = ScriptedModel::start(
        vec![
            ToolCall {
                id: "toolu_remember",
                name: "mcp__car__memory_add_fact".to_string(),
                input: json!({"subject": "staging database", "body": fact}),
            },
            ToolCall {
                id: "toolu_recall",
                name: "mcp__car__memory_query".to_string(),
                input: json!({"query": "when is the staging database rebuilt?"}),
            },
        ],
        "Both calls were made.",
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(root)
        .args(["-p", "Remember when staging is rebuilt, then recall it."])
        .arg("--mcp-config")
        .arg(&config)
        .arg("--strict-mcp-config")
        .args([
            "--allowedTools",
            "mcp__car__memory_add_fact,mcp__car__memory_query",
        ])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");
    let last = model
        .requests()
        .into_iter()
        .rfind(|r| r.path.starts_with("/v1/messages") && tool_results(&r.body).len() == 2)
        .unwrap_or_else(|| panic!("no request carried both tool results\n{context}"));
    let results = tool_results(&last.body);
    for result in &results {
        assert_ne!(result["is_error"], true, "{result}\n{context}");
    }
    let recalled = results
        .iter()
        .find(|r| r["tool_use_id"] == "toolu_recall")
        .unwrap();
    assert!(
        result_text(&recalled["content"]).contains("02:00 UTC"),
        "{recalled}\n{context}"
    );
    let stored = home.car_json(&["memory", "query", "staging database rebuilt"]);
    assert_eq!(stored["results"][0]["body"], fact, "{stored}");
}

/// The MCP Inspector CLI over HTTP: lists car-server's tools (strict: no schema warnings),
/// calls one, and reads the prompt.
#[test]
fn the_mcp_inspector_lists_and_calls_car_server_tools_over_http() {
    let home = TestHome::new();
    let server = Server::start(&home, &[]);
    let inspector = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/node_modules/.bin/mcp-inspector");
    assert!(
        inspector.exists(),
        "run scripts/test.sh: it installs the MCP Inspector into tools/"
    );
    let inspect = |args: &[&str]| {
        let out = home
            .command(inspector.to_str().unwrap())
            .args(["--cli", &server.mcp(), "--transport", "http"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{args:?}: {stderr}");
        let value: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        (value, stderr)
    };
    let (listed, stderr) = inspect(&["--method", "tools/list", "--strict"]);
    assert_eq!(listed["tools"].as_array().unwrap().len(), 26, "{listed}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("Warning")),
        "{stderr}"
    );
    let (added, _) = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "memory_add_fact",
        "--tool-arg",
        "subject=ci cache",
        "body=the CI cache key includes the Cargo.lock hash",
    ]);
    assert_eq!(added["isError"], false, "{added}");
    let (prompt, _) = inspect(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "car_context",
        "--prompt-args",
        "query=why does the CI cache miss?",
    ]);
    assert!(
        prompt.to_string().contains("Cargo.lock"),
        "the briefing recalls it: {prompt}"
    );
}

#[test]
fn mcp_bind_disabled_serves_the_websocket_alone() {
    let home = TestHome::new();
    for how in ["flag", "env"] {
        let mut command = home.command(CAR_SERVER);
        command.args(["--port", "0"]);
        match how {
            "flag" => {
                command.args(["--mcp-bind", "disabled"]);
            }
            _ => {
                command.env("CAR_MCP_BIND", "DISABLED");
            }
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut disabled, mut ws) = (false, None);
        while ws.is_none() {
            let line = lines
                .next()
                .expect("car-server exited before listening")
                .unwrap();
            assert!(!line.starts_with("car-server: MCP at "), "{how}: {line}");
            disabled |= line.contains("MCP disabled");
            if let Some(url) = line.strip_prefix("car-server: WebSocket at ") {
                ws = Some(url.to_string());
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let _child = crate::support::Reaped(child);
        assert!(disabled, "{how}");
        // The WebSocket answers; the state file says MCP is off.
        let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
        let answers = ws_requests(
            &ws.unwrap(),
            &[
                json!({"method": "session.auth", "params": {"token": token.trim()}}),
                json!({"method": "state.set", "params": {"key": "k", "value": 1}}),
                json!({"method": "state.get", "params": {"key": "k"}}),
            ],
        );
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(answers[2]["result"]["value"], 1, "{answers:?}");
        let status = home.car_json(&["daemon", "status"]);
        assert_eq!(status["mcp_url"], "disabled", "{status}");
        assert_eq!(status["healthy"], Value::Null, "{status}");
    }
    // A bad value is refused with what to give.
    let out = home
        .command(CAR_SERVER)
        .args(["--mcp-bind", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HOST:PORT"));
}
