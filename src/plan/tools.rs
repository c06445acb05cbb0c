//! The four plan tools, declared once for every face. `verify` checks tool calls against the
//! registry it is served from; it reads that registry through a [`ToolCatalog`] filled once
//! the runtime is built, so it sees every tool, including those registered after it.

use serde_json::{json, Map, Value};

use super::simulate::MAX_TEST_STATES;
use super::verify::DEFAULT_MAX_ACTIONS;
use super::{equivalent, optimize, simulate, verify, ActionProposal, PlanError, ToolCatalog};
use super::{Result, VerifyOptions};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

fn proposal_schema(description: &str) -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "id": {"type": "string", "description": "Default: 12 hex characters of a UUIDv4."},
            "source": {"type": "string", "description": "Who wrote the proposal. Default: \"unknown\"."},
            "timestamp": {"type": "string", "description": "RFC 3339. Default: now."},
            "context": crate::runtime::schema::any_value("Passed through, not interpreted."),
            "actions": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Unique within the proposal; default UUID-derived."},
                    "type": {"type": "string", "enum": ["tool_call", "state_write", "state_read", "assertion"],
                             "description": "tool_call runs `tool`; state_write sets parameters.key to parameters.value; state_read reads parameters.key; assertion only checks its preconditions."},
                    "tool": {"type": "string", "description": "The tool a tool_call runs."},
                    "parameters": {"type": "object", "description": "A tool_call's arguments (checked against the tool's input schema)."},
                    "dependencies": {"type": "array", "items": {"type": "string"}, "description": "Ids of actions that must complete first."},
                    "preconditions": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "key": {"type": "string"},
                            "operator": {"type": "string", "default": "eq",
                                         "description": "eq, neq, gt, lt, gte, lte (numbers), exists, not_exists, contains (substring or array member). Any other operator fails."},
                            "value": crate::runtime::schema::any_value("The value the key is compared with (not needed by exists/not_exists)."),
                            "description": {"type": "string"}
                        },
                        "required": ["key"]
                    }},
                    "expected_effects": {"type": "object", "description": "Declared state changes: key → value after the action."},
                    "state_dependencies": {"type": "array", "items": {"type": "string"}, "description": "State keys this action reads; an earlier writer of one runs first."},
                    "read_set": strings,
                    "write_set": strings,
                    "failure_behavior": {"type": "string", "enum": ["abort", "retry", "skip"], "default": "abort"},
                    "max_retries": {"type": "integer", "minimum": 0, "maximum": 4294967295u64, "default": 3},
                    "idempotent": {"type": "boolean", "default": false},
                    "reversibility": {"type": "string", "enum": ["reversible", "compensable", "irreversible"], "default": "irreversible"},
                    "compensation": {"type": "object", "description": "{\"type\":\"tool\",\"tool\":…,\"parameters\":{…}} or {\"type\":\"action_ref\",\"action_id\":…}"},
                    "timeout_ms": {"type": "integer", "minimum": 0},
                    "metadata": {"type": "object"}
                },
                "required": ["type"]
            }}
        },
        "required": ["actions"]
    })
}

const STATE: &str = "State before the first action: key → value.";

fn issue_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action_id": crate::runtime::schema::nullable_described("string", "null for an issue of the whole proposal"),
            "severity": {"type": "string", "enum": ["error", "warning", "info"]},
            "message": {"type": "string"},
            "tier": {"type": "string", "enum": ["decision_procedure", "heuristic", "sampled"]}
        },
        "required": ["action_id", "severity", "message", "tier"]
    })
}

fn proposal_arg(args: &Value, field: &str) -> Result<ActionProposal> {
    serde_json::from_value(args.get(field).cloned().unwrap_or(Value::Null)).map_err(|e| {
        PlanError::InvalidProposal {
            field: field.to_string(),
            message: e.to_string(),
        }
    })
}

fn state_arg(args: &Value, field: &str) -> Map<String, Value> {
    args.get(field)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn to_json(value: impl serde::Serialize) -> std::result::Result<Value, ToolError> {
    serde_json::to_value(value).map_err(|e| ToolError::Failed(e.to_string()))
}

/// The four plan tools. `verify` checks a proposal against the tools beside it in the registry
/// it is served from (and the enabled connector tools), as they are at the call.
pub(crate) fn tools() -> Vec<Tool> {
    let mut tools = Vec::new();

    tools.push(Tool::blocking(
        ToolSpec::new(
            "verify",
            "Check an action proposal before running it. Reports, each with a severity and a tier (decision_procedure = exact over the declared plan, heuristic = rule of thumb): dependency cycles (with the path), unknown dependency ids, duplicate ids, tools that are not registered here (add tools that exist elsewhere to extra_tools), tool_call parameters that break the tool's input schema, preconditions nothing establishes or that fail when the declared effects are simulated, state read but never written, unordered writes to one key (warning; also listed in conflicts), identical tool calls repeated (2 = warning \"duplicate\", 3+ = error \"likely loop\") and more than max_actions. valid is false when any issue is an error. Also returns the execution levels (actions in one level may run together) and the simulated final state.",
            json!({
                "type": "object",
                "properties": {
                    "proposal": proposal_schema("The action proposal to check."),
                    "max_actions": {"type": "integer", "minimum": 1, "maximum": 1000, "default": DEFAULT_MAX_ACTIONS,
                                    "description": "More actions than this is an error."},
                    "extra_tools": {"type": "array", "items": {"type": "string"},
                                    "description": "Tools that exist where the plan will run although this registry lacks them."},
                    "initial_state": {"type": "object", "description": STATE}
                },
                "required": ["proposal"],
                "additionalProperties": false
            }),
        )
        .title("Verify a plan")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "issues": {"type": "array", "items": issue_schema()},
                "simulated_state": {"type": "object"},
                "execution_levels": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                "conflicts": {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3},
                              "description": "[a, b, key]: two actions write key and nothing orders them."}
            },
            "required": ["valid", "issues", "simulated_state", "execution_levels", "conflicts"]
        }))
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        move |call| {
            let args = &call.args;
            let proposal = proposal_arg(args, "proposal")?;
            let options = VerifyOptions {
                max_actions: args
                    .get("max_actions")
                    .and_then(Value::as_u64)
                    .map_or(DEFAULT_MAX_ACTIONS, |n| n as usize),
                extra_tools: crate::runtime::arg_strings(args, "extra_tools"),
                initial_state: state_arg(args, "initial_state"),
            };
            let catalog = ToolCatalog::from_registry(call.tools.registry())
                .with_source(call.tools.source().cloned());
            to_json(verify(&proposal, &catalog, &options))
        },
    ));

    tools.push(Tool::blocking(
        ToolSpec::new(
            "simulate",
            "Run a proposal over a state without running anything: each action's declared writes (a state_write's key/value, expected_effects) are applied in execution order. An action whose preconditions fail is skipped with the reason, and so is every action that depends on it (explicitly or by reading a key it writes). Returns final_state, the applied ids and the skipped actions.",
            json!({
                "type": "object",
                "properties": {
                    "proposal": proposal_schema("The action proposal to simulate."),
                    "initial_state": {"type": "object", "default": {}, "description": STATE}
                },
                "required": ["proposal"],
                "additionalProperties": false
            }),
        )
        .title("Simulate a plan")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "final_state": {"type": "object"},
                "applied": {"type": "array", "items": {"type": "string"}},
                "skipped": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"action_id": {"type": "string"}, "reason": {"type": "string"}},
                    "required": ["action_id", "reason"]
                }}
            },
            "required": ["final_state", "applied", "skipped"]
        }))
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        |call| {
            let proposal = proposal_arg(&call.args, "proposal")?;
            to_json(simulate(&proposal, &state_arg(&call.args, "initial_state")))
        },
    ));

    tools.push(Tool::blocking(
        ToolSpec::new(
            "equivalent",
            "Compare two proposals by simulating both from each test state and comparing the final states. Sampled, not proven: equal on these states only (tier \"sampled\"). Without test_states (or with []) the two defaults {} and {\"x\":1,\"y\":2} are used and used_default_states says so. On a difference, divergence gives the state, the first differing key and both values (null when absent).",
            json!({
                "type": "object",
                "properties": {
                    "proposal_a": proposal_schema("The first proposal."),
                    "proposal_b": proposal_schema("The second proposal."),
                    "test_states": {"type": "array", "maxItems": MAX_TEST_STATES, "items": {"type": "object"},
                                    "description": "1–256 starting states; omitted or [] means the two defaults."}
                },
                "required": ["proposal_a", "proposal_b"],
                "additionalProperties": false
            }),
        )
        .title("Compare two plans")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "equivalent": {"type": "boolean"},
                "tier": {"type": "string", "const": "sampled"},
                "states_tested": {"type": "integer"},
                "used_default_states": {"type": "boolean"},
                "divergence": {"type": "object", "properties": {
                    "state": {"type": "object"}, "key": {"type": "string"},
                    "a": crate::runtime::schema::any_value("The key's value after proposal_a (null when absent)."),
                    "b": crate::runtime::schema::any_value("The key's value after proposal_b (null when absent).")
                }, "required": ["state", "key", "a", "b"]}
            },
            "required": ["equivalent", "tier", "states_tested", "used_default_states"]
        }))
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        |call| {
            let a = proposal_arg(&call.args, "proposal_a")?;
            let b = proposal_arg(&call.args, "proposal_b")?;
            let states: Vec<Map<String, Value>> = call
                .args
                .get("test_states")
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_object).cloned().collect())
                .unwrap_or_default();
            to_json(equivalent(&a, &b, &states))
        },
    ));

    tools.push(Tool::blocking(
        ToolSpec::new(
            "optimize",
            "Tidy a proposal: drop state_dependencies on keys that nothing in the proposal writes (they order nothing). Never reorders or removes actions. Returns the proposal with defaults filled in, and pruned: for each changed action, the keys removed.",
            json!({
                "type": "object",
                "properties": {"proposal": proposal_schema("The action proposal to optimize.")},
                "required": ["proposal"],
                "additionalProperties": false
            }),
        )
        .title("Optimize a plan")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "proposal": {"type": "object"},
                "pruned": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"action_id": {"type": "string"}, "removed": {"type": "array", "items": {"type": "string"}}},
                    "required": ["action_id", "removed"]
                }}
            },
            "required": ["proposal", "pruned"]
        }))
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        |call| to_json(optimize(proposal_arg(&call.args, "proposal")?)),
    ));

    tools
}
