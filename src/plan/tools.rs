//! The four plan tools, declared once for every face: their arguments and results are the
//! Rust types below and in the plan modules, and their schemas are generated from them.
//! `verify` checks tool calls against the registry it is served from (`call.tools`), so it sees
//! every tool, including those registered after it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::simulate::MAX_TEST_STATES;
use super::verify::DEFAULT_MAX_ACTIONS;
use super::{equivalent, optimize, simulate, verify, ActionProposal, ToolCatalog, VerifyOptions};
use super::{Equivalence, Optimized, Simulation, Verification};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

/// The arguments of `verify` (and `car plan verify`, whose proposal comes from a file).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct VerifyArgs {
    /// The action proposal to check.
    #[arg(skip)]
    pub proposal: ActionProposal,
    /// More actions than this is an error.
    #[serde(default = "default_max_actions")]
    #[schemars(range(min = 1, max = 1000))]
    #[arg(long, default_value_t = DEFAULT_MAX_ACTIONS as u32, help = "More actions than this is an error (1–1000)")]
    pub max_actions: u32,
    /// Tools that exist where the plan will run although this registry lacks them.
    #[serde(default)]
    #[arg(long = "extra-tool", value_name = "NAME")]
    pub extra_tools: Vec<String>,
    /// State before the first action: key → value.
    #[serde(default)]
    #[arg(long, value_name = "JSON|@FILE", value_parser = state_arg, default_value = "{}",
          hide_default_value = true, help = STATE_HELP)]
    pub initial_state: Map<String, Value>,
}

fn default_max_actions() -> u32 {
    DEFAULT_MAX_ACTIONS as u32
}

const STATE_HELP: &str = "State before the first action: a JSON object, or @FILE";

/// `--initial-state`: a JSON object, or `@FILE` holding one (`@-`: stdin).
fn state_arg(text: &str) -> Result<Map<String, Value>, String> {
    let source = match text.strip_prefix('@') {
        Some("-") => std::io::read_to_string(std::io::stdin())
            .map_err(|e| format!("cannot read stdin: {e}"))?,
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?
        }
        None => text.to_string(),
    };
    match serde_json::from_str(&source) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("it must be a JSON object".into()),
        Err(e) => Err(format!("it is not JSON: {e}")),
    }
}

/// The arguments of `simulate` (and `car plan simulate`, whose proposal comes from a file).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct SimulateArgs {
    /// The action proposal to simulate.
    #[arg(skip)]
    pub proposal: ActionProposal,
    /// State before the first action: key → value.
    #[serde(default)]
    #[arg(long, value_name = "JSON|@FILE", value_parser = state_arg, default_value = "{}",
          hide_default_value = true, help = STATE_HELP)]
    pub initial_state: Map<String, Value>,
}

/// The arguments of `equivalent`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EquivalentArgs {
    /// The first proposal.
    pub proposal_a: ActionProposal,
    /// The second proposal.
    pub proposal_b: ActionProposal,
    /// 1–256 starting states; omitted or [] means the two defaults.
    #[serde(default)]
    #[schemars(length(max = MAX_TEST_STATES))]
    pub test_states: Vec<Map<String, Value>>,
}

/// The arguments of `optimize`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizeArgs {
    /// The action proposal to optimize.
    pub proposal: ActionProposal,
}

/// The four plan tools. `verify` checks a proposal against the tools beside it in the registry
/// it is served from (and the enabled connector tools), as they are at the call.
pub(crate) fn tools() -> Vec<Tool> {
    let read = |name: &str, title: &str, what: &str| {
        ToolSpec::new(name, what, Value::Null)
            .title(title)
            .effect(Effect::Read)
            .idempotence(Idempotence::Idempotent)
    };
    vec![
        Tool::typed(
            read(
                "verify",
                "Verify a plan",
                "Check an action proposal before running it. Reports, each with a severity and a tier (decision_procedure = exact over the declared plan, heuristic = rule of thumb): dependency cycles (with the path), unknown dependency ids, duplicate ids, tools that are not registered here (add tools that exist elsewhere to extra_tools), tool_call parameters that break the tool's input schema, preconditions nothing establishes or that fail when the declared effects are simulated, state read but never written, unordered writes to one key (warning; also listed in conflicts), identical tool calls repeated (2 = warning \"duplicate\", 3+ = error \"likely loop\") and more than max_actions. valid is false when any issue is an error. Also returns the execution levels (actions in one level may run together) and the simulated final state.",
            ),
            |args: VerifyArgs, call| -> Result<Verification, ToolError> {
                let options = VerifyOptions {
                    max_actions: args.max_actions as usize,
                    extra_tools: args.extra_tools,
                    initial_state: args.initial_state,
                };
                let catalog = ToolCatalog::beside(call.tools.clone());
                Ok(verify(&args.proposal, &catalog, &options))
            },
        ),
        Tool::typed(
            read(
                "simulate",
                "Simulate a plan",
                "Run a proposal over a state without running anything: each action's declared writes (a state_write's key/value, expected_effects) are applied in execution order. An action whose preconditions fail is skipped with the reason, and so is every action that depends on it (explicitly or by reading a key it writes). Returns final_state, the applied ids and the skipped actions.",
            ),
            |args: SimulateArgs, _call| -> Result<Simulation, ToolError> {
                Ok(simulate(&args.proposal, &args.initial_state))
            },
        ),
        Tool::typed(
            read(
                "equivalent",
                "Compare two plans",
                "Compare two proposals by simulating both from each test state and comparing the final states. Sampled, not proven: equal on these states only (tier \"sampled\"). Without test_states (or with []) the two defaults {} and {\"x\":1,\"y\":2} are used and used_default_states says so. On a difference, divergence gives the state, the first differing key and both values (null when absent).",
            ),
            |args: EquivalentArgs, _call| -> Result<Equivalence, ToolError> {
                Ok(equivalent(
                    &args.proposal_a,
                    &args.proposal_b,
                    &args.test_states,
                ))
            },
        ),
        Tool::typed(
            read(
                "optimize",
                "Optimize a plan",
                "Tidy a proposal: drop state_dependencies on keys that nothing in the proposal writes (they order nothing). Never reorders or removes actions. Returns the proposal with defaults filled in, and pruned: for each changed action, the keys removed.",
            ),
            |args: OptimizeArgs, _call| -> Result<Optimized, ToolError> {
                Ok(optimize(args.proposal))
            },
        ),
    ]
}
