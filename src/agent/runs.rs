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

/// The daemon's tools for runs of the governed agent (car-server serves them; car-mcp does not).
pub const ASSISTANT_TOOLS: [&str; 3] = ["assistant_start", "assistant_poll", "assistant_cancel"];

/// What `assistant_start` takes.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// What to do, in words.
    pub task: String,
    /// The model (default: the daemon's CAR_DO_MODEL).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// A shell check that must pass before the run is done (`car do --until`).
    #[serde(default)]
    pub until: Option<String>,
    /// The host that started this run (`claude-code`, `codex`, `gemini`): the run will not
    /// launch it again.
    #[serde(default)]
    pub invoked_by: Option<String>,
    /// Where shell commands run: `auto` (bubblewrap, the default) or `docker`.
    #[serde(default)]
    pub sandbox: Option<super::sandbox::SandboxChoice>,
    /// The image for `sandbox: docker` (default: the daemon's CAR_DO_IMAGE, else
    /// debian:stable-slim).
    #[serde(default)]
    pub image: Option<String>,
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

/// The daemon's runs.
#[derive(Clone)]
pub struct Runs {
    runs: Arc<Mutex<HashMap<String, Run>>>,
    launcher: Launcher,
}

/// What `assistant_poll` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Polled {
    pub run_id: String,
    /// Events after `after`, oldest first, each with its `seq`.
    pub events: Vec<serde_json::Map<String, Value>>,
    /// Pass as `after` next time.
    pub next: u64,
    /// Events evicted before they were polled (past the 2,000 kept).
    pub dropped: u64,
    pub done: bool,
    /// The `car.do/1` document, once done.
    pub document: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Started {
    pub run_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cancelled {
    pub run_id: String,
    /// False when it had already finished.
    pub cancelled: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PollArgs {
    run_id: String,
    /// The `next` of the previous poll (default 0: from the start).
    #[serde(default)]
    after: u64,
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
        let run_id = uuid::Uuid::new_v4().simple().to_string();
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
                    next_seq: 1,
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
        Ok(Started { run_id })
    }

    pub fn poll(&self, run_id: &str, after: u64) -> Result<Polled, ToolError> {
        self.sweep();
        let mut runs = lock(&self.runs);
        let run = runs.get_mut(run_id).ok_or_else(|| {
            ToolError::NotFound(format!(
                "no run {run_id} on this daemon (runs nobody polls for an hour are forgotten)"
            ))
        })?;
        run.polled = Instant::now();
        let first_kept = run.events.front().map_or(run.next_seq, |(seq, _)| *seq);
        let events = run
            .events
            .iter()
            .filter(|(seq, _)| *seq > after)
            .filter_map(|(seq, event)| match serde_json::to_value(event) {
                Ok(Value::Object(mut map)) => {
                    map.insert("seq".into(), (*seq).into());
                    Some(map)
                }
                _ => None,
            })
            .collect();
        let next = run
            .events
            .back()
            .map_or(after, |(seq, _)| (*seq).max(after));
        Ok(Polled {
            run_id: run_id.to_string(),
            events,
            next,
            dropped: first_kept.saturating_sub(after + 1),
            done: run.document.is_some(),
            document: run
                .document
                .as_ref()
                .and_then(|d| match serde_json::to_value(d) {
                    Ok(Value::Object(map)) => Some(map),
                    _ => None,
                }),
        })
    }

    pub fn cancel(&self, run_id: &str) -> Result<Cancelled, ToolError> {
        let runs = lock(&self.runs);
        let run = runs
            .get(run_id)
            .ok_or_else(|| ToolError::NotFound(format!("no run {run_id} on this daemon")))?;
        let running = run.document.is_none();
        run.stop.cancel();
        Ok(Cancelled {
            run_id: run_id.to_string(),
            cancelled: running,
        })
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
            move |args: PollArgs, _call| runs.poll(&args.run_id, args.after),
        );
        let runs = self.clone();
        let cancel = Tool::typed(
            ToolSpec::new(
                ASSISTANT_TOOLS[2],
                "Stop a car do run at its next turn boundary; its document then says it was interrupted.",
                Value::Null,
            )
            .effect(Effect::Write),
            move |args: CancelArgs, _call| runs.cancel(&args.run_id),
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
        self.cancel(id).is_ok()
    }
}
