//! The ActionProposal IR: a batch of actions an agent intends to run, with the defaults of the
//! CAR spec filled in at deserialization. Fields the IR does not interpret are kept verbatim.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::runtime::schema::any_json;

/// A proposal: the only required field is a non-empty `actions` array.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = generated_defaults)]
pub struct ActionProposal {
    /// Default: 12 hex characters of a UUIDv4.
    #[serde(default = "short_id")]
    pub id: String,
    /// Who wrote the proposal.
    #[serde(default = "unknown_source")]
    pub source: String,
    /// RFC 3339. Default: now.
    #[serde(default = "crate::store::now")]
    pub timestamp: String,
    #[serde(deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub actions: Vec<Action>,
    /// Passed through, not interpreted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub context: Option<Value>,
    /// Fields this IR does not know, kept so that `optimize` returns them unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for ActionProposal {
    /// A proposal with no actions yet (not valid until it has some): where a command line's
    /// arguments stand before the proposal is read from its file.
    fn default() -> Self {
        ActionProposal {
            id: short_id(),
            source: unknown_source(),
            timestamp: crate::store::now(),
            actions: Vec::new(),
            context: None,
            extra: Map::new(),
        }
    }
}

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    /// Calls a registered tool with `parameters`.
    ToolCall,
    /// Sets `parameters.key` to `parameters.value` in the state.
    StateWrite,
    /// Reads `parameters.key` from the state.
    StateRead,
    /// Checks its preconditions and changes nothing.
    Assertion,
}

/// What happens when an action fails at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureBehavior {
    #[default]
    Abort,
    Retry,
    Skip,
}

/// Whether an action can be undone. Classified, not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reversibility {
    Reversible,
    Compensable,
    #[default]
    Irreversible,
}

/// How a compensable action is undone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Compensation {
    /// Run a tool.
    Tool {
        tool: String,
        #[serde(default)]
        parameters: Map<String, Value>,
    },
    /// Run another action of the proposal.
    ActionRef { action_id: String },
}

/// One step of a proposal.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = generated_defaults)]
pub struct Action {
    /// Unique within the proposal. Default: 12 hex characters of a UUIDv4.
    #[serde(default = "short_id")]
    pub id: String,
    #[serde(rename = "type")]
    pub kind: ActionType,
    /// The tool a `tool_call` runs (checked by verify, not by deserialization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub tool: Option<String>,
    /// A tool_call's arguments (checked against the tool's input schema); a state_write's `key` and `value`; a state_read's `key`.
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// Ids of actions that must complete first.
    #[serde(default)]
    pub dependencies: Vec<String>,
    #[serde(default)]
    pub preconditions: Vec<Precondition>,
    /// Declared state changes: key → value after the action.
    #[serde(default)]
    pub expected_effects: Map<String, Value>,
    /// State keys this action reads; they build DAG edges to earlier writers.
    #[serde(default)]
    pub state_dependencies: Vec<String>,
    /// State keys this action reads (informational).
    #[serde(default)]
    pub read_set: Vec<String>,
    /// State keys this action writes (informational).
    #[serde(default)]
    pub write_set: Vec<String>,
    #[serde(default)]
    pub failure_behavior: FailureBehavior,
    /// Only read when `failure_behavior` is `retry`.
    #[serde(default = "three")]
    pub max_retries: u32,
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default)]
    pub reversibility: Reversibility,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<Compensation>,
    /// Per attempt; absent means unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Fields this IR does not know (`assumptions`, `invocation_mode`, …), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A condition on the state that must hold before an action runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Precondition {
    pub key: String,
    /// eq, neq, gt, lt, gte, lte (numbers), exists, not_exists, contains (substring or array
    /// member). Kept as written: any other operator is not a parse error, it makes the
    /// condition fail.
    #[serde(default = "eq")]
    pub operator: String,
    /// The value the key is compared with (not needed by exists/not_exists).
    #[serde(default)]
    #[schemars(schema_with = "any_json")]
    pub value: Value,
    #[serde(default)]
    pub description: String,
}

/// The comparison operators a precondition may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Neq,
    Gt,
    Lt,
    Gte,
    Lte,
    Exists,
    NotExists,
    /// Substring of a string, or member of an array.
    Contains,
}

/// The names an operator may have, for messages.
pub const OPERATORS: &str = "eq, neq, gt, lt, gte, lte, exists, not_exists, contains";

impl Operator {
    pub fn parse(name: &str) -> Option<Operator> {
        Some(match name {
            "eq" => Operator::Eq,
            "neq" => Operator::Neq,
            "gt" => Operator::Gt,
            "lt" => Operator::Lt,
            "gte" => Operator::Gte,
            "lte" => Operator::Lte,
            "exists" => Operator::Exists,
            "not_exists" => Operator::NotExists,
            "contains" => Operator::Contains,
            _ => return None,
        })
    }
}

impl Precondition {
    /// Whether the condition holds in `state`; `Err` says why not. An unknown operator fails,
    /// and numeric comparisons of anything that is not a number fail.
    pub fn check(&self, state: &Map<String, Value>) -> Result<(), String> {
        let Some(operator) = Operator::parse(&self.operator) else {
            return Err(format!(
                "unknown operator '{}' (known: {OPERATORS})",
                self.operator
            ));
        };
        let actual = state.get(&self.key);
        let shown = || actual.map_or_else(|| "absent".to_string(), Value::to_string);
        let holds = match operator {
            Operator::Exists => actual.is_some(),
            Operator::NotExists => actual.is_none(),
            Operator::Eq => same(actual.unwrap_or(&Value::Null), &self.value),
            Operator::Neq => !same(actual.unwrap_or(&Value::Null), &self.value),
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                match (actual.and_then(Value::as_f64), self.value.as_f64()) {
                    (Some(a), Some(b)) => match operator {
                        Operator::Gt => a > b,
                        Operator::Lt => a < b,
                        Operator::Gte => a >= b,
                        Operator::Lte => a <= b,
                        Operator::Eq
                        | Operator::Neq
                        | Operator::Exists
                        | Operator::NotExists
                        | Operator::Contains => false,
                    },
                    (Some(_), None) | (None, Some(_)) | (None, None) => {
                        return Err(format!(
                            "'{}' {} {} compares numbers, but the state has {}",
                            self.key,
                            self.operator,
                            self.value,
                            shown()
                        ))
                    }
                }
            }
            Operator::Contains => match (actual, &self.value) {
                (Some(Value::String(s)), Value::String(part)) => s.contains(part.as_str()),
                (Some(Value::Array(items)), wanted) => items.iter().any(|i| same(i, wanted)),
                (Some(_), _) | (None, _) => false,
            },
        };
        if holds {
            Ok(())
        } else {
            Err(format!(
                "'{}' {} {} does not hold: the state has {}",
                self.key,
                self.operator,
                self.value,
                shown()
            ))
        }
    }
}

/// JSON equality that treats 1 and 1.0 as the same number.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

impl Action {
    /// The key a `state_write` sets (`parameters.key`), if it names one.
    pub fn written_key(&self) -> Option<&str> {
        match self.kind {
            ActionType::StateWrite => self.parameters.get("key").and_then(Value::as_str),
            ActionType::ToolCall | ActionType::StateRead | ActionType::Assertion => None,
        }
    }

    /// The key a `state_read` reads (`parameters.key`), if it names one.
    pub fn read_key(&self) -> Option<&str> {
        match self.kind {
            ActionType::StateRead => self.parameters.get("key").and_then(Value::as_str),
            ActionType::ToolCall | ActionType::StateWrite | ActionType::Assertion => None,
        }
    }

    /// Every key this action writes: its state_write key, then its expected effects.
    pub fn writes(&self) -> impl Iterator<Item = &str> {
        self.written_key()
            .into_iter()
            .chain(self.expected_effects.keys().map(String::as_str))
    }

    /// Applies the action's writes to `state`: the state_write, then the expected effects.
    pub fn apply(&self, state: &mut Map<String, Value>) {
        if let Some(key) = self.written_key() {
            let value = self.parameters.get("value").cloned().unwrap_or(Value::Null);
            state.insert(key.to_string(), value);
        }
        for (key, value) in &self.expected_effects {
            state.insert(key.clone(), value.clone());
        }
    }
}

/// Drops the `default` of fields whose default is made at each call (an id, the time): a
/// schema states what a client may rely on, and one call's random id is not that.
fn generated_defaults(schema: &mut schemars::Schema) {
    for field in ["id", "timestamp"] {
        if let Some(Value::Object(property)) = schema
            .get_mut("properties")
            .and_then(|properties| properties.get_mut(field))
        {
            property.remove("default");
        }
    }
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

fn unknown_source() -> String {
    "unknown".to_string()
}

fn eq() -> String {
    "eq".to_string()
}

fn three() -> u32 {
    3
}

fn non_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Action>, D::Error> {
    let actions = Vec::<Action>::deserialize(deserializer)?;
    if actions.is_empty() {
        return Err(serde::de::Error::custom(
            "`actions` is empty; a proposal needs at least one action",
        ));
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_follow_the_spec() {
        let p: ActionProposal =
            serde_json::from_value(json!({"actions": [{"type": "assertion"}]})).unwrap();
        assert_eq!(p.id.len(), 12);
        assert!(p.id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(p.source, "unknown");
        assert!(p.timestamp.ends_with('Z'), "{}", p.timestamp);
        let a = &p.actions[0];
        assert_eq!(a.id.len(), 12);
        assert_eq!(a.reversibility, Reversibility::Irreversible);
        assert_eq!(a.failure_behavior, FailureBehavior::Abort);
        assert_eq!(a.max_retries, 3);
        assert!(!a.idempotent);
    }

    #[test]
    fn actions_are_required_and_non_empty() {
        let missing = serde_json::from_value::<ActionProposal>(json!({"id": "p"})).unwrap_err();
        assert!(missing.to_string().contains("actions"), "{missing}");
        let empty = serde_json::from_value::<ActionProposal>(json!({"actions": []})).unwrap_err();
        assert!(empty.to_string().contains("empty"), "{empty}");
    }

    #[test]
    fn unknown_fields_are_kept() {
        let p: ActionProposal = serde_json::from_value(json!({
            "actions": [{"id": "a", "type": "assertion", "assumptions": [{"key": "k"}]}],
            "note": 1
        }))
        .unwrap();
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["note"], 1);
        assert_eq!(back["actions"][0]["assumptions"], json!([{"key": "k"}]));
    }

    #[test]
    fn operators_compare_as_documented() {
        let state = json!({"n": 3, "s": "hello", "l": [1, 2]});
        let state = state.as_object().unwrap();
        let holds = |key: &str, operator: &str, value: Value| {
            Precondition {
                key: key.into(),
                operator: operator.into(),
                value,
                description: String::new(),
            }
            .check(state)
            .is_ok()
        };
        assert!(holds("n", "eq", json!(3.0)));
        assert!(holds("n", "neq", json!(4)));
        assert!(holds("n", "gt", json!(2)));
        assert!(holds("n", "lte", json!(3)));
        assert!(!holds("s", "gt", json!(1)));
        assert!(holds("s", "contains", json!("ell")));
        assert!(holds("l", "contains", json!(2)));
        assert!(holds("n", "exists", Value::Null));
        assert!(holds("missing", "not_exists", Value::Null));
        assert!(!holds("n", "approximately", json!(3)));
    }
}
