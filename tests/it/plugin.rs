//! The Claude Code plugin in `plugins/car` and the marketplace in `.claude-plugin/`, proven with
//! the real Claude Code CLI (pinned, offline): it validates both strictly, loads the plugin with no
//! errors, lists its commands, agent and MCP server, installs it from the marketplace into a fresh
//! home, and in a `claude -p` run against a scripted model calls the plugin's memory tools (the
//! fact lands in `car.db`) while the plugin's hook denies a destructive Bash command, and runs
//! the `/car-remember` and `/car-recall` commands with their arguments, `/car-do` under its own
//! permission, and the `car` and `car-reason` agents end to end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::claude::{
    claude, find_transcript, result_text, run_against, system_text as system_text_of, tool_results,
    Route, ScriptedModel, ToolCall, CLAUDE_VERSION,
};
use crate::support::CAR;

/// An address where nothing answers: the commands that never reach the model.
const NO_MODEL: &str = "http://127.0.0.1:9";

/// The plugin's slash commands, as Claude Code names them.
const COMMANDS: [&str; 7] = [
    "car:car-brief",
    "car:car-checkpoint",
    "car:car-decide",
    "car:car-do",
    "car:car-next",
    "car:car-recall",
    "car:car-remember",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn plugin_dir() -> PathBuf {
    repo().join("plugins/car")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A temp root with an empty throwaway `home/` for Claude Code.
fn claude_root() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("home")).unwrap();
    tmp
}

fn stdout_json(out: &Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

#[test]
fn the_plugin_and_marketplace_versions_are_the_crate_version() {
    let manifest = read_json(&plugin_dir().join(".claude-plugin/plugin.json"));
    assert_eq!(manifest["name"], "car");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["license"], env!("CARGO_PKG_LICENSE"));

    let marketplace = read_json(&repo().join(".claude-plugin/marketplace.json"));
    let entries = marketplace["plugins"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{marketplace}");
    assert_eq!(
        (
            &entries[0]["name"],
            &entries[0]["source"],
            &entries[0]["version"]
        ),
        (
            &json!("car"),
            &json!("./plugins/car"),
            &json!(env!("CARGO_PKG_VERSION"))
        )
    );
}

/// `claude plugin validate` does not notice `agents/`, `commands/` or `hooks/` inside
/// `.claude-plugin/`, where they silently do not load.
#[test]
fn no_plugin_part_sits_inside_a_claude_plugin_dir() {
    let mut manifest_dirs = Vec::new();
    let mut stack = vec![repo().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !path.is_dir() || [".git", "target", "tools", "node_modules"].contains(&&*name) {
                continue;
            }
            if name == ".claude-plugin" {
                manifest_dirs.push(path.clone());
            }
            stack.push(path);
        }
    }
    manifest_dirs.sort();
    assert_eq!(
        manifest_dirs,
        [
            repo().join(".claude-plugin"),
            plugin_dir().join(".claude-plugin")
        ]
    );
    for dir in &manifest_dirs {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert!(
            names == ["marketplace.json"] || names == ["plugin.json"],
            "{} holds {names:?}: only the manifest belongs there; agents/, commands/, hooks/ \
             and .mcp.json go at the plugin root",
            dir.display()
        );
    }
    for part in [
        "agents",
        "commands",
        "hooks/hooks.json",
        ".mcp.json",
        "README.md",
    ] {
        assert!(
            plugin_dir().join(part).exists(),
            "plugins/car/{part} is missing"
        );
    }
}

#[test]
fn claude_validates_the_plugin_and_the_marketplace_strictly() {
    let tmp = claude_root();
    let version = claude(tmp.path(), NO_MODEL)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with(CLAUDE_VERSION),
        "expected Claude Code {CLAUDE_VERSION}: {version:?}"
    );

    let report = stdout_json(
        &claude(tmp.path(), NO_MODEL)
            .args(["plugin", "validate", "--strict", "--json"])
            .arg(plugin_dir())
            .output()
            .unwrap(),
    );
    assert_eq!(report["success"], true, "{report:#}");
    assert_eq!(
        (
            &report["manifest"]["errors"],
            &report["manifest"]["warnings"]
        ),
        (&json!([]), &json!([])),
        "{report:#}"
    );
    let provides = &report["provides"];
    assert_eq!(provides["commands"], json!(COMMANDS), "{report:#}");
    assert_eq!(
        provides["agents"],
        json!(["car:car", "car:car-reason", "car:car-scout"]),
        "{report:#}"
    );
    assert_eq!(
        provides["mcpServers"],
        json!([{"name": "car", "type": "stdio", "target": "car-mcp", "args": []}])
    );
    assert_eq!(
        provides["hooks"],
        json!([{"event": "PreToolUse",
                "matcher": "*",
                "type": "command", "command": "if command -v car-gate >/dev/null 2>&1; then car-gate; else car policy-check-hook; fi; exit 0"},
               {"event": "SessionStart",
                "type": "command", "command": "car hook session-start; exit 0"},
               {"event": "UserPromptSubmit",
                "type": "command", "command": "car hook prompt; exit 0"}])
    );

    let marketplace = claude(tmp.path(), NO_MODEL)
        .current_dir(repo())
        .args(["plugin", "validate", "--strict", "."])
        .output()
        .unwrap();
    assert!(marketplace.status.success(), "{marketplace:?}");
    assert!(
        String::from_utf8_lossy(&marketplace.stdout).contains("marketplace.json"),
        "{marketplace:?}"
    );
}

/// The entry `id` of `claude … plugin list --json`; panics with the whole list when it is absent.
fn plugin_entry(claude: &mut Command, id: &str) -> Value {
    let listed = stdout_json(&claude.args(["plugin", "list", "--json"]).output().unwrap());
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no {id} in `claude plugin list --json`: {listed:#}"))
}

#[test]
fn claude_loads_the_plugin_with_its_commands_agent_and_connected_mcp_server() {
    let tmp = claude_root();
    let entry = plugin_entry(
        claude(tmp.path(), NO_MODEL)
            .arg("--plugin-dir")
            .arg(plugin_dir()),
        "car@inline",
    );
    assert_eq!(
        &entry,
        &json!({"id": "car@inline", "version": env!("CARGO_PKG_VERSION"), "scope": "session",
                "enabled": true, "installPath": plugin_dir()}),
        "loaded with errors?"
    );

    // With no model reachable the run would retry for a minute after the `init` line, which is
    // all this reads; the process is killed once it is there.
    let project = tmp.path().join("project");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    let mut child = claude(tmp.path(), NO_MODEL)
        .current_dir(&project)
        .args(["-p", "x", "--output-format", "stream-json", "--verbose"])
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The plugin's SessionStart hook reports first (hook_started, hook_response); then init.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 || !line.contains("\"subtype\":\"hook_") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let first: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("no init line ({e}): {line}"));
    assert_eq!(
        (&first["type"], &first["subtype"]),
        (&json!("system"), &json!("init"))
    );
    let ours = |field: &str, prefix: &str| -> Vec<Value> {
        first[field]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v.as_str().is_some_and(|s| s.starts_with(prefix)))
            .cloned()
            .collect()
    };
    assert_eq!(
        ours("slash_commands", "car:"),
        json!(COMMANDS).as_array().unwrap().clone()
    );
    assert_eq!(
        ours("agents", "car:"),
        vec![
            json!("car:car"),
            json!("car:car-reason"),
            json!("car:car-scout")
        ]
    );
    assert_eq!(
        first["mcp_servers"],
        json!([{"name": "plugin:car:car", "status": "connected", "source": "plugin"}]),
        "{first:#}"
    );
    let tools = ours("tools", "mcp__plugin_car_car__");
    for tool in [
        "memory_add_fact",
        "memory_query",
        "context_manager",
        "task_manager",
    ] {
        assert!(
            tools.contains(&json!(format!("mcp__plugin_car_car__{tool}"))),
            "{tool} missing from {tools:?}"
        );
    }
    let plugin = first["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "car")
        .unwrap();
    assert_eq!(plugin["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_marketplace_installs_the_plugin_into_a_fresh_home() {
    let tmp = claude_root();
    let add = claude(tmp.path(), NO_MODEL)
        .current_dir(repo())
        .args(["plugin", "marketplace", "add", "./"])
        .output()
        .unwrap();
    assert!(add.status.success(), "{add:?}");
    let install = claude(tmp.path(), NO_MODEL)
        .args(["plugin", "install", "car@car"])
        .output()
        .unwrap();
    assert!(install.status.success(), "{install:?}");

    let entry = plugin_entry(&mut claude(tmp.path(), NO_MODEL), "car@car");
    assert_eq!(
        (
            &entry["version"],
            &entry["scope"],
            &entry["enabled"],
            &entry["errors"]
        ),
        (
            &json!(env!("CARGO_PKG_VERSION")),
            &json!("user"),
            &json!(true),
            &Value::Null
        ),
        "{entry:#}"
    );
    assert_eq!(
        entry["mcpServers"],
        json!({"car": {"command": "car-mcp", "args": [], "env": {"CAR_INVOKED_BY": "claude-code"}}})
    );
    let installed = PathBuf::from(entry["installPath"].as_str().unwrap());
    assert!(installed.starts_with(tmp.path().join("home")), "{entry:#}");
    for part in ["commands/car-remember.md", "hooks/hooks.json", ".mcp.json"] {
        assert!(installed.join(part).is_file(), "{part} not installed");
    }
}

#[test]
fn claude_remembers_and_recalls_through_the_plugin_and_its_hook_denies_a_destructive_command() {
    let tmp = claude_root();
    let root = tmp.path();
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    let car = |args: &[&str]| {
        Command::new(CAR)
            .current_dir(&project)
            .env("CAR_HOME", root.join("car-home"))
            .env_remove("CAR_PROJECT_DIR")
            .args(args)
            .output()
            .unwrap()
    };
    let init = car(&["policy", "init", "--preset", "recommended"]);
    assert!(init.status.success(), "{init:?}");

    let fact =
        "Releases are cut from main by tagging vX.Y.Z; the build workflow uploads the archives.";
    let denied_marker = project.join("denied.marker");
    let allowed_marker = project.join("allowed.marker");
    let model = ScriptedModel::start(
        vec![
            ToolCall {
                id: "toolu_remember",
                name: "mcp__plugin_car_car__memory_add_fact".to_string(),
                input: json!({"subject": "release process", "body": fact}),
            },
            ToolCall {
                id: "toolu_recall",
                name: "mcp__plugin_car_car__memory_query".to_string(),
                input: json!({"query": "how do we cut a release?"}),
            },
            ToolCall::bash(
                "toolu_denied",
                format!("touch '{}' && rm -rf ~", denied_marker.display()),
            ),
            ToolCall::bash(
                "toolu_allowed",
                format!("touch '{}'", allowed_marker.display()),
            ),
        ],
        "All four calls were made.",
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(&project)
        .args([
            "-p",
            "Remember how releases work, recall it, then clean up.",
        ])
        .arg("--plugin-dir")
        .arg(plugin_dir())
        // Root may not use bypassPermissions; allowing the tools still leaves the hook in charge.
        .args([
            "--allowedTools",
            "Bash,mcp__plugin_car_car__memory_add_fact,mcp__plugin_car_car__memory_query",
        ])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");

    let final_request = model
        .requests()
        .into_iter()
        .rfind(|r| r.path.starts_with("/v1/messages") && tool_results(&r.body).len() == 4)
        .unwrap_or_else(|| panic!("no request carried all four tool results\n{context}"));
    let results = tool_results(&final_request.body);
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r["tool_use_id"] == id)
            .unwrap_or_else(|| panic!("no tool_result for {id}\n{context}"))
            .clone()
    };

    // The plugin's MCP server saved the fact and found it again (an MCP result that is not an
    // error carries no `is_error`).
    let content = |id: &str| -> Value {
        let result = by_id(id);
        assert_ne!(result["is_error"], true, "{result}\n{context}");
        serde_json::from_str(&result_text(&result["content"])).unwrap()
    };
    let remembered = content("toolu_remember");
    assert_eq!(
        (
            &remembered["subject"],
            &remembered["scope"],
            &remembered["durable"]
        ),
        (&json!("release process"), &json!("project"), &json!(true)),
        "{remembered}"
    );
    let recalled = content("toolu_recall");
    assert_eq!(recalled["results"][0]["body"], json!(fact), "{recalled}");
    let stored = car(&["--json", "memory", "query", "release process"]);
    let stored: Value = serde_json::from_slice(&stored.stdout).unwrap();
    let bodies: Vec<&Value> = stored["data"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["body"])
        .collect();
    assert_eq!(bodies, [&json!(fact)], "{stored}");

    // The plugin's hook denied the destructive command; the other one ran.
    assert!(!denied_marker.exists(), "the denied command ran\n{context}");
    assert!(
        allowed_marker.exists(),
        "the allowed command did not run\n{context}"
    );
    let reason = "CAR policy: deny_command:rm-recursive-outside-project";
    let denied = by_id("toolu_denied");
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(result_text(&denied["content"]).contains(reason), "{denied}");
    assert_eq!(by_id("toolu_allowed")["is_error"], false);

    // Claude Code's own output and its transcript file carry the same reason.
    let streamed: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| l["type"] == "user")
        .flat_map(|l| l["message"]["content"].as_array().into_iter().flatten())
        .filter(|b| b["tool_use_id"] == "toolu_denied")
        .collect();
    assert_eq!(streamed.len(), 1, "{context}");
    assert!(result_text(&streamed[0]["content"]).contains(reason));
    let last = run.lines.last().unwrap();
    assert_eq!(
        (&last["type"], &last["subtype"], &last["result"]),
        (
            &json!("result"),
            &json!("success"),
            &json!("All four calls were made.")
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

/// A slash command's `allowed-tools` is what lets its MCP tool run: no `--allowedTools` here.
#[test]
fn the_remember_and_recall_commands_run_their_tools_with_the_arguments() {
    let tmp = claude_root();
    let root = tmp.path();
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    let fact = "Production deploys need a green canary";
    let session = |prompt: &str, call: ToolCall| {
        let model = ScriptedModel::start(vec![call], "Done.");
        let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
        cmd.current_dir(&project)
            .args(["-p", prompt])
            .arg("--plugin-dir")
            .arg(plugin_dir())
            .args(["--output-format", "stream-json", "--verbose"]);
        let run = run_against(cmd, root, &model);
        assert_eq!(run.code, Some(0), "{}", run.context);
        let main_loop: Vec<Value> = model
            .requests()
            .into_iter()
            .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .map(|r| r.body)
            .collect();
        let last = main_loop
            .last()
            .unwrap_or_else(|| panic!("no main-loop request\n{}", run.context));
        let results = tool_results(last);
        assert_eq!(results.len(), 1, "{}", run.context);
        assert_ne!(results[0]["is_error"], true, "{}", run.context);
        let content: Value = serde_json::from_str(&result_text(&results[0]["content"]))
            .unwrap_or_else(|e| panic!("{e}\n{}", run.context));
        (main_loop[0].to_string(), content)
    };

    let (prompt, saved) = session(
        &format!("/car:car-remember deploys {fact}"),
        ToolCall {
            id: "toolu_remember",
            name: "mcp__plugin_car_car__memory_add_fact".to_string(),
            input: json!({"subject": "deploys", "body": fact, "kind": "constraint"}),
        },
    );
    assert!(prompt.contains("Save this to CAR's memory"), "{prompt}");
    assert!(prompt.contains(&format!("deploys {fact}")), "{prompt}");
    assert_eq!(
        (&saved["subject"], &saved["kind"]),
        (&json!("deploys"), &json!("constraint"))
    );

    let (prompt, recalled) = session(
        "/car:car-recall what do deploys need?",
        ToolCall {
            id: "toolu_recall",
            name: "mcp__plugin_car_car__memory_query".to_string(),
            input: json!({"query": "what do deploys need?"}),
        },
    );
    assert!(prompt.contains("Ask CAR's memory"), "{prompt}");
    assert_eq!(recalled["results"][0]["body"], json!(fact), "{recalled}");
}

/// The plugin's `car` agent, in the real Claude Code: the main loop hands it a task, the agent
/// runs `car do --json` with its Bash tool, `car do` works against the scripted model in its own
/// conversation, and the document's summary comes back through the agent to the main loop.
#[test]
fn the_car_agent_delegates_to_car_do_and_brings_back_its_summary() {
    let tmp = claude_root();
    let root = tmp.path();
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    std::fs::write(project.join("notes.txt"), "the build is green\n").unwrap();
    let model = ScriptedModel::start_routed(
        vec![ToolCall {
            id: "toolu_agent",
            name: "Agent".to_string(),
            input: json!({"description": "Read the notes", "subagent_type": "car:car",
                          "prompt": "Read notes.txt and say what it says.",
                          "run_in_background": false}),
        }],
        "The car agent reported back.",
        "ok",
        vec![
            // car do's own conversation: one Read, then its summary.
            Route {
                marker: "You are car do",
                calls: vec![ToolCall {
                    id: "toolu_read",
                    name: "Read".to_string(),
                    input: json!({"file_path": "notes.txt"}),
                }],
                last_words: "notes.txt says the build is green.",
            },
            // The plugin's car agent: exactly the command its instructions give.
            Route {
                marker: "You delegate the task to `car do`",
                calls: vec![ToolCall::bash(
                    "toolu_car_do",
                    "CAR_INVOKED_BY=claude-code car do --json \"Read notes.txt and say what it says.\" 2>/dev/null"
                        .to_string(),
                )],
                last_words: "car do: ok. notes.txt says the build is green. 1 tool call, none failed.",
            },
        ],
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(&project)
        // What a user of the agent sets once (docs/agent.md); the key and base URL car do
        // finds are Claude Code's own, pointing at the scripted model.
        .env("CAR_DO_MODEL", "claude-scripted")
        .args(["-p", "Have the car agent read notes.txt."])
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .args(["--allowedTools", "Bash,Agent"])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");

    // The agent's Bash call ran car do, whose stdout is the car.do/1 document with the summary
    // car do's own model gave and a receipt for its Read.
    let requests = model.requests();
    let agent_turn = requests
        .iter()
        .filter(|r| system_text_of(&r.body).contains("You delegate the task to `car do`"))
        .find_map(|r| {
            tool_results(&r.body)
                .into_iter()
                .find(|t| t["tool_use_id"] == "toolu_car_do")
        })
        .unwrap_or_else(|| panic!("the car agent's Bash call never came back\n{context}"));
    let output = result_text(&agent_turn["content"]);
    let document: Value = serde_json::from_str(output.trim())
        .unwrap_or_else(|e| panic!("{e}: not one JSON document: {output}\n{context}"));
    assert_eq!(document["schema"], "car.do/1", "{document}");
    assert_eq!(document["status"], "success", "{document}");
    assert_eq!(
        document["summary"], "notes.txt says the build is green.",
        "{document}"
    );
    assert_eq!(document["receipts"]["total"], 1, "{document}");
    assert!(
        requests
            .iter()
            .any(|r| system_text_of(&r.body).contains("You are car do")),
        "car do never asked its model\n{context}"
    );
    // The main loop got the agent's report as the Agent tool's result, and finished.
    let main_result = requests
        .iter()
        .find_map(|r| {
            tool_results(&r.body)
                .into_iter()
                .find(|t| t["tool_use_id"] == "toolu_agent")
        })
        .unwrap_or_else(|| panic!("the Agent call never came back to the main loop\n{context}"));
    assert!(
        result_text(&main_result["content"]).contains("notes.txt says the build is green"),
        "{main_result}\n{context}"
    );
    let last = run.lines.last().cloned().unwrap_or_default();
    assert_eq!(
        last["result"], "The car agent reported back.",
        "{last}\n{context}"
    );
}

/// `/car:car-do` in the real Claude Code: the command's own `allowed-tools` lets its `car do`
/// run (no `--allowedTools`), `car do` works against the scripted model in its own
/// conversation, and the car.do/1 document comes back to the main loop as the Bash result.
#[test]
fn the_car_do_command_runs_car_do_under_its_own_permission_and_gets_the_document() {
    let tmp = claude_root();
    let root = tmp.path();
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    std::fs::write(project.join("notes.txt"), "the build is green\n").unwrap();
    let task = "Read notes.txt and say what it says.";
    let model = ScriptedModel::start_routed(
        vec![ToolCall::bash(
            "toolu_car_do",
            format!("CAR_INVOKED_BY=claude-code car do --json \"{task}\" 2>/dev/null"),
        )],
        "car do: success. notes.txt says the build is green.",
        "ok",
        vec![Route {
            marker: "You are car do",
            calls: vec![ToolCall {
                id: "toolu_read",
                name: "Read".to_string(),
                input: json!({"file_path": "notes.txt"}),
            }],
            last_words: "notes.txt says the build is green.",
        }],
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(&project)
        .env("CAR_DO_MODEL", "claude-scripted")
        .args(["-p", &format!("/car:car-do \"{task}\"")])
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");
    let requests = model.requests();
    let main_loop: Vec<&Value> = requests
        .iter()
        .map(|r| &r.body)
        .filter(|b| !system_text_of(b).contains("You are car do"))
        .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(
        main_loop.first().is_some_and(|b| b
            .to_string()
            .contains("Run CAR's governed agent on this task")),
        "the command's prompt reached the model\n{context}"
    );
    let result = main_loop
        .iter()
        .find_map(|b| {
            tool_results(b)
                .into_iter()
                .find(|t| t["tool_use_id"] == "toolu_car_do")
        })
        .unwrap_or_else(|| panic!("the command's car do never came back\n{context}"));
    assert_ne!(
        result["is_error"], true,
        "the command's allowed-tools let it run: {result}"
    );
    let output = result_text(&result["content"]);
    let document: Value = serde_json::from_str(output.trim())
        .unwrap_or_else(|e| panic!("{e}: not one JSON document: {output}\n{context}"));
    assert_eq!(
        (&document["schema"], &document["status"]),
        (&json!("car.do/1"), &json!("success")),
        "{document}"
    );
    assert_eq!(document["summary"], "notes.txt says the build is green.");
    assert_eq!(
        document["receipts"]["by_tool"],
        json!({"Read": 1}),
        "{document}"
    );
    let last = run.lines.last().cloned().unwrap_or_default();
    assert_eq!(
        last["result"], "car do: success. notes.txt says the build is green.",
        "{last}\n{context}"
    );
}

/// The plugin's `car-reason` agent, in the real Claude Code: the main loop asks it a question,
/// it runs `car reason` with its Bash tool, `car reason` sends the files that bear on the
/// question to the model, and the answer with the file it cites comes back to the main loop.
#[test]
fn the_car_reason_agent_answers_from_the_files_car_reason_picks() {
    let tmp = claude_root();
    let root = tmp.path();
    let project = root.join("project");
    let src = project.join("src");
    std::fs::create_dir_all(project.join(".car")).unwrap();
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("payout.rs"),
        "/// Payouts are scheduled on business days: the scheduler skips weekends.\npub fn schedule_payout(day: u8) -> bool { day < 5 }\n",
    )
    .unwrap();
    std::fs::write(project.join("NOTES.md"), "Release notes for the CLI.\n").unwrap();
    let question = "Why does the payout scheduler skip weekends?";
    // car reason's own request offers no tools, so it gets the model's side words.
    let answer = "The scheduler skips weekends on purpose: see [src/payout.rs].";
    let model = ScriptedModel::start_routed(
        vec![ToolCall {
            id: "toolu_agent",
            name: "Agent".to_string(),
            input: json!({"description": "Ask car reason", "subagent_type": "car:car-reason",
                          "prompt": question, "run_in_background": false}),
        }],
        "The car-reason agent answered.",
        answer,
        vec![Route {
            marker: "You answer by running `car reason`",
            calls: vec![ToolCall::bash(
                "toolu_reason",
                format!("car reason --format json \"{question}\" 2>/dev/null"),
            )],
            last_words: "Weekends are skipped on purpose; cited: src/payout.rs.",
        }],
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(&project)
        .env("CAR_DO_MODEL", "claude-scripted")
        .args(["-p", "Ask the car-reason agent why payouts skip weekends."])
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .args(["--allowedTools", "Bash,Agent"])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");
    let requests = model.requests();
    let reasoned = requests
        .iter()
        .filter(|r| system_text_of(&r.body).contains("You answer by running `car reason`"))
        .find_map(|r| {
            tool_results(&r.body)
                .into_iter()
                .find(|t| t["tool_use_id"] == "toolu_reason")
        })
        .unwrap_or_else(|| panic!("the agent's car reason never came back\n{context}"));
    let output = result_text(&reasoned["content"]);
    let document: Value = serde_json::from_str(output.trim())
        .unwrap_or_else(|e| panic!("{e}: not one JSON document: {output}\n{context}"));
    assert_eq!(
        (&document["schema"], &document["status"]),
        (&json!("car.reason/1"), &json!("success")),
        "{document}"
    );
    assert_eq!(document["answer"], answer, "{document}");
    assert_eq!(
        (
            &document["files"][0]["path"],
            &document["files"][0]["cited"]
        ),
        (&json!("src/payout.rs"), &json!(true)),
        "{document}"
    );
    // car reason's request carried the file's text.
    assert!(
        requests.iter().any(
            |r| r.body.to_string().contains("the scheduler skips weekends")
                && r.body["tools"].as_array().is_none_or(|t| t.is_empty())
        ),
        "car reason never sent the file to its model\n{context}"
    );
    let main_result = requests
        .iter()
        .find_map(|r| {
            tool_results(&r.body)
                .into_iter()
                .find(|t| t["tool_use_id"] == "toolu_agent")
        })
        .unwrap_or_else(|| panic!("the Agent call never came back to the main loop\n{context}"));
    assert!(
        result_text(&main_result["content"]).contains("cited: src/payout.rs"),
        "{main_result}\n{context}"
    );
    let last = run.lines.last().cloned().unwrap_or_default();
    assert_eq!(
        last["result"], "The car-reason agent answered.",
        "{last}\n{context}"
    );
}
