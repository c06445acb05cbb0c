//! The real Codex CLI and Gemini CLI (pinned from npm, offline), wired with `car setup <host>`
//! in a throwaway home, each driven by a scripted model server of its API on loopback
//! (`tests/it/py/responses_model.py`: the OpenAI Responses API; `gemini_model.py`: the Gemini
//! API). The model is the one part that cannot run here: the server answers the host's main loop
//! with a fixed list of tool calls, one per turn; the host itself runs CAR's hook before each call,
//! launches car-mcp and calls its tools. Checked for each host:
//! - a model asking to `rm -rf ~` is denied with CAR's reason;
//! - a model asking to read a secret file is denied, and the secret never reaches the model;
//! - an allowed command runs;
//! - `memory_add_fact` then `memory_query` go round through the host's MCP client;
//! - the session-start hook brings the project's briefing (its ready task) to the model.
//!
//! The CLIs come from `scripts/test.sh` (into `tools/`). Codex runs a hook only once the user has
//! trusted it in `/hooks`; the test passes `--dangerously-bypass-hook-trust` for that one run.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::preset::project_home;
use crate::support::TestHome;

pub const CODEX_VERSION: &str = "0.169.0";
pub const GEMINI_VERSION: &str = "0.61.0";
const SECRETS: [&str; 2] = ["sk-live-123", "sk-live-456"];
const FACT: &str = "zebra-cluster-42";
const TASK: &str = "Wire the quokka billing webhook";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A host's CLI under `tools/`; panics with how to install it when it is missing.
fn host_bin(name: &str, package: &str, version: &str) -> PathBuf {
    let path = repo().join("tools/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{name} is not installed at {}: run scripts/test.sh (it installs it), or \
         `npm install --prefix tools --save-exact {package}@{version}`",
        path.display()
    );
    path
}

/// The scripted model server: a Python process serving one API on 127.0.0.1.
struct Model {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Model {
    fn start(server: &str, dir: &Path, script: &Value) -> Model {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
        let child = Command::new("python3")
            .arg(repo().join("tests/it/py").join(server))
            .args(["--script", "script.json", "--record", "requests.jsonl"])
            .args(["--port-file", "port.txt", "--quiet"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(dir.join("port.txt")) {
                if let Ok(port) = text.trim().parse() {
                    break port;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{server} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Model {
            child,
            dir: dir.to_path_buf(),
            port,
        }
    }

    /// Every request the server received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The result the host sent back for `call_id` (in the first main-loop request that carries
/// it), as text.
fn result_of(requests: &[Value], call_id: &str) -> Option<String> {
    requests
        .iter()
        .filter(|r| r["kind"].as_str().is_some_and(|k| k.starts_with("main")))
        .find_map(|r| {
            let body = &r["body"];
            let codex = body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|item| {
                    (item["type"]
                        .as_str()
                        .is_some_and(|t| t.ends_with("_output"))
                        && item["call_id"] == call_id)
                        .then(|| match &item["output"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                });
            let gemini = body["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["parts"].as_array().into_iter().flatten())
                .find_map(|part| {
                    let response = &part["functionResponse"];
                    (response["id"] == call_id).then(|| response["response"].to_string())
                });
            codex.or(gemini)
        })
}

/// A project with two secret files, under git, governed by the recommended preset; CAR wired
/// into `host` by `car setup <host> --yes` for the throwaway user.
fn wired_project(host: &str) -> TestHome {
    let home = project_home();
    let project = &home.project;
    assert!(Command::new("git")
        .args(["init", "-q"])
        .current_dir(project)
        .status()
        .unwrap()
        .success());
    std::fs::write(project.join(".env"), format!("SECRET={}\n", SECRETS[0])).unwrap();
    std::fs::write(
        project.join(".env.local"),
        format!("SECRET={}\n", SECRETS[1]),
    )
    .unwrap();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    // Ready work, for the session-start briefing the memory hook gives the model.
    home.car_json(&["task", "create", TASK]);
    let data = home.car_json(&["setup", host, "--yes"]);
    assert_eq!(data["applied"], true, "{data}");
    home
}

/// Runs a host's CLI in the project with only the environment it needs.
fn run_host(home: &TestHome, argv: &[&str], env: &[(&str, String)]) -> (bool, String) {
    let tools = repo().join("tools/node_modules/.bin");
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&home.project)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display()),
        )
        .env("HOME", home.user_home())
        .env("CAR_HOME", &home.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let status = crate::support::wait_within(&mut child, RUN_TIMEOUT);
    let mut log = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    (status.is_some_and(|s| s.success()), log)
}

/// The four checks, on what the model server saw and what the project holds.
fn check(home: &TestHome, model: &Model, log: &str, calls: &Calls) {
    let requests = model.requests();
    let context = format!(
        "{log}\n{}",
        serde_json::to_string_pretty(&requests).unwrap_or_default()
    );
    let denied =
        result_of(&requests, calls.rm).unwrap_or_else(|| panic!("no result for rm: {context}"));
    assert!(
        denied.contains("CAR policy: deny_command:"),
        "rm -rf ~: {denied}"
    );
    for read in &calls.reads {
        let result = result_of(&requests, read).unwrap_or_else(|| panic!("no result for {read}"));
        assert!(
            !SECRETS.iter().any(|s| result.contains(s)),
            "{read}: {result}"
        );
    }
    assert!(
        calls.reads.iter().any(|read| result_of(&requests, read)
            .is_some_and(|r| r.contains("CAR policy: deny_") && r.contains("read-secret"))),
        "no read was denied by CAR: {context}"
    );
    let everything = serde_json::to_string(&requests).unwrap();
    // The session-start hook car setup wired brought the project's briefing to the model.
    assert!(
        everything.contains("CAR briefing") && everything.contains(TASK),
        "no briefing reached the model: {context}"
    );
    for secret in SECRETS {
        assert!(!everything.contains(secret), "{secret} reached the model");
    }
    assert_eq!(
        std::fs::read_to_string(home.project.join("allowed.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "the allowed command did not run: {log}"
    );
    let query =
        result_of(&requests, calls.query).unwrap_or_else(|| panic!("no query result: {context}"));
    assert!(query.contains(FACT), "memory_query: {query}");
    assert!(home.user_home().join(".gemini").exists() || home.user_home().join(".codex").exists());
}

struct Calls {
    rm: &'static str,
    reads: Vec<&'static str>,
    query: &'static str,
}

#[test]
fn codex_runs_cars_gate_and_memory_once_car_setup_wired_it() {
    let codex = host_bin("codex", "@openai/codex", CODEX_VERSION);
    let home = wired_project("codex");
    let config = std::fs::read_to_string(home.user_home().join(".codex/config.toml")).unwrap();
    assert!(config.contains("car-gate --host codex"), "{config}");
    let model = Model::start(
        "responses_model.py",
        &home.project.parent().unwrap().join("model"),
        &json!({"calls": [
            {"name": "$shell", "arguments": {"command": "rm -rf ~"}},
            {"name": "$shell", "arguments": {"command": "cat .env"}},
            {"name": "$shell", "arguments": {"command": "echo ok > allowed.txt"}},
            {"name": "mcp__car__memory_add_fact", "arguments": {"subject": "deploy-target", "body": format!("Deploys go to the {FACT} region.")}},
            {"name": "mcp__car__memory_query", "arguments": {"query": "where do deploys go", "k": 5}}
        ], "final": "all done", "side": "ok"}),
    );
    let argv = codex_argv(&codex, model.port, "scripted-model");
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (ok, log) = run_host(&home, &argv, &[("SCRIPTED_API_KEY", "dummy".into())]);
    assert!(ok, "codex exec failed: {log}");
    check(
        &home,
        &model,
        &log,
        &Calls {
            rm: "call_1",
            reads: vec!["call_2"],
            query: "call_5",
        },
    );
}

#[test]
fn gemini_cli_runs_cars_gate_and_memory_once_car_setup_wired_it() {
    let gemini = host_bin("gemini", "@google/gemini-cli", GEMINI_VERSION);
    let home = wired_project("gemini");
    // What makes Gemini CLI headless and offline, beside what car setup wrote (kept).
    let settings_path = home.user_home().join(".gemini/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_path).unwrap()).unwrap();
    assert!(settings["hooks"]["BeforeTool"].is_array(), "{settings}");
    settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
    settings["privacy"] = json!({"usageStatisticsEnabled": false});
    settings["telemetry"] = json!({"enabled": false});
    settings["general"] = json!({"enableAutoUpdate": false, "enableAutoUpdateNotification": false});
    std::fs::write(
        &settings_path,
        serde_json::to_string_pretty(&settings).unwrap(),
    )
    .unwrap();
    std::fs::write(
        home.user_home().join(".gemini/trustedFolders.json"),
        json!({home.project.to_string_lossy(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    let model = Model::start(
        "gemini_model.py",
        &home.project.parent().unwrap().join("model"),
        &json!({"calls": [
            {"name": "run_shell_command", "arguments": {"command": "rm -rf ~", "description": "scripted"}},
            // Gemini refuses `.env` itself before any hook; `.env.local` reaches CAR.
            {"name": "read_file", "arguments": {"file_path": ".env.local"}},
            {"name": "run_shell_command", "arguments": {"command": "cat .env", "description": "scripted"}},
            {"name": "run_shell_command", "arguments": {"command": "echo ok > allowed.txt", "description": "scripted"}},
            {"name": "mcp_car_memory_add_fact", "arguments": {"subject": "deploy-target", "body": format!("Deploys go to the {FACT} region.")}},
            {"name": "mcp_car_memory_query", "arguments": {"query": "where do deploys go", "k": 5}}
        ], "final": "all done", "side": "ok"}),
    );
    let gemini = gemini.to_string_lossy().into_owned();
    let argv = [
        gemini.as_str(),
        "-p",
        "Follow the scripted plan.",
        "--approval-mode",
        "yolo",
        // An explicit model: no routing request before the main loop.
        "-m",
        "gemini-2.5-flash",
    ];
    let env = [
        ("GEMINI_API_KEY", "dummy".to_string()),
        (
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        ),
    ];
    let (ok, log) = run_host(&home, &argv, &env);
    assert!(ok, "gemini failed: {log}");
    check(
        &home,
        &model,
        &log,
        &Calls {
            rm: "call_1",
            reads: vec!["call_2", "call_3"],
            query: "call_6",
        },
    );
}

/// `codex exec` against the scripted provider on `port`, with `model`'s slug. An unknown slug
/// makes Codex offer the MCP tools directly; a known one (gpt-5.5) offers `apply_patch` and
/// defers the MCP tools behind its tool search. The provider comes on the command line: the
/// config file is what car setup wrote.
fn codex_argv(codex: &Path, port: u16, model: &str) -> Vec<String> {
    let provider = format!(
        "model_providers.scripted={{name=\"scripted\",base_url=\"http://127.0.0.1:{port}/v1\",wire_api=\"responses\",env_key=\"SCRIPTED_API_KEY\",request_max_retries=0,stream_max_retries=0}}"
    );
    [
        codex.to_string_lossy().as_ref(),
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "-c",
        "approval_policy=\"never\"",
        "-c",
        &format!("model=\"{model}\""),
        "-c",
        "model_provider=\"scripted\"",
        "-c",
        &provider,
        "-c",
        "analytics.enabled=false",
        "-c",
        "check_for_update_on_startup=false",
        "--dangerously-bypass-hook-trust",
        "--color",
        "never",
        "Follow the scripted plan.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Codex's own `apply_patch` tool: a patch that deletes the project's rules is denied by CAR
/// (and the rules stay), an ordinary patch is applied.
#[test]
fn codex_patches_are_judged_file_by_file() {
    let codex = host_bin("codex", "@openai/codex", CODEX_VERSION);
    let home = wired_project("codex");
    let rules = home.project.join(".car/policies/recommended.toml");
    assert!(rules.exists());
    let model = Model::start(
        "responses_model.py",
        &home.project.parent().unwrap().join("model"),
        &json!({"calls": [
            {"name": "apply_patch", "type": "custom_tool_call",
             "input": "*** Begin Patch\n*** Add File: notes/a.md\n+fine\n*** Delete File: .car/policies/recommended.toml\n*** End Patch\n"},
            {"name": "apply_patch", "type": "custom_tool_call",
             "input": "*** Begin Patch\n*** Add File: notes/b.md\n+hello from a patch\n*** End Patch\n"}
        ], "final": "all done", "side": "ok"}),
    );
    let argv = codex_argv(&codex, model.port, "gpt-5.5");
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (ok, log) = run_host(&home, &argv, &[("SCRIPTED_API_KEY", "dummy".into())]);
    assert!(ok, "codex exec failed: {log}");
    let requests = model.requests();
    let denied = result_of(&requests, "call_1").unwrap_or_else(|| panic!("no result: {log}"));
    assert!(denied.contains("CAR policy"), "{denied}");
    assert!(rules.exists(), "the rules were deleted");
    assert!(
        !home.project.join("notes/a.md").exists(),
        "a denied patch was applied in part"
    );
    assert_eq!(
        std::fs::read_to_string(home.project.join("notes/b.md"))
            .ok()
            .as_deref(),
        Some("hello from a patch\n"),
        "{log}"
    );
}
