//! Memory recall benchmark: bridge (multi-hop) and direct (single-hop) questions among
//! distractors, CAR's `memory_query` against a BM25 baseline on the same facts in the same run,
//! and selective reminders on labelled requests (`memory_evaluate`'s own report), with the
//! grounding threshold calibrated on a separate labelled set.
//!
//! Cases (benches/recall/cases.rs): five shapes (codename, owner team, vendor, repository,
//! on-call rotation); in each, the question names a system, a bridge fact ties that system to a
//! named thing, and the answer fact says something about the named thing only — sharing no
//! content word with the question. Distractors share the questions' common words and the
//! systems' domain words, and one in fifty names an entity of the cases. Two of the shapes
//! first write an older answer that the real one replaces: it must never come back.
//!
//! Paraphrase (benches/paraphrase/): hand-written questions that share no content word with
//! their answers, among 5,000 distractors made of the questions' own words.
//!
//! `cargo bench --bench recall -- [--cases N] [--distractors N] [--seed S]`
//! (defaults 55, 10000, 7). Results also go to bench-results/recall.json.
//! `-- --dump-paraphrase FILE [--seed S]` only writes the paraphrase corpus, for
//! `scripts/bench-encoders.py`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // bench code may unwrap and print

#[path = "recall/cases.rs"]
mod cases;
#[path = "paraphrase/mod.rs"]
mod paraphrase;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use car::{EvaluationCase, InterveneRequest, Kind, Memory, NewEntry, Trigger};
use cases::{Case, Rng};
use serde_json::json;

struct Loaded {
    memory: Memory,
    bridge_ids: Vec<String>,
    answer_ids: Vec<String>,
    stale_ids: HashSet<String>,
    /// (id, subject + body) of every current fact, for the baseline.
    docs: Vec<(String, String)>,
}

fn load(cases: &[Case], distractors: &[(String, String)]) -> Loaded {
    let memory = Memory::in_memory().unwrap();
    memory.embed_on_write();
    let fact = |(s, b): &(String, String)| NewEntry::new(Kind::Pattern, s, b);
    let stale: Vec<NewEntry> = cases
        .iter()
        .filter_map(|c| c.stale.as_ref().map(fact))
        .collect();
    let stale_written = memory.write_entries(stale).unwrap();
    let mut docs = Vec::new();
    for chunk in distractors.chunks(2000) {
        let written = memory
            .write_entries(chunk.iter().map(fact).collect())
            .unwrap();
        for (w, (s, b)) in written.iter().zip(chunk) {
            docs.push((w.id.clone(), format!("{s} {b}")));
        }
    }
    let bridges = memory
        .write_entries(cases.iter().map(|c| fact(&c.bridge)).collect())
        .unwrap();
    let answers = memory
        .write_entries(cases.iter().map(|c| fact(&c.answer)).collect())
        .unwrap();
    for (w, c) in bridges.iter().zip(cases) {
        docs.push((w.id.clone(), format!("{} {}", c.bridge.0, c.bridge.1)));
    }
    for (w, c) in answers.iter().zip(cases) {
        docs.push((w.id.clone(), format!("{} {}", c.answer.0, c.answer.1)));
    }
    Loaded {
        memory,
        bridge_ids: bridges.into_iter().map(|w| w.id).collect(),
        answer_ids: answers.into_iter().map(|w| w.id).collect(),
        stale_ids: stale_written.into_iter().map(|w| w.id).collect(),
        docs,
    }
}

/// The baseline: Okapi BM25 (k1 = 1.2, b = 0.75) over lowercase alphanumeric tokens minus
/// English stop words, as a plain full-text index ranks.
struct Bm25 {
    docs: Vec<(String, HashMap<String, f64>, f64)>,
    df: HashMap<String, usize>,
    avg_len: f64,
}

const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "is", "it", "of", "on", "or", "should", "the", "to", "what", "when", "which", "who",
    "with",
];

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|t| !STOP.contains(&t.as_str()))
        .collect()
}

impl Bm25 {
    fn new(docs: &[(String, String)]) -> Bm25 {
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::new();
        let mut total = 0.0;
        for (id, text) in docs {
            let mut tf: HashMap<String, f64> = HashMap::new();
            let toks = tokens(text);
            for t in &toks {
                *tf.entry(t.clone()).or_default() += 1.0;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            total += toks.len() as f64;
            out.push((id.clone(), tf, toks.len() as f64));
        }
        let avg_len = total / docs.len().max(1) as f64;
        Bm25 {
            docs: out,
            df,
            avg_len,
        }
    }

    fn top(&self, query: &str, k: usize) -> Vec<&str> {
        let n = self.docs.len() as f64;
        let terms: Vec<(String, f64)> = tokens(query)
            .into_iter()
            .filter_map(|t| {
                let df = *self.df.get(&t)? as f64;
                Some((t, ((n - df + 0.5) / (df + 0.5) + 1.0).ln()))
            })
            .collect();
        let mut scored: Vec<(f64, &str)> = self
            .docs
            .iter()
            .filter_map(|(id, tf, len)| {
                let s: f64 = terms
                    .iter()
                    .filter_map(|(t, idf)| {
                        let f = *tf.get(t)?;
                        Some(idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len / self.avg_len)))
                    })
                    .sum();
                (s > 0.0).then_some((s, id.as_str()))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(k).map(|s| s.1).collect()
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f64 / b as f64 * 1000.0).round() / 1000.0
    }
}

/// The labelled requests as evaluation cases, each with a trigger set.
fn labelled(
    loaded: &Loaded,
    requests: &[(String, Option<usize>)],
    seed: u64,
) -> Vec<EvaluationCase> {
    let mut rng = Rng::new(seed);
    requests
        .iter()
        .enumerate()
        .map(|(i, (text, answers))| {
            let mut trigger = Trigger::default();
            match rng.below(3) {
                0 => trigger.tool_error = true,
                1 => trigger.explicit_uncertainty = true,
                _ => trigger.context_shift = true,
            }
            EvaluationCase {
                id: format!("r{i}"),
                request: InterveneRequest {
                    query: Some(text.clone()),
                    trigger,
                    ..InterveneRequest::default()
                },
                relevant_fact_ids: answers
                    .iter()
                    .map(|&c| loaded.bridge_ids[c].clone())
                    .collect(),
            }
        })
        .collect()
}

/// The grounding threshold that a labelled calibration set supports: for each threshold, the
/// reminder `intervene` would pick (the best-ranked candidate at least that grounded) is
/// scored against the labels; the lowest threshold with precision ≥ 0.9 wins.
fn calibrate(seed: u64, n_cases: usize, n_distractors: usize) -> (f64, Vec<serde_json::Value>) {
    let cases = cases::cases(seed, n_cases);
    let loaded = load(&cases, &cases::distractors(seed, n_distractors));
    let requests = cases::reminder_requests(&cases, seed);
    let labelled = labelled(&loaded, &requests, seed);
    // Per request: its candidates (id, grounding) best first, and the ids that answer it.
    type Ranked<'a> = (Vec<(String, f64)>, &'a [String]);
    let candidates: Vec<Ranked<'_>> = labelled
        .iter()
        .map(|case| {
            let out = loaded.memory.intervene(&case.request).unwrap();
            let ranked = out
                .candidates
                .iter()
                .map(|c| (c.id.clone(), c.grounding))
                .collect();
            (ranked, case.relevant_fact_ids.as_slice())
        })
        .collect();
    let mut sweep = Vec::new();
    let mut chosen = None;
    for step in 1..=18 {
        let threshold = step as f64 * 0.05;
        let (mut tp, mut fp, mut fn_) = (0, 0, 0);
        for (ranked, relevant) in &candidates {
            match ranked.iter().find(|c| c.1 >= threshold) {
                Some((id, _)) if relevant.contains(id) => tp += 1,
                Some(_) => {
                    fp += 1;
                    fn_ += usize::from(!relevant.is_empty());
                }
                None => fn_ += usize::from(!relevant.is_empty()),
            }
        }
        let (precision, recall) = (ratio(tp, tp + fp), ratio(tp, tp + fn_));
        if chosen.is_none() && precision >= 0.9 {
            chosen = Some(threshold);
        }
        sweep.push(json!({"threshold": (threshold * 100.0).round() / 100.0, "precision": precision, "recall": recall}));
    }
    (chosen.unwrap_or(1.0), sweep)
}

/// The paraphrase corpus: 5,000 distractors with the cases' facts spread among them, as
/// (subject, body) in the order they are written.
fn paraphrase_notes(cases: &[paraphrase::Case], seed: u64) -> Vec<(String, String)> {
    let mut notes = paraphrase::distractors(5_000, seed);
    for (i, case) in cases.iter().enumerate() {
        notes.insert(
            i * 97 % notes.len(),
            (case.subject.clone(), case.body.clone()),
        );
    }
    notes
}

/// `--dump-paraphrase FILE`: writes the paraphrase corpus of a seed as JSON (the questions with
/// their answers, and every entry in the order written) for `scripts/bench-encoders.py`, which
/// ranks it with other encoders.
fn dump_paraphrase(path: &str, seed: u64) {
    let cases = paraphrase::cases();
    let notes = paraphrase_notes(&cases, seed);
    let out = json!({
        "seed": seed,
        "cases": cases.iter().map(|c| json!({
            "domain": c.domain, "subject": c.subject, "body": c.body, "question": c.question,
        })).collect::<Vec<_>>(),
        "entries": notes.iter().map(|(s, b)| json!({"subject": s, "body": b})).collect::<Vec<_>>(),
    });
    std::fs::write(path, serde_json::to_string(&out).unwrap())
        .unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    println!("wrote the paraphrase corpus of seed {seed} to {path}");
}

/// benches/paraphrase/'s cases among 5,000 distractors made of their questions' words: (found by
/// CAR, found by BM25, cases), recall@5.
fn paraphrase_recall(seed: u64) -> (usize, usize, usize) {
    let memory = Memory::in_memory().unwrap();
    memory.embed_on_write();
    let cases = paraphrase::cases();
    let notes = paraphrase_notes(&cases, seed);
    let entries = notes
        .iter()
        .map(|(s, b)| NewEntry::new(Kind::Pattern, s, b))
        .collect();
    let written = memory.write_entries(entries).unwrap();
    let docs: Vec<(String, String)> = written
        .iter()
        .zip(&notes)
        .map(|(w, (s, b))| (w.id.clone(), format!("{s} {b}")))
        .collect();
    let bm25 = Bm25::new(&docs);
    let (mut car, mut base) = (0, 0);
    for case in &cases {
        let hits = memory.query(&case.question, "", 5).unwrap();
        let found = hits.iter().any(|h| h.body == case.body);
        car += usize::from(found);
        if !found && std::env::var_os("RECALL_DEBUG").is_some() {
            let wide = memory.query(&case.question, "", 50).unwrap();
            let rank = wide.iter().position(|h| h.body == case.body);
            eprintln!(
                "paraphrase miss: {} | answer rank {rank:?}: {}",
                case.question, case.body
            );
            for h in hits.iter() {
                eprintln!("    {:.3} {} | {}", h.activation, h.subject, h.body);
            }
        }
        let id = docs
            .iter()
            .find(|d| d.1 == format!("{} {}", case.subject, case.body))
            .map(|d| d.0.as_str());
        base += usize::from(
            bm25.top(&case.question, 5)
                .into_iter()
                .any(|d| Some(d) == id),
        );
    }
    (car, base, cases.len())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--dump-paraphrase") {
        let path = args
            .get(i + 1)
            .expect("--dump-paraphrase takes a file name");
        dump_paraphrase(path, arg("--seed", 7));
        return;
    }
    let n_cases = arg("--cases", 55) as usize;
    let n_distractors = arg("--distractors", 10_000) as usize;
    let seed = arg("--seed", 7);
    let cases = cases::cases(seed, n_cases);
    let distractors = cases::distractors(seed, n_distractors);
    let started = Instant::now();
    let loaded = load(&cases, &distractors);
    let load_s = started.elapsed().as_secs_f64();
    let bm25 = Bm25::new(&loaded.docs);

    let mut by_shape: HashMap<&str, (usize, usize)> = HashMap::new();
    let (mut multi, mut single, mut base_multi, mut base_single, mut stale_seen) = (0, 0, 0, 0, 0);
    let mut misses = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let hits = loaded.memory.query(&case.multi_hop, "", 5).unwrap();
        let found = hits.iter().any(|h| h.id == loaded.answer_ids[i]);
        multi += usize::from(found);
        let shape = by_shape.entry(case.shape).or_default();
        shape.0 += usize::from(found);
        shape.1 += 1;
        if !found && std::env::var_os("RECALL_DEBUG").is_some() {
            let wide = loaded.memory.query(&case.multi_hop, "", 50).unwrap();
            let rank = |id: &str| wide.iter().position(|h| h.id == id);
            let direct = loaded.memory.query(&case.bridge.1, "", 3).unwrap();
            eprintln!(
                "  self-query top: {:?} (bridge {})",
                direct.iter().map(|h| &h.id).collect::<Vec<_>>(),
                loaded.bridge_ids[i]
            );
            eprintln!(
                "{} | bridge rank {:?} answer rank {:?} | top {:?}",
                case.multi_hop,
                rank(&loaded.bridge_ids[i]),
                rank(&loaded.answer_ids[i]),
                wide.iter()
                    .take(3)
                    .map(|h| h.activation)
                    .collect::<Vec<_>>()
            );
        }
        if !found {
            misses.push(json!({"question": case.multi_hop, "answer": case.answer.1,
                "got": hits.iter().map(|h| format!("{} {}", h.id, h.body)).collect::<Vec<_>>()}));
        }
        let direct = loaded.memory.query(&case.single_hop, "", 5).unwrap();
        single += usize::from(direct.iter().any(|h| h.id == loaded.bridge_ids[i]));
        stale_seen += hits
            .iter()
            .chain(&direct)
            .filter(|h| loaded.stale_ids.contains(&h.id))
            .count();
        base_multi += usize::from(
            bm25.top(&case.multi_hop, 5)
                .contains(&loaded.answer_ids[i].as_str()),
        );
        base_single += usize::from(
            bm25.top(&case.single_hop, 5)
                .contains(&loaded.bridge_ids[i].as_str()),
        );
    }
    let n = cases.len();
    println!("memory recall@5 — {n} cases, {n_distractors} distractors, seed {seed} (loaded in {load_s:.1} s)");
    println!(
        "  multi-hop   CAR {:.3}   BM25 {:.3}",
        ratio(multi, n),
        ratio(base_multi, n)
    );
    println!(
        "  single-hop  CAR {:.3}   BM25 {:.3}",
        ratio(single, n),
        ratio(base_single, n)
    );
    println!("  superseded facts returned: {stale_seen}");
    let mut shapes: Vec<_> = by_shape.iter().collect();
    shapes.sort();
    for (shape, (found, total)) in &shapes {
        println!("    {shape:<18} {found}/{total}");
    }
    for miss in misses.iter().take(3) {
        println!("  miss: {miss}");
    }

    // Reminders: calibrated on another seed's cases and requests, evaluated on this one's.
    let (calibrated, sweep) = calibrate(seed + 1000, n_cases, n_distractors);
    println!(
        "grounding threshold: calibrated {calibrated:.2} (seed {}), the engine uses {:.2}",
        seed + 1000,
        car::MIN_GROUNDING
    );
    for row in &sweep {
        println!(
            "  {} precision {} recall {}",
            row["threshold"], row["precision"], row["recall"]
        );
    }
    let requests = cases::reminder_requests(&cases, seed);
    let evaluation = loaded
        .memory
        .evaluate(&labelled(&loaded, &requests, seed), &|| false)
        .unwrap()
        .unwrap();
    let answered = requests.iter().filter(|r| r.1.is_some()).count();
    println!(
        "reminders — {answered} requests one entry answers, {} none concerns, all with a trigger set",
        requests.len() - answered
    );
    for (name, mode) in [
        ("selective", &evaluation.selective),
        ("always_inject", &evaluation.always_inject),
    ] {
        println!(
            "  {name:<14} precision {:.3}  recall {:.3}  interruption rate {:.3}",
            mode.precision, mode.recall, mode.interruption_rate
        );
    }

    let (paraphrase, paraphrase_bm25, paraphrase_total) = paraphrase_recall(seed);
    println!(
        "paraphrase recall@5 — {paraphrase_total} questions sharing no content word with their answers, 5000 distractors built from their words"
    );
    println!(
        "  CAR {:.3}   BM25 {:.3}",
        ratio(paraphrase, paraphrase_total),
        ratio(paraphrase_bm25, paraphrase_total)
    );

    let out = json!({
        "cases": n, "distractors": n_distractors, "seed": seed,
        "paraphrase_recall_at_5": {"car": ratio(paraphrase, paraphrase_total), "bm25": ratio(paraphrase_bm25, paraphrase_total)},
        "multi_hop_recall_at_5": {"car": ratio(multi, n), "bm25": ratio(base_multi, n)},
        "single_hop_recall_at_5": {"car": ratio(single, n), "bm25": ratio(base_single, n)},
        "superseded_returned": stale_seen,
        "by_shape": by_shape.iter().map(|(s, (f, t))| (s.to_string(), json!({"found": f, "of": t}))).collect::<serde_json::Map<_, _>>(),
        "reminders": evaluation,
        "grounding": {"calibrated": calibrated, "engine": car::MIN_GROUNDING, "sweep": sweep},
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("recall.json"),
        serde_json::to_string_pretty(&out).unwrap(),
    )
    .unwrap();
}
