//! The dependency graph of a proposal: edges from explicit `dependencies` and from state
//! producer/consumer matching, execution levels by Kahn's algorithm, cycles with their path.

use std::collections::{BTreeSet, HashMap};

use super::ir::Action;

/// The graph over action indices (positions in the proposal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dag {
    /// For each action, the actions that must complete before it (sorted, no repeats).
    pub predecessors: Vec<Vec<usize>>,
    /// Kahn levels: actions in one level may run concurrently. Every action appears once; on a
    /// cycle the smallest remaining index is taken so the levels always cover the proposal.
    pub levels: Vec<Vec<usize>>,
    /// Each cycle found, as a path of indices in dependency order (first runs before second…).
    pub cycles: Vec<Vec<usize>>,
    /// `(action index, dependency id)` for each dependency naming no action.
    pub unknown_dependencies: Vec<(usize, String)>,
}

impl Dag {
    /// Builds the graph. A dependency id names the first action with that id.
    pub fn build(actions: &[Action]) -> Dag {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, action) in actions.iter().enumerate() {
            index.entry(action.id.as_str()).or_insert(i);
        }
        let mut predecessors: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); actions.len()];
        let mut unknown_dependencies = Vec::new();
        // Last earlier writer of each key, and last earlier state_write of each key.
        let mut writers: HashMap<&str, usize> = HashMap::new();
        let mut state_writers: HashMap<&str, usize> = HashMap::new();
        for (i, action) in actions.iter().enumerate() {
            for dep in &action.dependencies {
                match index.get(dep.as_str()) {
                    Some(&j) => {
                        predecessors[i].insert(j);
                    }
                    None => unknown_dependencies.push((i, dep.clone())),
                }
            }
            for key in &action.state_dependencies {
                if let Some(&j) = writers.get(key.as_str()) {
                    predecessors[i].insert(j);
                }
            }
            if let Some(key) = action.written_key() {
                if let Some(&j) = state_writers.get(key) {
                    predecessors[i].insert(j);
                }
                state_writers.insert(key, i);
            }
            for key in action.writes() {
                writers.insert(key, i);
            }
        }
        let predecessors: Vec<Vec<usize>> = predecessors
            .into_iter()
            .map(|set| set.into_iter().collect())
            .collect();
        let (levels, cycles) = kahn(&predecessors);
        Dag {
            predecessors,
            levels,
            cycles,
            unknown_dependencies,
        }
    }

    /// Which actions each action transitively depends on.
    pub fn ancestors(&self) -> Ancestors {
        let n = self.predecessors.len();
        let words = n.div_ceil(64);
        let mut bits = vec![vec![0u64; words]; n];
        // Levels order every action after its acyclic predecessors, so one pass suffices
        // outside cycles; inside a cycle a few missing ancestors change no verdict (the cycle
        // is an error of its own).
        for &i in self.levels.iter().flatten() {
            for &p in &self.predecessors[i] {
                if p == i {
                    continue;
                }
                let inherited = bits[p].clone();
                let row = &mut bits[i];
                for (word, from) in row.iter_mut().zip(&inherited) {
                    *word |= from;
                }
                row[p / 64] |= 1 << (p % 64);
            }
        }
        Ancestors { bits }
    }

    /// The actions in execution order: level by level, by index inside a level.
    pub fn order(&self) -> impl Iterator<Item = usize> + '_ {
        self.levels.iter().flatten().copied()
    }
}

/// The transitive closure of the dependency edges, one bit per pair.
pub struct Ancestors {
    bits: Vec<Vec<u64>>,
}

impl Ancestors {
    /// Whether `action` depends, directly or not, on `ancestor`.
    pub fn contains(&self, action: usize, ancestor: usize) -> bool {
        self.bits[action][ancestor / 64] & (1 << (ancestor % 64)) != 0
    }
}

fn kahn(predecessors: &[Vec<usize>]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let n = predecessors.len();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (i, preds) in predecessors.iter().enumerate() {
        indegree[i] = preds.len();
        for &p in preds {
            successors[p].push(i);
        }
    }
    let mut done = vec![false; n];
    let mut remaining = n;
    let mut levels = Vec::new();
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    while remaining > 0 {
        if ready.is_empty() {
            // Stuck: every remaining action waits on another. Name the cycle, then take the
            // smallest remaining index so the build progresses.
            let Some(stuck) = (0..n).find(|&i| !done[i]) else {
                break;
            };
            let cycle = cycle_through(stuck, predecessors, &done);
            let mut members = cycle.clone();
            members.sort_unstable();
            if !cycles.iter().any(|c| {
                let mut seen = c.clone();
                seen.sort_unstable();
                seen == members
            }) {
                cycles.push(cycle);
            }
            ready.push(stuck);
        }
        ready.sort_unstable();
        let level = std::mem::take(&mut ready);
        for &i in &level {
            done[i] = true;
            remaining -= 1;
        }
        for &i in &level {
            for &s in &successors[i] {
                if done[s] {
                    continue;
                }
                indegree[s] -= 1;
                if indegree[s] == 0 {
                    ready.push(s);
                }
            }
        }
        levels.push(level);
    }
    (levels, cycles)
}

/// Walks unfinished predecessors back from `start` until an action repeats; returns that loop
/// in dependency order. Every unfinished action has an unfinished predecessor when Kahn is stuck.
fn cycle_through(start: usize, predecessors: &[Vec<usize>], done: &[bool]) -> Vec<usize> {
    let mut path = vec![start];
    let mut position: HashMap<usize, usize> = HashMap::from([(start, 0)]);
    let mut current = start;
    while let Some(&next) = predecessors[current].iter().find(|&&p| !done[p]) {
        if let Some(&at) = position.get(&next) {
            let mut cycle = path[at..].to_vec();
            cycle.reverse();
            if let Some(first) = cycle.iter().enumerate().min_by_key(|(_, &i)| i) {
                let first = first.0;
                cycle.rotate_left(first);
            }
            return cycle;
        }
        position.insert(next, path.len());
        path.push(next);
        current = next;
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ir::ActionProposal;
    use serde_json::json;

    fn actions(value: serde_json::Value) -> Vec<Action> {
        serde_json::from_value::<ActionProposal>(json!({ "actions": value }))
            .unwrap()
            .actions
    }

    #[test]
    fn explicit_dependencies_and_state_edges_build_levels() {
        let dag = Dag::build(&actions(json!([
            {"id": "w", "type": "state_write", "parameters": {"key": "k", "value": 1}},
            {"id": "e", "type": "tool_call", "tool": "t", "expected_effects": {"m": 2}},
            {"id": "r", "type": "assertion", "state_dependencies": ["k", "m"]},
            {"id": "d", "type": "assertion", "dependencies": ["r"]}
        ])));
        assert_eq!(dag.predecessors, vec![vec![], vec![], vec![0, 1], vec![2]]);
        assert_eq!(dag.levels, vec![vec![0, 1], vec![2], vec![3]]);
        assert!(dag.cycles.is_empty());
    }

    #[test]
    fn the_last_earlier_writer_wins_and_later_writers_form_no_edge() {
        let dag = Dag::build(&actions(json!([
            {"id": "a", "type": "tool_call", "tool": "t", "expected_effects": {"k": 1}},
            {"id": "b", "type": "tool_call", "tool": "t", "expected_effects": {"k": 2}},
            {"id": "r", "type": "assertion", "state_dependencies": ["k"]},
            {"id": "c", "type": "tool_call", "tool": "t", "expected_effects": {"k": 3}}
        ])));
        assert_eq!(dag.predecessors[2], vec![1]);
        assert!(dag.predecessors[3].is_empty());
    }

    #[test]
    fn same_key_state_writes_are_chained() {
        let dag = Dag::build(&actions(json!([
            {"id": "a", "type": "state_write", "parameters": {"key": "k", "value": 1}},
            {"id": "b", "type": "state_write", "parameters": {"key": "k", "value": 2}},
            {"id": "c", "type": "state_write", "parameters": {"key": "k", "value": 3}}
        ])));
        assert_eq!(dag.levels, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn a_cycle_is_reported_with_its_path_and_levels_still_cover_every_action() {
        let dag = Dag::build(&actions(json!([
            {"id": "a", "type": "assertion", "dependencies": ["c"]},
            {"id": "b", "type": "assertion", "dependencies": ["a"]},
            {"id": "c", "type": "assertion", "dependencies": ["b"]},
            {"id": "s", "type": "assertion", "dependencies": ["s"]}
        ])));
        assert_eq!(dag.cycles, vec![vec![0, 1, 2], vec![3]]);
        let mut covered: Vec<usize> = dag.order().collect();
        covered.sort_unstable();
        assert_eq!(covered, vec![0, 1, 2, 3]);
    }

    #[test]
    fn unknown_dependencies_are_collected() {
        let dag = Dag::build(&actions(json!([
            {"id": "a", "type": "assertion", "dependencies": ["ghost"]}
        ])));
        assert_eq!(dag.unknown_dependencies, vec![(0, "ghost".to_string())]);
    }

    #[test]
    fn ancestors_are_transitive() {
        let dag = Dag::build(&actions(json!([
            {"id": "a", "type": "assertion"},
            {"id": "b", "type": "assertion", "dependencies": ["a"]},
            {"id": "c", "type": "assertion", "dependencies": ["b"]}
        ])));
        let reach = dag.ancestors();
        assert!(reach.contains(2, 0) && reach.contains(2, 1) && reach.contains(1, 0));
        assert!(!reach.contains(0, 2));
    }
}
