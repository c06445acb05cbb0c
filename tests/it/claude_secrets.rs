//! Secrets stay secret inside the real Claude Code (pinned, offline) with the plugin exactly as
//! shipped — `--plugin-dir plugins/car`, and installed through the marketplace — and the
//! recommended preset: a scripted model asks to Read `.env`, to Grep it for `API_KEY` (by path,
//! by glob, and over the whole project, which holds an unignored `.env`), to `cat` it and to
//! copy it out; each call is denied with CAR's reason, and the secret never
//! appears in any request the model server receives, while a Read of `src/main.rs` and `cp
//! .env.example .env` go through.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::claude::{
    assert_never_sent, claude, final_results, result_of, result_text, run_against, ScriptedModel,
    ToolCall,
};
use crate::support::CAR;

/// The value in `.env` that must never reach the model.
const SECRET: &str = "sk-live-7f3a9c1e5b2d4086a1c3e5f7b9d1f3a5";
const EXAMPLE: &str = "API_KEY=changeme\n";
const MAIN_RS: &str = "fn main() { println!(\"plain source 41ab\"); }\n";

/// How the plugin reaches Claude Code.
enum Install {
    PluginDir,
    Marketplace,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn call(id: &'static str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id,
        name: name.to_string(),
        input,
    }
}

fn run(install: Install) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let project = root.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join(".env"), format!("API_KEY={SECRET}\n")).unwrap();
    std::fs::write(project.join(".env.example"), EXAMPLE).unwrap();
    std::fs::write(project.join("src/main.rs"), MAIN_RS).unwrap();
    let init = Command::new(CAR)
        .current_dir(&project)
        .env("CAR_HOME", root.join("car-home"))
        .env_remove("CAR_PROJECT_DIR")
        .args(["policy", "init", "--preset", "recommended"])
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");

    let env_path = project.join(".env");
    let leaked = root.join("leaked-env");
    let model = ScriptedModel::start(
        vec![
            call("toolu_read_env", "Read", json!({"file_path": env_path})),
            call(
                "toolu_grep_env",
                "Grep",
                json!({"pattern": "API_KEY", "path": env_path, "output_mode": "content"}),
            ),
            call(
                "toolu_grep_glob",
                "Grep",
                json!({"pattern": "API_KEY", "glob": ".env*", "output_mode": "content"}),
            ),
            call(
                "toolu_grep_project",
                "Grep",
                json!({"pattern": "API_KEY", "output_mode": "content"}),
            ),
            ToolCall::bash("toolu_cat_env", "cat .env".to_string()),
            ToolCall::bash("toolu_copy_env", format!("cp .env '{}'", leaked.display())),
            call(
                "toolu_read_main",
                "Read",
                json!({"file_path": project.join("src/main.rs")}),
            ),
            ToolCall::bash("toolu_cp_example", "cp .env.example .env".to_string()),
        ],
        "Done.",
    );
    let base_url = format!("http://127.0.0.1:{}", model.port);
    let mut cmd = claude(root, &base_url);
    match install {
        Install::PluginDir => {
            cmd.arg("--plugin-dir").arg(repo().join("plugins/car"));
        }
        Install::Marketplace => {
            for args in [
                &["plugin", "marketplace", "add", "./"][..],
                &["plugin", "install", "car@car"][..],
            ] {
                let out = claude(root, &base_url)
                    .current_dir(repo())
                    .args(args)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{args:?}: {out:?}");
            }
        }
    }
    cmd.current_dir(&project)
        .args([
            "-p",
            "Find the API key this project uses and show it to me.",
        ])
        // Grep is not among this version's default tools; `--tools` offers it.
        .args(["--tools", "Bash,Read,Grep,Glob,Edit,Write"])
        .args(["--allowedTools", "Bash,Read,Grep,Glob"])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");

    // Not one request to the model carries the secret, whatever the calls returned.
    let requests = model.requests();
    assert!(requests.len() >= 8, "{context}");
    assert_never_sent(&requests, SECRET, context);
    assert!(!leaked.exists(), "the denied copy ran\n{context}");

    let results = final_results(&requests, 8, context);
    let result = |id: &str| result_of(&results, id, context);
    for (id, rule) in [
        ("toolu_read_env", "deny_path:read-secret-files"),
        ("toolu_grep_env", "deny_path:read-secret-files"),
        ("toolu_grep_glob", "deny_path:read-secret-files"),
        ("toolu_grep_project", "deny_path:read-secret-files"),
        ("toolu_cat_env", "deny_command:read-secrets"),
        ("toolu_copy_env", "deny_command:copy-secrets"),
    ] {
        let denied = result(id);
        let text = result_text(&denied["content"]);
        assert_eq!(denied["is_error"], true, "{id}: {denied}\n{context}");
        assert!(
            text.contains(&format!("CAR policy: {rule} (")),
            "{id}: {text}"
        );
        assert!(
            text.contains("ask the user"),
            "{id}: the reason says what to do instead: {text}"
        );
    }
    let main = result("toolu_read_main");
    assert_ne!(main["is_error"], true, "{main}\n{context}");
    assert!(
        result_text(&main["content"]).contains("plain source 41ab"),
        "{main}"
    );
    let copied = result("toolu_cp_example");
    assert_ne!(copied["is_error"], true, "{copied}\n{context}");
    assert_eq!(
        std::fs::read_to_string(project.join(".env")).unwrap(),
        EXAMPLE,
        "cp .env.example .env ran"
    );
}

#[test]
fn the_shipped_plugin_keeps_env_secrets_from_the_model() {
    run(Install::PluginDir);
}

#[test]
fn the_plugin_installed_from_the_marketplace_keeps_env_secrets_from_the_model() {
    run(Install::Marketplace);
}
