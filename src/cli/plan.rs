//! `car plan verify|simulate|equivalent|optimize`: the plan tools over a proposal read from a
//! file or stdin (`-`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde::Deserialize;
use serde_json::Value;

use super::{call_tool, finish, human_as, prepare, read_input, tool_args, Env, Failure};
use crate::plan::{
    Equivalence, EquivalentArgs, OptimizeArgs, Optimized, Severity, SimulateArgs, Simulation,
    Verification, VerifyArgs,
};

const EXAMPLE: &str = r#"Example proposal (plan.json):
  {"actions": [
    {"id": "save", "type": "tool_call", "tool": "memory_add_fact",
     "parameters": {"subject": "build", "body": "cargo test before pushing"},
     "expected_effects": {"fact_saved": true}},
    {"id": "check", "type": "assertion", "state_dependencies": ["fact_saved"],
     "preconditions": [{"key": "fact_saved", "operator": "eq", "value": true}]}
  ]}
Actions: type tool_call | state_write (parameters.key/value) | state_read | assertion;
dependencies (ids), preconditions (eq neq gt lt gte lte exists not_exists contains),
expected_effects, state_dependencies (keys read; an earlier writer runs first)."#;

/// The help text after `car plan --help`.
pub(super) fn group_help() -> String {
    format!(
        "{EXAMPLE}\n\nExamples:\n  car plan verify plan.json          # exit 1 when the proposal is invalid\n  car plan simulate plan.json --initial-state '{{\"ready\":true}}'\n  car plan equivalent a.json b.json\n  car plan optimize - < plan.json"
    )
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Check a proposal (the verify tool): cycles, unknown or duplicate ids, unregistered tools,
    /// parameters that break a tool's schema, unmet preconditions, unwritten reads, unordered
    /// writes, repeated calls, size. Exits 1 when the proposal is invalid (any error issue).
    #[command(after_help = format!("{EXAMPLE}\n\nExamples:\n  car plan verify plan.json\n  cat plan.json | car plan verify - --extra-tool shell --initial-state '{{\"ready\":true}}'\n\nExit status: 0 valid, 1 invalid (any issue with severity error), 2 usage."))]
    Verify {
        /// The proposal as JSON, or - for stdin.
        file: PathBuf,
        #[command(flatten)]
        args: VerifyArgs,
    },
    /// Apply a proposal's declared writes to a state (the simulate tool); actions whose
    /// preconditions fail are skipped with their dependents.
    #[command(after_help = format!("{EXAMPLE}\n\nExample:\n  car plan simulate plan.json --initial-state '{{\"ready\":true}}'"))]
    Simulate {
        /// The proposal as JSON, or - for stdin.
        file: PathBuf,
        #[command(flatten)]
        args: SimulateArgs,
    },
    /// Compare two proposals on sample states (the equivalent tool). Sampled, not proven.
    #[command(
        after_help = "Examples:\n  car plan equivalent a.json b.json\n  car plan equivalent a.json b.json --states states.json   # [{\"x\":1}, {\"x\":2}]\n\nWithout --states the two default states {} and {\"x\":1,\"y\":2} are used."
    )]
    Equivalent {
        /// The first proposal, or - for stdin.
        a: PathBuf,
        /// The second proposal, or - for stdin.
        b: PathBuf,
        /// A JSON array of 1–256 starting states.
        #[arg(long, value_name = "FILE")]
        states: Option<PathBuf>,
    },
    /// Drop state_dependencies on keys nothing writes (the optimize tool); never reorders or
    /// removes actions.
    #[command(after_help = "Example:\n  car plan optimize plan.json --json | jq .data.proposal")]
    Optimize {
        /// The proposal as JSON, or - for stdin.
        file: PathBuf,
    },
}

fn read_json(path: &Path) -> Result<Value, Failure> {
    let text = read_input(path)?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::usage(format!("{} is not JSON: {e}", path.display())))
}

/// A file's JSON as `T` (a proposal, test states); what does not fit is bad arguments, named.
fn read_as<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Failure> {
    serde_path_to_error::deserialize(read_json(path)?).map_err(|e| {
        let at = e.path().to_string();
        Failure {
            code: "invalid_arguments",
            message: if at == "." {
                format!("{}: {}", path.display(), e.into_inner())
            } else {
                format!("{}: `{at}`: {}", path.display(), e.into_inner())
            },
            exit: 2,
        }
    })
}

/// The tool a plan command calls and its arguments.
fn as_tool_call(command: &PlanCommand) -> Result<(&'static str, Value), Failure> {
    Ok(match command {
        PlanCommand::Verify { file, args } => {
            let args = VerifyArgs {
                proposal: read_as(file)?,
                max_actions: args.max_actions,
                extra_tools: args.extra_tools.clone(),
                initial_state: args.initial_state.clone(),
            };
            ("verify", tool_args(&args)?)
        }
        PlanCommand::Simulate { file, args } => {
            let args = SimulateArgs {
                proposal: read_as(file)?,
                initial_state: args.initial_state.clone(),
            };
            ("simulate", tool_args(&args)?)
        }
        PlanCommand::Equivalent { a, b, states } => {
            if a.as_os_str() == "-" && b.as_os_str() == "-" {
                return Err(Failure::usage(
                    "only one of the two proposals can come from stdin",
                ));
            }
            let args = EquivalentArgs {
                proposal_a: read_as(a)?,
                proposal_b: read_as(b)?,
                test_states: match states {
                    Some(path) => read_as(path)?,
                    None => Vec::new(),
                },
            };
            ("equivalent", tool_args(&args)?)
        }
        PlanCommand::Optimize { file } => {
            let args = OptimizeArgs {
                proposal: read_as(file)?,
            };
            ("optimize", tool_args(&args)?)
        }
    })
}

fn compact(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn render_verify(verdict: &Verification) -> String {
    let count = |severity: Severity| {
        verdict
            .issues
            .iter()
            .filter(|i| i.severity == severity)
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    let mut out = format!(
        "{}: {errors} error{}, {warnings} warning{}\n",
        if verdict.valid { "valid" } else { "INVALID" },
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" },
    );
    for issue in &verdict.issues {
        out.push_str(&format!(
            "  {:<8} {:<12} {} [{}]\n",
            issue.severity.as_str(),
            issue.action_id.as_deref().unwrap_or("(proposal)"),
            issue.message,
            issue.tier.as_str(),
        ));
    }
    out.push_str("execution levels:\n");
    for (n, level) in verdict.execution_levels.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", n + 1, level.join(", ")));
    }
    for (a, b, key) in &verdict.conflicts {
        out.push_str(&format!(
            "conflict: {a} and {b} both write '{key}' unordered\n"
        ));
    }
    out.push_str(&format!(
        "simulated state: {}\n",
        compact(&verdict.simulated_state)
    ));
    out
}

fn render_simulate(simulation: &Simulation) -> String {
    let mut out = format!(
        "applied: {}\n",
        if simulation.applied.is_empty() {
            "-".to_string()
        } else {
            simulation.applied.join(", ")
        }
    );
    for skip in &simulation.skipped {
        out.push_str(&format!("skipped: {} ({})\n", skip.action_id, skip.reason));
    }
    out.push_str(&format!(
        "final state: {}\n",
        compact(&simulation.final_state)
    ));
    out
}

fn render_equivalent(verdict: &Equivalence) -> String {
    let tested = verdict.states_tested;
    let defaults = if verdict.used_default_states {
        " (the defaults {} and {\"x\":1,\"y\":2})"
    } else {
        ""
    };
    match (&verdict.divergence, verdict.equivalent) {
        (Some(d), false) => format!(
            "NOT equivalent: from state {}, '{}' ends as {} under A and {} under B (state {tested} tested{defaults})\n",
            compact(&d.state),
            d.key,
            compact(&d.a),
            compact(&d.b),
        ),
        _ => format!("equivalent on {tested} sampled state(s){defaults}; sampled, not proven\n"),
    }
}

fn render_optimize(optimized: &Optimized) -> String {
    let mut out = String::new();
    if optimized.pruned.is_empty() {
        out.push_str("nothing to prune\n");
    }
    for p in &optimized.pruned {
        out.push_str(&format!(
            "pruned {}: {}\n",
            p.action_id,
            p.removed.join(", ")
        ));
    }
    out.push_str(&serde_json::to_string_pretty(&optimized.proposal).unwrap_or_default());
    out.push('\n');
    out
}

pub async fn run(env: &Env, command: PlanCommand) -> ExitCode {
    let name = match &command {
        PlanCommand::Verify { .. } => "plan.verify",
        PlanCommand::Simulate { .. } => "plan.simulate",
        PlanCommand::Equivalent { .. } => "plan.equivalent",
        PlanCommand::Optimize { .. } => "plan.optimize",
    };
    let (app, (tool, args)) = match prepare(env, name, || as_tool_call(&command)) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    let result = call_tool(&app, tool, args, None).await;
    let invalid = matches!(&result, Ok(data)
        if Verification::deserialize(data).is_ok_and(|verdict| !verdict.valid));
    let code = match &command {
        PlanCommand::Verify { .. } => {
            finish(env.json, name, result, |data| human_as(data, render_verify))
        }
        PlanCommand::Simulate { .. } => finish(env.json, name, result, |data| {
            human_as(data, render_simulate)
        }),
        PlanCommand::Equivalent { .. } => finish(env.json, name, result, |data| {
            human_as(data, render_equivalent)
        }),
        PlanCommand::Optimize { .. } => finish(env.json, name, result, |data| {
            human_as(data, render_optimize)
        }),
    };
    if invalid {
        ExitCode::from(1)
    } else {
        code
    }
}
