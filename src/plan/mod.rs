//! Plans: the ActionProposal IR an agent writes before acting, its dependency graph, and the
//! four read-only checks served as tools — `verify` (static checks against the tool registry),
//! `simulate` (run the declared effects over a state), `equivalent` (compare two proposals on
//! sample states) and `optimize` (drop dependencies on keys nothing writes) — and the executor
//! that runs a verified plan ([`execute`]), calling its tools through whatever [`Runner`] the
//! face supplies (the daemon's WebSocket: CAR's registry and the client's callbacks).

mod dag;
mod execute;
mod ir;
mod optimize;
mod simulate;
mod tools;
pub use tools::{EquivalentArgs, OptimizeArgs, SimulateArgs, VerifyArgs};
mod verify;

pub use execute::{execute, ActionError, ActionOutcome, ActionStatus, Cost, Runner};
pub use ir::{
    Action, ActionProposal, ActionType, Compensation, FailureBehavior, Operator, Precondition,
    Reversibility,
};
pub use optimize::{optimize, Optimized, Pruned};
pub use simulate::{equivalent, simulate, Divergence, Equivalence, Simulation, Skipped};
pub(crate) use tools::tools;
pub use verify::{verify, Issue, Severity, Tier, ToolCatalog, Verification, VerifyOptions};
