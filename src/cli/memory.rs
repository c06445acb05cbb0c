//! `car memory …`: every memory tool as a command, plus context, show, import and export.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Map, Value};

use serde::Serialize;

use super::{call_tool, finish, finish_typed, human_as, prepare, read_input, Env, Failure};
use crate::memory::{
    effective_budget, AssembledContext, ContextMode, ContextRequest, EntryScope, EntryView,
    Intervention, Kind, Memory, Recall,
};
use crate::output::render_human;
use crate::DeletedEntry;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Remember a fact (memory_add_fact). A fact with the same subject replaces the current one.
    #[command(
        after_help = "Examples:\n  car memory add build \"cargo test --workspace before pushing\"\n  car memory add secrets \"never commit .env files\" --kind constraint\n  car memory add editor \"prefers vim keybindings\" --global"
    )]
    Add {
        subject: String,
        body: String,
        #[arg(long, value_enum, default_value_t = FactKind::Pattern)]
        kind: FactKind,
        /// Id or subject of a fact this one replaces.
        #[arg(long)]
        supersedes: Option<String>,
        /// Id or subject this fact was derived from (repeatable).
        #[arg(long = "depends-on")]
        depends_on: Vec<String>,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Recall entries for a query (memory_query), most relevant first.
    #[command(after_help = "Example:\n  car memory query \"how do we release?\" -k 10")]
    Query {
        query: String,
        /// How many entries (1–50).
        #[arg(short, long, default_value_t = 5)]
        k: u32,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Set the agent's status slot (memory_update_status); a new status overwrites the old.
    #[command(
        after_help = "Example:\n  car memory status \"migrating the payout scheduler; tests green, docs pending\""
    )]
    Status {
        body: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Save proactive knowledge (memory_save_knowledge): requirements, policies, verified facts.
    #[command(
        after_help = "Example:\n  car memory knowledge deploys \"prod deploys need a green canary\" --tag deploy --confidence high"
    )]
    Knowledge(EntryArgs),
    /// Save procedural evidence (memory_save_procedural): failed attempts, fixes, gotchas.
    #[command(
        after_help = "Example:\n  car memory procedure \"db locked in tests\" \"rerun with --test-threads=1\""
    )]
    Procedure(EntryArgs),
    /// Delete an entry by id, or clear a status slot (proactive-status:<tenant|global>).
    #[command(
        after_help = "Examples:\n  car memory delete fact-12\n  car memory delete proactive-status:global"
    )]
    Delete {
        id: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Ask for at most one grounded reminder before the next step (memory_intervene).
    #[command(
        after_help = "Example:\n  car memory intervene --query \"deploy to prod\" --high-risk"
    )]
    Intervene {
        #[arg(long)]
        query: Option<String>,
        /// Recent messages or tool output (repeatable).
        #[arg(long)]
        recent: Vec<String>,
        #[arg(long, default_value_t = 0)]
        repeated_failures: u32,
        #[arg(long)]
        tool_error: bool,
        #[arg(long)]
        uncertain: bool,
        #[arg(long)]
        high_risk: bool,
        #[arg(long)]
        context_shift: bool,
        /// Consider a reminder even when no trigger fired.
        #[arg(long)]
        force: bool,
        #[arg(long, default_value_t = 8)]
        max_candidates: u32,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Score proactive memory on labelled cases (memory_evaluate); FILE holds {"cases":[…]} or […], - for stdin.
    #[command(
        after_help = "Example (cases.json):\n  [{\"id\": \"c1\", \"request\": {\"query\": \"db locked\", \"trigger\": {\"tool_error\": true}}, \"relevant_fact_ids\": [\"procedural-4\"]}]\n  car memory evaluate cases.json"
    )]
    Evaluate { file: PathBuf },
    /// Print the layered briefing for a query (the car_context prompt).
    #[command(
        after_help = "Examples:\n  car memory context \"fix the flaky payout test\"\n  car memory context \"release\" --window 200000   # budget for a 200k-token model"
    )]
    Context {
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
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Show one entry by id (the car://memory/fact/{id} resource), current or superseded.
    Show {
        id: String,
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
    Import { file: PathBuf },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FactKind {
    Pattern,
    Constraint,
}

#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// Isolate inside the project: a tenant sees only its own entries.
    #[arg(long)]
    tenant: Option<String>,
    /// Seen from every project (user-wide), not only this one.
    #[arg(long)]
    global: bool,
}

#[derive(Debug, Args)]
pub struct EntryArgs {
    subject: String,
    body: String,
    /// Requested id (a taken id gets -2, -3, … appended).
    #[arg(long)]
    id: Option<String>,
    /// A tag (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    #[arg(long)]
    confidence: Option<String>,
    /// Mark it as a constraint.
    #[arg(long)]
    constraint: bool,
    #[command(flatten)]
    scope: ScopeArgs,
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        map.insert(key.to_string(), value.into());
    }
}

fn scope_args(map: &mut Map<String, Value>, scope: &ScopeArgs) {
    put(map, "tenant_id", scope.tenant.clone());
    if scope.global {
        map.insert("scope".into(), json!("global"));
    }
}

fn entry_args(args: &EntryArgs) -> Value {
    let mut map = Map::new();
    map.insert("subject".into(), json!(args.subject));
    map.insert("body".into(), json!(args.body));
    put(&mut map, "id", args.id.clone());
    if !args.tags.is_empty() {
        map.insert("tags".into(), json!(args.tags));
    }
    put(&mut map, "confidence", args.confidence.clone());
    if args.constraint {
        map.insert("is_constraint".into(), json!(true));
    }
    scope_args(&mut map, &args.scope);
    Value::Object(map)
}

/// The tool a command calls and its arguments, or None for commands that are not tools.
fn as_tool_call(
    command: &MemoryCommand,
) -> Result<Option<(&'static str, &'static str, Value)>, Failure> {
    Ok(Some(match command {
        MemoryCommand::Add {
            subject,
            body,
            kind,
            supersedes,
            depends_on,
            scope,
        } => {
            let mut map = Map::new();
            map.insert("subject".into(), json!(subject));
            map.insert("body".into(), json!(body));
            map.insert(
                "kind".into(),
                json!(match kind {
                    FactKind::Pattern => "pattern",
                    FactKind::Constraint => "constraint",
                }),
            );
            put(&mut map, "supersedes", supersedes.clone());
            if !depends_on.is_empty() {
                map.insert("depends_on".into(), json!(depends_on));
            }
            scope_args(&mut map, scope);
            ("memory.add", "memory_add_fact", Value::Object(map))
        }
        MemoryCommand::Query { query, k, tenant } => {
            let mut map = Map::new();
            map.insert("query".into(), json!(query));
            map.insert("k".into(), json!(k));
            put(&mut map, "tenant_id", tenant.clone());
            ("memory.query", "memory_query", Value::Object(map))
        }
        MemoryCommand::Status { body, tenant } => {
            let mut map = Map::new();
            map.insert("body".into(), json!(body));
            put(&mut map, "tenant_id", tenant.clone());
            ("memory.status", "memory_update_status", Value::Object(map))
        }
        MemoryCommand::Knowledge(args) => (
            "memory.knowledge",
            "memory_save_knowledge",
            entry_args(args),
        ),
        MemoryCommand::Procedure(args) => (
            "memory.procedure",
            "memory_save_procedural",
            entry_args(args),
        ),
        MemoryCommand::Delete { id, tenant } => {
            let mut map = Map::new();
            map.insert("id".into(), json!(id));
            put(&mut map, "tenant_id", tenant.clone());
            ("memory.delete", "memory_delete", Value::Object(map))
        }
        MemoryCommand::Intervene {
            query,
            recent,
            repeated_failures,
            tool_error,
            uncertain,
            high_risk,
            context_shift,
            force,
            max_candidates,
            tenant,
        } => {
            let mut map = Map::new();
            put(&mut map, "query", query.clone());
            if !recent.is_empty() {
                map.insert("recent".into(), json!(recent));
            }
            map.insert("trigger".into(), json!({
                "repeated_failures": repeated_failures, "tool_error": tool_error,
                "explicit_uncertainty": uncertain, "high_risk_action": high_risk, "context_shift": context_shift
            }));
            map.insert("force".into(), json!(force));
            map.insert("max_candidates".into(), json!(max_candidates));
            put(&mut map, "tenant_id", tenant.clone());
            ("memory.intervene", "memory_intervene", Value::Object(map))
        }
        MemoryCommand::Evaluate { file } => {
            let text = read_input(file)?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| Failure::usage(format!("{} is not JSON: {e}", file.display())))?;
            let cases = match value {
                Value::Array(_) => json!({"cases": value}),
                other => other,
            };
            ("memory.evaluate", "memory_evaluate", cases)
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

pub async fn run(env: &Env, command: MemoryCommand) -> ExitCode {
    let name = command_name(&command);
    let (app, call) = match prepare(env, name, || as_tool_call(&command)) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    if let Some((name, tool, args)) = call {
        let result = call_tool(&app, tool, args, None).await;
        return finish(env.json, name, result, |data| match tool {
            "memory_query" => human_as(data, human_query),
            "memory_add_fact" | "memory_save_knowledge" | "memory_save_procedural" => {
                human_as(data, human_entry)
            }
            "memory_delete" => human_as(data, human_delete),
            "memory_intervene" => human_as(data, human_intervene),
            _ => render_human(data),
        });
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
            // Progress of a long import: a bar on a terminal; otherwise JSON Lines on stderr,
            // about every 2% of the notes.
            let step = (notes.len() / 50).max(1000);
            let bar = super::progress::Reporter::new("memory.import", env.json);
            let mut report = |done: usize, total: usize| {
                if bar.is_bar() {
                    bar.update("import", done as u64, Some(total as u64));
                } else if total > step && (done.is_multiple_of(step) || done == total) {
                    super::console::stderr_line(
                        &json!({"type": "progress", "phase": "import", "done": done, "total": total})
                        .to_string(),
                    );
                }
            };
            let written = memory.import_notes(&notes, &mut report);
            bar.finish();
            let written = written?;
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
