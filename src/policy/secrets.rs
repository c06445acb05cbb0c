//! Secret *values* in text: the shapes of the credentials CAR knows (cloud and SaaS tokens,
//! private keys, JWTs, passwords in URLs, `password = …` assignments). The policy's rules judge
//! secret *files* by their paths; this judges what a text holds, so that nothing CAR puts in
//! front of a model on its own (the session briefing, prompt reminders) carries one, and so
//! that what CAR logs of a prompt is redacted.
//!
//! The patterns are compiled on first use only: the gate's hook runs before every tool call and
//! never needs them.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// (name, pattern): each pattern matches the secret itself (what [`redact`] replaces).
const PATTERNS: &[(&str, &str)] = &[
    (
        "private key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (
        "Slack webhook",
        r"hooks\.slack\.com/services/[A-Za-z0-9]+/[A-Za-z0-9]+/[A-Za-z0-9]+",
    ),
    ("API key", r"\bsk-(?:ant-|proj-|live-)?[A-Za-z0-9_-]{20,}"),
    ("Stripe key", r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "JWT",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    ),
    (
        "password in a URL",
        r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@$<{]{3,}@",
    ),
    (
        "assigned secret",
        r#"(?i)(?:\b|_)(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key|token)\b["']?\s*(?:=|:)\s*["']?[^\s"'$<{\[(]{8,}"#,
    ),
    (
        "stated secret",
        r#"(?i)(?:\b|_)(?:password|passwd|secret|api[_-]?key|access[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|token)\s+is\s+["']?[^\s"'$<{\[(]{8,}"#,
    ),
];

/// Patterns whose matches are secrets only if [`is_credential`] says so of the value.
const ASSIGNED: usize = PATTERNS.len() - 2;
const STATED: usize = PATTERNS.len() - 1;

struct Compiled {
    set: RegexSet,
    each: Vec<Regex>,
}

/// `None` only if a pattern above failed to compile (a unit test proves they all do); then
/// every text counts as holding a secret: withholding too much is the safe failure.
static COMPILED: LazyLock<Option<Compiled>> = LazyLock::new(|| {
    Some(Compiled {
        set: RegexSet::new(PATTERNS.iter().map(|(_, p)| p)).ok()?,
        each: PATTERNS
            .iter()
            .map(|(_, p)| Regex::new(p).ok())
            .collect::<Option<_>>()?,
    })
});

/// The value an `assigned secret` or `stated secret` match ends with.
fn value_of(matched: &str) -> &str {
    matched
        .rsplit(['=', ':', ' ', '\t', '\n', '"', '\''])
        .find(|part| !part.is_empty())
        .unwrap_or(matched)
}

/// Whether the match of pattern `i` in a text is a secret: the two patterns that find a name
/// and a value (`API_KEY=…`, `the password is …`) also match placeholders, references to where
/// the secret really is, and, for `is`, plain prose ("the password is required").
fn is_credential(i: usize, matched: &str) -> bool {
    if i != ASSIGNED && i != STATED {
        return true;
    }
    let raw = value_of(matched);
    let value = raw.to_ascii_lowercase();
    let placeholder = value.starts_with("os.environ")
        || value.starts_with("process.env")
        || value.starts_with("env(")
        || value.starts_with("getenv")
        || value.contains("example")
        || value.contains("placeholder")
        || value.contains("changeme")
        || value.chars().all(|c| c == '*' || c == 'x' || c == '.');
    if placeholder {
        return false;
    }
    if i == ASSIGNED {
        return true;
    }
    // Prose says "is required", "is stored in the vault"; a stated credential has a digit or a
    // symbol in it, or capitals past its first letter.
    let word = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
    word.len() >= 8
        && (word.chars().any(|c| c.is_ascii_digit())
            || word.chars().any(|c| !c.is_alphanumeric())
            || word.chars().skip(1).any(|c| c.is_uppercase()))
}

/// The kind of the first secret `text` holds, if any (`"GitHub token"`, `"private key"`, …).
pub fn find(text: &str) -> Option<&'static str> {
    let Some(compiled) = COMPILED.as_ref() else {
        return Some("secret (the patterns did not load)");
    };
    compiled.set.matches(text).iter().find_map(|i| {
        let (name, _) = PATTERNS[i];
        let real = compiled.each[i]
            .find_iter(text)
            .any(|m| is_credential(i, m.as_str()));
        real.then_some(name)
    })
}

/// `text` with every secret it holds replaced by `[redacted <kind>]`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let Some(compiled) = COMPILED.as_ref() else {
        return Cow::Owned("[redacted: the secret patterns did not load]".into());
    };
    let matched = compiled.set.matches(text);
    if !matched.matched_any() {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for i in matched.iter() {
        let (name, _) = PATTERNS[i];
        out = compiled.each[i]
            .replace_all(&out, |caps: &regex::Captures<'_>| {
                let m = &caps[0];
                if !is_credential(i, m) {
                    m.to_string()
                } else {
                    format!("[redacted {name}]")
                }
            })
            .into_owned();
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_secrets_it_names_and_not_their_mentions() {
        assert!(COMPILED.is_some(), "a secret pattern does not compile");
        let secrets = [
            ("the deploy key is ghp_0123456789abcdefghijABCDEFGHIJ012345", "GitHub token"),
            ("AKIAIOSFODNN7EXAMPLE is the CI user's key", "AWS access key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "private key"),
            ("staging: postgres://app:s3cr3t-pw@db.internal/app", "password in a URL"),
            ("the staging password is Hunter2Hunter2!", "stated secret"),
            ("API_KEY=9f8e7d6c5b4a39281706", "assigned secret"),
            ("DB_PASSWORD=correct-horse-battery", "assigned secret"),
            ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY", "assigned secret"),
            ("GITHUB_TOKEN: 0123456789abcdef0123", "assigned secret"),
            ("the admin password is Tr0ub4dor&3.", "stated secret"),
            ("use sk-ant-api03-abcdefghijklmnopqrstuvwx for the bot", "API key"),
            ("xoxb-1234567890-abcdefghij is the Slack bot", "Slack token"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "JWT"),
        ];
        for (text, kind) in secrets {
            assert_eq!(find(text), Some(kind), "{text}");
            let redacted = redact(text);
            assert!(redacted.contains("[redacted"), "{redacted}");
        }
        let harmless = [
            "rotate the API key every 90 days through the vault",
            "the password policy needs 12 characters",
            "a password is required before deploying",
            "the API token is rotated monthly by the platform team",
            "the client secret is stored in the vault, never in git",
            "DB_PASSWORD=$DATABASE_PASSWORD from the environment",
            "password_hash = bcrypt(password) before saving",
            "API_KEY=$STAGING_API_KEY comes from the CI secrets",
            "api_key = os.environ[\"API_KEY\"]",
            "token: <your token here>",
            "password: ********",
            "secrets live in ~/.aws/credentials and .env, never in the repo",
            "postgres://db.internal:5432/app has no password in the URL",
            "the task-runner uses sk-style prefixes for keys",
        ];
        for text in harmless {
            assert_eq!(find(text), None, "{text}");
            assert_eq!(redact(text), text);
        }
    }
}
