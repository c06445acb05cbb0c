//! Ranking skills for a task:
//!
//! `score = (persona·0.4 + url·0.3 + keywords·0.3)·0.4 + success_ratio·0.4 + min(activation, 1)·0.2`
//!
//! - persona: 1 when the skill's persona equals the query's, ignoring case.
//! - url: 1 when the query URL matches the skill's pattern. `*` matches any run of characters
//!   and the pattern may match anywhere in the URL (so `github.com` and `*github.com/*` both
//!   match `https://github.com/x`); a pattern with inner `*` (`github.com/*/pulls`) works too.
//! - keywords: the fraction of the skill's task keywords present in the task (a keyword is
//!   present when every word of it, stemmed, is a word of the task: "deploying" has "deploy").
//! - activation: how much of the task the skill's name, description and keywords cover (the
//!   share of the task's stemmed words found in them).
//!
//! A skill that matches nothing (all four zero) is not offered, whatever its record: an
//! unrelated skill is noise. A skill scoped to a domain is not offered for a URL on another
//! host. Degraded skills come after every healthy one, flagged. Ties go to more successes, then
//! to the name, so ranking is deterministic.

use serde::Serialize;

use super::Skill;
use crate::memory::text;

/// What a `skill_find` asks.
#[derive(Debug, Clone, Default)]
pub struct FindQuery {
    pub task: String,
    pub persona: Option<String>,
    pub url: Option<String>,
    /// How many to return (1–20).
    pub k: usize,
}

/// How one skill matched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Match {
    pub persona: f64,
    pub url: f64,
    pub keywords: f64,
    pub activation: f64,
    pub success_ratio: f64,
}

impl Match {
    pub fn score(&self) -> f64 {
        (self.persona * 0.4 + self.url * 0.3 + self.keywords * 0.3) * 0.4
            + self.success_ratio * 0.4
            + self.activation.min(1.0) * 0.2
    }

    fn relevant(&self) -> bool {
        self.persona > 0.0 || self.url > 0.0 || self.keywords > 0.0 || self.activation > 0.0
    }
}

/// A skill offered for a task.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub skill: Skill,
    pub score: f64,
    pub matched: Match,
}

/// The host a URL pattern names, if any: `*github.com/*/pulls` → `github.com`.
pub fn host_of_pattern(pattern: &str) -> Option<String> {
    let rest = pattern.split_once("://").map_or(pattern, |(_, rest)| rest);
    let host = rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .trim_start_matches(['*', '.'])
        .trim_end_matches('*');
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = host.split(':').next().unwrap_or("").to_lowercase();
    let plausible = !host.is_empty()
        && !host.contains('*')
        && host
            .chars()
            .all(|c| c.is_alphanumeric() || c == '.' || c == '-')
        && (host.contains('.') || host == "localhost");
    plausible.then_some(host)
}

/// The host of a URL.
fn host_of_url(url: &str) -> Option<String> {
    host_of_pattern(url)
}

/// Whether `url` matches `pattern` (`*` is any run of characters; unanchored; ignoring case).
pub fn url_matches(pattern: &str, url: &str) -> bool {
    let url = url.to_lowercase();
    let pattern = pattern.to_lowercase();
    let mut at = 0;
    let mut any = false;
    for piece in pattern.split('*').filter(|p| !p.is_empty()) {
        match url[at..].find(piece) {
            Some(found) => at += found + piece.len(),
            None => return false,
        }
        any = true;
    }
    any
}

fn stems(text_in: &str) -> Vec<String> {
    text::terms(text_in).iter().map(|t| text::stem(t)).collect()
}

fn matched(skill: &Skill, query: &FindQuery, task: &[String]) -> Match {
    let persona = match &query.persona {
        Some(p) if !skill.persona.is_empty() && p.trim().eq_ignore_ascii_case(&skill.persona) => {
            1.0
        }
        _ => 0.0,
    };
    let url = match &query.url {
        Some(u) if !skill.url_pattern.is_empty() && url_matches(&skill.url_pattern, u) => 1.0,
        _ => 0.0,
    };
    let keywords = if skill.task_keywords.is_empty() {
        0.0
    } else {
        let present = skill
            .task_keywords
            .iter()
            .filter(|k| {
                let words = stems(k);
                !words.is_empty() && words.iter().all(|w| task.contains(w))
            })
            .count();
        present as f64 / skill.task_keywords.len() as f64
    };
    let activation = if task.is_empty() {
        0.0
    } else {
        let own = stems(&format!(
            "{} {} {}",
            skill.name.replace(['_', '-'], " "),
            skill.description,
            skill.task_keywords.join(" ")
        ));
        task.iter().filter(|w| own.contains(w)).count() as f64 / task.len() as f64
    };
    Match {
        persona,
        url,
        keywords,
        activation,
        success_ratio: skill.stats.success_ratio(),
    }
}

/// Ranks active skills for a query (see the module docs).
pub fn rank(skills: Vec<Skill>, query: &FindQuery) -> Vec<Ranked> {
    let task = stems(&query.task);
    let url_host = query.url.as_deref().and_then(host_of_url);
    let mut ranked: Vec<Ranked> = skills
        .into_iter()
        .filter(|skill| match (&skill.domain, &url_host) {
            (Some(domain), Some(host)) => host == domain || host.ends_with(&format!(".{domain}")),
            _ => true,
        })
        .filter_map(|skill| {
            let matched = matched(&skill, query, &task);
            matched.relevant().then(|| Ranked {
                score: (matched.score() * 10_000.0).round() / 10_000.0,
                matched,
                skill,
            })
        })
        .collect();
    ranked.sort_by(|a, b| {
        a.skill
            .stats
            .degraded()
            .cmp(&b.skill.stats.degraded())
            .then(b.score.total_cmp(&a.score))
            .then(
                b.skill
                    .stats
                    .success_count
                    .cmp(&a.skill.stats.success_count),
            )
            .then(a.skill.name.cmp(&b.skill.name))
    });
    ranked.truncate(query.k.clamp(1, 20));
    ranked
}

#[cfg(test)]
mod tests {
    use super::super::Stats;
    use super::*;

    fn skill(name: &str, keywords: &[&str]) -> Skill {
        Skill {
            name: name.into(),
            version: 1,
            active: true,
            code: "x".into(),
            platform: "shell".into(),
            description: String::new(),
            persona: String::new(),
            url_pattern: String::new(),
            task_keywords: keywords.iter().map(|k| k.to_string()).collect(),
            domain: None,
            stats: Stats::default(),
            superseded_by: None,
            created_at: String::new(),
        }
    }

    fn query(task: &str) -> FindQuery {
        FindQuery {
            task: task.into(),
            k: 3,
            ..FindQuery::default()
        }
    }

    #[test]
    fn the_formula_of_the_reference() {
        let m = Match {
            persona: 1.0,
            url: 0.0,
            keywords: 0.5,
            activation: 2.0,
            success_ratio: 0.5,
        };
        assert!((m.score() - ((0.4 + 0.15) * 0.4 + 0.2 + 0.2)).abs() < 1e-12);
    }

    #[test]
    fn url_patterns_match_anywhere_with_wildcards() {
        assert!(url_matches("*github.com/*", "https://github.com/a/b"));
        assert!(url_matches(
            "github.com/*/pulls",
            "https://github.com/car/pulls?q=1"
        ));
        assert!(!url_matches(
            "github.com/*/pulls",
            "https://github.com/car/issues"
        ));
        assert!(!url_matches("*", "https://x.org"));
        assert_eq!(
            host_of_pattern("https://*.github.com/*").unwrap(),
            "github.com"
        );
        assert_eq!(host_of_pattern("*github.com*").unwrap(), "github.com");
        assert_eq!(host_of_pattern("/api/*"), None);
        assert_eq!(host_of_pattern(""), None);
    }

    #[test]
    fn keywords_match_by_stem_and_unrelated_skills_are_not_offered() {
        let skills = vec![
            skill("deploy_staging", &["deploy", "staging"]),
            skill("lint", &["clippy"]),
        ];
        let ranked = rank(skills, &query("Deploying the branch to staging"));
        assert_eq!(ranked.len(), 1);
        assert_eq!(ranked[0].skill.name, "deploy_staging");
        assert_eq!(ranked[0].matched.keywords, 1.0);
    }

    #[test]
    fn degraded_skills_rank_after_healthy_ones_and_success_breaks_ties() {
        let mut broken = skill("a_broken", &["release"]);
        broken.stats.fail_count = 5;
        let mut proven = skill("c_proven", &["release"]);
        proven.stats.success_count = 4;
        let fresh = skill("b_fresh", &["release"]);
        let ranked = rank(vec![broken, fresh, proven], &query("cut a release"));
        let names: Vec<&str> = ranked.iter().map(|r| r.skill.name.as_str()).collect();
        assert_eq!(names, ["c_proven", "b_fresh", "a_broken"]);
    }

    #[test]
    fn domain_skills_are_not_offered_for_another_host() {
        let mut gh = skill("gh_review", &["review"]);
        gh.domain = Some("github.com".into());
        gh.url_pattern = "github.com".into();
        let global = skill("review_notes", &["review"]);
        let mut q = query("review the change");
        q.url = Some("https://gitlab.com/x".into());
        let names: Vec<String> = rank(vec![gh.clone(), global.clone()], &q)
            .into_iter()
            .map(|r| r.skill.name)
            .collect();
        assert_eq!(names, ["review_notes"]);
        q.url = Some("https://api.github.com/x".into());
        let first = &rank(vec![gh, global], &q)[0];
        assert_eq!(first.skill.name, "gh_review");
        assert_eq!(first.matched.url, 1.0);
    }
}
