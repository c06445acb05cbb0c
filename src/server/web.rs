//! The dashboard: `car-server`'s web face at `/`, on the MCP port and behind the same access
//! checks as `/mcp` (a loopback `Host`, a loopback `Origin` when one is sent; beyond loopback,
//! the bearer token: a browser signs in once with it at `/login` and keeps a session cookie).
//! Server-rendered HTML and one small embedded script, nothing fetched from elsewhere: every
//! byte comes from this binary, and every page works without the script.
//!
//! Every read and every change goes through the registry's tools (`memory_query`,
//! `memory_add_fact`, `memory_delete`, the project tools) with the `web` face, so the policy
//! gate judges what the page asks and the execution log records it like any other call. A
//! change is a form `POST` that must carry the page's per-browser token (the `car_csrf` cookie,
//! `SameSite=Strict`, repeated in the form) and come from this origin (`Origin`, else
//! `Sec-Fetch-Site`).
//!
//! Live pages follow `/events` (Server-Sent Events): one poller per server watches the
//! database's change counter and the gate's decision file, and each page reloads its content
//! when either moves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::policy::gate_log::shorten;
use crate::runtime::{executions, CallOptions, Context, Face};

/// The cookie holding a browser's form token.
const CSRF_COOKIE: &str = "car_csrf";
/// The form field repeating it.
const CSRF_FIELD: &str = "csrf";
/// The cookie of a browser signed in with the bearer token (beyond loopback).
const SESSION_COOKIE: &str = "car_session";
/// How long a sign-in lasts.
const SESSION_LIFE: Duration = Duration::from_secs(12 * 3600);
/// The most browsers signed in at once (the oldest sign-in goes first).
const MAX_SIGN_INS: usize = 256;
/// The largest form body read.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// How often the live poller looks for changes while a page follows them.
const POLL: Duration = Duration::from_millis(200);
/// With no page following, the gate's decisions are read every this many polls (5 s).
const IDLE_INGEST_TICKS: u32 = 25;

/// What the pages share.
#[derive(Clone)]
struct Web {
    app: App,
    /// CAR's home, for the connectors' configuration (never their secrets), the gate's decision
    /// file and the runs of `car do`.
    car_home: Option<std::path::PathBuf>,
    live: Arc<Live>,
    shutdown: CancellationToken,
    /// Beyond loopback: the bearer token, and the browsers signed in with it.
    remote: Option<Arc<Remote>>,
    /// What the health strip says of things that do not change while the server runs.
    settled: Arc<OnceLock<Settled>>,
}

/// The change feed the live pages follow: a counter that moves when the database or the
/// gate's decision file does, polled by one task started with the first follower.
struct Live {
    changes: tokio::sync::watch::Sender<u64>,
    started: std::sync::Once,
}

/// Sign-ins beyond loopback.
struct Remote {
    token: Arc<str>,
    sessions: Mutex<HashMap<String, Instant>>,
}

/// The dashboard's routes, to be served behind the Host and Origin checks of `/mcp`; `token`
/// (beyond loopback) is asked of every request, as a bearer header or a signed-in browser's
/// cookie. Live pages' streams end when `shutdown` is cancelled.
pub fn router(
    app: App,
    car_home: Option<std::path::PathBuf>,
    shutdown: CancellationToken,
    token: Option<Arc<str>>,
) -> Router {
    let web = Web {
        app,
        car_home,
        live: Arc::new(Live {
            changes: tokio::sync::watch::Sender::new(0),
            started: std::sync::Once::new(),
        }),
        shutdown,
        remote: token.map(|token| {
            Arc::new(Remote {
                token,
                sessions: Mutex::new(HashMap::new()),
            })
        }),
        settled: Arc::new(OnceLock::new()),
    };
    // The poller reads the gate's decisions from the start, not only once a page follows.
    if tokio::runtime::Handle::try_current().is_ok() {
        web.live.start(&web);
    }
    Router::new()
        .route("/", get(overview))
        .route("/memory", get(memory))
        .route("/memory/entry/{id}", get(entry))
        .route("/memory/entry/{id}/correct", axum::routing::post(correct))
        .route("/memory/entry/{id}/forget", get(forget_page).post(forget))
        .route("/tasks", get(tasks))
        .route("/tasks/{id}", get(task))
        .route("/decisions", get(decisions))
        .route("/skills", get(skills))
        .route("/connectors", get(connectors))
        .route("/audit", get(audit))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/events", get(events))
        .route("/dashboard.css", get(stylesheet))
        .route("/dashboard.js", get(script))
        .route("/dashboard-live.js", get(live_worker))
        .layer(middleware::from_fn_with_state(web.clone(), signed_in))
        .route("/login", get(login_page).post(login))
        .with_state(web)
}

/// `text` with HTML's special characters escaped, for element content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one component of a URL path or query (a space as `%20`, which both read as one).
fn url(text: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(text.as_bytes()).collect();
    encoded.replace('+', "%20")
}

/// The browser's form token: the cookie's when it sent a well-formed one, else a new one (and
/// the cookie that sets it).
fn csrf_token(headers: &HeaderMap) -> (String, Option<HeaderValue>) {
    if let Some(token) = cookie(headers, CSRF_COOKIE).filter(|t| well_formed(t)) {
        return (token, None);
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    let cookie = format!("{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    (token, HeaderValue::from_str(&cookie).ok())
}

fn well_formed(token: &str) -> bool {
    token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit())
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

/// A page that reloads its content as things change (see [`events`]).
const LIVE: bool = true;
/// A page that stays as loaded (it holds a form to fill in).
const STILL: bool = false;

/// A page: the shared frame around `main`, with the form token's cookie when it is new.
fn page(title: &str, nav: &str, main: &str, cookie: Option<HeaderValue>, live: bool) -> Response {
    let link = |href: &str, label: &str| {
        let current = if href == nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        format!("<a href=\"{href}\"{current}>{label}</a>")
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · CAR</title><link rel=\"stylesheet\" href=\"/dashboard.css\">\
<script src=\"/dashboard.js\" defer></script></head>\
<body><a class=\"skip\" href=\"#main\">Skip to content</a>\
<header><span class=\"brand\">CAR</span><nav aria-label=\"Sections\">{} {} {} {} {} {} {} {}</nav>\
<p id=\"live-status\" role=\"status\" class=\"meta\"></p></header>\
<main id=\"main\"{live}>{main}</main></body></html>\n",
        link("/", "Overview"),
        link("/memory", "Memory"),
        link("/tasks", "Tasks"),
        link("/decisions", "Decisions"),
        link("/skills", "Skills"),
        link("/connectors", "Connectors"),
        link("/audit", "Audit"),
        link("/runs", "Runs"),
        title = esc(title),
        live = if live { " data-live" } else { "" },
    );
    let mut response = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        html,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; script-src 'self'; worker-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Some(cookie) = cookie {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// A page saying what went wrong, with `status`.
fn problem(status: StatusCode, title: &str, message: &str) -> Response {
    let main = format!(
        "<h1>{}</h1><p role=\"alert\">{}</p><p><a href=\"/\">Back to the overview</a></p>",
        esc(title),
        esc(message)
    );
    let mut response = page(title, "", &main, None, STILL);
    *response.status_mut() = status;
    response
}

async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("dashboard.js"),
    )
        .into_response()
}

async fn live_worker() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("dashboard-live.js"),
    )
        .into_response()
}

/// Beyond loopback, lets through a request with the bearer token or a signed-in browser's
/// cookie; anything else gets 401 and the sign-in form.
async fn signed_in(State(web): State<Web>, request: Request, next: Next) -> Response {
    let Some(remote) = &web.remote else {
        return next.run(request).await;
    };
    let headers = request.headers();
    if super::bearer_matches(headers, &remote.token) || remote.signed_in(headers) {
        return next.run(request).await;
    }
    let mut response = sign_in_form(
        StatusCode::UNAUTHORIZED,
        "This dashboard is reached beyond loopback: sign in with the server's token.",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"car\""),
    );
    response
}

impl Remote {
    fn signed_in(&self, headers: &HeaderMap) -> bool {
        let Some(session) = cookie(headers, SESSION_COOKIE) else {
            return false;
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, at| at.elapsed() < SESSION_LIFE);
        // Looked up by value in constant time per entry, not by hash of what was sent.
        sessions
            .keys()
            .any(|known| super::tokens_match(&session, known))
    }

    /// A new sign-in's session id.
    fn sign_in(&self) -> String {
        let session = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.len() >= MAX_SIGN_INS {
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(key, _)| key.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(session.clone(), Instant::now());
        session
    }
}

fn sign_in_form(status: StatusCode, message: &str) -> Response {
    let main = format!(
        "<h1>Sign in</h1><p role=\"alert\">{}</p>\
<form method=\"post\" action=\"/login\"><label for=\"token\">Token (the server's \
<code>$CAR_HOME/daemon/token</code>)</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required>\
<button type=\"submit\">Sign in</button></form>",
        esc(message)
    );
    let mut response = page("Sign in", "", &main, None, STILL);
    *response.status_mut() = status;
    response
}

async fn login_page(State(web): State<Web>) -> Response {
    match &web.remote {
        Some(_) => sign_in_form(StatusCode::OK, "Sign in with the server's token."),
        None => see_other("/"),
    }
}

async fn login(State(web): State<Web>, headers: HeaderMap, body: axum::body::Body) -> Response {
    let Some(remote) = &web.remote else {
        return see_other("/");
    };
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .unwrap_or_default();
    let form = pairs(&String::from_utf8_lossy(&bytes));
    if let Some(why) = foreign_origin(&headers) {
        return problem(StatusCode::FORBIDDEN, "Refused", why);
    }
    let given = field(&form, "token").unwrap_or("").trim();
    if !super::tokens_match(given, &remote.token) {
        return sign_in_form(
            StatusCode::UNAUTHORIZED,
            "That is not this server's token; nothing was signed in.",
        );
    }
    let mut response = see_other("/");
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        remote.sign_in(),
        SESSION_LIFE.as_secs()
    );
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// `/events`: a Server-Sent Event `change` whenever the database or the gate's decision file
/// changed (at most one per poll), until the browser leaves or the server stops.
async fn events(State(web): State<Web>) -> Response {
    web.live.start(&web);
    let mut changes = web.live.changes.subscribe();
    changes.mark_unchanged();
    let shutdown = web.shutdown.clone();
    let stream = futures_util::stream::unfold(
        (changes, shutdown, true),
        |(mut changes, shutdown, first)| async move {
            if first {
                // Tells the page it is connected (and a test when to make its change).
                let hello = Event::default().event("ready").data("0");
                return Some((
                    Ok::<_, std::convert::Infallible>(hello),
                    (changes, shutdown, false),
                ));
            }
            tokio::select! {
                _ = shutdown.cancelled() => None,
                changed = changes.changed() => {
                    changed.ok()?;
                    let seen = *changes.borrow_and_update();
                    let event = Event::default().event("change").data(seen.to_string());
                    Some((Ok(event), (changes, shutdown, false)))
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

impl Live {
    /// Starts the poller, once: while anybody follows, it moves the gate's new decisions into
    /// the execution log and bumps the counter when the database's change counter moved.
    fn start(&self, web: &Web) {
        self.started.call_once(|| {
            let web = web.clone();
            tokio::spawn(async move {
                // A connection of its own: `data_version` moves when another connection commits.
                let path = web
                    .app
                    .runtime()
                    .store()
                    .path()
                    .map(std::path::Path::to_path_buf);
                let watcher = path.and_then(|p| {
                    rusqlite::Connection::open_with_flags(
                        p,
                        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )
                    .ok()
                });
                // Where the counter stands now, before the first follower's page reloads.
                let mut last = watcher.as_ref().and_then(|conn| {
                    conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
                        .ok()
                });
                let watcher = Arc::new(Mutex::new(watcher));
                let mut tick: u32 = 0;
                loop {
                    tokio::select! {
                        _ = web.shutdown.cancelled() => return,
                        _ = tokio::time::sleep(POLL) => {}
                    }
                    // Nobody following: only the gate's decisions move into the log, every
                    // few seconds, so none wait for a page or `car executions` to be read.
                    tick = tick.wrapping_add(1);
                    if web.live.changes.receiver_count() == 0 {
                        if tick.is_multiple_of(IDLE_INGEST_TICKS) {
                            web.ingest_gate_log().await;
                        }
                        continue;
                    }
                    let (store, gate, watcher) = (
                        web.app.runtime().store().clone(),
                        web.gate_log(),
                        watcher.clone(),
                    );
                    let (ingested, version) = tokio::task::spawn_blocking(move || {
                        let ingested = gate.map_or(0, |gate| {
                            executions::ingest_gate_log(&store, &gate).unwrap_or_else(|e| {
                                tracing::debug!("the gate's decision file: {e}");
                                0
                            })
                        });
                        let watcher = watcher.lock().unwrap_or_else(|p| p.into_inner());
                        let version = watcher.as_ref().and_then(|conn| {
                            conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
                                .ok()
                        });
                        (ingested, version)
                    })
                    .await
                    .unwrap_or((0, None));
                    let moved = version.is_some() && last.is_some() && version != last;
                    if ingested > 0 || moved {
                        web.live.changes.send_modify(|n| *n += 1);
                    }
                    if version.is_some() {
                        last = version;
                    }
                }
            });
        });
    }
}

impl Web {
    /// Moves the gate's new decisions into the execution log, before a page reads it.
    async fn ingest_gate_log(&self) {
        let Some(gate) = self.gate_log() else {
            return;
        };
        // File reads and a write transaction: off the async workers.
        let store = self.app.runtime().store().clone();
        let read = tokio::task::spawn_blocking(move || executions::ingest_gate_log(&store, &gate));
        match read.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("the gate's decision file was not read: {e}"),
            Err(e) => tracing::warn!("the gate's decision file was not read: {e}"),
        }
    }

    /// The gate's decision file, when the server has a home.
    fn gate_log(&self) -> Option<std::path::PathBuf> {
        self.car_home.as_deref().map(crate::policy::gate_log::path)
    }
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("dashboard.css"),
    )
        .into_response()
}

impl Web {
    /// Calls a registry tool as the web face; the tool's error (a policy deny among them) as
    /// text.
    async fn call(&self, tool: &str, args: Value, grant: Option<&str>) -> Result<Value, String> {
        let mut context = Context::new(Face::Web);
        if let Some(grant) = grant {
            context = context.grant(grant);
        }
        match self
            .app
            .runtime()
            .call(tool, args, &context, CallOptions::default())
            .await
        {
            Ok(outcome) => outcome.result.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The pairs of a query string or form body.
fn pairs(text: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The search form, with `query` in it.
fn search_form(query: &str) -> String {
    format!(
        "<form role=\"search\" action=\"/memory\" method=\"get\">\
<label for=\"q\">Search memory, in your own words</label>\
<input id=\"q\" name=\"q\" type=\"search\" value=\"{}\" autocomplete=\"off\">\
<button type=\"submit\">Search</button></form>",
        esc(query)
    )
}

/// What the health strip says of things that do not change while the server runs.
struct Settled {
    /// Where `car do` would run commands.
    sandbox: String,
    /// The agent hosts whose hooks run CAR's gate.
    hosts: String,
}

impl Settled {
    /// What `car doctor`'s sandbox and hosts checks say for the server's project.
    fn measure() -> Settled {
        let root = crate::home::project_root(
            &std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/")),
        );
        Settled {
            sandbox: crate::app::doctor::sandbox_in(&root)
                .unwrap_or_else(|why| format!("none: {why}")),
            hosts: crate::app::doctor::hosts_check(&root).detail,
        }
    }
}

/// The health strip's database cell: the file, its size and schema.
fn database_health(web: &Web) -> String {
    let store = web.app.runtime().store();
    let schema = store.schema_version().map_or_else(
        |e| format!("unreadable ({e})"),
        |v| {
            format!(
                "schema {v} of {}",
                crate::store::Store::supported_schema_version()
            )
        },
    );
    match store.path() {
        Some(path) => {
            let size = std::fs::metadata(path).map_or(0, |m| m.len());
            format!(
                "{} · {:.1} MB · {schema}",
                path.display(),
                size as f64 / 1e6
            )
        }
        None => format!("in memory · {schema}"),
    }
}

async fn overview(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    web.ingest_gate_log().await;
    let entries = web
        .app
        .memory()
        .map(|memory| {
            memory
                .entry_count("")
                .map_or_else(|e| e.to_string(), |n| n.to_string())
        })
        .unwrap_or_else(|| "memory is off".to_string());
    let settled = web.settled.clone();
    let settled = match tokio::task::spawn_blocking(move || {
        let s = settled.get_or_init(Settled::measure);
        (s.sandbox.clone(), s.hosts.clone())
    })
    .await
    {
        Ok(settled) => settled,
        Err(e) => (e.to_string(), e.to_string()),
    };
    let recent = executions::recent(web.app.runtime().store(), &executions::Filter::default(), 8)
        .unwrap_or_default();
    let rows: String = recent
        .iter()
        .map(|e| format!("<tr>{}</tr>", execution_cells(e)))
        .collect();
    let main = format!(
        "<h1>Overview</h1>\
<section aria-label=\"Health\" class=\"health\"><dl>\
<div><dt>Version</dt><dd>CAR {version} · MCP {protocols}</dd></div>\
<div><dt>Database</dt><dd>{database}</dd></div>\
<div><dt>Memory entries</dt><dd>{entries}</dd></div>\
<div><dt>Sandbox for car do</dt><dd>{sandbox}</dd></div>\
<div><dt>Hosts wired to the gate</dt><dd>{hosts}</dd></div></dl></section>\
{search}\
<h2>Latest calls</h2>\
<table><caption>The execution log's latest calls and the gate's decisions (<a href=\"/audit\">all</a>)</caption>\
<thead><tr><th scope=\"col\">Started</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th><th scope=\"col\">Face</th><th scope=\"col\">Host</th></tr></thead>\
<tbody>{rows}</tbody></table>",
        version = env!("CARGO_PKG_VERSION"),
        protocols = crate::mcp::PROTOCOL_VERSIONS
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        database = esc(&database_health(&web)),
        entries = esc(&entries),
        sandbox = esc(&settled.0),
        hosts = esc(&settled.1),
        search = search_form(""),
    );
    page("Overview", "/", &main, cookie, LIVE)
}

/// An execution's started, tool, outcome, face and host cells.
fn execution_cells(e: &executions::Execution) -> String {
    format!(
        "<td>{}</td><td>{}</td><td class=\"outcome-{}\">{}</td><td>{}</td><td>{}</td>",
        esc(&e.started_at),
        esc(&e.tool),
        esc(e.status.as_str()),
        esc(e.status.as_str()),
        esc(e.face.as_deref().unwrap_or("")),
        esc(e.host.as_deref().unwrap_or("")),
    )
}

/// Why a result was found, in words: the terms it matched, its similarity in meaning, the
/// bridge it came through.
fn why(why: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(terms) = why["matched"].as_array().filter(|t| !t.is_empty()) {
        let terms: Vec<String> = terms
            .iter()
            .filter_map(Value::as_str)
            .map(|t| format!("<mark>{}</mark>", esc(t)))
            .collect();
        parts.push(format!("matched {}", terms.join(", ")));
    }
    if let Some(meaning) = why["meaning"].as_f64() {
        parts.push(format!("meaning {meaning:.2}"));
    }
    if !why["via"].is_null() {
        let via = match &why["via"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        parts.push(format!("via {}", esc(&via)));
    }
    if parts.is_empty() {
        "no signal recorded".to_string()
    } else {
        parts.join("; ")
    }
}

async fn memory(State(web): State<Web>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let params = pairs(query.as_deref().unwrap_or(""));
    let q = field(&params, "q").unwrap_or("").trim().to_string();
    let notice = field(&params, "notice")
        .map(|n| format!("<p role=\"status\" class=\"notice\">{}</p>", esc(n)))
        .unwrap_or_default();
    let mut main = format!("<h1>Memory</h1>{notice}{}", search_form(&q));
    if q.is_empty() {
        main.push_str(&browse(&web, &params));
    } else {
        match web
            .call("memory_query", json!({"query": q, "k": 10}), None)
            .await
        {
            Ok(found) => {
                let results = found["results"].as_array().cloned().unwrap_or_default();
                main.push_str(&format!(
                    "<h2 id=\"results\">{} result{} for “{}”</h2><ol class=\"results\" aria-labelledby=\"results\">",
                    results.len(),
                    if results.len() == 1 { "" } else { "s" },
                    esc(&q)
                ));
                for hit in &results {
                    let id = hit["id"].as_str().unwrap_or("");
                    main.push_str(&format!(
                        "<li><a href=\"/memory/entry/{}\">{}</a> <span class=\"kind\">{}</span>\
<p>{}</p><p class=\"why\">Why: {}</p></li>",
                        url(id),
                        esc(hit["subject"].as_str().unwrap_or(id)),
                        esc(hit["kind"].as_str().unwrap_or("")),
                        esc(hit["body"].as_str().unwrap_or("")),
                        why(&hit["why"]),
                    ));
                }
                main.push_str("</ol>");
            }
            Err(e) => main.push_str(&format!("<p role=\"alert\">{}</p>", esc(&e))),
        }
    }
    page("Memory", "/memory", &main, cookie, LIVE)
}

/// How many entries a page of browsing shows.
const BROWSE_PAGE: usize = 50;

/// The kinds of entry one can browse by.
const KINDS: [crate::memory::Kind; 4] = [
    crate::memory::Kind::Pattern,
    crate::memory::Kind::Constraint,
    crate::memory::Kind::Knowledge,
    crate::memory::Kind::Procedural,
];

/// The latest entries, of one kind or all (`?kind=`), a page at a time (`?before=` a sequence
/// number).
fn browse(web: &Web, params: &[(String, String)]) -> String {
    let Some(memory) = web.app.memory() else {
        return "<p>Memory is off in this server.</p>".to_string();
    };
    let kind = field(params, "kind").and_then(crate::memory::Kind::parse);
    let before = field(params, "before").and_then(|b| b.parse::<i64>().ok());
    let link = |label: &str, value: Option<crate::memory::Kind>| {
        let current = if value == kind {
            " aria-current=\"true\""
        } else {
            ""
        };
        let href = value.map_or("/memory".to_string(), |k| {
            format!("/memory?kind={}", k.as_str())
        });
        format!("<a href=\"{href}\"{current}>{label}</a>")
    };
    let mut kinds = vec![link("all", None)];
    kinds.extend(KINDS.iter().map(|k| link(k.as_str(), Some(*k))));
    let entries = match memory.browse(kind, "", before, BROWSE_PAGE) {
        Ok(entries) => entries,
        Err(e) => return format!("<p role=\"alert\">{}</p>", esc(&e.to_string())),
    };
    let items: String = entries
        .iter()
        .map(|n| {
            format!(
                "<li><a href=\"/memory/entry/{}\">{}</a> <span class=\"kind\">{} · {}</span><p>{}</p></li>",
                url(&n.id),
                esc(&n.subject),
                esc(n.kind.as_str()),
                esc(&n.created_at),
                esc(&shorten(&n.body, 240)),
            )
        })
        .collect();
    let older = match entries.last() {
        Some(last) if entries.len() == BROWSE_PAGE => format!(
            "<p><a href=\"/memory?{}before={}\">Older entries</a></p>",
            kind.map_or(String::new(), |k| format!("kind={}&amp;", k.as_str())),
            last.seq
        ),
        _ => String::new(),
    };
    format!(
        "<nav aria-label=\"Browse by kind\" class=\"kinds\">Browse: {}</nav>\
<h2>Latest {}entries</h2><ol class=\"results\">{items}</ol>{older}",
        kinds.join(" "),
        kind.map_or(String::new(), |k| format!("{} ", k.as_str())),
    )
}

/// The entry `id`, read from the memory itself, or the page saying there is none.
fn node(web: &Web, id: &str) -> Result<crate::memory::Node, Box<Response>> {
    let found = web
        .app
        .memory()
        .ok_or_else(|| "memory is off in this server".to_string())
        .and_then(|memory| memory.get(id, "").map_err(|e| e.to_string()));
    match found {
        Ok(Some(node)) => Ok(node),
        Ok(None) => Err(Box::new(problem(
            StatusCode::NOT_FOUND,
            "No such entry",
            &format!("There is no memory entry {id}; nothing was changed."),
        ))),
        Err(e) => Err(Box::new(problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Memory",
            &e,
        ))),
    }
}

async fn entry(State(web): State<Web>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (token, cookie) = csrf_token(&headers);
    let node = match node(&web, &id) {
        Ok(node) => node,
        Err(missing) => return *missing,
    };
    let state = match (&node.superseded_by, &node.invalidated_by) {
        (Some(by), _) => format!(
            "<p class=\"notice\">Replaced by <a href=\"/memory/entry/{}\">{}</a>.</p>",
            url(by),
            esc(by)
        ),
        (None, Some(by)) => format!(
            "<p class=\"notice\">Needs review: {} (after {}).</p>",
            esc(node.invalidated_note.as_deref().unwrap_or("")),
            esc(by)
        ),
        (None, None) => String::new(),
    };
    let mut main = format!(
        "<h1>{subject}</h1>{state}<dl class=\"entry\">\
<div><dt>Id</dt><dd>{id}</dd></div><div><dt>Kind</dt><dd>{kind}</dd></div>\
<div><dt>Written</dt><dd>{created}</dd></div><div><dt>Source</dt><dd>{source}</dd></div></dl>\
<blockquote>{body}</blockquote>",
        subject = esc(&node.subject),
        id = esc(&node.id),
        kind = esc(node.kind.as_str()),
        created = esc(&node.created_at),
        source = esc(node.source.as_deref().unwrap_or("—")),
        body = esc(&node.body),
    );
    let fact = matches!(node.kind.as_str(), "pattern" | "constraint");
    if node.is_current() && fact {
        main.push_str(&format!(
            "<h2>Correct it</h2><form method=\"post\" action=\"/memory/entry/{eid}/correct\">\
<input type=\"hidden\" name=\"{CSRF_FIELD}\" value=\"{token}\">\
<label for=\"body\">What is true now (replaces this entry; the old text stays in its history)</label>\
<textarea id=\"body\" name=\"body\" rows=\"4\" required>{body}</textarea>\
<button type=\"submit\">Save the correction</button></form>",
            eid = url(&node.id),
            body = esc(&node.body),
        ));
    }
    main.push_str(&format!(
        "<h2>Forget it</h2><p><a class=\"danger\" href=\"/memory/entry/{}/forget\">Forget this entry…</a></p>",
        url(&node.id)
    ));
    if let Some(memory) = web.app.memory() {
        let links = memory
            .links_of(&node.id, "", MAX_DRAWN_LINKS)
            .unwrap_or_default();
        main.push_str(&links_section(&node, &links));
        let history = memory.history_of(&node.id, "").unwrap_or_default();
        main.push_str(&history_section(&history));
    }
    main.push_str(&writers_section(&web, &node));
    page(&node.subject, "/memory", &main, cookie, STILL)
}

/// The most links an entry's page draws.
const MAX_DRAWN_LINKS: usize = 12;

/// An entry's links: a small drawing (the entry in the middle, what it links to around it)
/// and the same as a list, which is what a screen reader reads.
fn links_section(node: &crate::memory::Node, links: &[crate::memory::LinkedEntry]) -> String {
    if links.is_empty() {
        return "<h2>Links</h2><p>No links to other entries yet.</p>".to_string();
    }
    let (width, height, radius) = (640.0_f64, 340.0_f64, 130.0_f64);
    let (cx, cy) = (width / 2.0, height / 2.0);
    let mut lines = String::new();
    let mut dots = String::new();
    for (i, link) in links.iter().enumerate() {
        let angle =
            std::f64::consts::TAU * i as f64 / links.len() as f64 - std::f64::consts::FRAC_PI_2;
        let (x, y) = (cx + radius * 1.8 * angle.cos(), cy + radius * angle.sin());
        lines.push_str(&format!(
            "<line x1=\"{cx:.0}\" y1=\"{cy:.0}\" x2=\"{x:.0}\" y2=\"{y:.0}\" stroke-width=\"{:.1}\"/>",
            1.0 + 3.0 * link.weight.clamp(0.0, 1.0)
        ));
        dots.push_str(&format!(
            "<a href=\"/memory/entry/{}\"><circle cx=\"{x:.0}\" cy=\"{y:.0}\" r=\"7\"/>\
<text x=\"{x:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text></a>",
            url(&link.node.id),
            y + 22.0,
            esc(&shorten(&link.node.subject, 28)),
        ));
    }
    let items: String = links
        .iter()
        .map(|link| {
            format!(
                "<li>{} <a href=\"/memory/entry/{}\">{}</a> <span class=\"meta\">{}, weight {:.2}{}</span></li>",
                if link.outgoing { "→" } else { "←" },
                url(&link.node.id),
                esc(&link.node.subject),
                esc(link.kind.as_str()),
                link.weight,
                if link.node.is_current() { "" } else { ", replaced" },
            )
        })
        .collect();
    format!(
        "<h2 id=\"links\">Links</h2>\
<svg class=\"graph\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-labelledby=\"links\">\
<g class=\"edges\">{lines}</g><g class=\"nodes\">{dots}</g>\
<circle class=\"self\" cx=\"{cx:.0}\" cy=\"{cy:.0}\" r=\"10\"/>\
<text class=\"self\" x=\"{cx:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text></svg>\
<ul class=\"links\">{items}</ul>",
        cy + 28.0,
        esc(&shorten(&node.subject, 32)),
    )
}

/// The versions an entry replaced, newest first.
fn history_section(history: &[crate::memory::Node]) -> String {
    if history.is_empty() {
        return String::new();
    }
    let items: String = history
        .iter()
        .map(|old| {
            format!(
                "<li><a href=\"/memory/entry/{}\">{}</a> <span class=\"meta\">{}</span><blockquote>{}</blockquote></li>",
                url(&old.id),
                esc(&old.id),
                esc(&old.created_at),
                esc(&old.body),
            )
        })
        .collect();
    format!("<h2>What it replaced</h2><ol class=\"history\">{items}</ol>")
}

/// Who wrote an entry and what touched it since, from the execution log.
fn writers_section(web: &Web, node: &crate::memory::Node) -> String {
    let filter = executions::Filter {
        subject: Some(&node.id),
        ..executions::Filter::default()
    };
    let rows = executions::recent(web.app.runtime().store(), &filter, 20).unwrap_or_default();
    if rows.is_empty() {
        return format!(
            "<h2>Written by</h2><p>No call in the execution log wrote it (it came from {}).</p>",
            esc(node
                .source
                .as_deref()
                .unwrap_or("an import or an older CAR"))
        );
    }
    let body: String = rows
        .iter()
        .map(|e| {
            format!(
                "<tr>{}<td>{}</td></tr>",
                execution_cells(e),
                e.session.as_deref().map_or(String::new(), |s| format!(
                    "<a href=\"/audit?session={}\">{}</a>",
                    url(s),
                    esc(&shorten(s, 16))
                )),
            )
        })
        .collect();
    format!(
        "<h2>Written by</h2><table><caption>The calls that wrote this entry</caption><thead><tr>\
<th scope=\"col\">Started</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th>\
<th scope=\"col\">Face</th><th scope=\"col\">Host</th><th scope=\"col\">Session</th></tr></thead>\
<tbody>{body}</tbody></table>"
    )
}

/// Why a request that changes something did not come from this dashboard's own pages, if it
/// did not: its `Origin` is not this server's, or (without one) `Sec-Fetch-Site` says another
/// site sent it.
fn foreign_origin(headers: &HeaderMap) -> Option<&'static str> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or(""))
    {
        Some(origin) => {
            let own = host.is_some_and(|host| {
                origin == format!("http://{host}") || origin == format!("https://{host}")
            });
            (!own).then_some("this change did not come from this dashboard's own pages (its Origin is another site's)")
        }
        None => {
            let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
            site.is_some_and(|site| site != "same-origin" && site != "none")
                .then_some("this change did not come from this dashboard's own pages")
        }
    }
}

/// Why a state-changing request is refused, if it is: not from this origin
/// ([`foreign_origin`]), or without the browser's form token.
fn refuse_change(headers: &HeaderMap, form: &[(String, String)]) -> Option<&'static str> {
    if let Some(why) = foreign_origin(headers) {
        return Some(why);
    }
    let cookie = cookie(headers, CSRF_COOKIE);
    let given = field(form, CSRF_FIELD);
    match (cookie, given) {
        (Some(cookie), Some(given))
            if well_formed(&cookie) && super::tokens_match(given, &cookie) =>
        {
            None
        }
        _ => Some("this form's token is missing or stale: reload the page and try again"),
    }
}

/// The form of a state-changing request, read (at most [`MAX_FORM_BYTES`]) and accepted only
/// when it comes from this dashboard's pages (see [`refuse_change`]); else the refusal.
async fn accepted_form(
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Vec<(String, String)>, Response> {
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| {
            problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                "The form is larger than the dashboard accepts.",
            )
        })?;
    let form = pairs(&String::from_utf8_lossy(&bytes));
    match refuse_change(headers, &form) {
        Some(why) => Err(problem(StatusCode::FORBIDDEN, "Refused", why)),
        None => Ok(form),
    }
}

fn see_other(location: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn correct(
    State(web): State<Web>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Body,
) -> Response {
    let form = match accepted_form(&headers, body).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    let text = field(&form, "body").unwrap_or("").trim().to_string();
    if text.is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "Nothing to save",
            "The correction is empty; nothing was changed.",
        );
    }
    let node = match node(&web, &id) {
        Ok(node) if node.is_current() => node,
        Ok(_) => {
            return problem(
                StatusCode::CONFLICT,
                "Already replaced",
                &format!("Memory entry {id} was already replaced; correct its replacement. Nothing was changed."),
            )
        }
        Err(missing) => return *missing,
    };
    let args = match node.kind.as_str() {
        "pattern" | "constraint" => {
            json!({"subject": node.subject, "body": text, "kind": node.kind.as_str()})
        }
        other => {
            return problem(
                StatusCode::BAD_REQUEST,
                "Not a fact",
                &format!("A {other} entry is corrected from its own tools; only facts here."),
            )
        }
    };
    match web.call("memory_add_fact", args, None).await {
        Ok(done) => {
            let new_id = done["id"].as_str().unwrap_or(&id).to_string();
            see_other(&format!("/memory/entry/{}", url(&new_id)))
        }
        Err(e) => problem(StatusCode::FORBIDDEN, "Not saved", &e),
    }
}

async fn forget_page(
    State(web): State<Web>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let (token, cookie) = csrf_token(&headers);
    let node = match node(&web, &id) {
        Ok(node) => node,
        Err(missing) => return *missing,
    };
    let main = format!(
        "<h1>Forget “{subject}”?</h1>\
<p>This deletes memory entry <strong>{id}</strong> for good, from every face (the CLI, MCP, \
the agents):</p><blockquote>{body}</blockquote>\
<form method=\"post\" action=\"/memory/entry/{eid}/forget\">\
<input type=\"hidden\" name=\"{CSRF_FIELD}\" value=\"{token}\">\
<button class=\"danger\" type=\"submit\">Forget {id}</button> \
<a href=\"/memory/entry/{eid}\">Keep it</a></form>",
        subject = esc(&node.subject),
        id = esc(&node.id),
        eid = url(&node.id),
        body = esc(&node.body),
    );
    page("Forget", "/memory", &main, cookie, STILL)
}

async fn forget(
    State(web): State<Web>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Body,
) -> Response {
    if let Err(refused) = accepted_form(&headers, body).await {
        return refused;
    }
    // The confirmation page named what goes: that is the confirmation memory_delete asks for.
    match web
        .call(
            "memory_delete",
            json!({"id": id}),
            Some("confirm:memory_delete"),
        )
        .await
    {
        Ok(_) => see_other(&format!("/memory?notice={}", url(&format!("Forgot {id}.")))),
        Err(e) => problem(StatusCode::FORBIDDEN, "Not forgotten", &e),
    }
}

/// The rows of a project tool's `list` (its CLI envelope's `data`), or what went wrong.
async fn listed(web: &Web, tool: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let done = web
        .call(tool, json!({"action": "list", "args": args}), None)
        .await?;
    Ok(done["data"].as_array().cloned().unwrap_or_default())
}

fn text<'a>(row: &'a Value, key: &str) -> &'a str {
    row[key].as_str().unwrap_or("")
}

/// The board's columns: (heading, the statuses in it).
const COLUMNS: [(&str, &[&str]); 4] = [
    ("Ready", &["ready", "open"]),
    ("In progress", &["claimed"]),
    ("Blocked", &["blocked"]),
    ("Done", &["done"]),
];

async fn tasks(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let rows = match listed(&web, "task_manager", &["--status", "all", "--limit", "0"]).await {
        Ok(rows) => rows,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, "Tasks", &e),
    };
    let mut main = String::from("<h1>Tasks</h1><div class=\"board\">");
    for (heading, statuses) in COLUMNS {
        let cards: Vec<&Value> = rows
            .iter()
            .filter(|t| statuses.contains(&text(t, "status")))
            .collect();
        let slug = heading.to_lowercase().replace(' ', "-");
        main.push_str(&format!(
            "<section class=\"column\" aria-labelledby=\"col-{slug}\"><h2 id=\"col-{slug}\">{heading} <span class=\"count\">{}</span></h2><ul>",
            cards.len()
        ));
        for task in cards {
            let mut details = vec![esc(text(task, "priority"))];
            if let Some(who) = task["claimedBy"].as_str() {
                details.push(format!("claimed by {}", esc(who)));
            }
            if let Some(waiting) = task["waitingOn"].as_u64().filter(|n| *n > 0) {
                details.push(format!("waits on {waiting}"));
            }
            if let Some(why) = task["blockedReason"].as_str() {
                details.push(format!("blocked: {}", esc(why)));
            }
            main.push_str(&format!(
                "<li class=\"card\"><a href=\"/tasks/{}\"><strong>{}</strong></a> {}<br><span class=\"meta\">{}</span></li>",
                url(text(task, "displayId")),
                esc(text(task, "displayId")),
                esc(text(task, "title")),
                details.join(" · ")
            ));
        }
        main.push_str("</ul></section>");
    }
    main.push_str("</div>");
    main.push_str(
        &progress(
            &web,
            &["--status", "open", "--limit", "20"],
            "Open notes and blockers",
            "No open progress note or blocker (car progress create).",
        )
        .await,
    );
    page("Tasks", "/tasks", &main, cookie, LIVE)
}

/// The progress notes `progress_tracker list ARGS` gives, under `heading` (`none` when there
/// are none), or what went wrong.
async fn progress(web: &Web, args: &[&str], heading: &str, none: &str) -> String {
    match listed(web, "progress_tracker", args).await {
        Ok(notes) => progress_section(heading, &notes, none),
        Err(e) => format!("<p role=\"alert\">{}</p>", esc(&e)),
    }
}

/// Progress notes and blockers, newest first.
fn progress_section(heading: &str, notes: &[Value], none: &str) -> String {
    if notes.is_empty() {
        return format!("<h2>{}</h2><p>{}</p>", esc(heading), esc(none));
    }
    let items: String = notes
        .iter()
        .map(|n| {
            let on = n["task"].as_str().map_or("the project".to_string(), |t| {
                format!("<a href=\"/tasks/{}\">{}</a>", url(t), esc(t))
            });
            let resolution = n["resolution"]
                .as_str()
                .map(|r| format!(" · resolved: {}", esc(r)))
                .unwrap_or_default();
            format!(
                "<li class=\"{kind}\"><span class=\"meta\">{kind} on {on} · {author} · {at} · {status}{resolution}</span><p>{body}</p></li>",
                kind = esc(text(n, "kind")),
                author = esc(text(n, "author")),
                at = esc(text(n, "createdAt")),
                status = esc(text(n, "status")),
                body = esc(text(n, "body")),
            )
        })
        .collect();
    format!("<h2>{}</h2><ul class=\"notes\">{items}</ul>", esc(heading))
}

/// A task: what it is, what it waits on and what waits on it, its history and its notes.
async fn task(State(web): State<Web>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let shown = match web
        .call(
            "task_manager",
            json!({"action": "show", "args": [id]}),
            None,
        )
        .await
    {
        Ok(shown) => shown["data"].clone(),
        Err(e) => return problem(StatusCode::NOT_FOUND, "No such task", &e),
    };
    let related = |key: &str| -> String {
        let items: Vec<String> = shown[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                format!(
                    "<a href=\"/tasks/{}\">{}</a> {} ({})",
                    url(text(t, "displayId")),
                    esc(text(t, "displayId")),
                    esc(text(t, "title")),
                    esc(text(t, "status"))
                )
            })
            .collect();
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join("; ")
        }
    };
    let events: String = shown["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(text(e, "at")),
                esc(text(e, "event")),
                esc(text(e, "actor")),
                esc(&match &e["detail"] {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
            )
        })
        .collect();
    let mut main = format!(
        "<h1>{id} {title}</h1><dl class=\"entry\">\
<div><dt>Status</dt><dd>{status}</dd></div><div><dt>Priority</dt><dd>{priority}</dd></div>\
<div><dt>Claimed by</dt><dd>{claimed}</dd></div><div><dt>Depends on</dt><dd>{depends}</dd></div>\
<div><dt>Blocks</dt><dd>{blocks}</dd></div></dl><blockquote>{description}</blockquote>\
<h2>History</h2><table><caption>What happened to this task</caption><thead><tr><th scope=\"col\">When</th>\
<th scope=\"col\">What</th><th scope=\"col\">Who</th><th scope=\"col\">Detail</th></tr></thead><tbody>{events}</tbody></table>",
        id = esc(text(&shown, "displayId")),
        title = esc(text(&shown, "title")),
        status = esc(text(&shown, "status")),
        priority = esc(text(&shown, "priority")),
        claimed = esc(shown["claimedBy"].as_str().unwrap_or("nobody")),
        depends = related("dependsOn"),
        blocks = related("blocks"),
        description = esc(text(&shown, "description")),
    );
    let display = text(&shown, "displayId").to_string();
    main.push_str(
        &progress(
            &web,
            &["--task", &display, "--status", "all", "--limit", "0"],
            "Progress notes",
            "No progress note on this task yet.",
        )
        .await,
    );
    page(&display, "/tasks", &main, cookie, LIVE)
}

async fn decisions(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let rows = match listed(&web, "decision_logger", &["--status", "all"]).await {
        Ok(rows) => rows,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, "Decisions", &e),
    };
    let body: String = rows
        .iter()
        .map(|d| {
            let superseded = d["supersededBy"]
                .as_str()
                .map(|by| format!(" (superseded by {})", esc(by)))
                .unwrap_or_default();
            format!(
                "<article class=\"decision\"><h2>{} {}</h2><p class=\"meta\">{}{superseded} · {}</p>\
<dl><dt>Decision</dt><dd>{}</dd><dt>Context</dt><dd>{}</dd><dt>Consequences</dt><dd>{}</dd></dl></article>",
                esc(text(d, "displayId")),
                esc(text(d, "title")),
                esc(text(d, "status")),
                esc(text(d, "createdAt")),
                esc(text(d, "decision")),
                esc(text(d, "context")),
                esc(text(d, "consequences")),
            )
        })
        .collect();
    let main = if body.is_empty() {
        "<h1>Decisions</h1><p>No decision recorded yet (`car decision record`).</p>".to_string()
    } else {
        format!("<h1>Decisions</h1>{body}")
    };
    page("Decisions", "/decisions", &main, cookie, LIVE)
}

async fn skills(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let listed = match web.call("skill_list", json!({}), None).await {
        Ok(listed) => listed,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, "Skills", &e),
    };
    let rows: String = listed["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|skill| {
            let stats = &skill["stats"];
            let count = |key: &str| stats[key].as_u64().unwrap_or(0);
            let flag = if skill["degraded"].as_bool() == Some(true) {
                " <span class=\"danger\">degraded</span>"
            } else {
                ""
            };
            format!(
                "<tr><td>{}{flag}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(text(skill, "name")),
                skill["version"].as_u64().unwrap_or(0),
                esc(text(skill, "platform")),
                esc(text(skill, "description")),
                count("success_count"),
                count("fail_count"),
                esc(stats["last_used_at"].as_str().unwrap_or("never")),
            )
        })
        .collect();
    let main = format!(
        "<h1>Skills</h1><table><caption>Active skills and how running them went (<code>skill_report</code>)</caption>\
<thead><tr><th scope=\"col\">Skill</th><th scope=\"col\">Version</th><th scope=\"col\">Runs on</th>\
<th scope=\"col\">What it does</th><th scope=\"col\">Worked</th><th scope=\"col\">Failed</th>\
<th scope=\"col\">Last used</th></tr></thead><tbody>{rows}</tbody></table>"
    );
    page("Skills", "/skills", &main, cookie, LIVE)
}

/// `url` without its credentials, query or fragment.
fn bare_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{rest}")
}

/// `text` (an error a connector left) with every URL in it made bare ([`bare_url`]): an HTTP
/// client's error names the URL it called, query and all.
fn bare_urls(text: &str) -> String {
    static URL: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let url =
        URL.get_or_init(|| regex::Regex::new(r#"[A-Za-z][A-Za-z0-9+.-]*://[^\s)"'<>]+"#).ok());
    match url {
        Some(url) => url
            .replace_all(text, |found: &regex::Captures| bare_url(&found[0]))
            .into_owned(),
        // Without the pattern nothing is shown rather than a URL whole.
        None => String::new(),
    }
}

/// Where a connector is reached, without anything that could hold a secret: an HTTP URL's
/// scheme, host and path (no user, no query), a program's name (no arguments).
fn reached(endpoint: &crate::connectors::Endpoint) -> String {
    match endpoint {
        crate::connectors::Endpoint::Http { url, .. } => bare_url(url),
        crate::connectors::Endpoint::Stdio { command, .. } => {
            let program = std::path::Path::new(command)
                .file_name()
                .map_or(command.clone(), |name| name.to_string_lossy().into_owned());
            format!("{program} (stdio)")
        }
    }
}

async fn connectors(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let Some(home) = &web.car_home else {
        return problem(
            StatusCode::NOT_FOUND,
            "Connectors",
            "This server has no CAR home.",
        );
    };
    let listed = match crate::connectors::Connectors::new(home.clone()).list() {
        Ok(listed) => listed,
        Err(e) => {
            return problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Connectors",
                &e.to_string(),
            )
        }
    };
    let rows: String =
        listed
            .iter()
            .map(|c| {
                let enabled: Vec<String> = c.enabled.iter().map(|t| esc(t)).collect();
                format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.slug),
                esc(&c.name),
                esc(&reached(&c.endpoint)),
                c.enabled.len(),
                c.tools.len(),
                if enabled.is_empty() { "none (disabled)".to_string() } else { enabled.join(", ") },
                esc(&bare_urls(c.last_error.as_deref().unwrap_or(""))),
            )
            })
            .collect();
    let main = format!(
        "<h1>Connectors</h1><p>Remote MCP servers whose tools CAR serves once enabled \
(<code>car connector …</code>). Their secrets stay in the OS keychain and never appear here.</p>\
<table><caption>Connectors and their enabled tools</caption><thead><tr><th scope=\"col\">Slug</th>\
<th scope=\"col\">Name</th><th scope=\"col\">Reached at</th><th scope=\"col\">Enabled</th>\
<th scope=\"col\">Enabled tools</th><th scope=\"col\">Last error</th></tr></thead><tbody>{rows}</tbody></table>"
    );
    page("Connectors", "/connectors", &main, cookie, LIVE)
}

async fn audit(State(web): State<Web>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let (_, cookie) = csrf_token(&headers);
    web.ingest_gate_log().await;
    let params = pairs(query.as_deref().unwrap_or(""));
    let given = |name: &str| {
        field(&params, name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let filter = executions::Filter {
        tool: given("tool"),
        face: given("face"),
        status: given("outcome"),
        session: given("session"),
        host: given("host"),
        subject: None,
    };
    let rows = match executions::recent(web.app.runtime().store(), &filter, 500) {
        Ok(rows) => rows,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, "Audit", &e.to_string()),
    };
    let body: String = rows
        .iter()
        .map(|e| {
            format!(
                "<tr>{}<td>{}</td><td>{}</td><td>{}</td></tr>",
                execution_cells(e),
                e.session.as_deref().map_or(String::new(), |s| format!(
                    "<a href=\"/audit?session={}\" title=\"{}\">{}</a>",
                    url(s),
                    esc(s),
                    esc(&shorten(s, 16))
                )),
                e.duration_ms.map_or(String::new(), |ms| ms.to_string()),
                esc(e.error.as_deref().unwrap_or("")),
            )
        })
        .collect();
    let input = |name: &str, label: &str, hint: &str| {
        format!(
            "<label for=\"{name}\">{label}</label><input id=\"{name}\" name=\"{name}\" value=\"{}\" placeholder=\"{hint}\">",
            esc(given(name).unwrap_or(""))
        )
    };
    let main = format!(
        "<h1>Audit</h1><form method=\"get\" action=\"/audit\" class=\"filters\">{}{}{}{}{}\
<button type=\"submit\">Filter</button></form>\
<table><caption>The execution log and the gate's denies and warnings, newest first ({} shown)</caption><thead><tr>\
<th scope=\"col\">Started</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th>\
<th scope=\"col\">Face</th><th scope=\"col\">Host</th><th scope=\"col\">Session</th><th scope=\"col\">ms</th>\
<th scope=\"col\">Error or reason</th></tr></thead><tbody>{body}</tbody></table>",
        input("tool", "Tool", ""),
        input("outcome", "Outcome", "ok, error, denied, warned…"),
        input("face", "Face", "cli, mcp, web, agent, hook"),
        input("host", "Host", "claude-code, codex, gemini…"),
        input("session", "Session", ""),
        rows.len(),
    );
    page("Audit", "/audit", &main, cookie, LIVE)
}

async fn runs(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let Some(home) = &web.car_home else {
        return problem(
            StatusCode::NOT_FOUND,
            "Runs",
            "This server has no CAR home.",
        );
    };
    let dir = home.join("runs");
    let rows: String = crate::agent::kept_runs(&dir)
        .iter()
        .take(100)
        .map(|id| {
            let (checkpoint, document) = crate::agent::kept_run(&dir, id);
            let unbacked = document["ungrounded_claims"]
                .as_array()
                .map_or(0, Vec::len);
            format!(
                "<tr><td><a href=\"/runs/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                url(id),
                esc(&shorten(id, 12)),
                esc(&shorten(checkpoint["task"].as_str().unwrap_or(""), 80)),
                esc(document["status"].as_str().unwrap_or("running or stopped")),
                checkpoint["turns"].as_u64().unwrap_or(0),
                checkpoint["receipts"].as_array().map_or(0, Vec::len),
                if unbacked > 0 {
                    format!("<span class=\"danger\">{unbacked}</span>")
                } else {
                    "0".to_string()
                },
            )
        })
        .collect();
    let main = if rows.is_empty() {
        "<h1>Runs</h1><p>No <code>car do</code> run yet.</p>".to_string()
    } else {
        format!(
            "<h1>Runs</h1><table><caption>The runs of <code>car do</code>, newest first</caption><thead><tr>\
<th scope=\"col\">Run</th><th scope=\"col\">Task</th><th scope=\"col\">Status</th><th scope=\"col\">Turns</th>\
<th scope=\"col\">Receipts</th><th scope=\"col\">Unbacked claims</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    };
    page("Runs", "/runs", &main, cookie, LIVE)
}

async fn run(State(web): State<Web>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let Some(home) = web.car_home.as_deref() else {
        return problem(
            StatusCode::NOT_FOUND,
            "No such run",
            "There is no such run.",
        );
    };
    let (checkpoint, document) = crate::agent::kept_run(&home.join("runs"), &id);
    if checkpoint.is_null() && document.is_null() {
        return problem(
            StatusCode::NOT_FOUND,
            "No such run",
            &format!("There is no run {id} in this CAR home."),
        );
    }
    let receipts: String = checkpoint["receipts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                esc(text(r, "tool")),
                if r["ok"].as_bool() == Some(true) { "ok" } else { "failed" },
                r["exit_code"].as_i64().map_or(String::new(), |c| c.to_string()),
                esc(&shorten(text(r, "subject"), 120)),
                esc(&shorten(text(r, "brief"), 160)),
                esc(&shorten(text(r, "digest"), 20)),
            )
        })
        .collect();
    let claims: String = document["ungrounded_claims"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let said = c["text"].as_str().unwrap_or("");
            let why = format!(
                "{}: needs {}",
                c["kind"].as_str().unwrap_or(""),
                c["needs"].as_str().unwrap_or("a receipt")
            );
            format!(
                "<li>{} <span class=\"meta\">{}</span></li>",
                esc(said),
                esc(&why)
            )
        })
        .collect();
    let main = format!(
        "<h1>Run {id}</h1><dl class=\"entry\"><div><dt>Status</dt><dd>{status}</dd></div>\
<div><dt>Turns</dt><dd>{turns}</dd></div><div><dt>Model</dt><dd>{model}</dd></div>\
<div><dt>Its calls</dt><dd><a href=\"/audit?session={eid}\">in the audit log</a></dd></div></dl>\
<h2>Task</h2><blockquote>{task}</blockquote><h2>Summary</h2><blockquote>{summary}</blockquote>\
<h2>Claims without a receipt</h2>{claims}\
<h2>Receipts</h2><table><caption>Every tool call of the run, what it acted on and the digest of what the model saw</caption>\
<thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">Result</th><th scope=\"col\">Exit</th><th scope=\"col\">On</th>\
<th scope=\"col\">Brief</th><th scope=\"col\">Digest</th></tr></thead><tbody>{receipts}</tbody></table>",
        id = esc(&id),
        eid = url(&id),
        status = esc(document["status"].as_str().unwrap_or("running, or stopped before it ended")),
        turns = checkpoint["turns"].as_u64().or(document["turns"].as_u64()).unwrap_or(0),
        model = esc(document["model_used"].as_str().unwrap_or("")),
        task = esc(checkpoint["task"].as_str().unwrap_or("")),
        summary = esc(document["summary"].as_str().unwrap_or("(none yet)")),
        claims = if claims.is_empty() {
            if document.is_null() {
                "<p>Checked when the run ends.</p>".to_string()
            } else {
                "<p>None: every claim of the summary has a receipt.</p>".to_string()
            }
        } else {
            format!("<ul class=\"claims\">{claims}</ul>")
        },
    );
    page(&format!("Run {id}"), "/runs", &main, cookie, LIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(url("a b/c?d+e"), "a%20b%2Fc%3Fd%2Be");
        assert_eq!(
            bare_urls(
                "error sending request for url (https://u:p@x.example/mcp?key=K#f): timed out"
            ),
            "error sending request for url (https://x.example/mcp): timed out"
        );
    }

    #[test]
    fn a_change_needs_this_origin_and_the_browsers_token() {
        let token = "0123456789abcdef0123456789abcdef";
        let headers = |origin: Option<&str>, cookie: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9102"));
            if let Some(origin) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
            }
            if let Some(cookie) = cookie {
                h.insert(header::COOKIE, HeaderValue::from_str(cookie).unwrap());
            }
            h
        };
        let form = vec![(CSRF_FIELD.to_string(), token.to_string())];
        let cookie = format!("other=1; {CSRF_COOKIE}={token}");
        assert_eq!(
            refuse_change(
                &headers(Some("http://127.0.0.1:9102"), Some(&cookie)),
                &form
            ),
            None
        );
        assert_eq!(refuse_change(&headers(None, Some(&cookie)), &form), None);
        // Another site, even another local one.
        assert!(refuse_change(
            &headers(Some("http://127.0.0.1:3000"), Some(&cookie)),
            &form
        )
        .is_some());
        assert!(
            refuse_change(&headers(Some("https://evil.example"), Some(&cookie)), &form).is_some()
        );
        // No token, or another one.
        assert!(refuse_change(&headers(None, None), &form).is_some());
        assert!(refuse_change(&headers(None, Some(&cookie)), &[]).is_some());
        let other = vec![(CSRF_FIELD.to_string(), "f".repeat(32))];
        assert!(refuse_change(&headers(None, Some(&cookie)), &other).is_some());
    }
}
