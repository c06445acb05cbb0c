//! OAuth 2.1 for HTTP connectors, as the MCP authorization spec asks, built on rmcp's `auth`
//! module (discovery, registration, PKCE, token exchange and refresh) with the tokens in the
//! keychain.
//!
//! The flow of `car connector login SLUG` ([`super::Connectors::login`]):
//! 1. An unauthenticated `initialize` POST; the server's 401 carries `WWW-Authenticate`
//!    (its `resource_metadata` URL and `scope` hint).
//! 2. Protected resource metadata (RFC 9728) names the authorization server and the resource;
//!    authorization server metadata (RFC 8414, with the OpenID Connect fallback) names its
//!    endpoints. rmcp refuses a server that offers PKCE without S256.
//! 3. The client: a pre-registered one (`--client-id`, secret from the environment or stdin),
//!    the one registered before, or a new one by dynamic client registration (RFC 7591).
//! 4. A loopback listener on `127.0.0.1` at a random port is the redirect URI. The
//!    authorization URL (code flow, PKCE S256, `state`, `resource` per RFC 8707, the scopes of
//!    the challenge or of the resource metadata) is opened by an [`Authorize`] step: the browser,
//!    a printed URL (`--no-browser`), or a custom async function (tests, the conformance client).
//! 5. The redirect's `state` must match; the code is exchanged for tokens, which rmcp hands to
//!    the [`KeychainStore`]. Then CAR connects and discovers the tools as `refresh` does; a
//!    `403 insufficient_scope` there starts one step-up authorization with the union of the
//!    granted and the challenged scopes.
//!
//! On every later connection ([`authorized_client`]) rmcp sends the access token, refreshes it
//! shortly before it expires and once more when the server answers 401. A refresh token the
//! server rejects, or no tokens at all, ends in "run `car connector login SLUG`"; a call that
//! needs more scope ends in an error naming the scope ([`challenge_error`]).
//!
//! What is stored where:
//! - keychain account `connector/<slug>/oauth` (service `car`): one JSON value
//!   `{"credentials": {client_id, token_response (access and refresh tokens, expiry),
//!   granted_scopes, token_received_at, issuer}, "client_secret": …}`;
//! - `connectors.json`: the public client metadata ([`super::config::OAuthClient`]: client id,
//!   issuer, endpoints, granted scopes, how the client was registered, redirect URI);
//! - `$CAR_HOME/oauth-<slug>.lock`: held across a refresh, so two CAR processes do not both
//!   spend a rotating refresh token.
//!
//! Tokens are never logged nor put in an error message.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, CredentialRefreshGuard, CredentialStore,
    OAuthClientConfig, StoredCredentials, WWWAuthenticateParams,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::config::OAuthClient;
use super::ConnectorError;
use crate::secrets::Secrets;

/// How long `login` waits for the browser to come back, unless told otherwise.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The name CAR registers itself under (RFC 7591 `client_name`).
const CLIENT_NAME: &str = "CAR (Common Agent Runtime)";

/// How many step-up authorizations one login may run after the first.
pub(crate) const MAX_STEP_UPS: usize = 2;

/// A future a custom [`Authorize`] step returns.
pub type AuthorizeFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// What the login tells the user while it waits (the face decides where it goes: the CLI
/// writes it to stderr).
pub type Notice = Arc<dyn Fn(&str) + Send + Sync>;

/// How the authorization URL reaches the user's browser.
#[derive(Clone)]
pub enum Authorize {
    /// Open the system browser (`open`, `xdg-open`, `start`); the URL goes to the notice too,
    /// for when no browser opens.
    Browser(Notice),
    /// Give the URL to the notice and wait (`--no-browser`).
    Print(Notice),
    /// Hand the URL to a function that plays the browser: it must end with a GET of the
    /// redirect to the loopback listener (tests and the conformance client).
    Custom(Arc<dyn Fn(String) -> AuthorizeFuture + Send + Sync>),
}

impl std::fmt::Debug for Authorize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Authorize::Browser(_) => "Browser",
            Authorize::Print(_) => "Print",
            Authorize::Custom(_) => "Custom",
        })
    }
}

/// A client registered with the authorization server out of band.
#[derive(Clone)]
pub struct PreregisteredClient {
    pub client_id: String,
    /// Goes to the keychain; absent for a public client.
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for PreregisteredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreregisteredClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .finish()
    }
}

/// What `login` was asked for.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    pub authorize: Authorize,
    pub client: Option<PreregisteredClient>,
    /// Scopes to ask for beyond those the server's challenge or metadata name.
    pub scopes: Vec<String>,
    pub timeout: Duration,
    /// The `WWW-Authenticate` value of a refused request, when the caller has one (a step-up
    /// after `403 insufficient_scope`); otherwise `login` asks the server itself.
    pub challenge: Option<String>,
}

impl LoginOptions {
    pub fn new(authorize: Authorize) -> LoginOptions {
        LoginOptions {
            authorize,
            client: None,
            scopes: Vec::new(),
            timeout: DEFAULT_LOGIN_TIMEOUT,
            challenge: None,
        }
    }
}

/// The keychain entry of one connector's OAuth state.
#[derive(Default, Serialize, Deserialize)]
struct Entry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credentials: Option<StoredCredentials>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
}

/// rmcp's [`CredentialStore`] over CAR's keychain: the account `connector/<slug>/oauth`.
/// Keychain calls block, so each runs on tokio's blocking pool.
#[derive(Clone)]
pub struct KeychainStore {
    secrets: Secrets,
    account: String,
    lock: PathBuf,
}

impl std::fmt::Debug for KeychainStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeychainStore")
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

fn store_error(err: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(err.to_string())
}

impl KeychainStore {
    pub fn new(secrets: Secrets, car_home: &Path, slug: &str) -> KeychainStore {
        KeychainStore {
            secrets,
            account: super::oauth_account(slug),
            lock: car_home.join(format!("oauth-{slug}.lock")),
        }
    }

    async fn read(&self) -> Result<Entry, ConnectorError> {
        let (secrets, account) = (self.secrets.clone(), self.account.clone());
        let text = tokio::task::spawn_blocking(move || secrets.get(&account))
            .await
            .map_err(|e| ConnectorError::Secrets(format!("the keychain task failed: {e}")))??;
        match text {
            None => Ok(Entry::default()),
            // The value's text stays out of the message: it holds tokens.
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                ConnectorError::Secrets(format!(
                    "the keychain entry {} is not CAR's OAuth state (line {}, column {}); run `car connector logout` and log in again",
                    self.account,
                    e.line(),
                    e.column()
                ))
            }),
        }
    }

    async fn write(&self, entry: Entry) -> Result<(), ConnectorError> {
        let (secrets, account) = (self.secrets.clone(), self.account.clone());
        let empty = entry.credentials.is_none() && entry.client_secret.is_none();
        let text = serde_json::to_string(&entry)
            .map_err(|e| ConnectorError::Secrets(format!("cannot encode the OAuth state: {e}")))?;
        tokio::task::spawn_blocking(move || {
            if empty {
                secrets.delete(&account).map(|_| ())
            } else {
                secrets.set(&account, &text)
            }
        })
        .await
        .map_err(|e| ConnectorError::Secrets(format!("the keychain task failed: {e}")))??;
        Ok(())
    }

    /// The stored credentials, if any.
    pub async fn credentials(&self) -> Result<Option<StoredCredentials>, ConnectorError> {
        Ok(self.read().await?.credentials)
    }

    /// The stored client secret of a pre-registered (or confidential) client.
    pub async fn client_secret(&self) -> Result<Option<String>, ConnectorError> {
        Ok(self.read().await?.client_secret)
    }

    pub async fn set_client_secret(&self, secret: Option<String>) -> Result<(), ConnectorError> {
        let mut entry = self.read().await?;
        entry.client_secret = secret;
        self.write(entry).await
    }

    /// Forgets the tokens and keeps a client secret. Says whether there were tokens.
    pub async fn forget_tokens(&self) -> Result<bool, ConnectorError> {
        let mut entry = self.read().await?;
        let had = entry.credentials.take().is_some();
        self.write(entry).await?;
        Ok(had)
    }
}

#[async_trait::async_trait]
impl CredentialStore for KeychainStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.credentials().await.map_err(store_error)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut entry = self.read().await.map_err(store_error)?;
        entry.credentials = Some(credentials);
        self.write(entry).await.map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.forget_tokens().await.map(|_| ()).map_err(store_error)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let path = self.lock.clone();
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(store_error)?
        .map_err(|e| store_error(format!("cannot lock {}: {e}", self.lock.display())))?;
        Ok(Some(CredentialRefreshGuard::new(file)))
    }
}

/// Turns an OAuth failure into a connector error without any token in it.
pub(crate) fn oauth_error(slug: &str, err: AuthError) -> ConnectorError {
    match err {
        AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
            ConnectorError::AuthRequired {
                slug: slug.to_string(),
            }
        }
        AuthError::InsufficientScope { required_scope, .. } => ConnectorError::InsufficientScope {
            slug: slug.to_string(),
            scope: required_scope,
        },
        other => ConnectorError::OAuth {
            slug: slug.to_string(),
            message: other.to_string(),
        },
    }
}

/// What a refused request's `WWW-Authenticate` challenge means for the user: log in, or log in
/// again asking for the scope named.
pub fn challenge_error(slug: &str, url: &str, challenge: &str) -> ConnectorError {
    let params = reqwest::Url::parse(url)
        .map(|base| WWWAuthenticateParams::parse(challenge, &base))
        .unwrap_or_default();
    match (params.is_insufficient_scope(), params.scope) {
        (true, Some(scope)) if !scope.trim().is_empty() => ConnectorError::InsufficientScope {
            slug: slug.to_string(),
            scope,
        },
        _ => ConnectorError::AuthRequired {
            slug: slug.to_string(),
        },
    }
}

/// Whether a challenge asks for more scope (a step-up) rather than for a login.
pub fn is_insufficient_scope(url: &str, challenge: &str) -> bool {
    reqwest::Url::parse(url)
        .map(|base| WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope())
        .unwrap_or(false)
}

/// An rmcp HTTP client that authorizes every request with the connector's stored tokens,
/// refreshing them as needed. `None` when there are no tokens (the server's 401 then says to
/// log in).
pub async fn authorized_client(
    slug: &str,
    url: &str,
    client: &OAuthClient,
    store: KeychainStore,
) -> Result<Option<AuthClient<reqwest::Client>>, ConnectorError> {
    let stored = store.read().await?;
    if stored.credentials.is_none() {
        return Ok(None);
    }
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| oauth_error(slug, e))?;
    manager.set_credential_store(store);
    // Fresh discovery keeps the RFC 8707 resource and a moved endpoint right; the metadata
    // saved at login stands in when the servers cannot be asked.
    let metadata = match manager.resolve_metadata().await {
        Ok(resolution) => resolution.metadata,
        Err(err) => {
            tracing::debug!(target: "car::connectors", slug, "OAuth discovery failed, using the saved endpoints: {err}");
            saved_metadata(slug, client)?
        }
    };
    manager.set_metadata(metadata);
    let redirect = client
        .redirect_uri
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1/callback".to_string());
    let mut config = OAuthClientConfig::new(client.client_id.clone(), redirect);
    if let Some(secret) = stored.client_secret {
        config = config.with_client_secret(secret);
    }
    manager
        .configure_client(config)
        .map_err(|e| oauth_error(slug, e))?;
    Ok(Some(AuthClient::new(reqwest::Client::default(), manager)))
}

fn saved_metadata(
    slug: &str,
    client: &OAuthClient,
) -> Result<AuthorizationMetadata, ConnectorError> {
    let (Some(authorization_endpoint), Some(token_endpoint)) =
        (&client.authorization_endpoint, &client.token_endpoint)
    else {
        return Err(ConnectorError::AuthRequired {
            slug: slug.to_string(),
        });
    };
    let mut metadata = AuthorizationMetadata::default();
    metadata.authorization_endpoint = authorization_endpoint.clone();
    metadata.token_endpoint = token_endpoint.clone();
    metadata.issuer = client.issuer.clone();
    Ok(metadata)
}

/// Asks the server without credentials and returns its `WWW-Authenticate` challenge, if it
/// answers 401 or 403 with one.
pub(crate) async fn probe_challenge(url: &str) -> Option<String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "car", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .ok()?;
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The outcome of one authorization.
pub(crate) struct Authorized {
    pub client: OAuthClient,
    pub manager: AuthorizationManager,
}

/// Runs one authorization-code flow and leaves the tokens in `store`.
pub(crate) async fn authorize(
    slug: &str,
    url: &str,
    previous: Option<&OAuthClient>,
    store: &KeychainStore,
    options: &LoginOptions,
    challenge: Option<&str>,
) -> Result<Authorized, ConnectorError> {
    let fail = |e: AuthError| oauth_error(slug, e);
    let mut manager = AuthorizationManager::new(url).await.map_err(fail)?;
    manager.set_credential_store(store.clone());
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| ConnectorError::OAuth {
            slug: slug.to_string(),
            message: format!("cannot discover the authorization server: {e}"),
        })?;
    let metadata = resolution.metadata;
    manager.set_metadata(metadata.clone());

    let listener = Loopback::bind().await?;
    let redirect_uri = listener.redirect_uri();

    // Scopes: a step-up asks for what was granted plus what the challenge names (SEP-2350);
    // a first login takes the challenge's or the resource metadata's.
    let step_up = challenge.is_some_and(|c| is_insufficient_scope(url, c));
    let mut scopes = if step_up {
        let granted = store
            .credentials()
            .await?
            .map(|c| c.granted_scopes)
            .unwrap_or_default();
        let challenged = challenge
            .and_then(|c| {
                reqwest::Url::parse(url)
                    .ok()
                    .map(|b| WWWAuthenticateParams::parse(c, &b))
            })
            .and_then(|p| p.scope)
            .unwrap_or_default();
        let mut all = granted;
        all.extend(challenged.split_whitespace().map(str::to_string));
        all
    } else {
        manager.select_initial_scopes(&[]).await
    };
    for scope in &options.scopes {
        scopes.extend(scope.split_whitespace().map(str::to_string));
    }
    let mut seen = std::collections::BTreeSet::new();
    scopes.retain(|s| seen.insert(s.clone()));

    // The client: given now, registered before by hand, or registered now.
    let reused = previous.filter(|p| p.registration == "preregistered");
    let (client_id, client_secret, registration) = match (&options.client, reused) {
        (Some(given), _) => (
            given.client_id.clone(),
            given.client_secret.clone(),
            "preregistered",
        ),
        (None, Some(before)) => (
            before.client_id.clone(),
            store.client_secret().await?,
            "preregistered",
        ),
        (None, None) => {
            if metadata.registration_endpoint.is_none() {
                return Err(ConnectorError::OAuth {
                    slug: slug.to_string(),
                    message: "the authorization server does not offer dynamic client registration; register CAR with it (redirect URI http://127.0.0.1/callback, any port) and run `car connector login SLUG --client-id ID` (a secret is read from CAR_OAUTH_CLIENT_SECRET)".to_string(),
                });
            }
            let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let registered = manager
                .register_client(CLIENT_NAME, &redirect_uri, &refs)
                .await
                .map_err(fail)?;
            (registered.client_id, registered.client_secret, "dynamic")
        }
    };
    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_preregistered_client(client_id.clone())
        .with_scopes(scopes.clone());
    if let Some(secret) = &client_secret {
        request = request.with_client_secret(secret.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| fail(e))?;
    let auth_url = session.get_authorization_url().to_string();
    let expected_state = reqwest::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default();

    let waiting = tokio::spawn(listener.wait(options.timeout));
    let opened = open(&options.authorize, slug, auth_url).await;
    if let Err(message) = opened {
        waiting.abort();
        return Err(ConnectorError::OAuth {
            slug: slug.to_string(),
            message,
        });
    }
    let callback = waiting
        .await
        .map_err(|e| ConnectorError::OAuth {
            slug: slug.to_string(),
            message: format!("the loopback listener failed: {e}"),
        })?
        .map_err(|message| ConnectorError::OAuth {
            slug: slug.to_string(),
            message,
        })?;
    if callback.csrf_token != expected_state {
        return Err(ConnectorError::OAuth {
            slug: slug.to_string(),
            message: "the redirect's state does not match the request's; nothing was stored (run the login again)".to_string(),
        });
    }
    session
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(fail)?;
    store.set_client_secret(client_secret).await?;
    let granted = store
        .credentials()
        .await?
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    Ok(Authorized {
        client: OAuthClient {
            client_id,
            issuer: metadata.issuer.clone(),
            authorization_endpoint: Some(metadata.authorization_endpoint.clone()),
            token_endpoint: Some(metadata.token_endpoint.clone()),
            scopes: granted,
            registration: registration.to_string(),
            redirect_uri: Some(redirect_uri),
        },
        manager: session.auth_manager,
    })
}

/// Gets the authorization URL to the user (or to the custom step).
async fn open(how: &Authorize, slug: &str, url: String) -> Result<(), String> {
    match how {
        Authorize::Custom(step) => step(url).await,
        Authorize::Print(notice) => {
            notice(&format!("To authorize CAR for connector '{slug}', open this URL in a browser:\n\n  {url}\n\nWaiting for the authorization server to redirect back…"));
            Ok(())
        }
        Authorize::Browser(notice) => {
            let opened = open_browser(&url);
            if opened {
                notice(&format!("Opened the browser to authorize CAR for connector '{slug}'. If it did not open, visit:\n\n  {url}\n\nWaiting for the authorization server to redirect back…"));
            } else {
                notice(&format!("Could not open a browser. To authorize CAR for connector '{slug}', open this URL:\n\n  {url}\n\nWaiting for the authorization server to redirect back…"));
            }
            Ok(())
        }
    }
}

fn open_browser(url: &str) -> bool {
    let mut command = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        std::process::Command::new("xdg-open")
    };
    command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The redirect listener on `127.0.0.1` (RFC 8252 §7.3).
struct Loopback {
    listener: tokio::net::TcpListener,
    port: u16,
}

/// How long one connection to the loopback listener may take to send its request line.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(3);

const CLOSE_TAB: &str = "<!doctype html><meta charset=utf-8><title>CAR</title><body style=\"font-family:sans-serif\"><h1>CAR is authorized</h1><p>You can close this tab and go back to the terminal.</p></body>";
const FAILED_TAB: &str = "<!doctype html><meta charset=utf-8><title>CAR</title><body style=\"font-family:sans-serif\"><h1>Authorization failed</h1><p>The terminal says why. You can close this tab.</p></body>";

impl Loopback {
    async fn bind() -> Result<Loopback, ConnectorError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| {
                ConnectorError::Io(format!(
                    "cannot listen on 127.0.0.1 for the OAuth redirect: {e}"
                ))
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| ConnectorError::Io(format!("cannot read the listener's port: {e}")))?
            .port();
        Ok(Loopback { listener, port })
    }

    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the redirect to `/callback`, answers the browser, and returns its parameters.
    async fn wait(self, timeout: Duration) -> Result<AuthorizationCallback, String> {
        let secs = timeout.as_secs();
        tokio::time::timeout(timeout, self.accept_callback())
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no authorization came back within {secs} s; run the login again (with --no-browser to open the URL yourself)"
                ))
            })
    }

    async fn accept_callback(self) -> Result<AuthorizationCallback, String> {
        loop {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| format!("the loopback listener failed: {e}"))?;
            // Browsers open speculative connections that never send a request: give each
            // connection a few seconds, then go back to accepting.
            let mut buffer = Vec::new();
            let read_head = async {
                let mut chunk = [0u8; 2048];
                while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < 16 * 1024 {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
            };
            if tokio::time::timeout(REQUEST_HEAD_TIMEOUT, read_head)
                .await
                .is_err()
                || buffer.is_empty()
            {
                continue;
            }
            let head = String::from_utf8_lossy(&buffer);
            let target = head
                .lines()
                .next()
                .and_then(|line| line.split_whitespace().nth(1))
                .unwrap_or("/")
                .to_string();
            if !target.starts_with("/callback") {
                let _ = respond(&mut stream, "404 Not Found", "not found").await;
                continue;
            }
            let full = format!("http://127.0.0.1:{}{}", self.port, target);
            let parsed = reqwest::Url::parse(&full).map_err(|e| e.to_string())?;
            let query = |key: &str| {
                parsed
                    .query_pairs()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.into_owned())
            };
            if let Some(error) = query("error") {
                let _ = respond(&mut stream, "400 Bad Request", FAILED_TAB).await;
                let description = query("error_description")
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                return Err(format!(
                    "the authorization server refused: {error}{description}"
                ));
            }
            return match AuthorizationCallback::from_redirect_url(&full) {
                Ok(callback) => {
                    let _ = respond(&mut stream, "200 OK", CLOSE_TAB).await;
                    Ok(callback)
                }
                Err(err) => {
                    let _ = respond(&mut stream, "400 Bad Request", FAILED_TAB).await;
                    Err(format!(
                        "the redirect is not an authorization response: {err}"
                    ))
                }
            };
        }
    }
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_loopback_listener_skips_idle_and_stray_connections() {
        let loopback = Loopback::bind().await.unwrap();
        let port = loopback.port;
        let waiting = tokio::spawn(loopback.wait(Duration::from_secs(30)));
        // A browser's speculative connection that sends nothing, then a stray request.
        let _idle = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut stray = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stray
            .write_all(b"GET /favicon.ico HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stray.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let mut real = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        real.write_all(b"GET /callback?code=c0de&state=st4te HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut page = String::new();
        real.read_to_string(&mut page).await.unwrap();
        assert!(page.contains("close this tab"), "{page}");
        let callback = waiting.await.unwrap().unwrap();
        assert_eq!(callback.code, "c0de");
        assert_eq!(callback.csrf_token, "st4te");
    }

    #[tokio::test]
    async fn a_refusal_from_the_authorization_server_is_reported() {
        let loopback = Loopback::bind().await.unwrap();
        let port = loopback.port;
        let waiting = tokio::spawn(loopback.wait(Duration::from_secs(30)));
        let mut real = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        real.write_all(
            b"GET /callback?error=access_denied&error_description=user+said+no HTTP/1.1\r\n\r\n",
        )
        .await
        .unwrap();
        let err = waiting.await.unwrap().unwrap_err();
        assert!(err.contains("access_denied: user said no"), "{err}");
    }
}
