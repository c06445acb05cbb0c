//! Fitting a briefing to its budget: sections of items, each section's items most relevant
//! first. Items are taken a round at a time — every section's first item, then every section's
//! second, … — so a tight budget keeps the top of each section and drops the least relevant
//! items first, whatever section they are in; a `lead` section (what changed since the last
//! briefing) is taken whole before the rounds. Sizes are estimated at 4 characters a token
//! (the usual figure for English prose and code identifiers under the Claude and GPT
//! tokenizers; see docs/hooks.md for the measured error).

/// One line of a briefing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The task, decision or memory entry it shows (for the injection log).
    pub id: Option<String>,
    pub line: String,
}

/// A titled group of items, most relevant first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub title: String,
    /// What a left-out item of this section is called in the footer ("ready task").
    pub noun: &'static str,
    /// Taken whole before any other section's items.
    pub lead: bool,
    pub items: Vec<Item>,
    /// How many such items exist (at least `items.len()`): the ones never listed count as
    /// left out too.
    pub total: usize,
}

/// A briefing fitted to its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    pub text: String,
    pub tokens: usize,
    /// The ids of the items kept.
    pub ids: Vec<String>,
    /// How many items were left out, per noun, in section order.
    pub left_out: Vec<(&'static str, usize)>,
}

/// The longest an item's line may be (a long fact is cut, not dropped).
pub const MAX_LINE_CHARS: usize = 320;

/// The estimated tokens of `text`: 4 characters a token, rounded up.
pub fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// `line` cut to [`MAX_LINE_CHARS`] (on a character boundary, with an ellipsis).
pub fn clip(line: &str) -> String {
    let line = line.replace('\n', " ");
    if line.chars().count() <= MAX_LINE_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Fits `header`, `sections` and a footer into `budget` tokens. `footer` turns the left-out
/// counts into the closing lines (empty when nothing was left out); room for it is kept.
pub fn fit(
    header: &str,
    sections: &[Section],
    budget: usize,
    footer: impl Fn(&[(&'static str, usize)]) -> String,
) -> Fitted {
    // The order items are considered in: lead sections whole, then round by round.
    let mut order: Vec<(usize, usize)> = Vec::new();
    for (s, section) in sections.iter().enumerate().filter(|(_, s)| s.lead) {
        order.extend((0..section.items.len()).map(|i| (s, i)));
    }
    let rounds = sections.iter().map(|s| s.items.len()).max().unwrap_or(0);
    for round in 0..rounds {
        for (s, section) in sections.iter().enumerate().filter(|(_, s)| !s.lead) {
            if round < section.items.len() {
                order.push((s, round));
            }
        }
    }
    // The footer's room: its longest form (every item left out).
    let all_out: Vec<(&'static str, usize)> = sections
        .iter()
        .map(|s| (s.noun, s.total.max(s.items.len())))
        .filter(|(_, n)| *n > 0)
        .collect();
    let reserve = tokens(&footer(&all_out)) + 1;
    let mut used = tokens(header) + reserve;
    let mut kept = vec![vec![false; 0]; sections.len()];
    for (s, section) in sections.iter().enumerate() {
        kept[s] = vec![false; section.items.len()];
    }
    let mut opened = vec![false; sections.len()];
    for (s, i) in order {
        let section = &sections[s];
        let mut cost = tokens(&section.items[i].line) + 1;
        if !opened[s] {
            cost += tokens(&section.title) + 5;
        }
        if used + cost <= budget {
            used += cost;
            kept[s][i] = true;
            opened[s] = true;
        }
    }
    let mut text = header.trim_end().to_string();
    text.push('\n');
    let mut ids = Vec::new();
    let mut left: Vec<(&'static str, usize)> = Vec::new();
    for (s, section) in sections.iter().enumerate() {
        let lines: Vec<&Item> = section
            .items
            .iter()
            .zip(&kept[s])
            .filter(|(_, k)| **k)
            .map(|(item, _)| item)
            .collect();
        let dropped = section.total.max(section.items.len()) - lines.len();
        if dropped > 0 {
            match left.iter_mut().find(|(noun, _)| *noun == section.noun) {
                Some((_, n)) => *n += dropped,
                None => left.push((section.noun, dropped)),
            }
        }
        if lines.is_empty() {
            continue;
        }
        text.push_str(&format!("\n## {}\n", section.title));
        for item in lines {
            text.push_str(&item.line);
            text.push('\n');
            ids.extend(item.id.clone());
        }
    }
    let closing = footer(&left);
    if !closing.is_empty() {
        text.push('\n');
        text.push_str(closing.trim_end());
        text.push('\n');
    }
    Fitted {
        tokens: tokens(&text),
        text,
        ids,
        left_out: left,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(title: &str, noun: &'static str, n: usize, len: usize) -> Section {
        Section {
            title: title.into(),
            noun,
            lead: false,
            items: (0..n)
                .map(|i| Item {
                    id: Some(format!("{noun}-{i}")),
                    line: format!("- {noun} {i} {}", "x".repeat(len)),
                })
                .collect(),
            total: n,
        }
    }

    fn footer(left: &[(&'static str, usize)]) -> String {
        if left.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = left.iter().map(|(n, c)| format!("{c} {n}")).collect();
        format!("Left out: {}.", parts.join(", "))
    }

    #[test]
    fn a_tight_budget_keeps_the_top_of_every_section_and_says_what_it_left_out() {
        let sections = vec![
            section("Ready", "task", 20, 60),
            section("Decisions", "decision", 10, 60),
            section("Memory", "entry", 30, 60),
        ];
        let fitted = fit("# brief", &sections, 200, footer);
        assert!(
            fitted.tokens <= 200,
            "{} tokens:\n{}",
            fitted.tokens,
            fitted.text
        );
        for first in ["task-0", "decision-0", "entry-0"] {
            assert!(fitted.ids.contains(&first.to_string()), "{:?}", fitted.ids);
        }
        assert!(!fitted.ids.contains(&"task-19".to_string()));
        let left: usize = fitted.left_out.iter().map(|(_, n)| n).sum();
        assert_eq!(left + fitted.ids.len(), 60);
        assert!(fitted.text.contains("Left out:"), "{}", fitted.text);
        // A roomy budget keeps everything and says nothing of leaving out.
        let all = fit("# brief", &sections, 100_000, footer);
        assert_eq!(all.ids.len(), 60);
        assert!(all.left_out.is_empty());
        assert!(!all.text.contains("Left out"));
    }

    #[test]
    fn a_lead_section_goes_first_and_long_lines_are_clipped() {
        let mut lead = section("Since", "change", 3, 10);
        lead.lead = true;
        let sections = vec![section("Ready", "task", 5, 400), lead];
        let fitted = fit("# b", &sections, 60, footer);
        let mut counted = section("Ready", "task", 2, 5);
        counted.total = 40;
        let all = fit("# b", &[counted], 10_000, footer);
        assert_eq!(all.left_out, [("task", 38)]);
        for i in 0..3 {
            assert!(
                fitted.ids.contains(&format!("change-{i}")),
                "{:?}",
                fitted.ids
            );
        }
        assert_eq!(clip(&"y".repeat(1_000)).chars().count(), MAX_LINE_CHARS);
        assert_eq!(clip("a\nb"), "a b");
        assert_eq!(tokens("abcd"), 1);
        assert_eq!(tokens("abcde"), 2);
    }
}
