//! `car skill …`: save, find, list and judge skills (the skill tools), and share them with a
//! project as `.car/skills/*.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::{
    call_tool, finish, finish_typed, human_as, prepare, read_input, remote, tool_args, Env, Failure,
};
use crate::skills::tools::{
    FindArgs, IngestArgs, IngestedView, ListArgs, RankedView, ReportArgs, ReportedView, SkillList,
    SkillStatus, SkillView,
};
use crate::skills::{self, Change, Skills};

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Save code as a skill (skill_ingest). Same name, new content: a new version.
    #[command(
        after_help = "Examples:\n  car skill add deploy_staging --code 'make deploy ENV=staging' --keyword deploy --keyword staging\n  car skill add pr_review --code-file review.js --platform playwright --url-pattern '*github.com/*/pull/*'\n  car skill add deploy_v2 --code-file deploy.sh --supersedes deploy_staging"
    )]
    Add {
        #[command(flatten)]
        skill: IngestArgs,
        /// Read the code from a file (- for stdin) instead of --code.
        #[arg(long, value_name = "FILE")]
        code_file: Option<PathBuf>,
    },
    /// The best skills for a task (skill_find), best first; degraded ones last, flagged.
    #[command(after_help = "Example:\n  car skill find \"deploy this branch to staging\" -k 5")]
    Find(FindArgs),
    /// List skills (skill_list): global ones plus a domain's, or all.
    List(ListArgs),
    /// Show one skill with its code and record.
    Show {
        /// The skill's name.
        name: String,
    },
    /// Record how running a skill went (skill_report).
    #[command(after_help = "Example:\n  car skill report deploy_staging failure")]
    Report(ReportArgs),
    /// Write every active skill to DIR/<name>.json (default: <project>/.car/skills).
    Export {
        /// Where to write the skills (default: <project>/.car/skills).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Save every DIR/*.json skill (default: <project>/.car/skills) in one transaction; a bad file imports nothing.
    Import {
        /// Where to read them from (default: <project>/.car/skills).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
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

/// The tool a command calls and its arguments, or None for commands that are not tools.
fn as_tool_call(command: &SkillCommand) -> Result<Option<(&'static str, Value)>, Failure> {
    Ok(Some(match command {
        SkillCommand::Add { skill, code_file } => {
            let code = match code_file {
                Some(file) => read_input(file)?,
                None => skill.code.clone(),
            };
            if code.is_empty() {
                return Err(Failure::usage("give the code: --code or --code-file"));
            }
            let skill = IngestArgs {
                code,
                ..skill.clone()
            };
            ("skill_ingest", tool_args(&skill)?)
        }
        SkillCommand::Find(args) => ("skill_find", tool_args(args)?),
        SkillCommand::List(args) => ("skill_list", tool_args(args)?),
        SkillCommand::Report(args) => ("skill_report", tool_args(args)?),
        SkillCommand::Show { .. } | SkillCommand::Export { .. } | SkillCommand::Import { .. } => {
            return Ok(None)
        }
    }))
}

/// One line a skill: name, version, scope, record, and the degraded note.
fn skill_line(skill: &SkillView) -> String {
    let stats = &skill.stats;
    let mut line = format!(
        "{} v{} [{}, {}] {}✓ {}✗",
        skill.name,
        skill.version,
        skill.platform,
        skill.scope,
        stats.success_count,
        stats.fail_count,
    );
    if skill.status == SkillStatus::Deprecated {
        line.push_str(&format!(
            " (deprecated → {})",
            skill.superseded_by.as_deref().unwrap_or("?")
        ));
    }
    if !skill.description.is_empty() {
        line.push_str(&format!(" — {}", skill.description));
    }
    if let Some(note) = &skill.note {
        line.push_str(&format!("\n    ⚠ {note}"));
    }
    line
}

/// One line a skill, or `empty` when there are none.
fn lines(lines: Vec<String>, empty: &str) -> String {
    if lines.is_empty() {
        return format!("{empty}\n");
    }
    lines.into_iter().map(|line| line + "\n").collect()
}

fn human_list(list: &SkillList<SkillView>) -> String {
    lines(
        list.skills.iter().map(skill_line).collect(),
        "no skills saved yet; `car skill add --help` shows how",
    )
}

fn human_found(found: &SkillList<RankedView>) -> String {
    lines(
        found
            .skills
            .iter()
            .map(|ranked| format!("{:.3}  {}", ranked.score, skill_line(&ranked.skill)))
            .collect(),
        "no saved skill matches; save one with `car skill add`",
    )
}

fn human_ingest(ingested: &IngestedView) -> String {
    let skill = &ingested.skill;
    let mut out = match ingested.change {
        Change::Unchanged => format!("Skill {} unchanged (v{}).\n", skill.name, skill.version),
        Change::NewVersion => format!(
            "Saved {} v{}: a new version with a fresh record.\n",
            skill.name, skill.version
        ),
        Change::Created => format!("Saved skill {} ({} scope).\n", skill.name, skill.scope),
    };
    let deprecated: Vec<&str> = ingested
        .deprecated
        .iter()
        .map(String::as_str)
        .filter(|name| *name != skill.name)
        .collect();
    if !deprecated.is_empty() {
        out.push_str(&format!("Deprecated: {}.\n", deprecated.join(", ")));
    }
    out
}

fn human_show(skill: &SkillView) -> String {
    format!("{}\n\n{}\n", skill_line(skill), skill.code)
}

fn skills_dir(env: &Env, dir: &Option<PathBuf>) -> PathBuf {
    dir.clone()
        .unwrap_or_else(|| env.project_root.join(".car").join("skills"))
}

fn show(skills: &Skills, name: &str) -> Result<SkillView, Failure> {
    let skill = skills
        .get(name)
        .map_err(|e| Failure::new("failed", e.to_string()))?
        .ok_or_else(|| {
            Failure::new(
                "not_found",
                format!(
                    "no active skill named {name:?}; `car skill list --all` shows every version"
                ),
            )
        })?;
    Ok(SkillView::from(&skill))
}

/// The commands served by the skill store directly (not tools).
fn local(env: &Env, skills: &Skills, command: &SkillCommand) -> ExitCode {
    let name = command_name(command);
    match command {
        SkillCommand::Show { name: skill } => {
            finish_typed(env.json, name, show(skills, skill), human_show)
        }
        SkillCommand::Export { dir } => {
            let exported = skills::export_active(skills, &skills_dir(env, dir))
                .map_err(|e| Failure::new("failed", e.to_string()));
            finish_typed(env.json, name, exported, |exported| {
                format!(
                    "Exported {} skill(s) to {}.\n",
                    exported.exported,
                    exported.dir.display()
                )
            })
        }
        SkillCommand::Import { dir } => {
            let imported = skills::import_dir(skills, &skills_dir(env, dir))
                .map_err(|e| Failure::new("invalid", e.to_string()));
            finish_typed(env.json, name, imported, |imported| {
                format!(
                    "Imported from {}: {} new, {} updated, {} unchanged.\n",
                    imported.dir.display(),
                    imported.created,
                    imported.updated,
                    imported.unchanged
                )
            })
        }
        SkillCommand::Add { .. }
        | SkillCommand::Find { .. }
        | SkillCommand::List { .. }
        | SkillCommand::Report { .. } => finish(
            env.json,
            name,
            Err(Failure::new("failed", "not a local command")),
            |_| String::new(),
        ),
    }
}

/// How a person reads a skill tool's result.
fn human(tool: &str, data: &Value) -> String {
    match tool {
        "skill_ingest" => human_as(data, human_ingest),
        "skill_find" => human_as(data, human_found),
        "skill_list" => human_as(data, human_list),
        _ => human_as(data, |reported: &ReportedView| {
            format!("{}\n", skill_line(&reported.skill))
        }),
    }
}

pub async fn run(env: &Env, command: SkillCommand) -> ExitCode {
    let name = command_name(&command);
    if let Some(server) = remote::server(env) {
        let (tool, result) = remote::tool_command(
            env,
            server,
            name,
            as_tool_call(&command),
            "skill add, find, list or report",
        )
        .await;
        return finish(env.json, name, result, |data| human(tool, data));
    }
    let (app, call) = match prepare(env, name, || as_tool_call(&command)) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    if let Some((tool, args)) = call {
        let result = call_tool(&app, tool, args, None).await;
        return finish(env.json, name, result, |data| human(tool, data));
    }
    match app.skills() {
        Some(skills) => local(env, skills, &command),
        None => finish(
            env.json,
            name,
            Err(Failure::new("failed", "skills are not available")),
            |_| String::new(),
        ),
    }
}
