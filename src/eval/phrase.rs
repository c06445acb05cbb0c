//! Ground-truth phrase matching, as StateBench's `contains_phrase` does it: lowercase
//! substring; `a|b` means any of the alternatives; a plain phrase also matches its
//! don't/do not, can't/cannot and shouldn't/should not variant. A `regex:` phrase needs a
//! regex engine, which this crate does not depend on: it is reported as not checkable.

/// Negations StateBench rewrites, each followed by a word (its `r"do not (\w+)"` patterns).
const NEGATION_VARIANTS: [(&str, &str); 6] = [
    ("do not", "don't"),
    ("don't", "do not"),
    ("cannot", "can't"),
    ("can't", "cannot"),
    ("should not", "shouldn't"),
    ("shouldn't", "should not"),
];

/// A ground-truth phrase, ready to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phrase {
    /// Lowercase needles; the phrase is present when any of them is a substring.
    Text(Vec<String>),
    /// A `regex:` pattern (lowercased, without the prefix), which is not checked.
    Regex(String),
}

impl Phrase {
    pub fn parse(raw: &str) -> Phrase {
        let lower = raw.trim().to_lowercase();
        if let Some(pattern) = lower.strip_prefix("regex:") {
            return Phrase::Regex(pattern.to_string());
        }
        if lower.contains('|') {
            return Phrase::Text(lower.split('|').map(|alt| alt.trim().to_string()).collect());
        }
        let mut needles = vec![lower.clone()];
        for (from, to) in NEGATION_VARIANTS {
            let variant = replace_before_word(&lower, from, to);
            if variant != lower && !needles.contains(&variant) {
                needles.push(variant);
            }
        }
        Phrase::Text(needles)
    }

    pub fn is_checkable(&self) -> bool {
        match self {
            Phrase::Text(_) => true,
            Phrase::Regex(_) => false,
        }
    }

    /// Whether the phrase occurs in `lowercase_text` (already lowercased). A regex phrase
    /// never does.
    pub fn found_in(&self, lowercase_text: &str) -> bool {
        match self {
            Phrase::Text(needles) => needles.iter().any(|n| lowercase_text.contains(n.as_str())),
            Phrase::Regex(_) => false,
        }
    }
}

/// Replaces each `from` that is followed by a space and a word character with `to`, like
/// `re.sub(from + r" (\w+)", to + r" \1", text)`.
fn replace_before_word(text: &str, from: &str, to: &str) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        let word_len = after
            .strip_prefix(' ')
            .map(|tail| tail.find(|c: char| !is_word(c)).unwrap_or(tail.len()))
            .unwrap_or(0);
        if word_len == 0 {
            // Not followed by a word: keep the first character and look further on.
            let step = rest[at..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&rest[..at + step]);
            rest = &rest[at + step..];
            continue;
        }
        out.push_str(&rest[..at]);
        out.push_str(to);
        let consumed = at + from.len() + 1 + word_len;
        out.push_str(&rest[at + from.len()..consumed]);
        rest = &rest[consumed..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(phrase: &str, text: &str) -> bool {
        Phrase::parse(phrase).found_in(&text.to_lowercase())
    }

    #[test]
    fn plain_phrases_are_case_insensitive_substrings() {
        assert!(found("$120,000", "Budget: $120,000 total"));
        assert!(found("  Over Budget ", "we are OVER BUDGET by $30K"));
        assert!(!found("$200,000", "$20,000 and $200 000"));
    }

    #[test]
    fn alternatives_match_any_trimmed_part() {
        assert!(found(
            "do not renew | renegotiate",
            "We should renegotiate."
        ));
        assert!(found(
            "do not renew|renegotiate",
            "Do not renew the contract"
        ));
        assert!(!found("do not renew|renegotiate", "renew it"));
    }

    #[test]
    fn negations_match_their_contracted_and_spelled_out_forms() {
        assert!(found("do not renew", "Don't renew VendorX"));
        assert!(found("don't renew", "you do not renew VendorX"));
        assert!(found("cannot approve", "we can't approve this"));
        assert!(found("shouldn't ship", "we should not ship"));
        assert!(!found("do not renew", "don't cancel"));
    }

    #[test]
    fn a_negation_needs_a_following_word_to_be_rewritten() {
        assert_eq!(replace_before_word("do not", "do not", "don't"), "do not");
        assert_eq!(replace_before_word("do not!", "do not", "don't"), "do not!");
        assert_eq!(
            replace_before_word("do not do not go", "do not", "don't"),
            "don't do not go"
        );
        assert_eq!(
            replace_before_word("é do not é", "do not", "don't"),
            "é don't é"
        );
    }

    #[test]
    fn alternatives_get_no_negation_variants() {
        assert_eq!(
            Phrase::parse("Do not renew|stop"),
            Phrase::Text(vec!["do not renew".into(), "stop".into()])
        );
        assert_eq!(
            Phrase::parse("do not renew"),
            Phrase::Text(vec!["do not renew".into(), "don't renew".into()])
        );
    }

    #[test]
    fn regex_phrases_are_not_checkable() {
        let phrase = Phrase::parse("regex:\\$1[0-9]{2},000");
        assert_eq!(phrase, Phrase::Regex("\\$1[0-9]{2},000".into()));
        assert!(!phrase.is_checkable());
        assert!(!phrase.found_in("$120,000"));
    }
}
