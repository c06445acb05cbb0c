//! What each connector operation returns: typed values that serialize to the `--json` data and
//! that the CLI renders by their fields.

use serde::{Deserialize, Serialize};

use super::config::{Connector, Endpoint};

/// How CAR reaches a connector's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Http,
    Stdio,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
        }
    }
}

/// Where a connector's secrets come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Auth {
    /// OAuth 2.1 tokens in the keychain.
    Oauth,
    /// Header values in the keychain.
    Headers,
    /// Environment values in the keychain.
    Env,
    None,
}

impl Auth {
    pub fn as_str(self) -> &'static str {
        match self {
            Auth::Oauth => "oauth",
            Auth::Headers => "headers",
            Auth::Env => "env",
            Auth::None => "none",
        }
    }
}

/// The endpoint's own fields, beside the status's (secret names only, never values).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EndpointView {
    Http {
        url: String,
        headers: Vec<String>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<String>,
    },
}

/// A connector as `list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectorStatus {
    pub slug: String,
    pub name: String,
    pub transport: Transport,
    pub tool_count: usize,
    pub enabled_count: usize,
    pub timeout_secs: u64,
    /// The URL, or the command line.
    pub target: String,
    pub auth: Auth,
    pub added_at: String,
    pub refreshed_at: Option<String>,
    pub last_error: Option<String>,
    #[serde(flatten)]
    pub endpoint: EndpointView,
}

impl From<&Connector> for ConnectorStatus {
    fn from(connector: &Connector) -> ConnectorStatus {
        let auth = match &connector.endpoint {
            _ if connector.oauth.is_some() => Auth::Oauth,
            Endpoint::Http { headers, .. } if !headers.is_empty() => Auth::Headers,
            Endpoint::Stdio { env, .. } if !env.is_empty() => Auth::Env,
            Endpoint::Http { .. } | Endpoint::Stdio { .. } => Auth::None,
        };
        let (transport, endpoint) = match &connector.endpoint {
            Endpoint::Http { url, headers } => (
                Transport::Http,
                EndpointView::Http {
                    url: url.clone(),
                    headers: headers.clone(),
                },
            ),
            Endpoint::Stdio { command, args, env } => (
                Transport::Stdio,
                EndpointView::Stdio {
                    command: command.clone(),
                    args: args.clone(),
                    env: env.clone(),
                },
            ),
        };
        ConnectorStatus {
            slug: connector.slug.clone(),
            name: connector.name.clone(),
            transport,
            tool_count: connector.tools.len(),
            enabled_count: connector.enabled.len(),
            timeout_secs: connector.timeout().as_secs(),
            target: connector.endpoint.target(),
            auth,
            added_at: connector.added_at.clone(),
            refreshed_at: connector.refreshed_at.clone(),
            last_error: connector.last_error.clone(),
            endpoint,
        }
    }
}

/// The connectors of this home.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listed {
    pub connectors: Vec<ConnectorStatus>,
}

/// One discovered tool as `tools` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolRow {
    /// The server's name for it.
    pub name: String,
    /// The name agents see: `mcp_<slug>_<tool>`.
    pub canonical: String,
    pub description: String,
    /// What the server's annotations say it does (read, write, destructive, …).
    pub effect: String,
    pub enabled: bool,
}

/// A connector's tools.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolList {
    pub slug: String,
    pub tools: Vec<ToolRow>,
}

/// What `add` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Added {
    #[serde(flatten)]
    pub status: ConnectorStatus,
    /// The server asked for authorization: the connector is kept, `login` comes next.
    pub needs_login: bool,
}

/// The server a session talked to, as it introduced itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: Option<String>,
}

/// How a refresh changed the tool list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Enabled tools the server no longer offers (they stay enabled by name).
    pub enabled_but_gone: Vec<String>,
}

/// The client CAR logged in as.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginInfo {
    pub client_id: String,
    /// How the client was registered (dynamic, preregistered, …).
    pub registration: String,
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
    /// Times the server asked for more scope during discovery.
    pub step_ups: usize,
}

/// What `refresh` (and `login`, which ends with one) did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refreshed {
    #[serde(flatten)]
    pub status: ConnectorStatus,
    pub changes: Changes,
    pub server: Option<ServerInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<LoginInfo>,
}

/// What `logout` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoggedOut {
    pub slug: String,
    /// False when there were no tokens.
    pub logged_out: bool,
}

/// What `enable` or `disable` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Switched {
    pub slug: String,
    /// Tools newly enabled (on `enable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<usize>,
    /// Tools newly disabled (on `disable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<usize>,
    /// The canonical names of the tools named.
    pub tools: Vec<String>,
    pub enabled_count: usize,
}

/// What `remove` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Removed {
    pub slug: String,
    pub removed: bool,
    pub tools_removed: usize,
    pub secrets_deleted: usize,
    /// Keychain entries left behind by `--force` (with why).
    pub secrets_left: Option<String>,
}

/// A team-file connector that could not be added.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncFailure {
    pub slug: String,
    pub error: String,
}

/// What `sync` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Synced {
    /// The team file read.
    pub file: String,
    pub added: Vec<Added>,
    /// Slugs this home had already.
    pub skipped: Vec<String>,
    pub failed: Vec<SyncFailure>,
}

/// What `test` measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tested {
    pub slug: String,
    pub ok: bool,
    pub server: Option<ServerInfo>,
    pub tool_count: usize,
    pub connect_ms: f64,
    pub list_ms: f64,
    pub total_ms: f64,
}
