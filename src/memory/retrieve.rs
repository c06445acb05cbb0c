//! Retrieval, in two steps.
//!
//! 1. **Terms.** The query's terms find entries: an exact match weighs 3 × its IDF, a stem match
//!    2 ×, a substring of a longer term (only for a term that matches nothing else) 1 ×; rare
//!    terms weigh more. Each entry's sum is scaled by BM25's length norm (`k1` = 1.2, `b` = 0.75
//!    over distinct terms), so a short fact about the thing outranks a long note that mentions
//!    it in passing. The best [`PHRASE_CANDIDATES`] then gain, for each pair of adjacent query
//!    terms they also write side by side ("invoice rendering", "rendering worker"), the two
//!    terms' weight × [`PHRASE`]: the entry that names the very thing asked about outranks
//!    one that has its words scattered. Scores are divided by the best one: the best has 1.
//! 2. **Bridges.** The best matches (up to [`MAX_SEEDS`], each at least [`SEED_FLOOR`]) pass
//!    their score on through the *named things* they mention that the query does not — a
//!    codename, a team, a vendor, a repository, a file path, an identifier: any term in at most
//!    [`BRIDGE_MAX_DF`] entries, weighted by its rarity and more when it is written as a name
//!    (a capital, a digit, a `/`, `_`, `-` or `.` inside; never a number, a version or a single
//!    character) — and through the entry's explicit
//!    links (depends_on, triggers, …). An entry reached so scores `seed × BRIDGE × strength`
//!    and remembers the path (`via fact-12 "falcon"`); an entry only mentioning the named thing
//!    in its body, not its subject, gets [`MENTION`] of that. Common words never bridge, so a
//!    fact reached through a strong bridge outranks facts that only share the question's words.
//!
//! 3. **Meaning.** The entries nearest the query's meaning (the sentence encoder in [`embed`],
//!    cosine similarity at least [`MIN_MEANING`]) are ranked by what they mean *beyond the
//!    words they share with the query* (their similarity less [`SHARED_DISCOUNT`] × the share of
//!    the query's term weight they contain: the encoder rates an entry that reuses a question's
//!    words in another sense as close as the answer) and fused with the ranking of steps 1–2
//!    by reciprocal rank ([`RRF_K`]). An entry whose meaning rank would place it must be nearer
//!    the query, beyond the shared words, than the best term matches are, by a margin; one that
//!    only meaning found must share next to none of the query's term weight
//!    ([`SHARED_ADMIT`]: the terms have judged those that share more). So a bridge's find is not pushed out by an entry that merely resembles the question,
//!    and a lure made of the question's words does not hold off the answer the words missed
//!    (see [`retrieve`]).
//!
//! An entry's activation is the stronger of its two scores plus a fifth of the weaker; entries
//! derived from a superseded premise are ranked lower ([`STALE_PENALTY`]). This is HippoRAG's
//! idea (a walk seeded by the query over an entity–passage graph, passages scored by the mass
//! their entities bring) cut to the two hops that matter and scored by the strongest path, not
//! by the sum of every path: it is deterministic, explains each result, and costs a few
//! thousand posting visits per query. Ties break toward the newer entry.

use foldhash::{HashMap, HashMapExt};

use super::embed;
use super::index::{pair_hash, Bits, Index};
use super::model::{EdgeKind, Kind, Node, Scope};
use super::text;

/// How many of the best term matches pass their score on.
pub const MAX_SEEDS: usize = 8;
/// A match below this fraction of the best one passes nothing on.
pub const SEED_FLOOR: f64 = 0.35;
/// A term in more entries than this is a common word, not a named thing: it never bridges.
pub const BRIDGE_MAX_DF: usize = 64;
/// The share of a seed's score that crosses the strongest possible bridge: nearly all, so the
/// entry a question is really after ranks right after the one that names its subject, but
/// never above it.
pub const BRIDGE: f64 = 0.99;
/// The share of a bridge's score an entry gets when only its body mentions the named thing.
pub const MENTION: f64 = 0.75;
/// Entries that depend on a superseded premise are ranked lower.
const STALE_PENALTY: f64 = 0.7;
const SUBSTRING_TERMS: usize = 16;
/// How many of the best term matches are checked for the query's adjacent pairs.
pub const PHRASE_CANDIDATES: usize = 64;
/// The share of a pair's exact-match weight an entry gains for writing the pair side by side.
pub const PHRASE: f64 = 0.5;
/// BM25's length parameters.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// How an entry was reached through another.
#[derive(Debug, Clone, PartialEq)]
pub struct Via {
    /// The entry that passed its score on.
    pub slot: u32,
    /// The named thing both mention, or the link between them.
    pub bridge: Bridge,
}

/// What connects an entry to the one that reached it.
#[derive(Debug, Clone, PartialEq)]
pub enum Bridge {
    Term(String),
    Link(EdgeKind),
}

/// One ranked entry.
#[derive(Debug, Clone)]
pub struct Hit {
    pub slot: u32,
    pub activation: f64,
    /// The strongest bridge that reached it, when that beat its own match.
    pub via: Option<Via>,
    /// Its meaning's cosine similarity to the query's, when meaning found it.
    pub meaning: Option<f32>,
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
            // A term only found inside longer ones ("each" in "reach") comes last: its
            // fragments must not fill the candidates before the terms that really match.
            (t, if df == 0 { usize::MAX } else { df })
        })
        .collect();
    // Rare terms first: they find the candidates; common ones mostly add to them.
    terms.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));

    SCRATCH.with_borrow_mut(|scratch| {
        // Left dirty only by a query that panicked on this thread; nothing to do otherwise.
        scratch.clear();
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
        // Adds `weight` to each candidate among `postings` (once per term: its best match),
        // admitting new candidates until the cap. Once the cap is reached only candidates are
        // re-scored, in a tight loop: a common term's long postings cost a byte read each.
        let mut visit =
            |postings: &[u32], bits: Option<&Bits>, weight: f64, candidates: &mut Vec<u32>| {
                // Newest first: once the cap is reached, newer entries are the ones kept.
                let mut rest = postings.len();
                while rest > 0 && candidates.len() < CANDIDATE_CAP {
                    rest -= 1;
                    let slot = postings[rest];
                    let i = slot as usize;
                    if stamp[i] == t {
                        continue;
                    }
                    if state[i] == UNSEEN {
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
                }
                match bits {
                    // A common term: each candidate checks its bit (those it already scored in the
                    // first phase carry this term's stamp).
                    Some(bits) if rest > candidates.len() => {
                        for &slot in candidates.iter() {
                            let i = slot as usize;
                            if stamp[i] != t && bits.has(slot) {
                                stamp[i] = t;
                                score[i] += weight;
                            }
                        }
                    }
                    _ => {
                        for &slot in postings[..rest].iter().rev() {
                            let i = slot as usize;
                            if state[i] == CANDIDATE && stamp[i] != t {
                                stamp[i] = t;
                                score[i] += weight;
                            }
                        }
                    }
                }
            };
        // Exact matches first (3×): they outrank the stem match of the same term.
        let exact = index.postings(term);
        let exact_bits = index.posting_bits(term);
        visit(
            exact,
            exact_bits,
            3.0 * index.idf(exact.len()),
            &mut candidates,
        );
        let stem = index.stem(term);
        let stems = index.stem_postings(&stem);
        // The exact matches are among the stem's; as many means the same entries, all scored.
        if stems.len() != exact.len() {
            let stem_bits = index.stem_posting_bits(&stem);
            visit(
                stems,
                stem_bits,
                2.0 * index.idf(stems.len()),
                &mut candidates,
            );
        }
        if exact.is_empty() && stems.is_empty() && term.chars().count() >= 4 {
            for other in index.terms_containing(term, SUBSTRING_TERMS) {
                let postings = index.postings(other);
                let bits = index.posting_bits(other);
                visit(postings, bits, index.idf(postings.len()), &mut candidates);
            }
        }
    }
    let average = index.average_terms();
    candidates
        .into_iter()
        .filter(|&slot| score[slot as usize] > 0.0)
        .map(|slot| (slot, score[slot as usize] * norm(index, slot, average)))
        .collect()
}

/// Orders hits by activation, then newer first: the one ranking every caller uses.
fn by_rank(a: &(u32, f64), b: &(u32, f64)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0))
}

/// The top `k` entries for a query, most activated first: the lexical and bridge ranking
/// (steps 1–2) fused with the meaning ranking (step 3) by weighted reciprocal rank.
pub fn retrieve(index: &Index, query: &str, filter: &Filter<'_>, k: usize) -> Vec<Hit> {
    if k == 0 {
        return Vec::new();
    }
    let depth = k.max(FUSE_DEPTH);
    let mut lexical = lexical(index, query, filter, depth);
    // When the best term match covers the question's every word, the terms have answered it:
    // meaning could only be gated out (see below), and the question is not embedded (the
    // model's few milliseconds are most of a query's cost).
    let covered = lexical
        .first()
        .and_then(|best| index.node(best.slot))
        .is_some_and(|node| grounding(index, query, node) >= COVERED);
    let asked = if covered {
        None
    } else {
        embed::embed_question(query)
    };
    let Some(asked) = asked.as_ref() else {
        lexical.truncate(k);
        return lexical;
    };
    let mut meaning = by_meaning(index, asked, filter, MEANING_POOL.max(depth));
    if meaning.is_empty() {
        lexical.truncate(k);
        return lexical;
    }
    // What each entry means beyond the words it shares with the question: a lure that reuses
    // the question's words in another sense is rated as close as the answer by the encoder,
    // and the terms have already judged it.
    let references: Vec<u32> = lexical
        .iter()
        .take(LEXICAL_REFERENCE)
        .map(|h| h.slot)
        .collect();
    let shared = shared_words(
        index,
        query,
        meaning
            .iter()
            .map(|h| h.slot)
            .chain(references.iter().copied()),
    );
    let shares = |slot: u32| shared.get(&slot).copied().unwrap_or(0.0);
    let beyond = |slot: u32, similarity: f32| similarity - SHARED_DISCOUNT * shares(slot);
    let beyond_of = |hit: &Hit| beyond(hit.slot, hit.meaning.unwrap_or(MIN_MEANING));
    meaning.sort_by(|a, b| {
        beyond_of(b)
            .total_cmp(&beyond_of(a))
            .then_with(|| b.slot.cmp(&a.slot))
    });
    meaning.truncate(depth);
    // Each list's rank r gives 1 / (RRF_K + r); meaning's weighs MEANING_WEIGHT of that. With a
    // small RRF_K the head of each list counts most: the best lexical match and the nearest
    // meaning come first.
    //
    // An entry's meaning rank counts only when it is nearer the question, beyond the shared
    // words, than the best term matches are (the top LEXICAL_REFERENCE): when they mean what
    // was asked, the terms answered it and a merely similar entry would push out what they
    // reached through a bridge; when they only share its words (a lure), the nearer entry is
    // the answer the words missed. An entry only meaning found must share next to none of the
    // question's term weight (SHARED_ADMIT): one that shares more was there for the terms to
    // rank, and they did not rank it among the depth read (or, past CANDIDATE_CAP, at all).
    let reference = references
        .iter()
        .filter_map(|&slot| Some(beyond(slot, index.similarity(asked, slot)?)))
        .fold(MIN_MEANING, f32::max)
        + MEANING_MARGIN;
    let passes = |hit: &Hit| hit.meaning.is_some_and(|m| beyond(hit.slot, m) > reference);
    let mut fused: HashMap<u32, (f64, Hit)> = HashMap::with_capacity(lexical.len() + meaning.len());
    for (rank, hit) in lexical.into_iter().enumerate() {
        let score = 1.0 / (RRF_K + rank as f64 + 1.0);
        fused.insert(hit.slot, (score, hit));
    }
    for (rank, hit) in meaning.into_iter().enumerate() {
        let score = MEANING_WEIGHT / (RRF_K + rank as f64 + 1.0);
        match fused.get_mut(&hit.slot) {
            // Found by both: its better rank counts (a sum would lift every entry that shares
            // the question's words and subject above the one a bridge reached).
            Some((s, found)) => {
                if passes(&hit) {
                    *s = s.max(score);
                }
                found.meaning = hit.meaning;
            }
            None if shares(hit.slot) < SHARED_ADMIT && passes(&hit) => {
                fused.insert(hit.slot, (score, hit));
            }
            None => {}
        }
    }
    let mut hits: Vec<(f64, Hit)> = fused.into_values().collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.slot.cmp(&a.1.slot)));
    hits.truncate(k);
    let best = hits.first().map_or(1.0, |h| h.0);
    hits.into_iter()
        .map(|(score, mut hit)| {
            hit.activation = score / best;
            if hit.meaning.is_none() {
                // What meaning says of a term match, for `why`, when it says something.
                hit.meaning = index
                    .similarity(asked, hit.slot)
                    .filter(|&s| s >= MIN_MEANING);
            }
            hit
        })
        .collect()
}

/// How many of the best term matches set what an entry's meaning, beyond the words it shares
/// with the question, must beat for its meaning rank to count.
const LEXICAL_REFERENCE: usize = 3;
/// How much nearer than the best term matches an entry must be for its meaning rank to count.
const MEANING_MARGIN: f32 = 0.05;
/// The share of the question's term weight the best term match must cover for meaning to be
/// skipped.
const COVERED: f64 = 0.999;
/// How deep each ranking is read before fusion.
const FUSE_DEPTH: usize = 50;
/// How many of the entries nearest the question's meaning are ranked by what they mean beyond
/// the words they share with it (before the first [`FUSE_DEPTH`] are read). On
/// `cargo bench --bench recall`, 100 kept every paraphrase the deeper 300 found and lost fewer
/// bridges.
const MEANING_POOL: usize = 100;
/// How much of an entry's similarity the share of the question's term weight it contains may
/// explain: an entry that writes every word of the question loses this much. Chosen on
/// `cargo bench --bench recall` (docs/benchmarks.md has the variants tried: 0.3 found fewer
/// paraphrases, 0.472 against 0.528, in the same setting).
const SHARED_DISCOUNT: f32 = 0.5;
/// An entry only meaning found must share less than this of the question's term weight: a
/// common word or two, not the words that matter.
const SHARED_ADMIT: f32 = 0.1;
/// Reciprocal-rank fusion's constant: small, so the top of each ranking dominates.
pub const RRF_K: f64 = 2.0;
/// The meaning ranking's weight against the lexical one's.
pub const MEANING_WEIGHT: f64 = 1.0;

/// The `k` admitted entries nearest the query's meaning, at least [`MIN_MEANING`] similar.
fn by_meaning(index: &Index, asked: &embed::Vector, filter: &Filter<'_>, k: usize) -> Vec<Hit> {
    let admit = Admit::new(index, filter);
    if admit.tenant.is_none() {
        return Vec::new();
    }
    index
        .nearest(asked, k, |slot| admit.admits(index, slot))
        .into_iter()
        .take_while(|&(_, similarity)| similarity >= MIN_MEANING)
        .map(|(slot, similarity)| {
            let stale = index.meta(slot).is_some_and(|m| m.stale);
            let activation = f64::from(similarity) * if stale { STALE_PENALTY } else { 1.0 };
            Hit {
                slot,
                activation,
                via: None,
                meaning: Some(similarity),
            }
        })
        .collect()
}

/// Below this cosine similarity a meaning match is noise, not a signal.
pub const MIN_MEANING: f32 = 0.25;

/// The top `k` entries by the query's terms and the bridges they cross (steps 1 and 2 of the
/// module docs), most activated first: what reminders are chosen from (fusing meaning in cost
/// them a third of their precision on `cargo bench --bench recall`).
pub fn lexical(index: &Index, query: &str, filter: &Filter<'_>, k: usize) -> Vec<Hit> {
    let mut keyword = keyword_scores(index, query, filter);
    if keyword.is_empty() || k == 0 {
        return Vec::new();
    }
    phrase_bonus(index, query, &mut keyword);
    let best = keyword.iter().map(|c| c.1).fold(0.0, f64::max);
    for c in &mut keyword {
        c.1 /= best;
    }
    let seed_count = MAX_SEEDS.min(keyword.len());
    keyword.select_nth_unstable_by(seed_count - 1, by_rank);
    let mut seeds: Vec<(u32, f64)> = keyword[..seed_count]
        .iter()
        .copied()
        .filter(|s| s.1 >= SEED_FLOOR)
        .collect();
    seeds.sort_by(by_rank);
    let mut bridged = bridges(index, query, &seeds, filter);

    // An entry's activation: the stronger of its own match and what a bridge brought, plus a
    // fifth of the weaker. The bridged entries are few: the matches look them up, not the
    // other way round.
    let activation = |slot: u32, own: f64, walked: f64| {
        let act = own.max(walked) + 0.2 * own.min(walked);
        let stale = index.meta(slot).is_some_and(|m| m.stale);
        if stale {
            act * STALE_PENALTY
        } else {
            act
        }
    };
    let mut ranked: Vec<(u32, f64)> = Vec::with_capacity(keyword.len() + bridged.len());
    for &(slot, own) in &keyword {
        if bridged.is_empty() {
            ranked.push((slot, activation(slot, own, 0.0)));
            continue;
        }
        let walked = match bridged.get_mut(&slot) {
            Some(reach) => {
                reach.own = own;
                reach.walked
            }
            None => 0.0,
        };
        ranked.push((slot, activation(slot, own, walked)));
    }
    for (&slot, reach) in &bridged {
        if reach.own == 0.0 {
            ranked.push((slot, activation(slot, 0.0, reach.walked)));
        }
    }
    ranked.retain(|h| h.1 > 1e-9);
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, by_rank);
        ranked.truncate(k);
    }
    ranked.sort_by(by_rank);
    ranked
        .into_iter()
        .map(|(slot, activation)| Hit {
            slot,
            activation,
            via: bridged
                .remove(&slot)
                .filter(|reach| reach.walked > reach.own)
                .map(|reach| reach.via),
            meaning: None,
        })
        .collect()
}

/// What a bridge brought an entry: its best path's score and the path, and the entry's own
/// match (0 when it matched no term).
struct Reach {
    walked: f64,
    via: Via,
    own: f64,
}

/// Adds to the best matches the weight of the query's adjacent term pairs they write side by
/// side (see the module docs).
fn phrase_bonus(index: &Index, query: &str, keyword: &mut [(u32, f64)]) {
    let asked: Vec<String> = text::sequence(query).collect();
    if asked.len() < 2 {
        return;
    }
    let weight = |term: &str| 3.0 * index.idf(index.postings(term).len());
    // A pair memory never writes (a word it has never seen, as question words mostly are)
    // cannot be written side by side: only pairs of known words are looked for.
    let pairs: Vec<(u64, f64)> = asked
        .windows(2)
        .filter(|w| w[0] != w[1])
        .filter(|w| !index.postings(&w[0]).is_empty() && !index.postings(&w[1]).is_empty())
        .map(|w| {
            (
                pair_hash(&w[0], &w[1]),
                PHRASE * (weight(&w[0]) + weight(&w[1])),
            )
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let checked = PHRASE_CANDIDATES.min(keyword.len());
    if checked < keyword.len() {
        keyword.select_nth_unstable_by(checked - 1, by_rank);
    }
    let average = index.average_terms();
    for (slot, score) in &mut keyword[..checked] {
        let bonus: f64 = pairs
            .iter()
            .filter(|(pair, _)| index.writes_pair(*slot, *pair))
            .map(|p| p.1)
            .sum();
        if bonus > 0.0 {
            *score += bonus * norm(index, *slot, average);
        }
    }
}

/// BM25's length norm of the entry in `slot`.
fn norm(index: &Index, slot: u32, average: f64) -> f64 {
    let length = index.meta(slot).map_or(average, |m| f64::from(m.terms));
    (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * length / average))
}

/// Step 2: what the seeds reach through the named things they mention and their links, each
/// entry with its strongest path.
fn bridges(
    index: &Index,
    query: &str,
    seeds: &[(u32, f64)],
    filter: &Filter<'_>,
) -> HashMap<u32, Reach> {
    let admit = Admit::new(index, filter);
    let mut reached: HashMap<u32, Reach> = HashMap::new();
    if admit.tenant.is_none() {
        return reached;
    }
    let asked = Asked::new(index, query);
    let mut offer = |slot: u32, score: f64, via: Via| {
        if score <= 0.0 || !admit.admits(index, slot) {
            return;
        }
        match reached.get(&slot) {
            Some(best) if best.walked >= score => {}
            _ => {
                reached.insert(
                    slot,
                    Reach {
                        walked: score,
                        via,
                        own: 0.0,
                    },
                );
            }
        }
    };
    for &(seed, score) in seeds {
        let Some(node) = index.node(seed) else {
            continue;
        };
        for term in &node.terms() {
            if asked.terms.contains(term) || asked.stems.contains(&index.stem(term)) {
                continue;
            }
            if !worth_a_name(term) {
                continue;
            }
            let postings = index.postings(term);
            if postings.len() < 2 || postings.len() > BRIDGE_MAX_DF {
                continue;
            }
            let strength = bridge_strength(index, term, postings.len(), node);
            for &other in postings {
                if other != seed {
                    let via = Via {
                        slot: seed,
                        bridge: Bridge::Term(term.clone()),
                    };
                    let about = index.node(other).map_or(0.0, |n| aboutness(n, term));
                    offer(other, score * BRIDGE * strength * about, via);
                }
            }
        }
        for (other, kind, weight) in links(index, seed) {
            let via = Via {
                slot: seed,
                bridge: Bridge::Link(kind),
            };
            offer(other, score * BRIDGE * weight, via);
        }
    }
    reached
}

/// Whether a term can be a named thing that ties two entries: not a number ("canary 0"), a
/// version (`1.2.3`, `v2`) or a single character — entries that share one have nothing in
/// common.
pub fn worth_a_name(term: &str) -> bool {
    let mut chars = term.chars();
    if chars.next().is_none() || chars.next().is_none() {
        return false;
    }
    let numeric = term.strip_prefix('v').unwrap_or(term);
    !(numeric.starts_with(|c: char| c.is_ascii_digit())
        && numeric.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// How strongly a shared term ties two entries, in (0, 1]: its rarity, `ln(N/df) / ln(N/2)`
/// (1 for a term only the two entries share), raised a tenth when the entry writes it as a name
/// (a capital, a digit, or inside an identifier such as `assets/fonts` or `invoice_svc`) and
/// lowered a twentieth when it is a plain lowercase word.
pub fn bridge_strength(index: &Index, term: &str, df: usize, node: &Node) -> f64 {
    let n = index.live().max(4) as f64;
    let rarity = ((n / df as f64).ln() / (n / 2.0).ln()).clamp(0.0, 1.0);
    let named = written_as_name(&node.subject, term) || written_as_name(&node.body, term);
    (rarity * if named { 1.1 } else { 0.95 }).min(1.0)
}

/// How much an entry reached through `term` is about it: fully when its subject names it
/// ("Falcon stack"), [`MENTION`] when only its body does ("… the Falcon room is booked").
fn aboutness(node: &Node, term: &str) -> f64 {
    if names(&node.subject, term) {
        1.0
    } else {
        MENTION
    }
}

/// Whether `text` has `term` (lowercase) as one of its words, without allocating for ASCII
/// (this runs for every entry a bridge reaches).
fn names(text: &str, term: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric()).any(|word| {
        word.len() == term.len() && word.eq_ignore_ascii_case(term)
            || (!word.is_ascii() && word.to_lowercase() == term)
    })
}

/// Whether `text` writes `term` (lowercase) as a name somewhere.
fn written_as_name(text: &str, term: &str) -> bool {
    text.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        let lower = word.to_lowercase();
        let has = lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|part| part == term);
        has && (word.chars().any(|c| c.is_uppercase() || c.is_ascii_digit())
            || word.contains(['/', '_', '-', '.', ':', '@', '#']))
    })
}

/// The explicit links activation crosses from `slot` (not the related_to links the writer
/// makes from shared words: named things bridge at query time, with today's rarities).
fn links(index: &Index, slot: u32) -> impl Iterator<Item = (u32, EdgeKind, f64)> + '_ {
    let forward = index
        .outgoing(slot)
        .iter()
        .filter(|l| l.kind != EdgeKind::RelatedTo)
        .map(|l| (l.other, l.kind, l.weight * l.kind.multiplier()));
    let backward = index
        .incoming(slot)
        .iter()
        .filter(|l| l.kind != EdgeKind::RelatedTo && l.kind.walks_backwards())
        .map(|l| (l.other, l.kind, l.weight * l.kind.multiplier()));
    forward.chain(backward)
}

/// A query's distinct terms and their stems, worked out once for the entries it is checked
/// against.
pub struct Asked<'a> {
    terms: Vec<String>,
    stems: Vec<std::borrow::Cow<'a, str>>,
}

impl<'a> Asked<'a> {
    pub fn new(index: &'a Index, query: &str) -> Asked<'a> {
        let terms = text::terms(query);
        let stems = terms.iter().map(|t| index.stem(t)).collect();
        Asked { terms, stems }
    }
}

/// The query's terms an entry matched: exactly, by stem, or as part of a longer term.
pub fn matched_terms(index: &Index, asked: &Asked<'_>, node: &Node) -> Vec<String> {
    let node_terms = node.terms();
    let node_stems: Vec<_> = node_terms.iter().map(|t| index.stem(t)).collect();
    asked
        .terms
        .iter()
        .zip(&asked.stems)
        .filter(|(term, stem)| {
            node_terms.binary_search(term).is_ok()
                || node_stems.contains(stem)
                || (term.chars().count() >= 4
                    && node_terms.iter().any(|t| t.contains(term.as_str())))
        })
        .map(|(term, _)| term.clone())
        .collect()
}

/// For each of `slots`, the share of the query's term weight (each term's IDF, as in
/// [`grounding`]) it contains, exactly or by stem: how much of its likeness to the query the
/// words they share may explain. Reads each term's postings once (or its bits, when it has
/// them), not the entries' texts; a posting is checked against the slots with one array read.
fn shared_words(index: &Index, query: &str, slots: impl Iterator<Item = u32>) -> HashMap<u32, f32> {
    MARKS.with_borrow_mut(|marks| {
        if marks.len() < index.slot_count() {
            marks.resize(index.slot_count(), 0);
        }
        // marks[slot]: 1 + the slot's place in `asked`, 0 for a slot not asked about. A mark
        // counts only where `asked` says so: one a panicked call left behind is ignored.
        let mut asked: Vec<u32> = Vec::new();
        let place = |marks: &[u32], asked: &[u32], slot: u32| {
            let mark = *marks.get(slot as usize)? as usize;
            (mark != 0 && asked.get(mark - 1) == Some(&slot)).then(|| mark - 1)
        };
        for slot in slots {
            if (slot as usize) < marks.len() && place(marks, &asked, slot).is_none() {
                asked.push(slot);
                marks[slot as usize] = asked.len() as u32;
            }
        }
        let mut shares = vec![0.0f64; asked.len()];
        // stamp[i]: the last term that counted for asked[i], so a term counts once a slot.
        let mut stamp = vec![usize::MAX; asked.len()];
        let mut total = 0.0;
        for (t, term) in text::terms(query).iter().enumerate() {
            let stem = index.stem(term);
            let exact = (index.postings(term), index.posting_bits(term));
            let stems = (index.stem_postings(&stem), index.stem_posting_bits(&stem));
            let weight = term_weight(index, exact.0.len().max(stems.0.len()));
            total += weight;
            let mut count = |i: usize| {
                if stamp[i] != t {
                    stamp[i] = t;
                    shares[i] += weight;
                }
            };
            // The exact matches are among the stem's; as many means the same entries.
            let lists = if stems.0.len() == exact.0.len() {
                &[exact][..]
            } else {
                &[exact, stems][..]
            };
            for &(postings, bits) in lists {
                match bits {
                    Some(bits) => (0..asked.len())
                        .filter(|&i| bits.has(asked[i]))
                        .for_each(&mut count),
                    None => postings
                        .iter()
                        .filter_map(|&slot| place(marks, &asked, slot))
                        .for_each(&mut count),
                }
            }
        }
        for &slot in &asked {
            marks[slot as usize] = 0;
        }
        asked
            .into_iter()
            .zip(shares)
            .map(|(slot, share)| {
                let share = if total > 0.0 { share / total } else { 0.0 };
                (slot, share as f32)
            })
            .collect()
    })
}

thread_local! {
    /// Per slot, its place among the slots [`shared_words`] is asked about (kept between
    /// queries on each thread, zero between calls).
    static MARKS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A query term's weight, from how many entries have it (exactly or by stem): its IDF. A term
/// memory has never seen weighs as one in 1% of the entries: it says the request may be about
/// something memory does not know, but is as often a plain verb ("edit").
fn term_weight(index: &Index, df: usize) -> f64 {
    index.idf(if df == 0 { index.live() / 100 } else { df })
}

/// How much of a request an entry is about, in [0, 1]: the IDF mass of the request's terms the
/// entry matches over the mass of all of them. "write a haiku about autumn" against a fact that
/// mentions writing scores low; "edit the invoice rendering worker config" against the worker's
/// fact scores high. Meaning does not ground a reminder yet: the shipped static model rates
/// distractors that reuse a prompt's words as close as the entry it is about, and a reminder
/// must be precise (see docs/memory.md).
pub fn grounding(index: &Index, query: &str, node: &Node) -> f64 {
    let terms = text::terms(query);
    let weight = |term: &str| {
        let df = index
            .postings(term)
            .len()
            .max(index.stem_postings(&index.stem(term)).len());
        term_weight(index, df)
    };
    let total: f64 = terms.iter().map(|t| weight(t)).sum();
    if total <= 0.0 {
        return 0.0;
    }
    let matched: f64 = matched_terms(index, &Asked::new(index, query), node)
        .iter()
        .map(|t| weight(t))
        .sum();
    matched / total
}

#[cfg(test)]
mod tests {
    use super::super::{Memory, NewEntry};
    use super::*;
    use std::ops::Deref;

    #[test]
    fn shared_words_weigh_the_query_terms_an_entry_has_exactly_or_by_stem_once_each() {
        let memory = Memory::in_memory().unwrap();
        let mut entries = vec![
            NewEntry::new(
                Kind::Pattern,
                "Migrations",
                "Schema migrations need sign-off.",
            ),
            NewEntry::new(
                Kind::Pattern,
                "Tables",
                "Facilities approve altering the tables.",
            ),
            NewEntry::new(
                Kind::Pattern,
                "Table",
                "Approving a table is quick; tables too.",
            ),
        ];
        // Enough lunches that "lunch" is a common term, kept as bits as well as a list.
        for i in 0..1_100 {
            entries.push(NewEntry::new(
                Kind::Pattern,
                &format!("Lunch {i}"),
                &format!("Lunch number {i} is served at noon."),
            ));
        }
        let written = memory.write_entries(entries).unwrap();
        let index = memory.index.read().unwrap();
        let index = index.deref();
        let slot = |i: usize| index.slot_of(&written[i].id).unwrap();
        let (migrations, tables, table, lunch) = (slot(0), slot(1), slot(2), slot(3));
        assert!(index.posting_bits("lunch").is_some());

        let query = "who has to approve altering the tables at lunch?";
        let terms = text::terms(query);
        assert_eq!(terms.len(), 4, "{terms:?}");
        let weight = |term: &str| {
            let df = index
                .postings(term)
                .len()
                .max(index.stem_postings(&index.stem(term)).len());
            index.idf(df)
        };
        let total: f64 = terms.iter().map(|t| weight(t)).sum();
        let share = |of: &[&str]| (of.iter().map(|t| weight(t)).sum::<f64>() / total) as f32;
        // A slot asked about twice counts once.
        let shares = shared_words(
            index,
            query,
            [migrations, tables, table, lunch, tables].into_iter(),
        );
        assert_eq!(shares.len(), 4);
        let near = |a: f32, b: f32| (a - b).abs() < 1e-6;
        // No word in common.
        assert_eq!(shares[&migrations], 0.0, "{shares:?}");
        // Three of the four terms, exactly ("tables" once, though its stem matches too).
        assert!(
            near(shares[&tables], share(&["approve", "altering", "tables"])),
            "{shares:?}"
        );
        // "approve" by its stem only, "tables" exactly and by stem: once each.
        assert!(
            near(shares[&table], share(&["approve", "tables"])),
            "{shares:?}"
        );
        // A common term, found through its bits.
        assert!(near(shares[&lunch], share(&["lunch"])), "{shares:?}");
    }
}
