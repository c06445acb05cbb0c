//! `optimize`: drops `state_dependencies` on keys nothing in the proposal writes, so they stop
//! looking like ordering constraints. It never reorders or removes actions.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ir::ActionProposal;

/// The keys dropped from one action's `state_dependencies`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Pruned {
    pub action_id: String,
    pub removed: Vec<String>,
}

/// The optimized proposal and what was dropped (only actions that lost something).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Optimized {
    pub proposal: ActionProposal,
    pub pruned: Vec<Pruned>,
}

pub fn optimize(mut proposal: ActionProposal) -> Optimized {
    let written: HashSet<String> = proposal
        .actions
        .iter()
        .flat_map(|a| a.writes())
        .map(str::to_string)
        .collect();
    let mut pruned = Vec::new();
    for action in &mut proposal.actions {
        let (kept, removed): (Vec<String>, Vec<String>) =
            std::mem::take(&mut action.state_dependencies)
                .into_iter()
                .partition(|key| written.contains(key));
        action.state_dependencies = kept;
        if !removed.is_empty() {
            pruned.push(Pruned {
                action_id: action.id.clone(),
                removed,
            });
        }
    }
    Optimized { proposal, pruned }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unwritten_dependencies_are_pruned_and_nothing_moves() {
        let p: ActionProposal = serde_json::from_value(json!({"actions": [
            {"id": "r", "type": "assertion", "state_dependencies": ["ghost", "k"]},
            {"id": "w", "type": "state_write", "parameters": {"key": "k", "value": 1}},
            {"id": "e", "type": "tool_call", "tool": "t", "expected_effects": {"m": 1},
             "state_dependencies": ["m", "k"]}
        ]}))
        .unwrap();
        let out = optimize(p);
        let ids: Vec<&str> = out.proposal.actions.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["r", "w", "e"]);
        assert_eq!(out.proposal.actions[0].state_dependencies, ["k"]);
        assert_eq!(out.proposal.actions[2].state_dependencies, ["m", "k"]);
        assert_eq!(
            out.pruned,
            vec![Pruned {
                action_id: "r".into(),
                removed: vec!["ghost".into()]
            }]
        );
    }
}
