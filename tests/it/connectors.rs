//! Connectors against real MCP servers nobody here wrote: the reference server
//! `@modelcontextprotocol/server-everything` (npm) over stdio and over streamable HTTP, and a
//! server built on the official Python SDK (`tests/it/py/hang_server.py`) for cancellation and
//! secrets in a child's environment. Tools start disabled, are served by `car-mcp` once enabled,
//! pass the policy gate, are announced with `notifications/tools/list_changed`, time out and are
//! cancelled on the remote side, and reconnect after the server went away. Secrets live in a real
//! gnome-keyring and nowhere else.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::keychain::Keyring;
use crate::support::Peer as _;
use crate::support::{McpProcess, TestHome, CAR, CAR_MCP};

/// The reference server, installed into tools/ by scripts/test.sh.
fn everything_bin() -> PathBuf {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/node_modules/.bin/mcp-server-everything");
    assert!(
        path.exists(),
        "the MCP reference server is not installed at {}: run scripts/test.sh (it installs \
         @modelcontextprotocol/server-everything into tools/)",
        path.display()
    );
    path
}

fn hang_server() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/py/hang_server.py")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything over streamable HTTP on a port of its own; killed on drop.
struct HttpServer {
    _child: crate::support::Reaped,
    port: u16,
}

impl HttpServer {
    /// On a port nobody holds: a port picked by the OS can be taken by another test before the
    /// server binds it (server-everything takes a number, not a socket), so a server that exits
    /// at start is retried on another port.
    fn start_any() -> HttpServer {
        for _ in 0..10 {
            if let Some(server) = HttpServer::try_start(free_port()) {
                return server;
            }
        }
        panic!("server-everything did not start on any of 10 ports");
    }

    /// On `port` (a restart on the port the connector knows).
    fn start(port: u16) -> HttpServer {
        HttpServer::try_start(port)
            .unwrap_or_else(|| panic!("server-everything did not start on port {port}"))
    }

    /// `None` when the server exits before it listens (the port was taken).
    fn try_start(port: u16) -> Option<HttpServer> {
        let mut child = Command::new(everything_bin())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if child.try_wait().unwrap().is_some() {
                return None;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(HttpServer {
                    _child: crate::support::Reaped(child),
                    port,
                });
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Runs `car --json ARGS` and returns the whole envelope (success or not).
fn car_envelope(home: &TestHome, args: &[&str]) -> (Value, String) {
    let out = home.command(CAR).arg("--json").args(args).output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "car {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (doc, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("mcp_"))
        .collect()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn add_everything_stdio(home: &TestHome) -> Value {
    let bin = everything_bin();
    home.car_json(&[
        "connector",
        "add",
        "everything",
        "--command",
        bin.to_str().unwrap(),
        "--arg",
        "stdio",
    ])
}

#[test]
fn stdio_tools_are_disabled_until_enabled_then_served_and_gated_by_policy() {
    let home = TestHome::new();
    let added = add_everything_stdio(&home);
    assert_eq!(added["slug"], "everything");
    assert_eq!(added["transport"], "stdio");
    assert_eq!(added["enabled_count"], 0);
    assert!(added["tool_count"].as_u64().unwrap() >= 10, "{added}");

    // Discovered, all disabled, and invisible to agents.
    let tools = home.car_json(&["connector", "tools", "everything"])["tools"].clone();
    let rows = tools.as_array().unwrap();
    assert!(rows.iter().all(|t| t["enabled"] == false));
    let echo = rows.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["canonical"], "mcp_everything_echo");
    assert_eq!(echo["effect"], "read");
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    assert!(names(&mcp.tools()).is_empty());
    let unknown = mcp.request(
        "tools/call",
        json!({"name": "mcp_everything_echo", "arguments": {"message": "hi"}}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    mcp.finish();

    // Two enabled: listed beside the built-ins with the remote hints, and callable.
    let enabled = home.car_json(&["connector", "enable", "everything", "echo", "get-sum"]);
    assert_eq!(enabled["enabled"], 2);
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let listed = mcp.tools();
    assert_eq!(
        names(&listed),
        ["mcp_everything_echo", "mcp_everything_get-sum"]
    );
    let sum = listed
        .iter()
        .find(|t| t["name"] == "mcp_everything_get-sum")
        .unwrap();
    assert_eq!(sum["annotations"]["readOnlyHint"], true);
    assert_eq!(sum["inputSchema"]["properties"]["a"]["type"], "number");
    let echoed = mcp.call("mcp_everything_echo", json!({"message": "hello there"}));
    assert_eq!(echoed["isError"], false, "{echoed}");
    assert_eq!(text_of(&echoed), "Echo: hello there");
    assert_eq!(echoed["_meta"]["car/status"], "ok");
    let summed = mcp.call("mcp_everything_get-sum", json!({"a": 2, "b": 40}));
    assert!(text_of(&summed).contains("42"), "{summed}");
    // CAR validates the arguments against the remote schema before calling.
    let bad = mcp.call("mcp_everything_get-sum", json!({"a": "two"}));
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["_meta"]["car/error"]["code"], "invalid_arguments");
    mcp.finish();

    // The policy gate: deny_tool for one, then deny_connector for all of them.
    let rules = home.project.join(".car/policies");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("connectors.toml"),
        "deny_tool = [\"mcp_everything_echo\"]\n",
    )
    .unwrap();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let denied = mcp.call("mcp_everything_echo", json!({"message": "x"}));
    assert_eq!(denied["isError"], true);
    assert_eq!(denied["_meta"]["car/status"], "denied", "{denied}");
    let allowed = mcp.call("mcp_everything_get-sum", json!({"a": 1, "b": 1}));
    assert_eq!(allowed["isError"], false, "{allowed}");
    mcp.finish();
    std::fs::write(
        rules.join("connectors.toml"),
        "deny_connector = [\"everything\"]\n",
    )
    .unwrap();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let denied = mcp.call("mcp_everything_get-sum", json!({"a": 1, "b": 1}));
    assert_eq!(denied["_meta"]["car/status"], "denied", "{denied}");
    mcp.finish();

    // Every call is in the execution log.
    let log = home.car_json(&["executions", "--tool", "mcp_everything_get-sum"]);
    let statuses: Vec<&str> = log["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["denied", "ok", "error", "ok"]);

    // verify knows the enabled connector tools and their schemas; a disabled one is unknown.
    let plan = |tool: &str, params: Value| {
        let file = home.project.join("plan.json");
        std::fs::write(
            &file,
            json!({"actions": [{"id": "a", "type": "tool_call", "tool": tool, "parameters": params}]})
                .to_string(),
        )
        .unwrap();
        let out = home
            .command(CAR)
            .args(["--json", "plan", "verify", file.to_str().unwrap()])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["data"].clone()
    };
    let good = plan("mcp_everything_get-sum", json!({"a": 1, "b": 2}));
    assert_eq!(good["valid"], true, "{good}");
    let bad = plan("mcp_everything_get-sum", json!({"a": "one", "b": 2}));
    assert_eq!(bad["valid"], false, "{bad}");
    assert!(bad["issues"][0]["message"]
        .as_str()
        .unwrap()
        .contains("input schema of 'mcp_everything_get-sum'"));
    let disabled = plan("mcp_everything_get-env", json!({}));
    assert_eq!(disabled["valid"], false, "{disabled}");

    // Disabling hides it again.
    home.car_json(&["connector", "disable", "everything", "--all"]);
    let listed = home.car_json(&["tools", "list"])["tools"].clone();
    assert!(names(listed.as_array().unwrap()).is_empty());
}

#[test]
fn http_connector_serves_calls_and_reconnects_after_the_server_went_away() {
    let home = TestHome::new();
    let server = HttpServer::start_any();
    let port = server.port;
    let added = home.car_json(&["connector", "add", "Web Tools", "--url", &server.url()]);
    assert_eq!(added["slug"], "web-tools");
    assert_eq!(added["transport"], "http");
    let tested = home.car_json(&["connector", "test", "web-tools"]);
    assert_eq!(tested["ok"], true);
    assert!(tested["connect_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(tested["tool_count"], added["tool_count"]);
    home.car_json(&[
        "connector",
        "enable",
        "web-tools",
        "mcp_web-tools_echo",
        "get-sum",
    ]);
    let rules = home.project.join(".car/policies");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("connectors.toml"),
        "deny_tool = [\"mcp_web-tools_get-sum\"]\n",
    )
    .unwrap();
    let doctor = home.car_json(&["doctor"]);
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "connectors")
        .unwrap()
        .clone();
    assert_eq!(check["detail"], "1 (2 tools enabled)", "{check}");

    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    assert_eq!(
        names(&mcp.tools()),
        ["mcp_web-tools_echo", "mcp_web-tools_get-sum"]
    );
    let first = mcp.call("mcp_web-tools_echo", json!({"message": "one"}));
    assert_eq!(text_of(&first), "Echo: one", "{first}");
    let denied = mcp.call("mcp_web-tools_get-sum", json!({"a": 1, "b": 2}));
    assert_eq!(denied["_meta"]["car/status"], "denied", "{denied}");

    // The server goes away: a clear error, not a hang.
    drop(server);
    let gone = mcp.call("mcp_web-tools_echo", json!({"message": "two"}));
    assert_eq!(gone["isError"], true, "{gone}");
    let message = gone["_meta"]["car/error"]["message"].as_str().unwrap();
    assert!(message.contains("connector 'web-tools'"), "{message}");

    // It comes back on the same port: the next call reconnects.
    let _server = HttpServer::start(port);
    let mut answer = Value::Null;
    for _ in 0..2 {
        answer = mcp.call("mcp_web-tools_echo", json!({"message": "three"}));
        if answer["isError"] == false {
            break;
        }
    }
    assert_eq!(text_of(&answer), "Echo: three", "{answer}");
    mcp.finish();
}

#[test]
fn enabling_in_another_process_announces_list_changed() {
    let home = TestHome::new();
    add_everything_stdio(&home);
    let mut mcp = home.spawn_mcp();
    let init = mcp.initialize();
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    assert!(names(&mcp.tools()).is_empty());

    home.car_json(&["connector", "enable", "everything", "echo"]);
    let note = mcp.wait_notification("notifications/tools/list_changed", Duration::from_secs(15));
    assert!(note.is_some(), "no list_changed after enable");
    assert_eq!(names(&mcp.tools()), ["mcp_everything_echo"]);
    let echoed = mcp.call("mcp_everything_echo", json!({"message": "live"}));
    assert_eq!(text_of(&echoed), "Echo: live");

    home.car_json(&["connector", "disable", "everything", "echo"]);
    let note = mcp.wait_notification("notifications/tools/list_changed", Duration::from_secs(15));
    assert!(note.is_some(), "no list_changed after disable");
    assert!(names(&mcp.tools()).is_empty());
    mcp.finish();
}

#[test]
fn a_hanging_remote_tool_is_cancelled_at_its_bound_while_other_calls_are_served() {
    let home = TestHome::new();
    let marker = home.project.join("cancelled.txt");
    home.car_json(&[
        "connector",
        "add",
        "slow",
        "--command",
        "python3",
        "--arg",
        hang_server(),
        "--timeout",
        "5",
    ]);
    // The dotted tool name becomes mcp_slow_files_read, and is enabled by that name.
    home.car_json(&["connector", "enable", "slow", "mcp_slow_files_read"]);
    home.car_json(&["connector", "enable", "slow", "--all"]);
    let mut command = home.command(CAR_MCP);
    command.env("HANG_MARKER", &marker);
    let mut mcp = McpProcess::spawn(command);
    mcp.initialize();
    // Connect first: starting Python and the SDK can take seconds on a loaded machine, and the
    // connection counts against the call's bound.
    let warm = (0..3)
        .map(|_| mcp.call("mcp_slow_ping", json!({})))
        .find(|r| r["isError"] == false);
    assert!(
        warm.is_some(),
        "the Python server did not answer; {}",
        mcp.stderr_tail()
    );
    let started = Instant::now();
    let hanging = mcp.start(
        "tools/call",
        json!({"name": "mcp_slow_hang", "arguments": {}}),
    );
    // Other calls keep being served while it hangs.
    for _ in 0..3 {
        let pong = mcp.call("mcp_slow_ping", json!({}));
        assert_eq!(text_of(&pong), "pong", "{pong}");
        let own = mcp.call_ok("memory_query", json!({"query": "anything"}));
        assert!(own.is_object());
    }
    let read = mcp.call("mcp_slow_files_read", json!({"path": "a.txt"}));
    assert_eq!(text_of(&read), "read a.txt", "{read}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let answer = mcp.wait(&json!(hanging));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(result["_meta"]["car/status"], "timeout", "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(5));
    // The remote server was told: its handler saw the cancellation.
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the remote tool was not cancelled; car-mcp stderr:\n{}",
            mcp.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "cancelled");
    mcp.finish();
    let log = home.car_json(&["executions", "--tool", "mcp_slow_hang"]);
    assert_eq!(log["executions"][0]["status"], "timeout");
}

#[test]
fn secrets_live_only_in_the_keychain_and_leave_with_the_connector() {
    let keyring = Keyring::start();
    let home = TestHome::new();
    let server = HttpServer::start_any();
    let token = "tok-7d1c0ffee-env-value";
    let header = "hdr-51b0a7-header-value";
    let run = |args: &[&str]| {
        let mut cmd = home.command(CAR);
        keyring
            .apply(&mut cmd)
            .env("RUST_LOG", "debug")
            .env("CAR_TEST_PY_TOKEN", token);
        let out = cmd.arg("--json").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "car {args:?}: {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        (doc["data"].clone(), stderr)
    };
    let mut logs = String::new();
    // The env value comes from this process's environment, so it is never on a command line.
    let (_, err) = run(&[
        "connector",
        "add",
        "py",
        "--command",
        "python3",
        "--arg",
        hang_server(),
        "--env-from-env",
        "API_TOKEN=CAR_TEST_PY_TOKEN",
    ]);
    logs.push_str(&err);
    let header_arg = format!("X-Api-Key={header}");
    let (added, err) = run(&[
        "connector",
        "add",
        "web",
        "--url",
        &server.url(),
        "--header",
        &header_arg,
    ]);
    logs.push_str(&err);
    assert_eq!(added["headers"], json!(["X-Api-Key"]));
    assert_eq!(added["auth"], "headers");

    // In the real keychain, under service `car`, named by connector.
    let items = keyring.items();
    let accounts: Vec<(&str, &str)> = items
        .iter()
        .map(|i| (i.attributes["username"].as_str(), i.secret.as_str()))
        .collect();
    assert_eq!(
        accounts,
        [
            ("connector/py/env/API_TOKEN", token),
            ("connector/web/header/X-Api-Key", header)
        ]
    );

    // The secret reaches the server's environment through the keychain.
    run(&["connector", "enable", "py", "whoami"]);
    let (called, err) = run(&["tools", "call", "mcp_py_whoami"]);
    logs.push_str(&err);
    assert_eq!(called["content"][0]["text"], token);
    let (tested, err) = run(&["connector", "test", "web"]);
    logs.push_str(&err);
    assert_eq!(tested["ok"], true);
    let mut mcp_cmd = home.command(CAR_MCP);
    keyring.apply(&mut mcp_cmd);
    let mut mcp = McpProcess::spawn(mcp_cmd);
    mcp.initialize();
    let via_mcp = mcp.call("mcp_py_whoami", json!({}));
    assert_eq!(text_of(&via_mcp), token);
    // car-mcp's debug log shows the responses it sends, and `whoami` answers with the token by
    // design, so only the header (which no tool echoes) is looked for there.
    let mcp_log = mcp.stderr_tail();
    assert!(
        !mcp_log.contains(header),
        "car-mcp's log holds the header value"
    );
    mcp.finish();

    // Nowhere else: not in connectors.json, the database (the call's result is not recorded
    // for non-keyed calls) or the logs.
    let config = std::fs::read_to_string(home.home.join("connectors.json")).unwrap();
    assert!(config.contains("API_TOKEN") && config.contains("X-Api-Key"));
    for (what, text) in [
        ("connectors.json", config.as_bytes()),
        ("logs", logs.as_bytes()),
    ] {
        for secret in [token, header] {
            assert!(
                !contains(text, secret.as_bytes()),
                "{what} holds the secret {secret}"
            );
        }
    }
    for entry in std::fs::read_dir(&home.home).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            for secret in [token, header] {
                assert!(
                    !contains(&bytes, secret.as_bytes()),
                    "{} holds {secret}",
                    path.display()
                );
            }
        }
    }

    // Removing a connector deletes its keychain entries and nothing else's.
    let (removed, _) = run(&["connector", "remove", "py"]);
    assert_eq!(removed["secrets_left"], Value::Null);
    assert_eq!(removed["secrets_deleted"], 1);
    let left: Vec<String> = keyring
        .items()
        .iter()
        .map(|i| i.attributes["username"].clone())
        .collect();
    assert_eq!(left, ["connector/web/header/X-Api-Key"]);
    run(&["connector", "remove", "web"]);
    assert!(keyring.items().is_empty(), "{:?}", keyring.items());
    assert!(home.car_json(&["connector", "list"])["connectors"]
        .as_array()
        .unwrap()
        .is_empty());
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn with_no_keychain_a_secret_is_refused_clearly_and_nothing_is_added() {
    let home = TestHome::new();
    let runtime = tempfile::tempdir().unwrap();
    let out = home
        .command(CAR)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("CAR_SECRET_STORE")
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args(["connector", "add", "web", "--url", "http://127.0.0.1:9/mcp"])
        .args(["--header", "Authorization=Bearer abc123"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CAR_SECRET_STORE=file"), "{stderr}");
    assert!(!stderr.contains("abc123"), "{stderr}");
    assert!(!home.home.join("connectors.json").exists());
    assert!(!home.home.join("secrets.json").exists());

    // A connector whose secrets went into a store that is gone now: remove refuses, --force
    // removes it and names what stayed behind.
    let bin = everything_bin();
    let added = home
        .command(CAR)
        .env("CAR_SECRET_STORE", "file")
        .args(["connector", "add", "ev", "--command", bin.to_str().unwrap()])
        .args(["--arg", "stdio", "--env", "SOME_KEY=v4lue"])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let no_keychain = |args: &[&str]| {
        let out = home
            .command(CAR)
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("CAR_SECRET_STORE")
            .env("XDG_RUNTIME_DIR", runtime.path())
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let refused = no_keychain(&["connector", "remove", "ev"]);
    assert_eq!(refused["error"]["code"], "keychain", "{refused}");
    assert_eq!(
        home.car_json(&["connector", "list"])["connectors"][0]["slug"],
        "ev"
    );
    let forced = no_keychain(&["connector", "remove", "ev", "--force"]);
    assert_eq!(forced["data"]["removed"], true, "{forced}");
    assert!(forced["data"]["secrets_left"]
        .as_str()
        .unwrap()
        .starts_with("connector/ev/*"));
    assert!(home.car_json(&["connector", "list"])["connectors"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let home = TestHome::new();
    add_everything_stdio(&home);
    let config = home.home.join("connectors.json");
    let before = std::fs::read(&config).unwrap();
    for (args, code, needle) in [
        (
            vec!["connector", "add", "x", "--url", "not a url"],
            "invalid",
            "is not a URL",
        ),
        (
            vec!["connector", "add", "x", "--url", "ftp://h/mcp"],
            "invalid",
            "http(s)",
        ),
        (
            vec!["connector", "add", "!!!", "--url", "http://h/mcp"],
            "invalid",
            "no letters",
        ),
        (
            vec!["connector", "add", "Everything", "--command", "x"],
            "invalid",
            "exists already",
        ),
        (
            vec!["connector", "add", "x", "--url", "http://127.0.0.1:1/mcp"],
            "connect_failed",
            "cannot connect: the connection was refused",
        ),
        (
            vec!["connector", "add", "x", "--command", "/no/such/server"],
            "connect_failed",
            "cannot start",
        ),
        (
            vec![
                "connector",
                "add",
                "x",
                "--command",
                "sh",
                "--arg",
                "-c",
                "--arg",
                "echo broken >&2; exit 3",
            ],
            "connect_failed",
            "broken",
        ),
        (
            vec!["connector", "enable", "everything", "no-such-tool"],
            "invalid",
            "has no tool 'no-such-tool'",
        ),
        (
            vec!["connector", "enable", "everything"],
            "invalid",
            "--all",
        ),
        (
            vec!["connector", "tools", "nope"],
            "not_found",
            "the connectors are: everything",
        ),
        (
            vec!["connector", "remove", "nope"],
            "not_found",
            "no connector 'nope'",
        ),
        (
            vec!["connector", "sync"],
            "not_found",
            "no .car/connectors.toml",
        ),
    ] {
        let (doc, _) = car_envelope(&home, &args);
        assert_eq!(doc["success"], false, "{args:?}: {doc}");
        assert_eq!(doc["error"]["code"], code, "{args:?}: {doc}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{args:?}: {message}");
        assert_eq!(
            std::fs::read(&config).unwrap(),
            before,
            "{args:?} changed connectors.json"
        );
    }
    // clap refuses a header with no value, or both endpoints.
    let out = home.car(&[
        "connector",
        "add",
        "x",
        "--url",
        "http://h/mcp",
        "--header",
        "NoEquals",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = home.car(&["connector", "add", "x", "--url", "u", "--command", "c"]);
    assert_eq!(out.status.code(), Some(2));
    let out = home.car(&[
        "connector",
        "add",
        "x",
        "--url",
        "http://h/mcp",
        "--header-from-env",
        "X-Key=CAR_TEST_SURELY_UNSET",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAR_TEST_SURELY_UNSET is not set"));
    let out = home.car(&[
        "connector",
        "add",
        "x",
        "--url",
        "http://h/mcp",
        "--header",
        "X-Key=a",
        "--header",
        "x-key=b",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("given twice"));
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

#[test]
fn the_team_file_is_synced_from_a_subdirectory() {
    let home = TestHome::new();
    let bin = everything_bin();
    std::fs::write(
        home.project.join(".car/connectors.toml"),
        format!(
            "[[connector]]\nname = \"everything\"\ncommand = {:?}\nargs = [\"stdio\"]\ntimeout_secs = 60\n\n[[connector]]\nname = \"down\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
            bin.to_str().unwrap()
        ),
    )
    .unwrap();
    let sub = home.project.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let run = |home: &TestHome| {
        let out = home
            .command(CAR)
            .current_dir(&sub)
            .env("CAR_PROJECT_DIR", &sub)
            .args(["--json", "connector", "sync"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["data"].clone()
    };
    let first = run(&home);
    assert_eq!(first["added"][0]["slug"], "everything", "{first}");
    assert_eq!(first["added"][0]["timeout_secs"], 60);
    assert_eq!(first["failed"][0]["slug"], "down");
    let second = run(&home);
    assert_eq!(second["skipped"], json!(["everything"]), "{second}");
    assert!(second["added"].as_array().unwrap().is_empty());
    let list = home.car_json(&["connector", "list"]);
    assert_eq!(list["connectors"].as_array().unwrap().len(), 1);
}

#[test]
fn concurrent_enables_from_many_processes_lose_nothing() {
    let home = TestHome::new();
    let added = add_everything_stdio(&home);
    let tools: Vec<String> = home.car_json(&["connector", "tools", "everything"])["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tools.len() as u64, added["tool_count"].as_u64().unwrap());
    // One process per tool, all at once, each enabling its own.
    let runs: Vec<Vec<String>> = tools
        .iter()
        .map(|tool| {
            ["connector", "enable", "everything", tool]
                .map(String::from)
                .to_vec()
        })
        .collect();
    home.car_all_at_once(&runs);
    let listed = home.car_json(&["connector", "list"]);
    assert_eq!(
        listed["connectors"][0]["enabled_count"],
        added["tool_count"]
    );
    let config: Value =
        serde_json::from_slice(&std::fs::read(home.home.join("connectors.json")).unwrap()).unwrap();
    assert_eq!(
        config["connectors"][0]["enabled"].as_array().unwrap().len(),
        tools.len()
    );
}
