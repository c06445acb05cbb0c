//! The pre-tool-call hook behind `car policy-check-hook`, for every host (Claude Code, Codex,
//! Gemini CLI, Cursor; see [`super::hosts`]): reads the host's payload, maps its tool call to
//! the rule vocabulary, evaluates it with the rules of `<CAR_HOME>/policies` and of every
//! `.car/policies` enclosing the payload's `cwd` (a session started in a subdirectory, or after
//! a `cd`, is governed by the project's rules), and answers the way that host reads hooks.
//!
//! The rule vocabulary is Claude Code's: the rule `tool` is Claude's `tool_name` and the params
//! its `tool_input` (`Bash` `command`, `Read` `file_path`, `Grep` `path`/`glob`, `WebFetch`
//! `url`, `mcp__server__tool` the MCP tool's arguments; `deny_connector = ["server"]` denies a
//! whole server); other hosts' tools are mapped onto it. What each field of the tools that take
//! a path, a URL or a command holds is the table of [`super::claude_tools`]: a `[[deny_path]]`
//! rule that names no `param` judges the paths the tool touches by it. The packages run the
//! hook for every tool, so a tool a host adds is still seen by `deny_tool`, `deny_keyword` and
//! the parameter rules.
//!
//! The egress guard sees `Bash` (its `command`) and `WebFetch` (its `url`). `[[deny_command]]`
//! rules parse `Bash`'s `command` as shell (relative paths against the payload's `cwd`).
//!
//! Contract: a deny prints exactly one JSON line on stdout in the host's form; an allow prints
//! what the host needs for one (nothing for Claude Code and Codex); a payload that cannot be
//! evaluated (not JSON, no `tool_name`) fails open — an allow, and a note on stderr; a rule file
//! that does not load fails closed (deny). The caller always exits 0. Nothing here opens the
//! database.

use std::path::Path;

use serde_json::{Map, Value};

use super::gate_log::Entry;
use super::{hosts, Admission, Decision, PolicyEngine, Severity};
use crate::hooks::hosts::Host;

/// What the hook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// Let the call run: `output` is what the host wants on stdout for an allow (if
    /// anything); the warnings go to stderr.
    Allow {
        output: Option<&'static str>,
        warnings: Vec<String>,
        /// For the decision file, when there were warnings.
        logged: Option<Box<Entry>>,
    },
    /// Block it: the one JSON line for stdout, and the decision file's line.
    Deny {
        output: String,
        logged: Option<Box<Entry>>,
    },
    /// The payload could not be evaluated: let the call run and say why on stderr.
    FailOpen {
        output: Option<&'static str>,
        note: String,
    },
}

/// Evaluates one payload of `host` (`None`: told from the payload, see [`crate::hooks::hosts::detect`]).
/// `fallback_cwd` is used when the payload has no absolute `cwd`; `hooks` are what runs this
/// hook (the plugin directory, the `car` executable), which the rules' self-protection guards
/// like the rules.
pub fn answer(
    payload: &[u8],
    host: Option<Host>,
    home_policies: &Path,
    fallback_cwd: &Path,
    hooks: &[&Path],
) -> HookAnswer {
    let payload: Value = match serde_json::from_slice(payload) {
        Ok(value) => value,
        // A tool call the agent's own arguments made unreadable (a lone surrogate escape, a
        // nesting deeper than the parser goes) is denied: what cannot be read cannot be judged.
        Err(e) if looks_like_a_tool_call(payload) => {
            let host = host.unwrap_or_else(|| sniff_host(payload));
            let reason = format!("this tool call's payload cannot be read ({e}), so it cannot be checked; send its arguments as plain text");
            return HookAnswer::Deny {
                output: hosts::deny_output(host, &format!("CAR policy: {reason}")),
                logged: Some(Box::new(Entry::new(host.as_str(), "deny", "?", &reason))),
            };
        }
        Err(e) => {
            return HookAnswer::FailOpen {
                output: host.and_then(hosts::allow_output),
                note: format!("the hook payload is not JSON ({e}); not evaluated"),
            }
        }
    };
    let host = host.unwrap_or_else(|| crate::hooks::hosts::detect(&payload));
    let cwd = hosts::working_dir(&payload, fallback_cwd);
    let actions = match hosts::actions(host, &payload, &cwd) {
        Ok(actions) => actions,
        Err(note) => {
            return HookAnswer::FailOpen {
                output: hosts::allow_output(host),
                note,
            }
        }
    };
    let project = crate::home::project_root(&cwd);
    // Gemini CLI loads a trusted project's `.gemini/.env` into the environment its hooks run in.
    let project_env = project.join(".gemini").join(".env");
    let mut hooks = hooks.to_vec();
    hooks.push(&project_env);
    let hooks = &hooks[..];
    let engine = PolicyEngine::load(home_policies, &cwd, &project).guarding_hooks(hooks);
    let logged = |decision: &str, action: &hosts::Action, reason: &str| {
        let mut entry =
            Entry::new(host.as_str(), decision, &action.tool, reason).about(&action.params);
        entry.session = session_of(host, &payload);
        entry.cwd = cwd.to_string_lossy().into_owned();
        Some(Box::new(entry))
    };
    let mut warnings = Vec::new();
    let mut warned = None;
    for action in &actions {
        let mut evaluation = engine.evaluate(
            &action.tool,
            &action.params,
            &Map::new(),
            Admission::Consume,
        );
        if action.cwd != cwd && evaluation.decision == Decision::Allow {
            // A shell run in another directory (Gemini's dir_path, Cursor's
            // working_directory) answers to the session's rules and to that directory's.
            let project = crate::home::project_root(&action.cwd);
            let there = PolicyEngine::load(home_policies, &action.cwd, &project)
                .guarding_hooks(hooks)
                .evaluate(
                    &action.tool,
                    &action.params,
                    &Map::new(),
                    Admission::Consume,
                );
            if there.decision == Decision::Deny {
                evaluation = there;
            }
        }
        match evaluation.decision {
            Decision::Allow => {
                let before = warnings.len();
                warnings.extend(
                    evaluation
                        .findings
                        .iter()
                        .filter(|f| f.severity == Severity::Warn)
                        .map(|f| format!("{} ({})", f.rule, f.reason)),
                );
                if warned.is_none() && warnings.len() > before {
                    warned = Some(action);
                }
            }
            Decision::Deny => {
                let reason = evaluation.deny_reason();
                return HookAnswer::Deny {
                    output: hosts::deny_output(host, &format!("CAR policy: {reason}")),
                    logged: logged("deny", action, &reason),
                };
            }
        }
    }
    HookAnswer::Allow {
        output: hosts::allow_output(host),
        logged: warned.and_then(|action| logged("warn", action, &warnings.join("; "))),
        warnings,
    }
}

/// The host's session id in its payload (Cursor calls it the conversation).
fn session_of(host: Host, payload: &Value) -> Option<String> {
    let keys: &[&str] = match host {
        Host::Cursor => &["conversation_id", "session_id"],
        _ => &["session_id"],
    };
    keys.iter()
        .find_map(|key| payload[*key].as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// Whether unreadable bytes still carry a tool call's marks.
fn looks_like_a_tool_call(payload: &[u8]) -> bool {
    let text = String::from_utf8_lossy(payload);
    [
        "\"tool_name\"",
        "\"tool_input\"",
        "\"command\"",
        "\"file_path\"",
    ]
    .iter()
    .any(|key| text.contains(key))
}

/// The host of a payload that is not JSON, from the marks each host's payload carries.
fn sniff_host(payload: &[u8]) -> Host {
    let text = String::from_utf8_lossy(payload);
    if text.contains("\"BeforeTool\"") {
        Host::Gemini
    } else if text.contains("\"conversation_id\"") || text.contains("\"workspace_roots\"") {
        Host::Cursor
    } else if text.contains("\"turn_id\"") {
        Host::Codex
    } else {
        Host::ClaudeCode
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

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
            "tool_input": {"command": "git push --force origin main"}, "cwd": project,
            "session_id": "s-1"});
        let HookAnswer::Deny { output, logged } = answer(
            payload.to_string().as_bytes(),
            None,
            &home,
            Path::new("/"),
            &[],
        ) else {
            panic!("expected a deny");
        };
        let doc: Value = serde_json::from_str(&output).unwrap();
        assert_eq!(doc["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(!output.contains('\n'));
        assert!(!output.contains("origin main"), "{output}");
        // The decision file's line says what was denied, where and in which session.
        let logged = logged.expect("a deny is logged");
        assert_eq!(
            (
                logged.decision.as_str(),
                logged.tool.as_str(),
                logged.host.as_str()
            ),
            ("deny", "Bash", "claude-code")
        );
        assert_eq!(logged.summary, "git push --force origin main");
        assert_eq!(logged.session.as_deref(), Some("s-1"));
        assert!(
            logged.reason.contains("deny_tool_param:Bash.command"),
            "{}",
            logged.reason
        );
    }

    #[test]
    fn garbage_and_missing_tool_name_fail_open() {
        let home = Path::new("/nonexistent/policies");
        assert!(matches!(
            answer(b"\xff{not json", None, home, Path::new("/"), &[]),
            HookAnswer::FailOpen { .. }
        ));
        assert!(matches!(
            answer(b"{\"cwd\":\"/\"}", None, home, Path::new("/"), &[]),
            HookAnswer::FailOpen { .. }
        ));
    }

    #[test]
    fn a_broken_policy_file_fails_closed() {
        let (_tmp, home, project) = setup("deny_tool = [\n");
        let payload =
            json!({"tool_name": "Read", "tool_input": {"file_path": "/x"}, "cwd": project});
        assert!(matches!(
            answer(
                payload.to_string().as_bytes(),
                None,
                &home,
                Path::new("/"),
                &[]
            ),
            HookAnswer::Deny { .. }
        ));
    }
}
