//! The Claude Code PreToolUse adapter behind `car policy-check-hook`: reads the hook payload
//! (`{session_id, transcript_path, cwd, permission_mode, hook_event_name, tool_name, tool_input,
//! tool_use_id}`), evaluates it with the rules of `<CAR_HOME>/policies` and of every
//! `.car/policies` enclosing the payload's `cwd` (a session started in a subdirectory, or after
//! a `cd`, is governed by the project's rules), and answers the way Claude Code reads hooks.
//!
//! Mapping of Claude Code tools to the rule vocabulary: the rule `tool` is Claude's `tool_name`
//! unchanged and the params are its `tool_input` unchanged, so rules name what Claude sends
//! (`Bash` `command`, `Read` `file_path`, `Grep` `path`/`glob`, `WebFetch` `url`,
//! `mcp__server__tool` the MCP tool's arguments; `deny_connector = ["server"]` denies a whole
//! server). What each field of the tools that take a path, a URL or a command holds is the table
//! of [`super::claude_tools`]: a `[[deny_path]]` rule that names no `param` judges the paths the
//! tool touches by it (`Read`'s file, what `Grep` searches with its glob, `Artifact`'s uploads).
//! The plugin runs the hook for every tool (`"matcher": "*"`), so a tool Claude Code adds is
//! still seen by `deny_tool`, `deny_keyword` and the parameter rules.
//!
//! The egress guard sees `Bash` (its `command`) and `WebFetch` (its `url`). `[[deny_command]]`
//! rules parse `Bash`'s `command` as shell (relative paths against the payload's `cwd`).
//!
//! Contract: a deny prints exactly one `hookSpecificOutput` JSON line on stdout; an allow prints
//! nothing; a payload that cannot be evaluated (not JSON, no `tool_name`) fails open — nothing on
//! stdout, a note on stderr; a rule file that does not load fails closed (deny). The caller
//! always exits 0. Nothing here opens the database.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{Admission, Decision, PolicyEngine, Severity};

/// What the hook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// Let the call run; the warnings go to stderr.
    Allow { warnings: Vec<String> },
    /// Block it: the one JSON line for stdout.
    Deny { output: String },
    /// The payload could not be evaluated: let the call run and say why on stderr.
    FailOpen { note: String },
}

/// Evaluates one payload. `fallback_cwd` is used when the payload has no absolute `cwd`;
/// `hooks` are what runs this hook (the plugin directory, the `car` executable), which the
/// rules' self-protection guards like the rules.
pub fn answer(
    payload: &[u8],
    home_policies: &Path,
    fallback_cwd: &Path,
    hooks: &[&Path],
) -> HookAnswer {
    let payload: Value = match serde_json::from_slice(payload) {
        Ok(value) => value,
        Err(e) => {
            return HookAnswer::FailOpen {
                note: format!("the hook payload is not JSON ({e}); not evaluated"),
            }
        }
    };
    let Some(tool) = payload.get("tool_name").and_then(Value::as_str) else {
        return HookAnswer::FailOpen {
            note: "the hook payload has no tool_name; not evaluated".into(),
        };
    };
    let cwd = payload
        .get("cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| fallback_cwd.to_path_buf());
    let params = match payload.get("tool_input") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        Some(_) | None => Value::Object(Map::new()),
    };
    let project = crate::home::project_root(&cwd);
    let engine = PolicyEngine::load(home_policies, &cwd, &project).guarding_hooks(hooks);
    let evaluation = engine.evaluate(tool, &params, &Map::new(), Admission::Consume);
    match evaluation.decision {
        Decision::Allow => HookAnswer::Allow {
            warnings: evaluation
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Warn)
                .map(|f| format!("{} ({})", f.rule, f.reason))
                .collect(),
        },
        Decision::Deny => HookAnswer::Deny {
            output: json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": format!("CAR policy: {}", evaluation.deny_reason()),
                }
            })
            .to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(rules: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home/policies");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(project.join(".car/policies")).unwrap();
        std::fs::write(project.join(".car/policies/r.toml"), rules).unwrap();
        (tmp, home, project)
    }

    #[test]
    fn a_denied_bash_command_gets_one_deny_line() {
        let (_tmp, home, project) = setup("[[deny_tool_param]]\ntool = \"Bash\"\nparam = \"command\"\ncontains = \"git push --force\"\n");
        let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "git push --force origin main"}, "cwd": project});
        let HookAnswer::Deny { output } =
            answer(payload.to_string().as_bytes(), &home, Path::new("/"), &[])
        else {
            panic!("expected a deny");
        };
        let doc: Value = serde_json::from_str(&output).unwrap();
        assert_eq!(doc["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(!output.contains('\n'));
        assert!(!output.contains("origin main"), "{output}");
    }

    #[test]
    fn garbage_and_missing_tool_name_fail_open() {
        let home = Path::new("/nonexistent/policies");
        assert!(matches!(
            answer(b"\xff{not json", home, Path::new("/"), &[]),
            HookAnswer::FailOpen { .. }
        ));
        assert!(matches!(
            answer(b"{\"cwd\":\"/\"}", home, Path::new("/"), &[]),
            HookAnswer::FailOpen { .. }
        ));
    }

    #[test]
    fn a_broken_policy_file_fails_closed() {
        let (_tmp, home, project) = setup("deny_tool = [\n");
        let payload =
            json!({"tool_name": "Read", "tool_input": {"file_path": "/x"}, "cwd": project});
        assert!(matches!(
            answer(payload.to_string().as_bytes(), &home, Path::new("/"), &[]),
            HookAnswer::Deny { .. }
        ));
    }
}
