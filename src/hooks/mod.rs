//! Memory that comes to the agent: what the agent hosts' session-start and prompt hooks inject
//! (`car hook session-start`, `car hook prompt`).
//!
//! - **Session start**: the project's briefing — what changed since this session's last
//!   briefing (after a resume or a compaction), work in progress, ready work with ids, blockers,
//!   recent decisions, constraints, and the memory most relevant to that work — fitted to a
//!   budget (`hooks.briefing_tokens`, default 1,500), least relevant items dropped first, with a
//!   closing line that says what was left out.
//! - **Prompt**: the selective reminder decision of `memory_intervene` over the prompt: only
//!   entries the prompt is about (grounded), each short with its id and why, none already shown
//!   in this session — usually nothing at all.
//!
//! Neither ever injects a secret: an item whose text holds one (see `policy::secrets`) is
//! withheld and the injection says so. Every call is recorded: an execution-log row (tool
//! `hook.session_start` / `hook.prompt`, face `hook`) and an `injections` row with exactly what
//! was injected, for which host and session. Where no CAR database exists yet the hooks do
//! nothing and create nothing.

pub mod briefing;
pub mod hosts;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::memory::{Kind, Memory, MemoryError, Reminder};
use crate::policy::secrets;
use crate::project::config;
use crate::project::lifecycle::{decision_line, progress_line, task_line, Changes};
use crate::project::tasks::Task;
use crate::project::{Project, ProjectError};
use crate::runtime::executions::{finish_in, ExecStatus, Finished};
use crate::store::{now, Store, StoreError};
use briefing::{clip, Item, Section};
use hosts::{Event, Payload};

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Project(#[from] ProjectError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// How many memory entries the briefing considers (the budget decides how many show).
const BRIEF_MEMORY: usize = 10;
/// How many constraints it considers.
const BRIEF_CONSTRAINTS: usize = 6;
/// How many prompt characters the injection log keeps.
const LOGGED_PROMPT_CHARS: usize = 4_000;

/// The project a hook serves, opened.
pub struct Opened {
    pub store: Arc<Store>,
    pub project: Project,
    pub memory: Memory,
}

impl Opened {
    /// Opens the database at `db` for the project rooted at `root`; `None` when there is no
    /// database yet or CAR was never used in this project (nothing to say, and nothing is
    /// created or recorded: a session in some other directory leaves no trace).
    pub fn open(db: &Path, root: &Path) -> Result<Option<Opened>, HookError> {
        if !db.exists() {
            return Ok(None);
        }
        let store = Arc::new(Store::open(db)?);
        let Some(project) = Project::registered(store.clone(), root)? else {
            return Ok(None);
        };
        let memory = Memory::open(store.clone(), Some(root), None)?;
        Ok(Some(Opened {
            store,
            project,
            memory,
        }))
    }
}

/// What a hook injected (or that it injected nothing), as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Injection {
    pub host: &'static str,
    pub event: &'static str,
    pub session_id: String,
    /// Exactly what was put in front of the model; empty when nothing was.
    pub text: String,
    pub tokens: usize,
    /// The budget it was fitted to (session start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<usize>,
    /// The tasks, decisions and memory entries shown.
    pub entries: Vec<String>,
    /// Memory entries left out because they look like they hold a secret.
    pub withheld: Vec<String>,
    /// Items left out for the budget.
    pub left_out: usize,
    /// Why nothing was injected, when nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silent: Option<String>,
    /// The execution-log row that records the call (None when the setting turned it off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
}

impl Injection {
    fn off(payload: &Payload, setting: &str) -> Injection {
        Injection {
            host: payload.host.as_str(),
            event: payload.event.as_str(),
            session_id: payload.session_id.clone(),
            text: String::new(),
            tokens: 0,
            budget: None,
            entries: Vec::new(),
            withheld: Vec::new(),
            left_out: 0,
            silent: Some(format!("{setting} is off for this project")),
            execution_id: None,
        }
    }
}

/// What a hook may show: every item's full text is screened for secrets before it is cut to
/// its line; what holds one is withheld, and the injection says so.
#[derive(Default)]
struct Screen {
    withheld: Vec<(String, &'static str)>,
}

impl Screen {
    /// `text` as an item of the briefing, or `None` when it is withheld.
    fn item(&mut self, id: &str, text: &str) -> Option<Item> {
        match secrets::find(text) {
            Some(kind) => {
                self.withheld.push((id.to_string(), kind));
                None
            }
            None => Some(Item {
                id: Some(id.to_string()),
                line: clip(text),
            }),
        }
    }

    /// A section of the `(id, text)` candidates that pass, of `total` such items in all (the
    /// withheld ones are said once, in the withheld note, not also counted as left out).
    fn section(
        &mut self,
        title: impl Into<String>,
        noun: &'static str,
        total: usize,
        candidates: impl IntoIterator<Item = (String, String)>,
    ) -> Section {
        let before = self.withheld.len();
        let items: Vec<Item> = candidates
            .into_iter()
            .filter_map(|(id, text)| self.item(&id, &text))
            .collect();
        let held = self.withheld.len() - before;
        Section {
            title: title.into(),
            noun,
            lead: false,
            total: total.saturating_sub(held).max(items.len()),
            items,
        }
    }

    /// The closing line that says what was withheld ("" when nothing was).
    fn note(&self) -> String {
        if self.withheld.is_empty() {
            return String::new();
        }
        let mut parts: Vec<String> = self
            .withheld
            .iter()
            .take(MAX_WITHHELD_LISTED)
            .map(|(id, kind)| format!("{id} (looks like a {kind})"))
            .collect();
        if self.withheld.len() > MAX_WITHHELD_LISTED {
            parts.push(format!(
                "and {} more",
                self.withheld.len() - MAX_WITHHELD_LISTED
            ));
        }
        format!(
            "Withheld because it may hold a secret: {}. It stays in CAR, where a person can read it (`car memory show ID`, `car task show ID`).\n",
            parts.join(", ")
        )
    }

    fn ids(&self) -> Vec<String> {
        self.withheld.iter().map(|(id, _)| id.clone()).collect()
    }
}

/// How many withheld ids the note names before it only counts the rest.
const MAX_WITHHELD_LISTED: usize = 5;

/// The session-start briefing for `payload`'s session.
pub fn session_start(opened: &Opened, payload: &Payload) -> Result<Injection, HookError> {
    let started = Instant::now();
    let started_at = now();
    let project = &opened.project;
    if !config::is_on(project, "hooks.session_start")? {
        return Ok(Injection::off(payload, "hooks.session_start"));
    }
    // Never more than the host takes inline (a little under, for the JSON around it).
    let host_limit = payload.host.max_context_chars() * 95 / 100 / 4;
    let budget = (config::number(project, "hooks.briefing_tokens")? as usize).min(host_limit);
    let status = project.status()?;
    let state = project.state()?;
    let mut screen = Screen::default();
    let mut sections = Vec::new();
    let t = &status.tasks;
    let count = |key: &str| t.get(key).copied().unwrap_or(0).max(0) as usize;

    // What changed since this session's last briefing (or, for a session CAR never briefed,
    // the project's last one).
    if payload.source.continues() {
        if let Some((since, at, same)) = last_briefing(opened, payload)? {
            let changes = project.changes_since(&since)?;
            let candidates = change_items(project, &changes);
            let mut section = screen.section(
                format!(
                    "Since {} briefing ({at})",
                    if same {
                        "this session's last"
                    } else {
                        "the last"
                    }
                ),
                "change",
                candidates.len(),
                candidates,
            );
            section.lead = true;
            if !section.items.is_empty() {
                sections.push(section);
            }
        }
    }

    let tasks = |list: &[Task]| -> Vec<(String, String)> {
        list.iter()
            .map(|t| (t.display_id.clone(), task_line(t)))
            .collect()
    };
    sections.push(screen.section(
        "In progress",
        "task in progress",
        count("claimed"),
        tasks(&status.in_progress),
    ));
    sections.push(screen.section(
        "Ready (highest priority first)",
        "ready task",
        count("ready"),
        tasks(&status.ready),
    ));
    let blocked: Vec<(String, String)> = tasks(&status.blocked)
        .into_iter()
        .chain(
            status
                .blockers
                .iter()
                .map(|b| (format!("blocker-{}", b.id), progress_line(b))),
        )
        .collect();
    sections.push(screen.section("Blocked", "blocker", blocked.len(), blocked));
    sections.push(
        screen.section(
            "Recent decisions",
            "decision",
            live_decisions(project)?,
            status
                .decisions
                .iter()
                .filter(|d| d.status.in_force())
                .map(|d| (d.display_id.clone(), decision_line(d))),
        ),
    );

    // Memory: constraints first (rules to respect whatever the work), then what bears on the
    // work in progress and ready.
    let topic = status.topic();
    let constraints = opened
        .memory
        .entries_of(&[Kind::Constraint], &topic, BRIEF_CONSTRAINTS)?;
    let memory_kinds = [Kind::Pattern, Kind::Knowledge, Kind::Procedural];
    // With work to go by, only what bears on it; with none, what was remembered last.
    let relevant = if topic.is_empty() {
        opened.memory.entries_of(&memory_kinds, "", BRIEF_MEMORY)?
    } else {
        opened
            .memory
            .query(&topic, "", BRIEF_MEMORY + BRIEF_CONSTRAINTS)?
            .into_iter()
            .filter(|hit| memory_kinds.contains(&hit.kind))
            .take(BRIEF_MEMORY)
            .collect()
    };
    let entries = |hits: &[crate::memory::QueryHit]| -> Vec<(String, String)> {
        hits.iter()
            .map(|hit| {
                (
                    hit.id.clone(),
                    format!("- {} {}: {}", hit.id, hit.subject, hit.body),
                )
            })
            .collect()
    };
    sections.push(screen.section(
        "Constraints",
        "constraint",
        constraints.len(),
        entries(&constraints),
    ));
    sections.push(screen.section(
        if topic.is_empty() {
            "Recently remembered"
        } else {
            "Memory that bears on this work"
        },
        "memory entry",
        relevant.len(),
        entries(&relevant),
    ));

    let header = format!(
        "# CAR briefing: {} (this project's tasks, decisions and memory)\n\
         Tasks: {} ready, {} in progress, {} blocked, {} open, {} done. Ids work with the car \
         MCP tools (memory_query, context_manager) and the `car` CLI.\n",
        status.project.name, t["ready"], t["claimed"], t["blocked"], t["open"], t["done"]
    );
    let withheld_line = screen.note();
    let footer = |left: &[(&'static str, usize)]| {
        let mut out = String::new();
        if !left.is_empty() {
            let parts: Vec<String> = left.iter().map(|(noun, n)| plural(*n, noun)).collect();
            out.push_str(&format!(
                "Left out to stay within {budget} tokens: {}. `/car-brief` (or `car context`) shows more.\n",
                parts.join(", ")
            ));
        }
        out.push_str(&withheld_line);
        out
    };
    let has_anything = sections.iter().any(|s| !s.items.is_empty()) || !screen.withheld.is_empty();
    let fitted = briefing::fit(&header, &sections, budget, footer);
    let (text, tokens) = if has_anything || t.values().any(|n| *n > 0) {
        (fitted.text, fitted.tokens)
    } else {
        (String::new(), 0)
    };
    let mut injection = Injection {
        host: payload.host.as_str(),
        event: Event::SessionStart.as_str(),
        session_id: payload.session_id.clone(),
        silent: text
            .is_empty()
            .then(|| "the project has no tasks, decisions or memory yet".to_string()),
        text,
        tokens,
        budget: Some(budget),
        entries: fitted.ids,
        withheld: screen.ids(),
        left_out: fitted.left_out.iter().map(|(_, n)| n).sum(),
        execution_id: None,
    };
    injection.execution_id = Some(record(
        opened,
        payload,
        &injection,
        Some(&state),
        started,
        &started_at,
    )?);
    Ok(injection)
}

/// The reminders for `payload`'s prompt.
pub fn prompt(opened: &Opened, payload: &Payload) -> Result<Injection, HookError> {
    let started = Instant::now();
    let started_at = now();
    let project = &opened.project;
    if !config::is_on(project, "hooks.prompt")? {
        return Ok(Injection::off(payload, "hooks.prompt"));
    }
    if !payload.host.takes_context(Event::Prompt) {
        let mut injection = Injection::off(payload, "hooks.prompt");
        injection.silent = Some(format!(
            "{} takes no context from a prompt hook",
            payload.host.as_str()
        ));
        return Ok(injection);
    }
    let max = config::number(project, "hooks.max_reminders")? as usize;
    let shown = shown_in_session(opened, payload)?;
    let reminders = if payload.prompt.trim().is_empty() {
        Vec::new()
    } else {
        opened.memory.remind(&payload.prompt, max, &shown)?
    };
    let mut screen = Screen::default();
    let shown: Vec<(String, String)> = reminders
        .iter()
        .filter_map(|reminder| {
            let item = screen.item(&reminder.id, &reminder_text(reminder))?;
            Some((reminder.id.clone(), item.line))
        })
        .collect();
    let entries: Vec<String> = shown.iter().map(|(id, _)| id.clone()).collect();
    let mut text = String::new();
    if !shown.is_empty() || !screen.withheld.is_empty() {
        text.push_str(
            "CAR memory this prompt is about (ids for memory_query / `car memory show`):\n",
        );
        for (_, line) in &shown {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&screen.note());
    }
    opened.memory.count_injections(&entries)?;
    let silent = text.is_empty().then(|| {
        if reminders.is_empty() {
            "no remembered entry is about this prompt".to_string()
        } else {
            "every entry about this prompt was already shown in this session".to_string()
        }
    });
    let mut injection = Injection {
        host: payload.host.as_str(),
        event: Event::Prompt.as_str(),
        session_id: payload.session_id.clone(),
        tokens: briefing::tokens(&text),
        text,
        budget: None,
        entries,
        withheld: screen.ids(),
        left_out: 0,
        silent,
        execution_id: None,
    };
    injection.execution_id = Some(record(
        opened,
        payload,
        &injection,
        None,
        started,
        &started_at,
    )?);
    Ok(injection)
}

/// One recorded hook call, as `car hook log` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Logged {
    pub execution_id: String,
    pub created_at: String,
    pub host: String,
    pub session_id: String,
    /// `session_start` or `prompt`.
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The prompt, secrets redacted (prompt calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub entries: Vec<String>,
    pub withheld: Vec<String>,
    pub tokens: i64,
    /// Exactly what was injected ("" when nothing was).
    pub text: String,
}

/// Which recorded calls `car hook log` lists.
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    pub session: Option<String>,
    pub event: Option<Event>,
    pub limit: usize,
}

/// The project's recorded hook calls, newest first.
pub fn log(project: &Project, filter: &LogFilter) -> Result<Vec<Logged>, HookError> {
    let conn = project.store.conn();
    let mut stmt = conn.prepare(
        "SELECT execution_id, created_at, host, session_id, event, source, prompt, entries,
                withheld, tokens, text
         FROM injections
         WHERE project_id = ?1 AND (?2 IS NULL OR session_id = ?2) AND (?3 IS NULL OR event = ?3)
         ORDER BY created_at DESC, rowid DESC LIMIT ?4",
    )?;
    let ids = |text: String| serde_json::from_str::<Vec<String>>(&text).unwrap_or_default();
    let rows = stmt.query_map(
        params![
            project.id,
            filter.session,
            filter.event.map(Event::as_str),
            filter.limit.max(1) as i64
        ],
        |r| {
            Ok(Logged {
                execution_id: r.get(0)?,
                created_at: r.get(1)?,
                host: r.get(2)?,
                session_id: r.get(3)?,
                event: r.get(4)?,
                source: r.get(5)?,
                prompt: r.get(6)?,
                entries: ids(r.get(7)?),
                withheld: ids(r.get(8)?),
                tokens: r.get(9)?,
                text: r.get(10)?,
            })
        },
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The recorded prompts as `memory_evaluate` cases (`{"cases": […]}`), each labelled with what
/// the hook showed: the starting point for a person to correct (drop a wrong id, add the entry a
/// prompt was really about, empty the list of a prompt about nothing) before `car memory
/// evaluate FILE` scores the reminders on real prompts.
pub fn evaluation_cases(logged: &[Logged]) -> serde_json::Value {
    let cases: Vec<serde_json::Value> = logged
        .iter()
        .filter(|l| l.event == Event::Prompt.as_str())
        .filter_map(|l| {
            let prompt = l.prompt.as_deref().filter(|p| !p.trim().is_empty())?;
            Some(serde_json::json!({
                "id": l.execution_id,
                "request": {"query": prompt, "force": true},
                "relevant_fact_ids": l.entries,
            }))
        })
        .collect();
    serde_json::json!({ "cases": cases })
}

/// `- [constraint fact-12] Schema migrations: need sign-off … (matched schema, migrations)`
/// (whole: it is screened before it is cut to a line).
fn reminder_text(reminder: &Reminder) -> String {
    let why = reminder.why.to_string();
    format!(
        "- [{} {}] {}: {}{}",
        reminder.kind.as_str(),
        reminder.id,
        reminder.subject,
        reminder.body,
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        }
    )
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix("entry") {
        format!("{n} {stem}entries")
    } else if noun.starts_with("task ") {
        format!("{n} tasks{}", &noun[4..])
    } else {
        format!("{n} {noun}s")
    }
}

/// How many decisions are in force (not superseded or rejected).
fn live_decisions(project: &Project) -> Result<usize, HookError> {
    let n: i64 = project.store.conn().query_row(
        "SELECT COUNT(*) FROM decisions WHERE project_id = ?1 AND status NOT IN ('superseded', 'rejected')",
        [project.id],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as usize)
}

/// What changed since a briefing, as `(id, text)` candidates for the lead section.
fn change_items(project: &Project, changes: &Changes) -> Vec<(String, String)> {
    let title = |id: &str| {
        project
            .task_detail(id)
            .map(|d| d.task.title)
            .unwrap_or_default()
    };
    let mut items = Vec::new();
    for moved in &changes.tasks_moved {
        items.push((
            moved.display_id.clone(),
            format!(
                "- {} {} → {}: {}",
                moved.display_id,
                moved.from,
                moved.to,
                title(&moved.display_id)
            ),
        ));
    }
    for created in &changes.tasks_created {
        items.push((
            created.clone(),
            format!("- new task {created}: {}", title(created)),
        ));
    }
    for removed in &changes.tasks_removed {
        items.push((removed.clone(), format!("- {removed} archived or deleted")));
    }
    for d in &changes.decisions {
        items.push((
            d.display_id.clone(),
            format!(
                "- new decision {}",
                decision_line(d).trim_start_matches("- ")
            ),
        ));
    }
    for p in &changes.progress {
        items.push((format!("{}-{}", p.kind, p.id), progress_line(p)));
    }
    items
}

/// The state and time of the last briefing of this session (`same` true), else of the
/// project's last briefing in any session.
fn last_briefing(
    opened: &Opened,
    payload: &Payload,
) -> Result<Option<(String, String, bool)>, HookError> {
    let conn = opened.store.conn();
    let row =
        |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<Option<(String, String)>, HookError> {
            Ok(conn
                .query_row(sql, p, |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?)
        };
    if !payload.session_id.is_empty() {
        if let Some((state, at)) = row(
            "SELECT state, created_at FROM injections
             WHERE session_id = ?1 AND project_id = ?2 AND event = 'session_start' AND state IS NOT NULL
             ORDER BY created_at DESC LIMIT 1",
            &[&payload.session_id, &opened.project.id],
        )? {
            return Ok(Some((state, at, true)));
        }
    }
    Ok(row(
        "SELECT state, created_at FROM injections
         WHERE project_id = ?1 AND event = 'session_start' AND state IS NOT NULL
         ORDER BY created_at DESC LIMIT 1",
        &[&opened.project.id],
    )?
    .map(|(state, at)| (state, at, false)))
}

/// The memory entries this session has been shown (by its briefing or earlier reminders)
/// since its context last started over (a compaction or a `/clear` drops what was shown).
fn shown_in_session(opened: &Opened, payload: &Payload) -> Result<Vec<String>, HookError> {
    if payload.session_id.is_empty() {
        return Ok(Vec::new());
    }
    let conn = opened.store.conn();
    let mut stmt = conn.prepare_cached(
        "SELECT entries FROM injections
         WHERE session_id = ?1 AND project_id = ?2 AND rowid >= ifnull(
             (SELECT max(rowid) FROM injections
              WHERE session_id = ?1 AND project_id = ?2 AND event = 'session_start'
                AND source IN ('compact', 'clear')), 0)",
    )?;
    let rows = stmt.query_map(params![payload.session_id, opened.project.id], |r| {
        r.get::<_, String>(0)
    })?;
    let mut shown = Vec::new();
    for entries in rows {
        let ids: Vec<String> = serde_json::from_str(&entries?).unwrap_or_default();
        shown.extend(ids);
    }
    Ok(shown)
}

/// Writes the execution-log row and the injection row, in one transaction; returns the
/// execution id.
fn record(
    opened: &Opened,
    payload: &Payload,
    injection: &Injection,
    state: Option<&str>,
    started: Instant,
    started_at: &str,
) -> Result<String, HookError> {
    let id = uuid::Uuid::new_v4().to_string();
    let tool = match payload.event {
        Event::SessionStart => "hook.session_start",
        Event::Prompt => "hook.prompt",
    };
    let prompt = (payload.event == Event::Prompt).then(|| {
        let redacted = secrets::redact(&payload.prompt);
        redacted
            .chars()
            .take(LOGGED_PROMPT_CHARS)
            .collect::<String>()
    });
    let done = Finished {
        id: id.clone(),
        tool: tool.to_string(),
        request_id: None,
        claimed: false,
        face: "hook".to_string(),
        started_at: started_at.to_string(),
        status: ExecStatus::Ok,
        duration_ms: started.elapsed().as_millis() as u64,
        error: None,
        result: None,
        release: false,
        session: Some(payload.session_id.clone()).filter(|s| !s.is_empty()),
        host: Some(payload.host.as_str().to_string()),
        subject: None,
        author: None,
    };
    opened.store.write(|tx| -> Result<(), HookError> {
        finish_in(&**tx, &done)?;
        tx.execute(
            "INSERT INTO injections(execution_id, project_id, host, session_id, event, source,
                 prompt, entries, withheld, text, tokens, state, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                id,
                opened.project.id,
                payload.host.as_str(),
                payload.session_id,
                payload.event.as_str(),
                (payload.event == Event::SessionStart).then(|| payload.source.as_str()),
                prompt,
                serde_json::to_string(&injection.entries).unwrap_or_default(),
                serde_json::to_string(&injection.withheld).unwrap_or_default(),
                injection.text,
                injection.tokens as i64,
                state,
                now(),
            ],
        )?;
        Ok(())
    })?;
    Ok(id)
}
