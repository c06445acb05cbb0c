//! Work a tool starts that goes on after its call has answered (a `car do` run on the daemon).
//! A face that can hand its client a handle to follow such work — MCP's tasks extension — asks
//! here where it stands. The runtime names no capability: a tool declares the jobs it starts
//! with [`crate::runtime::Tool::with_jobs`].

use std::time::Duration;

use serde_json::Value;

/// The jobs one tool starts.
pub trait Jobs: Send + Sync {
    /// The job a successful call started, read from the call's result.
    fn started(&self, result: &Value) -> Option<String>;
    /// Where job `id` stands; `None` when there is no such job (never started, or forgotten).
    fn state(&self, id: &str) -> Option<JobState>;
    /// Asks job `id` to stop (it stops at its next safe point); false when there is no such job.
    fn cancel(&self, id: &str) -> bool;
}

/// Where a job stands.
#[derive(Debug, Clone)]
pub struct JobState {
    pub status: JobStatus,
    /// What it is doing now, or how it ended, in a line.
    pub message: Option<String>,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
    /// How long it is kept when nobody asks after it.
    pub ttl: Duration,
}

/// A job's status.
#[derive(Debug, Clone)]
pub enum JobStatus {
    Working,
    /// Finished with `result` (what the tool would have answered had it waited); `failed`
    /// when that result reports a failure.
    Done {
        result: Value,
        failed: bool,
    },
    /// Stopped because it was asked to.
    Cancelled,
}
