//! `car hook session-start` and `car hook prompt`: the agent hosts' session-start and prompt
//! hooks (see `crate::hooks`). Each reads the host's payload on stdin and prints only what the
//! host adds to the model's context — or nothing. Whatever goes wrong (a garbage payload, a
//! broken or locked database, a panic, a deadline passed), the hook prints nothing on stdout,
//! one line on stderr, and exits 0: a broken memory never blocks a session or a prompt.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::home::{self, Home, HomeError};
use crate::hooks::hosts::{self, Event, Host};
use crate::hooks::{self as capability, Injection, Opened};

pub const HELP: &str = "\
Examples:
  # What the plugin's SessionStart and UserPromptSubmit hooks run (payload on stdin):
  echo '{\"session_id\":\"s1\",\"cwd\":\"'$PWD'\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\"}' | car hook session-start
  echo '{\"session_id\":\"s1\",\"cwd\":\"'$PWD'\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"who approves schema changes?\"}' | car hook prompt
  # See what was injected and why (the envelope instead of the host's answer):
  echo '{…}' | car hook prompt --json
  # Turn either off for this project, or change the briefing's budget:
  car config set hooks.prompt off
  car config set hooks.briefing_tokens 2500

Hosts: claude-code (SessionStart, UserPromptSubmit), codex (SessionStart, UserPromptSubmit),
gemini (SessionStart, BeforeAgent), cursor (sessionStart, beforeSubmitPrompt); told from the
payload, or forced with --host. Every call is recorded in the execution log (`car executions`)
with exactly what was injected.";

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Session-start hook: print the project's briefing (ready work, blockers, decisions,
    /// constraints, relevant memory) within the hooks.briefing_tokens budget; after a resume or
    /// a compaction it leads with what changed since the session's last briefing.
    SessionStart(HookArgs),
    /// Prompt hook: print the memory entries the prompt is about (grounded ones only, each with
    /// its id and why), or nothing — usually nothing.
    Prompt(HookArgs),
    /// What the hooks injected in this project, newest first: host, session, prompt, the ids
    /// shown and withheld, and the text itself with --json. --cases writes the recorded prompts
    /// as `car memory evaluate` cases labelled with what was shown, to correct and score.
    Log(LogArgs),
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this session's calls.
    #[arg(long)]
    pub session: Option<String>,
    /// Only one hook's calls.
    #[arg(long, value_enum)]
    pub event: Option<EventArg>,
    /// At most this many calls.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print the recorded prompts as memory_evaluate cases ({"cases": […]}) instead.
    #[arg(long)]
    pub cases: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EventArg {
    SessionStart,
    Prompt,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The agent host whose payload this is (default: told from the payload).
    #[arg(long, value_enum)]
    pub host: Option<HostArg>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HostArg {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
}

impl From<HostArg> for Host {
    fn from(arg: HostArg) -> Host {
        match arg {
            HostArg::ClaudeCode => Host::ClaudeCode,
            HostArg::Codex => Host::Codex,
            HostArg::Gemini => Host::Gemini,
            HostArg::Cursor => Host::Cursor,
        }
    }
}

/// How long a hook may take before it gives up and injects nothing: the session start reads
/// more, and the user waits on a prompt.
fn deadline(event: Event) -> Duration {
    match event {
        Event::SessionStart => Duration::from_secs(8),
        Event::Prompt => Duration::from_secs(4),
    }
}

fn command_name(event: Event) -> &'static str {
    match event {
        Event::SessionStart => "hook session-start",
        Event::Prompt => "hook prompt",
    }
}

/// Runs one hook. `project` is `--project`/`CAR_PROJECT_DIR` when given; `json` prints the
/// envelope with the [`Injection`] instead of the host's answer.
pub fn run(
    event: Event,
    home: Result<Home, HomeError>,
    host: Option<Host>,
    project: Option<PathBuf>,
    json: bool,
) -> ExitCode {
    let command = command_name(event);
    let note = |message: &str| super::console::stderr_line(&format!("car {command}: {message}"));
    let home = match home {
        Ok(home) => home,
        Err(e) => {
            note(&format!("{e}; nothing injected"));
            return ExitCode::SUCCESS;
        }
    };
    let db = home.db_path();
    // Everything, reading the payload included, runs under the deadline: a host that never
    // closes stdin costs the session nothing.
    let work = move || -> Result<(Host, Option<Injection>), String> {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(16 * 1024 * 1024)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read the payload ({e})"))?;
        let payload = hosts::parse(event, &bytes, host).map_err(|e| e.to_string())?;
        let cwd = payload
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let root = project
            .filter(|p| !p.as_os_str().is_empty())
            .and_then(|p| std::path::absolute(p).ok())
            .unwrap_or_else(|| home::project_root(&cwd));
        let Some(opened) = Opened::open(&db, &root).map_err(|e| e.to_string())? else {
            return Ok((payload.host, None));
        };
        let injection = match event {
            Event::SessionStart => capability::session_start(&opened, &payload),
            Event::Prompt => capability::prompt(&opened, &payload),
        };
        let injection = injection.map_err(|e| e.to_string())?;
        // The process ends right after: freeing the index would only cost time.
        std::mem::forget(opened);
        Ok((payload.host, Some(injection)))
    };
    let (host, injection) = match within(deadline(event), work) {
        Ok(Ok((host, Some(injection)))) => (host, injection),
        Ok(Ok((_, None))) => {
            if json {
                print_envelope(
                    command,
                    &serde_json::json!({"silent": "no CAR database here yet, or CAR was never used in this project"}),
                );
            }
            return ExitCode::SUCCESS;
        }
        Ok(Err(e)) | Err(e) => {
            note(&format!("{e}; nothing injected"));
            return ExitCode::SUCCESS;
        }
    };
    if json {
        print_envelope(
            command,
            &serde_json::to_value(&injection).unwrap_or_default(),
        );
    } else if let Some(answer) = hosts::answer(host, event, &injection.text) {
        super::console::stdout(&format!("{answer}\n"));
    }
    ExitCode::SUCCESS
}

fn print_envelope(command: &str, data: &serde_json::Value) {
    super::console::stdout(&format!(
        "{}\n",
        crate::output::success(command, data.clone())
    ));
}

/// Runs `work` on its own thread and waits at most `limit` for it; a panic or the deadline is
/// an error (the thread is left behind: the process exits right after).
fn within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (send, receive) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("car-hook".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = send.send(result);
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start a thread ({e})"));
    }
    match receive.recv_timeout(limit) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err("it failed unexpectedly (a panic)".into()),
        Err(_) => Err(format!(
            "it took longer than {} s (is another process holding the database?)",
            limit.as_secs()
        )),
    }
}

/// The plain form the plugins run (`car hook session-start` / `car hook prompt` and nothing
/// else): no clap tree, no logger, no async runtime.
pub fn fast_path(event: &str) -> Option<ExitCode> {
    let event = match event {
        "session-start" => Event::SessionStart,
        "prompt" => Event::Prompt,
        _ => return None,
    };
    let project = std::env::var_os(home::env::CAR_PROJECT_DIR).map(PathBuf::from);
    Some(run(event, Home::from_env(), None, project, false))
}

/// `car hook log`.
fn log(
    home: Result<Home, HomeError>,
    project: Option<&Path>,
    json: bool,
    args: &LogArgs,
) -> ExitCode {
    let result = (|| -> Result<serde_json::Value, super::Failure> {
        let home = home.map_err(|e| super::Failure::usage(e.to_string()))?;
        let root = match project {
            Some(root) => root.to_path_buf(),
            None => home::project_root(&std::env::current_dir().map_err(|e| {
                super::Failure::new("io", format!("cannot read the current directory: {e}"))
            })?),
        };
        let store = std::sync::Arc::new(
            crate::store::Store::open(&home.db_path())
                .map_err(|e| super::Failure::new("store", e.to_string()))?,
        );
        let project = crate::project::Project::open(store, &root)?;
        let filter = capability::LogFilter {
            session: args.session.clone(),
            event: args.event.map(|e| match e {
                EventArg::SessionStart => Event::SessionStart,
                EventArg::Prompt => Event::Prompt,
            }),
            limit: args.limit,
        };
        let logged = capability::log(&project, &filter)
            .map_err(|e| super::Failure::new("store", e.to_string()))?;
        Ok(if args.cases {
            capability::evaluation_cases(&logged)
        } else {
            serde_json::json!({ "injections": logged })
        })
    })();
    let cases = args.cases;
    super::finish(json, "hook.log", result, |data| {
        if cases {
            return format!("{data:#}\n");
        }
        let rows = data["injections"].as_array().cloned().unwrap_or_default();
        if rows.is_empty() {
            return "Nothing recorded yet: the hooks run from the agent host (see `car hook --help`).\n".into();
        }
        let mut out = String::new();
        for row in rows {
            let shown: Vec<&str> = row["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .collect();
            let what = match row["prompt"].as_str() {
                Some(prompt) => {
                    let short: String = prompt.chars().take(60).collect();
                    format!("{short:?}")
                }
                None => row["source"].as_str().unwrap_or("").to_string(),
            };
            out.push_str(&format!(
                "{}  {:<13} {:<11} {:<14} {} → {}\n",
                row["created_at"].as_str().unwrap_or(""),
                row["event"].as_str().unwrap_or(""),
                row["host"].as_str().unwrap_or(""),
                row["session_id"].as_str().unwrap_or(""),
                what,
                if shown.is_empty() {
                    "nothing".to_string()
                } else {
                    format!("{} ({} tokens)", shown.join(", "), row["tokens"])
                }
            ));
        }
        out
    })
}

/// `car hook …` parsed by clap.
pub fn execute(
    command: &HookCommand,
    home: Result<Home, HomeError>,
    project: Option<&Path>,
    json: bool,
) -> ExitCode {
    let (event, args) = match command {
        HookCommand::SessionStart(args) => (Event::SessionStart, args),
        HookCommand::Prompt(args) => (Event::Prompt, args),
        HookCommand::Log(args) => return log(home, project, json, args),
    };
    run(
        event,
        home,
        args.host.map(Host::from),
        project.map(Path::to_path_buf),
        json,
    )
}
