//! Scoring the contexts of each query and adding them up per track and overall: must-mention
//! recall over the phrases the timeline made retrievable, stale phrases presented as current
//! (a `must_not_mention` phrase on a line without [`OUTDATED_MARK`]) per query and per phrase,
//! and context size.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::phrase::Phrase;
use super::replay::{QueryContexts, Strategy};
use crate::memory::OUTDATED_MARK;

/// The figures of one strategy over a set of queries.
#[derive(Debug, Clone, Default)]
struct Tally {
    must_mention_found: usize,
    stale_queries: usize,
    stale_phrases: usize,
    context_tokens: Vec<usize>,
}

/// What the ground truth of a set of queries holds (the same for every strategy).
#[derive(Debug, Clone, Default)]
struct Counts {
    timelines: usize,
    queries: usize,
    must_mention_phrases: usize,
    must_mention_retrievable: usize,
    must_not_mention_phrases: usize,
    queries_with_must_not_mention: usize,
    regex_phrases_unchecked: usize,
}

/// Counts and per-strategy figures of a track, or of the whole run.
#[derive(Debug, Clone, Default)]
struct Group {
    counts: Counts,
    tallies: BTreeMap<Strategy, Tally>,
}

impl Group {
    fn add(&mut self, query: &QueryContexts) {
        let known = query.known_text.to_lowercase();
        let must_mention: Vec<Phrase> = query
            .ground_truth
            .must_mention
            .iter()
            .map(|p| Phrase::parse(p))
            .collect();
        let must_not_mention: Vec<Phrase> = query
            .ground_truth
            .must_not_mention
            .iter()
            .map(|p| Phrase::parse(p))
            .collect();
        let unchecked = must_mention
            .iter()
            .chain(&must_not_mention)
            .filter(|p| !p.is_checkable())
            .count();
        let retrievable: Vec<&Phrase> =
            must_mention.iter().filter(|p| p.found_in(&known)).collect();
        let forbidden: Vec<&Phrase> = must_not_mention
            .iter()
            .filter(|p| p.is_checkable())
            .collect();

        let counts = &mut self.counts;
        counts.queries += 1;
        counts.must_mention_phrases += must_mention.iter().filter(|p| p.is_checkable()).count();
        counts.must_mention_retrievable += retrievable.len();
        counts.must_not_mention_phrases += forbidden.len();
        counts.queries_with_must_not_mention += usize::from(!forbidden.is_empty());
        counts.regex_phrases_unchecked += unchecked;

        for (strategy, context) in &query.contexts {
            let lower = context.to_lowercase();
            let current_lines: Vec<String> = context
                .lines()
                .filter(|line| !line.contains(OUTDATED_MARK))
                .map(str::to_lowercase)
                .collect();
            let stale = forbidden
                .iter()
                .filter(|p| current_lines.iter().any(|line| p.found_in(line)))
                .count();
            let tally = self.tallies.entry(*strategy).or_default();
            tally.must_mention_found += retrievable.iter().filter(|p| p.found_in(&lower)).count();
            tally.stale_phrases += stale;
            tally.stale_queries += usize::from(stale > 0);
            tally.context_tokens.push(context.len().div_ceil(4));
        }
    }

    fn to_json(&self) -> Value {
        let c = &self.counts;
        let mut group = json!({"counts": {
            "timelines": c.timelines,
            "queries": c.queries,
            "must_mention_phrases": c.must_mention_phrases,
            "must_mention_retrievable": c.must_mention_retrievable,
            "must_not_mention_phrases": c.must_not_mention_phrases,
            "queries_with_must_not_mention": c.queries_with_must_not_mention,
            "regex_phrases_unchecked": c.regex_phrases_unchecked,
        }});
        for strategy in Strategy::ALL {
            let tally = self.tallies.get(&strategy).cloned().unwrap_or_default();
            let (mean, p95, max) = token_stats(&tally.context_tokens);
            group[strategy.as_str()] = json!({
                "must_mention": {
                    "recall": rate(tally.must_mention_found, c.must_mention_retrievable),
                    "found": tally.must_mention_found,
                    "retrievable": c.must_mention_retrievable,
                },
                "stale_as_current": {
                    "query_rate": rate(tally.stale_queries, c.queries_with_must_not_mention),
                    "queries": tally.stale_queries,
                    "queries_with_must_not_mention": c.queries_with_must_not_mention,
                    "phrase_rate": rate(tally.stale_phrases, c.must_not_mention_phrases),
                    "phrases": tally.stale_phrases,
                    "must_not_mention_phrases": c.must_not_mention_phrases,
                },
                "context_tokens": {"mean": mean, "p95": p95, "max": max},
            });
        }
        group
    }
}

/// `part / whole` to four decimals; None when there is nothing to divide by.
fn rate(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0)
}

/// Mean (one decimal), nearest-rank 95th percentile and maximum.
fn token_stats(tokens: &[usize]) -> (f64, usize, usize) {
    if tokens.is_empty() {
        return (0.0, 0, 0);
    }
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable();
    let mean = sorted.iter().sum::<usize>() as f64 / sorted.len() as f64;
    let rank = (sorted.len() * 95).div_ceil(100).max(1);
    let max = sorted[sorted.len() - 1];
    ((mean * 10.0).round() / 10.0, sorted[rank - 1], max)
}

/// The figures of a run, per track and overall.
#[derive(Debug, Clone, Default)]
pub struct Report {
    overall: Group,
    tracks: BTreeMap<String, Group>,
}

impl Report {
    /// Counts a replayed timeline of `track` and scores its queries.
    pub fn add_timeline(&mut self, track: &str, queries: &[QueryContexts]) {
        let group = self.tracks.entry(track.to_string()).or_default();
        for target in [&mut self.overall, group] {
            target.counts.timelines += 1;
            for query in queries {
                target.add(query);
            }
        }
    }

    /// `{"overall": {counts, memgine, transcript_replay, no_memory}, "tracks": {name: …}}`.
    pub fn to_json(&self) -> Value {
        let tracks: serde_json::Map<String, Value> = self
            .tracks
            .iter()
            .map(|(name, group)| (name.clone(), group.to_json()))
            .collect();
        json!({"overall": self.overall.to_json(), "tracks": tracks})
    }

    /// A table for a person: one row per track and strategy, overall first.
    pub fn to_table(&self) -> String {
        let c = &self.overall.counts;
        let mut out = format!(
            "{} timelines, {} queries; must-mention phrases: {} ({} retrievable); \
             must-not-mention phrases: {} in {} queries; regex phrases not checked: {}\n\n",
            c.timelines,
            c.queries,
            c.must_mention_phrases,
            c.must_mention_retrievable,
            c.must_not_mention_phrases,
            c.queries_with_must_not_mention,
            c.regex_phrases_unchecked,
        );
        let groups: Vec<(&str, &Group)> = std::iter::once(("overall", &self.overall))
            .chain(
                self.tracks
                    .iter()
                    .map(|(name, group)| (name.as_str(), group)),
            )
            .collect();
        let width = groups
            .iter()
            .map(|(name, _)| name.len())
            .max()
            .unwrap_or(0)
            .max(5);
        out.push_str(&format!(
            "{:<width$}  {:<17}  {:>20}  {:>18}  {:>18}  {:>11}  {:>10}\n",
            "TRACK",
            "STRATEGY",
            "MUST-MENTION RECALL",
            "STALE/QUERY",
            "STALE/PHRASE",
            "TOKENS MEAN",
            "TOKENS P95"
        ));
        for (name, group) in groups {
            let counts = &group.counts;
            for strategy in Strategy::ALL {
                let tally = group.tallies.get(&strategy).cloned().unwrap_or_default();
                let (mean, p95, _) = token_stats(&tally.context_tokens);
                out.push_str(&format!(
                    "{:<width$}  {:<17}  {:>20}  {:>18}  {:>18}  {:>11.0}  {:>10}\n",
                    name,
                    strategy.as_str(),
                    percent(tally.must_mention_found, counts.must_mention_retrievable),
                    percent(tally.stale_queries, counts.queries_with_must_not_mention),
                    percent(tally.stale_phrases, counts.must_not_mention_phrases),
                    mean,
                    p95,
                ));
            }
        }
        out
    }
}

/// `83.1% (540/650)`, or `-` with nothing to divide by.
fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "-".to_string();
    }
    format!(
        "{:.1}% ({part}/{whole})",
        part as f64 * 100.0 / whole as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::timeline::GroundTruth;

    fn query(
        must_mention: &[&str],
        must_not_mention: &[&str],
        known: &str,
        memgine: &str,
    ) -> QueryContexts {
        QueryContexts {
            prompt: "q".into(),
            ground_truth: GroundTruth {
                must_mention: must_mention.iter().map(|s| s.to_string()).collect(),
                must_not_mention: must_not_mention.iter().map(|s| s.to_string()).collect(),
            },
            known_text: known.into(),
            contexts: vec![
                (Strategy::Memgine, memgine.into()),
                (Strategy::TranscriptReplay, known.into()),
                (Strategy::NoMemory, String::new()),
            ],
        }
    }

    #[test]
    fn stale_phrases_count_only_on_lines_without_the_outdated_mark() {
        let mut group = Group::default();
        group.add(&query(
            &["$120,000", "never said"],
            &["$200,000", "regex:x+"],
            "budget $200,000\nbudget $120,000\n",
            "- [fact-2] budget: $120,000\n  - [outdated] changed from: $200,000\n",
        ));
        let value = group.to_json();
        assert_eq!(
            value["counts"],
            json!({"timelines": 0, "queries": 1, "must_mention_phrases": 2, "must_mention_retrievable": 1,
                   "must_not_mention_phrases": 1, "queries_with_must_not_mention": 1,
                   "regex_phrases_unchecked": 1})
        );
        assert_eq!(value["memgine"]["must_mention"]["recall"], json!(1.0));
        assert_eq!(
            value["memgine"]["stale_as_current"]["query_rate"],
            json!(0.0)
        );
        assert_eq!(
            value["transcript_replay"]["stale_as_current"]["phrases"],
            json!(1)
        );
        assert_eq!(value["no_memory"]["must_mention"]["recall"], json!(0.0));
        assert_eq!(
            value["no_memory"]["context_tokens"],
            json!({"mean": 0.0, "p95": 0, "max": 0})
        );
    }

    #[test]
    fn token_percentile_is_nearest_rank() {
        let tokens: Vec<usize> = (1..=20).collect();
        assert_eq!(token_stats(&tokens), (10.5, 19, 20));
        assert_eq!(token_stats(&[7]), (7.0, 7, 7));
    }

    #[test]
    fn rates_are_absent_without_a_denominator() {
        assert_eq!(rate(1, 3), Some(0.3333));
        assert_eq!(rate(0, 0), None);
        assert_eq!(percent(0, 0), "-");
    }
}
