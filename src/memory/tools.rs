//! The eight memory tools, declared once for every face.

use std::sync::Arc;

use serde_json::{json, Value};

use super::proactive::{EvaluationCase, InterveneRequest};
use super::write::NewEntry;
use super::{Kind, Memory, MemoryError};
use crate::runtime::{
    arg_string as string, arg_strings as strings, Effect, Idempotence, Tool, ToolCall, ToolError,
    ToolSpec,
};

impl From<MemoryError> for ToolError {
    fn from(err: MemoryError) -> Self {
        match err {
            MemoryError::Invalid(message) => ToolError::InvalidArguments(message),
            MemoryError::Store(_) | MemoryError::File { .. } => ToolError::Failed(err.to_string()),
        }
    }
}

fn tenant(args: &Value) -> String {
    string(args, "tenant_id").unwrap_or_default()
}

fn is_global(args: &Value) -> bool {
    args.get("scope").and_then(Value::as_str) == Some("global")
}

const TENANT: &str = "Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.";
const SCOPE: &str = "\"project\" (default): seen from this project only; \"global\": seen from every project (user-wide preferences).";

fn entry_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string"},
            "subject": {"type": "string"},
            "scope": {"type": "string", "enum": ["project", "global"]},
            "tenant_id": crate::runtime::schema::nullable("string"),
            "superseded": {"type": "array", "items": {"type": "string"}},
            "invalidated": {"type": "array", "items": {"type": "string"}},
            "links": {"type": "integer"},
            "fact_count": {"type": "integer"},
            "durable": {"type": "boolean"}
        },
        "required": ["id", "kind", "subject", "scope", "superseded", "fact_count", "durable"]
    })
}

fn written_json(w: &super::Written) -> Value {
    json!({
        "id": w.id,
        "kind": w.kind.as_str(),
        "subject": w.subject,
        "scope": if w.global { "global" } else { "project" },
        "tenant_id": if w.tenant.is_empty() { Value::Null } else { json!(w.tenant) },
        "superseded": w.superseded,
        "invalidated": w.invalidated,
        "links": w.links,
        "fact_count": w.total,
        "durable": true,
    })
}

fn request_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the agent is about to do or asking about."},
            "recent": {"type": "array", "items": {"type": "string"}, "description": "Recent messages or tool output."},
            "trigger": {
                "type": "object",
                "properties": {
                    "repeated_failures": {"type": "integer", "minimum": 0},
                    "tool_error": {"type": "boolean"},
                    "explicit_uncertainty": {"type": "boolean"},
                    "high_risk_action": {"type": "boolean"},
                    "context_shift": {"type": "boolean"}
                },
                "additionalProperties": false
            },
            "force": {"type": "boolean", "default": false, "description": "Consider a reminder even when no trigger fired."},
            "max_candidates": {"type": "integer", "minimum": 1, "maximum": 32, "default": 8},
            "tenant_id": {"type": "string", "description": TENANT}
        },
        "additionalProperties": false
    })
}

fn mode_schema() -> Value {
    let number = json!({"type": "number"});
    let integer = json!({"type": "integer"});
    json!({
        "type": "object",
        "properties": {
            "interventions": integer, "true_positives": integer, "false_positives": integer,
            "false_negatives": integer, "precision": number, "recall": number,
            "interruption_rate": number, "avg_candidates_exposed": number
        },
        "required": ["interventions", "precision", "recall", "interruption_rate", "avg_candidates_exposed"]
    })
}

fn save_entry(memory: &Memory, kind: Kind, call: &ToolCall) -> Result<Value, ToolError> {
    let args = &call.args;
    let is_constraint = args.get("is_constraint").and_then(Value::as_bool) == Some(true);
    let mut entry = NewEntry::new(
        kind,
        &string(args, "subject").unwrap_or_default(),
        &string(args, "body").unwrap_or_default(),
    );
    entry.id = string(args, "id");
    entry.tags = strings(args, "tags");
    if is_constraint {
        entry.tags.push("constraint".into());
    }
    entry.confidence = string(args, "confidence");
    entry.tenant = tenant(args);
    entry.global = is_global(args);
    entry.source = Some(call.context.face().as_str().into());
    let written = memory.write(entry)?;
    Ok(written_json(&written))
}

fn save_spec(name: &str, title: &str, what: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        what,
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "Optional id; a taken id gets -2, -3, … appended (entries are additive, never overwritten)."},
                "subject": {"type": "string", "minLength": 1},
                "body": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "confidence": {"type": "string", "description": "e.g. high, medium, low, derived"},
                "tenant_id": {"type": "string", "description": TENANT},
                "is_constraint": {"type": "boolean", "default": false},
                "scope": {"type": "string", "enum": ["project", "global"], "description": SCOPE}
            },
            "required": ["subject", "body"],
            "additionalProperties": false
        }),
    )
    .title(title)
    .output_schema(entry_output_schema())
    .effect(Effect::Write)
    .idempotence(Idempotence::NotIdempotent)
}

/// The eight memory tools over one engine.
pub fn tools(memory: Arc<Memory>) -> Vec<Tool> {
    let mut tools = Vec::new();

    let m = memory.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_add_fact",
            "Remember a fact for later sessions. A fact with the same subject as a current one (same tenant, same project) replaces it: the old one is kept for audit and shown as 'changed from', but no longer retrieved as current. Durable at once: written to the database before this call returns.",
            json!({
                "type": "object",
                "properties": {
                    "subject": {"type": "string", "minLength": 1, "description": "What the fact is about; also the key for replacement."},
                    "body": {"type": "string", "minLength": 1, "description": "The fact itself."},
                    "kind": {"type": "string", "enum": ["pattern", "constraint"], "default": "pattern",
                             "description": "pattern: how things are or are done; constraint: a rule to respect."},
                    "supersedes": {"type": "string", "description": "Id or subject of a fact this one replaces."},
                    "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Ids or subjects this fact was derived from; if they are replaced, this fact is flagged for recalculation."},
                    "tenant_id": {"type": "string", "description": TENANT},
                    "scope": {"type": "string", "enum": ["project", "global"], "description": SCOPE}
                },
                "required": ["subject", "body"],
                "additionalProperties": false
            }),
        )
        .title("Remember a fact")
        .output_schema(entry_output_schema())
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |call| {
            let args = &call.args;
            let kind = match args.get("kind").and_then(Value::as_str) {
                Some("constraint") => Kind::Constraint,
                Some(_) | None => Kind::Pattern,
            };
            let mut entry = NewEntry::new(
                kind,
                &string(args, "subject").unwrap_or_default(),
                &string(args, "body").unwrap_or_default(),
            );
            entry.supersedes = string(args, "supersedes").into_iter().collect();
            entry.depends_on = strings(args, "depends_on");
            entry.tenant = tenant(args);
            entry.global = is_global(args);
            entry.source = Some(call.context.face().as_str().into());
            Ok(written_json(&m.write(entry)?))
        },
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_query",
            "Recall what is remembered about something. Finds entries by the query's terms (exact, stem, substring; rare terms weigh more) and spreads activation along the links between entries, so related entries that share no word with the query are found too. Superseded entries are never returned.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5, "description": "How many entries to return."},
                    "tenant_id": {"type": "string", "description": TENANT}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .title("Recall from memory")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "results": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"},
                        "kind": {"type": "string"}, "activation": {"type": "number"}
                    },
                    "required": ["id", "subject", "body", "kind", "activation"]
                }}
            },
            "required": ["query", "results"]
        })),
        move |call| {
            let query = string(&call.args, "query").unwrap_or_default();
            let k = call.args.get("k").and_then(Value::as_u64).unwrap_or(5) as usize;
            let hits = m.query(&query, &tenant(&call.args), k)?;
            Ok(json!({"query": query, "results": hits}))
        },
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_update_status",
            "Set the agent's current status (progress, risks, next step) for this tenant. One slot per tenant: a new status overwrites the previous one. Never part of recall or context.",
            json!({
                "type": "object",
                "properties": {
                    "body": {"type": "string", "minLength": 1},
                    "tenant_id": {"type": "string", "description": TENANT}
                },
                "required": ["body"],
                "additionalProperties": false
            }),
        )
        .title("Update status")
        .output_schema(json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "tenant_id": crate::runtime::schema::nullable("string"),
                           "body": {"type": "string"}, "updated_at": {"type": "string"}},
            "required": ["id", "body", "updated_at"]
        }))
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |call| {
            let body = string(&call.args, "body").unwrap_or_default();
            serde_json::to_value(m.update_status(&tenant(&call.args), &body)?)
                .map_err(|e| ToolError::Failed(e.to_string()))
        },
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        save_spec(
            "memory_save_knowledge",
            "Save knowledge",
            "Save proactive knowledge: requirements, policies, verified facts about the environment. Additive: never overwrites. Proactive reminders (memory_intervene) draw on it.",
        ),
        move |call| save_entry(&m, Kind::Knowledge, &call),
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        save_spec(
            "memory_save_procedural",
            "Save a procedure",
            "Save procedural evidence: a failed attempt, the fix that worked, a gotcha. Additive: never overwrites. Favoured by reminders after tool errors and repeated failures.",
        ),
        move |call| save_entry(&m, Kind::Procedural, &call),
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_delete",
            "Delete an entry by id, or clear a status slot (id 'proactive-status:<tenant|global>'). Deleting an id that does not exist succeeds with deleted=false. Entries the deleted one had replaced become current again.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "tenant_id": {"type": "string", "description": TENANT}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        )
        .title("Forget an entry")
        .output_schema(json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "deleted": {"type": "boolean"},
                           "kind": crate::runtime::schema::nullable("string"), "fact_count": {"type": "integer"}},
            "required": ["id", "deleted", "kind", "fact_count"]
        }))
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |call| {
            let id = string(&call.args, "id").unwrap_or_default();
            serde_json::to_value(m.delete(&id, &tenant(&call.args))?)
                .map_err(|e| ToolError::Failed(e.to_string()))
        },
    ));

    let m = memory.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_intervene",
            "Ask memory whether to remind the agent of something before its next step. Returns at most one grounded reminder (decision 'inject') or 'silent' with the reason. Fires only when a trigger is set (repeated_failures >= 2, tool_error, explicit_uncertainty, high_risk_action, context_shift) or force is true. Counts the injection on the chosen entry.",
            request_schema(),
        )
        .title("Proactive reminder")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["inject", "silent"]},
                "reason": crate::runtime::schema::nullable("string"),
                "reminder": {"type": "string"},
                "selected": {"type": "object"},
                "candidates": {"type": "array", "items": {"type": "object"}},
                "bank": {"type": "object"}
            },
            "required": ["decision", "candidates", "bank"]
        }))
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |call| {
            let request: InterveneRequest = serde_json::from_value(call.args.clone())
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            Ok(m.intervene(&request)?)
        },
    ));

    let m = memory;
    let mut case_request = request_schema();
    case_request["description"] = json!("An intervene request.");
    tools.push(Tool::blocking(
        ToolSpec::new(
            "memory_evaluate",
            "Measure proactive memory on labelled cases: selective intervention against always-inject, passive-retrieval and no-memory baselines (precision, recall, interruption rate, candidates exposed). Changes nothing.",
            json!({
                "type": "object",
                "properties": {
                    "cases": {"type": "array", "minItems": 1, "maxItems": 10000, "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "request": case_request,
                            "relevant_fact_ids": {"type": "array", "items": {"type": "string"}}
                        },
                        "required": ["id", "request"],
                        "additionalProperties": false
                    }}
                },
                "required": ["cases"],
                "additionalProperties": false
            }),
        )
        .title("Evaluate proactive memory")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "cases": {"type": "integer"},
                "selective": mode_schema(), "always_inject": mode_schema(),
                "passive_retrieval": mode_schema(), "no_memory": mode_schema()
            },
            "required": ["cases", "selective", "always_inject", "passive_retrieval", "no_memory"]
        })),
        move |call| {
            let cases: Vec<EvaluationCase> =
                serde_json::from_value(call.args.get("cases").cloned().unwrap_or_default())
                    .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            let cancel = call.cancel.clone();
            m.evaluate(&cases, &|| cancel.is_cancelled())?
                .ok_or(ToolError::Cancelled)
        },
    ));
    tools
}
