//! The HTTP face: `car-server` serves the same tools, prompt and resources as `car-mcp`, from
//! the same [`App`], over MCP's streamable HTTP transport at `/mcp` (rmcp's service: sessions
//! for 2025-06-18 and 2025-11-25 with `Mcp-Session-Id`, idle expiry, DELETE to end one; the
//! 2026-07-28 revision stateless), plus `GET /health` and the dashboard at `/` ([`web`]).
//!
//! Access control, before anything reaches MCP:
//! - `Host` must name a loopback address (DNS rebinding), and a present `Origin` must be a
//!   loopback origin (a literal `null` is refused): 403;
//! - an `MCP-Protocol-Version` CAR does not serve: 400 naming the ones it does;
//! - bodies beyond [`MAX_BODY_BYTES`]: 413;
//! - a bind beyond loopback needs [`Exposure::Remote`] with a bearer token, compared in constant
//!   time; a request without it gets 401 with `WWW-Authenticate: Bearer`. CAR never exposes an
//!   unauthenticated endpoint beyond loopback.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod lifecycle;
pub mod logfile;
pub mod process;
pub mod team;
pub mod web;
pub mod ws;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::mcp::{McpServer, PROTOCOL_VERSIONS};
use crate::runtime::Context;

/// The default MCP address.
pub const DEFAULT_MCP_BIND: &str = "127.0.0.1:9102";
/// The largest request body accepted (a tool call with a big plan fits many times over).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// How long an unused session lives.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// The most MCP sessions open at once (each costs about 60 KiB until it ends or idles out), so
/// clients that open sessions and abandon them cannot grow the daemon without bound.
pub const MAX_SESSIONS: usize = 2048;

/// Who may reach the server.
#[derive(Debug, Clone)]
pub enum Exposure {
    /// Loopback only; no token.
    Loopback,
    /// Any interface; every request must carry this bearer token.
    Remote { token: String },
}

/// How `car-server` serves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub mcp_bind: SocketAddr,
    pub exposure: Exposure,
    /// The trusted context of every connection (confirmation grants from the host).
    pub context: Context,
    /// Cancelled to shut down: sessions end, in-flight calls are cancelled.
    pub shutdown: CancellationToken,
    /// CAR's home, whose connectors the dashboard lists (`None`: no connectors page data).
    pub car_home: Option<std::path::PathBuf>,
}

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0} is not a loopback address; binding beyond loopback needs --allow-remote, and every client then sends the bearer token in $CAR_HOME/daemon/token")]
    NotLoopback(SocketAddr),
    #[error(
        "cannot listen on {addr}: {source}; is another car-server (or another program) using it? Choose another address with --mcp-bind"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server stopped: {0}")]
    Serve(std::io::Error),
}

#[derive(Clone)]
struct Guard {
    token: Option<Arc<str>>,
    /// Checked only on loopback: a remote bind is reached by names CAR cannot know, and the
    /// token is what protects it.
    check_host: bool,
    /// A present `Origin` must be a loopback one (the dashboard beyond loopback checks its own
    /// origin on every change instead: its pages are reached by names CAR cannot know).
    check_origin: bool,
    /// The MCP sessions, counted before a new one opens (none on the WebSocket route).
    sessions: Option<Arc<LocalSessionManager>>,
}

impl Guard {
    /// Host (on a loopback bind) and Origin checks only: for routes whose callers prove who
    /// they are another way (a WebSocket's first frame, a team user's token).
    fn origins_only(exposure: &Exposure) -> Guard {
        Guard {
            token: None,
            check_host: matches!(exposure, Exposure::Loopback),
            check_origin: true,
            sessions: None,
        }
    }
}

/// The health document.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub protocol_versions: Vec<String>,
    pub server_name: &'static str,
    pub version: &'static str,
}

/// The WebSocket route (`GET /` upgraded), behind the same Host and Origin checks; the token is
/// checked by the protocol's first frame.
pub fn ws_router(state: ws::WsState, exposure: &Exposure) -> Router {
    Router::new()
        .route("/", get(ws::upgrade))
        .with_state(state)
        .layer(middleware::from_fn_with_state(
            Guard::origins_only(exposure),
            admit,
        ))
}

/// The routes of `car-server` over one app.
pub fn router(
    app: App,
    exposure: &Exposure,
    context: Context,
    shutdown: CancellationToken,
    car_home: Option<std::path::PathBuf>,
) -> Router {
    // Beyond loopback the dashboard asks for the token itself (a browser signs in once and
    // keeps a session cookie), so the guard in front of it checks only Host and Origin.
    let token = match exposure {
        Exposure::Loopback => None,
        Exposure::Remote { token } => Some(Arc::from(token.as_str())),
    };
    let dashboard = web::router(app.clone(), car_home, shutdown.clone(), token).layer(
        middleware::from_fn_with_state(
            Guard {
                token: None,
                check_host: matches!(exposure, Exposure::Loopback),
                check_origin: matches!(exposure, Exposure::Loopback),
                sessions: None,
            },
            admit,
        ),
    );
    let server = McpServer::new(app).named("car-server").context(context);
    mcp_router(server, exposure, shutdown).merge(dashboard)
}

/// The routes of `car-server` over any [`McpServer`] (one with an [`crate::McpExtension`], say):
/// `/mcp` behind the access checks, and `/health`.
pub fn mcp_router(server: McpServer, exposure: &Exposure, shutdown: CancellationToken) -> Router {
    let mut sessions = LocalSessionManager::default();
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(SESSION_IDLE);
    sessions.session_config = session_config;
    let sessions = Arc::new(sessions);
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown)
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        // Host and Origin are checked below, with CAR's messages.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let mcp = StreamableHttpService::new(
        move || Ok(server.for_new_session()),
        sessions.clone(),
        config,
    );
    let guard = Guard {
        token: match exposure {
            Exposure::Loopback => None,
            Exposure::Remote { token } => Some(Arc::from(token.as_str())),
        },
        check_host: matches!(exposure, Exposure::Loopback),
        check_origin: true,
        sessions: Some(sessions),
    };
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(guard.clone(), admit))
        .route("/health", get(health))
}

async fn health() -> Json<Health> {
    Json(Health {
        status: "ok",
        protocol_versions: PROTOCOL_VERSIONS.iter().map(|v| v.to_string()).collect(),
        server_name: "car-server",
        version: env!("CARGO_PKG_VERSION"),
    })
}

fn refuse(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

/// The access checks in front of `/mcp` (see the module docs).
async fn admit(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if guard.check_host && !headers.get(header::HOST).is_some_and(is_loopback_host) {
        return refuse(
            StatusCode::FORBIDDEN,
            serde_json::json!({"error": "host not allowed: car-server answers only to localhost, 127.0.0.1 and [::1]"}),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN).filter(|_| guard.check_origin) {
        if !is_loopback_origin(origin) {
            return refuse(
                StatusCode::FORBIDDEN,
                serde_json::json!({"error": "origin not allowed", "origin": origin.to_str().unwrap_or("")}),
            );
        }
    }
    if let Some(token) = &guard.token {
        if !bearer_matches(headers, token) {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"error": "a bearer token is required: send `Authorization: Bearer <token>` with the token in $CAR_HOME/daemon/token"}),
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"car\""),
            );
            return response;
        }
    }
    if let Some(sessions) = &guard.sessions {
        let opens_one = request.method() == axum::http::Method::POST
            && !headers.contains_key("mcp-session-id")
            && headers
                .get("mcp-protocol-version")
                .is_none_or(|v| v.as_bytes() < b"2026-07-28".as_slice());
        if opens_one && sessions.sessions.read().await.len() >= MAX_SESSIONS {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": -32000,
                    "message": format!("car-server has {MAX_SESSIONS} MCP sessions open, the most it keeps; end unused ones (HTTP DELETE with their Mcp-Session-Id) or wait for idle ones to expire ({} min)", SESSION_IDLE.as_secs() / 60)
                }}),
            );
        }
    }
    if let Some(version) = headers.get("mcp-protocol-version") {
        // 2025-03-26 shares the transport; a session negotiated above it may still send it.
        let served = PROTOCOL_VERSIONS
            .iter()
            .chain([&rmcp::model::ProtocolVersion::V_2025_03_26])
            .any(|v| v.as_str().as_bytes() == version.as_bytes());
        if !served {
            let requested = version.to_str().unwrap_or("").to_string();
            return unsupported_version(request, requested).await;
        }
    }
    next.run(request).await
}

/// 400 with a JSON-RPC error answering the request's id: code -32022 (unsupported protocol
/// version), `data: {requested, supported}`, and a message naming what CAR serves.
async fn unsupported_version(request: Request, requested: String) -> Response {
    let body = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
        .await
        .unwrap_or_default();
    let id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(serde_json::Value::Null);
    let supported: Vec<String> = PROTOCOL_VERSIONS.iter().map(|v| v.to_string()).collect();
    let error = rmcp::model::ErrorData::new(
        rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported MCP-Protocol-Version '{requested}'; car-server serves {}",
            supported.join(", ")
        ),
        Some(serde_json::json!({"requested": requested, "supported": supported})),
    );
    refuse(
        StatusCode::BAD_REQUEST,
        serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}),
    )
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(value: &HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let host = match text.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => text.rsplit_once(':').map_or(text, |(host, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                host
            } else {
                text
            }
        }),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// An `http(s)://` origin whose host is loopback (any port). `null` is not.
fn is_loopback_origin(value: &HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let Some(authority) = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
    else {
        return false;
    };
    !authority.contains('/')
        && HeaderValue::from_str(authority).is_ok_and(|host| is_loopback_host(&host))
}

/// `Authorization: Bearer <token>`, compared in constant time.
pub(crate) fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| tokens_match(given, token))
}

/// Compares two tokens in time that does not depend on where they differ.
pub(crate) fn tokens_match(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Binds the MCP address, refusing a non-loopback one without [`Exposure::Remote`].
pub async fn bind(options: &ServeOptions) -> Result<tokio::net::TcpListener, ServerError> {
    if !options.mcp_bind.ip().is_loopback() && matches!(options.exposure, Exposure::Loopback) {
        return Err(ServerError::NotLoopback(options.mcp_bind));
    }
    tokio::net::TcpListener::bind(options.mcp_bind)
        .await
        .map_err(|source| ServerError::Bind {
            addr: options.mcp_bind,
            source,
        })
}

/// Serves until `options.shutdown` is cancelled; in-flight requests finish first.
pub async fn serve(app: App, options: ServeOptions) -> Result<(), ServerError> {
    let listener = bind(&options).await?;
    serve_on(app, listener, options).await
}

/// [`serve`] on a listener already bound (tests bind port 0 and read the address).
pub async fn serve_on(
    app: App,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
) -> Result<(), ServerError> {
    let shutdown = options.shutdown.clone();
    let routes = router(
        app,
        &options.exposure,
        options.context,
        shutdown.clone(),
        options.car_home,
    );
    serve_router(listener, routes, shutdown).await
}

/// Serves `routes` on `listener` until `shutdown`; in-flight requests finish first.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    routes: Router,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    axum::serve(listener.tap_io(no_delay), routes)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(ServerError::Serve)
}

/// Small JSON-RPC frames go out at once: with Nagle's algorithm on, a reply waits for the
/// peer's delayed ACK (≈40 ms on Linux) whenever one is already in flight.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY: {e}");
    }
}

/// Serves the WebSocket protocol on a listener already bound, until `shutdown`.
pub async fn serve_ws_on(
    state: ws::WsState,
    listener: tokio::net::TcpListener,
    exposure: &Exposure,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    axum::serve(listener.tap_io(no_delay), ws_router(state, exposure))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(ServerError::Serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn loopback_hosts_and_origins() {
        for host in [
            "localhost",
            "localhost:9102",
            "127.0.0.1:9102",
            "127.1.2.3",
            "[::1]:9102",
            "[::1]",
        ] {
            assert!(is_loopback_host(&value(host)), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9102",
            "10.0.0.1:9102",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert!(!is_loopback_host(&value(host)), "{host}");
        }
        for origin in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:6274",
        ] {
            assert!(is_loopback_origin(&value(origin)), "{origin}");
        }
        for origin in [
            "null",
            "http://evil.example",
            "file://",
            "http://localhost.evil.example:80",
            "http://localhost/x",
        ] {
            assert!(!is_loopback_origin(&value(origin)), "{origin}");
        }
    }

    #[test]
    fn the_bearer_token_must_match_exactly() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_matches(&headers, "s3cret"));
        headers.insert(header::AUTHORIZATION, value("Bearer s3cre"));
        assert!(!bearer_matches(&headers, "s3cret"));
        headers.insert(header::AUTHORIZATION, value("Bearer s3cret"));
        assert!(bearer_matches(&headers, "s3cret"));
        headers.insert(header::AUTHORIZATION, value("Basic s3cret"));
        assert!(!bearer_matches(&headers, "s3cret"));
    }
}
