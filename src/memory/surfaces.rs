//! The memory operations MCP serves as its prompt and its resources rather than as tools:
//! `car_context` (the briefing prompt), `memory_fact_resource` (`car://memory/fact/{id}`) and
//! `memory_fact_resources` (the resource list). They are declared in the registry like every
//! tool, but unlisted, so the schema check, the policy gate (`deny_tool = ["car_context"]`
//! denies the prompt), the time bound and the execution log see them; the MCP face only turns
//! their results (the types below) into prompt and resource messages.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ContextMode, ContextRequest, Memory};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// The briefing prompt.
pub const CONTEXT_PROMPT: &str = "car_context";
/// One entry as a resource.
pub const FACT_RESOURCE: &str = "memory_fact_resource";
/// A page of the entry resources.
pub const FACT_RESOURCES: &str = "memory_fact_resources";

/// How the briefing ranks.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum BriefingMode {
    /// Ranked by relevance to the query.
    #[default]
    Full,
    /// Newest first, no ranking.
    Fast,
}

/// The arguments of `car_context`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BriefingArgs {
    /// What the agent is working on.
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    query: String,
    #[serde(default)]
    mode: BriefingMode,
}

/// The briefing, ready to become a prompt message.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Briefing {
    pub description: String,
    pub text: String,
}

/// The arguments of `memory_fact_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EntryArgs {
    #[schemars(length(min = 1))]
    id: String,
}

/// One entry as the text of a resource.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EntryText {
    pub text: String,
}

/// The arguments of `memory_fact_resources`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PageArgs {
    /// The sequence number after which the page starts.
    #[serde(default)]
    after: u64,
    #[serde(default = "hundred")]
    #[schemars(range(min = 1, max = 1000))]
    limit: u32,
}

fn hundred() -> u32 {
    100
}

/// One entry in the resource list.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EntryRef {
    pub id: String,
    pub subject: String,
    /// Where the entry stands in the list; the next page starts after the last one's.
    pub seq: i64,
}

/// A page of the resource list.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EntryPage {
    pub entries: Vec<EntryRef>,
}

/// The three operations over one engine.
pub fn tools(memory: Arc<Memory>) -> Vec<Tool> {
    let m = memory.clone();
    let context = Tool::typed(
        ToolSpec::new(
            CONTEXT_PROMPT,
            "The layered briefing for a task (MCP prompt car_context).",
            Value::Null,
        )
        .title("CAR briefing")
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent)
        .unlisted(),
        move |args: BriefingArgs, _call| -> Result<Briefing, ToolError> {
            let mut request = ContextRequest::new(&args.query);
            if let BriefingMode::Fast = args.mode {
                request.mode = ContextMode::Fast;
            }
            let assembled = m.context(&request)?;
            Ok(Briefing {
                description: format!("CAR briefing for: {}", args.query),
                text: assembled.text,
            })
        },
    );

    let m = memory.clone();
    let fact = Tool::typed(
        ToolSpec::new(
            FACT_RESOURCE,
            "One memory entry as text (MCP resource car://memory/fact/{id}).",
            Value::Null,
        )
        .title("A remembered entry")
        .effect(Effect::Read)
        .unlisted(),
        move |args: EntryArgs, _call| -> Result<EntryText, ToolError> {
            let node = m
                .get(&args.id, "")?
                .ok_or_else(|| ToolError::NotFound(format!("no memory entry '{}'", args.id)))?;
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
            Ok(EntryText { text })
        },
    );

    let list = Tool::typed(
        ToolSpec::new(
            FACT_RESOURCES,
            "A page of memory entries for the MCP resource list, after a sequence number.",
            Value::Null,
        )
        .title("Memory entries")
        .effect(Effect::Read)
        .unlisted(),
        move |args: PageArgs, _call| -> Result<EntryPage, ToolError> {
            let after = i64::try_from(args.after).unwrap_or(i64::MAX);
            let page = memory.list_entries(after, args.limit as usize)?;
            Ok(EntryPage {
                entries: page
                    .into_iter()
                    .map(|n| EntryRef {
                        id: n.id,
                        subject: n.subject,
                        seq: n.seq,
                    })
                    .collect(),
            })
        },
    );
    vec![context, fact, list]
}
