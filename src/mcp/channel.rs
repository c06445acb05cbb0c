//! The way back from a running tool to its MCP client: progress notifications (when the request
//! carried a progress token), log messages at or above the session's level, and the client
//! requests a tool may send (`sampling/createMessage`, `elicitation/create`), each only when the
//! client declared the capability.
// SEP-2577 deprecates logging; the revisions CAR serves still have it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use rmcp::model::{
    ClientResult, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, ServerRequest,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::{json, Value};

use crate::runtime::{ChannelFuture, ClientChannel, ClientRequest, LogLevel, ToolError};

/// The lowest level a session forwards: what the client set with `logging/setLevel`, `info`
/// until it sets one.
#[derive(Debug, Clone)]
pub(crate) struct SessionLevel(Arc<AtomicU8>);

impl Default for SessionLevel {
    fn default() -> Self {
        SessionLevel(Arc::new(AtomicU8::new(LogLevel::Info as u8)))
    }
}

impl SessionLevel {
    pub(crate) fn set(&self, level: LogLevel) {
        self.0.store(level as u8, Ordering::Relaxed);
    }

    fn admits(&self, level: LogLevel) -> bool {
        level as u8 >= self.0.load(Ordering::Relaxed)
    }
}

pub(crate) fn from_mcp_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

fn to_mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// One call's channel to its client.
pub(crate) struct McpChannel {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) progress_token: Option<ProgressToken>,
    pub(crate) level: SessionLevel,
    /// The tool's name, sent as the logger of its messages.
    pub(crate) tool: String,
}

impl McpChannel {
    fn declared(&self, kind: ClientRequest) -> bool {
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        match kind {
            ClientRequest::Sampling => info.capabilities.sampling.is_some(),
            ClientRequest::Elicitation => info.capabilities.elicitation.is_some(),
        }
    }
}

impl ClientChannel for McpChannel {
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> ChannelFuture<'_, ()> {
        Box::pin(async move {
            let Some(token) = self.progress_token.clone() else {
                return;
            };
            let mut param = ProgressNotificationParam::new(token, progress);
            param.total = total;
            param.message = message;
            // A client that went away is noticed by the call's cancellation, not here.
            let _ = self.peer.notify_progress(param).await;
        })
    }

    fn log(&self, level: LogLevel, data: Value) -> ChannelFuture<'_, ()> {
        Box::pin(async move {
            if !self.level.admits(level) {
                return;
            }
            let mut param = LoggingMessageNotificationParam::new(to_mcp_level(level), data);
            param.logger = Some(self.tool.clone());
            #[allow(deprecated)]
            let _ = self.peer.notify_logging_message(param).await;
        })
    }

    fn request(
        &self,
        kind: ClientRequest,
        params: Value,
    ) -> ChannelFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            if !self.declared(kind) {
                return Err(ToolError::Failed(format!(
                    "the client did not declare the {} capability, so this tool cannot ask it",
                    kind.as_str()
                )));
            }
            let method = match kind {
                ClientRequest::Sampling => "sampling/createMessage",
                ClientRequest::Elicitation => "elicitation/create",
            };
            let request: ServerRequest = serde_json::from_value(
                json!({"method": method, "params": params}),
            )
            .map_err(|e| ToolError::Failed(format!("cannot build the {method} request: {e}")))?;
            let answer: ClientResult = self
                .peer
                .send_request(request)
                .await
                .map_err(|e| ToolError::Failed(format!("the client's {method} failed: {e}")))?;
            serde_json::to_value(answer).map_err(|e| ToolError::Failed(e.to_string()))
        })
    }
}
