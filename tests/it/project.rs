//! The project lifecycle through the real binaries: `car task|progress|decision|status|context|
//! checkpoint|resume`, the MCP tools that run the same commands in-process (their text must be
//! byte-equal to the CLI's stdout), and a ten-process claim race.

use std::process::Output;

use serde_json::{json, Value};

use crate::support::Peer as _;
use crate::support::{McpProcess, TestHome, CAR};

const AGENT: &str = "agent-7";

fn car(home: &TestHome, args: &[&str]) -> Output {
    home.command(CAR)
        .env("CAR_AGENT_ID", AGENT)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Timestamps, default checkpoint names and the temporary directory differ between two runs;
/// nothing else may.
fn normalize(text: &str, home: &TestHome) -> String {
    let tmp = home.project.parent().unwrap().to_str().unwrap();
    let text = &text.replace(tmp, "<tmp>");
    let ts = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z").unwrap();
    let cp = regex::Regex::new(r"cp-\d{8}-\d{6}(-\d+)?").unwrap();
    let duration = regex::Regex::new(r#""duration_ms":\d+"#).unwrap();
    // The MCP side's execution log names its session and client, so its file is larger.
    let db_bytes = regex::Regex::new(r#""db_bytes":\d+"#).unwrap();
    let text = ts.replace_all(text, "<ts>").into_owned();
    let text = cp.replace_all(&text, "cp-<ts>");
    let text = db_bytes.replace_all(&text, "\"db_bytes\":<n>");
    duration
        .replace_all(&text, "\"duration_ms\":<n>")
        .into_owned()
}

fn spawn_mcp(home: &TestHome) -> McpProcess {
    let mut command = home.command(crate::support::CAR_MCP);
    command.env("CAR_AGENT_ID", AGENT);
    let mut mcp = McpProcess::spawn(command);
    mcp.initialize();
    mcp
}

/// (tool, action, args) → the CLI words: `car <group> --json <action> <args…>`.
fn cli_words<'a>(tool: &str, action: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut words = vec!["--json"];
    if (tool, action) == ("project_admin", "prune") {
        words.extend(["project", "prune"]);
        words.extend(args.iter().copied());
        return words;
    }
    let group = match tool {
        "task_manager" => Some("task"),
        "progress_tracker" => Some("progress"),
        "decision_logger" => Some("decision"),
        "graph_explorer" => Some("graph"),
        "context_manager" | "project_admin" => None,
        other => panic!("no group for {other}"),
    };
    words.extend(group);
    words.push(action);
    words.extend(args.iter().copied());
    words
}

/// Calls of every project tool's actions, in an order that works on a fresh project, with
/// failures at the end: (tool, action, args).
fn steps() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "task_manager",
            "create",
            vec!["Fix retry logic", "--priority", "P1", "--label", "backend"],
        ),
        (
            "task_manager",
            "create",
            vec![
                "Ship 2.0",
                "--depends-on",
                "CTX-0001",
                "--description",
                "the release",
            ],
        ),
        ("task_manager", "create", vec!["Write docs"]),
        ("task_manager", "list", vec![]),
        ("task_manager", "list", vec!["--status", "ready"]),
        (
            "task_manager",
            "update",
            vec!["3", "--priority", "P0", "--label", "docs"],
        ),
        ("task_manager", "claim", vec![]),
        (
            "task_manager",
            "block",
            vec!["CTX-0003", "--reason", "waiting for review"],
        ),
        ("task_manager", "unblock", vec!["CTX-0003"]),
        (
            "task_manager",
            "claim",
            vec!["CTX-0001", "--agent", "other"],
        ),
        (
            "task_manager",
            "complete",
            vec!["CTX-0001", "--note", "merged"],
        ),
        ("task_manager", "show", vec!["CTX-0002"]),
        (
            "progress_tracker",
            "create",
            vec!["CI is down", "--task", "CTX-0003", "--blocker"],
        ),
        ("progress_tracker", "create", vec!["docs outline done"]),
        (
            "progress_tracker",
            "update",
            vec!["2", "--body", "docs outline reviewed"],
        ),
        (
            "progress_tracker",
            "resolve",
            vec!["1", "--resolution", "runner restarted"],
        ),
        ("progress_tracker", "list", vec!["--status", "all"]),
        (
            "decision_logger",
            "record",
            vec![
                "Use SQLite",
                "--decision",
                "one WAL database",
                "--context",
                "many processes write",
            ],
        ),
        (
            "decision_logger",
            "record",
            vec![
                "Shard",
                "--decision",
                "per project",
                "--supersedes",
                "ADR-0001",
                "--status",
                "proposed",
            ],
        ),
        ("decision_logger", "list", vec!["--search", "process"]),
        (
            "decision_logger",
            "resolve",
            vec!["ADR-0002", "--status", "rejected", "--note", "too early"],
        ),
        ("decision_logger", "list", vec!["--status", "all"]),
        (
            "context_manager",
            "checkpoint",
            vec!["before-docs", "--note", "half way"],
        ),
        ("context_manager", "checkpoint", vec![]),
        ("task_manager", "create", vec!["Later"]),
        ("context_manager", "status", vec![]),
        ("context_manager", "context", vec!["--query", "retry logic"]),
        ("context_manager", "resume", vec!["before-docs"]),
        ("context_manager", "doctor", vec![]),
        (
            "project_admin",
            "config",
            vec!["set", "context.max_ready", "5"],
        ),
        ("project_admin", "config", vec!["get", "context.max_ready"]),
        ("project_admin", "config", vec!["list"]),
        ("project_admin", "stats", vec![]),
        ("project_admin", "project", vec!["show"]),
        ("project_admin", "prune", vec!["--dry-run"]),
        ("project_admin", "config", vec!["set", "nope", "1"]),
        (
            "graph_explorer",
            "add-node",
            vec![
                "payments",
                "--kind",
                "service",
                "--label",
                "the payout service",
            ],
        ),
        (
            "graph_explorer",
            "add-node",
            vec!["ledger", "--kind", "service"],
        ),
        (
            "graph_explorer",
            "link",
            vec!["payments", "ledger", "--kind", "calls"],
        ),
        ("graph_explorer", "edges", vec!["payments"]),
        ("graph_explorer", "export", vec!["--format", "mermaid"]),
        ("graph_explorer", "export", vec!["--format", "dot"]),
        ("graph_explorer", "scan", vec![]),
        ("graph_explorer", "edges", vec!["src/lib.rs"]),
        ("graph_explorer", "edges", vec!["nowhere.rs"]),
        // Failures: the same stdout, and stderr after the marker.
        ("task_manager", "claim", vec!["CTX-0003"]),
        ("task_manager", "show", vec!["CTX-0099"]),
        ("task_manager", "create", vec!["x", "--priority", "P9"]),
        ("task_manager", "list", vec!["--bogus"]),
    ]
}

#[test]
fn every_mcp_action_prints_what_the_cli_prints() {
    let cli_home = TestHome::new();
    let mcp_home = TestHome::new();
    // Same project directory name, so names in the output agree; the same files to scan.
    for home in [&cli_home, &mcp_home] {
        std::fs::create_dir_all(home.project.join("src")).unwrap();
        std::fs::write(home.project.join("src/lib.rs"), "mod a;\n").unwrap();
        std::fs::write(home.project.join("src/a.rs"), "pub fn f() {}\n").unwrap();
    }
    let mut mcp = spawn_mcp(&mcp_home);
    let steps = steps();
    for (tool, action, args) in &steps {
        let out = car(&cli_home, &cli_words(tool, action, args));
        let result = mcp.call(tool, json!({"action": action, "args": args}));
        let text = result["content"][0]["text"].as_str().unwrap();
        let expected = if out.status.success() {
            assert_eq!(result["isError"], false, "{tool} {action} {args:?}: {text}");
            stdout(&out)
        } else {
            assert_eq!(result["isError"], true, "{tool} {action} {args:?}: {text}");
            format!(
                "{}--- STDERR ---\n{}",
                stdout(&out),
                String::from_utf8_lossy(&out.stderr)
            )
        };
        assert_eq!(
            normalize(text, &mcp_home),
            normalize(&expected, &cli_home),
            "{tool} {action} {args:?}"
        );
        if out.status.success() {
            let doc: Value = serde_json::from_str(text).unwrap();
            assert_eq!(doc["success"], true);
        }
    }
    // The MCP side really wrote its own data: the CLI of its home sees it.
    let mcp_list = car(&mcp_home, &["--json", "task", "list", "--status", "all"]);
    let tasks: Value = serde_json::from_slice(&mcp_list.stdout).unwrap();
    assert_eq!(tasks["data"].as_array().unwrap().len(), 4);
    // Flags that would leave the server's home or project are refused.
    let refused = mcp.call(
        "task_manager",
        json!({"action": "list", "args": ["--home", "/tmp"]}),
    );
    assert_eq!(refused["isError"], true);
    mcp.finish();
}

#[test]
fn every_project_tool_answers_typed_data_its_output_schema_describes() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.project.join("src")).unwrap();
    std::fs::write(home.project.join("src/lib.rs"), "mod a;\n").unwrap();
    std::fs::write(home.project.join("src/a.rs"), "pub fn f() {}\n").unwrap();
    let mut mcp = spawn_mcp(&home);
    let tools = mcp.tools();
    for tool in &tools {
        assert!(
            tool["outputSchema"].is_object(),
            "{} declares no outputSchema",
            tool["name"]
        );
    }
    let mut checked = std::collections::BTreeSet::new();
    for (tool, action, args) in steps() {
        let result = mcp.call(tool, json!({"action": action, "args": args}));
        let text = result["content"][0]["text"].as_str().unwrap();
        if result["isError"] == true {
            // A failure carries its envelope's code, and no structured content.
            assert!(result.get("structuredContent").is_none(), "{result}");
            let code = result["_meta"]["car/error"]["code"].as_str().unwrap();
            if let Some((envelope, _)) = text.split_once("--- STDERR ---") {
                if !envelope.is_empty() {
                    let doc: Value = serde_json::from_str(envelope).unwrap();
                    assert_eq!(doc["error"]["code"], code, "{tool} {action} {args:?}");
                }
            }
            continue;
        }
        // The structured content is the envelope the text holds, and its schema describes it.
        let structured = &result["structuredContent"];
        assert_eq!(
            structured,
            &serde_json::from_str::<Value>(text).unwrap(),
            "{tool} {action}"
        );
        crate::mcp::assert_matches_output_schema(&tools, tool, structured);
        checked.insert(format!("{tool} {action}"));
    }
    // Every action of every tool was checked at least once.
    for expected in [
        "task_manager list",
        "task_manager create",
        "task_manager update",
        "task_manager claim",
        "task_manager complete",
        "task_manager block",
        "task_manager unblock",
        "task_manager show",
        "progress_tracker list",
        "progress_tracker create",
        "progress_tracker update",
        "progress_tracker resolve",
        "decision_logger list",
        "decision_logger record",
        "decision_logger resolve",
        "context_manager status",
        "context_manager context",
        "context_manager checkpoint",
        "context_manager resume",
        "context_manager doctor",
        "project_admin stats",
        "project_admin prune",
        "project_admin config",
        "project_admin project",
        "graph_explorer scan",
        "graph_explorer edges",
        "graph_explorer link",
        "graph_explorer add-node",
        "graph_explorer export",
    ] {
        assert!(
            checked.contains(expected),
            "{expected} not checked: {checked:?}"
        );
    }
    mcp.finish();
}

#[test]
fn tasks_end_to_end_with_cycles_refused_and_dependents_released() {
    let home = TestHome::new();
    for title in ["schema", "api", "ui"] {
        assert!(car(&home, &["task", "create", title]).status.success());
    }
    assert!(car(&home, &["task", "dep", "add", "2", "1"])
        .status
        .success());
    assert!(car(&home, &["task", "dep", "add", "3", "2"])
        .status
        .success());
    let cycle = car(&home, &["--json", "task", "dep", "add", "1", "3"]);
    assert_eq!(cycle.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&cycle.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "conflict");
    assert_eq!(
        doc["error"]["message"],
        "that dependency would close a cycle: CTX-0001 → CTX-0003 → CTX-0002 → CTX-0001"
    );
    let ready = |home: &TestHome| -> Vec<String> {
        home.car_json(&["task", "list", "--status", "ready"])
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["displayId"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ready(&home), ["CTX-0001"]);
    assert!(car(&home, &["task", "complete", "1"]).status.success());
    assert_eq!(ready(&home), ["CTX-0002"]);
    let table = stdout(&car(&home, &["task", "list"]));
    assert!(table.starts_with("ID        PRI  STATUS"), "{table}");
    assert!(table.contains("CTX-0003  P2   waiting on 1  ui"), "{table}");
    let shown = home.car_json(&["task", "show", "CTX-0002"]);
    assert_eq!(shown["dependsOn"][0]["displayId"], "CTX-0001");
    assert_eq!(shown["blocks"][0]["displayId"], "CTX-0003");
    // Bad input: exit 2, nothing written.
    let bad = car(&home, &["--json", "task", "create", " "]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        home.car_json(&["task", "list", "--status", "all"])
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let unknown = car(&home, &["task", "list", "--status", "someday"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("use ready, open"));
}

#[test]
fn ten_processes_claiming_one_task_have_exactly_one_winner() {
    let home = TestHome::new();
    assert!(car(&home, &["task", "create", "contended"])
        .status
        .success());
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(10));
    let racers: Vec<_> = (0..10)
        .map(|i| {
            let mut cmd = home.command(CAR);
            cmd.args([
                "--json",
                "task",
                "claim",
                "CTX-0001",
                "--agent",
                &format!("racer-{i}"),
            ]);
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                cmd.output().unwrap()
            })
        })
        .collect();
    let outputs: Vec<Output> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    let winners: Vec<&Output> = outputs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(winners.len(), 1, "{outputs:?}");
    let won: Value = serde_json::from_slice(&winners[0].stdout).unwrap();
    let winner = won["data"]["claimedBy"].as_str().unwrap().to_string();
    for out in outputs.iter().filter(|o| !o.status.success()) {
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["error"]["code"], "conflict");
        assert_eq!(
            doc["error"]["message"],
            format!("CTX-0001 is already claimed by {winner}")
        );
    }
    let shown = home.car_json(&["task", "show", "1"]);
    let claims = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "claimed")
        .count();
    assert_eq!(claims, 1);
}
