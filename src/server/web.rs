//! The dashboard: `car-server`'s web face at `/`, on the MCP port and behind the same access
//! checks as `/mcp` (a loopback `Host`, a loopback `Origin` when one is sent, the bearer token
//! beyond loopback). Server-rendered HTML, no script, nothing fetched: every byte comes from this
//! binary.
//!
//! Every read and every change goes through the registry's tools (`memory_query`,
//! `memory_add_fact`, `memory_delete`) with the `web` face, so the policy gate judges what the
//! page asks and the execution log records it like any other call. A change is a form `POST`
//! that must carry the page's per-browser token (the `car_csrf` cookie, `SameSite=Strict`,
//! repeated in the form) and come from this origin (`Origin`, else `Sec-Fetch-Site`).

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::app::App;
use crate::runtime::{executions, CallOptions, Context, Face};

/// The cookie holding a browser's form token.
const CSRF_COOKIE: &str = "car_csrf";
/// The form field repeating it.
const CSRF_FIELD: &str = "csrf";
/// The largest form body read.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// What the pages share.
#[derive(Clone)]
struct Web {
    app: App,
    /// CAR's home, for the connectors' configuration (never their secrets).
    car_home: Option<std::path::PathBuf>,
}

/// The dashboard's routes, to be served behind the access checks of `/mcp`.
pub fn router(app: App, car_home: Option<std::path::PathBuf>) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/memory", get(memory))
        .route("/memory/entry/{id}", get(entry))
        .route("/memory/entry/{id}/correct", axum::routing::post(correct))
        .route("/memory/entry/{id}/forget", get(forget_page).post(forget))
        .route("/tasks", get(tasks))
        .route("/decisions", get(decisions))
        .route("/skills", get(skills))
        .route("/connectors", get(connectors))
        .route("/audit", get(audit))
        .route("/dashboard.css", get(stylesheet))
        .with_state(Web { app, car_home })
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

/// A page: the shared frame around `main`, with the form token's cookie when it is new.
fn page(title: &str, nav: &str, main: &str, cookie: Option<HeaderValue>) -> Response {
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
<title>{title} · CAR</title><link rel=\"stylesheet\" href=\"/dashboard.css\"></head>\
<body><a class=\"skip\" href=\"#main\">Skip to content</a>\
<header><span class=\"brand\">CAR</span><nav aria-label=\"Sections\">{} {} {} {} {} {} {}</nav></header>\
<main id=\"main\">{main}</main></body></html>\n",
        link("/", "Overview"),
        link("/memory", "Memory"),
        link("/tasks", "Tasks"),
        link("/decisions", "Decisions"),
        link("/skills", "Skills"),
        link("/connectors", "Connectors"),
        link("/audit", "Audit"),
        title = esc(title),
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
            "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
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
    let mut response = page(title, "", &main, None);
    *response.status_mut() = status;
    response
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

async fn overview(State(web): State<Web>, headers: HeaderMap) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let entries = web
        .app
        .memory()
        .map(|memory| {
            memory
                .entry_count("")
                .map_or_else(|e| e.to_string(), |n| n.to_string())
        })
        .unwrap_or_else(|| "memory is off".to_string());
    let recent = executions::recent(web.app.runtime().store(), &executions::Filter::default(), 8)
        .unwrap_or_default();
    let rows: String = recent
        .iter()
        .map(|e| format!("<tr>{}</tr>", execution_cells(e)))
        .collect();
    let main = format!(
        "<h1>Overview</h1>\
<section aria-label=\"Health\" class=\"health\"><dl>\
<div><dt>Version</dt><dd>{version}</dd></div>\
<div><dt>Memory entries</dt><dd>{entries}</dd></div></dl></section>\
{search}\
<h2>Latest calls</h2>\
<table><caption>The execution log's latest calls (<a href=\"/audit\">all</a>)</caption>\
<thead><tr><th scope=\"col\">Started</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th><th scope=\"col\">Face</th></tr></thead>\
<tbody>{rows}</tbody></table>",
        version = env!("CARGO_PKG_VERSION"),
        entries = esc(&entries),
        search = search_form(""),
    );
    page("Overview", "/", &main, cookie)
}

/// An execution's started, tool, outcome and face cells.
fn execution_cells(e: &executions::Execution) -> String {
    format!(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        esc(&e.started_at),
        esc(&e.tool),
        esc(e.status.as_str()),
        esc(e.face.as_deref().unwrap_or("")),
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
    if !q.is_empty() {
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
    page("Memory", "/memory", &main, cookie)
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
    page(&node.subject, "/memory", &main, cookie)
}

/// Why a state-changing request is refused, if it is: not from this origin, or without the
/// browser's form token.
fn refuse_change(headers: &HeaderMap, form: &[(String, String)]) -> Option<&'static str> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or(""))
    {
        Some(origin) => {
            let own = host.is_some_and(|host| {
                origin == format!("http://{host}") || origin == format!("https://{host}")
            });
            if !own {
                return Some("this change did not come from this dashboard's own pages (its Origin is another site's)");
            }
        }
        None => {
            let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
            if site.is_some_and(|site| site != "same-origin" && site != "none") {
                return Some("this change did not come from this dashboard's own pages");
            }
        }
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
    page("Forget", "/memory", &main, cookie)
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
                "<li class=\"card\"><strong>{}</strong> {}<br><span class=\"meta\">{}</span></li>",
                esc(text(task, "displayId")),
                esc(text(task, "title")),
                details.join(" · ")
            ));
        }
        main.push_str("</ul></section>");
    }
    main.push_str("</div>");
    page("Tasks", "/tasks", &main, cookie)
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
    page("Decisions", "/decisions", &main, cookie)
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
    page("Skills", "/skills", &main, cookie)
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
    page("Connectors", "/connectors", &main, cookie)
}

async fn audit(State(web): State<Web>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let (_, cookie) = csrf_token(&headers);
    let params = pairs(query.as_deref().unwrap_or(""));
    let tool = field(&params, "tool")
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let face = field(&params, "face")
        .map(str::trim)
        .filter(|f| !f.is_empty());
    let outcome = field(&params, "outcome")
        .map(str::trim)
        .filter(|o| !o.is_empty());
    let filter = executions::Filter {
        tool,
        face,
        status: outcome,
    };
    let rows = match executions::recent(web.app.runtime().store(), &filter, 500) {
        Ok(rows) => rows,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, "Audit", &e.to_string()),
    };
    let body: String = rows
        .iter()
        .map(|e| {
            format!(
                "<tr>{}<td>{}</td><td>{}</td></tr>",
                execution_cells(e),
                e.duration_ms.map_or(String::new(), |ms| ms.to_string()),
                esc(e.error.as_deref().unwrap_or("")),
            )
        })
        .collect();
    let value = |v: Option<&str>| esc(v.unwrap_or(""));
    let main = format!(
        "<h1>Audit</h1><form method=\"get\" action=\"/audit\" class=\"filters\">\
<label for=\"tool\">Tool</label><input id=\"tool\" name=\"tool\" value=\"{}\">\
<label for=\"outcome\">Outcome</label><input id=\"outcome\" name=\"outcome\" value=\"{}\" placeholder=\"ok, error, denied…\">\
<label for=\"face\">Face</label><input id=\"face\" name=\"face\" value=\"{}\" placeholder=\"cli, mcp, web, agent\">\
<button type=\"submit\">Filter</button></form>\
<table><caption>The execution log, newest first</caption><thead><tr>\
<th scope=\"col\">Started</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th>\
<th scope=\"col\">Face</th><th scope=\"col\">ms</th><th scope=\"col\">Error</th></tr></thead>\
<tbody>{body}</tbody></table>",
        value(tool),
        value(outcome),
        value(face),
    );
    page("Audit", "/audit", &main, cookie)
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
