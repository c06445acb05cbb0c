//! The `policy_check` tool, declared once for every face: it asks the runtime's own engine what
//! it would decide about a call, without running it and without taking a rate-limit slot.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{Admission, PolicyEngine};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["allow", "deny"]},
            "basis": {"type": "string", "enum": ["denied_by_rule", "passed_rules", "no_rules_configured", "policy_load_failed"],
                      "description": "no_rules_configured is an allow with no rule behind it; policy_load_failed always denies."},
            "tool": {"type": "string"},
            "findings": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string", "enum": ["policy_rules", "inspector:egress"]},
                    "rule": {"type": "string"},
                    "severity": {"type": "string", "enum": ["deny", "warn"]},
                    "reason": {"type": "string", "description": "Never echoes the matched value."}
                },
                "required": ["source", "rule", "severity", "reason"]
            }},
            "rules_loaded": {"type": "integer", "minimum": 0},
            "policy_sources": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "exists": {"type": "boolean"},
                    "rules": {"type": "integer", "minimum": 0}
                },
                "required": ["path", "exists", "rules"]
            }}
        },
        "required": ["decision", "basis", "tool", "findings", "rules_loaded", "policy_sources"]
    })
}

/// `policy_check`, evaluating `engine` (the one the runtime's gate uses).
pub(crate) fn tool(engine: Arc<PolicyEngine>) -> Tool {
    Tool::new(
        ToolSpec::new(
            "policy_check",
            "Ask the policy gate what it would decide about a tool call, without running it: rules from <CAR_HOME>/policies/*.toml then <project>/.car/policies/*.toml (never a parent directory's), plus the egress guard for shell/http/fetch tools. Returns the decision, its basis, every finding (each with its rule and a reason that never echoes the matched value), how many rules are loaded and where they were read from. A rule file that does not load makes every decision deny (basis policy_load_failed) and names the file and line. Does not consume rate-limit budget. require_state rules read `state` (empty when omitted).",
            json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "minLength": 1, "description": "The tool name to check, e.g. Bash or memory_add_fact."},
                    "params": {"type": "object", "default": {}, "description": "The call's arguments."},
                    "state": {"type": "object", "default": {}, "description": "State for require_state rules: key → value."}
                },
                "required": ["tool"],
                "additionalProperties": false
            }),
        )
        .title("Check a call against the policy")
        .exempt_from_gate()
        .output_schema(output_schema())
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        move |call| {
            let engine = engine.clone();
            async move {
                let tool = call.args["tool"].as_str().unwrap_or_default();
                let params = call
                    .args
                    .get("params")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new()));
                let state = call
                    .args
                    .get("state")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let evaluation = engine.evaluate(tool, &params, &state, Admission::DryRun);
                serde_json::to_value(evaluation).map_err(|e| ToolError::Failed(e.to_string()))
            }
        },
    )
}
