//! The claim check: operational claims in the final answer — tests pass, a build succeeded, a
//! file was written, a command ran, a commit or push happened — that no receipt of the run backs.
//! Detection is lexical: an empty list means no unbacked claim of these kinds was found, not that
//! the answer was verified.

use serde::Serialize;

use super::Receipt;

/// One claim no receipt backs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// `tests_pass`, `build_passes`, `file_written`, `command_ran`, `committed`, `pushed`.
    pub kind: &'static str,
    /// The sentence that makes it.
    pub text: String,
    /// What receipt would have backed it.
    pub needs: &'static str,
}

struct Rule {
    kind: &'static str,
    /// Lower-case phrases that make the claim.
    phrases: &'static [&'static str],
    needs: &'static str,
    backed: fn(&Receipt) -> bool,
}

fn ran(receipt: &Receipt, words: &[&str]) -> bool {
    receipt.tool == "Bash"
        && receipt.ok
        && words
            .iter()
            .any(|w| receipt.subject.to_lowercase().contains(w))
}

const RULES: &[Rule] = &[
    Rule {
        kind: "tests_pass",
        phrases: &[
            "tests pass",
            "tests passed",
            "tests are passing",
            "all tests pass",
            "test suite passes",
            "tests now pass",
            "tests succeed",
        ],
        needs: "a successful Bash call that runs the tests",
        backed: |r| ran(r, &["test", "pytest", "jest", "vitest", "rspec", "nextest"]),
    },
    Rule {
        kind: "build_passes",
        phrases: &[
            "build passes",
            "build succeeds",
            "builds cleanly",
            "compiles cleanly",
            "build succeeded",
            "it compiles",
        ],
        needs: "a successful Bash call that builds",
        backed: |r| {
            ran(
                r,
                &[
                    "build",
                    "make",
                    "cargo check",
                    "tsc",
                    "compile",
                    "gcc",
                    "go vet",
                ],
            )
        },
    },
    Rule {
        kind: "file_written",
        phrases: &[
            "i wrote",
            "i created",
            "i updated",
            "i edited",
            "i modified",
            "file written",
            "have written",
            "i added",
        ],
        needs: "a successful Write or Edit call",
        backed: |r| (r.tool == "Write" || r.tool == "Edit") && r.ok,
    },
    Rule {
        kind: "command_ran",
        phrases: &["i ran ", "i executed", "command ran", "after running"],
        needs: "a Bash call",
        backed: |r| r.tool == "Bash",
    },
    Rule {
        kind: "committed",
        phrases: &["committed", "i commited", "made a commit"],
        needs: "a successful `git commit`",
        backed: |r| ran(r, &["git commit"]),
    },
    Rule {
        kind: "pushed",
        phrases: &["pushed", "i pushed"],
        needs: "a successful `git push`",
        backed: |r| ran(r, &["git push"]),
    },
];

/// The claims of `answer` that none of `receipts` backs.
pub fn ungrounded(answer: &str, receipts: &[Receipt]) -> Vec<Claim> {
    let mut found = Vec::new();
    for sentence in sentences(answer) {
        let lower = sentence.to_lowercase();
        if negated(&lower) {
            continue;
        }
        for rule in RULES {
            if rule.phrases.iter().any(|p| lower.contains(p))
                && !receipts.iter().any(rule.backed)
                && !found.iter().any(|c: &Claim| c.kind == rule.kind)
            {
                found.push(Claim {
                    kind: rule.kind,
                    text: super::truncate(sentence.trim(), 200),
                    needs: rule.needs,
                });
            }
        }
    }
    found
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['.', '!', '?', '\n'])
        .filter(|s| !s.trim().is_empty())
}

/// "I did not run the tests" makes no claim.
fn negated(lower: &str) -> bool {
    [
        "not ",
        "n't ",
        "unable",
        "could not",
        "couldn't",
        "cannot",
        "without running",
        "haven't",
        "didn't",
    ]
    .iter()
    .any(|n| lower.contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(tool: &str, subject: &str, ok: bool) -> Receipt {
        Receipt {
            tool: tool.into(),
            ok,
            exit_code: None,
            duration_ms: 1,
            brief: String::new(),
            digest: String::new(),
            execution_id: String::new(),
            subject: subject.into(),
        }
    }

    #[test]
    fn a_claim_needs_a_receipt_of_its_kind() {
        let answer = "I updated src/lib.rs. All tests pass. I did not push anything.";
        let kinds = |receipts: &[Receipt]| -> Vec<&str> {
            ungrounded(answer, receipts)
                .into_iter()
                .map(|c| c.kind)
                .collect()
        };
        assert_eq!(kinds(&[]), ["file_written", "tests_pass"]);
        let wrote = receipt("Edit", "src/lib.rs", true);
        assert_eq!(kinds(std::slice::from_ref(&wrote)), ["tests_pass"]);
        let failing = receipt("Bash", "cargo test", false);
        assert_eq!(
            kinds(&[wrote.clone(), failing]),
            ["tests_pass"],
            "a failing test run backs nothing"
        );
        let passing = receipt("Bash", "cargo test --all", true);
        assert!(kinds(&[wrote, passing]).is_empty());
    }
}
