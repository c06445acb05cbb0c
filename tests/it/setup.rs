//! `car setup <host>` through the real binary: what it writes for each host (checked against
//! the hosts' documented formats; Cursor's hooks.json against the events and answers of
//! docs/hosts.md), run twice, `--undo`, the user's own entries and comments kept, no write
//! without `--yes` when it cannot ask, and `car doctor` telling which hosts are wired.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{TestHome, CAR};

fn setup(home: &TestHome, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "setup"];
    all.extend_from_slice(args);
    let out = home.command(CAR).args(&all).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), doc)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn codex_setup_twice_keeps_one_entry_and_the_users_comments_and_undo_restores_it() {
    let home = TestHome::new();
    let user = home.user_home();
    let config = user.join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let mine = "# my Codex\nmodel = \"gpt-5.5\" # the fast one\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
    std::fs::write(&config, mine).unwrap();

    // Nothing is written without --yes when there is no terminal to ask on.
    let (code, doc) = setup(&home, &["codex"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["error"]["code"], "confirmation_required", "{doc}");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("+[mcp_servers.car]"));
    assert_eq!(read(&config), mine);

    let (code, doc) = setup(&home, &["codex", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["data"]["applied"], true);
    assert_eq!(doc["data"]["scope"], "user");
    let once = read(&config);
    assert!(once.starts_with(mine.trim_end()), "{once}");
    let parsed: toml::Value = toml::from_str(&once).unwrap();
    assert_eq!(
        parsed["mcp_servers"]["docs"]["command"].as_str(),
        Some("docs-mcp")
    );
    let car_mcp = parsed["mcp_servers"]["car"]["command"].as_str().unwrap();
    assert!(
        car_mcp.ends_with("/car-mcp") && Path::new(car_mcp).exists(),
        "{car_mcp}"
    );
    assert_eq!(
        parsed["mcp_servers"]["car"]["env"]["CAR_INVOKED_BY"].as_str(),
        Some("codex")
    );
    let gate = parsed["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(gate.ends_with("/car-gate --host codex"), "{gate}");
    assert!(parsed["hooks"]["SessionStart"].is_array());

    let (code, doc) = setup(&home, &["codex", "--yes"]);
    assert_eq!((code, &doc["data"]["applied"]), (0, &json!(false)), "{doc}");
    assert_eq!(read(&config), once, "a second setup changes nothing");

    let doctor = home.car_json(&["doctor"]);
    let hosts = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "hosts")
        .unwrap();
    assert!(
        hosts["detail"].as_str().unwrap().contains("codex (user)"),
        "{hosts}"
    );

    let (code, doc) = setup(&home, &["codex", "--undo", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(read(&config), mine, "undo puts the file back as it was");
}

#[test]
fn undo_after_the_user_edited_the_file_takes_out_only_cars_entries() {
    let home = TestHome::new();
    let user = home.user_home();
    let settings = user.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mine = "{\n  // dark, always\n  \"theme\": \"dark\",\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\"matcher\": \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \"./lint.sh\"}]}\n    ]\n  }\n}\n";
    std::fs::write(&settings, mine).unwrap();
    let (code, doc) = setup(&home, &["gemini", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    let text = read(&settings);
    assert!(
        text.contains("// dark, always") && text.contains("./lint.sh"),
        "{text}"
    );
    let parsed: Value =
        serde_json::from_str(&jsonc(&text)).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(parsed["hooks"]["BeforeTool"].as_array().unwrap().len(), 2);
    assert_eq!(
        parsed["mcpServers"]["car"]["env"]["CAR_INVOKED_BY"],
        "gemini"
    );
    assert!(parsed["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with("/car hook prompt"));
    // The user changes the file after setup; undo keeps that change and the comment.
    std::fs::write(&settings, text.replace("\"dark\"", "\"light\"")).unwrap();
    let (code, doc) = setup(&home, &["gemini", "--undo", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    let after = read(&settings);
    assert!(
        !after.contains("policy-check-hook") && !after.contains("car-mcp"),
        "{after}"
    );
    assert!(
        after.contains("\"light\"") && after.contains("// dark, always"),
        "{after}"
    );
    assert!(after.contains("./lint.sh"), "{after}");
    let (_, doc) = setup(&home, &["gemini", "--undo", "--yes"]);
    assert_eq!(doc["data"]["applied"], false, "{doc}");
}

/// Cursor has no CLI to install here: its hooks.json is checked against the documented format
/// (version 1, a flat list of `{command, timeout, failClosed}` per event, the events that may
/// deny), and each wired command is run on that event's documented payload.
#[test]
fn cursor_setup_writes_the_documented_format_and_each_hook_answers_its_event() {
    let home = TestHome::new();
    let (code, doc) = setup(&home, &["cursor", "--project", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["data"]["scope"], "project");
    let hooks: Value =
        serde_json::from_str(&read(&home.project.join(".cursor/hooks.json"))).unwrap();
    let mcp: Value = serde_json::from_str(&read(&home.project.join(".cursor/mcp.json"))).unwrap();
    assert_eq!(hooks["version"], 1);
    assert_eq!(mcp["mcpServers"]["car"]["env"]["CAR_INVOKED_BY"], "cursor");
    let events: Vec<&str> = hooks["hooks"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for event in &events {
        assert!(
            [
                "preToolUse",
                "beforeReadFile",
                "beforeMCPExecution",
                "sessionStart"
            ]
            .contains(event),
            "{event} is not an event CAR wires"
        );
    }
    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/p.toml"),
        "deny_connector = [\"vault\"]\n[[deny_path]]\nname = \"secrets\"\nreason = \"a secret\"\ntool = [\"Read\"]\npath_glob_any = [\"**/.env\"]\n",
    )
    .unwrap();
    let cwd = &home.project;
    let payloads = [
        (
            "preToolUse",
            json!({"hook_event_name": "preToolUse", "conversation_id": "c",
            "generation_id": "g", "workspace_roots": [cwd], "cwd": cwd, "tool_name": "Read",
            "tool_input": {"path": cwd.join(".env")}, "tool_use_id": "t"}),
            true,
        ),
        (
            "beforeReadFile",
            json!({"hook_event_name": "beforeReadFile", "conversation_id": "c",
            "workspace_roots": [cwd], "file_path": cwd.join(".env"), "content": "", "attachments": []}),
            true,
        ),
        (
            "beforeMCPExecution",
            json!({"hook_event_name": "beforeMCPExecution",
            "conversation_id": "c", "workspace_roots": [cwd], "tool_name": "get",
            "tool_input": "{}", "mcp_server_name": "vault", "command": "vault"}),
            true,
        ),
        (
            "beforeReadFile",
            json!({"hook_event_name": "beforeReadFile", "conversation_id": "c",
            "workspace_roots": [cwd], "file_path": cwd.join("README.md"), "content": "", "attachments": []}),
            false,
        ),
    ];
    for (event, payload, denied) in payloads {
        let entry = &hooks["hooks"][event][0];
        assert!(
            entry["timeout"].is_number() && entry["failClosed"] == true,
            "{entry}"
        );
        let command = entry["command"].as_str().unwrap();
        let out = home
            .command("sh")
            .args(["-c", command])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(payload.to_string().as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        let expected = if denied { "deny" } else { "allow" };
        assert_eq!(answer["permission"], expected, "{event}: {answer}");
    }
}

#[test]
fn claude_code_setup_for_a_project_writes_its_settings_and_mcp_json() {
    let home = TestHome::new();
    let (code, doc) = setup(&home, &["claude-code", "--project", "--yes"]);
    assert_eq!(code, 0, "{doc}");
    let settings: Value =
        serde_json::from_str(&read(&home.project.join(".claude/settings.json"))).unwrap();
    let gate = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(gate.ends_with("/car-gate; exit 0"), "{gate}");
    let mcp: Value = serde_json::from_str(&read(&home.project.join(".mcp.json"))).unwrap();
    assert_eq!(
        mcp["mcpServers"]["car"]["env"]["CAR_INVOKED_BY"],
        "claude-code"
    );
    // The gate now guards what it was wired with: an agent may not take the hook out.
    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/p.toml"),
        "deny_tool = [\"NoSuchTool\"]\n",
    )
    .unwrap();
    let payload = json!({"hook_event_name": "PreToolUse", "cwd": home.project, "tool_name": "Write",
        "tool_input": {"file_path": home.project.join(".claude/settings.json"), "content": "{}"}});
    let out = home.hook(payload.to_string().as_bytes());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("deny"),
        "{out:?}"
    );
    let (code, _) = setup(&home, &["claude-code", "--project", "--undo", "--yes"]);
    assert_eq!(code, 0);
    assert!(
        !home.project.join(".mcp.json").exists(),
        "a file setup created goes with undo"
    );
}

#[test]
fn a_file_that_is_not_json_is_left_alone_with_an_error_that_names_it() {
    let home = TestHome::new();
    let user = home.user_home();
    let settings = user.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{ \"theme\": ").unwrap();
    let (code, doc) = setup(&home, &["gemini", "--yes"]);
    assert_eq!(code, 1, "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("settings.json") && message.contains("not JSON"),
        "{message}"
    );
    assert_eq!(read(&settings), "{ \"theme\": ");
    let (code, _) = setup(&home, &["gemini", "--user", "--project", "--yes"]);
    assert_eq!(code, 2);
}

/// JSON with `//` comments as strict JSON (for the checks above).
fn jsonc(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each host's package beside `plugins/car` (plugins/codex, plugins/gemini, plugins/cursor) wires
/// the same MCP server and hooks as `car setup` writes, with `car` found on PATH instead of by
/// absolute path: one wiring, two ways to install it.
#[test]
fn each_hosts_package_wires_what_car_setup_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = TestHome::new();
    for host in ["claude-code", "codex", "gemini", "cursor"] {
        let (code, doc) = setup(&home, &[host, "--project", "--yes"]);
        assert_eq!(code, 0, "{doc}");
    }
    let bin = Path::new(CAR).parent().unwrap().canonicalize().unwrap();
    // What setup wrote, with this build's directory taken out of the commands.
    let unpin = |v: &Value| -> Value {
        let text = v.to_string().replace(&format!("{}/", bin.display()), "");
        serde_json::from_str(&text).unwrap()
    };
    let p = &home.project;
    // A package runs the gate from PATH, and `car policy-check-hook` when the installed CAR
    // predates car-gate (setup, run by the binaries themselves, names car-gate by path).
    let json_file = |path: &Path| -> Value {
        let mut text = read(path);
        for flag in ["", " --host codex", " --host gemini", " --host cursor"] {
            text = text.replace(
                &format!("if command -v car-gate >/dev/null 2>&1; then car-gate{flag}; else car policy-check-hook{flag}; fi"),
                &format!("car-gate{flag}"),
            );
        }
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };

    // Claude Code: the plugin's hooks and .mcp.json.
    let settings = json_file(&p.join(".claude/settings.json"));
    let plugin = json_file(&root.join("plugins/car/hooks/hooks.json"));
    assert_eq!(unpin(&settings["hooks"]), plugin["hooks"]);
    let mcp = json_file(&p.join(".mcp.json"));
    let plugin_mcp = json_file(&root.join("plugins/car/.mcp.json"));
    assert_eq!(unpin(&mcp["mcpServers"]), plugin_mcp["mcpServers"]);

    // Codex: the plugin's hooks/hooks.json and .mcp.json against config.toml.
    let config: Value = toml::from_str(&read(&p.join(".codex/config.toml"))).unwrap();
    let codex_hooks = json_file(&root.join("plugins/codex/hooks/hooks.json"));
    assert_eq!(unpin(&config["hooks"]), codex_hooks["hooks"]);
    let codex_mcp = json_file(&root.join("plugins/codex/.mcp.json"));
    assert_eq!(unpin(&config["mcp_servers"]), codex_mcp["mcpServers"]);
    let market = json_file(&root.join(".agents/plugins/marketplace.json"));
    assert_eq!(market["plugins"][0]["source"]["path"], "./plugins/codex");
    assert!(root
        .join("plugins/codex/.codex-plugin/plugin.json")
        .exists());

    // Gemini CLI: the extension's manifest and hooks against settings.json.
    let gemini = json_file(&p.join(".gemini/settings.json"));
    let extension = json_file(&root.join("plugins/gemini/gemini-extension.json"));
    let gemini_hooks = json_file(&root.join("plugins/gemini/hooks/hooks.json"));
    assert_eq!(unpin(&gemini["hooks"]), gemini_hooks["hooks"]);
    assert_eq!(unpin(&gemini["mcpServers"]), extension["mcpServers"]);
    assert_eq!(extension["name"], "car");
    assert!(root
        .join("plugins/gemini")
        .join(extension["contextFileName"].as_str().unwrap())
        .exists());
    for command in std::fs::read_dir(root.join("plugins/gemini/commands/car")).unwrap() {
        let command: toml::Value = toml::from_str(&read(&command.unwrap().path())).unwrap();
        assert!(command["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("CAR") || p.contains("car")));
        assert!(command["description"].is_str());
    }

    for manifest in [
        "plugins/codex/.codex-plugin/plugin.json",
        "plugins/gemini/gemini-extension.json",
        "plugins/cursor/.cursor-plugin/plugin.json",
    ] {
        let manifest = json_file(&root.join(manifest));
        assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"), "{manifest}");
        assert_eq!(manifest["name"], "car");
    }

    // Cursor: the package's hooks.json and mcp.json.
    let cursor = json_file(&p.join(".cursor/hooks.json"));
    let cursor_pkg = json_file(&root.join("plugins/cursor/hooks/hooks.json"));
    assert_eq!(unpin(&cursor), cursor_pkg);
    let cursor_mcp = json_file(&p.join(".cursor/mcp.json"));
    assert_eq!(
        unpin(&cursor_mcp),
        json_file(&root.join("plugins/cursor/mcp.json"))
    );
}
