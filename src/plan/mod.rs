//! Plans: the ActionProposal IR an agent writes before acting, its dependency graph, and the
//! four read-only checks served as tools — `verify` (static checks against the tool registry),
//! `simulate` (run the declared effects over a state), `equivalent` (compare two proposals on
//! sample states) and `optimize` (drop dependencies on keys nothing writes). Nothing here runs
//! a tool or writes anything; it reasons over what the proposal declares.

mod dag;
mod ir;
mod optimize;
mod simulate;
mod tools;
mod verify;

pub use ir::{
    Action, ActionProposal, ActionType, Compensation, FailureBehavior, Operator, Precondition,
    Reversibility,
};
pub use optimize::{optimize, Optimized, Pruned};
pub use simulate::{equivalent, simulate, Divergence, Equivalence, Simulation, Skipped};
pub(crate) use tools::tools;
pub use verify::{verify, Issue, Severity, Tier, ToolCatalog, Verification, VerifyOptions};

use crate::runtime::ToolError;

/// Why a plan request could not be answered (as opposed to a proposal that has issues).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("`{field}` is not a valid action proposal: {message}")]
    InvalidProposal { field: String, message: String },
    #[error("`{field}` is not valid: {message}")]
    InvalidArgument { field: String, message: String },
}

/// The plan module's result.
pub type Result<T> = std::result::Result<T, PlanError>;

impl From<PlanError> for ToolError {
    fn from(err: PlanError) -> Self {
        match err {
            PlanError::InvalidProposal { .. } | PlanError::InvalidArgument { .. } => {
                ToolError::InvalidArguments(err.to_string())
            }
        }
    }
}
