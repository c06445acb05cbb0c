//! Connectors: remote MCP servers as tool sources. CAR connects to a server (streamable HTTP or a
//! child process over stdio) with rmcp's client, reads every page of `tools/list` and turns each
//! tool into a registry tool named `mcp_<slug>_<tool>` — **disabled** until the user enables it.
//! An enabled tool goes through the same dispatcher as a built-in one (schema validation, the
//! policy gate with `deny_tool`/`deny_connector`/parameter rules, a time bound, cancellation
//! forwarded to the server, the execution log).
//!
//! What is stored where:
//! - `$CAR_HOME/connectors.json` ([`config`]): slug, name, URL or command and arguments, the
//!   *names* of secret headers and environment variables, enabled tools, the last discovered
//!   tool list, public OAuth client metadata. Never a secret value.
//! - The OS keychain ([`crate::secrets`], service `car`): `connector/<slug>/header/<Name>`,
//!   `connector/<slug>/env/<NAME>` and `connector/<slug>/oauth` (tokens, expiry, client
//!   secret). `car connector remove` deletes every `connector/<slug>/…` entry.
//! - OAuth 2.1 (`car connector login`/`logout`, refresh, step-up) is in [`oauth`].
//! - `.car/connectors.toml` ([`team`]), found by walking up from the project: a team's list of
//!   connectors without secrets; `car connector sync` adds the missing ones.

pub mod client;
pub mod config;
pub mod oauth;
pub mod outcome;
pub mod team;
pub mod tools;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

pub use client::{Resolved, Session};
pub use config::{canonical, Connector, ConnectorsFile, Endpoint, RemoteTool};
pub use outcome::{
    Added, ConnectorStatus, LoggedOut, LoginInfo, Refreshed, Removed, Switched, Synced, Tested,
    ToolList, ToolRow,
};
pub use tools::ConnectorTools;

use crate::secrets::Secrets;

/// Why a connector operation failed. Messages say what to do next.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectorError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Io(String),
    #[error("connector '{slug}': cannot connect: {message}")]
    Connect { slug: String, message: String },
    #[error("connector '{slug}' needs authorization: run `car connector login {slug}`")]
    AuthRequired { slug: String },
    /// The server refused a call for want of scope (`403 insufficient_scope`).
    #[error("connector '{slug}' needs more permission (scope '{scope}'): run `car connector login {slug} --scope '{scope}'`")]
    InsufficientScope { slug: String, scope: String },
    /// Discovery, registration, the browser step or the token exchange failed.
    #[error("connector '{slug}': authorization failed: {message}")]
    OAuth { slug: String, message: String },
    #[error("connector '{slug}': {message}")]
    Remote { slug: String, message: String },
    #[error("{0}")]
    Secrets(String),
}

impl ConnectorError {
    pub fn code(&self) -> &'static str {
        match self {
            ConnectorError::Invalid(_) => "invalid",
            ConnectorError::NotFound(_) => "not_found",
            ConnectorError::Config(_) => "config",
            ConnectorError::Io(_) => "io",
            ConnectorError::Connect { .. } => "connect_failed",
            ConnectorError::AuthRequired { .. } => "auth_required",
            ConnectorError::InsufficientScope { .. } => "insufficient_scope",
            ConnectorError::OAuth { .. } => "oauth",
            ConnectorError::Remote { .. } => "remote",
            ConnectorError::Secrets(_) => "keychain",
        }
    }

    pub(crate) fn unknown(slug: &str, known: &[String]) -> ConnectorError {
        let hint = if known.is_empty() {
            "no connector is configured; add one with `car connector add NAME --url URL`"
                .to_string()
        } else {
            format!("the connectors are: {}", known.join(", "))
        };
        ConnectorError::NotFound(format!("no connector '{slug}'; {hint}"))
    }
}

impl From<crate::secrets::SecretError> for ConnectorError {
    fn from(err: crate::secrets::SecretError) -> Self {
        ConnectorError::Secrets(err.to_string())
    }
}

/// How a secret's keychain account is named from the connector's slug and the secret's name.
type AccountName = fn(&str, &str) -> String;

/// The keychain account of a header's value.
pub fn header_account(slug: &str, name: &str) -> String {
    format!("connector/{slug}/header/{name}")
}

/// The keychain account of an environment variable's value.
pub fn env_account(slug: &str, name: &str) -> String {
    format!("connector/{slug}/env/{name}")
}

/// The keychain account of the OAuth state (tokens, expiry, client secret).
pub fn oauth_account(slug: &str) -> String {
    format!("connector/{slug}/oauth")
}

/// What `car connector add` was asked to add.
#[derive(Debug, Clone)]
pub struct NewConnector {
    pub name: String,
    pub endpoint: Endpoint,
    /// Secret values of the endpoint's headers or environment variables, by name.
    pub secrets: Vec<(String, String)>,
    pub timeout_secs: Option<u64>,
}

/// Which of a connector's tools [`Connectors::set_enabled`] changes.
#[derive(Debug, Clone, Copy)]
pub enum Selection<'a> {
    /// These, by server or `mcp_…` name.
    Named(&'a [String]),
    /// All of them.
    All,
}

/// Whether [`Connectors::set_enabled`] enables or disables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    On,
    Off,
}

/// The connectors of one CAR home.
pub struct Connectors {
    home: PathBuf,
    secrets: OnceLock<Result<Secrets, ConnectorError>>,
}

impl Connectors {
    pub fn new(home: PathBuf) -> Connectors {
        Connectors {
            home,
            secrets: OnceLock::new(),
        }
    }

    /// Connectors whose secrets live in the given store (an embedder that chose one).
    pub fn with_secrets(home: PathBuf, secrets: Secrets) -> Connectors {
        let cell = OnceLock::new();
        let _ = cell.set(Ok(secrets));
        Connectors {
            home,
            secrets: cell,
        }
    }

    /// The keychain-backed OAuth credential store of one connector.
    pub fn oauth_store(&self, slug: &str) -> Result<oauth::KeychainStore, ConnectorError> {
        Ok(oauth::KeychainStore::new(
            self.secrets()?.clone(),
            &self.home,
            slug,
        ))
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The keychain, opened on first need (a connector with no secrets never touches it).
    pub fn secrets(&self) -> Result<&Secrets, ConnectorError> {
        self.secrets
            .get_or_init(|| Secrets::open(&self.home).map_err(ConnectorError::from))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn list(&self) -> Result<Vec<Connector>, ConnectorError> {
        Ok(config::load(&self.home)?.connectors)
    }

    pub fn get(&self, slug: &str) -> Result<Connector, ConnectorError> {
        let file = config::load(&self.home)?;
        file.get(slug)
            .cloned()
            .ok_or_else(|| ConnectorError::unknown(slug, &file.slugs()))
    }

    /// The secrets a connection needs, read from the keychain.
    pub async fn resolve(&self, connector: &Connector) -> Result<Resolved, ConnectorError> {
        let mut resolved = Resolved::default();
        let (names, account): (&[String], AccountName) = match &connector.endpoint {
            Endpoint::Http { headers, .. } => (headers, header_account),
            Endpoint::Stdio { env, .. } => (env, env_account),
        };
        for name in names {
            let value = self
                .secrets()?
                .get(&account(&connector.slug, name))?
                .ok_or_else(|| {
                    ConnectorError::Secrets(format!(
                        "the value of '{name}' for connector '{}' is missing from the keychain ({}); remove the connector and add it again with its value",
                        connector.slug,
                        self.secrets().map(|s| s.backend()).unwrap_or("unavailable")
                    ))
                })?;
            match &connector.endpoint {
                Endpoint::Http { .. } => resolved.headers.push((name.clone(), value)),
                Endpoint::Stdio { .. } => resolved.env.push((name.clone(), value)),
            }
        }
        if let (Some(client), Endpoint::Http { url, .. }) = (&connector.oauth, &connector.endpoint)
        {
            let store = self.oauth_store(&connector.slug)?;
            resolved.auth = oauth::authorized_client(&connector.slug, url, client, store).await?;
        }
        Ok(resolved)
    }

    /// `car connector login`: authorizes CAR with the connector's server (OAuth 2.1, see
    /// [`oauth`]), stores the tokens in the keychain, then connects and discovers the tools.
    /// A `403 insufficient_scope` during discovery starts a step-up authorization.
    pub async fn login(
        &self,
        slug: &str,
        options: oauth::LoginOptions,
    ) -> Result<Refreshed, ConnectorError> {
        let connector = self.get(slug)?;
        let Endpoint::Http { url, .. } = &connector.endpoint else {
            return Err(ConnectorError::Invalid(format!(
                "connector '{slug}' runs a local command; OAuth is for HTTP connectors (give a stdio server its secrets with --env)"
            )));
        };
        let store = self.oauth_store(slug)?;
        let mut challenge = match &options.challenge {
            Some(challenge) => Some(challenge.clone()),
            None => oauth::probe_challenge(url).await,
        };
        let mut previous = connector.oauth.clone();
        let mut step_ups = 0;
        loop {
            let authorized = oauth::authorize(
                slug,
                url,
                previous.as_ref(),
                &store,
                &options,
                challenge.as_deref(),
            )
            .await?;
            drop(authorized.manager);
            let client = authorized.client;
            let saved = client.clone();
            config::update(&self.home, move |file| {
                let entry = file.get_mut(slug)?;
                entry.oauth = Some(saved);
                entry.last_error = None;
                Ok(())
            })?;
            match self.refresh(slug).await {
                Ok(mut out) => {
                    out.login = Some(LoginInfo {
                        client_id: client.client_id,
                        registration: client.registration,
                        issuer: client.issuer,
                        scopes: client.scopes,
                        step_ups,
                    });
                    return Ok(out);
                }
                Err(ConnectorError::InsufficientScope { scope, .. })
                    if step_ups < oauth::MAX_STEP_UPS =>
                {
                    step_ups += 1;
                    challenge = Some(format!(
                        "Bearer error=\"insufficient_scope\", scope=\"{scope}\""
                    ));
                    previous = Some(client);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// `car connector logout`: deletes the connector's OAuth tokens from the keychain (a
    /// pre-registered client's secret stays) and keeps the connector.
    pub async fn logout(&self, slug: &str) -> Result<LoggedOut, ConnectorError> {
        let connector = self.get(slug)?;
        let had = match connector.oauth {
            Some(_) => self.oauth_store(slug)?.forget_tokens().await?,
            None => false,
        };
        Ok(LoggedOut {
            slug: slug.to_string(),
            logged_out: had,
        })
    }

    /// Opens a session with a connector's server.
    pub async fn connect(&self, connector: &Connector) -> Result<Session, ConnectorError> {
        let resolved = self.resolve(connector).await?;
        Session::connect(connector, resolved).await
    }

    /// Adds a connector, stores its secrets in the keychain, connects and discovers its tools
    /// (all disabled). When the server cannot be reached nothing is kept; when it asks for
    /// authorization the connector is kept and the outcome says to log in.
    pub async fn add(&self, new: NewConnector) -> Result<Added, ConnectorError> {
        let slug = config::slugify(&new.name)?;
        validate_endpoint(&new.endpoint)?;
        let existing = config::load(&self.home)?;
        if existing.get(&slug).is_some() {
            return Err(ConnectorError::Invalid(format!(
                "a connector '{slug}' exists already; see it with `car connector list`, or remove it first with `car connector remove {slug}`"
            )));
        }
        let mut connector = Connector {
            slug: slug.clone(),
            name: new.name.trim().to_string(),
            endpoint: new.endpoint,
            timeout_secs: new.timeout_secs,
            enabled: BTreeSet::new(),
            tools: Vec::new(),
            oauth: None,
            added_at: crate::store::now(),
            refreshed_at: None,
            last_error: None,
        };
        // Secrets first, so the connection can use them; taken back if the add fails.
        let account: AccountName = match connector.endpoint {
            Endpoint::Http { .. } => header_account,
            Endpoint::Stdio { .. } => env_account,
        };
        let undo = |err: ConnectorError| {
            if !new.secrets.is_empty() {
                if let Ok(secrets) = self.secrets() {
                    let _ = secrets.delete_prefix(&format!("connector/{slug}/"));
                }
            }
            err
        };
        if !new.secrets.is_empty() {
            let secrets = self.secrets()?;
            for (name, value) in &new.secrets {
                secrets
                    .set(&account(&slug, name), value)
                    .map_err(|e| undo(e.into()))?;
            }
        }
        let discovered = self.discover(&connector).await;
        let needs_login = match discovered {
            Ok((tools, _)) => {
                connector.tools = tools;
                connector.refreshed_at = Some(crate::store::now());
                false
            }
            Err(ConnectorError::AuthRequired { .. }) => {
                connector.last_error = Some("needs authorization".into());
                true
            }
            Err(err) => return Err(undo(err)),
        };
        let stored = connector.clone();
        config::update(&self.home, move |file| {
            if file.get(&stored.slug).is_some() {
                return Err(ConnectorError::Invalid(format!(
                    "a connector '{}' was added meanwhile by another process",
                    stored.slug
                )));
            }
            file.connectors.push(stored);
            Ok(())
        })
        .map_err(undo)?;
        Ok(Added {
            status: ConnectorStatus::from(&connector),
            needs_login,
        })
    }

    /// Connects and lists every tool, with the server's identity.
    async fn discover(
        &self,
        connector: &Connector,
    ) -> Result<(Vec<RemoteTool>, Option<outcome::ServerInfo>), ConnectorError> {
        let session = self.connect(connector).await?;
        let listed = session.list_tools().await;
        let server = session.server();
        let tail = session.stderr_tail();
        session.close().await;
        let tools = listed.map_err(|err| {
            if let Some(challenge) = err.auth_challenge() {
                return oauth::challenge_error(
                    &connector.slug,
                    &connector.endpoint.target(),
                    challenge,
                );
            }
            let mut message = format!("tools/list failed: {err}");
            if !tail.is_empty() {
                message.push_str(&format!("\nthe server's stderr ended with:\n{tail}"));
            }
            ConnectorError::Remote {
                slug: connector.slug.clone(),
                message,
            }
        })?;
        Ok((tools, server))
    }

    /// Rediscovers a connector's tools. Enabled tools the server no longer offers stay enabled
    /// by name (they come back if the server does) and are reported.
    pub async fn refresh(&self, slug: &str) -> Result<Refreshed, ConnectorError> {
        let connector = self.get(slug)?;
        let (tools, server) = match self.discover(&connector).await {
            Ok(found) => found,
            Err(err) => {
                let message = err.to_string();
                config::update(&self.home, |file| {
                    file.get_mut(slug)?.last_error = Some(message);
                    Ok(())
                })?;
                return Err(err);
            }
        };
        let changed = config::update(&self.home, |file| {
            let entry = file.get_mut(slug)?;
            let before: BTreeSet<String> = entry.tools.iter().map(|t| t.name.clone()).collect();
            let after: BTreeSet<String> = tools.iter().map(|t| t.name.clone()).collect();
            entry.tools = tools;
            entry.refreshed_at = Some(crate::store::now());
            entry.last_error = None;
            Ok(outcome::Changes {
                added: after.difference(&before).cloned().collect(),
                removed: before.difference(&after).cloned().collect(),
                enabled_but_gone: entry.enabled.difference(&after).cloned().collect(),
            })
        })?;
        Ok(Refreshed {
            status: ConnectorStatus::from(&self.get(slug)?),
            changes: changed,
            server,
            login: None,
        })
    }

    /// Enables or disables a connector's tools: the named ones (server or `mcp_…` names), or
    /// all (every discovered tool to enable, every enabled one to disable).
    pub fn set_enabled(
        &self,
        slug: &str,
        tools: Selection<'_>,
        switch: Switch,
    ) -> Result<Switched, ConnectorError> {
        let enable = switch == Switch::On;
        if let Selection::Named(names) = tools {
            if names.is_empty() {
                return Err(ConnectorError::Invalid(format!(
                    "no tool named to {}; `car connector tools {slug}` lists them",
                    if enable { "enable" } else { "disable" }
                )));
            }
        }
        config::update(&self.home, |file| {
            let entry = file.get_mut(slug)?;
            let known: BTreeSet<String> = entry.tools.iter().map(|t| t.name.clone()).collect();
            let wanted: Vec<String> = if let Selection::Named(tools) = tools {
                let mut names = Vec::new();
                for tool in tools {
                    // Accept the canonical name too.
                    let bare = if known.contains(tool) {
                        tool.clone()
                    } else {
                        known
                            .iter()
                            .chain(entry.enabled.iter())
                            .find(|name| canonical(slug, name) == *tool)
                            .cloned()
                            .unwrap_or_else(|| tool.clone())
                    };
                    if enable && !known.contains(&bare) {
                        return Err(ConnectorError::Invalid(format!(
                            "connector '{slug}' has no tool '{tool}'; `car connector tools {slug}` lists them (run `car connector refresh {slug}` if the server added it)"
                        )));
                    }
                    names.push(bare);
                }
                names
            } else if enable {
                known.iter().cloned().collect()
            } else {
                entry.enabled.iter().cloned().collect()
            };
            let mut changed = 0;
            for name in &wanted {
                let did = if enable {
                    entry.enabled.insert(name.clone())
                } else {
                    entry.enabled.remove(name)
                };
                changed += usize::from(did);
            }
            Ok(Switched {
                slug: slug.to_string(),
                enabled: enable.then_some(changed),
                disabled: (!enable).then_some(changed),
                tools: wanted.iter().map(|n| canonical(slug, n)).collect(),
                enabled_count: entry.enabled.len(),
            })
        })
    }

    /// Removes a connector and every keychain entry it had.
    ///
    /// With `force`, a connector whose keychain cannot be reached is removed anyway and the
    /// entries left behind are named in `secrets_left`.
    pub fn remove(&self, slug: &str, force: bool) -> Result<Removed, ConnectorError> {
        let connector = self.get(slug)?;
        let has_secrets = connector.oauth.is_some()
            || match &connector.endpoint {
                Endpoint::Http { headers, .. } => !headers.is_empty(),
                Endpoint::Stdio { env, .. } => !env.is_empty(),
            };
        // The keychain entries go first: a connector left without its secrets can be removed
        // again, while secrets left without a connector would be forgotten.
        let prefix = format!("connector/{slug}/");
        let (deleted, left) = match (has_secrets, force) {
            (false, _) => (0, None),
            (true, false) => (self.secrets()?.delete_prefix(&prefix)?, None),
            (true, true) => match self.secrets().and_then(|s| Ok(s.delete_prefix(&prefix)?)) {
                Ok(n) => (n, None),
                Err(err) => (0, Some(format!("{prefix}* ({err})"))),
            },
        };
        config::update(&self.home, |file| {
            let before = file.connectors.len();
            file.connectors.retain(|c| c.slug != slug);
            if file.connectors.len() == before {
                return Err(ConnectorError::unknown(slug, &file.slugs()));
            }
            Ok(())
        })?;
        Ok(Removed {
            slug: slug.to_string(),
            removed: true,
            tools_removed: connector.enabled.len(),
            secrets_deleted: deleted,
            secrets_left: left,
        })
    }

    /// Adds the connectors of the nearest `.car/connectors.toml` that this home lacks.
    pub async fn sync(&self, project: &Path) -> Result<Synced, ConnectorError> {
        let path = team::find(project).ok_or_else(|| {
            ConnectorError::NotFound(format!(
                "no .car/connectors.toml in {} or above it; a team file lists [[connector]] entries with `name` and `url` (or `command` and `args`)",
                project.display()
            ))
        })?;
        let entries = team::read(&path)?;
        let have: BTreeSet<String> = self.list()?.into_iter().map(|c| c.slug).collect();
        let (mut added, mut skipped, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        for entry in entries {
            let slug = config::slugify(&entry.name)?;
            if have.contains(&slug) {
                skipped.push(slug);
                continue;
            }
            match self.add(entry).await {
                Ok(status) => added.push(status),
                Err(err) => failed.push(outcome::SyncFailure {
                    slug,
                    error: err.to_string(),
                }),
            }
        }
        Ok(Synced {
            file: path.display().to_string(),
            added,
            skipped,
            failed,
        })
    }

    /// Connects, lists the tools and reports how long each step took.
    pub async fn test(&self, slug: &str) -> Result<Tested, ConnectorError> {
        let connector = self.get(slug)?;
        let started = Instant::now();
        let session = self.connect(&connector).await?;
        let connect_ms = started.elapsed().as_secs_f64() * 1000.0;
        let listed_at = Instant::now();
        let listed = session.list_tools().await;
        let list_ms = listed_at.elapsed().as_secs_f64() * 1000.0;
        let server = session.server();
        session.close().await;
        let tools = listed.map_err(|err| ConnectorError::Remote {
            slug: slug.to_string(),
            message: format!("tools/list failed: {err}"),
        })?;
        Ok(Tested {
            slug: slug.to_string(),
            ok: true,
            server,
            tool_count: tools.len(),
            connect_ms: round(connect_ms),
            list_ms: round(list_ms),
            total_ms: round(started.elapsed().as_secs_f64() * 1000.0),
        })
    }
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

/// Checks a URL or command before anything is stored.
fn validate_endpoint(endpoint: &Endpoint) -> Result<(), ConnectorError> {
    match endpoint {
        Endpoint::Http { url, headers } => {
            let parsed = reqwest::Url::parse(url).map_err(|e| {
                ConnectorError::Invalid(format!(
                    "'{url}' is not a URL ({e}); give the server's MCP endpoint, e.g. https://example.com/mcp"
                ))
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(ConnectorError::Invalid(format!(
                    "'{url}' is not an http(s) URL; for a local server started as a command use --command"
                )));
            }
            for name in headers {
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(ConnectorError::Invalid(format!(
                        "'{name}' is not a valid HTTP header name"
                    )));
                }
            }
        }
        Endpoint::Stdio { command, env, .. } => {
            if command.trim().is_empty() {
                return Err(ConnectorError::Invalid("the command is empty".into()));
            }
            for name in env {
                if name.is_empty() || name.contains('=') || name.contains('\0') {
                    return Err(ConnectorError::Invalid(format!(
                        "'{name}' is not a valid environment variable name"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A connector's tools as `tools` shows them.
pub fn tool_list(connector: &Connector) -> ToolList {
    ToolList {
        slug: connector.slug.clone(),
        tools: connector
            .tools
            .iter()
            .map(|tool| ToolRow {
                name: tool.name.clone(),
                canonical: connector.canonical(&tool.name),
                description: tool.description.clone(),
                effect: tools::effect(&tool.annotations).as_str().to_string(),
                enabled: connector.enabled.contains(&tool.name),
            })
            .collect(),
    }
}
