//! The MCP client side: one session with a connector's server over streamable HTTP or a child
//! process's stdio, built on rmcp's client. Discovery reads every page of `tools/list`; calls
//! forward cancellation (dropping a call's future sends `notifications/cancelled`).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use super::config::{Connector, Endpoint, RemoteTool};
use super::ConnectorError;

/// Secret values resolved for one connection (from the keychain), never stored on disk.
#[derive(Default)]
pub struct Resolved {
    pub headers: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// An OAuth client whose tokens authorize the HTTP requests.
    pub auth: Option<rmcp::transport::auth::AuthClient<reqwest::Client>>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &Vec<(String, String)>| -> Vec<String> {
            pairs.iter().map(|(k, _)| k.clone()).collect()
        };
        f.debug_struct("Resolved")
            .field("headers", &names(&self.headers))
            .field("env", &names(&self.env))
            .field("oauth", &self.auth.is_some())
            .finish()
    }
}

/// How CAR introduces itself to the servers it connects to.
pub(crate) fn client_info() -> ClientConfig {
    serde_json::from_value(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "car", "title": "CAR", "version": env!("CARGO_PKG_VERSION")}
    }))
    .unwrap_or_default()
}

/// An open session with one connector's server.
pub struct Session {
    service: RunningService<RoleClient, ClientConfig>,
    /// The last lines a stdio server wrote to stderr (for error messages).
    stderr: Arc<Mutex<VecDeque<String>>>,
}

const STDERR_LINES: usize = 20;

impl Session {
    /// Connects and completes the MCP handshake.
    pub async fn connect(
        connector: &Connector,
        secrets: Resolved,
    ) -> Result<Session, ConnectorError> {
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let started = match &connector.endpoint {
            Endpoint::Http { url, .. } => {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                match secrets.auth {
                    Some(auth) => {
                        let transport = StreamableHttpClientTransport::with_client(auth, config);
                        client_info().serve(transport).await
                    }
                    None => {
                        let client = http_client(&secrets.headers)?;
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        client_info().serve(transport).await
                    }
                }
            }
            Endpoint::Stdio { command, args, .. } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                for (key, value) in &secrets.env {
                    cmd.env(key, value);
                }
                let (process, child_stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| ConnectorError::Connect {
                        slug: connector.slug.clone(),
                        message: format!("cannot start `{command}`: {e}"),
                    })?;
                if let Some(child_stderr) = child_stderr {
                    let tail = stderr.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(child_stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(target: "car::connectors", "{line}");
                            let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                            if tail.len() == STDERR_LINES {
                                tail.pop_front();
                            }
                            tail.push_back(line);
                        }
                    });
                }
                client_info().serve(process).await
            }
        };
        match started {
            Ok(service) => Ok(Session { service, stderr }),
            Err(err) => {
                if let Some(challenge) = err.auth_challenge() {
                    return Err(super::oauth::challenge_error(
                        &connector.slug,
                        &connector.endpoint.target(),
                        challenge,
                    ));
                }
                // Give a stdio server's last words a moment to arrive.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Err(ConnectorError::Connect {
                    slug: connector.slug.clone(),
                    message: with_tail(describe_init(&err), &stderr),
                })
            }
        }
    }

    /// Every tool the server offers, all pages.
    pub async fn list_tools(&self) -> Result<Vec<RemoteTool>, ServiceError> {
        let tools = self.service.peer().list_all_tools().await?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let value = serde_json::to_value(&tool).unwrap_or(Value::Null);
                let input_schema = match value.get("inputSchema") {
                    Some(schema @ Value::Object(map)) if map.contains_key("type") => schema.clone(),
                    Some(Value::Object(map)) => {
                        let mut schema = map.clone();
                        schema.insert("type".into(), json!("object"));
                        Value::Object(schema)
                    }
                    _ => json!({"type": "object"}),
                };
                RemoteTool {
                    name: tool.name.to_string(),
                    title: tool.title.clone(),
                    description: tool.description.as_deref().unwrap_or_default().to_string(),
                    input_schema,
                    annotations: value.get("annotations").cloned().unwrap_or(Value::Null),
                }
            })
            .collect())
    }

    /// Calls one tool; the result is the server's `CallToolResult` as JSON.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, ServiceError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let result = self.service.peer().call_tool(params).await?;
        Ok(serde_json::to_value(&result).unwrap_or(Value::Null))
    }

    /// The server's name and version, as it introduced itself.
    pub fn server(&self) -> Option<super::outcome::ServerInfo> {
        let info = self.service.peer().peer_info()?;
        Some(super::outcome::ServerInfo {
            name: info.server_info.as_ref().map(|i| i.name.clone()),
            version: info.server_info.as_ref().map(|i| i.version.clone()),
            protocol_version: Some(info.protocol_version.to_string()),
        })
    }

    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// The last lines a stdio server wrote to stderr, if any.
    pub fn stderr_tail(&self) -> String {
        tail_text(&self.stderr)
    }

    /// Ends the session (a stdio server's process is stopped).
    pub async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(std::time::Duration::from_secs(2))
            .await;
    }
}

/// A reqwest client that sends the connector's headers on every request.
fn http_client(headers: &[(String, String)]) -> Result<reqwest::Client, ConnectorError> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ConnectorError::Invalid(format!("'{name}' is not a valid HTTP header name"))
        })?;
        let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
            ConnectorError::Invalid(format!(
                "the value of header '{name}' has characters HTTP does not allow"
            ))
        })?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    reqwest::Client::builder()
        .default_headers(map)
        .build()
        .map_err(|e| ConnectorError::Io(format!("cannot build the HTTP client: {e}")))
}

/// What went wrong in a failed handshake, in a user's words: rmcp's transport errors wrap the
/// cause (connection refused, DNS, TLS) several layers deep.
fn describe_init(err: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match err {
        E::TransportError { error, .. } => {
            // rmcp's transport errors display only their outer layer ("error sending request");
            // the cause (refused, DNS, TLS, timeout) is in the debug form of the inner error.
            let detail = format!("{error:?}");
            let cause = [
                ("ConnectionRefused", "the connection was refused"),
                ("dns error", "the host name does not resolve"),
                ("failed to lookup address", "the host name does not resolve"),
                (
                    "certificate",
                    "the server's TLS certificate was not accepted",
                ),
                ("TimedOut", "the connection timed out"),
                ("HostUnreachable", "the host is unreachable"),
                ("NetworkUnreachable", "the network is unreachable"),
            ]
            .iter()
            .find(|(needle, _)| detail.contains(needle))
            .map(|(_, said)| *said);
            match cause {
                Some(said) => format!("{said} (is the server running and the URL right?)"),
                None => format!("{error} (is the server running and the URL right?)"),
            }
        }
        E::ConnectionClosed(_) => {
            "the server closed the connection during the MCP handshake".to_string()
        }
        other => other.to_string(),
    }
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let tail = tail.lock().unwrap_or_else(|p| p.into_inner());
    tail.iter().cloned().collect::<Vec<_>>().join("\n")
}

fn with_tail(message: String, tail: &Mutex<VecDeque<String>>) -> String {
    let text = tail_text(tail);
    if text.is_empty() {
        message
    } else {
        format!("{message}\nthe server's stderr ended with:\n{text}")
    }
}

/// Whether a failed call means the session is gone (reconnect next time) rather than a
/// server-side error.
pub fn is_disconnect(err: &ServiceError) -> bool {
    matches!(
        err,
        ServiceError::TransportClosed | ServiceError::TransportSend(_)
    )
}
