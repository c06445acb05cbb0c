//! The `car` command line, end to end with a fresh CAR_HOME.

use serde_json::{json, Value};

use crate::support::TestHome;

#[test]
fn version_and_help_teach() {
    let home = TestHome::new();
    let out = home.car(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("car {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = String::from_utf8_lossy(&home.car(&["memory", "add", "--help"]).stdout).to_string();
    assert!(
        help.contains("Examples:") && help.contains("--global"),
        "{help}"
    );
}

#[test]
fn a_relative_car_home_is_a_usage_error() {
    let home = TestHome::new();
    let out = home
        .command(crate::support::CAR)
        .env("CAR_HOME", "relative/home")
        .args(["memory", "query", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAR_HOME must be an absolute path"));
    let out = home
        .command(crate::support::CAR_MCP)
        .env("CAR_HOME", "relative/home")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn memory_query_finds_a_fact_through_a_bridge_and_says_why() {
    let home = TestHome::new();
    for (subject, body) in [
        (
            "invoice rendering worker codename",
            "Falcon is the codename of the invoice rendering worker.",
        ),
        (
            "Falcon stack",
            "Falcon runs headless Chromium and needs assets/fonts embedded.",
        ),
        (
            "worker pool",
            "The worker pool depends on the queue depth at runtime.",
        ),
        ("lint", "Run clippy before pushing."),
    ] {
        home.car_json(&["memory", "add", subject, body]);
    }
    let question = "what does the invoice rendering worker depend on at runtime?";
    let found = home.car_json(&["memory", "query", question]);
    let results = found["results"].as_array().unwrap();
    let answer = results
        .iter()
        .find(|r| r["id"] == "fact-2")
        .unwrap_or_else(|| panic!("the answer is missing: {found:#}"));
    assert_eq!(
        answer["why"],
        json!({"matched": [], "via": {"id": "fact-1", "subject": "invoice rendering worker codename", "through": "falcon"}})
    );
    assert_eq!(results[0]["id"], "fact-1");
    assert_eq!(
        results[0]["why"]["matched"],
        json!(["invoice", "rendering", "worker"])
    );
    assert!(
        results.iter().all(|r| r["id"] != "fact-4"),
        "nothing ties the lint fact to it"
    );
    let out = home.car(&["memory", "query", question]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("why: via fact-1 \"falcon\""), "{text}");
    assert!(
        text.contains("why: matched invoice, rendering, worker"),
        "{text}"
    );
}

#[test]
fn memory_commands_cover_every_tool_with_the_envelope() {
    let home = TestHome::new();
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "memory", "add", "ci", "CI runs cargo nextest"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc,
        json!({"schema_version": 1, "command": "memory.add", "success": true, "data": {
            "id": "fact-1", "kind": "pattern", "subject": "ci", "scope": "project", "tenant_id": null,
            "superseded": [], "invalidated": [], "links": 0, "fact_count": 1, "durable": true}})
    );
    let replaced = home.car_json(&[
        "memory",
        "add",
        "CI",
        "CI runs cargo test",
        "--kind",
        "constraint",
    ]);
    assert_eq!(
        replaced["superseded"],
        json!(["fact-1"]),
        "same subject, case-insensitive"
    );
    let query = home.car_json(&["memory", "query", "what does ci run", "-k", "3"]);
    assert_eq!(query["results"].as_array().unwrap().len(), 1);
    assert_eq!(query["results"][0]["id"], "fact-2");

    let status = home.car_json(&["memory", "status", "halfway through the migration"]);
    assert_eq!(status["id"], "proactive-status:global");
    let knowledge = home.car_json(&[
        "memory",
        "knowledge",
        "oncall",
        "Page the payments oncall for ledger drift",
        "--tag",
        "ops",
        "--confidence",
        "high",
    ]);
    assert_eq!(knowledge["kind"], "knowledge");
    let procedure = home.car_json(&[
        "memory",
        "procedure",
        "ledger drift",
        "Rerun the reconciler with --full after a ledger drift alert",
    ]);
    let inject = home.car_json(&[
        "memory",
        "intervene",
        "--query",
        "ledger drift alert again",
        "--repeated-failures",
        "2",
    ]);
    assert_eq!(inject["decision"], "inject", "{inject}");
    assert_eq!(inject["selected"]["id"], procedure["id"]);

    let cases = home.project.join("cases.json");
    std::fs::write(&cases, json!([{"id": "a", "request": {"query": "ledger drift", "trigger": {"tool_error": true}}, "relevant_fact_ids": [procedure["id"]]}]).to_string()).unwrap();
    let evaluation = home.car_json(&["memory", "evaluate", cases.to_str().unwrap()]);
    assert_eq!(evaluation["selective"]["precision"], 1.0);

    let show = home.car_json(&["memory", "show", "fact-1"]);
    assert_eq!(show["superseded_by"], "fact-2");
    let context = home.car_json(&["memory", "context", "ci"]);
    assert!(context["text"]
        .as_str()
        .unwrap()
        .contains("[outdated] changed from: CI runs cargo nextest"));

    let deleted = home.car_json(&["memory", "delete", knowledge["id"].as_str().unwrap()]);
    assert_eq!(deleted["deleted"], true);
    let missing = home
        .command(crate::support::CAR)
        .args(["--json", "memory", "show", "nope"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(doc["success"], false);
    assert_eq!(doc["error"]["code"], "not_found");
}

#[test]
fn tools_list_and_call_go_through_the_dispatcher() {
    let home = TestHome::new();
    let list = home.car_json(&["tools", "list"]);
    assert_eq!(list["tools"].as_array().unwrap().len(), 23);
    let first = home.car_json(&[
        "tools",
        "call",
        "memory_add_fact",
        "--params",
        r#"{"subject":"a","body":"b"}"#,
        "--request-id",
        "k1",
    ]);
    let again = home.car_json(&[
        "tools",
        "call",
        "memory_add_fact",
        "--params",
        r#"{"subject":"a","body":"b"}"#,
        "--request-id",
        "k1",
    ]);
    assert_eq!(first, again);
    assert_eq!(home.entry_count(), 1);
    let bad = home
        .command(crate::support::CAR)
        .args([
            "--json",
            "tools",
            "call",
            "memory_query",
            "--params",
            r#"{"k":0}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "invalid_arguments");
    let unknown = home
        .command(crate::support::CAR)
        .args(["tools", "call", "nope"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown tool 'nope'"));

    let (log, tools) = home.executions(&["--limit", "10"]);
    assert_eq!(
        tools,
        ["memory_query", "memory_add_fact"],
        "one row per executed call; the replay ran nothing"
    );
    assert_eq!(log["executions"][1]["request_id"], "k1");
    assert_eq!(log["executions"][1]["face"], "cli");
    // The same filters as the dashboard's audit page.
    let only = |args: &[&str]| -> usize {
        let mut all = vec!["executions"];
        all.extend(args);
        home.car_json(&all)["executions"].as_array().unwrap().len()
    };
    assert_eq!(only(&["--tool", "memory_query"]), 1);
    assert_eq!(only(&["--face", "cli"]), 2);
    // The query with bad arguments was refused as an error; the add ran.
    assert_eq!(only(&["--face", "cli", "--outcome", "ok"]), 1);
    assert_eq!(only(&["--outcome", "error"]), 1);
    assert_eq!(only(&["--face", "web"]), 0);
    assert_eq!(only(&["--outcome", "denied"]), 0);
}

#[test]
fn assistant_json_is_imported_once_and_export_round_trips() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.home.join("memory")).unwrap();
    std::fs::write(
        home.home.join("memory/assistant.json"),
        json!({"notes": [
            {"subject": "style", "body": "Use rustfmt defaults", "kind": "fact"},
            {"subject": "tone", "body": "Be terse in commit messages", "kind": "preference"}
        ]})
        .to_string(),
    )
    .unwrap();
    assert_eq!(home.entry_count(), 2);
    assert_eq!(home.entry_count(), 2, "imported only once");
    let out = home.project.join("out.json");
    home.car_json(&["memory", "export", "-o", out.to_str().unwrap()]);
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(exported["notes"].as_array().unwrap().len(), 2);
    // Importing the export into a fresh home restores the same notes.
    let other = TestHome::new();
    other.car_json(&["memory", "import", out.to_str().unwrap()]);
    let restored = other.car_json(&["memory", "export", "-o", "-"]);
    assert_eq!(restored["notes"], exported["notes"]);
    // A broken file is refused and changes nothing.
    let broken = home.project.join("broken.json");
    std::fs::write(&broken, "{\"notes\": [{\"subject\": \"\"}]}").unwrap();
    let result = home
        .command(crate::support::CAR)
        .args(["memory", "import", broken.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(2));
    assert_eq!(home.entry_count(), 2);
}

#[test]
fn a_database_from_a_newer_car_is_refused_and_left_untouched() {
    let home = TestHome::new();
    std::fs::create_dir_all(&home.home).unwrap();
    let db = home.home.join("car.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let out = home.car(&["memory", "query", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("written by a newer CAR"));
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn doctor_reports_a_healthy_home() {
    let home = TestHome::new();
    let report = home.car_json(&["doctor"]);
    assert_eq!(report["healthy"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "home",
            "database",
            "wal",
            "integrity",
            "memory",
            "meaning",
            "assistant.json",
            "policies",
            "hosts",
            "connectors",
            "daemon",
            "sandbox",
            "project",
            "task dependencies",
            "claims"
        ]
    );
    let sandbox = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "sandbox")
        .unwrap();
    assert!(
        sandbox["detail"]
            .as_str()
            .unwrap()
            .starts_with("car do runs commands under bwrap, network none, seccomp socket filter"),
        "{sandbox}"
    );
    // Without bubblewrap on PATH the check fails and says what to install.
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "doctor"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["success"], false, "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("apt install bubblewrap"),
        "{report}"
    );
}

#[test]
fn a_long_import_reports_progress_on_stderr_and_keeps_stdout_clean() {
    let home = TestHome::new();
    let notes: Vec<Value> = (0..2500)
        .map(|i| json!({"subject": format!("s{i}"), "body": format!("fact number {i}")}))
        .collect();
    let file = home.project.join("many.json");
    std::fs::write(&file, json!({ "notes": notes }).to_string()).unwrap();
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "memory", "import", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["data"]["imported"], 2500);
    let progress: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(progress.first().unwrap()["done"], 1000);
    // The notes are written, then embedded (the "embed" phase), each phase ending at its total.
    for phase in ["import", "embed"] {
        assert_eq!(
            progress.iter().rfind(|p| p["phase"] == phase).unwrap(),
            &json!({"type": "progress", "phase": phase, "done": 2500, "total": 2500})
        );
    }
    assert_eq!(progress.last().unwrap()["phase"], "embed");
    assert_eq!(home.entry_count(), 2500);
}

/// `car completions SHELL` writes a script the shell really completes with, and `car man` the
/// pages of the same clap tree; neither shows the values of CAR_HOME or CAR_PROJECT_DIR.
#[test]
fn completions_and_man_pages_come_from_the_command_tree() {
    let home = TestHome::new();
    let run = |args: &[&str]| {
        home.command(crate::support::CAR)
            .args(args)
            .output()
            .unwrap()
    };
    let bash = run(&["completions", "bash"]);
    assert!(bash.status.success(), "{bash:?}");
    let script = home.project.join("car.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    // Completing `car mem<TAB>` and `car memory q<TAB>` in a real bash.
    let complete = |words: &str, cword: usize| {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; \
                 _car car \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("car mem", 1).trim(), "memory");
    assert!(complete("car memory q", 2).lines().any(|w| w == "query"));
    for (shell, start) in [
        ("zsh", "#compdef car"),
        ("fish", "complete -c car"),
        ("powershell", ""),
    ] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(start) && text.contains("memory"),
            "{shell}: {text:.200}"
        );
    }
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: bash"));

    let page = run(&["man"]);
    assert!(page.status.success());
    let page = String::from_utf8(page.stdout).unwrap();
    assert!(
        page.contains(".TH car 1") && page.contains("memory"),
        "{page:.300}"
    );
    let dir = home.project.join("man1");
    let data = home.car_json(&["man", "--out", dir.to_str().unwrap()]);
    let pages: Vec<&str> = data["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for want in [
        "car.1",
        "car-memory.1",
        "car-memory-query.1",
        "car-policy-check-hook.1",
        "car-completions.1",
    ] {
        assert!(pages.contains(&want), "{want} not in {pages:?}");
    }
    let query = std::fs::read_to_string(dir.join("car-memory-query.1")).unwrap();
    assert!(query.contains("memory_query"), "{query}");
    let home_text = home.home.display().to_string();
    for name in &pages {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(!text.contains(&home_text), "{name} shows CAR_HOME's value");
    }
}

#[test]
fn a_launcher_runs_car_under_its_name_and_says_so_when_car_is_missing() {
    // Beside `car`, each launcher is the program it names.
    for (launcher, name) in [
        (crate::support::CAR_MCP, "car-mcp"),
        (crate::support::CAR_SERVER, "car-server"),
    ] {
        let out = std::process::Command::new(launcher)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(&format!("{name} ")),
            "{out:?}"
        );
    }
    // Alone, it says what is missing and how to fix it, and exits 2.
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("car-mcp");
    std::fs::copy(crate::support::CAR_MCP, &copy).unwrap();
    let out = std::process::Command::new(&copy).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("car-mcp: runs the `car` binary beside it")
            && stderr.contains("reinstall CAR"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
