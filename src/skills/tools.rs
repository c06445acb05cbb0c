//! The skill tools: `skill_ingest`, `skill_list`, `skill_find` and `skill_report`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Change, FindQuery, NewSkill, Outcome, Ranked, Skill, SkillError, Skills, Versions};
use crate::runtime::{Effect, Idempotence, Tool, ToolError, ToolSpec};

impl From<SkillError> for ToolError {
    fn from(err: SkillError) -> Self {
        match err {
            SkillError::Invalid(message) | SkillError::NotFound(message) => {
                ToolError::InvalidArguments(message)
            }
            SkillError::File { .. } | SkillError::Store(_) => ToolError::Failed(err.to_string()),
        }
    }
}

/// Whether a skill is the current version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillStatus {
    Active,
    Deprecated,
}

/// A skill's outcome record.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatsView {
    pub success_count: u64,
    pub fail_count: u64,
    /// Successes over reports; 0.5 before any report.
    pub success_ratio: f64,
    /// Failures exceed successes by more than 2 (offered last, flagged, until fixed).
    pub degraded: bool,
    pub last_used_at: Option<String>,
}

/// A skill as every face shows it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillView {
    pub name: String,
    pub version: i64,
    pub status: SkillStatus,
    /// The code to rerun (opaque to CAR).
    pub code: String,
    /// What runs the code.
    pub platform: String,
    pub description: String,
    pub persona: String,
    pub url_pattern: String,
    pub task_keywords: Vec<String>,
    /// `global` or `domain:<host>`.
    pub scope: String,
    pub stats: StatsView,
    pub degraded: bool,
    /// The skill that replaced this one.
    pub superseded_by: Option<String>,
    pub created_at: String,
    /// What to do about a degraded skill (absent when it is healthy).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub note: Option<String>,
}

impl From<&Skill> for SkillView {
    fn from(skill: &Skill) -> SkillView {
        let degraded = skill.stats.degraded();
        SkillView {
            name: skill.name.clone(),
            version: skill.version,
            status: if skill.active {
                SkillStatus::Active
            } else {
                SkillStatus::Deprecated
            },
            code: skill.code.clone(),
            platform: skill.platform.clone(),
            description: skill.description.clone(),
            persona: skill.persona.clone(),
            url_pattern: skill.url_pattern.clone(),
            task_keywords: skill.task_keywords.clone(),
            scope: skill.scope(),
            stats: StatsView {
                success_count: skill.stats.success_count,
                fail_count: skill.stats.fail_count,
                success_ratio: skill.stats.success_ratio(),
                degraded,
                last_used_at: skill.stats.last_used_at.clone(),
            },
            degraded,
            superseded_by: skill.superseded_by.clone(),
            created_at: skill.created_at.clone(),
            note: degraded_note(skill),
        }
    }
}

/// The note a degraded skill carries wherever it is shown.
pub fn degraded_note(skill: &Skill) -> Option<String> {
    skill.stats.degraded().then(|| {
        format!(
            "degraded: {} success(es), {} failure(s) — fix the code and re-ingest it with supersedes={:?}",
            skill.stats.success_count, skill.stats.fail_count, skill.name
        )
    })
}

/// A skill offered for a task, with why.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RankedView {
    #[serde(flatten)]
    pub skill: SkillView,
    /// The ranking score (trigger match, success record, relevance).
    pub score: f64,
    /// How each trigger matched.
    #[serde(rename = "match")]
    pub matched: MatchView,
}

/// How a skill's triggers matched the task.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MatchView {
    pub persona: f64,
    pub url: f64,
    pub keywords: f64,
    pub activation: f64,
    pub success_ratio: f64,
}

impl From<&Ranked> for RankedView {
    fn from(ranked: &Ranked) -> RankedView {
        let m = &ranked.matched;
        RankedView {
            skill: SkillView::from(&ranked.skill),
            score: ranked.score,
            matched: MatchView {
                persona: m.persona,
                url: m.url,
                keywords: m.keywords,
                activation: m.activation,
                success_ratio: m.success_ratio,
            },
        }
    }
}

/// What `skill_ingest` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct IngestedView {
    pub skill: SkillView,
    pub change: Change,
    /// Names of skills this ingest deprecated (`supersedes`, and the name's previous version).
    pub deprecated: Vec<String>,
    /// Written to the database before the call returned.
    pub durable: bool,
}

/// A list of skills.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillList<T> {
    pub skills: Vec<T>,
    pub count: usize,
}

impl<T> SkillList<T> {
    fn of(skills: Vec<T>) -> SkillList<T> {
        SkillList {
            count: skills.len(),
            skills,
        }
    }
}

/// What `skill_report` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReportedView {
    pub skill: SkillView,
    /// This report made the skill degraded.
    pub newly_degraded: bool,
}

/// The arguments of `skill_ingest` (and `car skill add`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct IngestArgs {
    /// The skill's name, unique among active skills.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// The code to rerun (opaque to CAR).
    #[schemars(length(min = 1))]
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        conflicts_with = "code_file"
    )]
    pub code: String,
    /// What runs the code.
    #[serde(default = "shell")]
    #[arg(long, value_enum, default_value_t = Platform::Shell)]
    pub platform: Platform,
    /// Who the skill is for (matched ignoring case).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[arg(long, default_value = "", hide_default_value = true)]
    pub persona: String,
    /// Where it applies; `*` matches anything, e.g. `*github.com/*/pulls`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[arg(long, default_value = "", hide_default_value = true)]
    pub url_pattern: String,
    /// What it does and when to use it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[arg(long, default_value = "", hide_default_value = true)]
    pub description: String,
    /// Words of the tasks it solves.
    #[serde(default)]
    #[schemars(length(max = 64))]
    #[arg(long = "keyword", value_name = "KEYWORD")]
    pub task_keywords: Vec<String>,
    /// Name of a skill this one replaces; it is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub supersedes: Option<String>,
}

/// What runs a skill's code.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Shell,
    Python,
    Node,
    Playwright,
    Distilled,
}

impl Platform {
    fn as_str(self) -> &'static str {
        match self {
            Platform::Shell => "shell",
            Platform::Python => "python",
            Platform::Node => "node",
            Platform::Playwright => "playwright",
            Platform::Distilled => "distilled",
        }
    }
}

fn shell() -> Platform {
    Platform::Shell
}

/// The arguments of `skill_list` (and `car skill list`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// A host such as github.com.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub domain: Option<String>,
    /// Also list superseded versions.
    #[serde(default)]
    #[arg(long = "all")]
    pub include_deprecated: bool,
}

/// How many skills `skill_find` returns unless asked.
pub const FIND_K: u32 = 3;

/// The arguments of `skill_find` (and `car skill find`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    /// What the agent is about to do.
    #[schemars(length(min = 1))]
    pub task: String,
    /// Who is asking (skills for this persona rank first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub persona: Option<String>,
    /// The page or endpoint the task is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub url: Option<String>,
    /// How many skills (1–20).
    #[serde(default = "find_k")]
    #[schemars(range(min = 1, max = 20))]
    #[arg(short, long, default_value_t = FIND_K)]
    pub k: u32,
}

fn find_k() -> u32 {
    FIND_K
}

/// The arguments of `skill_report` (and `car skill report`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ReportArgs {
    /// The skill's name, unique among active skills.
    #[schemars(length(min = 1))]
    pub name: String,
    /// How running it went.
    #[arg(value_enum)]
    pub outcome: OutcomeArg,
}

/// How running a skill went.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeArg {
    Success,
    Failure,
}

/// The arguments of the skill resource.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResourceArgs {
    /// The skill's name, unique among active skills.
    #[schemars(length(min = 1))]
    name: String,
}

/// The skill tools over one store.
pub fn tools(skills: Arc<Skills>) -> Vec<Tool> {
    let mut tools = Vec::new();

    let s = skills.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "skill_ingest",
            "Save reusable code as a skill, with triggers saying when it applies (persona, url_pattern, task_keywords). Re-ingesting a name with new content makes a new version with fresh outcome counts; identical content changes nothing. Destructive: naming an existing skill in `supersedes` deprecates it. A url_pattern naming a host scopes the skill to that domain; otherwise it is global.",
            Value::Null,
        )
        .title("Save a skill")
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |args: IngestArgs, call| -> Result<IngestedView, ToolError> {
            let done = s.ingest(NewSkill {
                name: args.name,
                code: args.code,
                platform: args.platform.as_str().to_string(),
                description: args.description,
                persona: args.persona,
                url_pattern: args.url_pattern,
                task_keywords: args.task_keywords,
                domain: None,
                supersedes: args.supersedes,
                source: Some(call.context.face().as_str().into()),
            })?;
            Ok(IngestedView {
                skill: SkillView::from(&done.skill),
                change: done.change,
                deprecated: done.deprecated,
                durable: true,
            })
        },
    ));

    let s = skills.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "skill_list",
            "List saved skills: with `domain`, the global skills plus that domain's; without, every active skill. Degraded skills are flagged.",
            Value::Null,
        )
        .title("List skills")
        .effect(Effect::Read),
        move |args: ListArgs, _call| -> Result<SkillList<SkillView>, ToolError> {
            let versions = if args.include_deprecated {
                Versions::All
            } else {
                Versions::Active
            };
            let found = s.list(args.domain.as_deref(), versions)?;
            Ok(SkillList::of(found.iter().map(SkillView::from).collect()))
        },
    ));

    let s = skills.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "skill_find",
            "Find the best saved skills for a task before writing code anew. Ranked by trigger match (persona, url, keywords), success record and relevance; skills matching nothing are not offered; degraded skills come last, flagged. Report how a skill went with skill_report.",
            Value::Null,
        )
        .title("Find skills for a task")
        .effect(Effect::Read),
        move |args: FindArgs, _call| -> Result<SkillList<RankedView>, ToolError> {
            let ranked = s.find(&FindQuery {
                task: args.task,
                persona: args.persona,
                url: args.url,
                k: args.k as usize,
            })?;
            Ok(SkillList::of(ranked.iter().map(RankedView::from).collect()))
        },
    ));

    let s = skills.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "skill_report",
            "Report how running a skill went (success or failure). Counts rank skills; a skill failing more than it succeeds by more than 2 becomes degraded: it is then offered last and flagged until a fixed version is ingested with supersedes.",
            Value::Null,
        )
        .title("Report a skill's outcome")
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |args: ReportArgs, _call| -> Result<ReportedView, ToolError> {
            let outcome = match args.outcome {
                OutcomeArg::Success => Outcome::Success,
                OutcomeArg::Failure => Outcome::Failure,
            };
            let done = s.report(&args.name, outcome)?;
            Ok(ReportedView {
                skill: SkillView::from(&done.skill),
                newly_degraded: done.newly_degraded,
            })
        },
    ));

    // The MCP resource car://memory/skill/{name}: unlisted, so it passes the gate and the log
    // like a tool without being one.
    tools.push(Tool::typed(
        ToolSpec::new(
            SKILL_RESOURCE,
            "One active skill as JSON (MCP resource car://memory/skill/{name}).",
            Value::Null,
        )
        .title("A saved skill")
        .effect(Effect::Read)
        .unlisted(),
        move |args: ResourceArgs, _call| -> Result<SkillView, ToolError> {
            let skill = skills
                .get(&args.name)?
                .ok_or_else(|| ToolError::NotFound(format!("no active skill '{}'", args.name)))?;
            Ok(SkillView::from(&skill))
        },
    ));

    tools
}

/// The operation behind the skill resource.
pub const SKILL_RESOURCE: &str = "skill_resource";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_argument_names_exactly_the_platforms_the_store_accepts() {
        let schema = crate::runtime::schema::input_of::<IngestArgs>();
        let listed: Vec<&str> = schema["properties"]["platform"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(listed, super::super::PLATFORMS);
    }
}
