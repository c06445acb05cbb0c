//! Shared test support: a temporary CAR home and project, the real `car` binary, and an
//! `McpProcess` that drives a real `car-mcp` over stdio and checks every stdout line is JSON-RPC.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub const CAR: &str = env!("CARGO_BIN_EXE_car");
pub const CAR_GATE: &str = env!("CARGO_BIN_EXE_car-gate");
pub const CAR_MCP: &str = env!("CARGO_BIN_EXE_car-mcp");
pub const CAR_SERVER: &str = env!("CARGO_BIN_EXE_car-server");

/// How long a test waits for one answer before failing.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The embedding example binary (cargo builds examples for `cargo test`).
pub fn example_bin(name: &str) -> PathBuf {
    let exe = Path::new(CAR);
    exe.parent().unwrap().join("examples").join(name)
}

/// A temporary CAR_HOME and project directory.
pub struct TestHome {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl TestHome {
    pub fn new() -> TestHome {
        TestHome::from_dir(tempfile::tempdir().unwrap())
    }

    /// A home and project under `parent` (e.g. outside `/tmp`, for rules that treat `/tmp`
    /// as scratch space).
    pub fn new_in(parent: &Path) -> TestHome {
        std::fs::create_dir_all(parent).unwrap();
        TestHome::from_dir(tempfile::tempdir_in(parent).unwrap())
    }

    fn from_dir(dir: tempfile::TempDir) -> TestHome {
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(".car")).unwrap();
        TestHome {
            _dir: dir,
            home,
            project,
        }
    }

    /// A second project directory under the same temp root.
    pub fn other_project(&self, name: &str) -> PathBuf {
        let dir = self.project.parent().unwrap().join(name);
        std::fs::create_dir_all(dir.join(".car")).unwrap();
        dir
    }

    /// `bin` in the project, hermetic: `CAR_HOME` is this test's, `HOME`, `USER` and the
    /// `XDG_*` directories are pinned under the temp root (so `~` in a rule, a keychain or a
    /// config file is never the developer's), and no `CAR_*`, D-Bus or log variable is
    /// inherited. A test that needs one (a keyring's bus, `CAR_SECRET_STORE`) sets it after.
    pub fn command(&self, bin: &str) -> Command {
        let mut cmd = Command::new(bin);
        let user_home = self.user_home();
        cmd.current_dir(&self.project);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CAR_") || name.starts_with("XDG_") || name.starts_with("DBUS_") {
                cmd.env_remove(name.as_ref());
            }
        }
        cmd.env("CAR_HOME", &self.home)
            .env("HOME", &user_home)
            .env("USER", "car-test")
            .env("LOGNAME", "car-test")
            .env("XDG_CONFIG_HOME", user_home.join(".config"))
            .env("XDG_DATA_HOME", user_home.join(".local/share"))
            .env("XDG_CACHE_HOME", user_home.join(".cache"))
            .env("XDG_STATE_HOME", user_home.join(".local/state"))
            .env_remove("RUST_LOG");
        cmd
    }

    /// The pinned `HOME` of the commands this test runs (created on first use).
    pub fn user_home(&self) -> PathBuf {
        let dir = self.project.parent().unwrap().join("user-home");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Runs `car ARGS` in the project.
    pub fn car(&self, args: &[&str]) -> Output {
        self.command(CAR).args(args).output().unwrap()
    }

    /// Runs `car --json ARGS`, expects success and returns `data`.
    pub fn car_json(&self, args: &[&str]) -> Value {
        let out = self.command(CAR).arg("--json").args(args).output().unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "car {args:?}: stdout is not JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(
            out.status.success(),
            "car {args:?} failed: {doc}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(doc["success"], true, "{doc}");
        assert_eq!(doc["schema_version"], 1);
        doc["data"].clone()
    }

    /// How many current untenanted entries this project sees.
    /// `car executions ARGS` and the tools of its rows, newest first.
    pub fn executions(&self, args: &[&str]) -> (Value, Vec<String>) {
        let mut words = vec!["executions"];
        words.extend_from_slice(args);
        let log = self.car_json(&words);
        let tools = log["executions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["tool"].as_str().unwrap().to_string())
            .collect();
        (log, tools)
    }

    pub fn entry_count(&self) -> u64 {
        self.car_json(&["memory", "export", "-o", "-"])["count"]
            .as_u64()
            .unwrap()
    }

    /// Runs `car policy-check-hook` with `payload` on stdin, as Claude Code does.
    pub fn hook(&self, payload: &[u8]) -> Output {
        let mut child = self
            .command(CAR)
            .arg("policy-check-hook")
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs `car ARGS` with `input` on stdin.
    pub fn car_with_input(&self, args: &[&str], input: &[u8]) -> Output {
        output_with_input(self.command(CAR).args(args), input)
    }

    /// Runs `car-gate ARGS` with `input` on stdin.
    pub fn gate_with_input(&self, args: &[&str], input: &[u8]) -> Output {
        output_with_input(self.command(CAR_GATE).args(args), input)
    }

    /// Starts `car ARGS` once per argument list, all at once, and asserts every one succeeded.
    pub fn car_all_at_once(&self, runs: &[Vec<String>]) {
        let children: Vec<_> = runs
            .iter()
            .map(|args| {
                self.command(CAR)
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (child, args) in children.into_iter().zip(runs) {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "car {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    pub fn spawn_mcp(&self) -> McpProcess {
        McpProcess::spawn(self.command(CAR_MCP))
    }
}

/// An MCP server a suite runs against whatever carries it: car-mcp over stdio on SQLite, or a
/// team server over HTTP on PostgreSQL.
pub trait Peer {
    /// Sends a request and returns the whole JSON-RPC response.
    fn request(&mut self, method: &str, params: Value) -> Value;

    /// The protocol revision it speaks (car-mcp here: the one `initialize` asked for).
    fn revision(&self) -> &'static str {
        "2025-11-25"
    }

    /// The server's tool declarations (`tools/list`).
    fn tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Calls a tool and returns the `result` (panics on a JSON-RPC error).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(response.get("error").is_none(), "{tool}: {response}");
        response["result"].clone()
    }

    /// Calls a tool that must succeed and returns its structured content.
    fn call_ok(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments);
        assert_eq!(result["isError"], false, "{tool}: {result}");
        result["structuredContent"].clone()
    }
}

impl Peer for McpProcess {
    fn request(&mut self, method: &str, params: Value) -> Value {
        McpProcess::request(self, method, params)
    }
}

/// A real MCP server process speaking newline-delimited JSON-RPC.
pub struct McpProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    violations: Arc<Mutex<Vec<String>>>,
    next_id: i64,
    pending: Vec<Value>,
    stderr: tempfile::NamedTempFile,
}

impl McpProcess {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Spawns with `RUST_LOG=debug`, so a log line on stdout would break the stream check.
    pub fn spawn(mut command: Command) -> McpProcess {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        command
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr.reopen().unwrap()));
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, rx) = channel();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let seen = violations.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v["jsonrpc"] == "2.0" => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    _ => seen.lock().unwrap().push(line),
                }
            }
        });
        McpProcess {
            child,
            stdin,
            lines: rx,
            violations,
            next_id: 1,
            pending: Vec::new(),
            stderr,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Sends a request and returns its id without waiting.
    pub fn start(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Waits for the response with this id (messages for other ids are kept).
    pub fn wait(&mut self, id: &Value) -> Value {
        if let Some(i) = self.pending.iter().position(|m| &m["id"] == id) {
            return self.pending.remove(i);
        }
        loop {
            let message = self.lines.recv_timeout(ANSWER_TIMEOUT).unwrap_or_else(|e| {
                panic!(
                    "no answer for id {id} ({e}); server stderr tail:\n{}",
                    self.stderr_tail()
                )
            });
            if &message["id"] == id && message.get("method").is_none() {
                return message;
            }
            self.pending.push(message);
        }
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start(method, params);
        self.wait(&json!(id))
    }

    /// Waits up to `timeout` for a notification with this method (other messages are kept).
    pub fn wait_notification(&mut self, method: &str, timeout: Duration) -> Option<Value> {
        if let Some(i) = self.pending.iter().position(|m| m["method"] == method) {
            return Some(self.pending.remove(i));
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let message = self.lines.recv_timeout(left).ok()?;
            if message["method"] == method && message.get("id").is_none() {
                return Some(message);
            }
            self.pending.push(message);
        }
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn initialize_with(&mut self, version: &str) -> Value {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "car-tests", "version": "1"}}),
        );
        self.notify("notifications/initialized", json!({}));
        response
    }

    pub fn initialize(&mut self) -> Value {
        self.initialize_with("2025-11-25")
    }

    /// The last lines the server logged (RUST_LOG=debug), for failure messages.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.stderr.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Panics if anything but JSON-RPC reached stdout.
    pub fn assert_clean_stdout(&self) {
        let violations = self.violations.lock().unwrap();
        assert!(
            violations.is_empty(),
            "non-JSON-RPC bytes on stdout: {violations:?}"
        );
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(mut self) {
        self.stdin.take();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "server exited with {status}");
        self.assert_clean_stdout();
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for McpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `tests/it/snapshots/NAME`, or writes it when `CAR_UPDATE_SNAPSHOTS=1`.
pub fn assert_snapshot(name: &str, actual: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/snapshots")
        .join(name);
    let pretty = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("CAR_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with CAR_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    let expected: Value = serde_json::from_str(&expected).unwrap();
    assert_eq!(
        &expected, actual,
        "snapshot {name} differs; if intended, rerun with CAR_UPDATE_SNAPSHOTS=1"
    );
}

/// A child process that is killed and reaped when this guard goes (a test's server must not
/// outlive it, whatever assertion fails first).
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` with `input` on its stdin and its output captured (a program that exits without
/// reading its input is not an error).
pub fn output_with_input(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    match child.stdin.take().unwrap().write_all(input) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    child.wait_with_output().unwrap()
}

/// Waits for `child` at most `limit`; kills it past that and returns `None`.
pub fn wait_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
