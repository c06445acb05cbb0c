//! Why a tool call did not produce a result: one error type for every tool and every face.

/// Why a call did not produce a result. Each becomes an `isError` result with a code.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("tool '{0}' needs confirmation: the host must grant 'confirm:{0}' for this connection (for car-mcp, add it to CAR_CONFIRM)")]
    ConfirmationRequired(String),
    #[error("denied by policy: {0}")]
    Denied(String),
    #[error("a call with request id '{0}' is still running; retry when it has finished")]
    InProgress(String),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("the call did not finish within {0} s and was stopped")]
    Timeout(u64),
    #[error("{0}")]
    Failed(String),
    /// The tool failed and gives its own account, returned to the client as is: a connector's
    /// remote error content, a project action's failure envelope. `code` is the envelope's.
    #[error("{text}")]
    Reported { code: &'static str, text: String },
}

impl ToolError {
    /// A stable machine-readable code for the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::NotFound(_) => "not_found",
            ToolError::ConfirmationRequired(_) => "confirmation_required",
            ToolError::Denied(_) => "denied",
            ToolError::InProgress(_) => "in_progress",
            ToolError::Cancelled => "cancelled",
            ToolError::Timeout(_) => "timeout",
            ToolError::Failed(_) => "failed",
            ToolError::Reported { code, .. } => code,
        }
    }
}
