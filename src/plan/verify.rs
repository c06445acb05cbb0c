//! `verify`: static checks of a proposal before it runs. Every check is exact over the declared
//! plan (`decision_procedure`) except the repeated-call rule, a rule of thumb (`heuristic`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::dag::Dag;
use super::ir::{ActionProposal, ActionType, Operator};
use crate::runtime::Registry;

/// The default and the bounds of `max_actions`.
pub const DEFAULT_MAX_ACTIONS: usize = 30;

/// How bad an issue is; any `error` makes the proposal invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// How an issue was found: an exact check, a rule of thumb, or sampling. Not ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Exact over the declared plan.
    DecisionProcedure,
    /// A rule of thumb.
    Heuristic,
    /// True on the states tried, not proven.
    Sampled,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::DecisionProcedure => "decision_procedure",
            Tier::Heuristic => "heuristic",
            Tier::Sampled => "sampled",
        }
    }
}

/// One finding. `action_id` is null for findings about the whole proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Issue {
    /// null for an issue of the whole proposal.
    pub action_id: Option<String>,
    pub severity: Severity,
    pub message: String,
    pub tier: Tier,
}

/// The verdict on a proposal.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Verification {
    /// False when any issue is an error.
    pub valid: bool,
    pub issues: Vec<Issue>,
    /// The initial state with every action's declared writes applied in execution order,
    /// including actions whose preconditions fail (so one pass reports everything).
    pub simulated_state: Map<String, Value>,
    /// Action ids by level: the actions of one level may run together.
    pub execution_levels: Vec<Vec<String>>,
    /// `[a, b, key]`: two actions write `key` and nothing orders them.
    pub conflicts: Vec<(String, String, String)>,
}

/// The input schemas of every registered tool, compiled once by the registry.
#[derive(Clone, Default)]
pub struct ToolCatalog {
    validators: HashMap<String, Arc<crate::runtime::LazyValidator>>,
    /// The tools beside (a running tool's registry and the connectors' tools), asked at
    /// verify time for a tool not declared here.
    beside: Option<Arc<dyn crate::runtime::Tools>>,
}

impl ToolCatalog {
    pub fn from_registry(registry: &Registry) -> ToolCatalog {
        ToolCatalog {
            validators: registry
                .validators()
                .map(|(name, v)| (name.to_string(), v.clone()))
                .collect(),
            beside: None,
        }
    }

    /// Knows the tools a handler sees beside it, as they are when a proposal is checked.
    pub fn beside(tools: Arc<dyn crate::runtime::Tools>) -> ToolCatalog {
        ToolCatalog {
            validators: HashMap::new(),
            beside: Some(tools),
        }
    }

    /// Adds tools declared elsewhere (a WebSocket client's own tools), by name and input schema.
    pub fn with_declared(mut self, tools: impl IntoIterator<Item = (String, Value)>) -> Self {
        for (name, schema) in tools {
            self.validators
                .insert(name, Arc::new(crate::runtime::LazyValidator::new(schema)));
        }
        self
    }

    /// Every way `params` break the input schema of `tool`, or `None` when it knows no such
    /// tool.
    fn problems(&self, tool: &str, params: &Value) -> Option<Vec<String>> {
        match self.validators.get(tool) {
            Some(validator) => Some(validator.problems(params)),
            None => self.beside.as_ref()?.problems(tool, params),
        }
    }
}

/// What `verify` checks a proposal against.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// More actions than this is an error.
    pub max_actions: usize,
    /// Tools that exist where the proposal will run but are not in this registry.
    pub extra_tools: Vec<String>,
    /// State that holds before the first action.
    pub initial_state: Map<String, Value>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            max_actions: DEFAULT_MAX_ACTIONS,
            extra_tools: Vec::new(),
            initial_state: Map::new(),
        }
    }
}

struct Findings(Vec<Issue>);

impl Findings {
    fn add(&mut self, action_id: Option<&str>, severity: Severity, tier: Tier, message: String) {
        self.0.push(Issue {
            action_id: action_id.map(str::to_string),
            severity,
            message,
            tier,
        });
    }

    fn error(&mut self, action_id: &str, message: String) {
        self.add(
            Some(action_id),
            Severity::Error,
            Tier::DecisionProcedure,
            message,
        );
    }

    fn warning(&mut self, action_id: &str, message: String) {
        self.add(
            Some(action_id),
            Severity::Warning,
            Tier::DecisionProcedure,
            message,
        );
    }
}

/// Checks a proposal against the tool catalog and the options.
pub fn verify(
    proposal: &ActionProposal,
    catalog: &ToolCatalog,
    options: &VerifyOptions,
) -> Verification {
    let actions = &proposal.actions;
    let dag = Dag::build(actions);
    let mut found = Findings(Vec::new());

    // more than max_actions
    if actions.len() > options.max_actions {
        found.add(
            None,
            Severity::Error,
            Tier::DecisionProcedure,
            format!(
                "the proposal has {} actions, more than max_actions {}",
                actions.len(),
                options.max_actions
            ),
        );
    }

    // duplicate ids
    let mut seen: HashSet<&str> = HashSet::new();
    for action in actions {
        if !seen.insert(&action.id) {
            found.error(
                &action.id,
                format!(
                    "duplicate action id '{}'; ids must be unique within a proposal",
                    action.id
                ),
            );
        }
    }

    // unknown dependency ids
    for (i, dep) in &dag.unknown_dependencies {
        found.error(
            &actions[*i].id,
            format!("depends on '{dep}', which is no action of this proposal"),
        );
    }

    // cycles
    for cycle in &dag.cycles {
        let mut path: Vec<&str> = cycle.iter().map(|&i| actions[i].id.as_str()).collect();
        path.push(path[0]);
        found.error(path[0], format!("dependency cycle: {}", path.join(" → ")));
    }

    // unregistered tools and parameters that break the tool's input schema
    let extra: HashSet<&str> = options.extra_tools.iter().map(String::as_str).collect();
    for action in actions {
        let tool = match (action.kind, &action.tool) {
            (ActionType::ToolCall, Some(tool)) => tool,
            (ActionType::ToolCall, None) => {
                found.error(&action.id, "a tool_call names no tool".to_string());
                continue;
            }
            (ActionType::StateWrite | ActionType::StateRead | ActionType::Assertion, _) => continue,
        };
        let params = Value::Object(action.parameters.clone());
        match catalog.problems(tool, &params) {
            Some(problems) => {
                if !problems.is_empty() {
                    found.error(
                        &action.id,
                        format!(
                            "parameters break the input schema of '{tool}': {}",
                            problems.join("; ")
                        ),
                    );
                }
            }
            None if extra.contains(tool.as_str()) => {}
            None => found.error(&action.id, format!("tool '{tool}' is not registered")),
        }
    }

    // state_write without a key
    for action in actions {
        if action.kind == ActionType::StateWrite && action.written_key().is_none() {
            found.error(
                &action.id,
                "a state_write needs a string parameters.key".to_string(),
            );
        }
    }

    // preconditions nothing establishes, unknown operators
    let written: HashSet<&str> = actions
        .iter()
        .flat_map(|a| a.writes())
        .chain(options.initial_state.keys().map(String::as_str))
        .collect();
    let mut unestablished: HashSet<(usize, usize)> = HashSet::new();
    for (i, action) in actions.iter().enumerate() {
        for (j, pre) in action.preconditions.iter().enumerate() {
            match Operator::parse(&pre.operator) {
                None => {
                    unestablished.insert((i, j));
                    found.error(
                        &action.id,
                        format!(
                            "precondition on '{}' uses unknown operator '{}' (known: {}); it fails",
                            pre.key,
                            pre.operator,
                            super::ir::OPERATORS
                        ),
                    );
                }
                Some(Operator::NotExists) => {}
                Some(
                    Operator::Eq
                    | Operator::Neq
                    | Operator::Gt
                    | Operator::Lt
                    | Operator::Gte
                    | Operator::Lte
                    | Operator::Exists
                    | Operator::Contains,
                ) => {
                    if !written.contains(pre.key.as_str()) {
                        unestablished.insert((i, j));
                        found.error(
                            &action.id,
                            format!(
                                "precondition on '{}' is established by nothing: no action writes it and the initial state lacks it",
                                pre.key
                            ),
                        );
                    }
                }
            }
        }
    }

    // state read but never written
    for action in actions {
        let reads = action
            .state_dependencies
            .iter()
            .map(String::as_str)
            .chain(action.read_key());
        let mut reported: HashSet<&str> = HashSet::new();
        for key in reads {
            if !written.contains(key) && reported.insert(key) {
                found.warning(
                    &action.id,
                    format!(
                        "reads state '{key}', which no action writes and the initial state lacks"
                    ),
                );
            }
        }
    }

    // unordered writes to one key
    let reach = dag.ancestors();
    let mut writers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, action) in actions.iter().enumerate() {
        for key in action.writes() {
            let list = writers.entry(key).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    let mut keys: Vec<&&str> = writers.keys().collect();
    keys.sort();
    let mut conflicts = Vec::new();
    for key in keys {
        let list = &writers[*key];
        for (x, &a) in list.iter().enumerate() {
            for &b in &list[x + 1..] {
                if !reach.contains(a, b) && !reach.contains(b, a) {
                    let (ia, ib) = (&actions[a].id, &actions[b].id);
                    found.warning(
                        ib,
                        format!("writes '{key}' like '{ia}', and nothing orders the two: the result depends on timing"),
                    );
                    conflicts.push((ia.clone(), ib.clone(), key.to_string()));
                }
            }
        }
    }

    // repeated identical calls
    let mut groups: Vec<(&str, &Map<String, Value>, Vec<&str>)> = Vec::new();
    for action in actions {
        let (ActionType::ToolCall, Some(tool)) = (action.kind, &action.tool) else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(t, p, _)| *t == tool.as_str() && **p == action.parameters)
        {
            Some(group) => group.2.push(&action.id),
            None => groups.push((tool, &action.parameters, vec![&action.id])),
        }
    }
    for (tool, _, ids) in &groups {
        let (severity, what) = match ids.len() {
            0 | 1 => continue,
            2 => (Severity::Warning, "duplicate"),
            _ => (Severity::Error, "likely loop"),
        };
        found.add(
            Some(ids[0]),
            severity,
            Tier::Heuristic,
            format!(
                "{what}: '{tool}' is called {} times with identical parameters ({})",
                ids.len(),
                ids.join(", ")
            ),
        );
    }

    // simulation: declared writes applied in order, even past a failed precondition
    let mut state = options.initial_state.clone();
    for i in dag.order() {
        let action = &actions[i];
        for (j, pre) in action.preconditions.iter().enumerate() {
            if unestablished.contains(&(i, j)) {
                continue;
            }
            if let Err(why) = pre.check(&state) {
                found.error(
                    &action.id,
                    format!("precondition fails in simulation: {why}"),
                );
            }
        }
        action.apply(&mut state);
    }

    let issues = found.0;
    Verification {
        valid: !issues.iter().any(|i| i.severity == Severity::Error),
        issues,
        simulated_state: state,
        execution_levels: dag
            .levels
            .iter()
            .map(|level| level.iter().map(|&i| actions[i].id.clone()).collect())
            .collect(),
        conflicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Tool, ToolSpec};
    use serde_json::json;

    fn catalog() -> ToolCatalog {
        let mut registry = Registry::default();
        let spec = ToolSpec::new(
            "add",
            "test tool",
            json!({"type": "object", "properties": {"subject": {"type": "string"}},
                   "required": ["subject"], "additionalProperties": false}),
        );
        registry
            .register(Tool::blocking(spec, |_| Ok(json!({}))))
            .unwrap();
        ToolCatalog::from_registry(&registry)
    }

    fn check(actions: Value) -> Verification {
        check_with(actions, &VerifyOptions::default())
    }

    fn check_with(actions: Value, options: &VerifyOptions) -> Verification {
        let proposal: ActionProposal =
            serde_json::from_value(json!({ "actions": actions })).unwrap();
        verify(&proposal, &catalog(), options)
    }

    fn only(v: &Verification) -> &Issue {
        assert_eq!(v.issues.len(), 1, "{:#?}", v.issues);
        &v.issues[0]
    }

    #[test]
    fn a_clean_proposal_is_valid() {
        let v = check(json!([
            {"id": "w", "type": "state_write", "parameters": {"key": "k", "value": 1}},
            {"id": "c", "type": "tool_call", "tool": "add", "parameters": {"subject": "s"},
             "preconditions": [{"key": "k", "operator": "eq", "value": 1}], "state_dependencies": ["k"]}
        ]));
        assert!(v.valid, "{:#?}", v.issues);
        assert!(v.issues.is_empty());
        assert_eq!(v.execution_levels, vec![vec!["w"], vec!["c"]]);
        assert_eq!(v.simulated_state, *json!({"k": 1}).as_object().unwrap());
    }

    #[test]
    fn rule_cycle() {
        let v = check(json!([
            {"id": "a", "type": "assertion", "dependencies": ["b"]},
            {"id": "b", "type": "assertion", "dependencies": ["a"]}
        ]));
        assert!(!v.valid);
        assert_eq!(only(&v).message, "dependency cycle: a → b → a");
    }

    #[test]
    fn rule_unknown_dependency() {
        let v = check(json!([{"id": "a", "type": "assertion", "dependencies": ["ghost"]}]));
        assert_eq!(
            only(&v).message,
            "depends on 'ghost', which is no action of this proposal"
        );
        assert!(!v.valid);
    }

    #[test]
    fn rule_duplicate_id() {
        let v = check(json!([
            {"id": "a", "type": "assertion"},
            {"id": "a", "type": "assertion"}
        ]));
        assert_eq!(only(&v).severity, Severity::Error);
        assert!(only(&v).message.starts_with("duplicate action id 'a'"));
    }

    #[test]
    fn rule_unregistered_tool() {
        let v = check(json!([{"id": "a", "type": "tool_call", "tool": "rm_rf"}]));
        assert_eq!(
            only(&v),
            &Issue {
                action_id: Some("a".into()),
                severity: Severity::Error,
                message: "tool 'rm_rf' is not registered".into(),
                tier: Tier::DecisionProcedure
            }
        );
        let options = VerifyOptions {
            extra_tools: vec!["rm_rf".into()],
            ..VerifyOptions::default()
        };
        let v = check_with(
            json!([{"id": "a", "type": "tool_call", "tool": "rm_rf"}]),
            &options,
        );
        assert!(v.valid);
    }

    #[test]
    fn rule_tool_call_without_tool() {
        let v = check(json!([{"id": "a", "type": "tool_call"}]));
        assert_eq!(only(&v).message, "a tool_call names no tool");
    }

    #[test]
    fn rule_parameters_break_the_input_schema() {
        let v = check(
            json!([{"id": "a", "type": "tool_call", "tool": "add", "parameters": {"subject": 3}}]),
        );
        let issue = only(&v);
        assert_eq!(issue.severity, Severity::Error);
        assert!(
            issue
                .message
                .starts_with("parameters break the input schema of 'add': /subject:"),
            "{}",
            issue.message
        );
    }

    #[test]
    fn rule_precondition_established_by_nothing() {
        let actions = json!([{"id": "a", "type": "assertion",
                               "preconditions": [{"key": "ready", "operator": "eq", "value": true}]}]);
        let v = check(actions.clone());
        assert!(only(&v).message.contains("established by nothing"));
        let options = VerifyOptions {
            initial_state: json!({"ready": true}).as_object().unwrap().clone(),
            ..VerifyOptions::default()
        };
        assert!(check_with(actions, &options).issues.is_empty());
    }

    #[test]
    fn rule_precondition_fails_in_simulation() {
        let v = check(json!([
            {"id": "w", "type": "state_write", "parameters": {"key": "n", "value": 1}},
            {"id": "a", "type": "assertion", "dependencies": ["w"],
             "preconditions": [{"key": "n", "operator": "gt", "value": 5}]}
        ]));
        assert_eq!(only(&v).action_id.as_deref(), Some("a"));
        assert!(only(&v)
            .message
            .starts_with("precondition fails in simulation"));
    }

    #[test]
    fn rule_unknown_operator_fails() {
        let v = check(json!([
            {"id": "w", "type": "state_write", "parameters": {"key": "n", "value": 1}},
            {"id": "a", "type": "assertion", "preconditions": [{"key": "n", "operator": "roughly", "value": 1}]}
        ]));
        assert!(!v.valid);
        assert!(only(&v).message.contains("unknown operator 'roughly'"));
    }

    #[test]
    fn rule_state_read_but_never_written() {
        let v = check(json!([{"id": "a", "type": "assertion", "state_dependencies": ["ghost"]}]));
        assert_eq!(only(&v).severity, Severity::Warning);
        assert!(only(&v).message.starts_with("reads state 'ghost'"));
        assert!(v.valid);
    }

    #[test]
    fn rule_unordered_writes_to_one_key() {
        let v = check(json!([
            {"id": "a", "type": "tool_call", "tool": "add", "parameters": {"subject": "1"}, "expected_effects": {"k": 1}},
            {"id": "b", "type": "tool_call", "tool": "add", "parameters": {"subject": "2"}, "expected_effects": {"k": 2}}
        ]));
        assert_eq!(only(&v).severity, Severity::Warning);
        assert_eq!(v.conflicts, vec![("a".into(), "b".into(), "k".into())]);
        assert!(v.valid);
        let ordered = check(json!([
            {"id": "a", "type": "tool_call", "tool": "add", "parameters": {"subject": "1"}, "expected_effects": {"k": 1}},
            {"id": "b", "type": "tool_call", "tool": "add", "parameters": {"subject": "2"}, "expected_effects": {"k": 2}, "dependencies": ["a"]}
        ]));
        assert!(ordered.conflicts.is_empty());
    }

    #[test]
    fn rule_repeated_identical_calls() {
        let call = |id: &str| json!({"id": id, "type": "tool_call", "tool": "add", "parameters": {"subject": "x"}});
        let twice = check(json!([call("a"), call("b")]));
        assert_eq!(only(&twice).severity, Severity::Warning);
        assert_eq!(only(&twice).tier, Tier::Heuristic);
        assert!(only(&twice).message.starts_with("duplicate:"));
        assert!(twice.valid);
        let thrice = check(json!([call("a"), call("b"), call("c")]));
        assert_eq!(only(&thrice).severity, Severity::Error);
        assert_eq!(only(&thrice).tier, Tier::Heuristic);
        assert_eq!(
            only(&thrice).message,
            "likely loop: 'add' is called 3 times with identical parameters (a, b, c)"
        );
        assert!(!thrice.valid);
    }

    #[test]
    fn rule_more_than_max_actions() {
        let options = VerifyOptions {
            max_actions: 1,
            ..VerifyOptions::default()
        };
        let v = check_with(
            json!([{"id": "a", "type": "assertion"}, {"id": "b", "type": "assertion"}]),
            &options,
        );
        assert_eq!(only(&v).action_id, None);
        assert_eq!(
            only(&v).message,
            "the proposal has 2 actions, more than max_actions 1"
        );
    }

    #[test]
    fn a_thousand_actions_verify_without_trouble() {
        let actions: Vec<Value> = (0..1000)
            .map(|i| {
                json!({"id": format!("a{i}"), "type": "state_write",
                            "parameters": {"key": "k", "value": i}})
            })
            .collect();
        let options = VerifyOptions {
            max_actions: 1000,
            ..VerifyOptions::default()
        };
        let v = check_with(Value::Array(actions), &options);
        assert!(v.valid, "{:#?}", &v.issues[..v.issues.len().min(3)]);
        assert_eq!(v.execution_levels.len(), 1000);
        assert_eq!(v.simulated_state["k"], 999);
    }
}
