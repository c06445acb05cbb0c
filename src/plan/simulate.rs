//! `simulate` and `equivalent`: run a proposal over a state using only what it declares
//! (state writes and expected effects), and compare two proposals on sample states.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::dag::Dag;
use super::ir::ActionProposal;
use super::verify::Tier;

/// An action that did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Skipped {
    pub action_id: String,
    pub reason: String,
}

/// The outcome of a simulation.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Simulation {
    pub final_state: Map<String, Value>,
    /// Ids of the actions whose writes were applied, in execution order.
    pub applied: Vec<String>,
    /// Actions whose preconditions failed, and every action depending on one of them.
    pub skipped: Vec<Skipped>,
}

/// Applies the proposal's declared writes to `initial_state` in execution order. An action whose
/// preconditions fail, or that lies on a dependency cycle, is skipped, and so is everything
/// that depends on it.
pub fn simulate(proposal: &ActionProposal, initial_state: &Map<String, Value>) -> Simulation {
    let actions = &proposal.actions;
    let dag = Dag::build(actions);
    let mut state = initial_state.clone();
    let mut skipped_at = vec![false; actions.len()];
    let mut applied = Vec::new();
    let mut skipped = Vec::new();
    let mut in_cycle = vec![false; actions.len()];
    for &i in dag.cycles.iter().flatten() {
        in_cycle[i] = true;
    }
    for i in dag.order() {
        let action = &actions[i];
        let blocked_by = dag.predecessors[i]
            .iter()
            .find(|&&p| skipped_at[p])
            .map(|&p| format!("depends on skipped action '{}'", actions[p].id));
        let cyclic =
            in_cycle[i].then(|| "part of a dependency cycle, so it can never run".to_string());
        let reason = cyclic.or(blocked_by).or_else(|| {
            action
                .preconditions
                .iter()
                .find_map(|pre| pre.check(&state).err())
                .map(|why| format!("precondition failed: {why}"))
        });
        match reason {
            Some(reason) => {
                skipped_at[i] = true;
                skipped.push(Skipped {
                    action_id: action.id.clone(),
                    reason,
                });
            }
            None => {
                action.apply(&mut state);
                applied.push(action.id.clone());
            }
        }
    }
    Simulation {
        final_state: state,
        applied,
        skipped,
    }
}

/// The most probe states `equivalent` accepts.
pub const MAX_TEST_STATES: usize = 256;

/// Where two proposals first disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Divergence {
    /// The test state both started from.
    pub state: Map<String, Value>,
    /// The first key (in sorted order) whose final values differ.
    pub key: String,
    /// Its final value under proposal A (null when absent).
    #[schemars(schema_with = "crate::runtime::schema::any_json")]
    pub a: Value,
    /// Its final value under proposal B (null when absent).
    #[schemars(schema_with = "crate::runtime::schema::any_json")]
    pub b: Value,
}

/// The verdict of `equivalent`. Sampled: equal on these states, not proven equal on all.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Equivalence {
    pub equivalent: bool,
    /// Always `sampled`.
    pub tier: Tier,
    pub states_tested: usize,
    /// True when no test states were given and the defaults `{}` and `{"x":1,"y":2}` were used.
    pub used_default_states: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
}

/// Simulates both proposals from each test state and compares their final states. An empty
/// list means the two default states. Stops at the first divergence.
pub fn equivalent(
    a: &ActionProposal,
    b: &ActionProposal,
    test_states: &[Map<String, Value>],
) -> Equivalence {
    let defaults: Vec<Map<String, Value>>;
    let (states, used_default_states) = if test_states.is_empty() {
        defaults = [json!({}), json!({"x": 1, "y": 2})]
            .into_iter()
            .filter_map(|v| match v {
                Value::Object(map) => Some(map),
                _ => None,
            })
            .collect();
        (defaults.as_slice(), true)
    } else {
        (test_states, false)
    };
    let mut states_tested = 0;
    for state in states {
        states_tested += 1;
        let end_a = simulate(a, state).final_state;
        let end_b = simulate(b, state).final_state;
        let mut keys: Vec<&String> = end_a.keys().chain(end_b.keys()).collect();
        keys.sort();
        keys.dedup();
        let differs = keys.into_iter().find(|k| end_a.get(*k) != end_b.get(*k));
        if let Some(key) = differs {
            return Equivalence {
                equivalent: false,
                tier: Tier::Sampled,
                states_tested,
                used_default_states,
                divergence: Some(Divergence {
                    state: state.clone(),
                    key: key.clone(),
                    a: end_a.get(key).cloned().unwrap_or(Value::Null),
                    b: end_b.get(key).cloned().unwrap_or(Value::Null),
                }),
            };
        }
    }
    Equivalence {
        equivalent: true,
        tier: Tier::Sampled,
        states_tested,
        used_default_states,
        divergence: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(actions: Value) -> ActionProposal {
        serde_json::from_value(json!({ "actions": actions })).unwrap()
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_failed_precondition_skips_the_action_and_its_dependents() {
        let p = proposal(json!([
            {"id": "gate", "type": "state_write", "parameters": {"key": "k", "value": 1},
             "preconditions": [{"key": "ready", "operator": "eq", "value": true}]},
            {"id": "after", "type": "state_write", "parameters": {"key": "m", "value": 2}, "dependencies": ["gate"]},
            {"id": "reader", "type": "tool_call", "tool": "t", "state_dependencies": ["k"], "expected_effects": {"r": 3}},
            {"id": "free", "type": "state_write", "parameters": {"key": "f", "value": 4}}
        ]));
        let sim = simulate(&p, &map(json!({"ready": false})));
        assert_eq!(sim.final_state, map(json!({"ready": false, "f": 4})));
        assert_eq!(sim.applied, vec!["free"]);
        assert_eq!(
            sim.skipped,
            vec![
                Skipped {
                    action_id: "gate".into(),
                    reason:
                        "precondition failed: 'ready' eq true does not hold: the state has false"
                            .into()
                },
                Skipped {
                    action_id: "after".into(),
                    reason: "depends on skipped action 'gate'".into()
                },
                Skipped {
                    action_id: "reader".into(),
                    reason: "depends on skipped action 'gate'".into()
                },
            ]
        );
        let ok = simulate(&p, &map(json!({"ready": true})));
        assert!(ok.skipped.is_empty());
        assert_eq!(ok.final_state["r"], 3);
    }

    #[test]
    fn actions_on_a_cycle_are_skipped_with_their_dependents() {
        let p = proposal(json!([
            {"id": "a", "type": "state_write", "parameters": {"key": "k", "value": 1}, "dependencies": ["b"]},
            {"id": "b", "type": "state_write", "parameters": {"key": "m", "value": 1}, "dependencies": ["a"]},
            {"id": "c", "type": "assertion", "dependencies": ["b"]}
        ]));
        let sim = simulate(&p, &Map::new());
        assert!(sim.applied.is_empty());
        let ids: Vec<&str> = sim.skipped.iter().map(|s| s.action_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(sim.skipped[2].reason, "depends on skipped action 'b'");
    }

    #[test]
    fn equivalent_uses_the_two_default_states_when_none_are_given() {
        let a = proposal(
            json!([{"id": "a", "type": "state_write", "parameters": {"key": "k", "value": 1}}]),
        );
        let b = proposal(json!([
            {"id": "b1", "type": "state_write", "parameters": {"key": "k", "value": 0}},
            {"id": "b2", "type": "state_write", "parameters": {"key": "k", "value": 1}}
        ]));
        let e = equivalent(&a, &b, &[]);
        assert!(e.equivalent);
        assert_eq!(e.tier, Tier::Sampled);
        assert_eq!(e.states_tested, 2);
        assert!(e.used_default_states);
        assert_eq!(e.divergence, None);
    }

    #[test]
    fn equivalent_reports_the_first_divergence() {
        let a = proposal(json!([{"id": "a", "type": "assertion",
            "preconditions": [{"key": "x", "operator": "exists"}], "expected_effects": {"done": true}}]));
        let b =
            proposal(json!([{"id": "b", "type": "assertion", "expected_effects": {"done": true}}]));
        let e = equivalent(&a, &b, &[]);
        assert!(!e.equivalent);
        assert_eq!(e.states_tested, 1);
        assert_eq!(
            e.divergence,
            Some(Divergence {
                state: Map::new(),
                key: "done".into(),
                a: Value::Null,
                b: json!(true)
            })
        );
        let given = equivalent(&a, &b, &[map(json!({"x": 0}))]);
        assert!(given.equivalent);
        assert!(!given.used_default_states);
        assert_eq!(given.states_tested, 1);
    }
}
