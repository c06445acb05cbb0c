//! The `policy_check` tool, declared once for every face: it asks the runtime's own engine what
//! it would decide about a call, without running it and without taking a rate-limit slot.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Admission, Evaluation, PolicyEngine};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// The arguments of `policy_check` (and `car policy check`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckArgs {
    /// The tool name to check, e.g. Bash or memory_add_fact.
    #[schemars(length(min = 1))]
    pub tool: String,
    /// The call's arguments.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// State for require_state rules: key → value.
    #[serde(default)]
    pub state: Map<String, Value>,
}

/// `policy_check`, evaluating `engine` (the one the runtime's gate uses).
pub(crate) fn tool(engine: Arc<PolicyEngine>) -> Tool {
    Tool::typed(
        ToolSpec::new(
            "policy_check",
            "Ask the policy gate what it would decide about a tool call, without running it: rules from <CAR_HOME>/policies/*.toml then every .car/policies/*.toml from the outermost enclosing directory down to the project (merged: a nested rule only adds), plus the rules' self-protection and the egress guard for shell/http/fetch tools. Returns the decision, its basis, every finding (each with its rule and a reason that never echoes the matched value), how many rules are loaded and where they were read from. A rule file that does not load makes every decision deny (basis policy_load_failed) and names the file and line. Does not consume rate-limit budget. require_state rules read `state` (empty when omitted).",
            Value::Null,
        )
        .title("Check a call against the policy")
        .exempt_from_gate()
        .effect(Effect::Read)
        .idempotence(Idempotence::Idempotent),
        move |args: CheckArgs, _call| -> Result<Evaluation, ToolError> {
            Ok(engine.evaluate(
                &args.tool,
                &Value::Object(args.params),
                &args.state,
                Admission::DryRun,
            ))
        },
    )
}
