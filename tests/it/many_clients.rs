//! Many clients on one engine: a client's cancellation stops only its own call, a slow tool
//! does not hold up other clients, and writers on every face at once — two car-mcp processes,
//! the CLI and HTTP clients of car-server — lose nothing.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use car::server::Exposure;
use car::{App, Effect, Memory, Tool, ToolError, ToolSpec};
use rmcp::model::{CallToolRequestParams, CancelledNotificationParam, ClientRequest};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::TestHome;

/// What the `wait` tool saw: labels whose call started, and labels whose call was cancelled.
#[derive(Default)]
struct Seen {
    started: HashSet<String>,
    cancelled: HashSet<String>,
}

/// car-server's router in-process, over memory and a `wait {label, ms}` tool that records
/// when it starts and when it is cancelled.
async fn serve(seen: Arc<Mutex<Seen>>, shutdown: CancellationToken) -> String {
    let wait = Tool::new(
        ToolSpec::new(
            "wait",
            "Waits ms milliseconds unless cancelled.",
            json!({"type": "object", "properties": {"label": {"type": "string"},
                   "ms": {"type": "integer", "minimum": 0}}, "required": ["label", "ms"]}),
        )
        .effect(Effect::None),
        move |call| {
            let seen = seen.clone();
            async move {
                let label = call.args["label"].as_str().unwrap().to_string();
                let ms = call.args["ms"].as_u64().unwrap();
                seen.lock().unwrap().started.insert(label.clone());
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!({"waited": label})),
                    _ = call.cancel.cancelled() => {
                        seen.lock().unwrap().cancelled.insert(label);
                        Err(ToolError::Cancelled)
                    }
                }
            }
        },
    );
    let app = App::builder()
        .memory(Arc::new(Memory::in_memory().unwrap()))
        .tool(wait)
        .build()
        .unwrap();
    let server = car::McpServer::new(app).named("car-server");
    let router = car::server::mcp_router(server, &Exposure::Loopback, shutdown.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .unwrap();
    });
    url
}

fn call(name: &str, arguments: serde_json::Value) -> ClientRequest {
    ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(name.to_string())
            .with_arguments(arguments.as_object().cloned().unwrap()),
    ))
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_cancellation_stops_only_its_call_and_a_slow_tool_stalls_no_one() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shutdown = CancellationToken::new();
    let url = serve(seen.clone(), shutdown.clone()).await;
    let connect =
        || async { ().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await.unwrap() };
    let (a, b, c) = (connect().await, connect().await, connect().await);

    let slow = |label: &str| call("wait", json!({"label": label, "ms": 60_000}));
    let a_call = a
        .send_cancellable_request(slow("a"), Default::default())
        .await
        .unwrap();
    let b_call = b
        .send_cancellable_request(slow("b"), Default::default())
        .await
        .unwrap();
    until("both slow calls run", || {
        let seen = seen.lock().unwrap();
        seen.started.contains("a") && seen.started.contains("b")
    })
    .await;

    // A third client works normally while both slow calls hold their sessions.
    for i in 0..20 {
        let added = c
            .call_tool(
                CallToolRequestParams::new("memory_add_fact").with_arguments(
                    json!({"subject": format!("note-{i}"), "body": format!("release train {i} leaves on tuesday")})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            )
            .await
            .unwrap();
        assert_ne!(added.is_error, Some(true), "{added:?}");
    }
    let found = c
        .call_tool(
            CallToolRequestParams::new("memory_query").with_arguments(
                json!({"query": "when does the release train leave?"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert!(format!("{found:?}").contains("tuesday"), "{found:?}");
    assert!(
        seen.lock().unwrap().cancelled.is_empty(),
        "no slow call was cancelled by the other client's work"
    );

    // A cancels its call: only A's tool is cancelled.
    a.notify_cancelled(CancelledNotificationParam::new(
        Some(a_call.id.clone()),
        Some("the user pressed stop".into()),
    ))
    .await
    .unwrap();
    until("a's call is cancelled", || {
        seen.lock().unwrap().cancelled.contains("a")
    })
    .await;
    // Give a wrongly broadcast cancellation time to land before checking b.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !seen.lock().unwrap().cancelled.contains("b"),
        "b's call survives a's cancellation"
    );
    b.notify_cancelled(CancelledNotificationParam::new(
        Some(b_call.id.clone()),
        None,
    ))
    .await
    .unwrap();
    until("b's call is cancelled", || {
        seen.lock().unwrap().cancelled.contains("b")
    })
    .await;
    drop((a_call, b_call));
    for client in [a, b, c] {
        let _ = client.cancel().await;
    }
    shutdown.cancel();
}

/// Two car-mcp processes, the CLI and four HTTP clients of car-server write to one CAR_HOME at
/// once: every write is there afterwards.
#[test]
fn writers_on_every_face_at_once_lose_nothing() {
    let home = TestHome::new();
    let server = crate::server::Server::start(&home, &[]);
    const EACH: usize = 100;
    std::thread::scope(|scope| {
        for writer in 0..2 {
            let home = &home;
            scope.spawn(move || {
                let mut mcp = home.spawn_mcp();
                mcp.initialize();
                let ids: Vec<i64> = (0..EACH)
                    .map(|n| {
                        mcp.start("tools/call", json!({"name": "memory_add_fact", "arguments": {
                            "subject": format!("stdio{writer}-{n}"), "body": format!("stdio writer {writer} fact {n}")}}))
                    })
                    .collect();
                for id in ids {
                    let response = mcp.wait(&json!(id));
                    assert_eq!(response["result"]["isError"], false, "{response}");
                }
                mcp.finish();
            });
        }
        let home = &home;
        scope.spawn(move || {
            let runs: Vec<Vec<String>> = (0..20)
                .map(|n| {
                    vec![
                        "memory".into(),
                        "add".into(),
                        format!("cli-{n}"),
                        format!("cli fact {n}"),
                    ]
                })
                .collect();
            for chunk in runs.chunks(5) {
                home.car_all_at_once(chunk);
            }
        });
        let url = server.mcp();
        scope.spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let mut writers = Vec::new();
                for writer in 0..4 {
                    let url = url.clone();
                    writers.push(tokio::spawn(async move {
                        let client =
                            ().serve(StreamableHttpClientTransport::from_uri(url.as_str()))
                                .await
                                .unwrap();
                        for n in 0..EACH {
                            let params = CallToolRequestParams::new("memory_add_fact")
                                .with_arguments(
                                    json!({"subject": format!("http{writer}-{n}"),
                                           "body": format!("http writer {writer} fact {n}")})
                                    .as_object()
                                    .cloned()
                                    .unwrap(),
                                );
                            let added = client.call_tool(params).await.unwrap();
                            assert_ne!(added.is_error, Some(true), "{added:?}");
                        }
                        let _ = client.cancel().await;
                    }));
                }
                for writer in writers {
                    writer.await.unwrap();
                }
            });
        });
    });
    assert_eq!(home.entry_count(), (2 * EACH + 20 + 4 * EACH) as u64);
}
