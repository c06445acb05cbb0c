//! `car do "<task>"`: the governed agent loop of `crate::agent` on the command line. With
//! `--json`, stdout carries exactly one `car.do/1` document (even on failure) and stderr one JSON
//! event per line; without it, a readable live view on stderr and the summary on stdout.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{console, Env};
use crate::agent::model::Provider;
use crate::agent::sandbox::SandboxChoice;
use crate::agent::{self, Document, Event};
use crate::app::launch::{prepare, Options};

pub const HELP: &str = "Examples:
  car do \"make the failing test in tests/parse.rs pass\" --model claude-sonnet-4-5
  CAR_DO_MODEL=qwen2.5-coder car do --base-url http://localhost:11434/v1 \"add a --verbose flag\"
  car do --json \"update the changelog\" > run.json     # one car.do/1 document; events on stderr
  car do --sandbox docker --image rust:1 \"fix the build\"   # commands in a container
  car do --resume 3f2a…                               # go on from an earlier run's last turn

The model calls tools through CAR's registry: Bash, Read, Write, Edit, Glob, Grep in the project
directory, plus memory, tasks and decisions. Every call passes the policy rules
($CAR_HOME/policies and .car/policies; the same rules that guard Claude Code's tools), and shell
commands run sandboxed with no network and only the project directory writable: bubblewrap and a
seccomp filter on Linux, Seatbelt on macOS, or a container with --sandbox docker. With no sandbox
available the run refuses unless --no-sandbox. The answer streams in as the model writes it.
Keys: ANTHROPIC_API_KEY / OPENAI_API_KEY (or `car keys set`); a local OpenAI-compatible server
(Ollama, llama.cpp, vLLM, LM Studio) needs none.";

/// `car do` arguments.
#[derive(Debug, Args)]
pub struct DoArgs {
    /// What to do, in words.
    #[arg(required_unless_present = "resume", num_args = 1.., value_name = "TASK")]
    pub task: Vec<String>,
    /// Go on from the last turn boundary of an earlier run (the run_id of its document); its
    /// task, messages and receipts come back, the limits are this invocation's.
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,
    /// The model (default: $CAR_DO_MODEL).
    #[arg(long, env = crate::home::env::CAR_DO_MODEL)]
    pub model: Option<String>,
    /// The API it speaks (default: anthropic for claude-* models, else openai-compatible).
    #[arg(long, value_enum)]
    pub provider: Option<Provider>,
    /// The API's base URL (e.g. http://localhost:11434/v1 for Ollama).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The most model turns before it stops with status max_turns.
    #[arg(long, default_value_t = 40)]
    pub max_turns: u32,
    /// The most input plus output tokens the run may spend.
    #[arg(long, default_value_t = 1_000_000)]
    pub token_budget: u64,
    /// Output tokens per model turn.
    #[arg(long, default_value_t = 8192)]
    pub max_tokens: u32,
    /// Where shell commands run: auto (bubblewrap on Linux, Seatbelt on macOS) or docker (a
    /// container of --image on the Docker engine, DOCKER_HOST).
    #[arg(long, value_enum, default_value_t = SandboxChoice::Auto)]
    pub sandbox: SandboxChoice,
    /// The image of --sandbox docker: one with your project's toolchain (rust:1, node:22, …).
    #[arg(
        long,
        env = crate::home::env::CAR_DO_IMAGE,
        value_name = "IMAGE",
        default_value = crate::agent::sandbox::DEFAULT_IMAGE
    )]
    pub image: String,
    /// Run shell commands without a sandbox (as you, with the network).
    #[arg(long, conflicts_with = "sandbox")]
    pub no_sandbox: bool,
    /// Let shell commands write the project's .git (commits); read-only by default.
    #[arg(long)]
    pub allow_git_writes: bool,
    /// A shell check (run in the sandbox) that must exit 0: when the model says it is done and
    /// the check fails, the model goes back to work with its output (the `goal` block).
    #[arg(long, value_name = "SHELL CHECK")]
    pub until: Option<String>,
}

/// What `car do`'s flags ask for.
fn options_of(args: &DoArgs) -> Options {
    Options {
        task: args.task.join(" "),
        model: args.model.clone(),
        provider: args.provider,
        base_url: args.base_url.clone(),
        max_turns: args.max_turns,
        token_budget: args.token_budget,
        max_tokens: args.max_tokens,
        no_sandbox: args.no_sandbox,
        sandbox: args.sandbox,
        image: args.image.clone(),
        allow_git_writes: args.allow_git_writes,
        read_only: false,
        workdir: None,
        until: args.until.clone(),
        resume: args.resume.clone(),
        invoked_by: std::env::var(crate::home::env::CAR_INVOKED_BY)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .into_iter()
            .collect(),
    }
}

pub async fn run(env: &Env, args: DoArgs) -> ExitCode {
    let json = env.json;
    let options = options_of(&args);
    let launch = match prepare(&env.home, &env.project_root, &options) {
        Ok(launch) => launch,
        Err(refused) => {
            let model = options.model.clone().unwrap_or_default();
            let provider = options.provider.unwrap_or_else(|| Provider::infer(&model));
            let document =
                Document::refused(refused.failure, &model, provider.as_str(), refused.sandbox);
            print_document(json, &document, false);
            return ExitCode::from(refused.exit);
        }
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        // The first Ctrl-C stops at the next boundary (a valid document); a second one quits.
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let summary_shown = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let document = agent::run(
        &launch.task,
        &launch.model,
        launch.runtime.runtime(),
        &launch.context,
        &launch.sandbox,
        stop,
        View::new(json, summary_shown.clone()),
    )
    .await;
    print_document(
        json,
        &document,
        summary_shown.load(std::sync::atomic::Ordering::Relaxed),
    );
    if document.status == agent::RunStatus::Error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// How a run shows on stderr: with `--json` one JSON event per line; otherwise a readable live
/// view — the model's text as it streams in, a line per tool call and its outcome, and on a
/// terminal a spinner while the model or a tool is at work.
struct View {
    json: bool,
    terminal: bool,
    spinner: Option<ProgressBar>,
    /// The model's text of this turn was printed as it came (its `text` event is not repeated).
    streamed: bool,
    /// The streamed text does not end with a newline yet.
    mid_line: bool,
    /// The final answer was streamed to stderr's terminal as it came.
    summary_shown: Arc<std::sync::atomic::AtomicBool>,
}

impl View {
    fn new(json: bool, summary_shown: Arc<std::sync::atomic::AtomicBool>) -> View {
        View {
            json,
            summary_shown,
            terminal: std::io::stderr().is_terminal(),
            spinner: None,
            streamed: false,
            mid_line: false,
        }
    }

    /// A spinner saying what is being waited for (on a terminal only).
    fn spin(&mut self, what: String) {
        if !self.terminal {
            return;
        }
        let spinner = self.spinner.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        spinner.set_message(what);
    }

    fn quiet(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Ends the line the streamed text left open.
    fn end_line(&mut self) {
        if self.mid_line {
            console::stderr("\n");
            self.mid_line = false;
        }
    }

    fn line(&mut self, text: &str) {
        self.quiet();
        self.end_line();
        console::stderr_line(text);
    }
}

impl agent::Observer for View {
    fn event(&mut self, event: Event) {
        if self.json {
            if let Ok(line) = serde_json::to_string(&event) {
                console::stderr_line(&line);
            }
            return;
        }
        match &event {
            Event::Started { .. } => {
                self.line(&format!("car do: {}", event.message()));
                self.spin("thinking".into());
            }
            Event::Said { .. } if self.streamed => self.end_line(),
            Event::Resumed { .. } | Event::Said { .. } | Event::Remembered { .. } => {
                self.line(&format!("· {}", event.message()))
            }
            Event::ToolCalled { tool, input, .. } => {
                self.streamed = false;
                let call = brief_call(tool, input);
                self.line(&format!("→ {call}"));
                self.spin(call);
            }
            Event::ToolEnded {
                ok, duration_ms, ..
            } => {
                let mark = if *ok { "✓" } else { "✗" };
                self.line(&format!(
                    "  {mark} {} ({})",
                    event.message(),
                    elapsed(*duration_ms)
                ));
                self.spin("thinking".into());
            }
            Event::GoalEvaluated { .. } => {
                self.streamed = false;
                self.line(&format!("◎ {}", event.message()));
                self.spin("thinking".into());
            }
            Event::Completed { .. } | Event::Failed { .. } => {
                self.quiet();
                if matches!(event, Event::Completed { .. }) && self.streamed && self.terminal {
                    self.summary_shown
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                self.end_line();
            }
        }
    }

    fn text(&mut self, piece: &str) {
        if self.json || piece.is_empty() {
            return;
        }
        self.quiet();
        self.streamed = true;
        console::stderr(piece);
        self.mid_line = !piece.ends_with('\n');
    }
}

/// `850 ms`, `3.2 s`.
fn elapsed(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn brief_call(tool: &str, input: &serde_json::Value) -> String {
    let detail = ["command", "file_path", "pattern", "query"]
        .iter()
        .find_map(|k| input.get(*k).and_then(|v| v.as_str()))
        .unwrap_or("");
    agent::truncate(&format!("{tool} {detail}"), 160)
}

/// The document: JSON with `--json`; otherwise the summary (unless the live view already
/// streamed it to the same terminal), the totals and every unbacked claim.
fn print_document(json: bool, document: &Document, summary_shown: bool) {
    if json {
        console::stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(document).unwrap_or_default()
        ));
        return;
    }
    let mut out = String::new();
    match (&document.summary, &document.message) {
        (Some(_), _) if summary_shown && std::io::stdout().is_terminal() => {}
        (Some(summary), _) => out.push_str(&format!("{summary}\n")),
        (None, Some(message)) => out.push_str(&format!("error: {message}\n")),
        (None, None) => {}
    }
    for suggestion in &document.suggestions {
        out.push_str(&format!("  try: {suggestion}\n"));
    }
    let r = &document.receipts;
    out.push_str(&format!(
        "\n{} · {} turn(s) · {} tool call(s), {} failed · sandbox: {} · {:.1} s\n",
        document.status,
        document.turns,
        r.total,
        r.failed,
        document.sandbox.as_ref().map_or("none", |s| s.mode),
        document.elapsed_seconds
    ));
    for claim in document.ungrounded_claims.iter().flatten() {
        out.push_str(&format!(
            "unbacked claim ({}): \"{}\" — no receipt of {}\n",
            claim.kind, claim.text, claim.needs
        ));
    }
    console::stdout(&out);
}
