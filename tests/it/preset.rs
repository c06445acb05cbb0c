//! `car policy init --preset recommended` and the preset itself, judged through the real
//! `car policy-check-hook` on every command of `tests/it/data/shell_corpus.tsv`, the way
//! Claude Code runs it (one process per call, payload on stdin).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::support::TestHome;

/// One line of a labelled shell corpus (`tests/it/data/*.tsv`):
/// `label<TAB>category<TAB>command`, `\n` in a command a newline.
pub struct Case {
    pub destructive: bool,
    pub category: String,
    pub command: String,
}

/// The cases of `tests/it/data/<name>`.
pub fn corpus(name: &str) -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/data")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.splitn(3, '\t');
            let label = fields.next().unwrap();
            let category = fields.next().unwrap().to_string();
            let command = fields.next().unwrap().replace("\\n", "\n");
            assert!(matches!(label, "destructive" | "harmless"), "{line}");
            Case {
                destructive: label == "destructive",
                category,
                command,
            }
        })
        .collect()
}

/// A project outside `/tmp`, which the preset treats as scratch space (for projects that live
/// elsewhere): under the target directory, or `/var/tmp` when the checkout itself is in `/tmp`.
pub fn project_home() -> TestHome {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.starts_with("/tmp") {
        PathBuf::from("/var/tmp/car-it")
    } else {
        target
    };
    TestHome::new_in(&base.join("preset"))
}

fn bash(home: &TestHome, command: &str) -> Output {
    let payload = json!({
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": home.project,
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command, "description": "run it"}, "tool_use_id": "toolu_1"
    });
    home.hook(&serde_json::to_vec(&payload).unwrap())
}

/// The deny reason when stdout is exactly one deny line, `None` when it is empty; panics on
/// anything else.
fn decision(command: &str, out: &Output) -> Option<String> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{command}: the hook always exits 0"
    );
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    if stdout.is_empty() {
        return None;
    }
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{command}: {stdout}");
    let doc: Value = serde_json::from_str(lines[0]).unwrap();
    let output = &doc["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], "PreToolUse", "{command}: {doc}");
    assert_eq!(output["permissionDecision"], "deny", "{command}: {doc}");
    Some(
        output["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

#[test]
fn the_recommended_preset_denies_every_destructive_command_of_the_corpus_and_nothing_else() {
    let home = project_home();
    let data = home.car_json(&["policy", "init", "--preset", "recommended"]);
    assert_eq!(data["rules"], 22, "{data}");
    let cases = corpus("shell_corpus.tsv");
    assert!(cases.len() >= 60);
    let mut wrong = Vec::new();
    for case in &cases {
        let reason = decision(&case.command, &bash(&home, &case.command));
        match (&reason, case.destructive) {
            (Some(reason), true) => assert!(
                reason.starts_with("CAR policy: deny_command:"),
                "{}: {reason}",
                case.command
            ),
            (None, false) => {}
            (Some(reason), false) => wrong.push(format!(
                "harmless but denied [{}]: {}  ({reason})",
                case.category, case.command
            )),
            (None, true) => wrong.push(format!(
                "destructive but allowed [{}]: {}",
                case.category, case.command
            )),
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn a_deny_names_the_rule_and_never_echoes_the_command() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let reason = decision(
        "",
        &bash(&home, "timeout 5 git push -f origin secret-branch-xyz"),
    )
    .expect("denied");
    assert!(
        reason.starts_with("CAR policy: deny_command:git-push-force (a forced push"),
        "{reason}"
    );
    assert!(!reason.contains("secret-branch-xyz"), "{reason}");
    // Claude's Read tool: secret files are denied, the example file is not.
    let read = |path: PathBuf| {
        let payload = json!({"tool_name": "Read", "cwd": home.project,
            "tool_input": {"file_path": path}});
        decision("Read", &home.hook(&serde_json::to_vec(&payload).unwrap()))
    };
    let reason = read(home.project.join(".env")).expect("denied");
    assert!(
        reason.starts_with("CAR policy: deny_path:read-secret-files ("),
        "{reason}"
    );
    assert_eq!(read(home.project.join(".env.example")), None);
    assert!(read(PathBuf::from("/root/.ssh/id_ed25519")).is_some());
    // Other tools are not read by the shell rules.
    let payload = json!({"tool_name": "Write", "cwd": home.project,
        "tool_input": {"file_path": "notes.md", "content": "rm -rf / and git reset --hard"}});
    let out = home.hook(&serde_json::to_vec(&payload).unwrap());
    assert_eq!(decision("Write", &out), None);
}

#[test]
fn init_refuses_to_overwrite_without_force_and_replaces_with_it() {
    let home = TestHome::new();
    let data = home.car_json(&["policy", "init", "--preset", "recommended"]);
    let path = home.project.join(".car/policies/recommended.toml");
    assert_eq!(
        data,
        json!({"preset": "recommended", "scope": "project", "path": path, "rules": 22, "replaced": false})
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("[[deny_command]]") && text.starts_with("# CAR's recommended"));

    std::fs::write(&path, "# my edits\n").unwrap();
    let out = home.car(&["--json", "policy", "init", "--preset", "recommended"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["success"], false);
    assert_eq!(doc["error"]["code"], "exists");
    assert_eq!(
        doc["error"]["message"],
        format!(
            "{} already exists; it was left unchanged (pass --force to replace it)",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# my edits\n");

    let data = home.car_json(&["policy", "init", "--preset", "recommended", "--force"]);
    assert_eq!(data["replaced"], true);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    let entries = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(entries, 1, "no temporary file is left behind");
}

#[test]
fn init_global_writes_under_car_home_and_applies_to_every_project() {
    let home = project_home();
    let data = home.car_json(&["policy", "init", "--preset", "recommended", "--global"]);
    let path = home.home.join("policies/recommended.toml");
    assert_eq!(data["path"], json!(path));
    assert_eq!(data["scope"], "global");
    assert!(!home.project.join(".car/policies").exists());
    assert!(decision("", &bash(&home, "git stash clear")).is_some());
    let list = home.car_json(&["policy", "list"]);
    assert_eq!(list["rules"][0]["rule"], "deny_command:git-reset-hard");
    let lint = home.car_json(&["policy", "lint"]);
    assert_eq!(lint["errors"], 0);
    assert_eq!(lint["files"][0]["rules"], 22);
}

#[test]
fn init_with_an_unknown_preset_lists_the_presets_and_writes_nothing() {
    let home = TestHome::new();
    let out = home.car(&["policy", "init", "--preset", "paranoid"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown preset \"paranoid\"; the presets are: recommended\n"
    );
    assert!(out.stdout.is_empty());
    assert!(!home.project.join(".car/policies").exists());
    let help = home.car(&["policy", "init", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--force-with-lease passes"), "{help}");
}

#[test]
fn a_malformed_deny_command_table_fails_closed_and_names_file_and_line() {
    let home = TestHome::new();
    let dir = home.project.join(".car/policies");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mine.toml");
    std::fs::write(
        &file,
        "deny_tool = []\n\n[[deny_command]]\nname = \"everything\"\nreason = \"no\"\n",
    )
    .unwrap();
    let out = bash(&home, "ls");
    let reason = decision("ls", &out).expect("a broken rule file denies every call");
    assert!(
        reason.contains(&format!("{}:4", file.display())) && reason.contains("sets no condition"),
        "{reason}"
    );
    let lint = home.car(&["--json", "policy", "lint"]);
    assert_eq!(lint.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&lint.stdout).unwrap();
    assert_eq!(
        doc["error"]["message"],
        format!(
            "{}:4: deny_command 'everything': sets no condition, so it would deny every command (use deny_tool for that)",
            file.display()
        )
    );
    // An unknown field is refused with its line too.
    std::fs::write(
        &file,
        "[[deny_command]]\nname = \"x\"\nreason = \"r\"\nprogramme = \"rm\"\n",
    )
    .unwrap();
    let reason = decision("ls", &bash(&home, "ls")).expect("denied");
    assert!(reason.contains(&format!("{}:", file.display())), "{reason}");
}

#[test]
fn garbage_commands_get_an_answer_and_never_crash_the_hook() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    for command in [
        "'unterminated",
        "$((((",
        "`",
        ")))(((",
        "\u{0}",
        "<<EOF",
        "a | | b",
    ] {
        let out = bash(&home, command);
        assert_eq!(decision(command, &out), None, "{command}");
    }
    // Nested beyond what the parser inspects: denied, saying why.
    let deep = format!("{}rm -rf ~{}", "$(".repeat(20), ")".repeat(20));
    let reason = decision("deep", &bash(&home, &deep)).expect("denied");
    assert!(reason.contains("cannot inspect"), "{reason}");
    // A command that is not a string is not a shell command.
    let payload = json!({"tool_name": "Bash", "cwd": home.project, "tool_input": {"command": ["rm", "-rf", "/"]}});
    assert_eq!(
        decision("array", &home.hook(&serde_json::to_vec(&payload).unwrap())),
        None
    );
}

/// Claude Code's own tools, by the mapping of `car policy-check-hook` (no `param` in the
/// preset's `[[deny_path]]`): what reads or uploads a secret file is denied, whatever field
/// holds it; listing names and ordinary files pass.
#[test]
fn the_recommended_preset_denies_each_claude_tool_that_reads_or_uploads_a_secret() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    let call = |tool: &str, input: Value| {
        let payload = json!({"tool_name": tool, "cwd": home.project, "tool_input": input,
            "hook_event_name": "PreToolUse"});
        decision(tool, &home.hook(&serde_json::to_vec(&payload).unwrap()))
    };
    let env = home.project.join(".env");
    let denied = [
        ("Read", json!({"file_path": env})),
        ("Read", json!({"file_path": ".env.production"})),
        ("Grep", json!({"pattern": "API_KEY", "path": env})),
        (
            "Grep",
            json!({"pattern": "API_KEY", "path": ".env", "output_mode": "content"}),
        ),
        ("Grep", json!({"pattern": "API_KEY", "glob": ".env*"})),
        ("Grep", json!({"pattern": "API_KEY", "glob": "*.env"})),
        (
            "Grep",
            json!({"pattern": "API_KEY", "path": ".", "glob": "**/.env"}),
        ),
        ("Grep", json!({"pattern": "BEGIN", "path": "~/.ssh"})),
        (
            "NotebookRead",
            json!({"notebook_path": "~/.aws/credentials"}),
        ),
        (
            "Artifact",
            json!({"action": "upload_asset", "url": "https://claude.ai/artifact/x",
            "file_paths": ["logo.png", ".env"]}),
        ),
        (
            "Projects",
            json!({"method": "project_write", "local_path": ".env"}),
        ),
    ];
    for (tool, input) in &denied {
        let reason =
            call(tool, input.clone()).unwrap_or_else(|| panic!("{tool} {input} was allowed"));
        assert!(
            reason.starts_with("CAR policy: deny_path:read-secret-files (this file holds a secret")
                && reason.contains(".env.example"),
            "{tool}: {reason}"
        );
        assert!(!reason.contains("API_KEY"), "{reason}");
    }
    let allowed = [
        (
            "Read",
            json!({"file_path": home.project.join("src/main.rs")}),
        ),
        ("Read", json!({"file_path": ".env.example"})),
        ("Read", json!({"file_path": "~/.ssh/id_ed25519.pub"})),
        ("Grep", json!({"pattern": "API_KEY", "path": "."})),
        ("Grep", json!({"pattern": "API_KEY"})),
        ("Grep", json!({"pattern": "fn main", "glob": "*.rs"})),
        ("Grep", json!({"pattern": "x", "glob": "*"})),
        (
            "Grep",
            json!({"pattern": "API_KEY", "glob": ".env.example"}),
        ),
        ("Glob", json!({"pattern": "**/.env*"})),
        (
            "Write",
            json!({"file_path": ".env", "content": "API_KEY=1\n"}),
        ),
        (
            "Projects",
            json!({"method": "project_read", "path": ".env"}),
        ),
        ("WebSearch", json!({"query": "what is in .env"})),
    ];
    for (tool, input) in &allowed {
        assert_eq!(call(tool, input.clone()), None, "{tool} {input}");
    }
}

/// `Grep` with `output_mode: "content"` over a directory shows the matching lines of every file
/// it reads, hidden ones included: with an unignored `.env` under it, the search is denied and
/// the reason names the file (never its content); once `.env` is gitignored, a glob or a type
/// leaves it out, or only names are listed, the search passes.
#[test]
fn a_content_search_over_a_directory_holding_an_unignored_secret_is_denied() {
    let home = project_home();
    home.car_json(&["policy", "init", "--preset", "recommended"]);
    std::fs::create_dir_all(home.project.join("config")).unwrap();
    std::fs::write(
        home.project.join("config/.env.local"),
        "API_KEY=sk-tree-secret\n",
    )
    .unwrap();
    std::fs::write(
        home.project.join("main.rs"),
        "const API_KEY: &str = \"\";\n",
    )
    .unwrap();
    let grep = |input: Value| {
        let payload = json!({"tool_name": "Grep", "cwd": home.project, "tool_input": input});
        decision("Grep", &home.hook(&serde_json::to_vec(&payload).unwrap()))
    };
    let content = json!({"pattern": "API_KEY", "output_mode": "content"});
    let reason = grep(content.clone()).expect("denied");
    assert!(
        reason.starts_with("CAR policy: deny_path:read-secret-files (")
            && reason.contains("the search would read config/.env.local"),
        "{reason}"
    );
    assert!(!reason.contains("sk-tree-secret"), "{reason}");
    assert!(
        grep(json!({"pattern": "API_KEY", "path": "config", "output_mode": "content"})).is_some()
    );
    assert_eq!(
        grep(json!({"pattern": "API_KEY", "output_mode": "content", "glob": "*.rs"})),
        None
    );
    assert_eq!(
        grep(json!({"pattern": "API_KEY", "output_mode": "content", "type": "rust"})),
        None
    );
    assert_eq!(grep(json!({"pattern": "API_KEY"})), None);
    assert_eq!(
        grep(json!({"pattern": "API_KEY", "output_mode": "count"})),
        None
    );

    // Gitignored, the search does not read it (as ripgrep does not).
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&home.project)
        .status()
        .unwrap();
    assert!(git.success());
    std::fs::write(home.project.join(".gitignore"), ".env*\n!.env.example\n").unwrap();
    assert_eq!(grep(content), None);
}
