//! What a run reports as it goes ([`Event`]) and how it ends ([`RunStatus`], [`FailureKind`],
//! [`Halt`]): typed here, written on the wire as `{type, phase, message, data}` (stderr's JSONL
//! with `car do --json`, `assistant_poll`'s events).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use super::truncate;

/// The longest text an event carries (bytes).
const EVENT_TEXT_MAX: usize = 500;

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The run began: its model and how many tools it has.
    Started {
        model: String,
        provider: &'static str,
        /// The sandbox's mode.
        sandbox: &'static str,
        tools: usize,
    },
    /// A run went on from its checkpoint.
    Resumed {
        run_id: String,
        turns: u32,
    },
    /// The model's text in a turn (its first 500 bytes).
    Said {
        turn: u32,
        text: String,
    },
    ToolCalled {
        id: String,
        tool: String,
        input: Value,
    },
    /// A tool call ended; `brief` is its receipt's one line.
    ToolEnded {
        id: String,
        tool: String,
        ok: bool,
        exit_code: Option<i32>,
        duration_ms: u64,
        brief: String,
    },
    /// The `--until` check ran.
    GoalEvaluated {
        check: String,
        passed: bool,
        iteration: u32,
        exit_code: Option<i32>,
    },
    /// A fix the run found was saved to memory.
    Remembered {
        subject: String,
        execution_id: String,
    },
    /// The run ended with an answer (`Success`) or out of turns (`MaxTurns`).
    Completed {
        status: RunStatus,
        summary: String,
        turns: u32,
    },
    Failed {
        error: FailureKind,
        message: String,
    },
}

impl Event {
    pub fn said(turn: u32, text: &str) -> Event {
        Event::Said {
            turn,
            text: truncate(text, EVENT_TEXT_MAX),
        }
    }

    /// Its `type` on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::Resumed { .. } | Event::Said { .. } | Event::Remembered { .. } => "text",
            Event::ToolCalled { .. } => "tool_called",
            Event::ToolEnded { ok: true, .. } => "tool_result",
            Event::ToolEnded { ok: false, .. } => "tool_failed",
            Event::GoalEvaluated { .. } => "goal_evaluated",
            Event::Completed { .. } => "completed",
            Event::Failed { .. } => "failed",
        }
    }

    /// Where in the run it happened.
    pub fn phase(&self) -> &'static str {
        match self {
            Event::Started { .. } | Event::Resumed { .. } => "start",
            Event::Said { .. } => "turn",
            Event::ToolCalled { .. } | Event::ToolEnded { .. } => "tool",
            Event::GoalEvaluated { .. } => "goal",
            Event::Remembered { .. } => "memory",
            Event::Completed { .. } | Event::Failed { .. } => "end",
        }
    }

    /// One line for a person.
    pub fn message(&self) -> String {
        match self {
            Event::Started { model, tools, .. } => format!("{model} with {tools} tools"),
            Event::Resumed { run_id, turns } => {
                format!("[resumed: run {run_id} after turn {turns}]")
            }
            Event::Said { text, .. } => text.clone(),
            Event::ToolCalled { tool, .. } => tool.clone(),
            Event::ToolEnded { tool, brief, .. } => format!("{tool} {brief}"),
            Event::GoalEvaluated { check, passed, .. } => {
                format!("{check} → {}", if *passed { "passed" } else { "not yet" })
            }
            Event::Remembered { subject, .. } => format!("[remembered: {subject}]"),
            Event::Completed { summary, .. } => truncate(summary, EVENT_TEXT_MAX),
            Event::Failed { message, .. } => message.clone(),
        }
    }

    /// Its fields on the wire.
    pub fn data(&self) -> Value {
        match self {
            Event::Started {
                model,
                provider,
                sandbox,
                ..
            } => json!({"model": model, "provider": provider, "sandbox": sandbox}),
            Event::Resumed { run_id, turns } => json!({"run_id": run_id, "turns": turns}),
            Event::Said { turn, .. } => json!({"turn": turn}),
            Event::ToolCalled { id, input, .. } => json!({"id": id, "input": input}),
            Event::ToolEnded {
                id,
                ok,
                exit_code,
                duration_ms,
                ..
            } => json!({"id": id, "ok": ok, "exit_code": exit_code, "duration_ms": duration_ms}),
            Event::GoalEvaluated {
                check,
                passed,
                iteration,
                exit_code,
            } => json!({"check": check, "passed": passed, "iteration": iteration,
                        "exit_code": exit_code}),
            Event::Remembered { execution_id, .. } => json!({"execution_id": execution_id}),
            Event::Completed { status, turns, .. } => json!({"status": status, "turns": turns}),
            Event::Failed { error, .. } => json!({"error": error}),
        }
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("type", self.kind())?;
        map.serialize_entry("phase", self.phase())?;
        map.serialize_entry("message", &self.message())?;
        map.serialize_entry("data", &self.data())?;
        map.end()
    }
}

/// How a run ended (the `car.do/1` document's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Success,
    MaxTurns,
    Error,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::MaxTurns => "max_turns",
            RunStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong in a run that ended in error (the document's `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum FailureKind {
    /// The run was asked for with arguments it cannot take.
    InvalidArguments,
    /// No sandbox could isolate the run's commands.
    SandboxUnavailable,
    /// The model could not be reached or answered wrongly, or the run broke.
    AssistantLoopFailed,
    /// Stopped by the user or `assistant_cancel`.
    Interrupted,
    TokenBudgetExhausted,
}

/// Why a run with `--until` stopped (the `goal` block's `halt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Halt {
    /// Not stopped yet (a checkpoint's).
    Running,
    Passed,
    MaxTurns,
    Budget,
    Interrupted,
    Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_keep_their_wire_shape() {
        let ended = Event::ToolEnded {
            id: "t1".into(),
            tool: "Bash".into(),
            ok: false,
            exit_code: Some(1),
            duration_ms: 12,
            brief: "exit 1: boom".into(),
        };
        assert_eq!(
            serde_json::to_value(&ended).unwrap(),
            json!({"type": "tool_failed", "phase": "tool", "message": "Bash exit 1: boom",
                   "data": {"id": "t1", "ok": false, "exit_code": 1, "duration_ms": 12}})
        );
        let failed = Event::Failed {
            error: FailureKind::TokenBudgetExhausted,
            message: "out".into(),
        };
        assert_eq!(
            serde_json::to_value(&failed).unwrap()["data"],
            json!({"error": "TokenBudgetExhausted"})
        );
        let done = Event::Completed {
            status: RunStatus::MaxTurns,
            summary: "x".repeat(2000),
            turns: 3,
        };
        let wire = serde_json::to_value(&done).unwrap();
        assert_eq!(wire["data"], json!({"status": "max_turns", "turns": 3}));
        assert!(wire["message"].as_str().unwrap().len() < 600);
        assert!(Event::said(1, &"y".repeat(900)).message().len() < 600);
    }
}
