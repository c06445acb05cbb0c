//! `car do`'s own costs, beside the model's time:
//!
//! 1. sandbox start-up per shell command: `true` under bubblewrap (with its seccomp filter)
//!    against `true` with no sandbox, interleaved, medians and their ratio; and in a Docker
//!    container when `BENCH_DOCKER_IMAGE` names an image on a reachable engine;
//! 2. the loop's overhead per turn: `agent::run` against a model server on loopback that
//!    answers at once, streamed as the Messages API streams (one `Read` call per turn, then a
//!    final answer; the file read is a real 31 KB source file, so the conversation grows as a
//!    real one does), so the time per turn is
//!    CAR's work — the request, the dispatch through the registry and the gate, the receipt —
//!    plus a loopback round trip and the scripted server reading the request; and the dispatch
//!    of one `Read` call alone.
//!
//! `cargo bench --bench agent` (`BENCH_RUNS`, default 100; `BENCH_TURNS`, default 50). Prints JSON.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::routing::post;
use axum::{Json, Router};
use car::agent::model::{Model, ModelConfig, Provider};
use car::agent::sandbox::{Request, Sandbox, Writes};
use car::agent::tools::Workspace;
use car::agent::Task;
use car::{App, Context, Face, Memory};
use serde_json::{json, Value};

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let runs = env_usize("BENCH_RUNS", 100);
    let turns = env_usize("BENCH_TURNS", 50);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    // A real source file to read each turn (this repository's agent loop, ~31 KB), so the
    // receipt's digest, the clip and the request carry what a real Read carries.
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/src/agent/mod.rs"),
        root.join("loop.rs"),
    )
    .unwrap();

    // 1. Sandbox start-up.
    let sandboxed = Sandbox::choose(Request::Auto, &root, Writes::Project);
    let plain = Sandbox::choose(Request::Off, &root, Writes::Project).unwrap();
    let mut bwrap_ms = Vec::new();
    let mut none_ms = Vec::new();
    // The same namespaces without the seccomp filter (and without the home and environment
    // handling): what the filter adds.
    let mut plain_bwrap_ms = Vec::new();
    for _ in 0..runs {
        if sandboxed.is_ok() {
            let started = Instant::now();
            let status = tokio::process::Command::new("bwrap")
                .args([
                    "--die-with-parent",
                    "--unshare-net",
                    "--unshare-pid",
                    "--new-session",
                ])
                .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
                .args([
                    "--tmpfs", "/tmp", "--tmpfs", "/run", "--", "sh", "-c", "true",
                ])
                .status()
                .await
                .unwrap();
            assert!(status.success());
            plain_bwrap_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        if let Ok(sandbox) = &sandboxed {
            let started = Instant::now();
            let status = sandbox.command("true", &root).status().await.unwrap();
            assert!(status.success());
            bwrap_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let started = Instant::now();
        assert!(plain
            .command("true", &root)
            .status()
            .await
            .unwrap()
            .success());
        none_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let none = median(&mut none_ms);
    let mut sandbox = if bwrap_ms.is_empty() {
        json!({"bwrap": null, "why": sandboxed.err()})
    } else {
        let bwrap = median(&mut bwrap_ms);
        let plain = median(&mut plain_bwrap_ms);
        json!({"bwrap_ms_p50": bwrap, "none_ms_p50": none, "bwrap_over_none": bwrap / none,
               "plain_bwrap_ms_p50": plain, "bwrap_over_plain_bwrap": bwrap / plain,
               "layers": sandboxed.as_ref().map(|s| s.layers.clone()).unwrap_or_default()})
    };
    if let Ok(image) = std::env::var("BENCH_DOCKER_IMAGE") {
        match Sandbox::choose(Request::Docker { image }, &root, Writes::Project) {
            Ok(docker) => {
                let mut docker_ms = Vec::new();
                for _ in 0..runs.min(20) {
                    let started = Instant::now();
                    let ended = docker
                        .run(
                            "true",
                            &root,
                            std::time::Duration::from_secs(60),
                            &Default::default(),
                        )
                        .await
                        .unwrap();
                    assert!(
                        matches!(ended, car::agent::sandbox::Ended::Exited(ref o) if o.status.success())
                    );
                    docker_ms.push(started.elapsed().as_secs_f64() * 1000.0);
                }
                let docker = median(&mut docker_ms);
                sandbox["docker_ms_p50"] = json!(docker);
                sandbox["docker_over_none"] = json!(docker / none);
            }
            Err(why) => sandbox["docker"] = json!(why),
        }
    }

    // 2. The loop against a model that answers at once.
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    let limit = turns;
    let app = Router::new().route(
        "/v1/messages",
        post(move |Json(body): Json<Value>| {
            let count = count.clone();
            async move {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let answered = body["messages"]
                    .as_array()
                    .map_or(0, |m| m.iter().filter(|m| m["role"] == "user").count())
                    - 1;
                let content = if answered < limit {
                    json!([{"type": "tool_use", "id": format!("t{n}"), "name": "Read",
                            "input": {"file_path": "loop.rs"}}])
                } else {
                    json!([{"type": "text", "text": "Read the loop."}])
                };
                // As the Messages API streams it: the block's start, its content, the end.
                let (start, delta) = match content[0]["type"].as_str() {
                    Some("tool_use") => (
                        json!({"type": "tool_use", "id": content[0]["id"], "name": "Read", "input": {}}),
                        json!({"type": "input_json_delta", "partial_json": content[0]["input"].to_string()}),
                    ),
                    _ => (
                        json!({"type": "text", "text": ""}),
                        json!({"type": "text_delta", "text": content[0]["text"]}),
                    ),
                };
                let events = [
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": start}),
                    json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
                    json!({"type": "message_stop"}),
                ];
                assert_eq!(body["stream"], true, "car do asks for a stream");
                let sse: String = events
                    .iter()
                    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
                    .collect();
                ([("content-type", "text/event-stream")], sse)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let workspace = Arc::new(Workspace {
        root: root.clone(),
        sandbox: plain.clone(),
        invoked_by: Vec::new(),
    });
    let mut builder = App::builder().memory(Arc::new(Memory::in_memory().unwrap()));
    for tool in car::agent::tools::tools(workspace) {
        builder = builder.tool(tool);
    }
    let app = builder.build().unwrap();
    let model = Model::new(ModelConfig {
        provider: Provider::Anthropic,
        model: "claude-bench".into(),
        base_url: Some(base),
        max_tokens: 100,
        api_key: None,
    })
    .unwrap();
    let task = Task {
        task: "read the agent loop".into(),
        max_turns: (turns + 5) as u32,
        token_budget: u64::MAX,
        until: None,
        run_id: "bench".into(),
        checkpoints: None,
        resume: None,
    };
    let started = Instant::now();
    let document = car::agent::run(
        &task,
        &model,
        app.runtime(),
        &Context::new(Face::Agent),
        &plain,
        tokio_util::sync::CancellationToken::new(),
        |_| {},
    )
    .await;
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(
        document.status,
        car::agent::RunStatus::Success,
        "{document:?}"
    );
    // The dispatch alone: the same Read call through the registry (schema, gate, log).
    let mut dispatch = Vec::new();
    for _ in 0..runs.max(100) {
        let started = Instant::now();
        let outcome = app
            .runtime()
            .call(
                "Read",
                json!({"file_path": "loop.rs"}),
                &Context::new(Face::Agent),
                car::CallOptions::default(),
            )
            .await
            .unwrap();
        assert!(outcome.result.is_ok());
        dispatch.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "{}",
        json!({
            "sandbox_startup": sandbox,
            "loop": {"turns": document.turns, "wall_ms": wall, "per_turn_ms": wall / f64::from(document.turns),
                     "dispatch_ms_p50": median(&mut dispatch)},
            "runs": runs,
        })
    );
}
