//! The workspace tools of `car do`, registered like every other tool (schema check, policy
//! gate, time bound, execution log). They take Claude Code's names and fields — `Bash
//! {command}`, `Read {file_path}`, `Write {file_path, content}`, `Edit {file_path, old_string,
//! new_string}`, `Glob {pattern, path}`, `Grep {pattern, path}` — so the policy rules written
//! for Claude Code's hook (`[[deny_command]]`, `[[deny_path]]`, presets) govern `car do`
//! unchanged. Paths stay inside the working directory; shell commands run in the sandbox.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sandbox::{Ended, Sandbox, Writes};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// The most a tool returns to the model from one file or command stream.
const MAX_OUTPUT: usize = 64 * 1024;
const MAX_MATCHES: usize = 200;

/// Where the tools work, and what they may not launch.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub sandbox: Sandbox,
    /// The hosts that led to this run (`CAR_INVOKED_BY`, `assistant_start`'s `invoked_by`): a
    /// command that would launch one of them again is refused.
    pub invoked_by: Vec<String>,
}

impl Workspace {
    /// `path` inside the project and writable by Write and Edit: never `.car/` (the policies
    /// that govern this run and later sessions, the team's connectors), `.git/` only with
    /// `--allow-git-writes` (a hook or a config entry would run outside the sandbox), nothing
    /// in a read-only run.
    fn writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let writes = self.sandbox.writes();
        if writes == Writes::Nothing {
            return Err(ToolError::Denied(format!(
                "this run is read-only (assistant_start with local: true): it may read and run commands but not change {path}"
            )));
        }
        let resolved = inside(&self.root, path)?;
        let relative = resolved.strip_prefix(&self.root).unwrap_or(&resolved);
        if relative.starts_with(".car") {
            return Err(ToolError::Denied(format!(
                "{path} is CAR's configuration of the project (its policy files, its connectors); car do does not change the rules it runs under"
            )));
        }
        if relative.starts_with(".git") && writes != Writes::ProjectAndGit {
            return Err(ToolError::Denied(format!(
                "{path} is inside .git; pass --allow-git-writes to let car do change it"
            )));
        }
        Ok(resolved)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    /// The shell command (run with `sh -c` in the working directory, in the sandbox).
    command: String,
    /// Milliseconds before it is stopped (default 120,000).
    #[serde(default)]
    timeout: Option<u64>,
    /// What the command is for (shown to the user).
    #[serde(default)]
    description: Option<String>,
}

/// What a command did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Ran {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The file, relative to the working directory or absolute inside it.
    file_path: String,
    /// The first line to return (1-based).
    #[serde(default)]
    offset: Option<usize>,
    /// How many lines to return.
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    file_path: String,
    /// The whole new content.
    content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    file_path: String,
    /// Text that occurs exactly once in the file (or every occurrence with `replace_all`).
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// What a write changed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Wrote {
    pub file_path: String,
    pub bytes: usize,
    pub replacements: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    /// A glob such as `src/**/*.rs`.
    pattern: String,
    /// The directory to search (default: the working directory).
    #[serde(default)]
    path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    /// A regular expression.
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    /// Only files matching this glob.
    #[serde(default)]
    glob: Option<String>,
}

/// Matching lines, `path:line:text`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Found {
    pub matches: Vec<String>,
    pub truncated: bool,
}

/// The six tools over `workspace`.
pub fn tools(workspace: Arc<Workspace>) -> Vec<Tool> {
    let w = workspace.clone();
    let bash = Tool::new(
        ToolSpec::new(
            "Bash",
            "Run a shell command in the working directory (sandboxed: no network, only the working directory writable). Returns exit_code, stdout and stderr.",
            Value::Null,
        )
        .typed::<BashArgs, Ran>()
        .effect(Effect::ExternalWrite)
        .timeout(Duration::from_secs(15 * 60)),
        move |call| {
            let w = w.clone();
            async move {
                let args: BashArgs = serde_json::from_value(call.args)
                    .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
                let _ = args.description;
                if let Some(host) = w.invoked_by.iter().find_map(|host| relaunches_host(&args.command, Some(host))) {
                    return Err(ToolError::Denied(format!(
                        "this run was started by {host} (CAR_INVOKED_BY); a command that launches {host} again is refused"
                    )));
                }
                let timeout = Duration::from_millis(args.timeout.unwrap_or(120_000).min(600_000));
                let ended = w
                    .sandbox
                    .run(&args.command, &w.root, timeout, &call.cancel)
                    .await
                    .map_err(|e| ToolError::Failed(format!("cannot start the command: {e}")))?;
                let ran = match ended {
                    Ended::Exited(out) => Ran {
                        exit_code: out.status.code(),
                        stdout: clip(&String::from_utf8_lossy(&out.stdout)),
                        stderr: clip(&String::from_utf8_lossy(&out.stderr)),
                        timed_out: false,
                    },
                    Ended::Cancelled => return Err(ToolError::Cancelled),
                    Ended::TimedOut => Ran {
                        exit_code: None,
                        stdout: String::new(),
                        stderr: format!("stopped after {} ms", timeout.as_millis()),
                        timed_out: true,
                    },
                };
                serde_json::to_value(ran).map_err(|e| ToolError::Failed(e.to_string()))
            }
        },
    );

    let w = workspace.clone();
    let read = Tool::typed(
        ToolSpec::new("Read", "Read a text file of the working directory (optionally from line `offset`, `limit` lines).", Value::Null)
            .effect(Effect::Read)
            .idempotence(Idempotence::Idempotent),
        move |args: ReadArgs, _call| -> Result<String, ToolError> {
            let path = inside(&w.root, &args.file_path)?;
            let text = read_bounded(&path)
                .map_err(|e| ToolError::Failed(format!("cannot read {}: {e}", args.file_path)))?;
            let start = args.offset.unwrap_or(1).max(1) - 1;
            let lines: Vec<&str> = text.lines().skip(start).take(args.limit.unwrap_or(usize::MAX)).collect();
            Ok(clip(&lines.join("\n")))
        },
    );

    let w = workspace.clone();
    let write = Tool::typed(
        ToolSpec::new("Write", "Write a file of the working directory (its whole content; parent directories are made).", Value::Null)
            .effect(Effect::Destructive)
            .idempotence(Idempotence::Idempotent),
        move |args: WriteArgs, _call| -> Result<Wrote, ToolError> {
            let path = w.writable(&args.file_path)?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ToolError::Failed(e.to_string()))?;
            }
            crate::home::write_atomic(&path, args.content.as_bytes())
                .map_err(|e| ToolError::Failed(format!("cannot write {}: {e}", args.file_path)))?;
            Ok(Wrote { file_path: args.file_path, bytes: args.content.len(), replacements: 0 })
        },
    );

    let w = workspace.clone();
    let edit = Tool::typed(
        ToolSpec::new("Edit", "Replace text in a file of the working directory: `old_string` must occur exactly once (or use `replace_all`).", Value::Null)
            .effect(Effect::Destructive),
        move |args: EditArgs, _call| -> Result<Wrote, ToolError> {
            let path = w.writable(&args.file_path)?;
            let text = read_bounded(&path)
                .map_err(|e| ToolError::Failed(format!("cannot read {}: {e}", args.file_path)))?;
            let count = text.matches(&args.old_string).count();
            if args.old_string.is_empty() || count == 0 {
                return Err(ToolError::InvalidArguments(format!("old_string does not occur in {}", args.file_path)));
            }
            if count > 1 && !args.replace_all {
                return Err(ToolError::InvalidArguments(format!(
                    "old_string occurs {count} times in {}; give more context or set replace_all", args.file_path
                )));
            }
            let new = if args.replace_all {
                text.replace(&args.old_string, &args.new_string)
            } else {
                text.replacen(&args.old_string, &args.new_string, 1)
            };
            crate::home::write_atomic(&path, new.as_bytes())
                .map_err(|e| ToolError::Failed(format!("cannot write {}: {e}", args.file_path)))?;
            Ok(Wrote { file_path: args.file_path, bytes: new.len(), replacements: count })
        },
    );

    let w = workspace.clone();
    let glob = Tool::typed(
        ToolSpec::new("Glob", "List the files of the working directory whose paths match a glob (respects .gitignore).", Value::Null)
            .effect(Effect::Read)
            .idempotence(Idempotence::Idempotent),
        move |args: GlobArgs, _call| -> Result<Found, ToolError> {
            let base = inside(&w.root, args.path.as_deref().unwrap_or("."))?;
            let matcher = globset::Glob::new(&args.pattern)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?
                .compile_matcher();
            let mut matches = Vec::new();
            let mut truncated = false;
            for entry in ignore::WalkBuilder::new(&base).build().flatten() {
                let path = entry.path();
                let relative = path.strip_prefix(&base).unwrap_or(path);
                if entry.file_type().is_some_and(|t| t.is_file()) && matcher.is_match(relative) {
                    if matches.len() == MAX_MATCHES {
                        truncated = true;
                        break;
                    }
                    matches.push(display(&w.root, path));
                }
            }
            matches.sort();
            Ok(Found { matches, truncated })
        },
    );

    let w = workspace;
    let grep = Tool::typed(
        ToolSpec::new("Grep", "Search the files of the working directory for a regular expression (respects .gitignore); returns path:line:text.", Value::Null)
            .effect(Effect::Read)
            .idempotence(Idempotence::Idempotent),
        move |args: GrepArgs, call| -> Result<Found, ToolError> {
            let base = inside(&w.root, args.path.as_deref().unwrap_or("."))?;
            let regex = regex::Regex::new(&args.pattern)
                .map_err(|e| ToolError::InvalidArguments(format!("not a regular expression: {e}")))?;
            let only = match &args.glob {
                Some(g) => Some(globset::Glob::new(g).map_err(|e| ToolError::InvalidArguments(e.to_string()))?.compile_matcher()),
                None => None,
            };
            let mut matches = Vec::new();
            let mut truncated = false;
            'files: for entry in ignore::WalkBuilder::new(&base).build().flatten() {
                if call.cancel.is_cancelled() {
                    return Err(ToolError::Cancelled);
                }
                let path = entry.path();
                if !entry.file_type().is_some_and(|t| t.is_file())
                    || only.as_ref().is_some_and(|g| !g.is_match(path.strip_prefix(&base).unwrap_or(path)))
                {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(path) else { continue };
                for (n, line) in text.lines().enumerate() {
                    if regex.is_match(line) {
                        if matches.len() == MAX_MATCHES {
                            truncated = true;
                            break 'files;
                        }
                        matches.push(format!("{}:{}:{}", display(&w.root, path), n + 1, line.chars().take(300).collect::<String>()));
                    }
                }
            }
            Ok(Found { matches, truncated })
        },
    );
    vec![bash, read, write, edit, glob, grep]
}

/// `path` resolved inside `root`, or an error naming the rule: `..` may not climb out, and a
/// symbolic link may not lead out.
fn inside(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let outside = || {
        ToolError::Denied(format!(
            "outside the working directory: {path} (car do reads and writes only inside {})",
            root.display()
        ))
    };
    let given = Path::new(path);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    };
    let mut normal = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(outside());
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    // The deepest part that exists, with its links resolved, must still be inside.
    let mut existing = normal.as_path();
    while !existing.exists() {
        existing = existing.parent().ok_or_else(outside)?;
    }
    let real = existing.canonicalize().map_err(|_| outside())?;
    if !real.starts_with(root) {
        return Err(outside());
    }
    Ok(normal)
}

/// The most of one file Read and Edit take in.
const READ_LIMIT: u64 = 8 * 1024 * 1024;

/// A regular file's text, refusing what is not one (a FIFO would block) or is too big.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > READ_LIMIT {
        return Err(std::io::Error::other(format!(
            "it is {} bytes; Read takes files up to {READ_LIMIT} bytes (use Grep or Bash with head/sed for a part)",
            meta.len()
        )));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(READ_LIMIT)
        .read_to_string(&mut text)?;
    Ok(text)
}

fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn clip(text: &str) -> String {
    if text.len() <= MAX_OUTPUT {
        return text.to_string();
    }
    let mut end = MAX_OUTPUT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}…[truncated: {end} of {} bytes shown]",
        &text[..end],
        text.len()
    )
}

/// The host a command would launch again, if it launches the one named by `invoked_by`.
fn relaunches_host(command: &str, invoked_by: Option<&str>) -> Option<String> {
    let host = invoked_by?;
    let programs: &[&str] = match host {
        "claude-code" | "claude" => &["claude"],
        "codex" => &["codex"],
        "gemini" => &["gemini"],
        // Cursor's command-line agent.
        "cursor" => &["cursor-agent", "agent"],
        _ => &[],
    };
    let own = [host];
    let programs = if programs.is_empty() {
        &own[..]
    } else {
        programs
    };
    command
        .split(|c: char| c.is_whitespace() || ";|&()`$".contains(c))
        .map(|word| word.rsplit('/').next().unwrap_or(word))
        .any(|word| programs.contains(&word))
        .then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        assert_eq!(
            inside(&root, "src/new.rs").unwrap(),
            root.join("src/new.rs")
        );
        assert!(inside(&root, "../escape").is_err());
        assert!(inside(&root, "/etc/passwd").is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
            assert!(
                inside(&root, "etc-link/passwd").is_err(),
                "a link may not lead out"
            );
        }
    }

    #[test]
    fn the_recursion_guard_names_the_host() {
        assert_eq!(
            relaunches_host("claude -p hi", Some("claude-code")).as_deref(),
            Some("claude-code")
        );
        assert_eq!(
            relaunches_host("ls && /usr/bin/claude", Some("claude-code")).as_deref(),
            Some("claude-code")
        );
        assert!(relaunches_host("claude -p hi", None).is_none());
        assert!(relaunches_host("cat claude.md", Some("claude-code")).is_none());
        assert_eq!(
            relaunches_host("cursor-agent -p fix it", Some("cursor")).as_deref(),
            Some("cursor")
        );
        assert_eq!(
            relaunches_host("npx gemini -p hi", Some("gemini")).as_deref(),
            Some("gemini")
        );
    }
}
