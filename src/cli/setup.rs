//! `car setup <host>`: wires CAR (MCP server, policy gate, memory hooks) into an agent host's
//! own configuration files, for the user (default) or one project. The work is in
//! [`crate::setup`]; this is the face: the diff, the question, the envelope.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use clap::Args;
use serde_json::{json, Value};

use super::hook::HostArg;
use super::{finish, Failure};
use crate::hooks::hosts::Host;
use crate::setup::{self, Binaries, FileChange, Scope};

pub const HELP: &str = "\
Examples:
  car setup codex                 # wire Codex for every project of this user (asks first)
  car setup gemini --project      # only this project: .gemini/settings.json
  car setup cursor --yes          # no question (scripts, CI)
  car setup codex --undo          # put the files back as they were

What is written (beside the user's own settings and comments, which stay):
  claude-code  ~/.claude/settings.json (hooks), ~/.claude.json (MCP)   [--project: .claude/settings.json, .mcp.json]
  codex        ~/.codex/config.toml ([mcp_servers.car], [[hooks.PreToolUse]], SessionStart, UserPromptSubmit)
  gemini       ~/.gemini/settings.json (mcpServers.car, hooks BeforeTool, SessionStart, BeforeAgent)
  cursor       ~/.cursor/mcp.json, ~/.cursor/hooks.json (preToolUse, beforeReadFile, beforeMCPExecution, sessionStart)

The hooks run this installation's `car` by absolute path, so the host finds it whatever its
PATH. Running setup twice leaves one entry of each. `car doctor` shows which hosts are wired.
The mapping of each host's tools onto the rules is in docs/hosts.md.";

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The agent host to wire CAR into.
    #[arg(value_enum)]
    pub host: HostArg,
    /// Configure the user (every project): the default. Give the global `--project` instead to
    /// configure only the project.
    #[arg(long)]
    pub user: bool,
    /// Remove CAR from the host's files: put back what was there before the first setup, or,
    /// when the files changed since, take out only CAR's entries.
    #[arg(long)]
    pub undo: bool,
    /// Apply without asking (the diff is still shown).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// Whether the global `--project` was given on the command line (not read from the
/// environment): it picks the project scope.
fn project_flag_given() -> bool {
    use clap::CommandFactory;
    let Ok(matches) = super::Cli::command().try_get_matches_from(std::env::args_os()) else {
        return false;
    };
    matches
        .subcommand_matches("setup")
        .and_then(|m| m.value_source("project"))
        == Some(clap::parser::ValueSource::CommandLine)
}

pub(crate) fn run(env: &super::Env, args: &SetupArgs) -> std::process::ExitCode {
    let command = if args.undo { "setup.undo" } else { "setup" };
    let result = execute(env, args);
    finish(env.json, command, result, human)
}

fn execute(env: &super::Env, args: &SetupArgs) -> Result<Value, Failure> {
    let host: Host = args.host.into();
    let project_scope = project_flag_given();
    if project_scope && args.user {
        return Err(Failure::usage(
            "--user and --project pick different places; give one (the default is --user)",
        ));
    }
    let scope = if project_scope {
        Scope::Project
    } else {
        Scope::User
    };
    let bins = Binaries::beside_current();
    let changes = setup::plan(
        host,
        scope,
        &env.project_root,
        env.home.root(),
        &bins,
        args.undo,
    )
    .map_err(|e| Failure::new("setup", e.to_string()))?;
    let pending: Vec<&FileChange> = changes.iter().filter(|c| c.changes()).collect();
    let files = |applied: bool| -> Vec<Value> {
        changes
            .iter()
            .map(|c| {
                json!({"path": c.path, "changed": c.changes() && applied,
                    "created": c.before.is_none() && c.after.is_some(),
                    "removed": c.before.is_some() && c.after.is_none(),
                    "diff": c.diff()})
            })
            .collect()
    };
    let summary = |applied: bool| {
        json!({"host": host.as_str(), "scope": scope.as_str(), "undo": args.undo,
            "applied": applied, "files": files(applied),
            "notes": if args.undo || !applied { Vec::new() } else { notes(host) }})
    };
    if pending.is_empty() {
        return Ok(summary(false));
    }
    if !args.yes {
        let diff: String = pending.iter().map(|c| c.diff()).collect();
        if env.json || !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Err(Failure::new(
                "confirmation_required",
                format!(
                    "car setup {} would change {} file(s); nothing was written. Review the change and run it again with --yes:\n{diff}",
                    host.as_str(),
                    pending.len()
                ),
            ));
        }
        let mut err = std::io::stderr();
        let _ = write!(err, "{diff}\nApply these changes? [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            return Err(Failure::new(
                "cancelled",
                "nothing was written (answer y to apply, or pass --yes)",
            ));
        }
    }
    setup::apply(&changes, env.home.root(), args.undo)
        .map_err(|e| Failure::new("setup", e.to_string()))?;
    Ok(summary(true))
}

/// What the user still has to do in the host, if anything.
fn notes(host: Host) -> Vec<&'static str> {
    match host {
        Host::Codex => vec![
            "Codex runs a new hook only once you trust it: open /hooks in Codex and trust CAR's (Codex keeps the trust until the hook changes).",
        ],
        Host::Gemini => vec![
            "Gemini CLI runs a project's hooks only in a trusted folder.",
        ],
        Host::Cursor => vec![
            "Cursor reloads hooks.json on save; the gate fails closed (failClosed) if car cannot run.",
        ],
        Host::ClaudeCode => vec![
            "If CAR's Claude Code plugin is also enabled, the gate runs twice per call; use one or the other.",
        ],
    }
}

fn human(data: &Value) -> String {
    let host = data["host"].as_str().unwrap_or("");
    let files = data["files"].as_array().cloned().unwrap_or_default();
    let paths = |pred: &dyn Fn(&Value) -> bool| -> Vec<String> {
        files
            .iter()
            .filter(|f| pred(f))
            .filter_map(|f| f["path"].as_str().map(|p| display(Path::new(p))))
            .collect()
    };
    if data["applied"] != true {
        let all = paths(&|_| true);
        return if data["undo"] == true {
            format!(
                "CAR is not in {host}'s files ({}); nothing to undo.\n",
                all.join(", ")
            )
        } else {
            format!(
                "{host} is already set up ({}); nothing to change.\n",
                all.join(", ")
            )
        };
    }
    let mut out = String::new();
    for f in &files {
        if f["changed"] == true {
            out.push_str(f["diff"].as_str().unwrap_or(""));
        }
    }
    let changed = paths(&|f| f["changed"] == true);
    if data["undo"] == true {
        out.push_str(&format!(
            "Removed CAR from {host}: {}\n",
            changed.join(", ")
        ));
    } else {
        out.push_str(&format!(
            "Wired CAR into {host} for the {}: {}\n",
            data["scope"].as_str().unwrap_or("user"),
            changed.join(", ")
        ));
        for note in data["notes"].as_array().into_iter().flatten() {
            out.push_str(&format!("note: {}\n", note.as_str().unwrap_or("")));
        }
    }
    out
}

/// A path with the user's home as `~`.
fn display(path: &Path) -> String {
    match crate::home::user_home().and_then(|h| path.strip_prefix(&h).ok().map(Path::to_path_buf)) {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}
