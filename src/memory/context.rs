//! Context assembly: a briefing in layers (Identity, Active Constraints, Current Facts, Recent
//! Context, Environment) within a token budget split 0.05 / 0.50 / 0.30 / 0.15. Facts are
//! ranked by retrieval and printed least relevant first, so the most relevant text lands last;
//! over budget, the least relevant go first. Superseded values appear only on lines marked
//! [`OUTDATED_MARK`], under the fact that replaced them.

use std::collections::HashMap;

use super::index::Index;
use super::model::{EdgeKind, Kind, Node, Scope};
use super::retrieve::{self, Filter};
use super::text::token_estimate;

/// Marks every line that carries a superseded or invalidated value.
pub const OUTDATED_MARK: &str = "[outdated]";

/// The default budget when no model window is known.
pub const DEFAULT_BUDGET: usize = 8_000;
/// Below this many current entries, every entry is a candidate for the briefing.
const SMALL_MEMORY: usize = 300;
const RANKED_FACTS: usize = 50;
const RECENT_TURNS: usize = 6;
const ENVIRONMENT_MAX: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextMode {
    /// Ranked by retrieval (seeds and PageRank).
    Full,
    /// Newest first, no ranking: cheaper, for hooks on every turn.
    Fast,
}

/// What to assemble.
#[derive(Debug, Clone)]
pub struct ContextRequest {
    pub query: String,
    pub tenant: String,
    pub mode: ContextMode,
    pub budget_tokens: usize,
}

impl ContextRequest {
    pub fn new(query: &str) -> ContextRequest {
        ContextRequest {
            query: query.to_string(),
            tenant: String::new(),
            mode: ContextMode::Full,
            budget_tokens: DEFAULT_BUDGET,
        }
    }
}

/// The budget for a model window: `(window − 4096) × 0.40`, at least 2000.
pub fn effective_budget(window: usize) -> usize {
    ((window.saturating_sub(4096) as f64 * 0.40) as usize).max(2000)
}

/// An assembled briefing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AssembledContext {
    pub text: String,
    pub tokens: usize,
    pub budget_tokens: usize,
    /// Ids of the entries shown, least relevant first.
    pub facts: Vec<String>,
    /// Entries left out to stay within the budget.
    pub facts_dropped: usize,
    pub turns: usize,
}

struct Block {
    lines: Vec<String>,
    tokens: usize,
}

impl Block {
    fn new(lines: Vec<String>) -> Block {
        let tokens = lines.iter().map(|l| token_estimate(l) + 1).sum();
        Block { lines, tokens }
    }
}

pub(super) fn assemble(index: &Index, scope: &Scope, request: &ContextRequest) -> AssembledContext {
    let budget = request.budget_tokens.max(200);
    let visible = |n: &Node| n.is_current() && scope.sees(n.project, &n.tenant);
    let of_kind = |kind: Kind| -> Vec<&Node> {
        index
            .nodes()
            .map(|(_, n)| n)
            .filter(|n| n.kind == kind && visible(n))
            .collect()
    };

    // Identity.
    let identity = fit(
        of_kind(Kind::Identity)
            .iter()
            .map(|n| Block::new(vec![format!("- {}: {}", n.subject, n.body)]))
            .collect(),
        budget * 5 / 100,
        Keep::First,
    );

    // Environment: newest first.
    let mut environment_nodes = of_kind(Kind::Environment);
    environment_nodes.reverse();
    environment_nodes.truncate(ENVIRONMENT_MAX);
    let environment = fit(
        environment_nodes
            .iter()
            .map(|n| Block::new(vec![format!("- {}: {}", n.subject, n.body)]))
            .collect(),
        budget * 15 / 100,
        Keep::First,
    );

    // Superseded values, to mark turns that restate them.
    let retired: Vec<(String, String)> = index
        .nodes()
        .map(|(_, n)| n)
        .filter(|n| n.kind.is_entry() && !n.is_current() && scope.sees(n.project, &n.tenant))
        .filter(|n| n.body.trim().len() >= 6)
        .map(|n| (n.id.clone(), n.body.trim().to_lowercase()))
        .collect();
    let conversation = conversation_blocks(index, scope, request, &retired, budget * 30 / 100);

    // Facts get the rest (at least half the budget).
    let used = identity.1 + environment.1 + conversation.1;
    let fact_budget = budget.saturating_sub(used).max(budget / 2);
    let (constraints, facts, shown, dropped) = fact_blocks(index, scope, request, fact_budget);

    let mut text = String::new();
    let mut section = |title: &str, lines: &[String]| {
        if !lines.is_empty() {
            text.push_str(&format!("## {title}\n"));
            for line in lines {
                text.push_str(line);
                text.push('\n');
            }
            text.push('\n');
        }
    };
    section("Identity", &identity.0);
    section("Active Constraints", &constraints);
    section("Current Facts", &facts);
    section("Recent Context", &conversation.0);
    section("Environment", &environment.0);
    if text.is_empty() {
        text.push_str("(nothing remembered yet)\n");
    }
    let tokens = token_estimate(&text);
    AssembledContext {
        text,
        tokens,
        budget_tokens: budget,
        facts: shown,
        facts_dropped: dropped,
        turns: conversation.2,
    }
}

#[derive(Clone, Copy)]
enum Keep {
    First,
    Last,
}

/// Keeps whole blocks within `budget`, from the front or the back; returns lines and tokens.
fn fit(blocks: Vec<Block>, budget: usize, keep: Keep) -> (Vec<String>, usize) {
    let mut kept: Vec<Block> = Vec::new();
    let mut used = 0;
    let ordered: Box<dyn Iterator<Item = Block>> = match keep {
        Keep::First => Box::new(blocks.into_iter()),
        Keep::Last => Box::new(blocks.into_iter().rev()),
    };
    for block in ordered {
        if used + block.tokens > budget {
            break;
        }
        used += block.tokens;
        kept.push(block);
    }
    if matches!(keep, Keep::Last) {
        kept.reverse();
    }
    (kept.into_iter().flat_map(|b| b.lines).collect(), used)
}

/// Recent turns verbatim, plus earlier turns that match the query; turns that restate a
/// superseded value are marked.
fn conversation_blocks(
    index: &Index,
    scope: &Scope,
    request: &ContextRequest,
    retired: &[(String, String)],
    budget: usize,
) -> (Vec<String>, usize, usize) {
    let turns: Vec<(u32, &Node)> = index
        .nodes()
        .filter(|(_, n)| n.kind == Kind::Turn && scope.sees(n.project, &n.tenant))
        .collect();
    if turns.is_empty() {
        return (Vec::new(), 0, 0);
    }
    let line = |n: &Node| {
        let lower = n.body.to_lowercase();
        let restated: Vec<&str> = retired
            .iter()
            .filter(|(_, body)| lower.contains(body.as_str()))
            .map(|(id, _)| id.as_str())
            .collect();
        if restated.is_empty() {
            format!("- {}: {}", n.subject, n.body)
        } else {
            format!(
                "- {}: {} {OUTDATED_MARK} restates superseded {}",
                n.subject,
                n.body,
                restated.join(", ")
            )
        }
    };
    let split = turns.len().saturating_sub(RECENT_TURNS);
    let (earlier, recent) = turns.split_at(split);
    let recent_fit = fit(
        recent
            .iter()
            .map(|(_, n)| Block::new(vec![line(n)]))
            .collect(),
        budget,
        Keep::Last,
    );
    let mut lines = Vec::new();
    let mut used = recent_fit.1;
    let mut count = recent_fit.0.len();
    if request.mode == ContextMode::Full && !earlier.is_empty() {
        let filter = Filter {
            scope,
            kinds: &[Kind::Turn],
        };
        let scores = retrieve::keyword_scores(index, &request.query, &filter);
        let first_recent = recent.first().map(|r| r.0).unwrap_or(u32::MAX);
        let mut relevant: Vec<(u32, f64)> = scores
            .into_iter()
            .filter(|(slot, _)| *slot < first_recent)
            .collect();
        relevant.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let mut chosen: Vec<u32> = Vec::new();
        for (slot, _) in relevant {
            if let Some(node) = index.node(slot) {
                let block = Block::new(vec![line(node)]);
                if used + block.tokens > budget {
                    break;
                }
                used += block.tokens;
                chosen.push(slot);
            }
        }
        chosen.sort_unstable();
        if !chosen.is_empty() {
            lines.push("### Earlier (relevant)".to_string());
            count += chosen.len();
            lines.extend(chosen.iter().filter_map(|&s| index.node(s)).map(line));
        }
    }
    if !recent_fit.0.is_empty() {
        lines.push("### Recent".to_string());
        lines.extend(recent_fit.0);
    }
    (lines, used, count)
}

/// Constraints and facts, ranked, least relevant first, within the budget.
fn fact_blocks(
    index: &Index,
    scope: &Scope,
    request: &ContextRequest,
    budget: usize,
) -> (Vec<String>, Vec<String>, Vec<String>, usize) {
    let kinds = [
        Kind::Pattern,
        Kind::Constraint,
        Kind::Knowledge,
        Kind::Procedural,
    ];
    let entries: Vec<(u32, &Node)> = index
        .nodes()
        .filter(|(_, n)| {
            kinds.contains(&n.kind) && n.is_current() && scope.sees(n.project, &n.tenant)
        })
        .collect();
    let mut ranked: Vec<(u32, f64)> = match request.mode {
        ContextMode::Full => {
            let filter = Filter {
                scope,
                kinds: &kinds,
            };
            let hits = retrieve::retrieve(index, &request.query, &filter, RANKED_FACTS);
            let mut scores: HashMap<u32, f64> =
                hits.iter().map(|h| (h.slot, h.activation)).collect();
            if entries.len() <= SMALL_MEMORY {
                for (slot, _) in &entries {
                    scores.entry(*slot).or_insert(0.0);
                }
            }
            scores.into_iter().collect()
        }
        ContextMode::Fast => {
            let n = entries.len().max(1) as f64;
            entries
                .iter()
                .enumerate()
                .map(|(i, (slot, _))| (*slot, i as f64 / n))
                .collect()
        }
    };
    // Constraints are kept longest; invalidated entries go first.
    for (slot, score) in &mut ranked {
        if let Some(node) = index.node(*slot) {
            if node.kind == Kind::Constraint {
                *score += 1.0;
            }
            if node.invalidated_by.is_some() {
                *score -= 1.0;
            }
        }
    }
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));

    let blocks: Vec<(u32, Block)> = ranked
        .iter()
        .filter_map(|(slot, _)| {
            index
                .node(*slot)
                .map(|n| (*slot, Block::new(fact_lines(index, *slot, n))))
        })
        .collect();
    let total = blocks.len();
    let mut used = 0;
    let mut kept: Vec<(u32, Block)> = Vec::new();
    for (slot, block) in blocks.into_iter().rev() {
        if used + block.tokens > budget {
            continue;
        }
        used += block.tokens;
        kept.push((slot, block));
    }
    kept.reverse();
    let dropped = total - kept.len();
    let mut constraints = Vec::new();
    let mut facts = Vec::new();
    let mut shown = Vec::new();
    for (slot, block) in kept {
        if let Some(node) = index.node(slot) {
            shown.push(node.id.clone());
            if node.kind == Kind::Constraint {
                constraints.extend(block.lines);
            } else {
                facts.extend(block.lines);
            }
        }
    }
    (constraints, facts, shown, dropped)
}

/// A fact's line, plus marked lines for the values it replaced.
fn fact_lines(index: &Index, slot: u32, node: &Node) -> Vec<String> {
    let label = match node.kind {
        Kind::Constraint => "⚠️ ",
        Kind::Knowledge => "(knowledge) ",
        Kind::Procedural => "(procedure) ",
        Kind::Pattern | Kind::Turn | Kind::Identity | Kind::Environment => "",
    };
    let mut lines = Vec::new();
    match &node.invalidated_by {
        Some(premise) => lines.push(format!(
            "- ⚠️ RECALCULATE [{}] {OUTDATED_MARK} {}: {} (depends on {premise}, which was superseded)",
            node.id, node.subject, node.body
        )),
        None => lines.push(format!("- {label}[{}] {}: {}", node.id, node.subject, node.body)),
    }
    for link in index.outgoing(slot) {
        if link.kind == EdgeKind::Supersedes {
            if let Some(old) = index.node(link.other) {
                lines.push(format!("  - {OUTDATED_MARK} changed from: {}", old.body));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::effective_budget;

    #[test]
    fn budgets_follow_the_model_window() {
        assert_eq!(effective_budget(272_000), 107_161);
        assert_eq!(effective_budget(128_000), 49_561);
        assert_eq!(effective_budget(8_000), 2_000);
    }
}
