//! CAR, the Common Agent Runtime: one registry of tools behind a dispatcher (validation, policy,
//! confirmation, execution log), durable graph memory, and faces that serve it — the `car`
//! CLI and the `car-mcp` stdio MCP server.
//!
//! Embedding:
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! use car::{App, Context, Face, McpServer};
//! let app = App::builder().build()?;
//! McpServer::new(app).context(Context::new(Face::Mcp)).serve_stdio().await?;
//! # Ok(()) }
//! ```

pub mod agent;
mod app;
pub mod cli;
pub mod connectors;
pub mod console;
pub mod eval;
mod home;
pub mod hooks;
pub mod logging;
pub mod mcp;
mod memory;
pub mod multicall;
mod output;
mod plan;
mod policy;
mod project;
mod runtime;
pub mod secrets;
pub mod server;
pub mod setup;
mod skills;
mod store;
pub mod team;

pub use app::{App, AppBuilder, AppError};
pub use home::{confirm_grants_from_env, env, project_root, Home, HomeError};
pub use mcp::{McpExtension, McpServer};
pub use memory::{
    AssembledContext, ContextMode, ContextRequest, Deleted as DeletedEntry, EntryScope, EntryView,
    EvaluationCase, InterveneRequest, Intervention, Kind, Memory, MemoryError, NewEntry, Note,
    QueryHit, Recall, StatusSlot, Trigger, Written, MIN_GROUNDING, OUTDATED_MARK,
};
pub use output::{failure as envelope_failure, success as envelope_success};
pub use plan::{
    Action, ActionProposal, ActionType, Compensation, Divergence, Equivalence, FailureBehavior,
    Issue, Operator, Optimized, Precondition, Pruned, Reversibility, Severity, Simulation, Skipped,
    Tier, Verification,
};
#[cfg(feature = "shell-parser-bench")]
#[doc(hidden)]
pub use policy::shell_simple_commands;
pub use policy::{
    Admission, Basis, Decision, Evaluation, Finding, LoadFailure, PolicyEngine,
    Severity as FindingSeverity, Source as FindingSource,
};
pub use project::decisions::NewDecision;
pub use project::tasks::{Filter as TaskFilter, NewTask, Priority, Task, TaskStatus, TaskUpdate};
pub use project::{Project, ProjectError};
pub use runtime::{
    AllowAll, BuildError, CallOptions, CallOutcome, ChannelFuture, Client, ClientChannel,
    ClientRequest, Confirmation, Context, DispatchError, Dispatcher, Effect, ExecStatus, Face,
    Gating, Idempotence, LogLevel, Parallelism, PolicyGate, PolicyVerdict, Registry, Runtime,
    RuntimeBuilder, Tool, ToolCall, ToolError, ToolSource, ToolSpec, Tools, MAX_STRING_BYTES,
};
pub use skills::{
    Change as SkillChange, FindQuery as SkillQuery, Ingested as SkillIngested, Match as SkillMatch,
    NewSkill, Outcome as SkillOutcome, Ranked as RankedSkill, Skill, SkillError, SkillFile, Skills,
    Stats as SkillStats,
};
pub use store::{Store, StoreError};
