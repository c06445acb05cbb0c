//! A client for the official MCP conformance suite's client scenarios
//! (`conformance client --command "<this binary>" --suite core|auth`), built on CAR's connector
//! code: the scenario server is added as a connector, logged in to with
//! [`car::connectors::Connectors::login`] when it asks for authorization, and its tools are
//! listed and called through [`car::connectors::Session`].
//!
//! The suite's contract: the server URL is the last argument, the scenario name is in
//! `MCP_CONFORMANCE_SCENARIO`, and `MCP_CONFORMANCE_CONTEXT` holds JSON (pre-registered client
//! credentials, tool calls). The scenario's `/authorize` redirects at once, so the browser step
//! is a custom [`Authorize`]: GET the authorization URL without following redirects, then GET
//! the `Location` it names — CAR's own loopback listener.
//!
//! Secrets go to an opt-in file store in a temporary CAR home that is deleted on exit.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use car::connectors::oauth::{Authorize, AuthorizeFuture, LoginOptions, PreregisteredClient};
use car::connectors::{ConnectorError, Connectors, Endpoint, NewConnector, RemoteTool};
use car::secrets::{Secrets, StoreChoice};
use serde_json::{json, Map, Value};

/// How many step-up authorizations a run may make before it gives up (scope-retry-limit).
const MAX_STEP_UPS: usize = 3;

#[derive(Default, serde::Deserialize)]
struct ScenarioContext {
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default, alias = "toolCalls")]
    tool_calls: Vec<ToolCall>,
}

#[derive(serde::Deserialize)]
struct ToolCall {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

/// Plays the browser: the scenario's authorization endpoint answers with a redirect at once.
fn headless() -> Authorize {
    Authorize::Custom(Arc::new(|url: String| -> AuthorizeFuture {
        Box::pin(async move {
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())?;
            let response = http.get(&url).send().await.map_err(|e| e.to_string())?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    format!(
                        "the authorization endpoint answered {} without a redirect",
                        response.status()
                    )
                })?
                .to_string();
            http.get(&location)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        })
    }))
}

/// Arguments for a tool from its schema: a plain value for each required property.
fn arguments(tool: &RemoteTool) -> Value {
    let required: Vec<&str> = tool.input_schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut args = Map::new();
    if let Some(properties) = tool.input_schema["properties"].as_object() {
        for (name, schema) in properties {
            if !required.contains(&name.as_str()) {
                continue;
            }
            let value = match schema["type"].as_str() {
                Some("number") => json!(1.0),
                Some("integer") => json!(1),
                Some("boolean") => json!(true),
                Some("string") => json!("test"),
                _ => Value::Null,
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

async fn run(url: &str, scenario: &str, context: ScenarioContext) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let home = dir.path().to_path_buf();
    let secrets = Secrets::open_with(&home, StoreChoice::File)?;
    let connectors = Connectors::with_secrets(home, secrets);
    let added = connectors
        .add(NewConnector {
            name: "conformance".into(),
            endpoint: Endpoint::Http {
                url: url.to_string(),
                headers: Vec::new(),
            },
            secrets: Vec::new(),
            timeout_secs: Some(60),
        })
        .await?;
    let slug = added.status.slug.clone();
    let options = |challenge: Option<String>| {
        let mut options = LoginOptions::new(headless());
        options.timeout = std::time::Duration::from_secs(30);
        options.challenge = challenge;
        options.client = context
            .client_id
            .clone()
            .map(|client_id| PreregisteredClient {
                client_id,
                client_secret: context.client_secret.clone(),
            });
        options
    };
    if added.needs_login {
        connectors.login(&slug, options(None)).await?;
    }

    let mut step_ups = 0;
    let mut session = connectors.connect(&connectors.get(&slug)?).await?;
    let tools = session.list_tools().await?;
    let calls: Vec<(String, Value)> = if context.tool_calls.is_empty() {
        tools
            .iter()
            .map(|t| (t.name.clone(), arguments(t)))
            .collect()
    } else {
        context
            .tool_calls
            .into_iter()
            .map(|c| (c.name, Value::Object(c.arguments.unwrap_or_default())))
            .collect()
    };
    for (tool, args) in calls {
        loop {
            match session.call(&tool, args.clone()).await {
                Ok(_) => break,
                Err(err) => {
                    let Some(challenge) = err.auth_challenge().map(str::to_string) else {
                        eprintln!("{scenario}: tool {tool} failed: {err}");
                        break;
                    };
                    if step_ups == MAX_STEP_UPS {
                        eprintln!("{scenario}: giving up on {tool} after {step_ups} step-up authorizations");
                        session.close().await;
                        return Ok(());
                    }
                    step_ups += 1;
                    session.close().await;
                    match connectors.login(&slug, options(Some(challenge))).await {
                        Ok(_) | Err(ConnectorError::InsufficientScope { .. }) => {}
                        Err(err) => return Err(err.into()),
                    }
                    session = connectors.connect(&connectors.get(&slug)?).await?;
                }
            }
        }
    }
    session.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance_client URL (MCP_CONFORMANCE_SCENARIO names the scenario)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .map(|text| {
            serde_json::from_str::<ScenarioContext>(&text).context("MCP_CONFORMANCE_CONTEXT")
        })
        .transpose();
    let result = match context {
        Ok(context) => run(&url, &scenario, context.unwrap_or_default()).await,
        Err(err) => Err(err),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{scenario}: {err:#}");
            ExitCode::FAILURE
        }
    }
}
