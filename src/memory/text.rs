//! How memory text becomes terms: lowercase alphanumeric tokens without stop words, and their
//! Snowball (English) stems.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does",
    "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not", "of", "on",
    "or", "our", "ours", "out", "over", "she", "should", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "under", "up",
    "us", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your",
];

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The terms of a text in order, repeats included.
pub fn sequence(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|token| {
            !((token.chars().count() < 2 && !token.chars().all(|c| c.is_ascii_digit()))
                || STOP_WORDS.binary_search(&token.as_str()).is_ok())
        })
}

/// The distinct terms of a text, in first-seen order.
pub fn terms(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for token in sequence(text) {
        if !seen.contains(&token) {
            seen.push(token);
        }
    }
    seen
}

/// The stem of a term.
pub fn stem(term: &str) -> String {
    stemmer().stem(term).into_owned()
}

/// The approximate token count of a text (4 bytes a token), used for context budgets.
pub fn token_estimate(text: &str) -> usize {
    text.len().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn terms_drop_stop_words_and_case() {
        assert_eq!(
            terms("The Payout scheduler is Heron; the payout runs at 5"),
            vec!["payout", "scheduler", "heron", "runs", "5"]
        );
        assert_eq!(stem("schedulers"), stem("scheduler"));
    }
}
