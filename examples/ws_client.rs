//! A WebSocket client of car-server, end to end: it declares one tool of its own (`sleep`),
//! submits a proposal of N independent calls to it, answers each callback after D ms, and
//! prints what came back with the wall time against the critical path (one level of D ms).
//!
//! `cargo run --example ws_client -- ws://127.0.0.1:9100/ "$(car daemon token)" [N] [D]`
//! (defaults: 100 actions, 10 ms). `scripts/bench-ws.sh` runs it against a fresh daemon.

#![allow(clippy::print_stdout, clippy::print_stderr)] // an example prints

use std::time::{Duration, Instant};

use car::server::ws::client::{run_proposal, Execute};
use car::server::ws::{ActionStatus, ClientTool};
use serde_json::json;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(token)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ws_client URL TOKEN [ACTIONS] [DELAY_MS]");
        return std::process::ExitCode::from(2);
    };
    let actions: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(100);
    let delay_ms: u64 = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(10);
    let tools = [ClientTool {
        name: "sleep".into(),
        description: "Waits, then says which action it was.".into(),
        parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
    }];
    let proposal = json!({"id": "independent", "actions": (0..actions)
        .map(|n| json!({"id": format!("a{n}"), "type": "tool_call", "tool": "sleep", "parameters": {"n": n}}))
        .collect::<Vec<_>>()});
    let started = Instant::now();
    let executed = run_proposal(
        url,
        token,
        &tools,
        proposal,
        move |call: Execute| async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            Ok(json!({"done": call.parameters["n"]}))
        },
    )
    .await;
    let wall = started.elapsed();
    match executed {
        Ok(executed) => {
            let ok = executed
                .results
                .iter()
                .filter(|r| r.status == ActionStatus::Ok)
                .count();
            let critical = Duration::from_millis(delay_ms * executed.cost.levels as u64);
            println!(
                "{}",
                json!({"actions": actions, "ok": ok, "delay_ms": delay_ms, "levels": executed.cost.levels,
                       "wall_ms": wall.as_secs_f64() * 1000.0,
                       "server_ms": executed.cost.duration_ms,
                       "critical_path_ms": critical.as_millis() as u64,
                       "wall_over_critical_path": wall.as_secs_f64() / critical.as_secs_f64().max(1e-9),
                       "server_over_critical_path": executed.cost.duration_ms as f64 / critical.as_millis().max(1) as f64,
                       "sum_of_callbacks_ms": delay_ms * actions as u64})
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ws_client: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
