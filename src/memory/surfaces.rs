//! The memory operations MCP serves as its prompt and its resources rather than as tools:
//! `car_context` (the briefing prompt), `memory_fact_resource` (`car://memory/fact/{id}`) and
//! `memory_fact_resources` (the resource list). They are declared in the registry like every
//! tool, but unlisted, so the schema check, the policy gate (`deny_tool = ["car_context"]`
//! denies the prompt), the time bound and the execution log see them; the MCP face only turns
//! their results into prompt and resource messages.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{ContextMode, ContextRequest, Memory};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// The briefing prompt.
pub const CONTEXT_PROMPT: &str = "car_context";
/// One entry as a resource.
pub const FACT_RESOURCE: &str = "memory_fact_resource";
/// A page of the entry resources.
pub const FACT_RESOURCES: &str = "memory_fact_resources";

/// The three operations over one engine.
pub fn tools(memory: Arc<Memory>) -> Vec<Tool> {
    let m = memory.clone();
    let context = Tool::blocking(
        ToolSpec::new(
            CONTEXT_PROMPT,
            "The layered briefing for a task (MCP prompt car_context).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "pattern": "\\S"},
                    "mode": {"type": "string", "enum": ["full", "fast"], "default": "full"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .title("CAR briefing")
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent)
        .unlisted(),
        move |call| {
            let query = call.args["query"].as_str().unwrap_or_default().to_string();
            let mut request = ContextRequest::new(&query);
            if call.args["mode"] == "fast" {
                request.mode = ContextMode::Fast;
            }
            let assembled = m.context(&request)?;
            Ok(json!({"description": format!("CAR briefing for: {query}"), "text": assembled.text}))
        },
    );

    let m = memory.clone();
    let fact = Tool::blocking(
        ToolSpec::new(
            FACT_RESOURCE,
            "One memory entry as text (MCP resource car://memory/fact/{id}).",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "minLength": 1}},
                "required": ["id"],
                "additionalProperties": false
            }),
        )
        .title("A remembered entry")
        .effect(Effect::Read)
        .unlisted(),
        move |call| {
            let id = call.args["id"].as_str().unwrap_or_default();
            let node = m
                .get(id, "")?
                .ok_or_else(|| ToolError::NotFound(format!("no memory entry '{id}'")))?;
            let mut text = format!(
                "{}\n\n{}\n\nid: {}\nkind: {}\ncreated: {}\n",
                node.subject,
                node.body,
                node.id,
                node.kind.as_str(),
                node.created_at
            );
            if let Some(by) = &node.superseded_by {
                text.push_str(&format!("superseded by: {by} (not current)\n"));
            }
            Ok(json!({"text": text}))
        },
    );

    let list = Tool::blocking(
        ToolSpec::new(
            FACT_RESOURCES,
            "A page of memory entries for the MCP resource list, after a sequence number.",
            json!({
                "type": "object",
                "properties": {
                    "after": {"type": "integer", "minimum": 0, "default": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
                },
                "additionalProperties": false
            }),
        )
        .title("Memory entries")
        .effect(Effect::Read)
        .unlisted(),
        move |call| {
            let after = call.args["after"].as_i64().unwrap_or(0);
            let limit = call.args["limit"].as_u64().unwrap_or(100) as usize;
            let page = memory.list_entries(after, limit)?;
            let entries: Vec<Value> = page
                .iter()
                .map(|n| json!({"id": n.id, "subject": n.subject, "seq": n.seq}))
                .collect();
            Ok(json!({"entries": entries}))
        },
    );
    vec![context, fact, list]
}
