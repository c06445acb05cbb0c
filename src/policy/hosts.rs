//! Each agent host's pre-tool-call hook, in and out: its payload mapped to the rule vocabulary
//! (Claude Code's tool names and parameters, which the presets and the guards speak), and its
//! way to deny. Sources and the full table are in `docs/hosts.md`.
//!
//! | host        | event                                                                    | deny                                                      | allow                   |
//! |-------------|--------------------------------------------------------------------------|-----------------------------------------------------------|-------------------------|
//! | Claude Code | `PreToolUse`                                                             | `hookSpecificOutput.permissionDecision = "deny"`          | nothing                 |
//! | Codex       | `PreToolUse` (`turn_id`)                                                 | the same JSON                                             | nothing                 |
//! | Gemini CLI  | `BeforeTool`                                                             | `{"decision":"deny","reason":…}`                          | `{}`                    |
//! | Cursor      | `preToolUse`, `beforeShellExecution`, `beforeReadFile`, `beforeMCPExecution` | `{"permission":"deny","user_message","agent_message"}` | `{"permission":"allow"}` |
//!
//! One host call can be several actions: a Codex patch is judged by every path it adds, changes,
//! deletes or moves to; Gemini's `read_many_files` by each of its paths, `web_fetch` by each URL
//! in its prompt. The call is denied when any of them is.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::hooks::hosts::Host;

/// One thing a host's tool call does, in the rule vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub tool: String,
    pub params: Value,
    /// The directory relative paths (and the shell) start from.
    pub cwd: PathBuf,
}

impl Action {
    fn new(tool: &str, params: Value, cwd: &Path) -> Action {
        Action {
            tool: tool.to_string(),
            params,
            cwd: cwd.to_path_buf(),
        }
    }
}

/// The payload's working directory: its absolute `cwd`, else Cursor's first workspace root,
/// else `fallback`.
pub fn working_dir(payload: &Value, fallback: &Path) -> PathBuf {
    let absolute = |v: &Value| v.as_str().map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(&payload["cwd"])
        .or_else(|| absolute(&payload["workspace_roots"][0]))
        .unwrap_or_else(|| fallback.to_path_buf())
}

/// What the call does, as actions to judge; `Err` when the payload is not a tool call this
/// host's hook can judge (the caller fails open).
pub fn actions(host: Host, payload: &Value, cwd: &Path) -> Result<Vec<Action>, String> {
    match host {
        Host::ClaudeCode => claude(payload, cwd),
        Host::Codex => codex(payload, cwd),
        Host::Gemini => gemini(payload, cwd),
        Host::Cursor => cursor(payload, cwd),
    }
}

fn tool_name(payload: &Value) -> Result<&str, String> {
    payload["tool_name"]
        .as_str()
        .ok_or_else(|| "the hook payload has no tool_name; not evaluated".to_string())
}

fn input(payload: &Value) -> Value {
    match &payload["tool_input"] {
        Value::Object(map) => Value::Object(map.clone()),
        // Cursor's beforeMCPExecution sends the arguments as a JSON string.
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

fn text<'a>(params: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| params.get(*k).and_then(Value::as_str))
}

/// `dir` (relative to `cwd`, or absolute) as a directory, or `cwd` when absent.
fn within(cwd: &Path, dir: Option<&str>) -> PathBuf {
    match dir.filter(|d| !d.is_empty()) {
        Some(dir) => cwd.join(dir),
        None => cwd.to_path_buf(),
    }
}

fn claude(payload: &Value, cwd: &Path) -> Result<Vec<Action>, String> {
    Ok(vec![Action::new(tool_name(payload)?, input(payload), cwd)])
}

fn codex(payload: &Value, cwd: &Path) -> Result<Vec<Action>, String> {
    let tool = tool_name(payload)?;
    let params = input(payload);
    if tool != "apply_patch" {
        // Every shell tool arrives as `Bash` {command}; MCP tools as `mcp__server__tool`.
        // Codex applies a patch given to `apply_patch` in a shell command itself, after this
        // hook ran on the command: the patch is judged here as if it came by the tool.
        let inline = (tool == "Bash")
            .then(|| text(&params, &["command"]))
            .flatten()
            .filter(|c| c.contains("*** Begin Patch"))
            .map(|c| patch_actions(c, cwd))
            .unwrap_or_default();
        let mut out = vec![Action::new(tool, params, cwd)];
        out.extend(inline);
        return Ok(out);
    }
    let patch = text(&params, &["command", "patch", "input"]).unwrap_or("");
    let mut out = vec![Action::new("apply_patch", params.clone(), cwd)];
    out.extend(patch_actions(patch, cwd));
    Ok(out)
}

/// The file operations of a Codex patch (`*** Begin Patch` … `*** End Patch`): an added file is
/// a `Write` of its lines, an updated one a `MultiEdit` of its hunks, a deleted one (or the
/// source of a move) a `Write` of nothing, a move's target a `Write` of nothing.
pub fn patch_actions(patch: &str, cwd: &Path) -> Vec<Action> {
    enum Op {
        Add(String, Vec<String>),
        Update(String, Option<String>, Vec<(String, String)>),
        Delete(String),
    }
    let mut ops: Vec<Op> = Vec::new();
    let mut hunk: Option<(String, String)> = None;
    let flush = |ops: &mut Vec<Op>, hunk: &mut Option<(String, String)>| {
        if let (Some(Op::Update(_, _, hunks)), Some(h)) = (ops.last_mut(), hunk.take()) {
            if h.0 != h.1 {
                hunks.push(h);
            }
        }
    };
    for line in patch.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        // Codex trims a line before it looks for a marker ("tolerant of extra padding"), so a
        // header counts however it is indented.
        let marker = line.trim();
        if let Some(path) = marker.strip_prefix("*** Add File:") {
            flush(&mut ops, &mut hunk);
            ops.push(Op::Add(path.trim().to_string(), Vec::new()));
        } else if let Some(path) = marker.strip_prefix("*** Update File:") {
            flush(&mut ops, &mut hunk);
            ops.push(Op::Update(path.trim().to_string(), None, Vec::new()));
        } else if let Some(path) = marker.strip_prefix("*** Delete File:") {
            flush(&mut ops, &mut hunk);
            ops.push(Op::Delete(path.trim().to_string()));
        } else if let Some(path) = marker.strip_prefix("*** Move to:") {
            if let Some(Op::Update(_, to, _)) = ops.last_mut() {
                *to = Some(path.trim().to_string());
            }
        } else if marker.starts_with("@@") || marker.starts_with("***") {
            flush(&mut ops, &mut hunk);
        } else {
            match ops.last_mut() {
                Some(Op::Add(_, lines)) => {
                    lines.push(line.strip_prefix('+').unwrap_or(line).to_string());
                }
                Some(Op::Update(..)) => {
                    let (old, new) = hunk.get_or_insert_with(Default::default);
                    let (mark, rest) = line.split_at(line.len().min(1));
                    let push = |s: &mut String| {
                        s.push_str(rest);
                        s.push('\n');
                    };
                    match mark {
                        "-" => push(old),
                        "+" => push(new),
                        _ => {
                            push(old);
                            push(new);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    flush(&mut ops, &mut hunk);
    let path = |p: &str| cwd.join(p).to_string_lossy().into_owned();
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Add(file, lines) => {
                let mut content = lines.join("\n");
                content.push('\n');
                out.push(Action::new(
                    "Write",
                    json!({"file_path": path(&file), "content": content}),
                    cwd,
                ));
            }
            Op::Update(file, to, hunks) => {
                let edits: Vec<Value> = hunks
                    .iter()
                    .map(|(old, new)| json!({"old_string": old, "new_string": new}))
                    .collect();
                if let Some(to) = to {
                    out.push(Action::new(
                        "Write",
                        json!({"file_path": path(&file), "content": ""}),
                        cwd,
                    ));
                    out.push(Action::new(
                        "Write",
                        json!({"file_path": path(&to), "content": ""}),
                        cwd,
                    ));
                } else {
                    out.push(Action::new(
                        "MultiEdit",
                        json!({"file_path": path(&file), "edits": edits}),
                        cwd,
                    ));
                }
            }
            Op::Delete(file) => out.push(Action::new(
                "Write",
                json!({"file_path": path(&file), "content": ""}),
                cwd,
            )),
        }
    }
    out
}

fn gemini(payload: &Value, cwd: &Path) -> Result<Vec<Action>, String> {
    let tool = tool_name(payload)?;
    let p = input(payload);
    let file = |keys: &[&str]| -> Option<String> {
        text(&p, keys).map(|f| cwd.join(f).to_string_lossy().into_owned())
    };
    let dir = |keys: &[&str]| within(cwd, text(&p, keys)).to_string_lossy().into_owned();
    let one = |tool: &str, params: Value| Ok(vec![Action::new(tool, params, cwd)]);
    match tool {
        "run_shell_command" => {
            let command = text(&p, &["command"]).unwrap_or("");
            let dir = within(cwd, text(&p, &["dir_path", "directory"]));
            Ok(vec![Action::new("Bash", json!({"command": command}), &dir)])
        }
        "read_file" => one(
            "Read",
            json!({"file_path": file(&["file_path", "absolute_path", "path"])}),
        ),
        "read_many_files" => {
            let paths: Vec<&str> = ["include", "paths"]
                .iter()
                .filter_map(|k| p.get(*k).and_then(Value::as_array))
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            Ok(paths
                .into_iter()
                .map(|path| {
                    let full = cwd.join(path).to_string_lossy().into_owned();
                    if path.contains(['*', '?', '[', '{']) {
                        // It returns the contents of what the glob matches: a content search.
                        Action::new(
                            "Grep",
                            json!({"path": cwd, "pattern": ".", "glob": path, "output_mode": "content"}),
                            cwd,
                        )
                    } else {
                        Action::new("Read", json!({"file_path": full}), cwd)
                    }
                })
                .collect())
        }
        "write_file" => one(
            "Write",
            json!({"file_path": file(&["file_path", "path"]), "content": text(&p, &["content"]).unwrap_or("")}),
        ),
        "replace" => one(
            "Edit",
            json!({
                "file_path": file(&["file_path", "path"]),
                "old_string": text(&p, &["old_string"]).unwrap_or(""),
                "new_string": text(&p, &["new_string"]).unwrap_or(""),
                "replace_all": p.get("allow_multiple").and_then(Value::as_bool).unwrap_or(false),
            }),
        ),
        "glob" => one(
            "Glob",
            json!({"path": dir(&["dir_path", "path"]), "pattern": text(&p, &["pattern"]).unwrap_or("")}),
        ),
        "grep_search" | "search_file_content" => {
            // grep_search returns the matching lines: a content search.
            let mut params = json!({
                "path": dir(&["dir_path", "path"]),
                "pattern": text(&p, &["pattern"]).unwrap_or(""),
                "output_mode": if p.get("names_only").and_then(Value::as_bool) == Some(true) { "files_with_matches" } else { "content" },
            });
            if let Some(glob) = text(&p, &["include_pattern", "include"]) {
                params["glob"] = json!(glob);
            }
            one("Grep", params)
        }
        "list_directory" => one("LS", json!({"path": dir(&["dir_path", "path"])})),
        "web_fetch" => {
            let mut urls: Vec<String> =
                text(&p, &["url"]).map(str::to_string).into_iter().collect();
            if let Some(prompt) = text(&p, &["prompt"]) {
                urls.extend(
                    prompt
                        .split_whitespace()
                        .filter(|w| w.contains("://"))
                        .map(|w| {
                            w.trim_matches(|c: char| "()[]<>\"'.,;".contains(c))
                                .to_string()
                        }),
                );
            }
            if urls.is_empty() {
                return one(
                    "WebFetch",
                    json!({"prompt": text(&p, &["prompt"]).unwrap_or("")}),
                );
            }
            Ok(urls
                .into_iter()
                .map(|url| {
                    Action::new(
                        "WebFetch",
                        json!({"url": url, "prompt": p.get("prompt")}),
                        cwd,
                    )
                })
                .collect())
        }
        "google_web_search" => one(
            "WebSearch",
            json!({"query": text(&p, &["query"]).unwrap_or("")}),
        ),
        _ => {
            // An MCP tool: `mcp_<server>_<tool>`, named unambiguously by `mcp_context`.
            let context = &payload["mcp_context"];
            if let (Some(server), Some(name)) = (
                context["server_name"].as_str(),
                context["tool_name"].as_str(),
            ) {
                return one(&format!("mcp__{server}__{name}"), p);
            }
            one(tool, p)
        }
    }
}

fn cursor(payload: &Value, cwd: &Path) -> Result<Vec<Action>, String> {
    let event = payload["hook_event_name"].as_str().unwrap_or("preToolUse");
    let p = input(payload);
    let one = |tool: &str, params: Value, dir: &Path| Ok(vec![Action::new(tool, params, dir)]);
    // Cursor's field names for a path are not all documented: the known ones first, then any
    // field whose name says it holds a path.
    let path_of = |v: &Value| {
        text(v, &["file_path", "path", "target_file", "target_path"])
            .or_else(|| {
                v.as_object()?.iter().find_map(|(k, v)| {
                    let k = k.to_ascii_lowercase();
                    (k.contains("path") || k.contains("file"))
                        .then(|| v.as_str())
                        .flatten()
                })
            })
            .map(|f| cwd.join(f).to_string_lossy().into_owned())
    };
    match event {
        "beforeShellExecution" => one(
            "Bash",
            json!({"command": payload["command"].as_str().unwrap_or("")}),
            cwd,
        ),
        "beforeReadFile" | "beforeTabFileRead" => {
            one("Read", json!({"file_path": path_of(payload)}), cwd)
        }
        "beforeMCPExecution" => {
            let tool = tool_name(payload)?;
            let server = payload["mcp_server_name"].as_str().unwrap_or("");
            if server.is_empty() {
                one(tool, p, cwd)
            } else {
                one(&format!("mcp__{server}__{tool}"), p, cwd)
            }
        }
        "preToolUse" => {
            let tool = tool_name(payload)?;
            match tool {
                "Shell" => {
                    let dir = within(cwd, text(&p, &["working_directory", "cwd"]));
                    one(
                        "Bash",
                        json!({"command": text(&p, &["command"]).unwrap_or("")}),
                        &dir,
                    )
                }
                "Read" => one("Read", json!({"file_path": path_of(&p)}), cwd),
                "Write" | "TabWrite" => one(
                    "Write",
                    json!({"file_path": path_of(&p), "content": text(&p, &["contents", "content"]).unwrap_or("")}),
                    cwd,
                ),
                "Delete" => one(
                    "Write",
                    json!({"file_path": path_of(&p), "content": ""}),
                    cwd,
                ),
                "Edit" | "StrReplace" => one(
                    "Edit",
                    json!({
                        "file_path": path_of(&p),
                        "old_string": text(&p, &["old_string", "old_str"]).unwrap_or(""),
                        "new_string": text(&p, &["new_string", "new_str"]).unwrap_or(""),
                        "replace_all": p.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
                    }),
                    cwd,
                ),
                "Grep" => {
                    let mut params = json!({
                        "path": within(cwd, text(&p, &["path"])),
                        "pattern": text(&p, &["pattern"]).unwrap_or(""),
                        "output_mode": text(&p, &["output_mode"]).unwrap_or("content"),
                    });
                    if let Some(glob) = text(&p, &["glob", "include"]) {
                        params["glob"] = json!(glob);
                    }
                    one("Grep", params, cwd)
                }
                "WebFetch" => one("WebFetch", p, cwd),
                // `MCP:<tool>` names no server: the server's rules are applied on
                // beforeMCPExecution, which Cursor sends for the same call.
                _ => one(tool, p, cwd),
            }
        }
        other => Err(format!(
            "Cursor's {other} is not a tool call; not evaluated"
        )),
    }
}

/// What the host reads as a deny, `reason` already prefixed with "CAR policy: ".
pub fn deny_output(host: Host, reason: &str) -> String {
    match host {
        Host::ClaudeCode | Host::Codex => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }),
        Host::Gemini => json!({"decision": "deny", "reason": reason}),
        Host::Cursor => json!({
            "permission": "deny",
            "user_message": format!("Blocked by {reason}"),
            "agent_message": reason,
        }),
    }
    .to_string()
}

/// What the host reads as an allow: nothing for Claude Code and Codex; an empty object for
/// Gemini CLI (which would show stderr to the user were stdout empty); an explicit allow for
/// Cursor (which blocks on output it cannot read).
pub fn allow_output(host: Host) -> Option<&'static str> {
    match host {
        Host::ClaudeCode | Host::Codex => None,
        Host::Gemini => Some("{}"),
        Host::Cursor => Some("{\"permission\":\"allow\"}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::hosts::detect;

    #[test]
    fn a_patch_is_every_file_it_touches() {
        let patch = "*** Begin Patch\n*** Add File: notes/new.md\n+hello\n+world\n*** Update File: src/a.rs\n@@ fn a()\n-    let x = 1;\n+    let x = 2;\n     x\n*** Update File: old.txt\n*** Move to: new.txt\n*** Delete File: gone.txt\n*** End Patch\n";
        let cwd = Path::new("/w");
        let got = patch_actions(patch, cwd);
        let summary: Vec<(String, String)> = got
            .iter()
            .map(|a| {
                (
                    a.tool.clone(),
                    a.params["file_path"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("Write", "/w/notes/new.md"),
                ("MultiEdit", "/w/src/a.rs"),
                ("Write", "/w/old.txt"),
                ("Write", "/w/new.txt"),
                ("Write", "/w/gone.txt"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(got[0].params["content"], "hello\nworld\n");
        assert_eq!(
            got[1].params["edits"][0]["old_string"],
            "    let x = 1;\n    x\n"
        );
        assert_eq!(
            got[1].params["edits"][0]["new_string"],
            "    let x = 2;\n    x\n"
        );
    }

    #[test]
    fn each_host_is_told_from_its_pre_tool_payload() {
        assert_eq!(
            detect(&json!({"hook_event_name": "BeforeTool", "tool_name": "read_file"})),
            Host::Gemini
        );
        assert_eq!(
            detect(&json!({"hook_event_name": "PreToolUse", "turn_id": "t", "tool_name": "Bash"})),
            Host::Codex
        );
        assert_eq!(
            detect(&json!({"hook_event_name": "beforeShellExecution", "command": "ls"})),
            Host::Cursor
        );
        assert_eq!(
            detect(&json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"})),
            Host::ClaudeCode
        );
    }

    #[test]
    fn gemini_and_cursor_tools_speak_the_rule_vocabulary() {
        let cwd = Path::new("/w");
        let g = |tool: &str, input: Value| {
            gemini(&json!({"tool_name": tool, "tool_input": input}), cwd).unwrap()
        };
        let shell = g(
            "run_shell_command",
            json!({"command": "ls", "dir_path": "sub"}),
        );
        assert_eq!(
            (shell[0].tool.as_str(), shell[0].cwd.as_path()),
            ("Bash", Path::new("/w/sub"))
        );
        assert_eq!(
            g("read_file", json!({"file_path": ".env"}))[0].params["file_path"],
            "/w/.env"
        );
        let fetch = g(
            "web_fetch",
            json!({"prompt": "summarise https://a.example/x and (https://b.example)"}),
        );
        assert_eq!(fetch.len(), 2);
        assert_eq!(fetch[1].params["url"], "https://b.example");
        let mcp = gemini(
            &json!({"tool_name": "mcp_my_srv_do", "tool_input": {},
            "mcp_context": {"server_name": "my_srv", "tool_name": "do"}}),
            cwd,
        )
        .unwrap();
        assert_eq!(mcp[0].tool, "mcp__my_srv__do");
        let c = cursor(
            &json!({"hook_event_name": "beforeMCPExecution", "tool_name": "t",
            "tool_input": "{\"a\":1}", "mcp_server_name": "s"}),
            cwd,
        )
        .unwrap();
        assert_eq!(
            (c[0].tool.as_str(), &c[0].params),
            ("mcp__s__t", &json!({"a": 1}))
        );
        assert!(cursor(&json!({"hook_event_name": "sessionStart"}), cwd).is_err());
    }
}
