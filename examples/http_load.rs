//! Load on an MCP server over streamable HTTP: C concurrent clients (one session each) call one
//! tool back to back for S seconds; prints calls per second and p50/p99 latency as JSON.
//! `scripts/bench-http.sh` runs it against car-server (`memory_query` at 10k facts) and
//! against `@modelcontextprotocol/server-everything` (`echo`) in the same run.
//!
//! `cargo run --release --example http_load -- URL TOOL ARGS_JSON [CLIENTS] [SECONDS]`
//!
//! ARGS_JSON is one arguments object, or an array of them (or `@FILE` holding either): with an
//! array, each client walks it from its own offset, so the calls ask different questions.
//! CLIENT is `rmcp` (default: rmcp's MCP client, a GET stream per session) or `raw` (plain HTTP
//! POSTs, the least client work per call).
//!
//! `cargo run --release --example http_load -- URL TOOL ARGS_JSON CLIENTS SECONDS [rmcp|raw]`
//!
//! In raw mode, `HTTP_LOAD_TOKEN` is sent as a bearer token (a team server's user), and
//! `HTTP_LOAD_COUNT=N` makes exactly N calls in all, each argument once (writes: the clients
//! share one walk of the array), and reports calls per second over the time they took.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)] // an example

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args
        .first()
        .expect("usage: http_load URL TOOL ARGS_JSON [CLIENTS] [SECONDS]")
        .clone();
    let tool = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "memory_query".into());
    let text = args
        .get(2)
        .map_or("{}".to_string(), |a| match a.strip_prefix('@') {
            Some(file) => std::fs::read_to_string(file).expect("ARGS_JSON file"),
            None => a.clone(),
        });
    let arguments: Vec<Value> = match serde_json::from_str(&text).expect("ARGS_JSON") {
        Value::Array(many) => many,
        one => vec![one],
    };
    let distinct = arguments.len();
    let clients: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(16);
    let seconds: u64 = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(10);
    let raw = args.get(5).is_some_and(|m| m == "raw");
    if raw {
        let count: Option<usize> = std::env::var("HTTP_LOAD_COUNT")
            .ok()
            .and_then(|n| n.parse().ok());
        let shared = count.map(|_| std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)));
        let started = Instant::now();
        let deadline = match count {
            Some(_) => started + Duration::from_secs(3600),
            None => started + Duration::from_secs(seconds),
        };
        let workers: Vec<_> = (0..clients)
            .map(|n| {
                tokio::spawn(raw_worker(
                    url.clone(),
                    tool.clone(),
                    arguments.clone(),
                    Walk {
                        next: n * 7919,
                        shared: shared.clone().zip(count),
                    },
                    deadline,
                ))
            })
            .collect();
        let mut results = Vec::new();
        for worker in workers {
            results.push(worker.await.unwrap());
        }
        let elapsed = match count {
            Some(_) => started.elapsed().as_secs_f64(),
            None => seconds as f64,
        };
        report(&url, &tool, distinct, clients, elapsed, "raw", results);
        return;
    }
    let mut sessions = Vec::new();
    for _ in 0..clients {
        let transport = StreamableHttpClientTransport::from_uri(url.as_str());
        sessions.push(().serve(transport).await.expect("connect"));
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = Vec::new();
    for (n, session) in sessions.into_iter().enumerate() {
        let (tool, arguments) = (tool.clone(), arguments.clone());
        let mut next = n * 7919;
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            while Instant::now() < deadline {
                let started = Instant::now();
                let args = &arguments[next % arguments.len()];
                next += 1;
                let params = CallToolRequestParams::new(tool.clone())
                    .with_arguments(args.as_object().cloned().unwrap_or_default());
                match session.call_tool(params).await {
                    Ok(result) if result.is_error != Some(true) => {
                        latencies.push(started.elapsed())
                    }
                    Ok(_) | Err(_) => errors += 1,
                }
            }
            let _ = session.cancel().await;
            (latencies, errors)
        }));
    }
    let mut results = Vec::new();
    for worker in workers {
        results.push(worker.await.unwrap());
    }
    report(
        &url,
        &tool,
        distinct,
        clients,
        seconds as f64,
        "rmcp",
        results,
    );
}

/// Which argument a raw client sends next: its own walk from an offset, or (with a count) the
/// next of one walk all clients share, until the count is reached.
struct Walk {
    next: usize,
    shared: Option<(std::sync::Arc<std::sync::atomic::AtomicUsize>, usize)>,
}

impl Walk {
    fn take(&mut self) -> Option<usize> {
        match &self.shared {
            Some((counter, count)) => {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (n < *count).then_some(n)
            }
            None => {
                self.next += 1;
                Some(self.next - 1)
            }
        }
    }
}

/// One session driven with plain HTTP requests (no MCP client library): `initialize`, then
/// `tools/call` back to back, each answer read to its end. Less client work than rmcp's client,
/// so more of the machine measures the server.
async fn raw_worker(
    url: String,
    tool: String,
    arguments: Vec<Value>,
    mut walk: Walk,
    deadline: Instant,
) -> (Vec<Duration>, usize) {
    let client = reqwest::Client::new();
    let token = std::env::var("HTTP_LOAD_TOKEN").ok();
    let post = |body: Value, session: Option<String>| {
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(token) = &token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.body(body.to_string()).send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "http_load", "version": "1"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = init.text().await;
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session.clone(),
    )
    .await
    .map(|r| r.bytes());
    let mut latencies = Vec::new();
    let mut errors = 0usize;
    let mut id = 1u64;
    while Instant::now() < deadline {
        let Some(next) = walk.take() else { break };
        let args = &arguments[next % arguments.len()];
        id += 1;
        let started = Instant::now();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}});
        match post(body, session.clone()).await {
            Ok(response) => match response.text().await {
                Ok(text) if text.contains("\"result\"") && !text.contains("\"isError\":true") => {
                    latencies.push(started.elapsed())
                }
                _ => errors += 1,
            },
            Err(_) => errors += 1,
        }
    }
    (latencies, errors)
}

/// Prints calls per second and p50/p99 latency over every worker's calls.
fn report(
    url: &str,
    tool: &str,
    distinct: usize,
    clients: usize,
    seconds: f64,
    client: &str,
    results: Vec<(Vec<Duration>, usize)>,
) {
    let mut all = Vec::new();
    let mut errors = 0;
    for (latencies, failed) in results {
        all.extend(latencies);
        errors += failed;
    }
    all.sort();
    let at = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{}",
        json!({"url": url, "tool": tool, "client": client, "distinct_arguments": distinct,
               "clients": clients, "seconds": seconds, "calls": all.len(), "errors": errors,
               "calls_per_second": all.len() as f64 / seconds, "p50_ms": at(0.5), "p99_ms": at(0.99)})
    );
}
