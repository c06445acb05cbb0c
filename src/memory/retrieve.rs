//! Retrieval: IDF-weighted seed terms (exact 3×, stem 2×, substring 1×), then personalized
//! PageRank from the seeds over the typed, weighted links, so an entry that shares no word with
//! the query is still found through the entries that connect them. Deterministic: ties break
//! toward the newer entry.

use std::collections::HashMap;

use super::index::Index;
use super::model::{Kind, Scope};
use super::text;

/// Retrieval parameters (reference values of memgine's `score_facts`).
const DAMPING: f64 = 0.5;
const MAX_SEEDS: usize = 8;
const SEED_CAP: f64 = 0.4;
const MAX_ITERATIONS: usize = 30;
const EPSILON: f64 = 1e-6;
const MAX_HOPS: usize = 2;
const MAX_SUBGRAPH: usize = 2_000;
/// A term in more entries than this only re-scores candidates found through rarer terms.
const COMMON_TERM_DF: usize = 4_000;
const SUBSTRING_TERMS: usize = 16;
/// Entries that depend on a superseded premise are ranked lower.
const STALE_PENALTY: f64 = 0.7;

/// One ranked entry.
#[derive(Debug, Clone)]
pub struct Hit {
    pub slot: u32,
    pub activation: f64,
    /// How strongly the entry matched the query's own terms (0 when found only by the walk).
    pub keyword: f64,
}

/// Which nodes a retrieval may return.
pub struct Filter<'a> {
    pub scope: &'a Scope,
    pub kinds: &'a [Kind],
}

impl Filter<'_> {
    fn admits(&self, index: &Index, slot: u32) -> bool {
        index.node(slot).is_some_and(|n| {
            n.is_current() && self.kinds.contains(&n.kind) && self.scope.sees(n.project, &n.tenant)
        })
    }
}

/// The query's keyword score per admitted node.
pub fn keyword_scores(index: &Index, query: &str, filter: &Filter<'_>) -> HashMap<u32, f64> {
    let mut terms: Vec<(String, usize)> = text::terms(query)
        .into_iter()
        .map(|t| {
            let df = index.postings(&t).len();
            (t, df)
        })
        .collect();
    // Rare terms first: they find candidates; common ones only add to them.
    terms.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut scores: HashMap<u32, f64> = HashMap::new();
    for (term, df) in &terms {
        let mut best: HashMap<u32, f64> = HashMap::new();
        let consider = |slot: u32, score: f64, best: &mut HashMap<u32, f64>| {
            let entry = best.entry(slot).or_insert(0.0);
            if score > *entry {
                *entry = score;
            }
        };
        if *df > COMMON_TERM_DF && !scores.is_empty() {
            let weight = 3.0 * index.idf(*df);
            for &slot in scores.keys() {
                if index
                    .node(slot)
                    .is_some_and(|n| n.terms.binary_search(term).is_ok())
                {
                    best.insert(slot, weight);
                }
            }
        } else {
            let weight = 3.0 * index.idf(*df);
            for &slot in index.postings(term) {
                consider(slot, weight, &mut best);
            }
            let stem = text::stem(term);
            let stems = index.stem_postings(&stem);
            let stem_weight = 2.0 * index.idf(stems.len());
            for &slot in stems {
                consider(slot, stem_weight, &mut best);
            }
            if best.is_empty() && term.chars().count() >= 4 {
                for other in index.terms_containing(term, SUBSTRING_TERMS) {
                    let postings = index.postings(other);
                    let weight = index.idf(postings.len());
                    for &slot in postings {
                        consider(slot, weight, &mut best);
                    }
                }
            }
        }
        for (slot, score) in best {
            if filter.admits(index, slot) {
                *scores.entry(slot).or_insert(0.0) += score;
            }
        }
    }
    scores
}

/// The top `k` entries for a query, most activated first.
pub fn retrieve(index: &Index, query: &str, filter: &Filter<'_>, k: usize) -> Vec<Hit> {
    let keyword = keyword_scores(index, query, filter);
    if keyword.is_empty() {
        return Vec::new();
    }
    let newer_first = |a: &u32, b: &u32| b.cmp(a);
    let mut seeds: Vec<(u32, f64)> = keyword.iter().map(|(&s, &w)| (s, w)).collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| newer_first(&a.0, &b.0)));
    seeds.truncate(MAX_SEEDS);
    let ppr = personalized_pagerank(index, &seeds, filter);

    let max_keyword = keyword.values().cloned().fold(0.0, f64::max);
    let max_ppr = ppr.values().cloned().fold(0.0, f64::max);
    let mut hits: HashMap<u32, Hit> = HashMap::new();
    for (&slot, &score) in &keyword {
        hits.insert(
            slot,
            Hit {
                slot,
                activation: score / max_keyword,
                keyword: score,
            },
        );
    }
    if max_ppr > 0.0 {
        for (&slot, &score) in &ppr {
            let walked = score / max_ppr;
            let hit = hits.entry(slot).or_insert(Hit {
                slot,
                activation: 0.0,
                keyword: 0.0,
            });
            // Blend so an entry both matched and connected outranks one that is only either.
            hit.activation = hit.activation.max(walked) * 0.8 + hit.activation.min(walked) * 0.2;
        }
    }
    let mut ranked: Vec<Hit> = hits
        .into_values()
        .map(|mut hit| {
            if index.node(hit.slot).is_some_and(|n| n.needs_review()) {
                hit.activation *= STALE_PENALTY;
            }
            hit
        })
        .filter(|h| h.activation > 1e-9)
        .collect();
    ranked.sort_by(|a, b| {
        b.activation
            .total_cmp(&a.activation)
            .then_with(|| newer_first(&a.slot, &b.slot))
    });
    ranked.truncate(k);
    ranked
}

/// PPR restricted to the admitted nodes within [`MAX_HOPS`] of the seeds.
fn personalized_pagerank(
    index: &Index,
    seeds: &[(u32, f64)],
    filter: &Filter<'_>,
) -> HashMap<u32, f64> {
    // The reset vector: seed weights normalized, each capped, renormalized.
    let total: f64 = seeds.iter().map(|s| s.1).sum();
    let mut reset: Vec<(u32, f64)> = seeds
        .iter()
        .map(|&(slot, w)| (slot, (w / total).min(SEED_CAP)))
        .collect();
    let capped: f64 = reset.iter().map(|r| r.1).sum();
    for r in &mut reset {
        r.1 /= capped;
    }

    // The neighbourhood, breadth first, in a stable order.
    let mut local: HashMap<u32, usize> = HashMap::new();
    let mut order: Vec<u32> = Vec::new();
    for &(slot, _) in &reset {
        local.insert(slot, order.len());
        order.push(slot);
    }
    let mut frontier: Vec<u32> = order.clone();
    for _ in 0..MAX_HOPS {
        let mut next = Vec::new();
        for &slot in &frontier {
            for link in neighbours(index, slot) {
                if order.len() >= MAX_SUBGRAPH {
                    break;
                }
                if !local.contains_key(&link.0) && filter.admits(index, link.0) {
                    local.insert(link.0, order.len());
                    order.push(link.0);
                    next.push(link.0);
                }
            }
        }
        frontier = next;
    }

    // Transition weights inside the neighbourhood.
    let edges: Vec<Vec<(usize, f64)>> = order
        .iter()
        .map(|&slot| {
            let mut targets: Vec<(usize, f64)> = neighbours(index, slot)
                .filter_map(|(other, w)| local.get(&other).map(|&j| (j, w)))
                .collect();
            let sum: f64 = targets.iter().map(|t| t.1).sum();
            if sum > 0.0 {
                for t in &mut targets {
                    t.1 /= sum;
                }
            }
            targets
        })
        .collect();
    let mut reset_vec = vec![0.0; order.len()];
    for &(slot, w) in &reset {
        reset_vec[local[&slot]] = w;
    }
    let mut score = reset_vec.clone();
    for _ in 0..MAX_ITERATIONS {
        let mut next: Vec<f64> = reset_vec.iter().map(|r| (1.0 - DAMPING) * r).collect();
        let mut dead_end_mass = 0.0;
        for (i, targets) in edges.iter().enumerate() {
            if targets.is_empty() {
                dead_end_mass += score[i];
                continue;
            }
            for &(j, w) in targets {
                next[j] += DAMPING * score[i] * w;
            }
        }
        // A dead end returns its mass to the seeds.
        for &(slot, r) in &reset {
            next[local[&slot]] += DAMPING * dead_end_mass * r;
        }
        let delta: f64 = next.iter().zip(&score).map(|(a, b)| (a - b).abs()).sum();
        score = next;
        if delta < EPSILON {
            break;
        }
    }
    order.into_iter().zip(score).collect()
}

/// The nodes activation can reach from `slot`, with edge weight × kind multiplier.
fn neighbours(index: &Index, slot: u32) -> impl Iterator<Item = (u32, f64)> + '_ {
    let forward = index
        .outgoing(slot)
        .iter()
        .map(|l| (l.other, l.weight * l.kind.multiplier()));
    let backward = index
        .incoming(slot)
        .iter()
        .filter(|l| l.kind.walks_backwards())
        .map(|l| (l.other, l.weight * l.kind.multiplier()));
    forward.chain(backward)
}
