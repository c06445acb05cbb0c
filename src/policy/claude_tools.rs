//! Claude Code's built-in tools as the policy rules see them: for each tool that takes a path,
//! a URL or a shell command, which of its `tool_input` fields hold one and what the tool does
//! with it. The hook passes `tool_input` to the rules unchanged (a rule names the fields Claude
//! sends); this table is what `[[deny_path]]` reads when a rule names no `param`, so a rule such
//! as `tool = ["Read", "Grep"]` checks `Read`'s `file_path` and what `Grep` searches (its `path`,
//! and its `glob` under that path) without knowing their field names.
//!
//! | Claude tool | field | kind |
//! |---|---|---|
//! | `Bash` | `command` | shell command (`[[deny_command]]`, the egress guard) |
//! | `Read` | `file_path` | file read into the conversation |
//! | `Write`, `Edit`, `MultiEdit` | `file_path` | file written |
//! | `NotebookEdit` | `notebook_path` | file written |
//! | `NotebookRead` | `notebook_path` | file read (Claude Code before 2.1) |
//! | `Grep` | `path` | file or directory searched (default: the project) |
//! | `Grep` | `glob` | the files searched under `path` (`rg --glob`) |
//! | `Glob` | `path`, `pattern` | directory listed and the names matched (no content) |
//! | `LS` | `path` | directory listed (Claude Code before 2.1) |
//! | `WebFetch` | `url` | URL fetched (the egress guard) |
//! | `ReadMcpResourceTool`, `ReadMcpResourceDirTool` | `uri` | an MCP server's resource |
//! | `Artifact` | `file_path`, `file_paths` | local files uploaded to claude.ai |
//! | `Artifact` | `url`, `out_dir` | an artifact's link; the directory an asset is saved into |
//! | `Projects` | `local_path` | a local file uploaded to a claude.ai project |
//! | `Projects` | `path` | a document inside the remote project (not a local file) |
//! | `Workflow` | `scriptPath` | a script file run as a workflow |
//! | `EnterWorktree` | `path` | a git worktree switched into |
//! | `mcp__server__tool` | the MCP tool's own arguments | — (`deny_connector = ["server"]`) |
//!
//! Every other tool (`Agent`/`Task`, `WebSearch`, `TodoWrite`, `Skill`, …) takes no path or URL;
//! its `tool_input` still reaches `deny_tool`, `deny_keyword` and the parameter rules. The table
//! is checked against the pinned Claude Code's own tool schemas (`sdk-tools.d.ts`) by a test: a
//! tool whose input has a path or URL field that is not listed here fails it.

use serde_json::Value;

/// What a `tool_input` field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A shell command string.
    Command,
    /// A local file whose content the tool reads (into the conversation, or to upload it).
    ReadPath,
    /// A local file or directory the tool writes, creates or switches into.
    WritePath,
    /// A local file or directory the tool searches or lists; absent means the project.
    SearchRoot,
    /// A glob of the files searched under the tool's [`FieldKind::SearchRoot`].
    SearchGlob,
    /// A URL or URI.
    Url,
    /// A name inside a remote service, not a local path.
    Remote,
}

/// One Claude Code tool that takes a path, a URL or a command.
#[derive(Debug)]
pub struct ClaudeTool {
    /// The `tool_name` of the hook payload.
    pub name: &'static str,
    /// Its input type in Claude Code's `sdk-tools.d.ts`, `None` for tools of older versions
    /// (read by the test that checks the table against the pinned Claude Code).
    #[cfg_attr(not(test), allow(dead_code))]
    pub sdk_input: Option<&'static str>,
    pub fields: &'static [(&'static str, FieldKind)],
}

use FieldKind::*;

/// The mapping (see the module docs).
pub const TOOLS: &[ClaudeTool] = &[
    tool("Bash", Some("BashInput"), &[("command", Command)]),
    tool("Read", Some("FileReadInput"), &[("file_path", ReadPath)]),
    tool("Write", Some("FileWriteInput"), &[("file_path", WritePath)]),
    tool("Edit", Some("FileEditInput"), &[("file_path", WritePath)]),
    tool("MultiEdit", None, &[("file_path", WritePath)]),
    tool(
        "NotebookEdit",
        Some("NotebookEditInput"),
        &[("notebook_path", WritePath)],
    ),
    tool("NotebookRead", None, &[("notebook_path", ReadPath)]),
    tool(
        "Grep",
        Some("GrepInput"),
        &[("path", SearchRoot), ("glob", SearchGlob)],
    ),
    tool(
        "Glob",
        Some("GlobInput"),
        &[("path", SearchRoot), ("pattern", SearchGlob)],
    ),
    tool("LS", None, &[("path", SearchRoot)]),
    tool("WebFetch", Some("WebFetchInput"), &[("url", Url)]),
    tool(
        "ReadMcpResourceTool",
        Some("ReadMcpResourceInput"),
        &[("uri", Url)],
    ),
    tool(
        "ReadMcpResourceDirTool",
        Some("ReadMcpResourceDirInput"),
        &[("uri", Url)],
    ),
    tool(
        "Artifact",
        Some("ArtifactInput"),
        &[
            ("file_path", ReadPath),
            ("file_paths", ReadPath),
            ("url", Url),
            ("out_dir", WritePath),
        ],
    ),
    tool(
        "Projects",
        Some("ProjectsInput"),
        &[("local_path", ReadPath), ("path", Remote)],
    ),
    tool(
        "Workflow",
        Some("WorkflowInput"),
        &[("scriptPath", ReadPath)],
    ),
    tool(
        "EnterWorktree",
        Some("EnterWorktreeInput"),
        &[("path", WritePath)],
    ),
];

const fn tool(
    name: &'static str,
    sdk_input: Option<&'static str>,
    fields: &'static [(&'static str, FieldKind)],
) -> ClaudeTool {
    ClaudeTool {
        name,
        sdk_input,
        fields,
    }
}

/// The tool's entry, if it takes a path, a URL or a command.
pub fn find(name: &str) -> Option<&'static ClaudeTool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// A path a call touches, as the rules judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// A path (relative ones resolve against the project).
    Path(String),
    /// A glob of paths (`Grep`'s `glob` under its `path`): a rule's glob applies when some path
    /// could match both.
    Pattern(String),
    /// Every file a content search reads under a directory, the way ripgrep picks them
    /// (hidden files included, `.gitignore` respected, narrowed by the `glob`): `Grep` with
    /// `output_mode: "content"` over the project shows the lines of an unignored `.env`.
    Tree { root: String, glob: Option<String> },
}

/// The local paths a call of `tool` touches that `[[deny_path]]` rules judge when they name no
/// param: the files it reads, writes or uploads, what it searches or lists (with the glob under
/// it), never a URL or a remote name. An unknown tool touches its `file_path`, as before the
/// table existed.
pub fn touched_paths(tool: &str, input: &Value) -> Vec<Touched> {
    let Some(entry) = find(tool) else {
        return strings(input.get("file_path"))
            .map(|p| Touched::Path(p.to_string()))
            .collect();
    };
    let mut out = Vec::new();
    let mut root: Option<&str> = None;
    for (field, kind) in entry.fields {
        match kind {
            ReadPath | WritePath => {
                out.extend(strings(input.get(*field)).map(|p| Touched::Path(p.to_string())))
            }
            SearchRoot => {
                let value = input.get(*field).and_then(Value::as_str);
                root = Some(value.unwrap_or("."));
                out.push(Touched::Path(root.unwrap_or(".").to_string()));
            }
            SearchGlob => {
                for glob in strings(input.get(*field)) {
                    out.push(Touched::Pattern(under(root.unwrap_or("."), glob)));
                }
            }
            Command | Url | Remote => {}
        }
    }
    // A content search shows the lines it matched in every file it reads; one that lists file
    // names or counts, or that searches one file type (`type`), shows no secret line.
    if entry.name == "Grep"
        && input.get("output_mode").and_then(Value::as_str) == Some("content")
        && input.get("type").is_none()
    {
        out.push(Touched::Tree {
            root: root.unwrap_or(".").to_string(),
            glob: input
                .get("glob")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
    out
}

/// `glob` as ripgrep applies it under `root`: a glob without `/` matches a file name at any
/// depth, one with `/` is anchored at the root.
fn under(root: &str, glob: &str) -> String {
    let root = root.trim_end_matches('/');
    let root = if root.is_empty() { "/" } else { root };
    if glob.starts_with('/') {
        glob.to_string()
    } else if glob.contains('/') {
        format!("{root}/{glob}")
    } else {
        format!("{root}/**/{glob}")
    }
}

/// A string field, or each string of an array field.
fn strings(value: Option<&Value>) -> impl Iterator<Item = &str> {
    let (one, many) = match value {
        Some(Value::String(s)) => (Some(s.as_str()), None),
        Some(Value::Array(items)) => (None, Some(items.iter().filter_map(Value::as_str))),
        _ => (None, None),
    };
    one.into_iter().chain(many.into_iter().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grep_touches_its_root_and_its_glob_under_it() {
        assert_eq!(
            touched_paths("Grep", &json!({"pattern": "KEY", "path": ".env"})),
            [Touched::Path(".env".into())]
        );
        assert_eq!(
            touched_paths("Grep", &json!({"pattern": "KEY", "glob": ".env*"})),
            [
                Touched::Path(".".into()),
                Touched::Pattern("./**/.env*".into())
            ]
        );
        assert_eq!(
            touched_paths(
                "Grep",
                &json!({"pattern": "KEY", "path": "/p/", "glob": "config/*.env"})
            ),
            [
                Touched::Path("/p/".into()),
                Touched::Pattern("/p/config/*.env".into())
            ]
        );
    }

    #[test]
    fn uploads_touch_every_file_and_urls_touch_nothing() {
        assert_eq!(
            touched_paths(
                "Artifact",
                &json!({"file_paths": ["a.png", ".env"], "url": "https://x"})
            ),
            [Touched::Path("a.png".into()), Touched::Path(".env".into())]
        );
        assert!(touched_paths("WebFetch", &json!({"url": "file:///etc/passwd"})).is_empty());
        assert!(touched_paths("Projects", &json!({"path": "notes.md"})).is_empty());
        assert_eq!(
            touched_paths("SomeNewTool", &json!({"file_path": "x"})),
            [Touched::Path("x".into())]
        );
    }

    /// The top-level fields of each `…Input` interface of the pinned Claude Code's
    /// `sdk-tools.d.ts` (installed into `tools/` by scripts/test.sh).
    fn sdk_inputs() -> Vec<(String, Vec<String>)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tools/node_modules/@anthropic-ai/claude-code/sdk-tools.d.ts");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "cannot read {} ({e}): run scripts/test.sh, which installs the pinned Claude Code",
                path.display()
            )
        });
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        let mut inside = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("export interface ") {
                let name = rest.split_whitespace().next().unwrap_or_default();
                inside = name.ends_with("Input");
                if inside {
                    out.push((name.to_string(), Vec::new()));
                }
            } else if line.starts_with('}') {
                inside = false;
            } else if inside && line.starts_with("  ") && !line.starts_with("   ") {
                let field = line.trim_start().trim_start_matches('"');
                let end = field
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(field.len());
                if end > 0 && field[end..].trim_start_matches('"').starts_with(['?', ':']) {
                    if let Some(last) = out.last_mut() {
                        last.1.push(field[..end].to_string());
                    }
                }
            }
        }
        out
    }

    /// A field name that holds a path or a URL (`file_path`, `notebook_path`, `path`,
    /// `scriptPath`, `file_paths`, `out_dir`, `url`, `uri`, …).
    fn names_a_path_or_url(field: &str) -> bool {
        let lower = field.to_ascii_lowercase();
        ["path", "paths", "url", "uri", "dir", "file", "cwd"]
            .iter()
            .any(|end| lower == *end || lower.ends_with(&format!("_{end}")))
            || ["Path", "Paths", "Url", "Uri", "Dir", "File"]
                .iter()
                .any(|end| field.ends_with(end))
    }

    #[test]
    fn every_claude_code_tool_that_takes_a_path_or_url_is_mapped_with_that_field() {
        let inputs = sdk_inputs();
        assert!(
            inputs.len() > 20
                && inputs
                    .iter()
                    .any(|(n, f)| n == "FileReadInput" && f.contains(&"file_path".to_string())),
            "sdk-tools.d.ts did not parse: {inputs:?}"
        );
        let mut missing = Vec::new();
        for (input, fields) in &inputs {
            let entry = TOOLS.iter().find(|t| t.sdk_input == Some(input.as_str()));
            for field in fields.iter().filter(|f| names_a_path_or_url(f)) {
                if !entry.is_some_and(|e| e.fields.iter().any(|(f, _)| f == field)) {
                    missing.push(format!("{input}.{field}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "Claude Code tools take these paths or URLs but the hook mapping (claude_tools::TOOLS) \
             does not list them: {missing:?}"
        );
        // And the mapping names only fields the pinned version has.
        for tool in TOOLS {
            let Some(input) = tool.sdk_input else {
                continue;
            };
            let (_, fields) = inputs
                .iter()
                .find(|(n, _)| n == input)
                .unwrap_or_else(|| panic!("{}: no {input} in sdk-tools.d.ts", tool.name));
            for (field, _) in tool.fields {
                assert!(
                    fields.iter().any(|f| f == field),
                    "{input} has no field {field}"
                );
            }
        }
    }

    #[test]
    fn the_path_detector_knows_the_shapes_of_field_names() {
        for yes in [
            "file_path",
            "path",
            "notebook_path",
            "scriptPath",
            "file_paths",
            "out_dir",
            "url",
            "uri",
            "cwd",
        ] {
            assert!(names_a_path_or_url(yes), "{yes}");
        }
        for no in [
            "pattern",
            "command",
            "prompt",
            "content",
            "query",
            "description",
        ] {
            assert!(!names_a_path_or_url(no), "{no}");
        }
    }

    #[test]
    fn every_tool_is_listed_once() {
        for (i, tool) in TOOLS.iter().enumerate() {
            assert!(
                TOOLS[i + 1..].iter().all(|t| t.name != tool.name),
                "{} twice",
                tool.name
            );
            assert!(!tool.fields.is_empty(), "{}", tool.name);
        }
    }
}
