//! Memory comes to the agent: `car hook session-start` (the briefing) and `car hook prompt`
//! (reminders), through the real binary with each host's payload, and through the real Claude
//! Code with the plugin as shipped.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::claude::{claude, path_with_car, run_against, ScriptedModel};
use crate::support::TestHome;

/// Claude Code's payloads, as the hooks get them.
fn session_start(cwd: &Path, session: &str, source: &str) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
           "hook_event_name": "SessionStart", "source": source})
    .to_string()
    .into_bytes()
}

fn prompt(cwd: &Path, session: &str, text: &str) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
           "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": text})
    .to_string()
    .into_bytes()
}

/// The context a Claude Code hook answer adds ("" when the hook printed nothing), after
/// checking the answer is exactly one JSON object for `event`.
fn context_of(out: &Output, event: &str) -> String {
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    if stdout.is_empty() {
        return String::new();
    }
    let answer: Value = serde_json::from_str(stdout.trim_end())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {stdout}"));
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"], event,
        "{answer}"
    );
    answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string()
}

const TARGET: &str = "Schema migrations need sign-off from the data team before they merge";

/// A project with a ready task, a claimed one, a decision, a constraint, facts and a secret.
fn small_project(t: &TestHome) {
    t.car_json(&[
        "task",
        "create",
        "Wire the billing webhook",
        "--priority",
        "1",
    ]);
    t.car_json(&["task", "create", "Write the onboarding guide"]);
    t.car_json(&[
        "decision",
        "record",
        "Billing data lives in PostgreSQL",
        "--decision",
        "Use PostgreSQL 16 for the billing service",
    ]);
    t.car_json(&["memory", "add", "schema migrations", TARGET]);
    t.car_json(&[
        "memory",
        "add",
        "webhook retries",
        "The billing webhook retries five times with exponential backoff",
    ]);
    t.car_json(&[
        "memory",
        "add",
        "no force pushes",
        "Never force-push to main",
        "--kind",
        "constraint",
    ]);
    t.car_json(&[
        "memory",
        "add",
        "staging database",
        "staging: postgres://billing:Sup3rS3cretPw@db.internal/billing",
    ]);
}

#[test]
fn a_session_starts_with_the_briefing_and_a_prompt_gets_only_what_it_is_about() {
    let t = TestHome::new();
    small_project(&t);
    let sub = t.project.join("src/billing");
    std::fs::create_dir_all(&sub).unwrap();

    // From a subdirectory, the project's briefing.
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&sub, "s1", "startup"),
    );
    let brief = context_of(&out, "SessionStart");
    for expected in [
        "CTX-0001",
        "Wire the billing webhook",
        "ADR-0001",
        "Use PostgreSQL 16 for the billing service",
        "Never force-push to main",
        "exponential backoff",
    ] {
        assert!(brief.contains(expected), "{expected:?} missing:\n{brief}");
    }
    // The secret is withheld, and the briefing says so.
    assert!(!brief.contains("Sup3rS3cretPw"), "{brief}");
    assert!(
        brief.contains("Withheld because it may hold a secret: fact-4"),
        "{brief}"
    );
    // Everything else fits: nothing is said to be left out (the withheld entry is not).
    assert!(!brief.contains("Left out"), "{brief}");

    // A prompt one fact answers gets that fact, with its id and why; one no fact concerns gets
    // nothing at all.
    let asked = "who has to sign off on schema migrations for the billing tables?";
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s2", asked));
    let reminder = context_of(&out, "UserPromptSubmit");
    assert!(reminder.contains(TARGET), "{reminder}");
    assert!(
        reminder.contains("fact-1") && reminder.contains("matched"),
        "{reminder}"
    );
    assert!(!reminder.contains("exponential backoff"), "{reminder}");
    for unrelated in [
        "what's a good name for a cat?",
        "summarise the last three commits for me please",
    ] {
        let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s2", unrelated));
        assert_eq!(context_of(&out, "UserPromptSubmit"), "", "{unrelated}");
    }
    // A session is not reminded twice of one entry.
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s2", asked));
    assert_eq!(context_of(&out, "UserPromptSubmit"), "");
    // Nor asked about a secret.
    let out = t.car_with_input(
        &["hook", "prompt"],
        &prompt(
            &sub,
            "s3",
            "what is the staging database password for billing?",
        ),
    );
    let withheld = context_of(&out, "UserPromptSubmit");
    assert!(!withheld.contains("Sup3rS3cretPw"), "{withheld}");
    assert!(
        withheld.contains("Withheld because it may hold a secret: fact-4"),
        "{withheld}"
    );

    // Every call is in the execution log, with exactly what was injected.
    let (log, tools) = t.executions(&["--limit", "20"]);
    assert_eq!(
        tools.iter().filter(|t| **t == "hook.prompt").count(),
        5,
        "{log}"
    );
    assert_eq!(
        tools.iter().filter(|t| **t == "hook.session_start").count(),
        1,
        "{log}"
    );
    let db = rusqlite::Connection::open(t.home.join("car.db")).unwrap();
    let (text, entries, host): (String, String, String) = db
        .query_row(
            "SELECT text, entries, host FROM injections WHERE event = 'session_start'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(text, brief);
    assert_eq!(host, "claude-code");
    assert!(entries.contains("\"CTX-0001\""), "{entries}");
    let logged: String = db
        .query_row(
            "SELECT prompt FROM injections WHERE prompt LIKE '%staging%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(logged.contains("staging database password"), "{logged}");

    // `car hook log` lists them; `--cases` turns the recorded prompts into evaluation cases
    // that `car memory evaluate` scores.
    let listed = t.car_json(&["hook", "log", "--event", "prompt", "--session", "s2"]);
    let listed = listed["injections"].as_array().unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert_eq!(listed[3]["entries"], json!(["fact-1"]), "{listed:?}");
    assert_eq!(listed[3]["prompt"], asked);
    let out = t.car(&["hook", "log", "--cases"]);
    assert!(out.status.success(), "{out:?}");
    let cases_path = t.project.join("cases.json");
    std::fs::write(&cases_path, &out.stdout).unwrap();
    let evaluated = t.car_json(&["memory", "evaluate", cases_path.to_str().unwrap()]);
    assert_eq!(evaluated["cases"], 5, "{evaluated}");
    assert_eq!(evaluated["selective"]["true_positives"], 1, "{evaluated}");

    // After a compaction, the session's briefing leads with what changed since its last one.
    t.car_json(&["task", "claim", "CTX-0001"]);
    t.car_json(&[
        "decision",
        "record",
        "Webhooks are signed",
        "--decision",
        "Sign every webhook with HMAC-SHA256",
    ]);
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&sub, "s1", "compact"),
    );
    let again = context_of(&out, "SessionStart");
    let since = again
        .find("## Since this session's last briefing")
        .unwrap_or_else(|| panic!("no changes section:\n{again}"));
    let first_section = again.find("\n## ").unwrap();
    assert_eq!(since, first_section + 1, "the changes lead:\n{again}");
    assert!(
        again.contains("CTX-0001 ready → claimed") || again.contains("CTX-0001 open → claimed"),
        "{again}"
    );
    assert!(again.contains("new decision ADR-0002"), "{again}");
    // A compaction drops what the session was shown: an entry may be reminded of again.
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&sub, "s2", "compact"),
    );
    assert!(out.status.success(), "{out:?}");
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s2", asked));
    assert!(
        context_of(&out, "UserPromptSubmit").contains(TARGET),
        "{out:?}"
    );

    // The prompt the log keeps has its secrets redacted.
    let leaky = "deploy with DB_PASSWORD=correct-horse-battery and ghp_0123456789abcdefghijABCDEFGHIJ012345 please";
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s6", leaky));
    assert!(out.status.success(), "{out:?}");
    let kept: String = db
        .query_row(
            "SELECT prompt FROM injections WHERE session_id = 's6'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(kept.starts_with("deploy with "), "{kept}");
    for secret in ["correct-horse-battery", "ghp_0123456789"] {
        assert!(!kept.contains(secret), "{kept}");
    }

    // `--json` gives the record instead of the host's answer.
    let out = t.car_with_input(&["--json", "hook", "prompt"], &prompt(&sub, "s4", asked));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["data"]["entries"], json!(["fact-1"]), "{doc}");

    // A project setting turns each hook off.
    t.car_json(&["config", "set", "hooks.prompt", "off"]);
    t.car_json(&["config", "set", "hooks.session_start", "off"]);
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&sub, "s5", asked));
    assert_eq!(context_of(&out, "UserPromptSubmit"), "");
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&sub, "s5", "startup"),
    );
    assert_eq!(context_of(&out, "SessionStart"), "");
}

#[test]
fn each_host_gets_the_briefing_and_reminders_its_own_way() {
    let t = TestHome::new();
    small_project(&t);
    let asked = "who has to sign off on schema migrations for the billing tables?";
    let cwd = t.project.to_string_lossy().to_string();
    let run = |args: &[&str], payload: Value| -> String {
        let out = t.car_with_input(args, payload.to_string().as_bytes());
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // Gemini CLI: SessionStart and BeforeAgent, hookSpecificOutput.
    let gemini = run(
        &["hook", "prompt"],
        json!({"session_id": "g1", "transcript_path": "/t.json", "cwd": cwd,
               "hook_event_name": "BeforeAgent", "timestamp": "2026-12-03T09:00:00Z", "prompt": asked}),
    );
    let gemini: Value = serde_json::from_str(&gemini).unwrap();
    assert_eq!(gemini["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
    assert!(gemini["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains(TARGET));
    // Codex: Claude Code's shape.
    let codex = run(
        &["hook", "session-start", "--host", "codex"],
        json!({"session_id": "x1", "cwd": cwd, "hook_event_name": "SessionStart",
               "source": "startup", "model": "gpt-5"}),
    );
    let codex: Value = serde_json::from_str(&codex).unwrap();
    assert!(codex["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains("Wire the billing webhook"));
    // Codex's prompt, told by its turn id.
    let codex_prompt = run(
        &["hook", "prompt"],
        json!({"session_id": "x1", "turn_id": "t1", "cwd": cwd, "model": "gpt-5",
               "hook_event_name": "UserPromptSubmit", "prompt": asked}),
    );
    let codex_prompt: Value = serde_json::from_str(&codex_prompt).unwrap();
    assert!(codex_prompt["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains(TARGET));
    let logged = t.car_json(&["hook", "log", "--session", "x1"]);
    let hosts: Vec<&str> = logged["injections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["codex", "codex"], "{logged}");
    // Cursor: sessionStart takes `additional_context`; beforeSubmitPrompt takes no context.
    let cursor = run(
        &["hook", "session-start"],
        json!({"conversation_id": "c1", "generation_id": "g", "hook_event_name": "sessionStart",
               "workspace_roots": [cwd]}),
    );
    let cursor: Value = serde_json::from_str(&cursor).unwrap();
    assert!(cursor["additional_context"]
        .as_str()
        .unwrap()
        .contains("Wire the billing webhook"));
    let cursor_prompt = run(
        &["hook", "prompt"],
        json!({"conversation_id": "c1", "generation_id": "g", "hook_event_name": "beforeSubmitPrompt",
               "workspace_roots": [cwd], "prompt": asked}),
    );
    assert_eq!(cursor_prompt, "");
}

#[test]
fn a_broken_database_or_a_garbage_payload_injects_nothing_and_exits_0() {
    let t = TestHome::new();
    // No database yet: nothing is said and nothing is created.
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&t.project, "s1", "startup"),
    );
    assert_eq!(context_of(&out, "SessionStart"), "");
    assert!(!t.home.join("car.db").exists());

    small_project(&t);
    let garbage: [&[u8]; 6] = [
        b"",
        b"not json",
        b"[1, 2]",
        b"{\"hook_event_name\": \"PreToolUse\"",
        b"\xff\xfe\x00garbage",
        br#"{"hook_event_name": "SessionStart", "source": "startup", "cwd": "/tmp"}"#,
    ];
    for payload in garbage {
        let out = t.car_with_input(&["hook", "prompt"], payload);
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{payload:?}: {out:?}");
    }
    // Another hook's well-formed payload is refused by both, however much it looks like one.
    let tool_call = json!({"session_id": "s1", "cwd": t.project, "hook_event_name": "PreToolUse",
                           "tool_name": "Bash", "tool_input": {"command": TARGET}, "prompt": TARGET})
    .to_string();
    for command in ["prompt", "session-start"] {
        let out = t.car_with_input(&["hook", command], tool_call.as_bytes());
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{command}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("PreToolUse"),
            "{out:?}"
        );
    }
    // A session in a directory CAR was never used in: nothing said, nothing created.
    let elsewhere = t.project.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let projects = || -> i64 {
        rusqlite::Connection::open(t.home.join("car.db"))
            .unwrap()
            .query_row("SELECT COUNT(*) FROM projects", [], |r| r.get(0))
            .unwrap()
    };
    let before = projects();
    let out = t.car_with_input(
        &["hook", "session-start"],
        &session_start(&elsewhere, "e1", "startup"),
    );
    assert_eq!(context_of(&out, "SessionStart"), "");
    let out = t.car_with_input(&["hook", "prompt"], &prompt(&elsewhere, "e1", TARGET));
    assert_eq!(context_of(&out, "UserPromptSubmit"), "");
    assert_eq!(projects(), before);
    let recorded: i64 = rusqlite::Connection::open(t.home.join("car.db"))
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM injections WHERE session_id = 'e1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(recorded, 0);
    // The session-start payload handed to the prompt hook is named in the note.
    let out = t.car_with_input(
        &["hook", "prompt"],
        &session_start(&t.project, "s1", "startup"),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("car hook session-start"),
        "{out:?}"
    );

    // A database that is not one: exit 0, nothing on stdout, one line on stderr.
    std::fs::write(
        t.home.join("car.db"),
        b"this is not a SQLite database at all",
    )
    .unwrap();
    let _ = std::fs::remove_file(t.home.join("car.db-wal"));
    let _ = std::fs::remove_file(t.home.join("car.memory-index"));
    for (args, payload) in [
        (
            ["hook", "prompt"],
            prompt(&t.project, "s1", &format!("who approves this? {TARGET}")),
        ),
        (
            ["hook", "session-start"],
            session_start(&t.project, "s1", "startup"),
        ),
    ] {
        let out = t.car_with_input(&args, &payload);
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("nothing injected"), "{stderr}");
    }
}

#[test]
fn a_briefing_over_a_large_project_stays_within_its_budget() {
    let t = TestHome::new();
    // 10,000 facts, 500 tasks, 200 decisions.
    let notes: Vec<Value> = (0..10_000)
        .map(|i| {
            json!({"subject": format!("service {i} runbook"),
                   "body": format!("Service {i} deploys through pipeline {} and pages the {} team on failure; its cache warms from shard {}", i % 37, ["payments", "search", "platform", "growth"][i % 4], i % 11),
                   "kind": if i % 5 == 0 { "knowledge" } else { "pattern" }})
        })
        .collect();
    let notes_path = t.project.join("notes.json");
    std::fs::write(&notes_path, json!({"notes": notes}).to_string()).unwrap();
    t.car_json(&["memory", "import", notes_path.to_str().unwrap()]);
    let tasks: String = (0..500)
        .map(|i| {
            format!(
                "{}\n",
                json!({"title": format!("Move service {i} to the new deploy pipeline"),
                       "priority": format!("P{}", i % 4)})
            )
        })
        .collect();
    let tasks_path = t.project.join("tasks.jsonl");
    std::fs::write(&tasks_path, tasks).unwrap();
    t.car_json(&["task", "import", tasks_path.to_str().unwrap()]);
    let db = rusqlite::Connection::open(t.home.join("car.db")).unwrap();
    let project: i64 = db
        .query_row("SELECT id FROM projects", [], |r| r.get(0))
        .unwrap();
    for n in 1..=200 {
        db.execute(
            "INSERT INTO decisions (project_id, number, title, status, context, decision, consequences, created_at, updated_at)
             VALUES (?1, ?2, ?3, 'accepted', '', ?4, '', ?5, ?5)",
            rusqlite::params![
                project,
                n,
                format!("Decision {n} on the deploy pipeline"),
                format!("Pipeline stage {n} runs after the canary and before the full rollout"),
                format!("2026-11-{:02}T10:00:{:02}.000Z", 1 + n % 28, n % 60)
            ],
        )
        .unwrap();
    }
    drop(db);
    for budget in [None, Some(600), Some(2_300)] {
        if let Some(budget) = budget {
            t.car_json(&[
                "config",
                "set",
                "hooks.briefing_tokens",
                &budget.to_string(),
            ]);
        }
        let out = t.car_with_input(
            &["--json", "hook", "session-start"],
            &session_start(&t.project, "big", "startup"),
        );
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        let data = &doc["data"];
        let limit = budget.unwrap_or(1_500);
        let text = data["text"].as_str().unwrap();
        // The budget holds by the stated estimate (4 characters a token) counted here.
        let tokens = text.chars().count().div_ceil(4);
        assert!(tokens <= limit, "{tokens} > {limit}:\n{text}");
        assert_eq!(data["tokens"], json!(tokens));
        // The top of each section is there, and the rest is counted.
        for expected in ["## Ready", "## Recent decisions", "## Memory", "P0"] {
            assert!(text.contains(expected), "{expected:?} missing:\n{text}");
        }
        assert!(text.contains("Left out to stay within"), "{text}");
        // What was never listed is counted too: 500 ready tasks, 200 decisions.
        let shown = |prefix: &str| text.matches(prefix).count();
        let ready_left = 500 - shown("- CTX-");
        assert!(
            text.contains(&format!("{ready_left} ready tasks")),
            "{ready_left}:\n{text}"
        );
        let decisions_left = 200 - shown("- ADR-");
        assert!(
            text.contains(&format!("{decisions_left} decisions")),
            "{decisions_left}:\n{text}"
        );
        assert!(text.contains("/car-brief"), "{text}");
    }
}

/// The text of every request Claude Code sent the model (the main loop's and the side ones).
fn sent(model: &ScriptedModel) -> String {
    model
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first main-loop request (the one that carries `asked`).
fn first_request(model: &ScriptedModel, asked: &str, context: &str) -> String {
    model
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .map(|r| r.body.to_string())
        .find(|body| body.contains(asked))
        .unwrap_or_else(|| panic!("no request carried the prompt\n{context}"))
}

fn claude_project() -> (tempfile::TempDir, TestHome) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("home")).unwrap();
    let t = TestHome::new();
    (tmp, t)
}

/// `claude -p PROMPT` in the project with the plugin as shipped and `t`'s CAR home.
fn run_claude(root: &Path, t: &TestHome, model: &ScriptedModel, asked: &str) -> crate::claude::Run {
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(&t.project)
        .env("CAR_HOME", &t.home)
        .env("PATH", path_with_car())
        .args(["-p", asked])
        .arg("--plugin-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/car"))
        .args(["--output-format", "stream-json", "--verbose"]);
    run_against(cmd, root, model)
}

#[test]
fn claude_starts_with_the_briefing_and_is_reminded_only_of_what_a_prompt_is_about() {
    let (tmp, t) = claude_project();
    small_project(&t);
    // Thousands of facts beside the one that answers.
    let notes: Vec<Value> = (0..3_000)
        .map(|i| {
            json!({"subject": format!("service {i} runbook"),
                   "body": format!("Service {i} deploys through pipeline {} and pages the {} team on failure", i % 37, ["payments", "search", "platform", "growth"][i % 4])})
        })
        .collect();
    let notes_path = t.project.join("notes.json");
    std::fs::write(&notes_path, json!({"notes": notes}).to_string()).unwrap();
    t.car_json(&["memory", "import", notes_path.to_str().unwrap()]);

    let asked = "Who has to sign off on schema migrations for the billing tables?";
    let model = ScriptedModel::start(Vec::new(), "The data team signs off.");
    let run = run_claude(tmp.path(), &t, &model, asked);
    assert_eq!(run.code, Some(0), "{}", run.context);
    let first = first_request(&model, asked, &run.context);
    // The briefing: a ready task's title and a decision, in the very first request.
    for expected in [
        "Write the onboarding guide",
        "Use PostgreSQL 16 for the billing service",
        "CAR briefing",
    ] {
        assert!(
            first.contains(expected),
            "{expected:?} not sent\n{}",
            run.context
        );
    }
    // The reminder: the one fact the prompt is about.
    assert!(
        first.contains(TARGET),
        "the fact was not sent\n{}",
        run.context
    );
    assert!(
        first.contains("CAR memory this prompt is about"),
        "{}",
        run.context
    );
    assert!(!sent(&model).contains("Sup3rS3cretPw"), "{}", run.context);

    // A fresh session, a prompt no fact concerns: the briefing, and no reminder.
    let asked = "Please write a haiku about autumn leaves.";
    let model = ScriptedModel::start(Vec::new(), "Leaves fall.");
    let run = run_claude(tmp.path(), &t, &model, asked);
    assert_eq!(run.code, Some(0), "{}", run.context);
    let first = first_request(&model, asked, &run.context);
    assert!(
        first.contains("Write the onboarding guide"),
        "{}",
        run.context
    );
    let all = sent(&model);
    assert!(
        !all.contains("CAR memory this prompt is about"),
        "{}",
        run.context
    );
    assert!(!all.contains(TARGET), "{}", run.context);
    assert!(
        !all.contains("pages the"),
        "a distractor was sent\n{}",
        run.context
    );
}

#[test]
fn claude_goes_on_when_the_memory_is_broken() {
    let (tmp, t) = claude_project();
    small_project(&t);
    std::fs::write(t.home.join("car.db"), b"not a database").unwrap();
    let _ = std::fs::remove_file(t.home.join("car.db-wal"));
    let _ = std::fs::remove_file(t.home.join("car.memory-index"));
    let asked = "Who has to sign off on schema migrations?";
    let model = ScriptedModel::start(Vec::new(), "I do not know.");
    let run = run_claude(tmp.path(), &t, &model, asked);
    assert_eq!(run.code, Some(0), "{}", run.context);
    let first = first_request(&model, asked, &run.context);
    assert!(!first.contains("CAR briefing"), "{}", run.context);
    let last = run.lines.last().unwrap();
    assert_eq!(last["result"], "I do not know.", "{}", run.context);
}
