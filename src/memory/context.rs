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
    );

    // Values that no longer hold — superseded facts, environment and identity, and conclusions
    // that need review — to mark the turns that restate them.
    let retired: Vec<(String, String)> = index
        .nodes()
        .map(|(_, n)| n)
        .filter(|n| n.kind != Kind::Turn && scope.sees(n.project, &n.tenant))
        .filter(|n| n.body.trim().len() >= 6)
        .filter_map(|n| {
            let label = if !n.is_current() {
                format!("superseded: {}", n.id)
            } else if n.needs_review() {
                format!("needs review: {}", n.id)
            } else {
                return None;
            };
            Some((label, n.body.trim().to_ascii_lowercase()))
        })
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

/// Keeps whole blocks, in order, while they fit in `budget`; returns lines and tokens.
fn fit(blocks: Vec<Block>, budget: usize) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut used = 0;
    for block in blocks {
        if used + block.tokens > budget {
            break;
        }
        used += block.tokens;
        lines.extend(block.lines);
    }
    (lines, used)
}

/// Phrases that open a side topic, and phrases that return from one.
const INTERRUPTION_START: &[&str] = &[
    "hold on",
    "pause this",
    "one moment",
    "quick interruption",
    "sorry, need to",
    "let me handle",
    "stepping away",
];
const INTERRUPTION_END: &[&str] = &[
    "back to",
    "resume",
    "where were we",
    "anyway,",
    "returning to",
    "back on track",
    "incident resolved",
];

/// One item of the conversation as the briefing shows it.
enum Item {
    Turn(u32),
    /// A side topic the conversation has returned from: its opening turn and how many turns it
    /// had. Its content is folded away so it does not pass for the main thread.
    Interruption {
        opening: u32,
        turns: usize,
    },
}

/// Folds resolved interruptions; an interruption still open at the end is the current topic.
fn conversation_items(turns: &[(u32, &Node)]) -> Vec<Item> {
    let has = |text: &str, markers: &[&str]| {
        let lower = text.to_lowercase();
        markers.iter().any(|m| lower.contains(m))
    };
    let mut items = Vec::new();
    let mut open: Option<(u32, Vec<u32>)> = None;
    for &(slot, node) in turns {
        match open.take() {
            None if has(&node.body, INTERRUPTION_START) => open = Some((slot, Vec::new())),
            None => items.push(Item::Turn(slot)),
            Some((opening, inside)) if has(&node.body, INTERRUPTION_END) => {
                items.push(Item::Interruption {
                    opening,
                    turns: inside.len() + 1,
                });
                items.push(Item::Turn(slot));
            }
            Some((opening, mut inside)) => {
                inside.push(slot);
                open = Some((opening, inside));
            }
        }
    }
    if let Some((opening, inside)) = open {
        items.push(Item::Turn(opening));
        items.extend(inside.into_iter().map(Item::Turn));
    }
    items
}

/// A turn's lines: restated superseded values are split onto their own marked lines, so the
/// rest of the turn (often the correction itself) stays current.
fn turn_lines(node: &Node, retired: &[(String, String)]) -> Vec<String> {
    let lower = node.body.to_ascii_lowercase();
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for (id, body) in retired {
        let mut from = 0;
        while let Some(at) = lower[from..].find(body.as_str()) {
            let start = from + at;
            spans.push((start, start + body.len(), id.as_str()));
            from = start + body.len();
        }
    }
    if spans.is_empty() {
        return vec![format!("- {}: {}", node.subject, node.body)];
    }
    spans.sort_unstable();
    let mut lines = Vec::new();
    let mut cursor = 0;
    for (start, end, id) in spans {
        if start < cursor {
            continue;
        }
        let before = node.body[cursor..start].trim();
        if lines.is_empty() {
            lines.push(format!("- {}: {before}", node.subject));
        } else if !before.is_empty() {
            lines.push(format!("  {before}"));
        }
        lines.push(format!(
            "  {OUTDATED_MARK} {} ({id})",
            &node.body[start..end]
        ));
        cursor = end;
    }
    let rest = node.body[cursor..].trim();
    if !rest.is_empty() {
        lines.push(format!("  {rest}"));
    }
    lines
}

/// The conversation within its budget: everything when it fits; otherwise the turns most
/// relevant to the query from earlier on, then the newest turns, in order.
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
    let items = conversation_items(&turns);
    let render = |item: &Item| -> Block {
        match item {
            Item::Turn(slot) => Block::new(
                index
                    .node(*slot)
                    .map(|n| turn_lines(n, retired))
                    .unwrap_or_default(),
            ),
            Item::Interruption { opening, turns } => Block::new(vec![format!(
                "- (side topic, since resolved: \"{}\" — {turns} turns folded)",
                index
                    .node(*opening)
                    .map(|n| n.body.as_str())
                    .unwrap_or_default()
            )]),
        }
    };
    let blocks: Vec<Block> = items.iter().map(render).collect();
    let total: usize = blocks.iter().map(|b| b.tokens).sum();
    let turn_count = |chosen: &[usize]| {
        chosen
            .iter()
            .map(|&i| match items[i] {
                Item::Turn(_) => 1,
                Item::Interruption { turns, .. } => turns + 1,
            })
            .sum::<usize>()
    };
    if total <= budget {
        let all: Vec<usize> = (0..items.len()).collect();
        let mut lines = vec!["### Recent".to_string()];
        lines.extend(blocks.into_iter().flat_map(|b| b.lines));
        return (lines, total, turn_count(&all));
    }
    // Newest first within 70% of the budget (at least the last turn).
    let mut used = 0;
    let mut recent: Vec<usize> = Vec::new();
    for i in (0..items.len()).rev() {
        if used + blocks[i].tokens > budget * 7 / 10 && !recent.is_empty() {
            break;
        }
        used += blocks[i].tokens;
        recent.push(i);
    }
    recent.reverse();
    let first_recent = recent.first().copied().unwrap_or(items.len());
    // Then the earlier turns that match the query best.
    let mut earlier: Vec<usize> = Vec::new();
    if request.mode == ContextMode::Full {
        let filter = Filter {
            scope,
            kinds: &[Kind::Turn],
        };
        let scores: HashMap<u32, f64> = retrieve::keyword_scores(index, &request.query, &filter)
            .into_iter()
            .collect();
        let mut relevant: Vec<(usize, f64)> = items[..first_recent]
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Item::Turn(slot) => scores.get(slot).map(|s| (i, *s)),
                Item::Interruption { .. } => None,
            })
            .collect();
        relevant.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        for (i, _) in relevant {
            if used + blocks[i].tokens <= budget {
                used += blocks[i].tokens;
                earlier.push(i);
            }
        }
        earlier.sort_unstable();
    }
    let mut lines = Vec::new();
    if !earlier.is_empty() {
        lines.push("### Earlier (relevant)".to_string());
        lines.extend(earlier.iter().flat_map(|&i| blocks[i].lines.clone()));
    }
    lines.push("### Recent".to_string());
    lines.extend(recent.iter().flat_map(|&i| blocks[i].lines.clone()));
    let count = turn_count(&earlier) + turn_count(&recent);
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
            if node.needs_review() {
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
    match &node.invalidated_note {
        Some(why) => lines.push(format!(
            "- ⚠️ RECALCULATE [{}] {OUTDATED_MARK} {}: {} (needs review: {why})",
            node.id, node.subject, node.body
        )),
        None => lines.push(format!(
            "- {label}[{}] {}: {}",
            node.id, node.subject, node.body
        )),
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
