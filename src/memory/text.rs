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

/// A stop word's bytes packed into an integer (every stop word fits in 8), sorted: a lookup is
/// a few integer compares rather than string compares.
fn packed_stop_words() -> &'static [u64] {
    static PACKED: OnceLock<Vec<u64>> = OnceLock::new();
    PACKED.get_or_init(|| {
        let mut packed: Vec<u64> = STOP_WORDS.iter().filter_map(|w| pack(w)).collect();
        packed.sort_unstable();
        packed
    })
}

fn pack(word: &str) -> Option<u64> {
    let bytes = word.as_bytes();
    if bytes.len() > 8 {
        return None;
    }
    let mut packed = [0u8; 8];
    packed[..bytes.len()].copy_from_slice(bytes);
    Some(u64::from_be_bytes(packed))
}

/// Whether a lowercase token is a stop word.
pub fn is_stop_word(token: &str) -> bool {
    pack(token).is_some_and(|p| packed_stop_words().binary_search(&p).is_ok())
}

/// Whether a lowercase token is a term: not a stop word, and two characters or more unless it
/// is a number.
fn is_term(token: &str) -> bool {
    let mut chars = token.chars();
    let short = match (chars.next(), chars.next()) {
        (None, _) => true,
        (Some(only), None) => !only.is_ascii_digit(),
        (Some(_), Some(_)) => false,
    };
    !short && !is_stop_word(token)
}

/// The terms of a text in order, repeats included.
pub fn sequence(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|token| is_term(token))
}

/// Calls `each` with the terms of a text in order, as [`sequence`] yields them, lowercased into
/// one buffer (no allocation per term for ASCII text).
pub fn each_term(text: &str, mut each: impl FnMut(&str)) {
    let mut lower = String::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        if token.is_empty() {
            continue;
        }
        lower.clear();
        if token.is_ascii() {
            lower.push_str(token);
            lower.make_ascii_lowercase();
        } else {
            lower.push_str(&token.to_lowercase());
        }
        if is_term(&lower) {
            each(&lower);
        }
    }
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
    fn every_stop_word_is_found_and_nothing_else() {
        for word in STOP_WORDS {
            assert!(is_stop_word(word), "{word}");
        }
        for word in [
            "abouts",
            "th",
            "thee",
            "payout",
            "because1",
            "",
            "whichever",
        ] {
            assert!(!is_stop_word(word), "{word}");
        }
    }

    #[test]
    fn each_term_yields_what_sequence_yields() {
        let text = "The Payout scheduler is Heron; the payout runs at 5, x Ünïcode-Straße a1 _";
        let mut seen = Vec::new();
        each_term(text, |t| seen.push(t.to_string()));
        assert_eq!(seen, sequence(text).collect::<Vec<_>>());
        assert!(seen.contains(&"5".to_string()) && !seen.contains(&"x".to_string()));
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
