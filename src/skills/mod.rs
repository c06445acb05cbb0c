//! Skills: code an agent saved for reuse, with the triggers that say when it applies (a persona,
//! a URL pattern, task keywords), ranked for a task and judged by the outcomes agents report.
//!
//! - Skills are user-wide (reuse across projects is their point) and live in `car.db`.
//! - Scope: a skill whose URL pattern names a host (`*github.com/*/pulls`) is scoped to that
//!   Domain; one without is Global. `skill_list {domain}` returns Global skills plus that
//!   Domain's; `skill_find` with a `url` never offers a skill scoped to another domain.
//! - Versions: re-ingesting a name with different content, or naming a skill in `supersedes`,
//!   deprecates the old row (kept for audit, pointing at its successor) and starts a new version
//!   with fresh outcome counts: new code has not proven anything yet. Re-ingesting identical
//!   content changes nothing.
//! - Outcomes: each report adds one to `success_count` or `fail_count` in place. A skill is
//!   degraded when `fail_count > success_count + 2`. Degraded skills are NOT hidden: `skill_find`
//!   ranks them after every healthy match and flags them (`degraded: true`, with a note), so an
//!   agent never re-derives a skill that exists, and sees that it needs repair (fix the code and
//!   re-ingest it with `supersedes`).
//! - Files: `.car/skills/*.json` (`{name, code, platform, description, trigger{persona,
//!   url_pattern, task_keywords}, domain?}`) import and export a project's skills; see [`files`].

mod files;
mod rank;
pub(crate) mod tools;

use std::sync::Arc;

use crate::store::sql::{args, Row, Sql};
use serde::{Deserialize, Serialize};

pub use files::{export_active, import_dir, SkillFile};
pub use rank::{FindQuery, Match, Ranked};
pub use tools::tools;

use crate::store::{Store, StoreError};

/// How many more failures than successes a skill may have before it counts as degraded.
pub const DEGRADE_THRESHOLD: u64 = 2;
/// The platforms a skill's code runs on; `distilled` marks skills distilled from traces.
pub const PLATFORMS: &[&str] = &["shell", "python", "node", "playwright", "distilled"];
const MAX_NAME_CHARS: usize = 128;
const MAX_KEYWORDS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for SkillError {
    fn from(err: rusqlite::Error) -> Self {
        SkillError::Store(StoreError::Sqlite(err))
    }
}

pub type Result<T, E = SkillError> = std::result::Result<T, E>;

/// Outcome counts of one skill version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub success_count: u64,
    pub fail_count: u64,
    pub last_used_at: Option<String>,
}

impl Stats {
    /// The share of successes; 0.5 with no data.
    pub fn success_ratio(&self) -> f64 {
        let total = self.success_count + self.fail_count;
        if total == 0 {
            0.5
        } else {
            self.success_count as f64 / total as f64
        }
    }

    /// Failing more than it succeeds, by more than [`DEGRADE_THRESHOLD`].
    pub fn degraded(&self) -> bool {
        self.fail_count > self.success_count + DEGRADE_THRESHOLD
    }
}

/// One stored skill version.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub version: i64,
    pub active: bool,
    pub code: String,
    pub platform: String,
    pub description: String,
    pub persona: String,
    pub url_pattern: String,
    pub task_keywords: Vec<String>,
    /// `None`: Global.
    pub domain: Option<String>,
    pub stats: Stats,
    pub superseded_by: Option<String>,
    pub created_at: String,
}

impl Skill {
    /// `global` or `domain:<host>`.
    pub fn scope(&self) -> String {
        match &self.domain {
            Some(domain) => format!("domain:{domain}"),
            None => "global".into(),
        }
    }

    fn from_row(row: &Row) -> Result<Skill, StoreError> {
        let keywords: String = row.get("task_keywords")?;
        Ok(Skill {
            name: row.get("name")?,
            version: row.get("version")?,
            active: row.get::<String>("status")? == "active",
            code: row.get("code")?,
            platform: row.get("platform")?,
            description: row.get("description")?,
            persona: row.get("persona")?,
            url_pattern: row.get("url_pattern")?,
            task_keywords: serde_json::from_str(&keywords).unwrap_or_default(),
            domain: row.get("domain")?,
            stats: Stats {
                success_count: row.get::<i64>("success_count")?.max(0) as u64,
                fail_count: row.get::<i64>("fail_count")?.max(0) as u64,
                last_used_at: row.get("last_used_at")?,
            },
            superseded_by: row.get("superseded_by")?,
            created_at: row.get("created_at")?,
        })
    }

    fn same_content(&self, new: &NewSkill, domain: &Option<String>) -> bool {
        self.code == new.code
            && self.platform == new.platform
            && self.description == new.description
            && self.persona == new.persona
            && self.url_pattern == new.url_pattern
            && self.task_keywords == new.task_keywords
            && &self.domain == domain
    }
}

/// What to ingest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSkill {
    pub name: String,
    pub code: String,
    /// One of [`PLATFORMS`]; empty means `shell`.
    pub platform: String,
    pub description: String,
    pub persona: String,
    pub url_pattern: String,
    pub task_keywords: Vec<String>,
    /// An explicit scope: `Some("global")` or `Some(host)`; `None` derives it from the URL
    /// pattern.
    pub domain: Option<String>,
    /// A skill this one replaces (deprecated by the ingest).
    pub supersedes: Option<String>,
    /// Which face ingested it.
    pub source: Option<String>,
}

impl NewSkill {
    /// Trims and checks every field, so nothing invalid reaches the database.
    fn normalize(mut self) -> Result<NewSkill> {
        self.name = self.name.trim().to_string();
        if self.name.is_empty() {
            return Err(SkillError::Invalid("a skill needs a non-empty name".into()));
        }
        if self.name.chars().count() > MAX_NAME_CHARS {
            return Err(SkillError::Invalid(format!(
                "a skill name has at most {MAX_NAME_CHARS} characters"
            )));
        }
        if self.name.chars().any(char::is_control) {
            return Err(SkillError::Invalid(
                "a skill name cannot contain control characters".into(),
            ));
        }
        if self.code.trim().is_empty() {
            return Err(SkillError::Invalid(format!(
                "skill {:?} has no code: `code` is what an agent reruns",
                self.name
            )));
        }
        self.platform = self.platform.trim().to_lowercase();
        if self.platform.is_empty() {
            self.platform = "shell".into();
        }
        if !PLATFORMS.contains(&self.platform.as_str()) {
            return Err(SkillError::Invalid(format!(
                "unknown platform {:?}; use one of: {}",
                self.platform,
                PLATFORMS.join(", ")
            )));
        }
        self.description = self.description.trim().to_string();
        self.persona = self.persona.trim().to_string();
        self.url_pattern = self.url_pattern.trim().to_string();
        let mut keywords: Vec<String> = Vec::new();
        for keyword in &self.task_keywords {
            let keyword = keyword.trim().to_lowercase();
            if !keyword.is_empty() && !keywords.contains(&keyword) {
                keywords.push(keyword);
            }
        }
        if keywords.len() > MAX_KEYWORDS {
            return Err(SkillError::Invalid(format!(
                "a skill has at most {MAX_KEYWORDS} task keywords"
            )));
        }
        self.task_keywords = keywords;
        self.supersedes = self
            .supersedes
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Ok(self)
    }

    /// The scope this skill gets: explicit, else the host of its URL pattern, else Global.
    fn resolved_domain(&self) -> Option<String> {
        match self.domain.as_deref().map(str::trim) {
            Some("") | Some("global") => None,
            Some(domain) => Some(domain.to_lowercase()),
            None => rank::host_of_pattern(&self.url_pattern),
        }
    }
}

/// Which versions of each skill `list` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// The active version only.
    Active,
    /// Superseded versions too.
    All,
}

/// What an ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Created,
    NewVersion,
    Unchanged,
}

/// The result of one ingest.
#[derive(Debug, Clone)]
pub struct Ingested {
    pub skill: Skill,
    pub change: Change,
    /// Names of skills this ingest deprecated (`supersedes`, and the name's previous version).
    pub deprecated: Vec<String>,
}

/// A reported outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

impl std::str::FromStr for Outcome {
    type Err = SkillError;
    fn from_str(text: &str) -> Result<Outcome> {
        match text.trim().to_lowercase().as_str() {
            "success" | "succeeded" | "ok" => Ok(Outcome::Success),
            "failure" | "fail" | "failed" => Ok(Outcome::Failure),
            other => Err(SkillError::Invalid(format!(
                "unknown outcome {other:?}; use success or failure"
            ))),
        }
    }
}

/// The result of one outcome report.
#[derive(Debug, Clone)]
pub struct Reported {
    pub skill: Skill,
    /// This report made the skill degraded.
    pub newly_degraded: bool,
}

const COLUMNS: &str = "name, version, status, code, platform, description, persona, url_pattern, \
     task_keywords, domain, success_count, fail_count, last_used_at, superseded_by, created_at";

/// The skill store over CAR's database.
pub struct Skills {
    store: Arc<Store>,
}

impl Skills {
    pub fn new(store: Arc<Store>) -> Skills {
        Skills { store }
    }

    /// Saves a skill (see the module docs for versions and `supersedes`). Nothing is written
    /// when anything is invalid.
    pub fn ingest(&self, new: NewSkill) -> Result<Ingested> {
        Ok(self.ingest_all(vec![new])?.remove(0))
    }

    /// Saves several skills in one transaction: all or nothing.
    pub fn ingest_all(&self, skills: Vec<NewSkill>) -> Result<Vec<Ingested>> {
        let skills = skills
            .into_iter()
            .map(NewSkill::normalize)
            .collect::<Result<Vec<_>>>()?;
        self.store
            .transaction(|tx| skills.into_iter().map(|new| ingest_in(tx, new)).collect())
    }

    /// The active version of a skill.
    pub fn get(&self, name: &str) -> Result<Option<Skill>> {
        self.store.read(|sql| active(sql, name.trim()))
    }

    /// Skills scoped Global or `domain` (every active skill when `domain` is `None`), by name;
    /// with [`Versions::All`], older versions too.
    pub fn list(&self, domain: Option<&str>, versions: Versions) -> Result<Vec<Skill>> {
        let domain = domain.map(|d| d.trim().to_lowercase());
        let all = versions == Versions::All;
        self.store.read(|sql| {
            sql.query(
                &format!(
                    "SELECT {COLUMNS} FROM skills
                     WHERE (CAST(?1 AS BOOLEAN) OR status = 'active')
                       AND (CAST(?2 AS TEXT) IS NULL OR domain IS NULL OR domain = ?2)
                     ORDER BY name, version DESC"
                ),
                args![all, domain],
            )?
            .iter()
            .map(|row| Ok(Skill::from_row(row)?))
            .collect()
        })
    }

    /// The best `k` active skills for a task (see [`rank`]).
    pub fn find(&self, query: &FindQuery) -> Result<Vec<Ranked>> {
        let skills = self.list(None, Versions::Active)?;
        Ok(rank::rank(skills, query))
    }

    /// Counts one outcome of the active version of `name`.
    pub fn report(&self, name: &str, outcome: Outcome) -> Result<Reported> {
        let name = name.trim().to_string();
        self.store.transaction(|tx| {
            let column = match outcome {
                Outcome::Success => "success_count",
                Outcome::Failure => "fail_count",
            };
            let before = active(tx, &name)?.ok_or_else(|| missing(tx, &name))?;
            tx.execute(
                &format!(
                    "UPDATE skills SET {column} = {column} + 1, last_used_at = ?2
                     WHERE name = ?1 AND status = 'active'"
                ),
                args![name, crate::store::now()],
            )?;
            let skill = active(tx, &name)?.ok_or_else(|| missing(tx, &name))?;
            Ok(Reported {
                newly_degraded: skill.stats.degraded() && !before.stats.degraded(),
                skill,
            })
        })
    }
}

fn active(sql: &dyn Sql, name: &str) -> Result<Option<Skill>> {
    Ok(sql
        .query_opt(
            &format!("SELECT {COLUMNS} FROM skills WHERE name = ?1 AND status = 'active'"),
            args![name],
        )?
        .map(|row| Skill::from_row(&row))
        .transpose()?)
}

/// The error for a name with no active version: says whether it was superseded.
fn missing(sql: &dyn Sql, name: &str) -> SkillError {
    let successor: Option<Option<String>> = sql
        .query_opt(
            "SELECT superseded_by FROM skills WHERE name = ?1 ORDER BY version DESC LIMIT 1",
            args![name],
        )
        .ok()
        .flatten()
        .and_then(|row| row.get(0).ok());
    match successor {
        Some(Some(by)) => SkillError::NotFound(format!(
            "skill {name:?} is deprecated: it was superseded by {by:?}"
        )),
        Some(None) | None => SkillError::NotFound(format!(
            "no skill named {name:?}; `skill_list` shows the saved skills"
        )),
    }
}

fn deprecate(tx: &dyn Sql, name: &str, by: &str) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE skills SET status = 'deprecated', superseded_by = ?2
         WHERE name = ?1 AND status = 'active'",
        args![name, by],
    )?;
    Ok(())
}

fn ingest_in(tx: &dyn Sql, new: NewSkill) -> Result<Ingested> {
    let domain = new.resolved_domain();
    let existing = active(tx, &new.name)?;
    let replaced = match new.supersedes.as_deref() {
        Some(old) if old != new.name => {
            Some(active(tx, old)?.ok_or_else(|| missing(tx, old))?.name)
        }
        Some(_) | None => None,
    };
    if let Some(current) = &existing {
        if replaced.is_none() && current.same_content(&new, &domain) {
            return Ok(Ingested {
                skill: current.clone(),
                change: Change::Unchanged,
                deprecated: Vec::new(),
            });
        }
    }
    let mut deprecated = Vec::new();
    if existing.is_some() {
        deprecate(tx, &new.name, &new.name)?;
        deprecated.push(new.name.clone());
    }
    if let Some(old) = &replaced {
        deprecate(tx, old, &new.name)?;
        deprecated.push(old.clone());
    }
    let version: i64 = tx
        .value(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM skills WHERE name = ?1",
            args![new.name],
        )?
        .unwrap_or(1);
    tx.execute(
        "INSERT INTO skills (name, version, status, code, platform, description, persona,
                             url_pattern, task_keywords, domain, source, created_at)
         VALUES (?1, ?2, 'active', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        args![
            new.name,
            version,
            new.code,
            new.platform,
            new.description,
            new.persona,
            new.url_pattern,
            serde_json::to_string(&new.task_keywords).unwrap_or_else(|_| "[]".into()),
            domain,
            new.source,
            crate::store::now(),
        ],
    )?;
    let skill = active(tx, &new.name)?
        .ok_or_else(|| SkillError::NotFound(format!("skill {:?} vanished", new.name)))?;
    Ok(Ingested {
        change: if existing.is_some() {
            Change::NewVersion
        } else {
            Change::Created
        },
        skill,
        deprecated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::team::testing::{on_both_stores, TestStore};

    fn new(name: &str, code: &str) -> NewSkill {
        NewSkill {
            name: name.into(),
            code: code.into(),
            ..NewSkill::default()
        }
    }

    on_both_stores!(
        reingesting_identical_content_changes_nothing_and_new_content_makes_a_version,
        |stores: &TestStore| {
            let s = Skills::new(stores.store());
            let first = s.ingest(new("build", "cargo build")).unwrap();
            assert_eq!(first.change, Change::Created);
            assert_eq!(first.skill.version, 1);
            s.report("build", Outcome::Success).unwrap();
            let again = s.ingest(new("build", "cargo build")).unwrap();
            assert_eq!(again.change, Change::Unchanged);
            assert_eq!(again.skill.stats.success_count, 1);
            let changed = s.ingest(new("build", "cargo build --locked")).unwrap();
            assert_eq!(changed.change, Change::NewVersion);
            assert_eq!(changed.skill.version, 2);
            assert_eq!(changed.skill.stats, Stats::default());
            assert_eq!(s.list(None, Versions::All).unwrap().len(), 2);
            assert_eq!(s.list(None, Versions::Active).unwrap().len(), 1);
        }
    );

    on_both_stores!(
        supersedes_deprecates_the_named_skill_and_a_missing_one_writes_nothing,
        |stores: &TestStore| {
            let s = Skills::new(stores.store());
            s.ingest(new("old", "a")).unwrap();
            let mut replacement = new("new", "b");
            replacement.supersedes = Some("old".into());
            let done = s.ingest(replacement.clone()).unwrap();
            assert_eq!(done.deprecated, vec!["old".to_string()]);
            assert!(s.get("old").unwrap().is_none());
            let err = s.report("old", Outcome::Success).unwrap_err().to_string();
            assert!(err.contains("superseded by \"new\""), "{err}");

            let mut dangling = new("third", "c");
            dangling.supersedes = Some("nope".into());
            let err = s.ingest(dangling).unwrap_err().to_string();
            assert!(err.contains("no skill named \"nope\""), "{err}");
            assert!(s.get("third").unwrap().is_none());
        }
    );

    on_both_stores!(
        a_bad_skill_in_a_batch_writes_none_of_it,
        |stores: &TestStore| {
            let s = Skills::new(stores.store());
            let mut bad = new("x", "y");
            bad.platform = "cobol".into();
            let err = s.ingest_all(vec![new("fine", "ok"), bad]).unwrap_err();
            assert!(err.to_string().contains("unknown platform"), "{err}");
            assert!(s.list(None, Versions::All).unwrap().is_empty());
            assert!(s.ingest(new("  ", "code")).is_err());
            assert!(s.ingest(new("empty", " ")).is_err());
        }
    );

    on_both_stores!(
        degraded_after_more_than_two_net_failures,
        |stores: &TestStore| {
            let s = Skills::new(stores.store());
            s.ingest(new("flaky", "x")).unwrap();
            s.report("flaky", Outcome::Success).unwrap();
            for _ in 0..3 {
                let r = s.report("flaky", Outcome::Failure).unwrap();
                assert!(!r.newly_degraded);
            }
            let r = s.report("flaky", Outcome::Failure).unwrap();
            assert!(r.newly_degraded && r.skill.stats.degraded());
            assert!(r.skill.stats.last_used_at.is_some());
            assert!(!s.report("flaky", Outcome::Failure).unwrap().newly_degraded);
        }
    );

    on_both_stores!(
        scope_comes_from_the_url_pattern_and_list_filters_by_domain,
        |stores: &TestStore| {
            let s = Skills::new(stores.store());
            let mut gh = new("gh", "x");
            gh.url_pattern = "https://github.com/*/pulls".into();
            s.ingest(gh).unwrap();
            s.ingest(new("any", "y")).unwrap();
            let mut gl = new("gl", "z");
            gl.url_pattern = "*gitlab.com*".into();
            s.ingest(gl).unwrap();
            let names = |domain| {
                s.list(domain, Versions::Active)
                    .unwrap()
                    .into_iter()
                    .map(|k| k.name)
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(Some("github.com")), ["any", "gh"]);
            assert_eq!(names(None), ["any", "gh", "gl"]);
            assert_eq!(s.get("gh").unwrap().unwrap().scope(), "domain:github.com");
        }
    );
}
