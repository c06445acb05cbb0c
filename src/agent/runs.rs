//! `car do` on the daemon: runs started with `assistant_start`, followed with `assistant_poll`
//! and stopped with `assistant_cancel`. A run belongs to the daemon, not to the connection that
//! started it: it survives a client that goes away, and any client may poll it. At most
//! [`MAX_RUNNING`] run at once; each keeps its last [`MAX_EVENTS`] events; a run nobody has
//! polled for [`EXPIRY`] is cancelled and forgotten.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::model::Model;
use super::sandbox::Sandbox;
use super::{Document, Event, Task};
use crate::runtime::{
    Context, Effect, Idempotence, JobState, JobStatus, Jobs, Runtime, Tool, ToolError, ToolSpec,
};

pub const MAX_RUNNING: usize = 8;
pub const MAX_EVENTS: usize = 2000;
pub const EXPIRY: Duration = Duration::from_secs(60 * 60);
/// The `seq` of a run's first event.
const FIRST_SEQ: u64 = 1;

/// The daemon's tools for runs of the governed agent (car-server serves them; car-mcp does not).
pub const ASSISTANT_TOOLS: [&str; 3] = ["assistant_start", "assistant_poll", "assistant_cancel"];

/// What `assistant_start` takes (CAR's contract, and CAR's own `sandbox` and `image`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// What to do, in words.
    pub task: String,
    /// The directory the run works in: the daemon's project (the default) or a directory inside
    /// it, absolute or relative to the project.
    #[serde(default)]
    pub cwd: Option<String>,
    /// A shell check that must pass before the run is done (`car do --until`).
    #[serde(default)]
    pub until: Option<String>,
    /// The turns the model may take (1–200, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub max_turns: Option<u32>,
    /// Read-only: the run reads the project and runs commands in the sandbox, but changes
    /// nothing (its Write and Edit are refused, the project is mounted read-only).
    #[serde(default)]
    pub local: bool,
    /// The model (default: the daemon's CAR_DO_MODEL).
    #[serde(default)]
    pub model: Option<String>,
    /// The host that started this run: the run will not launch it again.
    #[serde(default)]
    pub invoked_by: Option<Host>,
    /// Where shell commands run: `auto` (bubblewrap, the default) or `docker`.
    #[serde(default)]
    pub sandbox: Option<super::sandbox::SandboxChoice>,
    /// The image for `sandbox: docker` (default: the daemon's CAR_DO_IMAGE, else
    /// debian:stable-slim).
    #[serde(default)]
    pub image: Option<String>,
}

/// The most turns `assistant_start` allows, and its default.
pub const MAX_TURNS: u32 = 200;
pub const DEFAULT_TURNS: u32 = 50;
/// How long a client should wait between polls.
pub const POLL_AFTER_MS: u64 = 2000;

/// An agent host that may start a run (CAR's recursion guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
}

impl Host {
    pub fn as_str(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
            Host::Cursor => "cursor",
        }
    }
}

/// The hosts that led to a daemon's run, outermost first: the one that started the daemon
/// (its `CAR_INVOKED_BY`), then the one `assistant_start` names.
pub fn ancestry(invoked_by: Option<Host>) -> Vec<Host> {
    let daemon = std::env::var(crate::home::env::CAR_INVOKED_BY)
        .ok()
        .and_then(|v| serde_json::from_value::<Host>(Value::String(v.trim().into())).ok());
    let mut hosts: Vec<Host> = daemon.into_iter().chain(invoked_by).collect();
    hosts.dedup();
    hosts
}

/// Everything a run needs, made by the face that serves the tools.
pub struct Launch {
    pub model: Model,
    pub sandbox: Sandbox,
    /// The runtime with the workspace tools (kept alive for the run).
    pub runtime: Arc<dyn AsRuntime>,
    pub context: Context,
    pub task: Task,
}

/// Something that holds a [`Runtime`] (an `App`).
pub trait AsRuntime: Send + Sync {
    fn runtime(&self) -> &Runtime;
}

impl AsRuntime for crate::app::App {
    fn runtime(&self) -> &Runtime {
        crate::app::App::runtime(self)
    }
}

/// Makes a run ready, or says why it cannot start.
pub type Launcher = Arc<dyn Fn(&StartArgs) -> Result<Launch, String> + Send + Sync>;

struct Run {
    events: VecDeque<(u64, Event)>,
    next_seq: u64,
    document: Option<Document>,
    stop: CancellationToken,
    polled: Instant,
    created: chrono::DateTime<chrono::Utc>,
    /// When the last event came (or the document).
    updated: chrono::DateTime<chrono::Utc>,
}

impl Run {
    fn status(&self) -> PollStatus {
        match &self.document {
            None => PollStatus::Running,
            Some(d)
                if d.error == Some(super::FailureKind::Interrupted) && self.stop.is_cancelled() =>
            {
                PollStatus::Cancelled
            }
            Some(d) if d.status == super::RunStatus::Error => PollStatus::Error,
            Some(_) => PollStatus::Ok,
        }
    }
}

/// The daemon's runs.
#[derive(Clone)]
pub struct Runs {
    runs: Arc<Mutex<HashMap<String, Run>>>,
    launcher: Launcher,
}

/// Where a run stands, as `assistant_poll` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PollStatus {
    Running,
    /// Ended with an answer or out of turns (the document's `status` says which).
    Ok,
    Error,
    /// Stopped by `assistant_cancel` (or an MCP task's cancel).
    Cancelled,
}

/// What `assistant_poll` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Polled {
    pub run_id: String,
    pub status: PollStatus,
    /// The events from `since_seq` on, oldest first, each with its `seq`.
    pub events: Vec<serde_json::Map<String, Value>>,
    /// Pass as `since_seq` next time.
    pub next_seq: u64,
    /// Events from `since_seq` on that were dropped before this poll (past the 2,000 kept).
    pub events_skipped: u64,
    /// The `car.do/1` document, once the run has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Map<String, Value>>,
}

/// What `assistant_start` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Started {
    /// `mcp-run-…`: for `assistant_poll`, `assistant_cancel` and `car do --resume`.
    pub run_id: String,
    /// Always `running`.
    pub status: PollStatus,
    /// How long to wait before the first poll.
    pub poll_after_ms: u64,
    /// Where the run's commands run (the document's `sandbox` block).
    pub sandbox: Sandbox,
    /// The hosts that led to this run, outermost first: it launches none of them.
    pub ancestry: Vec<Host>,
}

/// What `assistant_cancel` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelStatus {
    /// It stops at its next turn boundary.
    Cancelled,
    /// It had already ended.
    AlreadyTerminal,
    /// No run of that id on this daemon.
    Unknown,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cancelled {
    pub run_id: String,
    pub status: CancelStatus,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PollArgs {
    run_id: String,
    /// The first event wanted: the previous poll's `next_seq` (default 0: from the start).
    #[serde(default)]
    since_seq: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    run_id: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Runs {
    pub fn new(launcher: Launcher) -> Runs {
        Runs {
            runs: Arc::new(Mutex::new(HashMap::new())),
            launcher,
        }
    }

    /// Cancels runs nobody polled for an hour, and forgets them once they have stopped (a
    /// cancelled run still counts against the limit until it has).
    fn sweep(&self) {
        lock(&self.runs).retain(|_, run| {
            if run.polled.elapsed() < EXPIRY {
                return true;
            }
            run.stop.cancel();
            run.document.is_none()
        });
    }

    pub fn start(&self, args: StartArgs) -> Result<Started, ToolError> {
        self.sweep();
        let run_id = format!("mcp-run-{}", uuid::Uuid::new_v4().simple());
        let stop = CancellationToken::new();
        {
            // The slot is taken under the same lock that counts, so starts at once cannot pass
            // the limit together.
            let mut runs = lock(&self.runs);
            let running = runs.values().filter(|r| r.document.is_none()).count();
            if running >= MAX_RUNNING {
                return Err(ToolError::Failed(format!(
                    "{MAX_RUNNING} runs are already running on this daemon; poll them to the end or cancel one with assistant_cancel"
                )));
            }
            runs.insert(
                run_id.clone(),
                Run {
                    events: VecDeque::new(),
                    next_seq: FIRST_SEQ,
                    document: None,
                    stop: stop.clone(),
                    polled: Instant::now(),
                    created: chrono::Utc::now(),
                    updated: chrono::Utc::now(),
                },
            );
        }
        let mut launch = match (self.launcher)(&args) {
            Ok(launch) => launch,
            Err(why) => {
                lock(&self.runs).remove(&run_id);
                return Err(ToolError::InvalidArguments(why));
            }
        };
        // One id everywhere: the poll key, the task id, the document's run_id and the checkpoint
        // that `car do --resume` reads.
        launch.task.run_id = run_id.clone();
        let sandbox = launch.sandbox.clone();
        let ancestry = ancestry(args.invoked_by);
        let runs = self.runs.clone();
        let id = run_id.clone();
        let model_name = launch.model.name().to_string();
        let provider = launch.model.provider().as_str();
        let sink = runs.clone();
        let sink_id = id.clone();
        let work = tokio::spawn(async move {
            super::run(
                &launch.task,
                &launch.model,
                launch.runtime.runtime(),
                &launch.context,
                &launch.sandbox,
                stop,
                move |event: Event| {
                    if let Some(run) = lock(&sink).get_mut(&sink_id) {
                        run.updated = chrono::Utc::now();
                        run.events.push_back((run.next_seq, event));
                        run.next_seq += 1;
                        if run.events.len() > MAX_EVENTS {
                            run.events.pop_front();
                        }
                    }
                },
            )
            .await
        });
        tokio::spawn(async move {
            // A run that panics still ends, with a document that says so.
            let document = work.await.unwrap_or_else(|join| {
                Document::refused(
                    super::Failure {
                        kind: super::FailureKind::AssistantLoopFailed,
                        message: format!("the run stopped unexpectedly: {join}"),
                        suggestions: vec![],
                    },
                    &model_name,
                    provider,
                    None,
                )
            });
            if let Some(run) = lock(&runs).get_mut(&id) {
                run.updated = chrono::Utc::now();
                run.document = Some(document);
            }
        });
        Ok(Started {
            run_id,
            status: PollStatus::Running,
            poll_after_ms: POLL_AFTER_MS,
            sandbox,
            ancestry,
        })
    }

    pub fn poll(&self, run_id: &str, since_seq: u64) -> Result<Polled, ToolError> {
        self.sweep();
        let mut runs = lock(&self.runs);
        let run = runs.get_mut(run_id).ok_or_else(|| {
            ToolError::NotFound(format!(
                "no run {run_id} on this daemon (runs nobody polls for an hour are forgotten)"
            ))
        })?;
        run.polled = Instant::now();
        let first_kept = run.events.front().map_or(run.next_seq, |(seq, _)| *seq);
        let events: Vec<serde_json::Map<String, Value>> = run
            .events
            .iter()
            .filter(|(seq, _)| *seq >= since_seq)
            .filter_map(|(seq, event)| match serde_json::to_value(event) {
                Ok(Value::Object(mut map)) => {
                    map.insert("seq".into(), (*seq).into());
                    Some(map)
                }
                _ => None,
            })
            .collect();
        Ok(Polled {
            run_id: run_id.to_string(),
            status: run.status(),
            events,
            next_seq: run.next_seq.max(since_seq),
            events_skipped: first_kept.saturating_sub(since_seq.max(FIRST_SEQ)),
            result: run
                .document
                .as_ref()
                .and_then(|d| match serde_json::to_value(d) {
                    Ok(Value::Object(map)) => Some(map),
                    _ => None,
                }),
        })
    }

    /// Stops a run at its next turn boundary; an unknown id is an answer, not an error.
    pub fn cancel(&self, run_id: &str) -> Cancelled {
        let runs = lock(&self.runs);
        let status = match runs.get(run_id) {
            None => CancelStatus::Unknown,
            Some(run) if run.document.is_some() => CancelStatus::AlreadyTerminal,
            Some(run) => {
                run.stop.cancel();
                CancelStatus::Cancelled
            }
        };
        Cancelled {
            run_id: run_id.to_string(),
            status,
        }
    }

    /// The three tools.
    pub fn tools(&self) -> Vec<Tool> {
        let runs = self.clone();
        let start = Tool::typed(
            ToolSpec::new(
                ASSISTANT_TOOLS[0],
                "Start a car do run on the daemon: a governed agent works on the task in this project (tools through the policy gate, shell commands sandboxed). Returns a run_id; follow it with assistant_poll (a client that takes MCP tasks gets a task instead, whose result is the run's car.do/1 document). The run survives this client disconnecting.",
                Value::Null,
            )
            .effect(Effect::ExternalWrite)
            .idempotence(Idempotence::NotIdempotent),
            move |args: StartArgs, _call| runs.start(args),
        )
        .with_jobs(Arc::new(self.clone()));
        let runs = self.clone();
        let poll = Tool::typed(
            ToolSpec::new(
                ASSISTANT_TOOLS[1],
                "Events of a car do run after `after` (pass the previous poll's `next`), and its car.do/1 document once done.",
                Value::Null,
            )
            .effect(Effect::Read),
            move |args: PollArgs, _call| runs.poll(&args.run_id, args.since_seq),
        );
        let runs = self.clone();
        let cancel = Tool::typed(
            ToolSpec::new(
                ASSISTANT_TOOLS[2],
                "Stop a car do run at its next turn boundary; its document then says it was interrupted.",
                Value::Null,
            )
            .effect(Effect::Write),
            move |args: CancelArgs, _call| Ok::<_, ToolError>(runs.cancel(&args.run_id)),
        );
        vec![start, poll, cancel]
    }
}

/// Runs as jobs of `assistant_start` (an MCP client that takes tasks follows them as tasks).
impl Jobs for Runs {
    fn started(&self, result: &Value) -> Option<String> {
        result["run_id"].as_str().map(str::to_string)
    }

    fn state(&self, id: &str) -> Option<JobState> {
        self.sweep();
        let mut runs = lock(&self.runs);
        let run = runs.get_mut(id)?;
        // Asking after a run keeps it, as a poll does.
        run.polled = Instant::now();
        let (status, message) = match &run.document {
            // What it did last.
            None => (
                JobStatus::Working,
                run.events.back().map(|(_, event)| event.message()),
            ),
            Some(document) => {
                let message = document.summary.clone().or(document.message.clone());
                if document.error == Some(super::FailureKind::Interrupted)
                    && run.stop.is_cancelled()
                {
                    (JobStatus::Cancelled, message)
                } else {
                    (
                        JobStatus::Done {
                            result: serde_json::to_value(document).unwrap_or(Value::Null),
                            failed: document.status == super::RunStatus::Error,
                        },
                        message,
                    )
                }
            }
        };
        Some(JobState {
            status,
            message,
            created: run.created,
            updated: run.updated,
            ttl: EXPIRY,
        })
    }

    fn cancel(&self, id: &str) -> bool {
        self.cancel(id).status != CancelStatus::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose first events were dropped (past the 2,000 kept): the poll counts them.
    #[test]
    fn a_poll_from_since_seq_counts_what_was_dropped_and_never_repeats_an_event() {
        let runs = Runs::new(Arc::new(|_: &StartArgs| Err("no runs here".to_string())));
        let event = |n: u32| super::super::Event::Said {
            turn: n,
            text: format!("turn {n}"),
        };
        lock(&runs.runs).insert(
            "mcp-run-x".into(),
            Run {
                // Events 1–4 were dropped; 5–7 are kept.
                events: (5..=7).map(|seq| (seq, event(seq as u32))).collect(),
                next_seq: 8,
                document: None,
                stop: CancellationToken::new(),
                polled: Instant::now(),
                created: chrono::Utc::now(),
                updated: chrono::Utc::now(),
            },
        );
        let first = runs.poll("mcp-run-x", 0).unwrap();
        assert_eq!(first.status, PollStatus::Running);
        assert_eq!(
            (first.events.len(), first.next_seq, first.events_skipped),
            (3, 8, 4)
        );
        assert_eq!(first.events[0]["seq"], 5);
        let from_six = runs.poll("mcp-run-x", 6).unwrap();
        assert_eq!((from_six.events.len(), from_six.events_skipped), (2, 0));
        let after_all = runs.poll("mcp-run-x", first.next_seq).unwrap();
        assert!(after_all.events.is_empty());
        assert_eq!(after_all.next_seq, 8);
        assert!(runs.poll("mcp-run-nobody", 0).is_err());
        assert_eq!(runs.cancel("mcp-run-nobody").status, CancelStatus::Unknown);
        assert_eq!(runs.cancel("mcp-run-x").status, CancelStatus::Cancelled);
        let refused = runs.start(StartArgs {
            task: "x".into(),
            cwd: None,
            until: None,
            max_turns: None,
            local: false,
            model: None,
            invoked_by: None,
            sandbox: None,
            image: None,
        });
        assert!(matches!(refused, Err(ToolError::InvalidArguments(m)) if m == "no runs here"));
    }
}
