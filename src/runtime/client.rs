//! The client of a call, as a running tool may reach it: report progress, send log messages,
//! and ask it to sample a model or to elicit input from its user. A face that can carry these
//! (MCP over stdio or HTTP) supplies a [`ClientChannel`]; where none is (the CLI, a plan step),
//! progress and logs go nowhere and requests fail with a message saying so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::error::ToolError;

/// A boxed future of a channel method.
pub type ChannelFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The severity of a log message (RFC 5424's levels, as MCP names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// A request a tool sends its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRequest {
    /// `sampling/createMessage`: the client's model answers.
    Sampling,
    /// `elicitation/create`: the client's user answers a form.
    Elicitation,
}

impl ClientRequest {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientRequest::Sampling => "sampling",
            ClientRequest::Elicitation => "elicitation",
        }
    }
}

/// What a face provides to reach the client of one call.
pub trait ClientChannel: Send + Sync {
    /// Reports progress (only when the client asked for it, e.g. with an MCP progress token).
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> ChannelFuture<'_, ()>;
    /// Sends a log message (dropped below the level the client set).
    fn log(&self, level: LogLevel, data: Value) -> ChannelFuture<'_, ()>;
    /// Sends a request and waits for the answer. `params` are the request's MCP parameters.
    fn request(
        &self,
        kind: ClientRequest,
        params: Value,
    ) -> ChannelFuture<'_, Result<Value, ToolError>>;
}

/// The client of a call; empty when the face has no way back to it.
#[derive(Clone, Default)]
pub struct Client(Option<Arc<dyn ClientChannel>>);

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Client")
            .field(&if self.0.is_some() {
                "connected"
            } else {
                "none"
            })
            .finish()
    }
}

impl Client {
    pub fn new(channel: Arc<dyn ClientChannel>) -> Client {
        Client(Some(channel))
    }

    /// No client to reach.
    pub fn none() -> Client {
        Client(None)
    }

    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(channel) = &self.0 {
            channel.progress(progress, total, message).await;
        }
    }

    pub async fn log(&self, level: LogLevel, data: Value) {
        if let Some(channel) = &self.0 {
            channel.log(level, data).await;
        }
    }

    /// Asks the client's model (`sampling/createMessage` with `params`).
    pub async fn sample(&self, params: Value) -> Result<Value, ToolError> {
        self.request(ClientRequest::Sampling, params).await
    }

    /// Asks the client's user (`elicitation/create` with `params`).
    pub async fn elicit(&self, params: Value) -> Result<Value, ToolError> {
        self.request(ClientRequest::Elicitation, params).await
    }

    async fn request(&self, kind: ClientRequest, params: Value) -> Result<Value, ToolError> {
        match &self.0 {
            Some(channel) => channel.request(kind, params).await,
            None => Err(ToolError::Failed(format!(
                "this tool needs a client that answers {} requests; it was called from a face that has none (call it over MCP)",
                kind.as_str()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_channel_progress_is_dropped_and_requests_say_why_they_fail() {
        let client = Client::none();
        client.progress(1.0, Some(2.0), None).await;
        client.log(LogLevel::Info, Value::Null).await;
        let err = client.sample(serde_json::json!({})).await.unwrap_err();
        assert!(err.to_string().contains("sampling"), "{err}");
    }
}
