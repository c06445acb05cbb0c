//! A paraphrase benchmark for recall by meaning: hand-written project facts (`cases.json`), each
//! asked the way a person would ask for it, sharing no content word with it (after [`STOP`] and
//! the crude stemming of [`content_words`]), and deterministic distractor facts
//! (`distractors.json`): three in ten are hand-written lures that use a question's words in
//! another sense, three in ten put two of one question's words into naming and housekeeping
//! facts, and four in ten are facts on the cases' own topics that answer none of the questions.
//! Included with `#[path = ...] mod paraphrase;` from benches and tests alike.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

/// One hand-written case: a fact (subject, body) and the question it answers.
#[derive(serde::Deserialize)]
pub struct Case {
    pub domain: String,
    pub subject: String,
    pub body: String,
    pub question: String,
}

/// The stop words: articles, pronouns, auxiliaries and modals, prepositions, conjunctions,
/// wh-words and quantifiers. "need" is a content word.
pub const STOP: &str = "a an the and or nor but if then else so than too very just also only \
    of to in on at by for with from into onto upon about as per via off out up down over under \
    again once before after while until whether because though although \
    is are was were be been being am do does did done doing have has had having \
    can could should would will shall may might must get gets got let lets \
    i me my mine myself we our ours us you your yours he him his she her hers it its they them \
    their theirs this that these those there here what which who whom whose when where why how \
    not no any all each every some such own same other another more most much many few both \
    either neither one s t d m ll re ve don doesn didn isn aren wasn weren won";

/// Suffixes the crude stemmer strips, longest first; repeated while the stem keeps 3 letters.
pub const SUFFIXES: &[&str] = &[
    "ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ies", "ied", "ers", "er",
    "ed", "es", "ly", "al", "s", "e",
];

/// A crude stem: "deploy", "deploys", "deployed" and "deployments" are one word, and so are
/// "approve", "approved" and "approval".
pub fn stem(word: &str) -> String {
    let mut w = word.to_string();
    loop {
        let mut next = None;
        for suffix in SUFFIXES {
            if *suffix == "s" && w.ends_with("ss") {
                continue;
            }
            if let Some(rest) = w.strip_suffix(suffix) {
                if rest.len() >= 3 {
                    next = Some(if *suffix == "ies" || *suffix == "ied" {
                        format!("{rest}y")
                    } else {
                        rest.to_string()
                    });
                    break;
                }
            }
        }
        match next {
            Some(shorter) if shorter != w => w = shorter,
            _ => return w,
        }
    }
}

/// The lowercase alphanumeric words of a text that are not stop words, in order, repeats
/// included; one-letter words other than digits are dropped.
fn plain_words(text: &str) -> Vec<String> {
    let stop: BTreeSet<&str> = STOP.split_whitespace().collect();
    text.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !stop.contains(w))
        .filter(|w| w.len() > 1 || w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

/// The content words of a text: lowercased, split on non-alphanumerics, stop words out, crudely
/// stemmed.
pub fn content_words(text: &str) -> BTreeSet<String> {
    plain_words(text).into_iter().map(|w| stem(&w)).collect()
}

/// The hand-written cases.
#[allow(clippy::expect_used)]
pub fn cases() -> Vec<Case> {
    serde_json::from_str(include_str!("cases.json")).expect("benches/paraphrase/cases.json parses")
}

#[derive(serde::Deserialize)]
struct Template {
    s: String,
    b: String,
}

#[derive(serde::Deserialize)]
struct Near {
    domain: String,
    s: String,
    b: String,
}

#[derive(serde::Deserialize)]
struct Distractors {
    fillers: BTreeMap<String, Vec<String>>,
    lures: Vec<Template>,
    generic: Vec<Template>,
    near: Vec<Near>,
}

#[allow(clippy::expect_used)]
fn distractor_templates() -> Distractors {
    serde_json::from_str(include_str!("distractors.json"))
        .expect("benches/paraphrase/distractors.json parses")
}

#[path = "../common/rng.rs"]
mod rng;
pub use rng::Rng;

/// Fills `{key}` slots: `{n}` is a number from 2 to 98, other keys a random filler of that
/// name; a key already in `picked` (also `{a}` and `{b}`) keeps its value within one fact.
fn fill(
    template: &str,
    rng: &mut Rng,
    fillers: &BTreeMap<String, Vec<String>>,
    picked: &mut BTreeMap<String, String>,
) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = &after[..close];
        let value = match picked.get(key) {
            Some(value) => value.clone(),
            None if key == "n" => (2 + rng.below(97)).to_string(),
            None => match fillers.get(key) {
                Some(choices) if !choices.is_empty() => choices[rng.below(choices.len())].clone(),
                _ => format!("{{{key}}}"),
            },
        };
        picked.insert(key.to_string(), value.clone());
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The distinct plain content words (unstemmed, three letters or more) of a question.
fn question_words(question: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in plain_words(question) {
        if w.len() >= 3 && !words.contains(&w) {
            words.push(w);
        }
    }
    words
}

/// `n` deterministic distractor facts (subject, body) for a seed, with distinct bodies. About
/// 60% reuse the questions' own content words (hand-written lures, and two words of one
/// question in naming and housekeeping facts); the rest are facts on the cases' topics. None of
/// them answers any question.
pub fn distractors(n: usize, seed: u64) -> Vec<(String, String)> {
    let templates = distractor_templates();
    let questions: Vec<Vec<String>> = cases()
        .iter()
        .map(|c| question_words(&c.question))
        .filter(|words| !words.is_empty())
        .collect();
    let mut rng = Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15);
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(n);
    let mut attempts = 0usize;
    let max_attempts = n.saturating_mul(100).saturating_add(1_000);
    while out.len() < n && attempts < max_attempts {
        attempts += 1;
        let mut picked = BTreeMap::new();
        let kind = rng.below(10);
        let (s, b) = if kind < 3 && !templates.lures.is_empty() {
            let t = &templates.lures[rng.below(templates.lures.len())];
            (&t.s, &t.b)
        } else if kind < 6 && !templates.generic.is_empty() && !questions.is_empty() {
            let words = &questions[rng.below(questions.len())];
            let ia = rng.below(words.len());
            let ib = if words.len() > 1 {
                (ia + 1 + rng.below(words.len() - 1)) % words.len()
            } else {
                ia
            };
            picked.insert("a".to_string(), words[ia].clone());
            picked.insert("b".to_string(), words[ib].clone());
            let t = &templates.generic[rng.below(templates.generic.len())];
            (&t.s, &t.b)
        } else if !templates.near.is_empty() {
            let t = &templates.near[rng.below(templates.near.len())];
            (&t.s, &t.b)
        } else {
            break;
        };
        let subject = fill(s, &mut rng, &templates.fillers, &mut picked);
        let body = fill(b, &mut rng, &templates.fillers, &mut picked);
        if seen.insert(body.clone()) {
            out.push((subject, body));
        }
    }
    out
}
