//! The eight memory tools, declared once for every face: each one's arguments and result are
//! Rust types below, and their schemas are generated from them.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::proactive::{Evaluation, EvaluationCase, InterveneRequest, Intervention};
use super::write::NewEntry;
use super::{Deleted, Kind, Memory, MemoryError, QueryHit, StatusSlot, Written};
use crate::runtime::{Effect, Idempotence, Tool, ToolCall, ToolError, ToolSpec};

impl From<MemoryError> for ToolError {
    fn from(err: MemoryError) -> Self {
        match err {
            MemoryError::Invalid(message) => ToolError::InvalidArguments(message),
            MemoryError::Store(_) | MemoryError::File { .. } => ToolError::Failed(err.to_string()),
        }
    }
}

/// Where an entry is seen from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryScope {
    /// Seen from this project only.
    #[default]
    Project,
    /// Seen from every project (user-wide preferences).
    Global,
}

impl EntryScope {
    /// The scope of an entry stored without a project (global) or with one.
    pub fn of(global: bool) -> EntryScope {
        if global {
            EntryScope::Global
        } else {
            EntryScope::Project
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EntryScope::Project => "project",
            EntryScope::Global => "global",
        }
    }
}

/// Which kind of fact `memory_add_fact` writes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FactKind {
    /// How things are or are done.
    #[default]
    Pattern,
    /// A rule to respect.
    Constraint,
}

/// `--global` on the command line: the flag's "true"/"false" as a scope.
fn global_flag(text: &str) -> Result<EntryScope, String> {
    match text {
        "true" => Ok(EntryScope::Global),
        "false" => Ok(EntryScope::Project),
        other => Err(format!("--global takes no value (got {other:?})")),
    }
}

/// The arguments of `memory_add_fact` (and `car memory add`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct AddFactArgs {
    /// What the fact is about; also the key for replacement.
    #[schemars(length(min = 1))]
    pub subject: String,
    /// The fact itself.
    #[schemars(length(min = 1))]
    pub body: String,
    /// pattern: how things are or are done; constraint: a rule to respect.
    #[serde(default)]
    #[arg(long, value_enum, default_value_t = FactKind::Pattern)]
    pub kind: FactKind,
    /// Id or subject of a fact this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub supersedes: Option<String>,
    /// Ids or subjects this fact was derived from; if they are replaced, this fact is flagged for recalculation.
    #[serde(default)]
    #[arg(long = "depends-on")]
    pub depends_on: Vec<String>,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
    /// "project" (default): seen from this project only; "global": seen from every project (user-wide preferences).
    #[serde(default)]
    #[arg(
        long = "global",
        action = clap::ArgAction::SetTrue,
        value_parser = global_flag,
        help = "Seen from every project (user-wide), not only this one"
    )]
    pub scope: EntryScope,
}

/// The arguments of `memory_save_knowledge` and `memory_save_procedural` (and `car memory
/// knowledge|procedure`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    /// Optional id; a taken id gets -2, -3, … appended (entries are additive, never overwritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub id: Option<String>,
    /// What it is about.
    #[schemars(length(min = 1))]
    pub subject: String,
    /// The knowledge, or the procedure's evidence.
    #[schemars(length(min = 1))]
    pub body: String,
    /// Tags to find it by.
    #[serde(default)]
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// e.g. high, medium, low, derived
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long)]
    pub confidence: Option<String>,
    /// Also tag it `constraint`.
    #[serde(default)]
    #[arg(long = "constraint")]
    pub is_constraint: bool,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
    /// "project" (default): seen from this project only; "global": seen from every project (user-wide preferences).
    #[serde(default)]
    #[arg(
        long = "global",
        action = clap::ArgAction::SetTrue,
        value_parser = global_flag,
        help = "Seen from every project (user-wide), not only this one"
    )]
    pub scope: EntryScope,
}

/// How many entries `memory_query` returns unless asked.
pub const QUERY_K: u32 = 5;

/// The arguments of `memory_query` (and `car memory query`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// The question or topic, in the user's words.
    #[schemars(length(min = 1))]
    pub query: String,
    /// How many entries to return.
    #[serde(default = "query_k")]
    #[schemars(range(min = 1, max = 50))]
    #[arg(short, long, default_value_t = QUERY_K)]
    pub k: u32,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
}

fn query_k() -> u32 {
    QUERY_K
}

/// The arguments of `memory_update_status` (and `car memory status`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// Progress, risks, next step.
    #[schemars(length(min = 1))]
    pub body: String,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
}

/// The arguments of `memory_delete` (and `car memory delete`).
#[derive(Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// An entry's id, or `proactive-status:<tenant|global>`.
    #[schemars(length(min = 1))]
    pub id: String,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
}

/// The arguments of `memory_evaluate`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateArgs {
    /// Labelled requests: what was asked and which entries a reminder should show.
    #[schemars(length(min = 1, max = 10000))]
    pub cases: Vec<EvaluationCase>,
}

/// What a write did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EntryView {
    pub id: String,
    pub kind: Kind,
    pub subject: String,
    pub scope: EntryScope,
    pub tenant_id: Option<String>,
    /// Entries this one retired from retrieval (kept for audit).
    pub superseded: Vec<String>,
    /// Entries derived from a retired one, now flagged for recalculation.
    pub invalidated: Vec<String>,
    /// Links the engine made to existing entries.
    pub links: usize,
    /// Current entries the tenant sees after the write.
    pub fact_count: usize,
    /// Written to the database before the call returned.
    pub durable: bool,
}

impl From<Written> for EntryView {
    fn from(w: Written) -> EntryView {
        EntryView {
            id: w.id,
            kind: w.kind,
            subject: w.subject,
            scope: EntryScope::of(w.global),
            tenant_id: (!w.tenant.is_empty()).then_some(w.tenant),
            superseded: w.superseded,
            invalidated: w.invalidated,
            links: w.links,
            fact_count: w.total,
            durable: true,
        }
    }
}

/// What `memory_query` recalled.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Recall {
    pub query: String,
    /// Most relevant first.
    pub results: Vec<QueryHit>,
}

fn save_entry(
    memory: &Memory,
    kind: Kind,
    args: SaveArgs,
    call: &ToolCall,
) -> Result<EntryView, ToolError> {
    let mut entry = NewEntry::new(kind, &args.subject, &args.body);
    entry.id = args.id;
    entry.tags = args.tags;
    if args.is_constraint {
        entry.tags.push("constraint".into());
    }
    entry.confidence = args.confidence;
    entry.tenant = args.tenant_id.unwrap_or_default();
    entry.global = args.scope == EntryScope::Global;
    entry.source = Some(call.context.face().as_str().into());
    Ok(memory.write(entry)?.into())
}

fn save_spec(name: &str, title: &str, what: &str) -> ToolSpec {
    ToolSpec::new(name, what, Value::Null)
        .title(title)
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent)
}

/// The eight memory tools over one engine.
pub fn tools(memory: Arc<Memory>) -> Vec<Tool> {
    let mut tools = Vec::new();

    let m = memory.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "memory_add_fact",
            "Remember a fact for later sessions. A fact with the same subject as a current one (same tenant, same project) replaces it: the old one is kept for audit and shown as 'changed from', but no longer retrieved as current. Durable at once: written to the database before this call returns.",
            Value::Null,
        )
        .title("Remember a fact")
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |args: AddFactArgs, call| -> Result<EntryView, ToolError> {
            let kind = match args.kind {
                FactKind::Pattern => Kind::Pattern,
                FactKind::Constraint => Kind::Constraint,
            };
            let mut entry = NewEntry::new(kind, &args.subject, &args.body);
            entry.supersedes = args.supersedes.into_iter().collect();
            entry.depends_on = args.depends_on;
            entry.tenant = args.tenant_id.unwrap_or_default();
            entry.global = args.scope == EntryScope::Global;
            entry.source = Some(call.context.face().as_str().into());
            Ok(m.write(entry)?.into())
        },
    ));

    let (m, quick) = (memory.clone(), memory.clone());
    tools.push(Tool::typed_quick(
        ToolSpec::new(
            "memory_query",
            "Recall what is remembered about something. Finds entries by the query's terms (exact, stem, substring; rare terms weigh more) and spreads activation along the links between entries, so related entries that share no word with the query are found too. Superseded entries are never returned.",
            Value::Null,
        )
        .title("Recall from memory"),
        move |args: &QueryArgs, _call: &ToolCall| -> Option<Result<Recall, ToolError>> {
            let tenant = args.tenant_id.as_deref().unwrap_or_default();
            let results = quick.query_now(&args.query, tenant, args.k as usize)?;
            Some(results.map_err(ToolError::from).map(|results| Recall {
                query: args.query.clone(),
                results,
            }))
        },
        move |args: QueryArgs, _call| -> Result<Recall, ToolError> {
            let tenant = args.tenant_id.unwrap_or_default();
            let results = m.query(&args.query, &tenant, args.k as usize)?;
            Ok(Recall {
                query: args.query,
                results,
            })
        },
    ));

    let m = memory.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "memory_update_status",
            "Set the agent's current status (progress, risks, next step) for this tenant. One slot per tenant: a new status overwrites the previous one. Never part of recall or context.",
            Value::Null,
        )
        .title("Update status")
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |args: StatusArgs, _call| -> Result<StatusSlot, ToolError> {
            Ok(m.update_status(&args.tenant_id.unwrap_or_default(), &args.body)?)
        },
    ));

    let m = memory.clone();
    tools.push(Tool::typed(
        save_spec(
            "memory_save_knowledge",
            "Save knowledge",
            "Save proactive knowledge: requirements, policies, verified facts about the environment. Additive: never overwrites. Proactive reminders (memory_intervene) draw on it.",
        ),
        move |args: SaveArgs, call| save_entry(&m, Kind::Knowledge, args, call),
    ));

    let m = memory.clone();
    tools.push(Tool::typed(
        save_spec(
            "memory_save_procedural",
            "Save a procedure",
            "Save procedural evidence: a failed attempt, the fix that worked, a gotcha. Additive: never overwrites. Favoured by reminders after tool errors and repeated failures.",
        ),
        move |args: SaveArgs, call| save_entry(&m, Kind::Procedural, args, call),
    ));

    let m = memory.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "memory_delete",
            "Delete an entry by id, or clear a status slot (id 'proactive-status:<tenant|global>'). Deleting an id that does not exist succeeds with deleted=false. Entries the deleted one had replaced become current again.",
            Value::Null,
        )
        .title("Forget an entry")
        .effect(Effect::Destructive)
        .idempotence(Idempotence::Idempotent),
        move |args: DeleteArgs, _call| -> Result<Deleted, ToolError> {
            Ok(m.delete(&args.id, &args.tenant_id.unwrap_or_default())?)
        },
    ));

    let m = memory.clone();
    tools.push(Tool::typed(
        ToolSpec::new(
            "memory_intervene",
            "Ask memory whether to remind the agent of something before its next step. Returns at most one grounded reminder (decision 'inject') or 'silent' with the reason. Fires only when a trigger is set (repeated_failures >= 2, tool_error, explicit_uncertainty, high_risk_action, context_shift) or force is true. Counts the injection on the chosen entry.",
            Value::Null,
        )
        .title("Proactive reminder")
        .effect(Effect::Write)
        .idempotence(Idempotence::NotIdempotent),
        move |request: InterveneRequest, _call| -> Result<Intervention, ToolError> {
            Ok(m.intervene(&request)?)
        },
    ));

    let m = memory;
    tools.push(Tool::typed(
        ToolSpec::new(
            "memory_evaluate",
            "Measure proactive memory on labelled cases: selective intervention against always-inject, passive-retrieval and no-memory baselines (precision, recall, interruption rate, candidates exposed). Changes nothing.",
            Value::Null,
        )
        .title("Evaluate proactive memory"),
        move |args: EvaluateArgs, call| -> Result<Evaluation, ToolError> {
            let cancel = call.cancel.clone();
            m.evaluate(&args.cases, &|| cancel.is_cancelled())?
                .ok_or(ToolError::Cancelled)
        },
    ));
    tools
}
