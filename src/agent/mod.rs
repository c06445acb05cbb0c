//! `car do`: a governed agent loop. The model proposes tool calls; each one goes through the
//! registry's dispatcher like every other call (schema, policy gate, confirmation, time bound,
//! execution log); shell commands run in a sandbox that fails closed; every call leaves a
//! receipt, and the final answer's operational claims that no receipt backs are reported. The
//! result is one `car.do/1` document (see [`Document`]); progress is a stream of [`Event`]s.

pub mod claims;
mod event;
pub mod model;
pub mod reason;
pub mod runs;
pub mod sandbox;
pub mod tools;

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Digest;

use crate::runtime::{CallOptions, Context, Runtime};
pub use event::{Event, FailureKind, Halt, RunStatus};
use model::{Block, Message, Model, ModelError, Role, ToolDef};
use sandbox::Sandbox;

pub const SCHEMA: &str = "car.do/1";
/// The longest `summary` and `brief` (bytes).
const SUMMARY_MAX: usize = 4096;
const BRIEF_MAX: usize = 160;
const SAMPLE_MAX: usize = 8;

/// What to do and within which bounds.
#[derive(Debug, Clone)]
pub struct Task {
    pub task: String,
    pub max_turns: u32,
    /// Input plus output tokens the run may spend.
    pub token_budget: u64,
    /// `--until`: a shell check run (in the sandbox) when the model says it is done; until it
    /// exits 0 the model is sent back to work with its output.
    pub until: Option<String>,
    /// The run's id (a resumed run keeps its own).
    pub run_id: String,
    /// Where a checkpoint is written at every turn boundary (`$CAR_HOME/runs`).
    pub checkpoints: Option<std::path::PathBuf>,
    /// The state to go on from (`car do --resume RUN_ID`).
    pub resume: Option<Checkpoint>,
}

/// A run at a turn boundary: enough to go on from there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub run_id: String,
    pub task: String,
    pub messages: Vec<Message>,
    pub receipts: Vec<Receipt>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u32,
    pub goal_iterations: u32,
}

/// A run id: letters, digits and dashes (what `car do` makes, and nothing that leaves `dir`).
pub fn is_run_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The most bytes of a kept run's file that are read.
const MAX_KEPT_RUN: u64 = 16 * 1024 * 1024;

/// The runs kept in `dir` (`$CAR_HOME/runs`), the latest checkpoint first: their ids.
pub fn kept_runs(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut runs: Vec<(String, std::time::SystemTime)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let id = name.strip_suffix(".json")?;
            if id.ends_with(".done") || !is_run_id(id) {
                return None;
            }
            let meta = entry.metadata().ok()?;
            meta.is_file().then_some(())?;
            Some((id.to_string(), meta.modified().ok()?))
        })
        .collect();
    runs.sort_by_key(|run| std::cmp::Reverse(run.1));
    runs.into_iter().map(|(id, _)| id).collect()
}

/// A kept run as JSON: its last checkpoint and, once it ended, its `car.do/1` document
/// (`Null` for what is not there, or is not a readable file of its own).
pub fn kept_run(dir: &std::path::Path, run_id: &str) -> (serde_json::Value, serde_json::Value) {
    let read = |path: std::path::PathBuf| {
        crate::home::read_regular(&path, MAX_KEPT_RUN)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    if !is_run_id(run_id) {
        return (serde_json::Value::Null, serde_json::Value::Null);
    }
    (
        read(Checkpoint::path(dir, run_id)),
        read(document_path(dir, run_id)),
    )
}

/// Where a finished run's `car.do/1` document is kept, beside its checkpoint (what the
/// dashboard's runs page reads).
pub fn document_path(dir: &std::path::Path, run_id: &str) -> std::path::PathBuf {
    dir.join(format!("{run_id}.done.json"))
}

fn save_document(dir: &std::path::Path, document: &Document) {
    let written = serde_json::to_vec(document)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::home::write_atomic(&document_path(dir, &document.run_id), &bytes));
    if let Err(e) = written {
        tracing::warn!("cannot keep the document of run {}: {e}", document.run_id);
    }
}

impl Checkpoint {
    fn path(dir: &std::path::Path, run_id: &str) -> std::path::PathBuf {
        dir.join(format!("{run_id}.json"))
    }

    /// The checkpoint of `run_id` in `dir`, or why there is none.
    pub fn load(dir: &std::path::Path, run_id: &str) -> Result<Checkpoint, String> {
        if !is_run_id(run_id) {
            return Err(format!(
                "'{run_id}' is not a run id (see the run_id of a car.do/1 document)"
            ));
        }
        let path = Checkpoint::path(dir, run_id);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("no checkpoint for run {run_id} at {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("the checkpoint {} cannot be read: {e}", path.display()))
    }

    fn save(&self, dir: &std::path::Path) {
        let written = serde_json::to_vec(self)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                crate::home::write_atomic(&Checkpoint::path(dir, &self.run_id), &bytes)
            });
        if let Err(e) = written {
            tracing::warn!("cannot write the checkpoint of run {}: {e}", self.run_id);
        }
    }
}

/// The `goal` block of a run with `--until`.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub check: String,
    pub passed: bool,
    /// True: the check's exit code decided, not a model's judgement.
    pub grounded: bool,
    pub iterations: u32,
    pub halt: Halt,
}

/// Who follows a run: every [`Event`], and the model's text as it streams in.
pub trait Observer: Send {
    fn event(&mut self, event: Event);
    /// A piece of the model's answer as it arrives (the live view prints it); the whole text
    /// also comes as one `text` event once the turn is answered.
    fn text(&mut self, _piece: &str) {}
}

impl<F: FnMut(Event) + Send> Observer for F {
    fn event(&mut self, event: Event) {
        self(event)
    }
}

/// The record of one tool call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub tool: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub brief: String,
    /// `sha256:` of the output as the model saw it.
    pub digest: String,
    pub execution_id: String,
    /// The command or path it acted on (what the claim check reads).
    #[serde(default)]
    pub subject: String,
}

/// The receipts of a run, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct Receipts {
    pub total: usize,
    pub failed: usize,
    pub by_tool: BTreeMap<String, usize>,
    /// At most 8, failures first.
    pub sample: Vec<Receipt>,
    pub sample_omitted: usize,
}

impl Receipts {
    fn of(all: &[Receipt]) -> Receipts {
        let mut by_tool = BTreeMap::new();
        for r in all {
            *by_tool.entry(r.tool.clone()).or_insert(0) += 1;
        }
        let mut sample: Vec<Receipt> = all.iter().filter(|r| !r.ok).cloned().collect();
        sample.extend(all.iter().filter(|r| r.ok).cloned());
        let omitted = sample.len().saturating_sub(SAMPLE_MAX);
        sample.truncate(SAMPLE_MAX);
        Receipts {
            total: all.len(),
            failed: all.iter().filter(|r| !r.ok).count(),
            by_tool,
            sample,
            sample_omitted: omitted,
        }
    }
}

/// The `car.do/1` document: written once, at the end, even on failure.
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub schema: &'static str,
    /// Pass to `car do --resume` to go on from the last turn boundary.
    pub run_id: String,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<FailureKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub turns: u32,
    pub delegations: u32,
    pub model_used: String,
    pub provider: &'static str,
    pub tokens: Tokens,
    pub receipts: Receipts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ungrounded_claims: Option<Vec<claims::Claim>>,
    pub sandbox: Option<Sandbox>,
    pub elapsed_seconds: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<Goal>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub budget: u64,
}

/// A run that could not start or went wrong: the `error` kind, its message, what to try.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    pub suggestions: Vec<String>,
}

impl Document {
    /// The document of a run that did not start.
    pub fn refused(
        failure: Failure,
        model: &str,
        provider: &'static str,
        sandbox: Option<Sandbox>,
    ) -> Document {
        Document {
            schema: SCHEMA,
            run_id: String::new(),
            status: RunStatus::Error,
            summary: None,
            error: Some(failure.kind),
            message: Some(failure.message),
            turns: 0,
            delegations: 0,
            model_used: model.to_string(),
            provider,
            tokens: Tokens::default(),
            receipts: Receipts::of(&[]),
            ungrounded_claims: None,
            sandbox,
            elapsed_seconds: 0.0,
            suggestions: failure.suggestions,
            goal: None,
        }
    }
}

const SYSTEM: &str = "You are car do, a coding agent working in the user's project directory. Use the tools to inspect and change files and to run commands; shell commands run in a sandbox (no network, only the project directory writable). Work until the task is done, then answer with a short summary of what you did and what you verified. Claim only what a tool call showed: say tests pass only after running them.";

/// Runs `task` with `model` over the registry's tools (the workspace tools among them), until
/// the model answers without calling a tool, the turns or the budget run out, or it is stopped.
pub async fn run(
    task: &Task,
    model: &Model,
    runtime: &Runtime,
    context: &Context,
    sandbox: &Sandbox,
    stop: tokio_util::sync::CancellationToken,
    observer: impl Observer,
) -> Document {
    let mut agent = Agent {
        task,
        model,
        runtime,
        context,
        sandbox,
        stop,
        observer,
        tools: tool_defs(runtime),
        started: Instant::now(),
    };
    let mut state = agent.begin().await;
    let mut step = Step::Ask;
    loop {
        step = match step {
            Step::Ask => match agent.boundary(&state) {
                Some(ending) => Step::End(ending),
                None => agent.ask(&mut state).await,
            },
            Step::Call(calls) => {
                agent.call_tools(&mut state, calls).await;
                Step::Ask
            }
            Step::Answered(summary) => agent.answered(&mut state, summary).await,
            Step::End(ending) => {
                let document = agent.end(state, ending).await;
                if let Some(dir) = &task.checkpoints {
                    save_document(dir, &document);
                }
                return document;
            }
        };
    }
}

/// A run in progress: what it works with.
struct Agent<'a, O> {
    task: &'a Task,
    model: &'a Model,
    runtime: &'a Runtime,
    context: &'a Context,
    sandbox: &'a Sandbox,
    stop: tokio_util::sync::CancellationToken,
    observer: O,
    tools: Vec<ToolDef>,
    started: Instant,
}

/// A run between steps: the conversation and what it has spent and shown.
struct RunState {
    messages: Vec<Message>,
    receipts: Vec<Receipt>,
    tokens: Tokens,
    turns: u32,
    goal: Option<Goal>,
    /// The start of an answer cut off at the output limit.
    cut_off: String,
}

/// What the loop does next.
enum Step {
    /// A turn boundary: checkpoint, check the limits, ask the model.
    Ask,
    /// The model called tools: run them, then ask again.
    Call(Vec<ToolCall>),
    /// The model answered without calling a tool: check the goal, or finish.
    Answered(String),
    End(Ending),
}

/// How the run ends.
enum Ending {
    Success(String),
    /// Out of turns, with the summary that says so.
    MaxTurns(String),
    Failed(Failure, Halt),
}

/// One tool call the model asked for.
struct ToolCall {
    id: String,
    name: String,
    input: Value,
}

/// The tools the model is offered: the registry's and the connectors', as listed.
fn tool_defs(runtime: &Runtime) -> Vec<ToolDef> {
    let mut specs: Vec<crate::runtime::ToolSpec> = runtime
        .registry()
        .specs()
        .filter(|s| s.listed)
        .cloned()
        .collect();
    if let Some(source) = runtime.dispatcher().source() {
        specs.extend(source.current().specs().filter(|s| s.listed).cloned());
    }
    specs
        .into_iter()
        .map(|s| ToolDef {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
        })
        .collect()
}

impl<O: Observer> Agent<'_, O> {
    /// The state to start from: a checkpoint's, or the task with what memory holds about it.
    async fn begin(&mut self) -> RunState {
        self.observer.event(Event::Started {
            model: self.model.name().to_string(),
            provider: self.model.provider().as_str(),
            sandbox: self.sandbox.mode,
            tools: self.tools.len(),
        });
        let mut state = RunState {
            messages: Vec::new(),
            receipts: Vec::new(),
            tokens: Tokens {
                budget: self.task.token_budget,
                ..Tokens::default()
            },
            turns: 0,
            goal: None,
            cut_off: String::new(),
        };
        let mut goal_iterations = 0;
        match &self.task.resume {
            Some(checkpoint) => {
                state.receipts = checkpoint.receipts.clone();
                state.tokens.input = checkpoint.input_tokens;
                state.tokens.output = checkpoint.output_tokens;
                state.turns = checkpoint.turns;
                state.messages = checkpoint.messages.clone();
                goal_iterations = checkpoint.goal_iterations;
                self.observer.event(Event::Resumed {
                    run_id: checkpoint.run_id.clone(),
                    turns: state.turns,
                });
            }
            None => state.messages.push(Message {
                role: Role::User,
                blocks: vec![Block::Text(self.first_message().await)],
            }),
        }
        state.goal = self.task.until.clone().map(|check| Goal {
            check,
            passed: false,
            grounded: true,
            iterations: goal_iterations,
            halt: Halt::Running,
        });
        state
    }

    /// The task, after the briefing from memory for it (through the registry, like the MCP
    /// prompt).
    async fn first_message(&self) -> String {
        let briefing = self
            .runtime
            .operate(
                crate::memory::surfaces::CONTEXT_PROMPT,
                json!({"query": self.task.task}),
                self.context,
                CallOptions::default(),
            )
            .await
            .ok()
            .and_then(|o| o.result.ok())
            .and_then(|v| v["text"].as_str().map(str::to_string))
            .filter(|t| !t.trim().is_empty());
        let mut first = String::new();
        if let Some(briefing) = briefing {
            first.push_str("What CAR remembers about this project:\n");
            first.push_str(&briefing);
            first.push_str("\n\n");
        }
        first.push_str("Task: ");
        first.push_str(&self.task.task);
        first
    }

    /// A turn boundary: writes the checkpoint, and ends the run when it was stopped or its
    /// turns or tokens are spent.
    fn boundary(&self, state: &RunState) -> Option<Ending> {
        if let Some(dir) = &self.task.checkpoints {
            Checkpoint {
                run_id: self.task.run_id.clone(),
                task: self.task.task.clone(),
                messages: state.messages.clone(),
                receipts: state.receipts.clone(),
                input_tokens: state.tokens.input,
                output_tokens: state.tokens.output,
                turns: state.turns,
                goal_iterations: state.goal.as_ref().map_or(0, |g| g.iterations),
            }
            .save(dir);
        }
        let turns = state.turns;
        if self.stop.is_cancelled() {
            return Some(Ending::Failed(
                Failure {
                    kind: FailureKind::Interrupted,
                    message: format!("stopped at a turn boundary after {turns} turn(s)"),
                    suggestions: vec![],
                },
                Halt::Interrupted,
            ));
        }
        if turns >= self.task.max_turns {
            return Some(Ending::MaxTurns(format!(
                "stopped after {turns} turns (--max-turns) before the model finished"
            )));
        }
        let spent = state.tokens.input + state.tokens.output;
        if spent >= self.task.token_budget {
            return Some(Ending::Failed(
                Failure {
                    kind: FailureKind::TokenBudgetExhausted,
                    message: format!(
                        "the run used {spent} of its {} tokens and stopped after {turns} turn(s)",
                        self.task.token_budget
                    ),
                    suggestions: vec!["raise the budget with --token-budget".into()],
                },
                Halt::Budget,
            ));
        }
        None
    }

    /// One turn of the model; what it answered decides the next step.
    async fn ask(&mut self, state: &mut RunState) -> Step {
        state.turns += 1;
        let turns = state.turns;
        let observer = &mut self.observer;
        let mut on_text = |piece: &str| observer.text(piece);
        let turn = tokio::select! {
            reply = self.model.turn(SYSTEM, &state.messages, &self.tools, &mut on_text) => Some(reply),
            _ = self.stop.cancelled() => None,
        };
        let reply = match turn {
            None => {
                return Step::End(Ending::Failed(
                    Failure {
                        kind: FailureKind::Interrupted,
                        message: format!("stopped while the model was answering turn {turns}"),
                        suggestions: vec![],
                    },
                    Halt::Interrupted,
                ))
            }
            Some(Err(e)) => return Step::End(Ending::Failed(model_failure(&e), Halt::Error)),
            Some(Ok(reply)) => reply,
        };
        state.tokens.input += reply.input_tokens;
        state.tokens.output += reply.output_tokens;
        let truncated = reply.truncated;
        let calls: Vec<ToolCall> = reply
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } => Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                }),
                _ => None,
            })
            .collect();
        let text: Vec<String> = reply
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) if !t.trim().is_empty() => Some(t.clone()),
                _ => None,
            })
            .collect();
        for t in &text {
            self.observer.event(Event::said(turns, t));
        }
        // An empty text block (or none at all) would make the next request invalid.
        let mut blocks: Vec<Block> = reply
            .blocks
            .into_iter()
            .filter(|b| !matches!(b, Block::Text(t) if t.trim().is_empty()))
            .collect();
        if blocks.is_empty() {
            blocks.push(Block::Text("(no answer)".into()));
        }
        state.messages.push(Message {
            role: Role::Assistant,
            blocks,
        });
        match (calls.is_empty(), truncated) {
            (true, true) => {
                // Cut off at the output limit: the answer goes on in the next turn.
                state.cut_off.push_str(&text.join("\n"));
                state.messages.push(user_text(
                    "Your answer was cut off at the output limit; continue exactly where it stopped."
                        .into(),
                ));
                Step::Ask
            }
            (true, false) => Step::Answered(std::mem::take(&mut state.cut_off) + &text.join("\n")),
            (false, _) => Step::Call(calls),
        }
    }

    /// The model says it is done: with `--until`, only once the check passes.
    async fn answered(&mut self, state: &mut RunState, summary: String) -> Step {
        let Some(goal) = state.goal.as_mut() else {
            return Step::End(Ending::Success(summary));
        };
        goal.iterations += 1;
        let (receipt, output) = run_check(self.sandbox, &goal.check, &self.stop).await;
        let passed = receipt.ok;
        self.observer.event(Event::GoalEvaluated {
            check: goal.check.clone(),
            passed,
            iteration: goal.iterations,
            exit_code: receipt.exit_code,
        });
        let brief = receipt.brief.clone();
        state.receipts.push(receipt);
        if passed {
            goal.passed = true;
            goal.halt = Halt::Passed;
            return Step::End(Ending::Success(summary));
        }
        let nudge = format!(
            "The check `{}` does not pass yet ({brief}). Its output:\n{output}\nKeep working until it passes.",
            goal.check
        );
        state.messages.push(user_text(nudge));
        Step::Ask
    }

    /// Runs the calls through the registry, each leaving a receipt; their results go back to
    /// the model as one message.
    async fn call_tools(&mut self, state: &mut RunState, calls: Vec<ToolCall>) {
        let mut results = Vec::new();
        for ToolCall { id, name, input } in calls {
            self.observer.event(Event::ToolCalled {
                id: id.clone(),
                tool: name.clone(),
                input: input.clone(),
            });
            let (receipt, content) = self.call_tool(&name, input).await;
            self.observer.event(Event::ToolEnded {
                id: id.clone(),
                tool: receipt.tool.clone(),
                ok: receipt.ok,
                exit_code: receipt.exit_code,
                duration_ms: receipt.duration_ms,
                brief: receipt.brief.clone(),
            });
            results.push(Block::ToolResult {
                id,
                content: truncate(&content, 64 * 1024),
                is_error: !receipt.ok,
            });
            state.receipts.push(receipt);
        }
        state.messages.push(Message {
            role: Role::User,
            blocks: results,
        });
    }

    /// One call, through the dispatcher like every other: its receipt and what the model sees.
    async fn call_tool(&self, name: &str, input: Value) -> (Receipt, String) {
        let subject = subject_of(name, &input);
        let called = Instant::now();
        let options = CallOptions {
            cancel: self.stop.child_token(),
            ..CallOptions::default()
        };
        let outcome = self.runtime.call(name, input, self.context, options).await;
        let (ok, exit_code, content, execution_id) = match outcome {
            Ok(outcome) => match outcome.result {
                Ok(value) => {
                    let exit = value.get("exit_code").map(|c| c.as_i64().map(|c| c as i32));
                    let ok = exit.is_none_or(|code| code == Some(0));
                    let text = match value {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (ok, exit.flatten(), text, outcome.execution_id)
                }
                Err(error) => (
                    false,
                    None,
                    format!("error ({}): {error}", error.code()),
                    outcome.execution_id,
                ),
            },
            Err(e) => (false, None, format!("error: {e}"), String::new()),
        };
        let receipt = Receipt {
            tool: name.to_string(),
            ok,
            exit_code,
            duration_ms: called.elapsed().as_millis() as u64,
            brief: truncate(&brief_of(&content, exit_code), BRIEF_MAX),
            digest: digest(&content),
            execution_id,
            subject,
        };
        (receipt, content)
    }

    /// Says how the run ended and writes its document; a success first saves the fix it
    /// found, if any.
    async fn end(mut self, state: RunState, ending: Ending) -> Document {
        let (status, summary, failure, halt) = match ending {
            Ending::Success(summary) => (RunStatus::Success, Some(summary), None, None),
            Ending::MaxTurns(summary) => (
                RunStatus::MaxTurns,
                Some(summary),
                None,
                Some(Halt::MaxTurns),
            ),
            Ending::Failed(failure, halt) => (RunStatus::Error, None, Some(failure), Some(halt)),
        };
        match &failure {
            Some(failure) => self.observer.event(Event::Failed {
                error: failure.kind,
                message: failure.message.clone(),
            }),
            None => self.observer.event(Event::Completed {
                status,
                summary: summary.clone().unwrap_or_default(),
                turns: state.turns,
            }),
        }
        if status == RunStatus::Success {
            self.remember_fix(&state.receipts).await;
        }
        let goal = state.goal.clone().map(|g| match halt {
            Some(halt) if !g.passed => Goal { halt, ..g },
            _ => g,
        });
        let ungrounded = summary
            .as_deref()
            .map(|s| claims::ungrounded(s, &state.receipts));
        let (error, message, suggestions) = match failure {
            Some(f) => (Some(f.kind), Some(f.message), f.suggestions),
            None => (None, None, Vec::new()),
        };
        Document {
            schema: SCHEMA,
            run_id: self.task.run_id.clone(),
            status,
            summary: summary.map(|s| truncate(&s, SUMMARY_MAX)),
            error,
            message,
            turns: state.turns,
            delegations: 0,
            model_used: self.model.name().to_string(),
            provider: self.model.provider().as_str(),
            tokens: state.tokens,
            receipts: Receipts::of(&state.receipts),
            ungrounded_claims: ungrounded,
            sandbox: Some(self.sandbox.clone()),
            elapsed_seconds: (self.started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
            suggestions,
            goal,
        }
    }

    /// A command that failed and later passed: what was done in between, saved as a procedure.
    async fn remember_fix(&mut self, receipts: &[Receipt]) {
        let Some((subject, body)) = learned_fix(receipts) else {
            return;
        };
        let saved = self
            .runtime
            .call(
                "memory_save_procedural",
                json!({"subject": subject, "body": body,
                       "tags": ["car-do", "fix"], "confidence": "derived"}),
                self.context,
                CallOptions::default(),
            )
            .await;
        if let Ok(outcome) = saved {
            self.observer.event(Event::Remembered {
                subject,
                execution_id: outcome.execution_id,
            });
        }
    }
}

fn user_text(text: String) -> Message {
    Message {
        role: Role::User,
        blocks: vec![Block::Text(text)],
    }
}

/// `sha256:` of what the model saw.
fn digest(content: &str) -> String {
    format!("sha256:{:x}", sha2::Sha256::digest(content.as_bytes()))
}

/// A command that failed and passed later in the run, with what was done in between: the
/// procedure to remember (subject, body), its evidence the receipts' execution ids.
fn learned_fix(receipts: &[Receipt]) -> Option<(String, String)> {
    let is_command = |r: &Receipt| r.tool == "Bash" || r.tool == "until";
    for (i, failed) in receipts.iter().enumerate() {
        if !is_command(failed)
            || failed.ok
            || failed.exit_code.is_none()
            || failed.subject.is_empty()
        {
            continue;
        }
        let Some(offset) = receipts[i + 1..]
            .iter()
            .position(|r| is_command(r) && r.ok && r.subject == failed.subject)
        else {
            continue;
        };
        let fixed = &receipts[i + 1 + offset];
        let steps: Vec<String> = receipts[i + 1..i + 1 + offset]
            .iter()
            .filter(|r| r.ok && r.tool != "Read" && r.tool != "Glob" && r.tool != "Grep")
            .map(|r| format!("{} {}", r.tool, r.subject).trim().to_string())
            .collect();
        if steps.is_empty() {
            continue;
        }
        let subject = format!("fixing `{}`", truncate(&failed.subject, 120));
        let id = |r: &Receipt| {
            if r.execution_id.is_empty() {
                "-".to_string()
            } else {
                r.execution_id.clone()
            }
        };
        let body = format!(
            "`{}` failed ({}); after {} it passed. Evidence: executions {} (failed) and {} (passed).",
            failed.subject,
            failed.brief,
            steps.join(", then "),
            id(failed),
            id(fixed),
        );
        return Some((subject, body));
    }
    None
}

/// How long one `--until` check may run.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// Runs the `--until` check in the sandbox: its receipt (tool `until`) and the end of what it
/// printed (for the model).
async fn run_check(
    sandbox: &Sandbox,
    check: &str,
    stop: &tokio_util::sync::CancellationToken,
) -> (Receipt, String) {
    let started = Instant::now();
    let ended = sandbox.run(check, &sandbox.root, CHECK_TIMEOUT, stop).await;
    let (exit_code, content, printed) = match ended {
        Ok(sandbox::Ended::Exited(out)) => {
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            let printed = format!("{stdout}{stderr}");
            let tail: String = {
                let chars: Vec<char> = printed.chars().collect();
                chars[chars.len().saturating_sub(4000)..].iter().collect()
            };
            (
                out.status.code(),
                json!({"exit_code": out.status.code(), "stdout": stdout, "stderr": stderr}).to_string(),
                tail,
            )
        }
        Err(e) => (None, json!({"exit_code": null, "stderr": e.to_string()}).to_string(), e.to_string()),
        Ok(sandbox::Ended::TimedOut | sandbox::Ended::Cancelled) => (
            None,
            json!({"exit_code": null, "stderr": "stopped (timeout or interrupt)", "timed_out": true}).to_string(),
            "the check was stopped before it finished".to_string(),
        ),
    };
    let receipt = Receipt {
        tool: "until".into(),
        ok: exit_code == Some(0),
        exit_code,
        duration_ms: started.elapsed().as_millis() as u64,
        brief: truncate(&brief_of(&content, exit_code), BRIEF_MAX),
        digest: digest(&content),
        execution_id: String::new(),
        subject: check.to_string(),
    };
    (receipt, printed)
}

/// A receipt's one line: for a command, its exit code and the first line it printed (stderr
/// first when it failed); otherwise the output flattened.
fn brief_of(content: &str, exit_code: Option<i32>) -> String {
    let ran: Option<tools::Ran> = serde_json::from_str::<Value>(content)
        .ok()
        .filter(|v| v.get("exit_code").is_some())
        .map(|v| tools::Ran {
            exit_code: v["exit_code"].as_i64().map(|c| c as i32),
            stdout: v["stdout"].as_str().unwrap_or("").to_string(),
            stderr: v["stderr"].as_str().unwrap_or("").to_string(),
            timed_out: v["timed_out"] == true,
        });
    match ran {
        Some(ran) => {
            let first = |t: &str| {
                t.lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string()
            };
            let line = if exit_code == Some(0) || ran.stderr.trim().is_empty() {
                first(&ran.stdout)
            } else {
                ran.stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string()
            };
            match ran.exit_code {
                Some(code) => format!("exit {code}: {line}"),
                None if ran.timed_out => format!("timed out: {line}"),
                None => format!("killed: {line}"),
            }
        }
        None => content.replace('\n', " "),
    }
}

fn model_failure(error: &ModelError) -> Failure {
    let suggestions = match error {
        ModelError::NoKey { env, .. } => vec![format!("export {env}=… (or point --base-url at a local OpenAI-compatible server such as Ollama)")],
        ModelError::Unreachable { .. } => vec!["check --base-url and that the model server is running".into()],
        ModelError::Refused { status: 401 | 403, .. } => vec!["check the API key".into()],
        ModelError::Refused { status: 404, .. } => vec!["check --model: the server does not know it".into()],
        _ => vec![],
    };
    Failure {
        kind: FailureKind::AssistantLoopFailed,
        message: error.to_string(),
        suggestions,
    }
}

/// What a call acted on, for the claim check: a command, or a path.
fn subject_of(tool: &str, input: &Value) -> String {
    let field = match tool {
        "Bash" => "command",
        "Read" | "Write" | "Edit" => "file_path",
        _ => "path",
    };
    input
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `text` cut to `max` bytes with the contract's marker.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let marker_room = 60.min(max / 2);
    let mut end = max - marker_room;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}…[truncated: {end} of {} bytes shown]…",
        &text[..end],
        text.len()
    )
}
