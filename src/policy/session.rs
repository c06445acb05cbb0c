//! Rules a WebSocket client adds for its own session, on top of the policy files. Two ways to
//! write them, one language underneath: CAR's rules registered by name, as CAR's documents give
//! them (`[{"name": "no-prod", "rule": "deny_tool_param", "target": "deploy", "key": "env",
//! "pattern": "prod"}]`), or a rule file's tables as JSON (`{"deny_tool": ["deploy"],
//! "rate_limit_tool": [{"tool": "search", "max_calls": 3, "interval_secs": 60}]}`). Both compile
//! into the policy engine's rule kinds, so every kind a file may hold works in a session too and
//! is evaluated by the same engine (the rate limits' windows live as long as the session).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::engine::{Admission, PolicyEngine};
use super::rules::{self, Rule, RuleKind, RuleSet};
use super::Severity;

/// Where session rules come from, in findings and errors.
const ORIGIN: &str = "session.init policies";

/// A session's rules, compiled.
#[derive(Debug)]
pub struct SessionRules {
    /// Each rule's name: a registered policy's own, a table row's `deny_tool:deploy`.
    pub names: Vec<String>,
    engine: PolicyEngine,
}

/// A rule registered by name (CAR's `PolicyDefinition`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    name: String,
    rule: Registered,
    target: Option<String>,
    key: Option<String>,
    pattern: Option<String>,
    value: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Registered {
    DenyTool,
    DenyToolParam,
    RequireState,
    DenyConnector,
}

impl Definition {
    /// The rule kind it stands for, or what it lacks.
    fn compile(self) -> Result<Rule, String> {
        let needs: &[(&str, bool)] = match self.rule {
            Registered::DenyTool | Registered::DenyConnector => {
                &[("target", self.target.is_some())]
            }
            Registered::DenyToolParam => &[
                ("target", self.target.is_some()),
                ("key", self.key.is_some()),
                ("pattern", self.pattern.is_some()),
            ],
            Registered::RequireState => {
                &[("key", self.key.is_some()), ("value", self.value.is_some())]
            }
        };
        let lacking: Vec<&str> = needs
            .iter()
            .filter(|(_, has)| !has)
            .map(|(field, _)| *field)
            .collect();
        if !lacking.is_empty() {
            return Err(format!(
                "policy '{}' ({:?}) needs {}",
                self.name,
                self.rule,
                lacking.join(", ")
            ));
        }
        let (target, key) = (
            self.target.unwrap_or_default(),
            self.key.unwrap_or_default(),
        );
        let kind = match self.rule {
            Registered::DenyTool => RuleKind::DenyTool { tool: target },
            Registered::DenyConnector => RuleKind::DenyConnector { slug: target },
            Registered::DenyToolParam => RuleKind::DenyToolParam {
                tool: target,
                param: key,
                equals: None,
                contains: self.pattern,
            },
            Registered::RequireState => RuleKind::RequireState {
                key,
                value: self.value.unwrap_or(Value::Null),
            },
        };
        Ok(Rule {
            kind,
            file: ORIGIN.into(),
            project: None,
            label: Some(self.name),
        })
    }
}

impl SessionRules {
    /// Compiles `policies` (a list of registered rules, or a rule file's tables); a rule that
    /// lacks a field or does not parse refuses them all. `project` is what the path rules call
    /// the project.
    pub fn compile(policies: &Value, project: &Path) -> Result<SessionRules, String> {
        let rules = match policies {
            Value::Null => Vec::new(),
            Value::Array(_) => {
                let definitions: Vec<Definition> =
                    serde_path_to_error::deserialize(policies.clone()).map_err(|e| {
                        // `[0].rule` from the list's own path.
                        let path = e.path().to_string();
                        format!("policies{path}: {}", e.into_inner())
                    })?;
                definitions
                    .into_iter()
                    .map(Definition::compile)
                    .collect::<Result<_, _>>()?
            }
            Value::Object(tables) => {
                let (rules, egress) =
                    rules::parse_json(Path::new(ORIGIN), tables).map_err(|e| e.to_string())?;
                if egress.is_some() {
                    return Err(format!(
                        "{ORIGIN}: [egress] is the policy files' alone; a session cannot change it"
                    ));
                }
                rules
            }
            _ => {
                return Err(
                    "policies is a list of rules ({name, rule, target?, key?, pattern?, value?}) or a rule file's tables ({\"deny_tool\": [...]})".into(),
                )
            }
        };
        let names = rules.iter().map(Rule::name).collect();
        let set = RuleSet {
            rules,
            ..RuleSet::default()
        };
        let engine = PolicyEngine::from_rules(set, project, project, None);
        Ok(SessionRules { names, engine })
    }

    /// Every session rule the call breaks, joined (`session policy 'no-prod': param 'env'
    /// matches a denied value`); `None` when it passes them all. Admits the call to the
    /// session's rate limits.
    pub fn violations(
        &self,
        tool: &str,
        params: &Value,
        state: &Map<String, Value>,
    ) -> Option<String> {
        if self.names.is_empty() {
            return None;
        }
        let evaluation = self
            .engine
            .evaluate(tool, params, state, Admission::Consume);
        let reasons: Vec<String> = evaluation
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Deny)
            .map(|f| format!("session policy '{}': {}", f.rule, f.reason))
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

impl Default for SessionRules {
    fn default() -> SessionRules {
        SessionRules {
            names: Vec::new(),
            engine: PolicyEngine::from_rules(
                RuleSet::default(),
                Path::new("/"),
                Path::new("/"),
                None,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(policies: Value) -> Result<SessionRules, String> {
        SessionRules::compile(&policies, Path::new("/work/p"))
    }

    #[test]
    fn registered_rules_compile_into_the_engines_rule_kinds() {
        let rules = compile(json!([
            {"name": "no-prod", "rule": "deny_tool_param", "target": "deploy", "key": "env", "pattern": "prod"},
            {"name": "region-first", "rule": "require_state", "key": "region", "value": "eu"},
            {"name": "no-github", "rule": "deny_connector", "target": "github"}
        ]))
        .unwrap();
        assert_eq!(rules.names, ["no-prod", "region-first", "no-github"]);
        let mut state = Map::new();
        state.insert("region".into(), json!("eu"));
        let denied = rules
            .violations("deploy", &json!({"env": "prod-eu"}), &state)
            .unwrap();
        assert_eq!(
            denied,
            "session policy 'no-prod': param 'env' matches a denied value"
        );
        assert!(rules
            .violations("deploy", &json!({"env": "dev"}), &state)
            .is_none());
        let unready = rules
            .violations("deploy", &json!({"env": "dev"}), &Map::new())
            .unwrap();
        assert!(
            unready.contains("state['region'] must be \"eu\""),
            "{unready}"
        );
        assert!(rules
            .violations("mcp_github_create_issue", &json!({}), &state)
            .is_some());
    }

    #[test]
    fn a_rule_files_tables_work_in_a_session_rate_limits_and_regexes_included() {
        let rules = compile(json!({
            "rate_limit_tool": [{"tool": "search", "max_calls": 2, "interval_secs": 60}],
            "deny_tool_param_matching": [{"tool": "http", "param": "url", "matches": "^http://"}]
        }))
        .unwrap();
        assert_eq!(
            rules.names,
            [
                "deny_tool_param_matching:http.url",
                "rate_limit_tool:search"
            ]
        );
        let state = Map::new();
        assert!(rules.violations("search", &json!({}), &state).is_none());
        assert!(rules.violations("search", &json!({}), &state).is_none());
        let third = rules.violations("search", &json!({}), &state).unwrap();
        assert!(third.contains("limited to 2 call(s)"), "{third}");
        assert!(rules
            .violations("http", &json!({"url": "http://x"}), &state)
            .is_some());
        assert!(rules
            .violations("http", &json!({"url": "https://x"}), &state)
            .is_none());
    }

    #[test]
    fn a_bad_rule_refuses_them_all_and_says_what_is_wrong() {
        let lacking = compile(json!([{"name": "no-prod", "rule": "deny_tool_param"}])).unwrap_err();
        assert!(lacking.contains("needs target, key, pattern"), "{lacking}");
        let unknown = compile(json!([{"name": "x", "rule": "allow_everything"}])).unwrap_err();
        assert!(unknown.contains("policies[0].rule"), "{unknown}");
        let typo = compile(json!({"deny_tools": ["x"]})).unwrap_err();
        assert!(typo.contains("deny_tools"), "{typo}");
        let regex = compile(
            json!({"deny_tool_param_matching": [{"tool": "t", "param": "p", "matches": "("}]}),
        )
        .unwrap_err();
        assert!(regex.contains("does not compile"), "{regex}");
        let egress = compile(json!({"egress": {"allow_hosts": ["x"]}})).unwrap_err();
        assert!(egress.contains("egress"), "{egress}");
        assert!(compile(json!("deny everything")).is_err());
    }
}
