//! Enabled connector tools as registry tools: `mcp_<slug>_<tool>` with the server's input schema
//! and an effect read from its annotations, each call going through the same dispatcher (schema
//! validation, policy gate, time bound, cancellation, execution log) as a built-in tool.
//!
//! The set follows `connectors.json`: every lookup and listing checks the file's size and
//! modification time (one `stat`) and rebuilds the set when it changed, so `car connector
//! enable` in one process shows up in a running `car-mcp`, which announces it with
//! `notifications/tools/list_changed`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;

use super::client::{is_disconnect, Session};
use super::config::{self, Connector, RemoteTool};
use super::ConnectorError;
use crate::runtime::{Effect, Idempotence, Registry, Tool, ToolError, ToolSource, ToolSpec};

/// The effect a remote tool declares: `readOnlyHint` → read, `destructiveHint` → destructive,
/// anything else → an external write.
pub fn effect(annotations: &Value) -> Effect {
    let hint = |key: &str| annotations.get(key).and_then(Value::as_bool) == Some(true);
    if hint("readOnlyHint") {
        Effect::Read
    } else if hint("destructiveHint") {
        Effect::Destructive
    } else {
        Effect::ExternalWrite
    }
}

/// Open sessions, one per connector, opened on first use and reopened after the server went
/// away.
#[derive(Default)]
pub struct Pool {
    slots: Mutex<HashMap<String, Slot>>,
}

/// A connector's session, if open; the async lock serializes connecting.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Live>>>>;

struct Live {
    session: Session,
    endpoint: config::Endpoint,
}

impl Pool {
    fn slot(&self, slug: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(slug.to_string()).or_default().clone()
    }

    async fn session(
        &self,
        connectors: &super::Connectors,
        connector: &Connector,
    ) -> Result<Arc<Live>, ConnectorError> {
        let slot = self.slot(&connector.slug);
        let mut held = slot.lock().await;
        if let Some(live) = held.as_ref() {
            if !live.session.is_closed() && live.endpoint == connector.endpoint {
                return Ok(live.clone());
            }
        }
        let session = connectors.connect(connector).await?;
        let live = Arc::new(Live {
            session,
            endpoint: connector.endpoint.clone(),
        });
        *held = Some(live.clone());
        Ok(live)
    }

    /// Drops a connector's session so the next call reconnects.
    async fn forget(&self, slug: &str) {
        let slot = self.slot(slug);
        let taken = slot.lock().await.take();
        if let Some(live) = taken {
            if let Ok(live) = Arc::try_unwrap(live) {
                live.session.close().await;
            }
        }
    }
}

/// The registry source of enabled connector tools.
pub struct ConnectorTools {
    connectors: Arc<super::Connectors>,
    pool: Arc<Pool>,
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    stamp: Option<(SystemTime, u64)>,
    registry: Arc<Registry>,
    generation: u64,
    loaded: bool,
}

impl ConnectorTools {
    pub fn new(car_home: PathBuf) -> ConnectorTools {
        ConnectorTools {
            connectors: Arc::new(super::Connectors::new(car_home)),
            pool: Arc::new(Pool::default()),
            cached: Mutex::new(Cached::default()),
        }
    }

    fn refresh(&self) -> (Arc<Registry>, u64) {
        let path = config::path(self.connectors.home());
        let stamp = std::fs::metadata(&path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if cached.loaded && cached.stamp == stamp {
            return (cached.registry.clone(), cached.generation);
        }
        match config::load(self.connectors.home()) {
            Ok(file) => {
                let registry = Arc::new(self.build(&file.connectors));
                let changed = !cached.loaded || names(&cached.registry) != names(&registry);
                cached.registry = registry;
                if changed {
                    cached.generation += 1;
                }
            }
            // A broken file keeps the tools as they were; `car connector list` says what is wrong.
            Err(err) => tracing::warn!("connector tools unchanged: {err}"),
        }
        cached.stamp = stamp;
        cached.loaded = true;
        (cached.registry.clone(), cached.generation)
    }

    fn build(&self, connectors: &[Connector]) -> Registry {
        let mut registry = Registry::default();
        for connector in connectors {
            for remote in connector.tools.iter() {
                if !connector.enabled.contains(&remote.name) {
                    continue;
                }
                let tool = self.tool(connector, remote);
                if let Err(err) = registry.register(tool) {
                    tracing::warn!("connector '{}': {err}", connector.slug);
                }
            }
        }
        registry
    }

    fn tool(&self, connector: &Connector, remote: &RemoteTool) -> Tool {
        let mut description = remote.description.clone();
        if description.is_empty() {
            description = format!("'{}' of connector '{}'", remote.name, connector.name);
        } else {
            description = format!("[{}] {description}", connector.name);
        }
        let mut spec = ToolSpec::new(
            &connector.canonical(&remote.name),
            &description,
            remote.input_schema.clone(),
        )
        .effect(effect(&remote.annotations))
        .idempotence(Idempotence::NotIdempotent)
        .timeout(connector.timeout())
        .passthrough();
        if let Some(title) = &remote.title {
            spec = spec.title(title);
        }
        let connectors = self.connectors.clone();
        let pool = self.pool.clone();
        let slug = connector.slug.clone();
        let name = remote.name.clone();
        Tool::new(spec, move |call| {
            let connectors = connectors.clone();
            let pool = pool.clone();
            let slug = slug.clone();
            let name = name.clone();
            async move { remote_call(&connectors, &pool, &slug, &name, call.args).await }
        })
    }
}

fn names(registry: &Registry) -> Vec<String> {
    registry
        .specs()
        .map(|s| format!("{}\u{0}{}", s.name, s.input_schema))
        .collect()
}

impl ToolSource for ConnectorTools {
    fn current(&self) -> Arc<Registry> {
        self.refresh().0
    }

    fn generation(&self) -> u64 {
        self.refresh().1
    }
}

/// One call to a remote tool.
async fn remote_call(
    connectors: &super::Connectors,
    pool: &Pool,
    slug: &str,
    tool: &str,
    args: Value,
) -> Result<Value, ToolError> {
    // Read the connector afresh: its endpoint or secrets may have changed since start-up.
    let connector = connectors
        .get(slug)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let live = pool
        .session(connectors, &connector)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    match live.session.call(tool, args).await {
        Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
            Err(ToolError::Reported {
                code: "remote_error",
                text: content_text(&result),
            })
        }
        Ok(result) => Ok(result),
        Err(err) if err.auth_challenge().is_some() => {
            pool.forget(slug).await;
            let challenge = err.auth_challenge().unwrap_or_default();
            Err(ToolError::Failed(
                super::oauth::challenge_error(slug, &connector.endpoint.target(), challenge)
                    .to_string(),
            ))
        }
        Err(err) if is_disconnect(&err) || live.session.is_closed() => {
            let tail = live.session.stderr_tail();
            pool.forget(slug).await;
            let mut message = format!(
                "connector '{slug}' ({}): the server has gone away ({err}); it will be reconnected on the next call",
                connector.endpoint.target()
            );
            if !tail.is_empty() {
                message.push_str(&format!("\nthe server's stderr ended with:\n{tail}"));
            }
            Err(ToolError::Failed(message))
        }
        Err(err) => Err(ToolError::Failed(format!(
            "connector '{slug}', tool '{tool}': {err}"
        ))),
    }
}

/// The text parts of a result's content, joined (what an error result says).
fn content_text(result: &Value) -> String {
    let parts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if parts.is_empty() {
        "the remote tool reported an error without text".to_string()
    } else {
        parts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn effects_follow_the_remote_annotations() {
        assert_eq!(effect(&json!({"readOnlyHint": true})), Effect::Read);
        assert_eq!(
            effect(&json!({"readOnlyHint": false, "destructiveHint": true})),
            Effect::Destructive
        );
        assert_eq!(
            effect(&json!({"destructiveHint": false})),
            Effect::ExternalWrite
        );
        assert_eq!(effect(&Value::Null), Effect::ExternalWrite);
    }

    #[test]
    fn only_enabled_tools_are_registered_and_changes_are_seen() {
        let home = tempfile::tempdir().unwrap();
        let source = ConnectorTools::new(home.path().to_path_buf());
        assert_eq!(source.current().len(), 0);
        let first = source.generation();
        config::update(home.path(), |file| {
            file.connectors.push(Connector {
                slug: "srv".into(),
                name: "Srv".into(),
                endpoint: config::Endpoint::Http {
                    url: "http://127.0.0.1:9/mcp".into(),
                    headers: vec![],
                },
                timeout_secs: Some(7),
                enabled: ["echo".to_string()].into(),
                tools: ["echo", "add"]
                    .iter()
                    .map(|n| RemoteTool {
                        name: n.to_string(),
                        title: None,
                        description: format!("{n} it"),
                        input_schema: json!({"type": "object"}),
                        annotations: json!({"readOnlyHint": true}),
                    })
                    .collect(),
                oauth: None,
                added_at: "t".into(),
                refreshed_at: None,
                last_error: None,
            });
            Ok(())
        })
        .unwrap();
        let registry = source.current();
        let names: Vec<&str> = registry.specs().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mcp_srv_echo"]);
        let spec = registry.get("mcp_srv_echo").unwrap();
        assert_eq!(spec.effect, Effect::Read);
        assert_eq!(spec.timeout, std::time::Duration::from_secs(7));
        assert!(spec.description.starts_with("[Srv] "));
        assert!(source.generation() > first);
    }
}
