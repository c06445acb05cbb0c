//! `car memory …`: every memory tool as a command, plus context, show, import and export.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use serde::Serialize;

use super::{
    call_tool, finish, finish_typed, human_as, prepare, read_input, remote, tool_args, Env, Failure,
};
use crate::memory::{
    effective_budget, AddFactArgs, AssembledContext, ContextMode, ContextRequest, DeleteArgs,
    EntryScope, EntryView, EvaluateArgs, InterveneRequest, Intervention, Kind, Memory, QueryArgs,
    Recall, SaveArgs, StatusArgs,
};
use crate::output::render_human;
use crate::DeletedEntry;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Remember a fact (memory_add_fact). A fact with the same subject replaces the current one.
    #[command(
        after_help = "Examples:\n  car memory add build \"cargo test --workspace before pushing\"\n  car memory add secrets \"never commit .env files\" --kind constraint\n  car memory add editor \"prefers vim keybindings\" --global"
    )]
    Add(AddFactArgs),
    /// Recall entries for a query (memory_query), most relevant first.
    #[command(after_help = "Example:\n  car memory query \"how do we release?\" -k 10")]
    Query(QueryArgs),
    /// Set the agent's status slot (memory_update_status); a new status overwrites the old.
    #[command(
        after_help = "Example:\n  car memory status \"migrating the payout scheduler; tests green, docs pending\""
    )]
    Status(StatusArgs),
    /// Save proactive knowledge (memory_save_knowledge): requirements, policies, verified facts.
    #[command(
        after_help = "Example:\n  car memory knowledge deploys \"prod deploys need a green canary\" --tag deploy --confidence high"
    )]
    Knowledge(SaveArgs),
    /// Save procedural evidence (memory_save_procedural): failed attempts, fixes, gotchas.
    #[command(
        after_help = "Example:\n  car memory procedure \"db locked in tests\" \"rerun with --test-threads=1\""
    )]
    Procedure(SaveArgs),
    /// Delete an entry by id, or clear a status slot (proactive-status:<tenant|global>).
    #[command(
        after_help = "Examples:\n  car memory delete fact-12\n  car memory delete proactive-status:global"
    )]
    Delete(DeleteArgs),
    /// Ask for at most one grounded reminder before the next step (memory_intervene).
    #[command(
        after_help = "Example:\n  car memory intervene --query \"deploy to prod\" --high-risk"
    )]
    Intervene(InterveneRequest),
    /// Score proactive memory on labelled cases (memory_evaluate); FILE holds {"cases":[…]} or […], - for stdin.
    #[command(
        after_help = "Example (cases.json):\n  [{\"id\": \"c1\", \"request\": {\"query\": \"db locked\", \"trigger\": {\"tool_error\": true}}, \"relevant_fact_ids\": [\"procedural-4\"]}]\n  car memory evaluate cases.json"
    )]
    Evaluate {
        /// The cases: {"cases": […]} or […], as JSON; - for stdin.
        file: PathBuf,
    },
    /// Print the layered briefing for a query (the car_context prompt).
    #[command(
        after_help = "Examples:\n  car memory context \"fix the flaky payout test\"\n  car memory context \"release\" --window 200000   # budget for a 200k-token model"
    )]
    Context {
        /// What the work is about, in words.
        query: String,
        /// Newest first without ranking (cheaper).
        #[arg(long)]
        fast: bool,
        /// Token budget.
        #[arg(long, default_value_t = 8000, conflicts_with = "window")]
        budget: usize,
        /// Size the budget for a model's context window: (window − 4096) × 0.40, at least 2000.
        #[arg(long)]
        window: Option<usize>,
        /// Only this tenant's entries (and the untenanted ones).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Show one entry by id (the car://memory/fact/{id} resource), current or superseded.
    Show {
        /// The entry's id (fact-12, knowledge-3, …).
        id: String,
        /// The tenant the entry belongs to.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Export current entries as assistant.json notes (default: $CAR_HOME/memory/assistant.json).
    #[command(
        after_help = "Examples:\n  car memory export                 # to $CAR_HOME/memory/assistant.json\n  car memory export -o backup.json\n  car --json memory export -o -     # notes inline in the JSON envelope"
    )]
    Export {
        /// Where to write; - for stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Import assistant.json notes ({"notes":[{subject, body, kind}]}) in one transaction.
    #[command(
        after_help = "Kinds: fact, preference (global), procedure, constraint, knowledge. Notes are global\n(seen from every project). A bad file imports nothing.\nExample:\n  car memory import backup.json"
    )]
    Import {
        /// The assistant.json file; - for stdin.
        file: PathBuf,
    },
}

/// The tool a command calls and its arguments, or None for commands that are not tools.
fn as_tool_call(
    command: &MemoryCommand,
) -> Result<Option<(&'static str, &'static str, Value)>, Failure> {
    Ok(Some(match command {
        MemoryCommand::Add(a) => ("memory.add", "memory_add_fact", tool_args(a)?),
        MemoryCommand::Query(a) => ("memory.query", "memory_query", tool_args(a)?),
        MemoryCommand::Status(a) => ("memory.status", "memory_update_status", tool_args(a)?),
        MemoryCommand::Knowledge(a) => ("memory.knowledge", "memory_save_knowledge", tool_args(a)?),
        MemoryCommand::Procedure(a) => {
            ("memory.procedure", "memory_save_procedural", tool_args(a)?)
        }
        MemoryCommand::Delete(a) => ("memory.delete", "memory_delete", tool_args(a)?),
        MemoryCommand::Intervene(a) => ("memory.intervene", "memory_intervene", tool_args(a)?),
        MemoryCommand::Evaluate { file } => {
            let text = read_input(file)?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| Failure::usage(format!("{} is not JSON: {e}", file.display())))?;
            // {"cases": […]}, or the bare list.
            let cases = match value {
                Value::Array(_) => {
                    serde_json::from_value(value).map(|cases| EvaluateArgs { cases })
                }
                other => serde_json::from_value::<EvaluateArgs>(other),
            }
            .map_err(|e| Failure {
                code: "invalid_arguments",
                message: format!("{}: {e}", file.display()),
                exit: 2,
            })?;
            ("memory.evaluate", "memory_evaluate", tool_args(&cases)?)
        }
        MemoryCommand::Context { .. }
        | MemoryCommand::Show { .. }
        | MemoryCommand::Export { .. }
        | MemoryCommand::Import { .. } => return Ok(None),
    }))
}

fn human_entry(entry: &EntryView) -> String {
    let scope = entry.scope.as_str();
    let mut out = format!(
        "Remembered {} ({} '{}', {scope} scope).\n",
        entry.id,
        entry.kind.as_str(),
        entry.subject,
    );
    if !entry.superseded.is_empty() {
        out.push_str(&format!(
            "Replaced {} (kept for audit, no longer current).\n",
            entry.superseded.join(", ")
        ));
    }
    if !entry.invalidated.is_empty() {
        out.push_str(&format!(
            "Flagged for recalculation: {}.\n",
            entry.invalidated.join(", ")
        ));
    }
    out.push_str(&format!(
        "Linked to {} related entries; {} current entries.\n",
        entry.links, entry.fact_count
    ));
    out
}

fn human_delete(deleted: &DeletedEntry) -> String {
    match (&deleted.kind, deleted.deleted) {
        (Some(kind), true) => format!(
            "Deleted {} ({kind}); {} current entries.\n",
            deleted.id, deleted.fact_count
        ),
        _ => format!("Nothing deleted: no entry '{}' here.\n", deleted.id),
    }
}

fn human_intervene(intervention: &Intervention) -> String {
    match (&intervention.reminder, &intervention.reason) {
        (Some(reminder), _) => format!("{reminder}\n"),
        (None, Some(reason)) => format!("Silent: {reason}.\n"),
        (None, None) => "Silent.\n".to_string(),
    }
}

fn human_query(recall: &Recall) -> String {
    if recall.results.is_empty() {
        return "nothing remembered matches\n".to_string();
    }
    let mut out = String::new();
    for hit in &recall.results {
        out.push_str(&format!(
            "{:.3}  [{}] {}: {}\n       why: {}\n",
            hit.activation, hit.id, hit.subject, hit.body, hit.why
        ));
    }
    out
}

/// How a person reads a memory tool's result.
fn human(tool: &str, data: &Value) -> String {
    match tool {
        "memory_query" => human_as(data, human_query),
        "memory_add_fact" | "memory_save_knowledge" | "memory_save_procedural" => {
            human_as(data, human_entry)
        }
        "memory_delete" => human_as(data, human_delete),
        "memory_intervene" => human_as(data, human_intervene),
        _ => render_human(data),
    }
}

pub async fn run(env: &Env, command: MemoryCommand) -> ExitCode {
    let name = command_name(&command);
    if let Some(server) = remote::server(env) {
        let (tool, result) = remote::tool_command(
            env,
            server,
            name,
            as_tool_call(&command).map(|call| call.map(|(_, tool, args)| (tool, args))),
            "memory add, query, status, knowledge, procedure, delete, intervene or evaluate",
        )
        .await;
        return finish(env.json, name, result, |data| human(tool, data));
    }
    let (app, call) = match prepare(env, name, || as_tool_call(&command)) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    if let Some((name, tool, args)) = call {
        let result = call_tool(&app, tool, args, None).await;
        return finish(env.json, name, result, |data| human(tool, data));
    }
    let Some(memory) = app.memory().cloned() else {
        return finish(
            env.json,
            name,
            Err(Failure::new("failed", "memory is not available")),
            |_| String::new(),
        );
    };
    let result = local(env, &memory, command);
    finish_typed(env.json, name, result, Local::render)
}

/// What a command served by the engine directly did.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Local {
    Context(AssembledContext),
    Show(Box<Shown>),
    Exported(Exported),
    Imported(Imported),
}

impl Local {
    fn render(&self) -> String {
        match self {
            Local::Context(assembled) => assembled.text.clone(),
            Local::Show(shown) => {
                let mut out = format!(
                    "[{}] {} ({}, {} scope)\n{}\n",
                    shown.id,
                    shown.subject,
                    shown.kind.as_str(),
                    shown.scope.as_str(),
                    shown.body
                );
                if let Some(by) = &shown.superseded_by {
                    out.push_str(&format!("superseded by {by} (not current)\n"));
                }
                if let Some(note) = &shown.needs_review {
                    out.push_str(&format!("needs review: {note}\n"));
                }
                out.push_str(&format!(
                    "created {}; injected {} time(s)\n",
                    shown.created_at, shown.injections
                ));
                out
            }
            Local::Exported(exported) => match &exported.path {
                Some(path) => format!("exported {} note(s) to {path}\n", exported.count),
                None => serde_json::to_string_pretty(&exported.notes).unwrap_or_default() + "\n",
            },
            Local::Imported(imported) => format!(
                "imported {} note(s) from {}\n",
                imported.imported, imported.path
            ),
        }
    }
}

/// One entry as `car memory show` shows it.
#[derive(Debug, Serialize)]
struct Shown {
    id: String,
    kind: Kind,
    subject: String,
    body: String,
    tags: Vec<String>,
    confidence: Option<String>,
    scope: EntryScope,
    tenant_id: Option<String>,
    created_at: String,
    superseded_by: Option<String>,
    invalidated_by: Option<String>,
    needs_review: Option<String>,
    injections: i64,
}

/// What `car memory export` wrote, or the notes themselves for `-o -`.
#[derive(Debug, Serialize)]
struct Exported {
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<Vec<crate::memory::Note>>,
    count: usize,
}

/// What `car memory import` stored.
#[derive(Debug, Serialize)]
struct Imported {
    path: String,
    imported: usize,
    ids: Vec<String>,
}

fn command_name(command: &MemoryCommand) -> &'static str {
    match command {
        MemoryCommand::Add { .. } => "memory.add",
        MemoryCommand::Query { .. } => "memory.query",
        MemoryCommand::Status { .. } => "memory.status",
        MemoryCommand::Knowledge(_) => "memory.knowledge",
        MemoryCommand::Procedure(_) => "memory.procedure",
        MemoryCommand::Delete { .. } => "memory.delete",
        MemoryCommand::Intervene { .. } => "memory.intervene",
        MemoryCommand::Evaluate { .. } => "memory.evaluate",
        MemoryCommand::Context { .. } => "memory.context",
        MemoryCommand::Show { .. } => "memory.show",
        MemoryCommand::Export { .. } => "memory.export",
        MemoryCommand::Import { .. } => "memory.import",
    }
}

/// Commands served by the engine directly (not tools).
fn local(env: &Env, memory: &Memory, command: MemoryCommand) -> Result<Local, Failure> {
    match command {
        MemoryCommand::Context {
            query,
            fast,
            budget,
            window,
            tenant,
        } => {
            let mut request = ContextRequest::new(&query);
            request.mode = if fast {
                ContextMode::Fast
            } else {
                ContextMode::Full
            };
            request.budget_tokens = window.map(effective_budget).unwrap_or(budget);
            request.tenant = tenant.unwrap_or_default();
            Ok(Local::Context(memory.context(&request)?))
        }
        MemoryCommand::Show { id, tenant } => match memory
            .get(&id, tenant.as_deref().unwrap_or(""))?
        {
            Some(node) => Ok(Local::Show(Box::new(Shown {
                scope: EntryScope::of(node.project.is_none()),
                tenant_id: (!node.tenant.is_empty()).then_some(node.tenant),
                id: node.id,
                kind: node.kind,
                subject: node.subject,
                body: node.body,
                tags: node.tags,
                confidence: node.confidence,
                created_at: node.created_at,
                superseded_by: node.superseded_by,
                invalidated_by: node.invalidated_by,
                needs_review: node.invalidated_note,
                injections: node.injections,
            }))),
            None => Err(Failure::new(
                "not_found",
                format!("no memory entry '{id}' in this project; find ids with `car memory query`"),
            )),
        },
        MemoryCommand::Export { output } => {
            let notes = memory.export_notes()?;
            match output {
                Some(path) if path.as_os_str() == "-" => Ok(Local::Exported(Exported {
                    path: None,
                    count: notes.len(),
                    notes: Some(notes),
                })),
                other => {
                    let path = other.unwrap_or_else(|| env.home.assistant_json());
                    Memory::write_notes(&path, &notes)?;
                    Ok(Local::Exported(Exported {
                        path: Some(path.display().to_string()),
                        notes: None,
                        count: notes.len(),
                    }))
                }
            }
        }
        MemoryCommand::Import { file } => {
            let notes = Memory::read_notes(&file).map_err(|e| Failure::usage(e.to_string()))?;
            // Progress of a long import, in two phases (writing the notes, then embedding
            // them on every core so the next question finds them by meaning): a bar on a
            // terminal; otherwise JSON Lines on stderr, about every 2% of the notes.
            let step = (notes.len() / 50).max(1000);
            let bar = super::progress::Reporter::new("memory.import", env.json);
            let written = memory.import_notes(&notes, &mut phase_progress(&bar, "import", step));
            bar.finish();
            let written = written?;
            let bar = super::progress::Reporter::new("memory.embed", env.json);
            let embedded = memory.settle(&mut phase_progress(&bar, "embed", step));
            bar.finish();
            embedded?;
            Ok(Local::Imported(Imported {
                path: file.display().to_string(),
                imported: written.len(),
                ids: written.into_iter().map(|w| w.id).collect(),
            }))
        }
        MemoryCommand::Add { .. }
        | MemoryCommand::Query { .. }
        | MemoryCommand::Status { .. }
        | MemoryCommand::Knowledge(_)
        | MemoryCommand::Procedure(_)
        | MemoryCommand::Delete { .. }
        | MemoryCommand::Intervene { .. }
        | MemoryCommand::Evaluate { .. } => Err(Failure::new(
            "failed",
            "internal: a tool command reached the local path",
        )),
    }
}

/// The progress callback of one phase of `car memory import`: it moves `bar` or, off a
/// terminal, prints a JSON line each time another `step` entries are done, and at the end.
fn phase_progress<'a>(
    bar: &'a super::progress::Reporter,
    phase: &'static str,
    step: usize,
) -> impl FnMut(usize, usize) + 'a {
    let mut next = step;
    move |done: usize, total: usize| {
        if bar.is_bar() {
            bar.update(phase, done as u64, Some(total as u64));
        } else if total > step && (done >= next || done == total) {
            next = done + step;
            super::console::stderr_line(
                &json!({"type": "progress", "phase": phase, "done": done, "total": total})
                    .to_string(),
            );
        }
    }
}
