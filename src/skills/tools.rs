//! The skill tools: `skill_ingest`, `skill_list`, `skill_find` and `skill_report`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{FindQuery, Ingested, NewSkill, Outcome, Ranked, Skill, SkillError, Skills};
use crate::runtime::{
    arg_string as string, arg_strings as strings, Effect, Idempotence, Tool, ToolError, ToolSpec,
};

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

/// A skill as every face shows it.
pub fn skill_json(skill: &Skill) -> Value {
    let degraded = skill.stats.degraded();
    json!({
        "name": skill.name,
        "version": skill.version,
        "status": if skill.active { "active" } else { "deprecated" },
        "code": skill.code,
        "platform": skill.platform,
        "description": skill.description,
        "persona": skill.persona,
        "url_pattern": skill.url_pattern,
        "task_keywords": skill.task_keywords,
        "scope": skill.scope(),
        "stats": {
            "success_count": skill.stats.success_count,
            "fail_count": skill.stats.fail_count,
            "success_ratio": skill.stats.success_ratio(),
            "degraded": degraded,
            "last_used_at": skill.stats.last_used_at,
        },
        "degraded": degraded,
        "superseded_by": skill.superseded_by,
        "created_at": skill.created_at,
    })
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

pub fn ranked_json(ranked: &Ranked) -> Value {
    let mut value = skill_json(&ranked.skill);
    value["score"] = json!(ranked.score);
    value["match"] = json!(ranked.matched);
    if let Some(note) = degraded_note(&ranked.skill) {
        value["note"] = json!(note);
    }
    value
}

pub fn ingested_json(done: &Ingested) -> Value {
    json!({
        "skill": skill_json(&done.skill),
        "change": done.change,
        "deprecated": done.deprecated,
        "durable": true,
    })
}

fn skill_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "integer"},
            "status": {"type": "string", "enum": ["active", "deprecated"]},
            "code": {"type": "string"},
            "platform": {"type": "string"},
            "description": {"type": "string"},
            "persona": {"type": "string"},
            "url_pattern": {"type": "string"},
            "task_keywords": {"type": "array", "items": {"type": "string"}},
            "scope": {"type": "string"},
            "stats": {
                "type": "object",
                "properties": {
                    "success_count": {"type": "integer"},
                    "fail_count": {"type": "integer"},
                    "success_ratio": {"type": "number"},
                    "degraded": {"type": "boolean"},
                    "last_used_at": crate::runtime::schema::nullable("string")
                },
                "required": ["success_count", "fail_count", "success_ratio", "degraded"]
            },
            "degraded": {"type": "boolean"},
            "superseded_by": crate::runtime::schema::nullable("string"),
            "score": {"type": "number"},
            "note": {"type": "string"}
        },
        "required": ["name", "version", "status", "code", "platform", "scope", "stats", "degraded"]
    })
}

fn list_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "skills": {"type": "array", "items": skill_schema()},
            "count": {"type": "integer"}
        },
        "required": ["skills", "count"]
    })
}

const NAME: &str = "The skill's name, unique among active skills.";

/// The skill tools over one store.
pub fn tools(skills: Arc<Skills>) -> Vec<Tool> {
    let mut tools = Vec::new();

    let s = skills.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "skill_ingest",
            "Save reusable code as a skill, with triggers saying when it applies (persona, url_pattern, task_keywords). Re-ingesting a name with new content makes a new version with fresh outcome counts; identical content changes nothing. Destructive: naming an existing skill in `supersedes` deprecates it. A url_pattern naming a host scopes the skill to that domain; otherwise it is global.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 128, "description": NAME},
                    "code": {"type": "string", "minLength": 1, "description": "The code to rerun (opaque to CAR)."},
                    "platform": {"type": "string", "enum": super::PLATFORMS, "default": "shell", "description": "What runs the code."},
                    "persona": {"type": "string", "description": "Who the skill is for (matched ignoring case)."},
                    "url_pattern": {"type": "string", "description": "Where it applies; `*` matches anything, e.g. `*github.com/*/pulls`."},
                    "description": {"type": "string", "description": "What it does and when to use it."},
                    "task_keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 64, "description": "Words of the tasks it solves."},
                    "supersedes": {"type": "string", "description": "Name of a skill this one replaces; it is deprecated."}
                },
                "required": ["name", "code"],
                "additionalProperties": false
            }),
        )
        .title("Save a skill")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "skill": skill_schema(),
                "change": {"type": "string", "enum": ["created", "new_version", "unchanged"]},
                "deprecated": {"type": "array", "items": {"type": "string"}},
                "durable": {"type": "boolean"}
            },
            "required": ["skill", "change", "deprecated", "durable"]
        }))
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |call| {
            let args = &call.args;
            let done = s.ingest(NewSkill {
                name: string(args, "name").unwrap_or_default(),
                code: string(args, "code").unwrap_or_default(),
                platform: string(args, "platform").unwrap_or_default(),
                description: string(args, "description").unwrap_or_default(),
                persona: string(args, "persona").unwrap_or_default(),
                url_pattern: string(args, "url_pattern").unwrap_or_default(),
                task_keywords: strings(args, "task_keywords"),
                domain: None,
                supersedes: string(args, "supersedes"),
                source: Some(call.context.face().as_str().into()),
            })?;
            Ok(ingested_json(&done))
        },
    ));

    let s = skills.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "skill_list",
            "List saved skills: with `domain`, the global skills plus that domain's; without, every active skill. Degraded skills are flagged.",
            json!({
                "type": "object",
                "properties": {
                    "domain": {"type": "string", "description": "A host such as github.com."},
                    "include_deprecated": {"type": "boolean", "default": false, "description": "Also list superseded versions."}
                },
                "additionalProperties": false
            }),
        )
        .title("List skills")
        .output_schema(list_schema())
        .effect(Effect::Read),
        move |call| {
            let include = call
                .args
                .get("include_deprecated")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let found = s.list(string(&call.args, "domain").as_deref(), include)?;
            let skills: Vec<Value> = found
                .iter()
                .map(|skill| {
                    let mut value = skill_json(skill);
                    if let Some(note) = degraded_note(skill) {
                        value["note"] = json!(note);
                    }
                    value
                })
                .collect();
            Ok(json!({"count": skills.len(), "skills": skills}))
        },
    ));

    let s = skills.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "skill_find",
            "Find the best saved skills for a task before writing code anew. Ranked by trigger match (persona, url, keywords), success record and relevance; skills matching nothing are not offered; degraded skills come last, flagged. Report how a skill went with skill_report.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "minLength": 1, "description": "What the agent is about to do."},
                    "persona": {"type": "string"},
                    "url": {"type": "string", "description": "The page or endpoint the task is about."},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 3}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        )
        .title("Find skills for a task")
        .output_schema(list_schema())
        .effect(Effect::Read),
        move |call| {
            let args = &call.args;
            let query = FindQuery {
                task: string(args, "task").unwrap_or_default(),
                persona: string(args, "persona"),
                url: string(args, "url"),
                k: args.get("k").and_then(Value::as_u64).unwrap_or(3) as usize,
            };
            let ranked = s.find(&query)?;
            let skills: Vec<Value> = ranked.iter().map(ranked_json).collect();
            Ok(json!({"count": skills.len(), "skills": skills}))
        },
    ));

    let s = skills.clone();
    tools.push(Tool::blocking(
        ToolSpec::new(
            "skill_report",
            "Report how running a skill went (success or failure). Counts rank skills; a skill failing more than it succeeds by more than 2 becomes degraded: it is then offered last and flagged until a fixed version is ingested with supersedes.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "description": NAME},
                    "outcome": {"type": "string", "enum": ["success", "failure"]}
                },
                "required": ["name", "outcome"],
                "additionalProperties": false
            }),
        )
        .title("Report a skill's outcome")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "skill": skill_schema(),
                "newly_degraded": {"type": "boolean"}
            },
            "required": ["skill", "newly_degraded"]
        }))
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |call| {
            let outcome: Outcome = string(&call.args, "outcome").unwrap_or_default().parse()?;
            let done = s.report(&string(&call.args, "name").unwrap_or_default(), outcome)?;
            let mut skill = skill_json(&done.skill);
            if let Some(note) = degraded_note(&done.skill) {
                skill["note"] = json!(note);
            }
            Ok(json!({"skill": skill, "newly_degraded": done.newly_degraded}))
        },
    ));

    // The MCP resource car://memory/skill/{name}: unlisted, so it passes the gate and the log
    // like a tool without being one.
    tools.push(Tool::blocking(
        ToolSpec::new(
            SKILL_RESOURCE,
            "One active skill as JSON (MCP resource car://memory/skill/{name}).",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1, "description": NAME}},
                "required": ["name"],
                "additionalProperties": false
            }),
        )
        .title("A saved skill")
        .effect(Effect::Read)
        .unlisted(),
        move |call| {
            let name = call.args["name"].as_str().unwrap_or_default();
            let skill = skills
                .get(name)?
                .ok_or_else(|| ToolError::NotFound(format!("no active skill '{name}'")))?;
            Ok(skill_json(&skill))
        },
    ));

    tools
}

/// The operation behind the skill resource.
pub const SKILL_RESOURCE: &str = "skill_resource";
