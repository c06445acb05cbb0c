//! Embedding CAR: your own tools beside CAR's memory, behind the same dispatcher (validation,
//! policy gate, confirmation, execution log), served over MCP stdio.
//!
//! Run it: `cargo run --example embed` and point an MCP client at it. The tool `reset_cache`
//! needs confirmation: grant it with `CAR_CONFIRM=reset_cache`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::sync::Arc;
use std::time::Duration;

use car::{
    confirm_grants_from_env, App, Confirmation, Context, Effect, Face, Home, Idempotence,
    McpServer, Memory, Store, Tool, ToolError, ToolSpec,
};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs to stderr: stdout carries only the protocol.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();

    let home = Home::from_env()?;
    let store = Arc::new(Store::open(&home.db_path())?);
    let memory = Memory::open(store, Some(&std::env::current_dir()?), None)?;

    // An async tool that honours cancellation.
    let wait = Tool::new(
        ToolSpec::new(
            "wait",
            "Wait for the given number of milliseconds, then say so.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 600000}},
                   "required": ["ms"], "additionalProperties": false}),
        )
        .title("Wait")
        .effect(Effect::None)
        .output_schema(json!({"type": "object", "properties": {"waited_ms": {"type": "integer"}}, "required": ["waited_ms"]})),
        |call| async move {
            let ms = call.args["ms"].as_u64().unwrap_or(0);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!({"waited_ms": ms})),
                _ = call.cancel.cancelled() => Err(ToolError::Cancelled),
            }
        },
    );

    // A destructive tool that runs only when the host granted `confirm:reset_cache`.
    let reset = Tool::blocking(
        ToolSpec::new("reset_cache", "Forget the build cache.", json!({"type": "object", "properties": {}}))
            .title("Reset the cache")
            .effect(Effect::Destructive)
            .idempotence(Idempotence::Idempotent)
            .confirmation(Confirmation::Required)
            .output_schema(json!({"type": "object", "properties": {"reset": {"type": "boolean"}}, "required": ["reset"]})),
        |_call| Ok(json!({"reset": true})),
    );

    let app = App::builder()
        .memory(Arc::new(memory))
        .tool(wait)
        .tool(reset)
        .build()?;
    let context = Context::new(Face::Mcp).grants(confirm_grants_from_env());
    McpServer::new(app).context(context).serve_stdio().await?;
    Ok(())
}
