//! `car skill …`: save, find, list and judge skills (the skill tools), and share them with a
//! project as `.car/skills/*.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use serde_json::{json, Map, Value};

use super::{call_tool, finish, prepare, read_input, Env, Failure};
use crate::skills::{self, Skills};

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Save code as a skill (skill_ingest). Same name, new content: a new version.
    #[command(
        after_help = "Examples:\n  car skill add deploy_staging --code 'make deploy ENV=staging' --keyword deploy --keyword staging\n  car skill add pr_review --code-file review.js --platform playwright --url-pattern '*github.com/*/pull/*'\n  car skill add deploy_v2 --code-file deploy.sh --supersedes deploy_staging"
    )]
    Add {
        name: String,
        /// The code, inline.
        #[arg(
            long,
            conflicts_with = "code_file",
            required_unless_present = "code_file"
        )]
        code: Option<String>,
        /// Read the code from a file (- for stdin).
        #[arg(long, value_name = "FILE")]
        code_file: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Platform::Shell)]
        platform: Platform,
        #[arg(long, default_value = "")]
        description: String,
        /// Who the skill is for.
        #[arg(long)]
        persona: Option<String>,
        /// Where it applies (`*` matches anything); a host scopes the skill to that domain.
        #[arg(long)]
        url_pattern: Option<String>,
        /// A word of the tasks it solves (repeatable).
        #[arg(long = "keyword")]
        keywords: Vec<String>,
        /// A skill this one replaces; it is deprecated.
        #[arg(long)]
        supersedes: Option<String>,
    },
    /// The best skills for a task (skill_find), best first; degraded ones last, flagged.
    #[command(after_help = "Example:\n  car skill find \"deploy this branch to staging\" -k 5")]
    Find {
        task: String,
        #[arg(long)]
        persona: Option<String>,
        #[arg(long)]
        url: Option<String>,
        /// How many (1–20).
        #[arg(short, long, default_value_t = 3)]
        k: u32,
    },
    /// List skills (skill_list): global ones plus a domain's, or all.
    List {
        /// A host such as github.com.
        #[arg(long)]
        domain: Option<String>,
        /// Also show superseded versions.
        #[arg(long)]
        all: bool,
    },
    /// Show one skill with its code and record.
    Show { name: String },
    /// Record how running a skill went (skill_report).
    #[command(after_help = "Example:\n  car skill report deploy_staging failure")]
    Report { name: String, outcome: OutcomeArg },
    /// Write every active skill to DIR/<name>.json (default: <project>/.car/skills).
    Export {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Save every DIR/*.json skill (default: <project>/.car/skills) in one transaction; a bad file imports nothing.
    Import {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Platform {
    Shell,
    Python,
    Node,
    Playwright,
    Distilled,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutcomeArg {
    Success,
    Failure,
}

fn command_name(command: &SkillCommand) -> &'static str {
    match command {
        SkillCommand::Add { .. } => "skill.add",
        SkillCommand::Find { .. } => "skill.find",
        SkillCommand::List { .. } => "skill.list",
        SkillCommand::Show { .. } => "skill.show",
        SkillCommand::Report { .. } => "skill.report",
        SkillCommand::Export { .. } => "skill.export",
        SkillCommand::Import { .. } => "skill.import",
    }
}

fn put(map: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        map.insert(key.into(), json!(value));
    }
}

/// The tool a command calls and its arguments, or None for commands that are not tools.
fn as_tool_call(command: &SkillCommand) -> Result<Option<(&'static str, Value)>, Failure> {
    Ok(Some(match command {
        SkillCommand::Add {
            name,
            code,
            code_file,
            platform,
            description,
            persona,
            url_pattern,
            keywords,
            supersedes,
        } => {
            let code = match (code, code_file) {
                (Some(code), _) => code.clone(),
                (None, Some(file)) => read_input(file)?,
                (None, None) => return Err(Failure::usage("give the code: --code or --code-file")),
            };
            let mut map = Map::new();
            map.insert("name".into(), json!(name));
            map.insert("code".into(), json!(code));
            map.insert(
                "platform".into(),
                json!(format!("{platform:?}").to_lowercase()),
            );
            if !description.is_empty() {
                map.insert("description".into(), json!(description));
            }
            put(&mut map, "persona", persona);
            put(&mut map, "url_pattern", url_pattern);
            if !keywords.is_empty() {
                map.insert("task_keywords".into(), json!(keywords));
            }
            put(&mut map, "supersedes", supersedes);
            ("skill_ingest", Value::Object(map))
        }
        SkillCommand::Find {
            task,
            persona,
            url,
            k,
        } => {
            let mut map = Map::new();
            map.insert("task".into(), json!(task));
            map.insert("k".into(), json!(k));
            put(&mut map, "persona", persona);
            put(&mut map, "url", url);
            ("skill_find", Value::Object(map))
        }
        SkillCommand::List { domain, all } => {
            let mut map = Map::new();
            put(&mut map, "domain", domain);
            if *all {
                map.insert("include_deprecated".into(), json!(true));
            }
            ("skill_list", Value::Object(map))
        }
        SkillCommand::Report { name, outcome } => (
            "skill_report",
            json!({"name": name, "outcome": match outcome {
                OutcomeArg::Success => "success",
                OutcomeArg::Failure => "failure",
            }}),
        ),
        SkillCommand::Show { .. } | SkillCommand::Export { .. } | SkillCommand::Import { .. } => {
            return Ok(None)
        }
    }))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// One line a skill: name, version, scope, record, and the degraded note.
fn skill_line(skill: &Value) -> String {
    let stats = &skill["stats"];
    let mut line = format!(
        "{} v{} [{}, {}] {}✓ {}✗",
        text(&skill["name"]),
        skill["version"],
        text(&skill["platform"]),
        text(&skill["scope"]),
        stats["success_count"],
        stats["fail_count"],
    );
    if skill["status"] == "deprecated" {
        line.push_str(&format!(
            " (deprecated → {})",
            skill["superseded_by"].as_str().unwrap_or("?")
        ));
    }
    if !text(&skill["description"]).is_empty() {
        line.push_str(&format!(" — {}", text(&skill["description"])));
    }
    if let Some(note) = skill["note"].as_str() {
        line.push_str(&format!("\n    ⚠ {note}"));
    }
    line
}

fn human_skills(data: &Value, empty: &str) -> String {
    let skills = data["skills"].as_array().cloned().unwrap_or_default();
    if skills.is_empty() {
        return format!("{empty}\n");
    }
    let mut out = String::new();
    for skill in &skills {
        if let Some(score) = skill["score"].as_f64() {
            out.push_str(&format!("{score:.3}  "));
        }
        out.push_str(&skill_line(skill));
        out.push('\n');
    }
    out
}

fn human_ingest(data: &Value) -> String {
    let skill = &data["skill"];
    let mut out = match text(&data["change"]) {
        "unchanged" => format!(
            "Skill {} unchanged (v{}).\n",
            text(&skill["name"]),
            skill["version"]
        ),
        "new_version" => format!(
            "Saved {} v{}: a new version with a fresh record.\n",
            text(&skill["name"]),
            skill["version"]
        ),
        _ => format!(
            "Saved skill {} ({} scope).\n",
            text(&skill["name"]),
            text(&skill["scope"])
        ),
    };
    let deprecated: Vec<&str> = data["deprecated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| *name != text(&skill["name"]))
        .collect();
    if !deprecated.is_empty() {
        out.push_str(&format!("Deprecated: {}.\n", deprecated.join(", ")));
    }
    out
}

fn human_show(data: &Value) -> String {
    format!("{}\n\n{}\n", skill_line(data), text(&data["code"]))
}

fn skills_dir(env: &Env, dir: &Option<PathBuf>) -> PathBuf {
    dir.clone()
        .unwrap_or_else(|| env.project_root.join(".car").join("skills"))
}

fn local(env: &Env, skills: &Skills, command: &SkillCommand) -> Result<Value, Failure> {
    let failed = |e: skills::SkillError| Failure::new("failed", e.to_string());
    match command {
        SkillCommand::Show { name } => {
            let skill = skills.get(name).map_err(failed)?.ok_or_else(|| {
                Failure::new(
                    "not_found",
                    format!("no active skill named {name:?}; `car skill list --all` shows every version"),
                )
            })?;
            Ok(skills::tools::skill_json(&skill))
        }
        SkillCommand::Export { dir } => {
            let dir = skills_dir(env, dir);
            let active = skills.list(None, false).map_err(failed)?;
            let written = skills::export_dir(&active, &dir).map_err(failed)?;
            Ok(json!({
                "dir": dir,
                "exported": written.len(),
                "files": written,
                "degraded": active.iter().filter(|s| s.stats.degraded()).map(|s| &s.name).collect::<Vec<_>>(),
            }))
        }
        SkillCommand::Import { dir } => {
            let dir = skills_dir(env, dir);
            let files = skills::read_skill_files(&dir)
                .map_err(|e| Failure::new("invalid", e.to_string()))?;
            let batch = files
                .into_iter()
                .map(|(_, file)| file.into_new("import"))
                .collect();
            let done = skills
                .ingest_all(batch)
                .map_err(|e| Failure::new("invalid", e.to_string()))?;
            let count = |change| done.iter().filter(|d| d.change == change).count();
            Ok(json!({
                "dir": dir,
                "created": count(skills::Change::Created),
                "updated": count(skills::Change::NewVersion),
                "unchanged": count(skills::Change::Unchanged),
                "skills": done.iter().map(|d| json!({"name": d.skill.name, "version": d.skill.version, "change": d.change})).collect::<Vec<_>>(),
            }))
        }
        SkillCommand::Add { .. }
        | SkillCommand::Find { .. }
        | SkillCommand::List { .. }
        | SkillCommand::Report { .. } => Err(Failure::new("failed", "not a local command")),
    }
}

pub async fn run(env: &Env, command: SkillCommand) -> ExitCode {
    let name = command_name(&command);
    let (app, call) = match prepare(env, name, || as_tool_call(&command)) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    if let Some((tool, args)) = call {
        let result = call_tool(&app, tool, args, None).await;
        return finish(env.json, name, result, |data| match tool {
            "skill_ingest" => human_ingest(data),
            "skill_find" => human_skills(
                data,
                "no saved skill matches; save one with `car skill add`",
            ),
            "skill_list" => human_skills(
                data,
                "no skills saved yet; `car skill add --help` shows how",
            ),
            _ => format!("{}\n", skill_line(&data["skill"])),
        });
    }
    let Some(skills) = app.skills().cloned() else {
        return finish(
            env.json,
            name,
            Err(Failure::new("failed", "skills are not available")),
            |_| String::new(),
        );
    };
    let result = local(env, &skills, &command);
    finish(env.json, name, result, |data| match &command {
        SkillCommand::Show { .. } => human_show(data),
        SkillCommand::Export { .. } => format!(
            "Exported {} skill(s) to {}.\n",
            data["exported"],
            text(&data["dir"])
        ),
        _ => format!(
            "Imported from {}: {} new, {} updated, {} unchanged.\n",
            text(&data["dir"]),
            data["created"],
            data["updated"],
            data["unchanged"]
        ),
    })
}
