//! The client side of a team server: one MCP session over streamable HTTP with a user's token,
//! for the CLI working against the team (`car --server URL …`, `car team push`), and the token
//! kept in the OS keychain by `car team login`.

use rmcp::model::{CallToolRequestParams, ClientConfig, RequestMetaObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::secrets::Secrets;

/// The environment variable that gives the token directly (it wins over the keychain).
pub const TOKEN_ENV: &str = "CAR_TOKEN";

/// What went wrong talking to a team server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Invalid(String),
    #[error("no token for {server}: run `car team login --server {server}` (the token comes on stdin), or set CAR_TOKEN")]
    NoToken { server: String },
    #[error("{server} refused the token ({detail}); log in again with a current token: `car team login --server {server}`")]
    Refused { server: String, detail: String },
    #[error("{server}: {detail}")]
    NotFound { server: String, detail: String },
    #[error("cannot reach the team server at {server}: {detail}")]
    Unreachable { server: String, detail: String },
    #[error("the keychain: {0}")]
    Keychain(String),
}

/// A team server's address: the MCP endpoint of one project (`https://host/mcp/<project>`), or
/// of the token's first project (`https://host/mcp`, which a bare `https://host` means).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    url: reqwest::Url,
}

impl Server {
    pub fn parse(text: &str) -> Result<Server, ClientError> {
        let mut url = reqwest::Url::parse(text.trim()).map_err(|e| {
            ClientError::Invalid(format!(
                "--server {text:?} is not a URL ({e}); give the team server's address, e.g. https://car.example.com/mcp/web"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(ClientError::Invalid(format!(
                "--server {text:?} must be an http:// or https:// address, e.g. https://car.example.com/mcp/web"
            )));
        }
        // The token travels in a header: in clear text only to this machine.
        let host = url.host_str().unwrap_or_default();
        let loopback = host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if url.scheme() == "http" && !loopback {
            return Err(ClientError::Invalid(format!(
                "--server {text:?}: use https:// (the token would travel in clear text); http:// is for a server on this machine"
            )));
        }
        if url.path() == "/" || url.path().is_empty() {
            url.set_path("/mcp");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ClientError::Invalid(
                "--server must not carry a user or password; the token comes from `car team login`"
                    .into(),
            ));
        }
        Ok(Server { url })
    }

    /// The endpoint's URL.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// `scheme://host:port`: a token belongs to a user of the whole server, whatever project.
    pub fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }

    /// The keychain account that holds this server's token.
    pub fn account(&self) -> String {
        format!("team/{}/token", self.origin())
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// The token for `server`: `CAR_TOKEN` when set, else the one `car team login` stored in the
/// keychain `secrets` opens.
pub fn token_for(
    server: &Server,
    secrets: impl FnOnce() -> Result<Secrets, String>,
) -> Result<String, ClientError> {
    if let Some(token) = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(token.trim().to_string());
    }
    let secrets = secrets().map_err(|e| {
        ClientError::Keychain(format!(
            "{e}; without a keychain, give the token in CAR_TOKEN"
        ))
    })?;
    match secrets.get(&server.account()) {
        Ok(Some(token)) => Ok(token),
        Ok(None) => Err(ClientError::NoToken {
            server: server.origin(),
        }),
        Err(e) => Err(ClientError::Keychain(e.to_string())),
    }
}

/// A tool's answer: its structured result, and whether the server replayed a recorded result
/// for the request id instead of running the call again.
#[derive(Debug, Clone)]
pub struct Answer {
    pub value: Value,
    pub replayed: bool,
}

/// A call the server answered with an error: its text (a project tool's failure envelope).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ToolFailed {
    /// The error code (`denied`, `not_found`, `usage`, …) when the answer carries one.
    pub code: String,
    pub message: String,
}

/// An open session with a team server, as one user.
pub struct TeamClient {
    server: Server,
    service: RunningService<RoleClient, ClientConfig>,
}

impl TeamClient {
    /// Connects and completes the MCP handshake with `token`.
    pub async fn connect(server: &Server, token: &str) -> Result<TeamClient, ClientError> {
        let client = http_client(token)?;
        let config = StreamableHttpClientTransportConfig::with_uri(server.url());
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
        match crate::connectors::client::client_info()
            .serve(transport)
            .await
        {
            Ok(service) => Ok(TeamClient {
                server: server.clone(),
                service,
            }),
            Err(err) => Err(diagnose(server, &client, &err.to_string()).await),
        }
    }

    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Calls `tool`; `request_id` makes a repeated call answer with the first one's result.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        request_id: Option<&str>,
    ) -> Result<Result<Answer, ToolFailed>, ClientError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        if let Some(id) = request_id {
            let mut meta = serde_json::Map::new();
            meta.insert("car/request_id".into(), json!(id));
            params.meta = Some(RequestMetaObject::from(meta));
        }
        let result =
            self.service
                .peer()
                .call_tool(params)
                .await
                .map_err(|e| ClientError::Unreachable {
                    server: self.server.to_string(),
                    detail: e.to_string(),
                })?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        Ok(answer(value))
    }

    /// How many tools the server offers on this project.
    pub async fn tool_count(&self) -> Result<usize, ClientError> {
        let tools =
            self.service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| ClientError::Unreachable {
                    server: self.server.to_string(),
                    detail: e.to_string(),
                })?;
        Ok(tools.len())
    }

    /// Ends the session.
    pub async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(std::time::Duration::from_secs(2))
            .await;
    }
}

/// A `CallToolResult` (as JSON) as an answer or the tool's failure.
fn answer(result: Value) -> Result<Answer, ToolFailed> {
    let text: String = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if result["isError"].as_bool() == Some(true) {
        // A project tool fails with its failure envelope, then `--- STDERR ---` and a usage text.
        let (envelope, stderr) = match text.split_once("--- STDERR ---") {
            Some((out, err)) => (out.trim(), err.trim()),
            None => (text.trim(), ""),
        };
        let parsed: Option<Value> = serde_json::from_str(envelope).ok();
        let code = parsed
            .as_ref()
            .and_then(|v| v["error"]["code"].as_str())
            .or_else(|| result["_meta"]["car/error"]["code"].as_str())
            .unwrap_or("failed")
            .to_string();
        let message = parsed
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .filter(|m| !m.is_empty())
            .or_else(|| (!stderr.is_empty()).then(|| stderr.to_string()))
            .unwrap_or_else(|| envelope.to_string());
        return Err(ToolFailed { code, message });
    }
    let value = match &result["structuredContent"] {
        Value::Null => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        structured => structured.clone(),
    };
    Ok(Answer {
        value,
        replayed: result["_meta"]["car/replayed"].as_bool() == Some(true),
    })
}

/// A reqwest client that sends the token on every request.
fn http_client(token: &str) -> Result<reqwest::Client, ClientError> {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| ClientError::Invalid("the token has characters HTTP does not allow".into()))?;
    value.set_sensitive(true);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| ClientError::Invalid(format!("cannot build the HTTP client: {e}")))
}

/// Why a handshake failed, in the server's words where it gave them: the MCP client reports an
/// HTTP refusal only as a transport error, so one plain request asks again and reads the status.
async fn diagnose(server: &Server, client: &reqwest::Client, fallback: &str) -> ClientError {
    let probe = client
        .post(server.url())
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}))
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await;
    let response = match probe {
        Ok(response) => response,
        Err(e) => {
            let detail = if e.is_connect() {
                "the connection failed (is the server running and the URL right?)".to_string()
            } else if e.is_timeout() {
                "it did not answer in time".to_string()
            } else {
                format!("{fallback} ({e})")
            };
            return ClientError::Unreachable {
                server: server.to_string(),
                detail,
            };
        }
    };
    let status = response.status();
    let said = response
        .json::<Value>()
        .await
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("HTTP {status}"));
    match status.as_u16() {
        401 | 403 => ClientError::Refused {
            server: server.origin(),
            detail: format!("HTTP {status}"),
        },
        404 => ClientError::NotFound {
            server: server.to_string(),
            detail: said,
        },
        _ => ClientError::Unreachable {
            server: server.to_string(),
            detail: if status.is_success() {
                fallback.to_string()
            } else {
                said
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_an_http_address_and_a_bare_host_means_mcp() {
        let server = Server::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(server.url(), "http://127.0.0.1:8080/mcp");
        assert_eq!(server.origin(), "http://127.0.0.1:8080");
        let project = Server::parse("https://car.example.com/mcp/web").unwrap();
        assert_eq!(project.url(), "https://car.example.com/mcp/web");
        assert_eq!(project.account(), "team/https://car.example.com/token");
        assert!(Server::parse("http://localhost:9/mcp/web").is_ok());
        for bad in [
            "car.example.com",
            "ftp://x/mcp",
            "https://u:p@x/mcp",
            "",
            "http://car.example.com/mcp/web",
        ] {
            assert!(Server::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_error_result_gives_the_envelope_code_and_message() {
        let failed = answer(json!({
            "isError": true,
            "content": [{"type": "text", "text": "{\"schema_version\":1,\"command\":\"task.create\",\"success\":false,\"error\":{\"code\":\"denied\",\"message\":\"a reader cannot write\"}}\n--- STDERR ---\n"}]
        }))
        .unwrap_err();
        assert_eq!(failed.code, "denied");
        assert_eq!(failed.message, "a reader cannot write");
        let ok = answer(json!({
            "content": [{"type": "text", "text": "{}"}],
            "structuredContent": {"a": 1},
            "_meta": {"car/replayed": true}
        }))
        .unwrap();
        assert_eq!(ok.value, json!({"a": 1}));
        assert!(ok.replayed);
    }
}
