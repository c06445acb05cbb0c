//! Policies: rule files (`<CAR_HOME>/policies/*.toml`, then every enclosing
//! `.car/policies/*.toml`, merged), the rules' self-protection, inline scripts read with real
//! grammars, the engine that evaluates a call against them and the egress guard, the
//! dispatcher's gate built on that engine, the `policy_check` tool, and the adapter that lets
//! Claude Code's PreToolUse hook ask the same engine (`car policy-check-hook`).
//!
//! Every rule can only narrow: a call is allowed unless some finding denies it. Findings are
//! all collected, never short-circuited, and a reason never echoes the value that matched.
//! Rate limits are sliding windows kept per process (per `car-mcp` session, per `car` command;
//! the hook starts a new process per call, so a rate limit there never trips).

mod claude_tools;
mod commands;
mod deny_command;
mod egress;
mod engine;
pub mod gate_log;
mod guard;
pub(crate) mod hook;
pub(crate) mod hosts;
pub(crate) mod preset;
pub(crate) mod rules;
mod scripts;
pub(crate) mod secrets;
mod session;
mod shell;
mod tools;
pub use tools::CheckArgs;

use serde::{Deserialize, Serialize};

pub use engine::{Admission, PolicyEngine};
pub use rules::LoadFailure;
pub use session::SessionRules;
pub(crate) use tools::tool;

/// The simple commands CAR's shell parser reads in `text`, those inside substitutions
/// included, or `None` when it refuses to inspect it (for `benches/shell_parsers.rs`).
#[cfg(feature = "shell-parser-bench")]
pub fn shell_simple_commands(text: &str) -> Option<usize> {
    fn count(script: &shell::Script) -> usize {
        script
            .commands
            .iter()
            .map(|simple| {
                let words = simple
                    .words
                    .iter()
                    .chain(simple.assignments.iter().map(|(_, w)| w))
                    .chain(simple.redirects.iter().map(|r| &r.target));
                1 + words
                    .flat_map(|w| &w.substitutions)
                    .map(count)
                    .sum::<usize>()
            })
            .sum()
    }
    shell::parse(text).ok().map(|script| count(&script))
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    /// Its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

/// Why the decision is what it is (no_rules_configured allows with no rule behind it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// At least one finding denies (a rule or the egress guard).
    DeniedByRule,
    /// Rules are loaded and the call cleared them.
    PassedRules,
    /// No rule is loaded: an allow with nothing behind it (the egress guard still ran).
    NoRulesConfigured,
    /// A rule file did not load: every call is denied.
    PolicyLoadFailed,
}

impl Basis {
    /// Its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::DeniedByRule => "denied_by_rule",
            Basis::PassedRules => "passed_rules",
            Basis::NoRulesConfigured => "no_rules_configured",
            Basis::PolicyLoadFailed => "policy_load_failed",
        }
    }
}

/// Who produced a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Source {
    #[serde(rename = "policy_rules")]
    PolicyRules,
    #[serde(rename = "inspector:egress")]
    Egress,
}

/// Whether a finding blocks the call or only warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Deny,
    Warn,
}

impl Severity {
    /// Its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Deny => "deny",
            Severity::Warn => "warn",
        }
    }
}

/// One rule's or inspector's verdict on a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    pub source: Source,
    /// The rule's name, e.g. `deny_tool:deploy`, `egress:raw_socket`.
    pub rule: String,
    pub severity: Severity,
    /// Never echoes the matched value.
    pub reason: String,
}

/// The `policy_check` result: the decision, its basis and every finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evaluation {
    pub decision: Decision,
    pub basis: Basis,
    pub tool: String,
    pub findings: Vec<Finding>,
    pub rules_loaded: usize,
    pub policy_sources: Vec<rules::Source>,
}

impl Evaluation {
    /// The denying findings as one line: `rule (reason); …`, each distinct one once.
    pub fn deny_reason(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for finding in self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Deny)
        {
            // The same rule loaded from two files (home and project) is said once.
            let part = format!("{} ({})", finding.rule, finding.reason);
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialized_ones() {
        let name = |value: serde_json::Value| value.as_str().unwrap_or_default().to_string();
        for decision in [Decision::Allow, Decision::Deny] {
            assert_eq!(name(serde_json::json!(decision)), decision.as_str());
        }
        for basis in [
            Basis::DeniedByRule,
            Basis::PassedRules,
            Basis::NoRulesConfigured,
            Basis::PolicyLoadFailed,
        ] {
            assert_eq!(name(serde_json::json!(basis)), basis.as_str());
        }
        for severity in [Severity::Deny, Severity::Warn] {
            assert_eq!(name(serde_json::json!(severity)), severity.as_str());
        }
    }
}
