//! The MCP conformance suite's fixture server, built from car-server's own adapter: CAR's
//! `McpServer` (memory in-process) with the suite's tools registered as ordinary registry tools
//! and its prompts and resources as an `McpExtension`, served by `car::server::mcp_router` (the
//! same access checks and sessions as car-server). It prints `conformance server at URL` and
//! serves until killed. `tests/it/conformance.rs` runs the suite (0.1.16) against it;
//! `scripts/conformance-next.sh` runs the 0.2.0 alpha (2026-07-28) against it and car-server.
//!
//! `cargo run --example conformance_server -- [127.0.0.1:PORT]`

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)] // an example

use std::sync::Arc;
use std::time::Duration;

use car::server::Exposure;
use car::{
    App, Effect, LogLevel, McpExtension, McpServer, Memory, Tool, ToolCall, ToolError, ToolSpec,
};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "string", "description": description}},
           "required": [name]})
}

/// A tool whose result is an MCP `CallToolResult`, served as is.
fn content_tool(name: &str, description: &str, result: Value) -> Tool {
    Tool::new(
        ToolSpec::new(name, description, no_args())
            .effect(Effect::None)
            .passthrough(),
        move |_call| {
            let result = result.clone();
            async move { Ok(result) }
        },
    )
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn async_tool<F, Fut>(name: &str, description: &str, schema: Value, run: F) -> Tool
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    Tool::new(
        ToolSpec::new(name, description, schema)
            .effect(Effect::None)
            .passthrough(),
        run,
    )
}

/// The answer of an elicitation, in the words the suite expects.
fn elicited(prefix: &str, answer: &Value) -> String {
    format!(
        "{prefix}action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").cloned().unwrap_or(json!({}))
    )
}

fn fixture_tools() -> Vec<Tool> {
    let pause = || tokio::time::sleep(Duration::from_millis(50));
    vec![
        content_tool(
            "test_simple_text",
            "Returns simple text.",
            text("This is a simple text response for testing."),
        ),
        content_tool(
            "test_image_content",
            "Returns an image.",
            json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}),
        ),
        content_tool(
            "test_audio_content",
            "Returns audio.",
            json!({"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}),
        ),
        content_tool(
            "test_embedded_resource",
            "Returns an embedded resource.",
            json!({"content": [{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."}}]}),
        ),
        content_tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource.",
            json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ]}),
        ),
        content_tool(
            "test_error_handling",
            "Always fails.",
            json!({"isError": true, "content": [{"type": "text",
                   "text": "This tool intentionally returns an error for testing"}]}),
        ),
        async_tool(
            "test_tool_with_logging",
            "Logs three messages while it runs.",
            no_args(),
            move |call| async move {
                call.client
                    .log(LogLevel::Info, json!("Tool execution started"))
                    .await;
                pause().await;
                call.client
                    .log(LogLevel::Info, json!("Tool processing data"))
                    .await;
                pause().await;
                call.client
                    .log(LogLevel::Info, json!("Tool execution completed"))
                    .await;
                Ok(text("Tool with logging executed successfully"))
            },
        ),
        async_tool(
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100.",
            no_args(),
            move |call| async move {
                for step in [0.0, 50.0, 100.0] {
                    call.client.progress(step, Some(100.0), None).await;
                    if step < 100.0 {
                        pause().await;
                    }
                }
                Ok(text("Tool with progress executed successfully"))
            },
        ),
        async_tool(
            "test_sampling",
            "Asks the client's model.",
            string_arg("prompt", "The prompt to send to the LLM"),
            |call| async move {
                let prompt = call.args["prompt"].as_str().unwrap_or_default().to_string();
                let answer = call
                    .client
                    .sample(json!({"messages": [{"role": "user",
                        "content": {"type": "text", "text": prompt}}], "maxTokens": 100}))
                    .await?;
                let said = answer["content"]["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| answer["content"].to_string());
                Ok(text(format!("LLM response: {said}")))
            },
        ),
        async_tool(
            "test_elicitation",
            "Asks the client's user for a username and an email.",
            string_arg("message", "The message to show the user"),
            |call| async move {
                let message = call.args["message"].as_str().unwrap_or_default().to_string();
                let answer = call
                    .client
                    .elicit(json!({"message": message, "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}
                        },
                        "required": ["username", "email"]}}))
                    .await?;
                Ok(text(elicited("User response: ", &answer)))
            },
        ),
        async_tool(
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields have defaults.",
            no_args(),
            |call| async move {
                let answer = call
                    .client
                    .elicit(json!({"message": "Please review and update the form fields with defaults",
                        "requestedSchema": {"type": "object", "properties": {
                            "name": {"type": "string", "description": "User name", "default": "John Doe"},
                            "age": {"type": "integer", "description": "User age", "default": 30},
                            "score": {"type": "number", "description": "User score", "default": 95.5},
                            "status": {"type": "string", "description": "User status",
                                       "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "description": "Verification status", "default": true}
                        }}}))
                    .await?;
                Ok(text(elicited("Elicitation completed: ", &answer)))
            },
        ),
        async_tool(
            "test_elicitation_sep1330_enums",
            "Elicits a form with every kind of enum.",
            no_args(),
            |call| async move {
                let answer = call
                    .client
                    .elicit(json!({"message": "Please select options from the enum fields",
                        "requestedSchema": {"type": "object", "properties": {
                            "untitledSingle": {"type": "string", "description": "Select one option",
                                "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {"type": "string", "description": "Select one option with titles",
                                "oneOf": [{"const": "value1", "title": "First Option"},
                                          {"const": "value2", "title": "Second Option"},
                                          {"const": "value3", "title": "Third Option"}]},
                            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                                "enum": ["opt1", "opt2", "opt3"],
                                "enumNames": ["Option One", "Option Two", "Option Three"]},
                            "untitledMulti": {"type": "array", "description": "Select multiple options",
                                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                            "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                                "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                    {"const": "value2", "title": "Second Choice"},
                                                    {"const": "value3", "title": "Third Choice"}]}}
                        }}}))
                    .await?;
                Ok(text(elicited("Elicitation completed: ", &answer)))
            },
        ),
        Tool::new(
            ToolSpec::new(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {"address": {"type": "object", "properties": {
                        "street": {"type": "string"}, "city": {"type": "string"}}}},
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "additionalProperties": false
                }),
            )
            .effect(Effect::None),
            |call| async move { Ok(call.args) },
        ),
        async_tool(
            "test_reconnection",
            "Answers after a pause (for the SSE polling scenario).",
            no_args(),
            move |_call| async move {
                pause().await;
                Ok(text("Reconnection test completed"))
            },
        ),
    ]
}

/// The suite's prompts and resources.
struct Fixtures;

impl McpExtension for Fixtures {
    fn prompts(&self) -> Vec<Value> {
        let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
        vec![
            json!({"name": "test_simple_prompt", "description": "A simple prompt without arguments"}),
            json!({"name": "test_prompt_with_arguments", "description": "A prompt with arguments",
                   "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]}),
            json!({"name": "test_prompt_with_embedded_resource", "description": "A prompt with an embedded resource",
                   "arguments": [arg("resourceUri", "URI of the resource to embed")]}),
            json!({"name": "test_prompt_with_image", "description": "A prompt with an image"}),
        ]
    }

    fn get_prompt(&self, name: &str, args: &Map<String, Value>) -> Option<Result<Value, String>> {
        let arg = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(format!("{name} needs the argument '{key}'"))
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let answer = match name {
            "test_simple_prompt" => Ok(json!({"messages": [user(json!({"type": "text",
                "text": "This is a simple prompt for testing."}))]})),
            "test_prompt_with_arguments" => arg("arg1").and_then(|a| {
                arg("arg2").map(|b| {
                    json!({"messages": [user(json!({"type": "text",
                        "text": format!("Prompt with arguments: arg1='{a}', arg2='{b}'")}))]})
                })
            }),
            "test_prompt_with_embedded_resource" => arg("resourceUri").map(|uri| {
                json!({"messages": [
                    user(json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."}})),
                    user(json!({"type": "text", "text": "Please process the embedded resource above."}))
                ]})
            }),
            "test_prompt_with_image" => Ok(json!({"messages": [
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."}))
            ]})),
            _ => return None,
        };
        Some(answer)
    }

    fn resources(&self) -> Vec<Value> {
        vec![
            json!({"uri": "test://static-text", "name": "static-text",
                   "description": "A static text resource", "mimeType": "text/plain"}),
            json!({"uri": "test://static-binary", "name": "static-binary",
                   "description": "A static binary resource (a PNG)", "mimeType": "image/png"}),
            json!({"uri": "test://watched-resource", "name": "watched-resource",
                   "description": "A resource to subscribe to", "mimeType": "text/plain"}),
        ]
    }

    fn resource_templates(&self) -> Vec<Value> {
        vec![
            json!({"uriTemplate": "test://template/{id}/data", "name": "template-data",
                    "description": "Data for an id", "mimeType": "application/json"}),
        ]
    }

    fn read_resource(&self, uri: &str) -> Option<Result<Value, String>> {
        let contents = match uri {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
            "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content."}),
            _ => {
                let id = uri
                    .strip_prefix("test://template/")?
                    .strip_suffix("/data")?;
                json!({"uri": uri, "mimeType": "application/json", "text": json!({
                    "id": id, "templateTest": true, "data": format!("Data for ID: {id}")
                }).to_string()})
            }
        };
        Some(Ok(json!({ "contents": [contents] })))
    }

    fn subscribable(&self) -> bool {
        true
    }

    fn complete(&self, reference: &Value, argument: &str, value: &str) -> Option<Vec<String>> {
        (reference["name"] == "test_prompt_with_arguments" && argument == "arg1").then(|| {
            ["paris", "park", "party"]
                .into_iter()
                .filter(|w| w.starts_with(value))
                .map(str::to_string)
                .collect()
        })
    }
}

#[tokio::main]
async fn main() {
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_string());
    let app = fixture_tools()
        .into_iter()
        .fold(
            App::builder().memory(Arc::new(Memory::in_memory().unwrap())),
            |app, tool| app.tool(tool),
        )
        .build()
        .unwrap();
    let server = McpServer::new(app)
        .named("car-conformance-fixtures")
        .extension(Arc::new(Fixtures));
    let router = car::server::mcp_router(server, &Exposure::Loopback, CancellationToken::new());
    let listener = tokio::net::TcpListener::bind(&bind).await.unwrap();
    println!(
        "conformance server at http://{}/mcp",
        listener.local_addr().unwrap()
    );
    axum::serve(listener, router).await.unwrap();
}
