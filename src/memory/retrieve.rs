//! Retrieval: IDF-weighted seed terms (exact 3×, stem 2×, substring 1×), then personalized
//! PageRank from the seeds over the typed, weighted links, so an entry that shares no word with
//! the query is still found through the entries that connect them. Deterministic: ties break
//! toward the newer entry.

use foldhash::{HashMap, HashMapExt};

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

/// A filter resolved against one index: the tenant interned, so a check is a few compares.
struct Admit<'a> {
    kinds: &'a [Kind],
    project: Option<i64>,
    /// None: no node has this tenant, so nothing is admitted.
    tenant: Option<u32>,
}

impl<'a> Admit<'a> {
    fn new(index: &Index, filter: &Filter<'a>) -> Admit<'a> {
        Admit {
            kinds: filter.kinds,
            project: filter.scope.project,
            tenant: index.tenant_id(&filter.scope.tenant),
        }
    }

    fn admits(&self, index: &Index, slot: u32) -> bool {
        match (index.meta(slot), self.tenant) {
            (Some(meta), Some(tenant)) => {
                meta.current
                    && meta.tenant == tenant
                    && (meta.project.is_none() || meta.project == self.project)
                    && self.kinds.contains(&meta.kind)
            }
            (None, _) | (_, None) => false,
        }
    }
}

/// Once this many candidates are found, further postings only re-score them.
const CANDIDATE_CAP: usize = 1_024;

/// The query's keyword score per admitted node, as (slot, score) in no particular order.
pub fn keyword_scores(index: &Index, query: &str, filter: &Filter<'_>) -> Vec<(u32, f64)> {
    let admit = Admit::new(index, filter);
    if admit.tenant.is_none() {
        return Vec::new();
    }
    let mut terms: Vec<(String, usize)> = text::terms(query)
        .into_iter()
        .map(|t| {
            let df = index
                .stem_postings(&index.stem(&t))
                .len()
                .max(index.postings(&t).len());
            (t, df)
        })
        .collect();
    // Rare terms first: they find the candidates; common ones mostly add to them.
    terms.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));

    SCRATCH.with_borrow_mut(|scratch| {
        scratch.fit(index.slot_count());
        let scores = score_terms(index, &admit, &terms, scratch);
        scratch.clear();
        scores
    })
}

const UNSEEN: u8 = 0;
const CANDIDATE: u8 = 1;
const REFUSED: u8 = 2;

/// Per-slot working arrays, kept between queries on each thread (allocating and zeroing them
/// per query costs more than the query at 100k entries). Only touched slots are reset.
#[derive(Default)]
struct Scratch {
    state: Vec<u8>,
    score: Vec<f64>,
    /// Which term last scored a slot, so a slot counts once per term (its best match).
    stamp: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    fn fit(&mut self, slots: usize) {
        if self.state.len() < slots {
            self.state.resize(slots, UNSEEN);
            self.score.resize(slots, 0.0);
            self.stamp.resize(slots, u32::MAX);
        }
    }

    fn clear(&mut self) {
        for &slot in &self.touched {
            let i = slot as usize;
            self.state[i] = UNSEEN;
            self.score[i] = 0.0;
            self.stamp[i] = u32::MAX;
        }
        self.touched.clear();
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

fn score_terms(
    index: &Index,
    admit: &Admit<'_>,
    terms: &[(String, usize)],
    scratch: &mut Scratch,
) -> Vec<(u32, f64)> {
    let Scratch {
        state,
        score,
        stamp,
        touched,
    } = scratch;
    let mut candidates: Vec<u32> = Vec::new();

    for (t, (term, _)) in terms.iter().enumerate() {
        let t = t as u32;
        let mut visit = |slot: u32, weight: f64, candidates: &mut Vec<u32>| {
            let i = slot as usize;
            if stamp[i] == t {
                return;
            }
            if state[i] == UNSEEN && candidates.len() < CANDIDATE_CAP {
                touched.push(slot);
                state[i] = if admit.admits(index, slot) {
                    candidates.push(slot);
                    CANDIDATE
                } else {
                    REFUSED
                };
            }
            if state[i] == CANDIDATE {
                stamp[i] = t;
                score[i] += weight;
            }
        };
        // Exact matches first (3×): they outrank the stem match of the same term.
        let exact = index.postings(term);
        let exact_weight = 3.0 * index.idf(exact.len());
        // Newest first: once the cap is reached, newer entries are the ones kept.
        for &slot in exact.iter().rev() {
            visit(slot, exact_weight, &mut candidates);
        }
        let stems = index.stem_postings(&index.stem(term));
        let stem_weight = 2.0 * index.idf(stems.len());
        for &slot in stems.iter().rev() {
            visit(slot, stem_weight, &mut candidates);
        }
        if exact.is_empty() && stems.is_empty() && term.chars().count() >= 4 {
            for other in index.terms_containing(term, SUBSTRING_TERMS) {
                let postings = index.postings(other);
                let weight = index.idf(postings.len());
                for &slot in postings.iter().rev() {
                    visit(slot, weight, &mut candidates);
                }
            }
        }
    }
    candidates
        .into_iter()
        .filter(|&slot| score[slot as usize] > 0.0)
        .map(|slot| (slot, score[slot as usize]))
        .collect()
}

/// Orders hits by activation, then newer first: the one ranking every caller uses.
fn by_rank(a: &(u32, f64), b: &(u32, f64)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0))
}

/// The top `k` entries for a query, most activated first.
pub fn retrieve(index: &Index, query: &str, filter: &Filter<'_>, k: usize) -> Vec<Hit> {
    let mut keyword = keyword_scores(index, query, filter);
    if keyword.is_empty() {
        return Vec::new();
    }
    let max_keyword = keyword.iter().map(|c| c.1).fold(0.0, f64::max);
    // Seeds: the best few keyword matches.
    let seed_count = MAX_SEEDS.min(keyword.len());
    keyword.select_nth_unstable_by(seed_count - 1, by_rank);
    let mut seeds: Vec<(u32, f64)> = keyword[..seed_count].to_vec();
    seeds.sort_by(by_rank);
    let ppr = personalized_pagerank(index, &seeds, filter);
    let max_ppr = ppr.iter().map(|p| p.1).fold(0.0, f64::max);

    // Blend so an entry both matched and connected outranks one that is only either.
    let mut activation: HashMap<u32, (f64, f64)> =
        HashMap::with_capacity(keyword.len() + ppr.len());
    for &(slot, score) in &keyword {
        activation.insert(slot, (score / max_keyword, score));
    }
    if max_ppr > 0.0 {
        for &(slot, score) in &ppr {
            let walked = score / max_ppr;
            let entry = activation.entry(slot).or_insert((0.0, 0.0));
            entry.0 = entry.0.max(walked) * 0.8 + entry.0.min(walked) * 0.2;
        }
    }
    let mut ranked: Vec<(u32, f64)> = activation
        .iter()
        .map(|(&slot, &(act, _))| {
            let stale = index.node(slot).is_some_and(|n| n.needs_review());
            (slot, if stale { act * STALE_PENALTY } else { act })
        })
        .filter(|h| h.1 > 1e-9)
        .collect();
    if ranked.len() > k && k > 0 {
        ranked.select_nth_unstable_by(k - 1, by_rank);
        ranked.truncate(k);
    }
    ranked.sort_by(by_rank);
    ranked.truncate(k);
    ranked
        .into_iter()
        .map(|(slot, act)| Hit {
            slot,
            activation: act,
            keyword: activation.get(&slot).map(|a| a.1).unwrap_or(0.0),
        })
        .collect()
}

/// PPR restricted to the admitted nodes within [`MAX_HOPS`] of the seeds.
fn personalized_pagerank(
    index: &Index,
    seeds: &[(u32, f64)],
    filter: &Filter<'_>,
) -> Vec<(u32, f64)> {
    let admit = Admit::new(index, filter);
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
                if !local.contains_key(&link.0) && admit.admits(index, link.0) {
                    local.insert(link.0, order.len());
                    order.push(link.0);
                    next.push(link.0);
                }
            }
        }
        frontier = next;
    }

    // Transition weights inside the neighbourhood, flat: node i's targets are
    // `targets[offsets[i]..offsets[i + 1]]`.
    let mut offsets: Vec<usize> = Vec::with_capacity(order.len() + 1);
    let mut targets: Vec<(usize, f64)> = Vec::new();
    offsets.push(0);
    for &slot in &order {
        let start = targets.len();
        targets.extend(
            neighbours(index, slot).filter_map(|(other, w)| local.get(&other).map(|&j| (j, w))),
        );
        let sum: f64 = targets[start..].iter().map(|t| t.1).sum();
        if sum > 0.0 {
            for t in &mut targets[start..] {
                t.1 /= sum;
            }
        }
        offsets.push(targets.len());
    }
    let mut reset_vec = vec![0.0; order.len()];
    for &(slot, w) in &reset {
        reset_vec[local[&slot]] = w;
    }
    let mut score = reset_vec.clone();
    let mut next = vec![0.0; order.len()];
    for _ in 0..MAX_ITERATIONS {
        for (n, r) in next.iter_mut().zip(&reset_vec) {
            *n = (1.0 - DAMPING) * r;
        }
        let mut dead_end_mass = 0.0;
        for i in 0..order.len() {
            let out = &targets[offsets[i]..offsets[i + 1]];
            if out.is_empty() {
                dead_end_mass += score[i];
                continue;
            }
            let mass = DAMPING * score[i];
            for &(j, w) in out {
                next[j] += mass * w;
            }
        }
        // A dead end returns its mass to the seeds.
        for &(slot, r) in &reset {
            next[local[&slot]] += DAMPING * dead_end_mass * r;
        }
        let delta: f64 = next.iter().zip(&score).map(|(a, b)| (a - b).abs()).sum();
        std::mem::swap(&mut score, &mut next);
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
