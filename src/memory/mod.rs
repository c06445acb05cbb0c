//! memgine, CAR's graph memory: facts, knowledge, procedural entries, conversation turns and
//! status slots as nodes of one graph with typed, weighted links; retrieval by seed terms and
//! personalized PageRank; layered context assembly; proactive reminders. Every write is one
//! SQLite transaction, so any number of processes can share a memory without losing a write.

mod context;
pub mod embed;
mod index;
mod model;
mod notes;
mod proactive;
mod retrieve;
pub(crate) mod surfaces;
pub(crate) mod text;
mod tools;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockWriteGuard};

use serde::Serialize;

pub use context::{effective_budget, AssembledContext, ContextMode, ContextRequest, OUTDATED_MARK};
pub use model::{EdgeKind, Kind, Node, Scope};
pub use notes::Note;
pub use proactive::{
    EvaluationCase, InterveneRequest, Intervention, Reminder, Trigger, MIN_GROUNDING,
};
pub use tools::{
    AddFactArgs, DeleteArgs, EntryScope, EntryView, EvaluateArgs, QueryArgs, Recall, SaveArgs,
    StatusArgs,
};

/// Every memory tool, and the unlisted operations MCP serves as its prompt and resources.
pub fn tools(memory: std::sync::Arc<Memory>) -> Vec<crate::runtime::Tool> {
    let mut all = tools::tools(memory.clone());
    all.extend(surfaces::tools(memory));
    all
}
pub use write::{NewEntry, Written};

use crate::store::sql::{args, Sql, Value};
use crate::store::{self, Store, StoreError};
use index::Index;

pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read or write {path}: {message}")]
    File { path: String, message: String },
}

impl From<rusqlite::Error> for MemoryError {
    fn from(err: rusqlite::Error) -> Self {
        MemoryError::Store(StoreError::Sqlite(err))
    }
}

/// An entry linked to another, as [`Memory::links_of`] gives it.
#[derive(Debug, Clone)]
pub struct LinkedEntry {
    pub node: Node,
    pub kind: EdgeKind,
    pub weight: f64,
    /// The link points from the asked entry to this one.
    pub outgoing: bool,
}

/// One retrieved entry.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct QueryHit {
    pub id: String,
    pub subject: String,
    pub body: String,
    pub kind: Kind,
    pub activation: f64,
    /// Why it came back.
    pub why: Why,
}

/// Why an entry came back for a query.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Why {
    /// The query's terms the entry matches (exactly, by stem, or inside a longer term).
    pub matched: Vec<String>,
    /// How close its meaning is to the query's (cosine similarity, 0–1), when meaning found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<f64>,
    /// The entry it was reached through, when that path beat its own match.
    pub via: Option<ViaEntry>,
}

/// The entry a result was reached through, and what ties the two.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ViaEntry {
    pub id: String,
    pub subject: String,
    /// The named thing both mention ("falcon"), or the link between them ("depends_on").
    pub through: String,
}

impl std::fmt::Display for Why {
    /// `matched invoice, rendering · meaning 0.61 · via fact-12 "falcon"`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.matched.is_empty() {
            write!(f, "matched {}", self.matched.join(", "))?;
        }
        let mut sep = !self.matched.is_empty();
        if let Some(meaning) = self.meaning {
            if sep {
                write!(f, " · ")?;
            }
            write!(f, "meaning {meaning:.2}")?;
            sep = true;
        }
        if let Some(via) = &self.via {
            if sep {
                write!(f, " · ")?;
            }
            write!(f, "via {} \"{}\"", via.id, via.through)?;
        }
        Ok(())
    }
}

/// The memory of one project (plus global entries), backed by the shared store.
pub struct Memory {
    store: Arc<Store>,
    project: Option<i64>,
    /// Read by many queries at once; written by a refresh or a write.
    index: Arc<RwLock<Index>>,
    /// Batches waiting for the writer that holds the index lock to write them with its own.
    queued: Mutex<Vec<Arc<Job>>>,
    /// Embeds written entries off the write path.
    embedder: Arc<Embedder>,
    /// Embed what a write wrote before it returns (a short-lived process), not in the
    /// background.
    embed_on_write: std::sync::atomic::AtomicBool,
    /// When a write planned ahead last found that another writer had changed memory first
    /// (see [`Memory::plans_ahead`]).
    moved_at: Mutex<Option<std::time::Instant>>,
    /// Write groups planned ahead that the database took (read by tests).
    planned_ahead: std::sync::atomic::AtomicU64,
    /// Plan every team write group ahead, whatever the store has heard (tests of the retry).
    #[cfg(test)]
    ahead_regardless: std::sync::atomic::AtomicBool,
}

/// After a write planned ahead met another writer's change, groups catch up first for this
/// long: that writer is likely still writing.
const AHEAD_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// A write group's planned rows not yet sent. They go as a few multi-row statements (the
/// nodes, then the edges, the updates in order, and the change log), whose answers complete
/// the index and the group's answers.
#[derive(Default)]
struct Pending {
    /// Ask first that no change came after this one (see [`MEMORY_UNCHANGED`]).
    unchanged: Option<i64>,
    /// The nodes' rows, with where each one's answer goes: (batch, position).
    nodes: Vec<(Vec<Value>, (usize, usize))>,
    /// (source, target, kind, weight).
    edges: Vec<(String, String, model::EdgeKind, f64)>,
    updates: Vec<(String, Vec<Value>)>,
    changed: Vec<String>,
}

/// What the answer to one statement of a group tells the index.
enum Step {
    /// Nodes were inserted: a row (id, sequence number) each.
    Nodes,
    /// Edges were made: a row (source, kind) each.
    Edges,
    /// Changes were logged: a row (number) each.
    Changes,
    Other,
}

/// Fails a team store's transaction (SQLSTATE [`store::postgres::MEMORY_MOVED`], before any
/// statement after it runs) if a change was logged past the one given (migration 0009).
const MEMORY_UNCHANGED: &str = "SELECT car_memory_unchanged(?1)";

impl Pending {
    /// Asks first that no change came after `last_change` (see [`MEMORY_UNCHANGED`]).
    fn expect_unchanged(&mut self, last_change: i64) {
        self.unchanged = Some(last_change);
    }

    fn add(&mut self, planned: write::Planned, at: (usize, usize), all: &mut [Vec<Written>]) {
        let id = &planned.written.id;
        self.nodes.push((planned.node, at));
        self.edges.extend(
            planned
                .edges
                .into_iter()
                .map(|(dst, kind, weight)| (id.clone(), dst, kind, weight)),
        );
        self.updates.extend(planned.updates);
        self.changed.extend(planned.changed);
        all[at.0].push(planned.written);
    }

    /// Sends what is pending (one round trip on a team store, the commit's included when
    /// `last`: see [`Sql::query_all_last`]) and completes the index and the answers with what
    /// comes back.
    fn run(
        &mut self,
        tx: &dyn Sql,
        index: &mut Index,
        all: &mut [Vec<Written>],
        last: bool,
    ) -> Result<()> {
        let mut statements: Vec<(String, Vec<Value>, Step)> = Vec::new();
        if let Some(last_change) = self.unchanged.take() {
            statements.push((
                MEMORY_UNCHANGED.into(),
                vec![Value::Int(last_change)],
                Step::Other,
            ));
        }
        if self.nodes.is_empty() && self.updates.is_empty() && self.changed.is_empty() {
            // Nothing to write (the check alone is not worth a round trip).
            return Ok(());
        }
        for chunk in store::sql::chunks(&self.nodes) {
            let values = chunk.iter().flat_map(|(row, _)| row.iter().cloned());
            statements.push((
                write::insert_nodes(chunk.len()),
                values.collect(),
                Step::Nodes,
            ));
        }
        for chunk in store::sql::chunks(&self.edges) {
            let mut values = Vec::with_capacity(chunk.len() * 4);
            for (src, dst, kind, weight) in chunk {
                values.extend([
                    Value::Text(src.clone()),
                    Value::Text(dst.clone()),
                    Value::Text(kind.as_str().into()),
                    Value::Real(*weight),
                ]);
            }
            statements.push((write::insert_edges(chunk.len()), values, Step::Edges));
        }
        for (sql, values) in self.updates.drain(..) {
            statements.push((sql, values, Step::Other));
        }
        for chunk in store::sql::chunks(&self.changed) {
            let values = chunk.iter().map(|id| Value::Text(id.clone()));
            statements.push((
                write::log_changes(chunk.len()),
                values.collect(),
                Step::Changes,
            ));
        }
        let params: Vec<Vec<&dyn store::sql::Param>> = statements
            .iter()
            .map(|(_, values, _)| values.iter().map(|v| v as &dyn store::sql::Param).collect())
            .collect();
        let sent: Vec<(&str, &[&dyn store::sql::Param])> = statements
            .iter()
            .zip(&params)
            .map(|((sql, _, _), params)| (sql.as_str(), params.as_slice()))
            .collect();
        let answers = match last {
            true => tx.query_all_last(&sent)?,
            false => tx.query_all(&sent)?,
        };
        let at: std::collections::HashMap<&str, (usize, usize)> = self
            .nodes
            .iter()
            .filter_map(|(row, at)| match row.first() {
                Some(Value::Text(id)) => Some((id.as_str(), *at)),
                _ => None,
            })
            .collect();
        for ((_, _, step), rows) in statements.iter().zip(&answers) {
            for row in rows {
                match step {
                    Step::Nodes => index.set_seq(&row.get::<String>(0)?, row.get::<i64>(1)?),
                    Step::Edges => {
                        let related = row.get::<String>(1)? == model::EdgeKind::RelatedTo.as_str();
                        if let Some(&(batch, position)) =
                            at.get(row.get::<String>(0)?.as_str()).filter(|_| related)
                        {
                            all[batch][position].links += 1;
                        }
                    }
                    Step::Changes => index.caught_up_to(row.get::<i64>(0)?),
                    Step::Other => {}
                }
            }
        }
        self.nodes.clear();
        self.edges.clear();
        self.changed.clear();
        Ok(())
    }
}

/// A batch of entries waiting to be written, and, once written, what its writer said.
struct Job {
    entries: Vec<NewEntry>,
    written: Mutex<Option<Result<Vec<Written>>>>,
}

impl Job {
    fn done(&self, written: Result<Vec<Written>>) {
        *self.written.lock().unwrap_or_else(|p| p.into_inner()) = Some(written);
    }

    fn take(&self) -> Option<Result<Vec<Written>>> {
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

fn nothing_written() -> MemoryError {
    MemoryError::Invalid("nothing was written".into())
}

/// Options of one batch write.
#[derive(Default)]
struct Batch<'a> {
    /// A `meta` marker (key, file) written in the same transaction.
    mark: Option<(&'a str, &'a Path)>,
    /// Called with (done, total) after each entry.
    progress: Option<&'a mut dyn FnMut(usize, usize)>,
}

/// Entries embedded per transaction: a few hundred milliseconds of the model's work, read
/// before and stored after it, so neither writers nor readers wait for the model.
const EMBED_CHUNK: usize = 32;

/// How many entries lack a vector of this build's model.
pub fn missing_vectors(store: &Store) -> Result<usize> {
    let n: i64 = store.read(|sql| {
        Ok::<_, MemoryError>(
            sql.value(
                "SELECT count(*) FROM memory_nodes n WHERE NOT EXISTS
                   (SELECT 1 FROM memory_vectors v WHERE v.node_id = n.id AND v.model = ?1)",
                args![embed::model_id()],
            )?
            .unwrap_or(0),
        )
    })?;
    Ok(n as usize)
}

/// Stores a vector if its entry still exists with the text it was made from, replacing one of
/// another model.
const VECTOR_STORE: &str = "INSERT INTO memory_vectors(node_id, model, vector)
     SELECT ?1, ?2, ?3 WHERE EXISTS
       (SELECT 1 FROM memory_nodes WHERE id = ?1 AND subject || ' ' || body = ?4)
     ON CONFLICT(node_id) DO UPDATE SET model = excluded.model, vector = excluded.vector";

/// Logs a change for each entry of a chunk whose vector of this model is stored (after
/// [`VECTOR_STORE`]), so every index takes the vectors in: one statement for the chunk (a team
/// database notifies once a statement). `?1` is the model, the entries' ids follow.
fn vector_changes(entries: usize) -> String {
    format!(
        "INSERT INTO memory_changes(node_id)
         SELECT node_id FROM memory_vectors WHERE model = ?1 AND node_id IN ({})
         RETURNING node_id, seq",
        index::placeholders(2, entries)
    )
}

/// The newest change to memory, read first in a chunk's transaction (see [`embed_missing`]).
const MEMORY_HEAD: &str = "SELECT ifnull(max(seq), 0) FROM memory_changes";

/// Embeds the entries that lack a vector of this build's model — those of `only`, or every
/// entry — [`EMBED_CHUNK`] at a time: the texts are read, embedded outside any transaction (by
/// `crew`), then stored in a short transaction with a change-log row each, so
/// every index (in this process and in others) takes the new vectors in. Text with nothing to
/// embed stores the zero vector (no meaning), so it is not retried. An `idle` caller (see
/// [`idle_class`]) stores at normal priority. `lock` is held for each chunk: the embedders of
/// one process take turns instead of embedding the same entries. Calls
/// `progress(done, total)` after each chunk (when given: counting what is missing reads every
/// entry, which a background pass after each write should not); returns how many it embedded.
/// Safe to run in several processes at once.
///
/// With `index` (this process's, which its writers keep current), a chunk's vectors go
/// straight into it when nothing changed memory between the last change it took in and the
/// chunk's: otherwise every index would read each entry the embedder touched again from the
/// database (after an import or a storm of writes, the next write waited for thousands).
#[allow(clippy::too_many_arguments)]
fn embed_missing(
    store: &Store,
    index: Option<&RwLock<Index>>,
    lock: &Mutex<()>,
    crew: &Crew,
    idle: bool,
    pace: &dyn Fn(),
    only: Option<&[String]>,
    mut progress: Option<&mut dyn FnMut(usize, usize)>,
) -> Result<usize> {
    let total = match (&progress, only) {
        (None, _) => 0,
        (Some(_), Some(ids)) => ids.len(),
        (Some(_), None) => missing_vectors(store)?,
    };
    let mut chunks = only.map(|ids| ids.chunks(EMBED_CHUNK));
    let mut done = 0;
    loop {
        let chunk = match chunks.as_mut() {
            Some(chunks) => match chunks.next() {
                Some(chunk) => Some(chunk),
                None => break,
            },
            None => None,
        };
        pace();
        let turn = lock.lock().unwrap_or_else(|p| p.into_inner());
        let rows = unembedded(store, chunk)?;
        if rows.is_empty() {
            if chunk.is_some() {
                continue;
            }
            break;
        }
        let vectors = crew.embed(&rows);
        // An idle thread stores at normal priority: the transaction holds the project's write
        // lock on a team store, and a writer must not wait for a thread that gets no CPU.
        if idle {
            idle_class(false);
        }
        let model = embed::model_id();
        let bytes: Vec<Vec<u8>> = vectors.iter().map(embed::Vector::to_bytes).collect();
        let params: Vec<[&dyn store::sql::Param; 4]> = rows
            .iter()
            .zip(&bytes)
            .map(|((id, text), bytes)| [id as _, &model as _, bytes as _, text as _])
            .collect();
        let changes = vector_changes(rows.len());
        let mut changed: Vec<&dyn store::sql::Param> = vec![&model];
        changed.extend(rows.iter().map(|(id, _)| id as &dyn store::sql::Param));
        let mut statements: Vec<(&str, &[&dyn store::sql::Param])> = vec![(MEMORY_HEAD, &[])];
        statements.extend(params.iter().map(|p| (VECTOR_STORE, &p[..])));
        statements.push((&changes, &changed));
        // One round trip for the chunk (the transaction holds a team project's write lock, so
        // the head read first is the last change before the chunk's).
        let stored = store.transaction::<_, MemoryError>(|tx| Ok(tx.query_all_last(&statements)?));
        // The turn is given up first: a writer that settles takes it while it holds the index.
        drop(turn);
        let taken_in = match (&stored, index) {
            (Ok(answers), Some(index)) => take_in(index, &rows, &bytes, answers),
            _ => Ok(()),
        };
        if idle {
            idle_class(true);
        }
        stored?;
        taken_in?;
        done += rows.len();
        if let Some(progress) = progress.as_mut() {
            progress(done.min(total.max(done)), total.max(done));
        }
    }
    Ok(done)
}

/// Puts a stored chunk's vectors into `index` if it holds every change before the chunk's
/// (`answers`: the head before the chunk, then for each row the store's answer and the change
/// log's, which has a row when the vector went in); otherwise its catch-up reads them.
fn take_in(
    index: &RwLock<Index>,
    rows: &[(String, String)],
    bytes: &[Vec<u8>],
    answers: &[Vec<store::sql::Row>],
) -> Result<()> {
    // The head read first, the vectors stored, then the changes logged.
    let [head, .., changes] = answers else {
        return Ok(());
    };
    let before = match head.first() {
        Some(row) => row.get::<i64>(0)?,
        None => return Ok(()),
    };
    let mut index = index.write().unwrap_or_else(|p| p.into_inner());
    if !index.is_loaded() || index.last_change() != before {
        return Ok(());
    }
    let mut last = before;
    let mut changed = std::collections::HashSet::new();
    for change in changes {
        changed.insert(change.get::<String>(0)?);
        last = last.max(change.get::<i64>(1)?);
    }
    for ((id, text), bytes) in rows.iter().zip(bytes) {
        if changed.contains(id) {
            index.take_vector(id, text, embed::Vector::from_bytes(bytes));
        }
    }
    index.caught_up_to(last);
    Ok(())
}

/// The (id, text) of entries without a vector of this build's model: those among `ids`, or the
/// first [`EMBED_CHUNK`] by sequence. Planned for its values each time: on PostgreSQL a kept
/// plan made while the tables were small walks every vector of the project once they are not
/// (measured: 30 ms a chunk at 30,000 entries).
fn unembedded(store: &Store, ids: Option<&[String]>) -> Result<Vec<(String, String)>> {
    const LACKS: &str =
        "SELECT n.id, n.subject || ' ' || n.body FROM memory_nodes n WHERE NOT EXISTS
           (SELECT 1 FROM memory_vectors v WHERE v.node_id = n.id AND v.model = ?1)";
    let model = embed::model_id();
    let (query, params): (String, Vec<&dyn store::sql::Param>) = match ids {
        Some(ids) => {
            let mut params: Vec<&dyn store::sql::Param> = vec![&model];
            params.extend(ids.iter().map(|id| id as &dyn store::sql::Param));
            let list = index::placeholders(2, ids.len());
            (format!("{LACKS} AND n.id IN ({list})"), params)
        }
        None => (
            format!("{LACKS} ORDER BY n.seq LIMIT ?2"),
            vec![&model, &EMBED_CHUNK],
        ),
    };
    store.read(|sql| {
        let mut rows = Vec::new();
        sql.for_each_planned(&query, &params, &mut |r| {
            rows.push((r.get(0)?, r.get(1)?));
            Ok(())
        })?;
        Ok(rows)
    })
}

/// A text to embed and where its vector goes.
type Task = (Vec<String>, std::sync::mpsc::Sender<Vec<embed::Vector>>);

/// The threads that embed beside the one that asks, kept as long as it has work: threads
/// started for each chunk began with empty allocator heaps, whose pages the kernel zeroed on
/// first touch (`perf` on a team write storm: 11% of the embedder's time in `clear_page_erms`).
/// Started by an idle thread (see [`idle_class`]), they are idle too. Dropping the crew stops
/// them.
struct Crew {
    helpers: Vec<std::sync::mpsc::Sender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Crew {
    /// A crew of `size` threads in all: the caller's and `size - 1` helpers (fewer if a
    /// thread cannot be started).
    fn new(size: usize) -> Crew {
        let mut crew = Crew {
            helpers: Vec::new(),
            threads: Vec::new(),
        };
        for _ in 1..size {
            let (send, take) = std::sync::mpsc::channel::<Task>();
            let spawned = std::thread::Builder::new()
                .name("car-embedder".into())
                .spawn(move || {
                    while let Ok((texts, answer)) = take.recv() {
                        let _ = answer.send(texts.iter().map(|t| embed_one(t)).collect());
                    }
                });
            match spawned {
                Ok(thread) => {
                    crew.helpers.push(send);
                    crew.threads.push(thread);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not start an embedding thread");
                    break;
                }
            }
        }
        crew
    }

    /// The vectors of `rows`' texts, in order, shared among the crew.
    fn embed(&self, rows: &[(String, String)]) -> Vec<embed::Vector> {
        let per = rows.len().div_ceil(self.helpers.len() + 1).max(1);
        let mut parts = rows.chunks(per);
        let own = parts.next().unwrap_or_default();
        // Each helper's part goes out first; one whose helper is gone is embedded here.
        let mut answers: Vec<Result<_, &[(String, String)]>> = Vec::new();
        for (part, helper) in parts.by_ref().zip(&self.helpers) {
            let (send, take) = std::sync::mpsc::channel();
            let texts = part.iter().map(|(_, text)| text.clone()).collect();
            answers.push(match helper.send((texts, send)) {
                Ok(()) => Ok(take),
                Err(_) => Err(part),
            });
        }
        let mut vectors: Vec<embed::Vector> = own.iter().map(|(_, t)| embed_one(t)).collect();
        for answer in answers {
            match answer {
                Ok(take) => match take.recv() {
                    Ok(part) => vectors.extend(part),
                    // The helper panicked: panic here too, as a scoped thread's join did.
                    Err(_) => panic!("an embedding thread stopped"),
                },
                Err(part) => vectors.extend(part.iter().map(|(_, t)| embed_one(t))),
            }
        }
        vectors
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.helpers.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A text's vector, the zero vector (no meaning) when it has nothing to embed.
fn embed_one(text: &str) -> embed::Vector {
    embed::embed(text).unwrap_or_else(embed::Vector::zero)
}

/// The background embedder of one memory: a thread that embeds what writes wrote (or, at
/// start-up, everything that lacks a vector) and stops when nothing is left; work that arrives
/// meanwhile is taken before it stops.
#[derive(Default)]
struct Embedder {
    state: Mutex<EmbedWork>,
    /// Held while a chunk is embedded (see [`embed_missing`]).
    turn: Arc<Mutex<()>>,
}

/// How long the background embedder waits after a write before it embeds a chunk, and how long
/// at most. The idle scheduling class keeps it off the cores others want, but not out of their
/// caches: a team server's writes went 3,270/s with no embedder, 2,200 with one that embedded
/// without storing, 1,900 with one that stored too (medians of two storms, 2 cores shared with
/// PostgreSQL). So it embeds when writes pause, and at least a chunk a second while they do not.
const EMBED_QUIET: std::time::Duration = std::time::Duration::from_millis(20);
const EMBED_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

impl Embedder {
    /// Returns once no write has asked for vectors for [`EMBED_QUIET`], or after
    /// [`EMBED_PATIENCE`].
    fn wait_for_quiet(&self) {
        let began = std::time::Instant::now();
        loop {
            let last = self
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .last_write;
            let since = last.map_or(EMBED_QUIET, |at| at.elapsed());
            let waited = began.elapsed();
            if since >= EMBED_QUIET || waited >= EMBED_PATIENCE {
                return;
            }
            std::thread::sleep((EMBED_QUIET - since).min(EMBED_PATIENCE - waited));
        }
    }
}

/// What the background embedder has to do.
#[derive(Default)]
struct EmbedWork {
    /// A thread is running.
    running: bool,
    /// Look at every entry (start-up, or after a failure), not only at `ids`.
    scan: bool,
    /// Entries written since the thread last looked.
    ids: Vec<String>,
    /// When a write last asked for vectors.
    last_write: Option<std::time::Instant>,
}

/// Puts the calling thread (and the threads it starts from then on) in Linux's idle scheduling
/// class (`idle`), or back in the normal one; returns whether it could. An idle thread runs only
/// on a core nothing else wants, and any other thread that wakes takes the core from it at once
/// (`nice` 19 is not enough: a nice thread keeps its slice until the scheduler's next tick,
/// which cost the team server's writes 40% while it embedded — measured).
fn idle_class(idle: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_param is plain integers (more of them on musl); all zero is priority 0,
        // the only one either class takes. sched_setscheduler only reads it; the id is this
        // thread's own.
        unsafe {
            let param: libc::sched_param = std::mem::zeroed();
            let tid = libc::syscall(libc::SYS_gettid) as libc::pid_t;
            let policy = if idle {
                libc::SCHED_IDLE
            } else {
                libc::SCHED_OTHER
            };
            libc::sched_setscheduler(tid, policy, &param) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = idle;
        false
    }
}

/// The meta key that records that `assistant.json` was imported.
const ASSISTANT_IMPORTED: &str = "assistant_json_imported";

impl Memory {
    /// Opens the memory of the project rooted at `project_root` (None: global entries only; on a
    /// team store, its project),
    /// importing `assistant_json` once if it exists and was never imported.
    pub fn open(
        store: Arc<Store>,
        project_root: Option<&Path>,
        assistant_json: Option<&Path>,
    ) -> Result<Memory> {
        // A team store's memory is always its project's (a team server opens it without a root).
        let project = match project_root {
            Some(root) => Some(store.project_id(root)?),
            None => store.team_project(),
        };
        let memory = Memory {
            store,
            project,
            index: Arc::new(RwLock::new(Index::default())),
            queued: Mutex::default(),
            embedder: Arc::default(),
            embed_on_write: Default::default(),
            moved_at: Mutex::default(),
            planned_ahead: Default::default(),
            #[cfg(test)]
            ahead_regardless: Default::default(),
        };
        if let Some(path) = assistant_json {
            if path.exists() && memory.store.meta(ASSISTANT_IMPORTED)?.is_none() {
                let notes = notes::read(path)?;
                let entries = notes.iter().map(notes::to_entry).collect();
                let batch = Batch {
                    mark: Some((ASSISTANT_IMPORTED, path)),
                    progress: None,
                };
                memory.write_batch(entries, batch)?;
                tracing::info!(path = %path.display(), count = notes.len(), "imported assistant.json");
            }
        }
        Ok(memory)
    }

    /// Hands the background embedder the entries a write wrote (`Some`), or asks it to look at
    /// every entry (`None`: [`Memory::warm`] at start-up, so entries written before this build's
    /// model — an older release, another model — get their vectors too), starting its thread
    /// unless it runs. The thread runs in the idle scheduling class ([`idle_class`]). Queries
    /// go on meanwhile; an entry without its vector yet is found by its words. On a team store
    /// each instance embeds what it wrote, so instances do not embed the same entries.
    fn kick_embedder(&self, ids: Option<Vec<String>>) {
        let embedder = Arc::clone(&self.embedder);
        {
            let mut work = embedder.state.lock().unwrap_or_else(|p| p.into_inner());
            match ids {
                Some(ids) => {
                    work.ids.extend(ids);
                    work.last_write = Some(std::time::Instant::now());
                }
                None => work.scan = true,
            }
            if work.running {
                return;
            }
            work.running = true;
        }
        let store = Arc::clone(&self.store);
        let index = Arc::clone(&self.index);
        let spawned = std::thread::Builder::new()
            .name("car-embedder".into())
            .spawn(move || {
                // Every core where the embedding only takes what is left; one elsewhere.
                let idle = idle_class(true);
                let crew = Crew::new(match idle {
                    true => std::thread::available_parallelism().map_or(1, |n| n.get()),
                    false => 1,
                });
                loop {
                    let (scan, ids) = {
                        let mut work = embedder.state.lock().unwrap_or_else(|p| p.into_inner());
                        if !work.scan && work.ids.is_empty() {
                            work.running = false;
                            break;
                        }
                        (std::mem::take(&mut work.scan), std::mem::take(&mut work.ids))
                    };
                    let only = (!scan).then_some(ids.as_slice());
                    let pace = || embedder.wait_for_quiet();
                    match embed_missing(&store, Some(&index), &embedder.turn, &crew, idle, &pace, only, None) {
                        Ok(embedded) => {
                            tracing::debug!(embedded, scan, "embedded memory entries in the background")
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "the memory embedder stopped; the next write or start resumes it");
                            let mut work = embedder.state.lock().unwrap_or_else(|p| p.into_inner());
                            work.running = false;
                            work.scan = true;
                            work.ids = Vec::new();
                            break;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            let mut work = self
                .embedder
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            work.running = false;
            work.scan = true;
            tracing::warn!(error = %e, "could not start the memory embedder");
        }
    }

    /// Makes every later write embed what it wrote before it returns (see [`Memory::settle`]):
    /// for a process that exits right after.
    pub fn embed_on_write(&self) {
        self.embed_on_write
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Embeds, in this thread and on every core, what lacks a vector of this build's model,
    /// calling `progress(done, total)` after each chunk; returns how many it embedded. A
    /// command that writes and then exits calls it, so what it wrote is found by meaning at
    /// once.
    pub fn settle(&self, progress: &mut dyn FnMut(usize, usize)) -> Result<usize> {
        let crew = Crew::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
        // Not this process's index: a writer that settles holds it.
        embed_missing(
            &self.store,
            None,
            &self.embedder.turn,
            &crew,
            false,
            &|| {},
            None,
            Some(progress),
        )
    }

    /// Builds the in-memory index now (a server calls this right after start-up so the first
    /// query does not pay for it).
    pub fn warm(&self) -> Result<()> {
        self.kick_embedder(None);
        self.read(|_| ())
    }

    /// A memory in a private in-memory database (evaluation runs, tests).
    pub fn in_memory() -> Result<Memory> {
        let store = Arc::new(Store::open_in_memory()?);
        Memory::open(store, None, None)
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The scope a call with this tenant sees.
    pub fn scope(&self, tenant: &str) -> Scope {
        Scope {
            project: self.project,
            tenant: tenant.to_string(),
        }
    }

    /// One write transaction (see [`Store::write`]).
    fn tx<T>(&self, work: impl FnOnce(&dyn Sql) -> Result<T>) -> Result<T> {
        self.store.transaction::<T, MemoryError>(work)
    }

    fn lock(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `read` on an index brought up to date with every writer. Queries of an index that
    /// is current run side by side (a read lock); only catching up takes the write lock.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Index) -> T) -> Result<T> {
        let head = self.store.memory_head()?;
        {
            let index = self.index.read().unwrap_or_else(|p| p.into_inner());
            if index.is_current(head) {
                return Ok(read(&index));
            }
        }
        let mut index = self.lock();
        self.catch_up(&mut index)?;
        Ok(read(&index))
    }

    /// Brings `index` up to date with every writer, outside any transaction: a fresh index
    /// starts from the snapshot beside the database when there is a usable one (see
    /// [`Index::load_snapshot`]), and a snapshot is written when enough changed.
    fn catch_up(&self, index: &mut Index) -> Result<()> {
        self.store.read_consistent(|sql| {
            if !index.is_loaded() {
                if let Some(snapshot) = self
                    .snapshot_path()
                    .and_then(|path| Index::load_snapshot(&path, sql))
                {
                    *index = snapshot;
                }
            }
            index.refresh(sql).map_err(MemoryError::from)
        })?;
        self.save_snapshot_if_due(index);
        Ok(())
    }

    /// Where the index snapshot of a database on disk lives: beside it (`car.memory-index`).
    fn snapshot_path(&self) -> Option<PathBuf> {
        self.store
            .path()
            .map(|db| db.with_extension("memory-index"))
    }

    /// Writes the index snapshot when [`Index::wants_snapshot`]; a failure only costs the next
    /// process the full load, so it is logged, not returned.
    fn save_snapshot_if_due(&self, index: &mut Index) {
        if !index.wants_snapshot() {
            return;
        }
        let Some(path) = self.snapshot_path() else {
            return;
        };
        let conn = self.store.conn();
        if !conn.is_autocommit() {
            return;
        }
        if let Err(e) = index.save_snapshot(&path, &*conn) {
            tracing::debug!(path = %path.display(), error = %e, "could not write the memory index snapshot");
        }
    }

    /// [`Memory::read`] without waiting: `None` when the index must first catch up with the
    /// database, or a writer holds it or the connection.
    fn read_now<T>(&self, read: impl FnOnce(&Index) -> T) -> Option<Result<T>> {
        let head = {
            let conn = self.store.try_conn()?;
            index::Index::head(&*conn)
        };
        let head = match head {
            Ok(head) => head,
            Err(e) => return Some(Err(e.into())),
        };
        let index = self.index.try_read().ok()?;
        index.is_current(head).then(|| Ok(read(&index)))
    }

    /// Writes one entry (see [`NewEntry`]).
    pub fn write(&self, entry: NewEntry) -> Result<Written> {
        let mut written = self.write_entries(vec![entry])?;
        written
            .pop()
            .ok_or_else(|| MemoryError::Invalid("nothing was written".into()))
    }

    /// Writes entries in one transaction: all of them or none.
    pub fn write_entries(&self, entries: Vec<NewEntry>) -> Result<Vec<Written>> {
        self.write_batch(entries, Batch::default())
    }

    fn write_batch(&self, entries: Vec<NewEntry>, batch: Batch<'_>) -> Result<Vec<Written>> {
        for entry in &entries {
            entry.check()?;
        }
        if batch.mark.is_some() || batch.progress.is_some() {
            let mut index = self.lock();
            let written = self.write_group(&mut index, &[&entries], batch);
            return written.and_then(|mut all| all.pop().ok_or_else(nothing_written));
        }
        // Writers that arrive while another writes wait for the index lock; the first to get
        // it writes every batch queued by then in one transaction (each batch still all or
        // nothing), and the others find theirs done. One commit for many writers, not one each.
        let job = Arc::new(Job {
            entries,
            written: Mutex::new(None),
        });
        self.queued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(job.clone());
        let mut index = self.lock();
        if let Some(done) = job.take() {
            return done;
        }
        let jobs = std::mem::take(&mut *self.queued.lock().unwrap_or_else(|p| p.into_inner()));
        let batches: Vec<&[NewEntry]> = jobs.iter().map(|j| j.entries.as_slice()).collect();
        match self.write_group(&mut index, &batches, Batch::default()) {
            Ok(all) => {
                for (job, written) in jobs.iter().zip(all) {
                    job.done(Ok(written));
                }
            }
            // One bad batch must not fail the others: each again on its own, with its answer.
            Err(_) if jobs.len() > 1 => {
                for job in &jobs {
                    let written = self
                        .write_group(&mut index, &[&job.entries], Batch::default())
                        .and_then(|mut all| all.pop().ok_or_else(nothing_written));
                    job.done(written);
                }
            }
            // The one batch taken (ours, unless a writer that panicked took ours with it).
            Err(e) => {
                if let Some(only) = jobs.first() {
                    only.done(Err(e));
                }
            }
        }
        job.take().unwrap_or_else(|| Err(nothing_written()))
    }

    /// Plans every team write group ahead from now on, whatever the store has heard.
    #[cfg(test)]
    pub(crate) fn plan_ahead_always(&self) {
        self.ahead_regardless
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many write groups planned ahead the database took.
    #[cfg(test)]
    pub(crate) fn groups_planned_ahead(&self) -> u64 {
        self.planned_ahead
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a write group can be planned before its transaction begins, so that the whole
    /// group is one round trip to a team database (see [`Memory::write_group`]): the index is
    /// current with every change the store has heard of, no writer was found changing memory
    /// first in the last [`AHEAD_PAUSE`], and the group needs nothing looked up in the
    /// database (no explicit targets, no import mark, no progress to report twice).
    fn plans_ahead(&self, index: &Index, batches: &[&[NewEntry]], batch: &Batch<'_>) -> bool {
        #[cfg(test)]
        if self
            .ahead_regardless
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return true;
        }
        batch.mark.is_none()
            && batch.progress.is_none()
            && self
                .store
                .notified_memory_head()
                .is_some_and(|head| index.is_current(head))
            && batches
                .iter()
                .flat_map(|entries| entries.iter())
                .all(|e| e.supersedes.is_empty() && e.depends_on.is_empty())
            && self
                .moved_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none_or(|at| at.elapsed() >= AHEAD_PAUSE)
    }

    /// Writes `batches` in one transaction, holding the index lock (`index`): every entry or
    /// none. The index is rebuilt on next use after a failure (it may hold rows of the rolled
    /// back transaction).
    ///
    /// On a team store whose index is current as far as the store has heard
    /// ([`Memory::plans_ahead`]), the group is planned before the transaction and sent whole,
    /// its commit included, after a check that no change came past the index's last one
    /// ([`MEMORY_UNCHANGED`]): one round trip instead of two. If one did (another instance, or
    /// this one's embedder, wrote first), nothing was written: the entries the plan put in the
    /// index are read again as the database has them, and the group is written the careful
    /// way, catching up under the project's write lock before planning.
    fn write_group(
        &self,
        index: &mut Index,
        batches: &[&[NewEntry]],
        batch: Batch<'_>,
    ) -> Result<Vec<Vec<Written>>> {
        let ahead = self.store.dialect() == store::sql::Dialect::Postgres
            && self.plans_ahead(index, batches, &batch);
        self.write_group_as(index, batches, batch, ahead)
    }

    fn write_group_as(
        &self,
        index: &mut Index,
        batches: &[&[NewEntry]],
        mut batch: Batch<'_>,
        ahead: bool,
    ) -> Result<Vec<Vec<Written>>> {
        let mark = batch.mark;
        let total: usize = batches.iter().map(|b| b.len()).sum();
        let project = self.project;
        let began = std::time::Instant::now();
        // Catch up with other writers before taking SQLite's write lock, so little is left to
        // replay while holding it. A team store's writers queue on a lock of their project
        // only, and the transaction's own refresh costs no more than a catch-up would.
        if self.store.dialect() == store::sql::Dialect::Sqlite {
            self.catch_up(index)?;
        }
        // What the group planned, batch by batch: its answers once written, and what a plan
        // made ahead put in the index, to read again if the database refuses it.
        let mut all: Vec<Vec<Written>> = Vec::with_capacity(batches.len());
        let max_seq = index.max_seq();
        // When the group's last statements were sent, for the debug line's split of its time.
        let mut sent = began;
        let result = self.tx(|tx| {
            if let Some((key, _)) = mark {
                // Another process may have done this one-time write since we looked.
                if store::meta_value(tx, key)?.is_some() {
                    all.push(Vec::new());
                    return Ok(());
                }
            }
            let mut pending = Pending::default();
            if ahead {
                pending.expect_unchanged(index.last_change());
            } else {
                index.refresh(tx)?;
            }
            // Each entry is planned against the index (which takes it in at once, so the
            // next one links to it, replaces it or takes the next id), and the group's
            // statements run together: one round trip on a team store instead of several per
            // entry. What the database answers (the nodes' sequence numbers, the change log's,
            // the links made) completes the index without reading the rows back.
            let mut seq = write::next_seq(tx, index)?;
            let mut done = 0;
            for entries in batches {
                all.push(Vec::with_capacity(entries.len()));
                for entry in entries.iter() {
                    let scope = Scope {
                        project: if entry.global { None } else { project },
                        tenant: entry.tenant.clone(),
                    };
                    // Explicit targets (rare) are looked up in the database, which must first
                    // hold what the group planned before.
                    let mut targets = (Vec::new(), Vec::new());
                    if !entry.supersedes.is_empty() || !entry.depends_on.is_empty() {
                        pending.run(tx, index, &mut all, false)?;
                        for (from, to) in [
                            (&entry.supersedes, &mut targets.0),
                            (&entry.depends_on, &mut targets.1),
                        ] {
                            for target in from {
                                to.extend(write::resolve(tx, &scope, target)?);
                            }
                        }
                    }
                    let planned = write::plan(index, &scope, entry, seq, targets.0, targets.1);
                    seq += 1;
                    let at = (all.len() - 1, all[all.len() - 1].len());
                    pending.add(planned, at, &mut all);
                    done += 1;
                    if let Some(progress) = batch.progress.as_mut() {
                        progress(done, total);
                    }
                }
            }
            // The group's last statements carry the commit (one round trip fewer on a team
            // store, where the project's writers queue on its lock), unless the import's
            // mark is still to be set.
            sent = std::time::Instant::now();
            pending.run(tx, index, &mut all, mark.is_none())?;
            if let Some((key, path)) = mark {
                store::set_meta(tx, key, &path.to_string_lossy())?;
            }
            Ok(())
        });
        let answered = std::time::Instant::now();
        match &result {
            Err(MemoryError::Store(StoreError::MemoryMoved(why))) if ahead => {
                tracing::debug!(reason = %why, "a write group planned ahead is planned again");
                *self.moved_at.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(std::time::Instant::now());
                // The planned nodes go, and with them the numbers they took (the nodes read
                // again take theirs back).
                index.rewind_max_seq(max_seq);
                let planned: Vec<String> = all
                    .iter()
                    .flatten()
                    .flat_map(|w| {
                        std::iter::once(&w.id)
                            .chain(&w.superseded)
                            .chain(&w.invalidated)
                    })
                    .cloned()
                    .collect();
                let undone = self
                    .store
                    .read_consistent(|sql| index.reload(sql, planned).map_err(MemoryError::from));
                if undone.is_err() {
                    *index = Index::default();
                }
                return self.write_group_as(index, batches, Batch::default(), false);
            }
            Err(_) => *index = Index::default(),
            Ok(_) if ahead => {
                self.planned_ahead
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(_) => {}
        }
        result?;
        let written_at = std::time::Instant::now();
        self.store.grew(all.iter().map(Vec::len).sum());
        // A batch with progress (an import) settles with its own progress.
        if all.iter().any(|w| !w.is_empty()) && batch.progress.is_none() {
            if self
                .embed_on_write
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                self.settle(&mut |_, _| {})?;
            } else {
                let ids = all.iter().flatten().map(|w| w.id.clone()).collect();
                self.kick_embedder(Some(ids));
            }
        }
        self.save_snapshot_if_due(index);
        let counts = write::count_entries(index, &self.scope(""));
        for w in all.iter_mut().flatten() {
            w.total = if w.tenant.is_empty() {
                counts
            } else {
                write::count_entries(index, &self.scope(&w.tenant))
            };
        }
        let ms = |from: std::time::Instant, to: std::time::Instant| (to - from).as_secs_f64() * 1e3;
        tracing::debug!(
            batches = batches.len(),
            entries = total,
            ahead,
            ms = ms(began, std::time::Instant::now()),
            // Planning (and any earlier statements), the last statements' round trip (the
            // commit's included), and what follows the commit (embedder, snapshot, counts).
            plan_ms = ms(began, sent),
            send_ms = ms(sent, answered),
            after_ms = ms(written_at, std::time::Instant::now()),
            "wrote a memory write group"
        );
        Ok(all)
    }

    /// The top `k` current entries for a query.
    pub fn query(&self, query: &str, tenant: &str, k: usize) -> Result<Vec<QueryHit>> {
        let scope = self.scope(tenant);
        self.read(|index| hits(index, &scope, query, k))
    }

    /// The project's current untenanted entries of `kinds`: the `k` most relevant to `topic`
    /// first, then the newest others up to `k` (a rule to respect matters whatever the topic).
    pub fn entries_of(&self, kinds: &[Kind], topic: &str, k: usize) -> Result<Vec<QueryHit>> {
        let scope = self.scope("");
        self.read(|index| {
            let mut found = if topic.trim().is_empty() {
                Vec::new()
            } else {
                hits_of(index, &scope, topic, kinds, k)
            };
            if found.len() < k {
                let mut newest: Vec<&Node> = index
                    .nodes()
                    .map(|(_, n)| n)
                    .filter(|n| {
                        kinds.contains(&n.kind)
                            && n.is_current()
                            && scope.sees(n.project, &n.tenant)
                            && !found.iter().any(|f| f.id == n.id)
                    })
                    .collect();
                newest.sort_by_key(|n| std::cmp::Reverse(n.seq));
                found.extend(newest.into_iter().take(k - found.len()).map(|n| QueryHit {
                    id: n.id.clone(),
                    subject: n.subject.clone(),
                    body: n.body.clone(),
                    kind: n.kind,
                    activation: 0.0,
                    why: Why {
                        matched: Vec::new(),
                        meaning: None,
                        via: None,
                    },
                }));
            }
            found
        })
    }

    /// [`Memory::query`] without waiting: `None` when it would have to.
    pub fn query_now(&self, query: &str, tenant: &str, k: usize) -> Option<Result<Vec<QueryHit>>> {
        let scope = self.scope(tenant);
        self.read_now(|index| hits(index, &scope, query, k))
    }

    /// How many current entries a tenant sees.
    pub fn entry_count(&self, tenant: &str) -> Result<usize> {
        let scope = self.scope(tenant);
        self.read(|index| write::count_entries(index, &scope))
    }

    /// A node the tenant sees from this project, current or superseded.
    pub fn get(&self, id: &str, tenant: &str) -> Result<Option<Node>> {
        let scope = self.scope(tenant);
        self.read(|index| {
            index
                .by_id(id)
                .filter(|n| scope.sees(n.project, &n.tenant))
                .cloned()
        })
    }

    /// The entries linked to `id` (either direction) that the tenant sees, strongest first, at
    /// most `limit`: each with the link's kind, weight and whether it points away from `id`.
    pub fn links_of(&self, id: &str, tenant: &str, limit: usize) -> Result<Vec<LinkedEntry>> {
        let scope = self.scope(tenant);
        self.read(|index| {
            let Some(slot) = index.slot_of(id) else {
                return Vec::new();
            };
            let mut linked: Vec<LinkedEntry> = index
                .outgoing(slot)
                .iter()
                .map(|l| (l, true))
                .chain(index.incoming(slot).iter().map(|l| (l, false)))
                .filter_map(|(link, outgoing)| {
                    let node = index.node(link.other)?;
                    scope.sees(node.project, &node.tenant).then(|| LinkedEntry {
                        node: node.clone(),
                        kind: link.kind,
                        weight: link.weight,
                        outgoing,
                    })
                })
                .collect();
            linked.sort_by(|a, b| b.weight.total_cmp(&a.weight));
            linked.truncate(limit);
            linked
        })
    }

    /// Current entries the tenant sees, of `kind` (any kind of entry: `None`), newest first,
    /// written before `before_seq` (all: `None`), at most `limit`.
    pub fn browse(
        &self,
        kind: Option<Kind>,
        tenant: &str,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Node>> {
        let scope = self.scope(tenant);
        self.read(|index| {
            let mut found: Vec<&Node> = index
                .nodes()
                .map(|(_, n)| n)
                .filter(|n| {
                    n.kind.is_entry()
                        && n.is_current()
                        && kind.is_none_or(|k| n.kind == k)
                        && before_seq.is_none_or(|before| n.seq < before)
                        && scope.sees(n.project, &n.tenant)
                })
                .collect();
            found.sort_unstable_by_key(|n| std::cmp::Reverse(n.seq));
            found.into_iter().take(limit).cloned().collect()
        })
    }

    /// The versions `id` replaced, newest first (each one's `superseded_by` the one after it).
    pub fn history_of(&self, id: &str, tenant: &str) -> Result<Vec<Node>> {
        let scope = self.scope(tenant);
        self.read(|index| {
            let mut history: Vec<Node> = Vec::new();
            let mut next = id.to_string();
            // Each version replaces one before it; a cycle (never written) cannot loop.
            while history.len() < 1000 {
                let Some(older) = index.nodes().map(|(_, n)| n).find(|n| {
                    n.superseded_by.as_deref() == Some(next.as_str())
                        && scope.sees(n.project, &n.tenant)
                }) else {
                    break;
                };
                next = older.id.clone();
                history.push(older.clone());
            }
            history
        })
    }

    /// Current untenanted entries visible from this project, oldest first, after `after_seq`.
    pub fn list_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<Node>> {
        let scope = self.scope("");
        self.read(|index| {
            // Slots are not in sequence order (a catch-up adds nodes by id): sorted first, so
            // a page ends at its last seq and the next starts right after it.
            let mut found: Vec<&Node> = index
                .nodes()
                .map(|(_, n)| n)
                .filter(|n| {
                    n.seq > after_seq
                        && n.kind.is_entry()
                        && n.is_current()
                        && scope.sees(n.project, &n.tenant)
                })
                .collect();
            found.sort_by_key(|n| n.seq);
            found.into_iter().take(limit).cloned().collect()
        })
    }

    /// Deletes an entry the tenant sees by id, or clears a status slot
    /// (`proactive-status:<tenant|global>`).
    pub fn delete(&self, id: &str, tenant: &str) -> Result<Deleted> {
        if let Some(tenant) = id.strip_prefix("proactive-status:") {
            let tenant = if tenant == "global" { "" } else { tenant };
            let project = self.project;
            let deleted = self.tx(|tx| {
                Ok(tx.execute(
                    "DELETE FROM memory_status WHERE project_id IS ?1 AND tenant = ?2",
                    args![project, tenant],
                )? > 0)
            })?;
            return Ok(Deleted {
                id: id.to_string(),
                deleted,
                kind: Some("status".into()),
                fact_count: self.entry_count(tenant)?,
            });
        }
        let Some(node) = self.get(id, tenant)? else {
            return Ok(Deleted {
                id: id.to_string(),
                deleted: false,
                kind: None,
                fact_count: self.entry_count(tenant)?,
            });
        };
        let mut index = self.lock();
        let deleted = self.tx(|tx| {
            // Entries it had superseded or invalidated are no longer overruled by it.
            tx.execute(
                "INSERT INTO memory_changes(node_id) SELECT id FROM memory_nodes
                 WHERE superseded_by = ?1 OR invalidated_by = ?1",
                args![id],
            )?;
            tx.execute(
                "UPDATE memory_nodes SET superseded_by = NULL WHERE superseded_by = ?1",
                args![id],
            )?;
            tx.execute(
                "UPDATE memory_nodes SET invalidated_by = NULL, invalidated_note = NULL
                 WHERE invalidated_by = ?1",
                args![id],
            )?;
            let deleted = tx.execute("DELETE FROM memory_nodes WHERE id = ?1", args![id])? > 0;
            tx.execute("INSERT INTO memory_changes(node_id) VALUES (?1)", args![id])?;
            Ok(deleted)
        })?;
        self.catch_up(&mut index)?;
        let count = write::count_entries(&index, &self.scope(&node.tenant));
        Ok(Deleted {
            id: id.to_string(),
            deleted,
            kind: Some(node.kind.as_str().to_string()),
            fact_count: count,
        })
    }

    /// Marks a current entry (by id or subject) as needing review without replacing it: the
    /// agent learned that a conclusion was based on wrong data. Returns the ids it marked.
    pub fn invalidate(&self, target: &str, tenant: &str, reason: &str) -> Result<Vec<String>> {
        let scope = self.scope(tenant);
        let mut index = self.lock();
        let marked = self.tx(|tx| {
            let Some(id) = write::resolve(tx, &scope, target)? else {
                return Ok(Vec::new());
            };
            tx.execute(
                "UPDATE memory_nodes SET invalidated_note = ?1 WHERE id = ?2 AND superseded_by IS NULL",
                args![reason, id],
            )?;
            tx.execute("INSERT INTO memory_changes(node_id) VALUES (?1)", args![id])?;
            Ok(vec![id])
        })?;
        self.catch_up(&mut index)?;
        Ok(marked)
    }

    /// Overwrites the tenant's status slot (never part of retrieval or context).
    pub fn update_status(&self, tenant: &str, body: &str) -> Result<StatusSlot> {
        let project = self.project;
        let now = store::now();
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO memory_status(project_id, tenant, body, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(ifnull(project_id, 0), tenant) DO UPDATE SET body = excluded.body,
                     updated_at = excluded.updated_at",
                args![project, tenant, body, now],
            )?;
            Ok(())
        })?;
        Ok(StatusSlot::new(tenant, body, &now))
    }

    /// The tenant's status slot, if set.
    pub fn status(&self, tenant: &str) -> Result<Option<StatusSlot>> {
        let project = self.project;
        let row: Option<(String, String)> = self.store.read(|sql| {
            sql.query_opt(
                "SELECT body, updated_at FROM memory_status WHERE project_id IS ?1 AND tenant = ?2",
                args![project, tenant],
            )?
            .map(|r| Ok::<_, MemoryError>((r.get(0)?, r.get(1)?)))
            .transpose()
        })?;
        Ok(row.map(|(body, at)| StatusSlot::new(tenant, &body, &at)))
    }

    /// Counts an injection of an entry by proactive memory.
    /// Counts one injection of each entry in `ids` (what a hook put in front of a model).
    pub fn count_injections(&self, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut index = self.lock();
        self.tx(|tx| {
            for id in ids {
                count_injection(tx, id)?;
            }
            Ok(())
        })?;
        self.catch_up(&mut index)?;
        Ok(())
    }

    pub(crate) fn bump_injections(&self, id: &str) -> Result<i64> {
        let mut index = self.lock();
        let count = self.tx(|tx| {
            count_injection(tx, id)?;
            Ok(tx
                .value(
                    "SELECT injections FROM memory_nodes WHERE id = ?1",
                    args![id],
                )?
                .unwrap_or(0))
        })?;
        self.catch_up(&mut index)?;
        Ok(count)
    }

    /// Every current untenanted entry visible here, as assistant.json notes.
    pub fn export_notes(&self) -> Result<Vec<Note>> {
        let scope = self.scope("");
        self.read(|index| {
            index
                .nodes()
                .map(|(_, n)| n)
                .filter(|n| n.kind.is_entry() && n.is_current() && scope.sees(n.project, &n.tenant))
                .map(notes::from_node)
                .collect()
        })
    }

    /// Imports notes (assistant.json format) in one transaction, reporting (done, total).
    pub fn import_notes(
        &self,
        notes: &[Note],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<Written>> {
        let batch = Batch {
            mark: None,
            progress: Some(progress),
        };
        self.write_batch(notes.iter().map(notes::to_entry).collect(), batch)
    }

    /// Reads notes from an assistant.json file.
    pub fn read_notes(path: &Path) -> Result<Vec<Note>> {
        notes::read(path)
    }

    /// Writes notes to a file in assistant.json format (atomically: temp file, then rename).
    pub fn write_notes(path: &Path, notes: &[Note]) -> Result<()> {
        notes::write(path, notes)
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
    /// The kind of the entry deleted (`status` for a status slot), `None` when there was none.
    pub kind: Option<String>,
    /// Entries the tenant sees now.
    pub fact_count: usize,
}

/// A tenant's status slot.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct StatusSlot {
    /// `proactive-status:<tenant|global>`.
    pub id: String,
    pub tenant_id: Option<String>,
    pub body: String,
    pub updated_at: String,
}

impl StatusSlot {
    fn new(tenant: &str, body: &str, updated_at: &str) -> StatusSlot {
        let slot = if tenant.is_empty() { "global" } else { tenant };
        StatusSlot {
            id: format!("proactive-status:{slot}"),
            tenant_id: (!tenant.is_empty()).then(|| tenant.to_string()),
            body: body.to_string(),
            updated_at: updated_at.to_string(),
        }
    }
}

impl Memory {
    /// Assembles the layered briefing for a query (the `car_context` prompt).
    pub fn context(&self, request: &ContextRequest) -> Result<AssembledContext> {
        let scope = self.scope(&request.tenant);
        self.read(|index| context::assemble(index, &scope, request))
    }
}

/// The kinds `memory_query` returns.
const ENTRY_KINDS: &[Kind] = &[
    Kind::Pattern,
    Kind::Constraint,
    Kind::Knowledge,
    Kind::Procedural,
];

/// The top `k` current entries of a scope for a query, each with why it was found.
fn hits(index: &Index, scope: &Scope, query: &str, k: usize) -> Vec<QueryHit> {
    hits_of(index, scope, query, ENTRY_KINDS, k)
}

fn hits_of(index: &Index, scope: &Scope, query: &str, kinds: &[Kind], k: usize) -> Vec<QueryHit> {
    let filter = retrieve::Filter { scope, kinds };
    let asked = retrieve::Asked::new(index, query);
    retrieve::retrieve(index, query, &filter, k)
        .into_iter()
        .filter_map(|hit| {
            let n = index.node(hit.slot)?;
            let via = hit.via.as_ref().and_then(|via| {
                let through = index.node(via.slot)?;
                Some(ViaEntry {
                    id: through.id.clone(),
                    subject: through.subject.clone(),
                    through: match &via.bridge {
                        retrieve::Bridge::Term(term) => term.clone(),
                        retrieve::Bridge::Link(kind) => kind.as_str().to_string(),
                    },
                })
            });
            Some(QueryHit {
                id: n.id.clone(),
                subject: n.subject.clone(),
                body: n.body.clone(),
                kind: n.kind,
                activation: (hit.activation * 10_000.0).round() / 10_000.0,
                why: Why {
                    matched: retrieve::matched_terms(index, &asked, n),
                    meaning: hit.meaning.map(|m| (f64::from(m) * 100.0).round() / 100.0),
                    via,
                },
            })
        })
        .collect()
}

/// One more injection of entry `id` (a change the index replays).
fn count_injection(tx: &dyn Sql, id: &str) -> Result<()> {
    tx.execute(
        "UPDATE memory_nodes SET injections = injections + 1 WHERE id = ?1",
        args![id],
    )?;
    tx.execute("INSERT INTO memory_changes(node_id) VALUES (?1)", args![id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_processes() -> (tempfile::TempDir, Memory, Memory) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("car.db");
        let root = dir.path().join("project");
        let a = Memory::open(Arc::new(Store::open(&db).unwrap()), Some(&root), None).unwrap();
        let b = Memory::open(Arc::new(Store::open(&db).unwrap()), Some(&root), None).unwrap();
        (dir, a, b)
    }

    fn ids(hits: &[QueryHit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    #[test]
    fn a_crew_embeds_every_text_in_order() {
        let rows: Vec<(String, String)> = (0..7)
            .map(|i| {
                (
                    format!("fact-{i}"),
                    format!("fact {i}: the payments service pages team {i}"),
                )
            })
            .collect();
        let alone: Vec<embed::Vector> = rows.iter().map(|(_, text)| embed_one(text)).collect();
        assert!(alone.windows(2).all(|w| w[0] != w[1]), "the texts differ");
        for size in [1, 2, 3, 9] {
            let crew = Crew::new(size);
            assert_eq!(crew.embed(&rows), alone, "a crew of {size}");
            assert!(crew.embed(&[]).is_empty());
        }
    }

    #[test]
    fn the_embedder_waits_for_writes_to_pause_but_not_for_ever() {
        let embedder = Embedder::default();
        let wrote_at = |at: std::time::Instant| {
            embedder.state.lock().unwrap().last_write = Some(at);
        };
        // A write just now: it waits for a quiet spell.
        wrote_at(std::time::Instant::now());
        let began = std::time::Instant::now();
        embedder.wait_for_quiet();
        assert!(began.elapsed() >= EMBED_QUIET, "{:?}", began.elapsed());
        // Writes that never pause (the last one is always "now"): it gives up waiting.
        wrote_at(std::time::Instant::now() + std::time::Duration::from_secs(3600));
        let began = std::time::Instant::now();
        embedder.wait_for_quiet();
        assert!(began.elapsed() >= EMBED_PATIENCE, "{:?}", began.elapsed());
    }

    #[test]
    fn a_query_that_cannot_wait_leaves_a_stale_index_to_the_one_that_can() {
        let (_dir, a, b) = two_processes();
        // a embeds before its write returns: no vector (and change) of a background embedder
        // lands between b's queries below.
        a.embed_on_write();
        a.write(NewEntry::new(
            Kind::Pattern,
            "release",
            "release on tuesdays",
        ))
        .unwrap();
        // b has not caught up with a's write: the quick path declines rather than answer
        // from a stale index, and the waiting path catches up.
        assert!(b.query_now("release", "", 5).is_none());
        assert_eq!(ids(&b.query("release", "", 5).unwrap()), ["fact-1"]);
        let now = b.query_now("release", "", 5).unwrap().unwrap();
        assert_eq!(ids(&now), ["fact-1"]);
        // Held by a writer: it declines too.
        let held = b.lock();
        assert!(b.query_now("release", "", 5).is_none());
        drop(held);
        assert!(b.query_now("release", "", 5).is_some());
    }

    #[test]
    fn a_common_term_still_counts_for_candidates_found_by_rarer_ones() {
        // "alpha" finds more candidates than retrieval keeps (1,024); "common" is in so many
        // entries that it is checked by its bits, not its list. Among the alpha entries, those
        // that also say "common" must rank first.
        let memory = Memory::in_memory().unwrap();
        let mut entries = Vec::new();
        for i in 0..1_200 {
            let body = if i % 2 == 0 {
                "alpha common"
            } else {
                "alpha plain"
            };
            entries.push(NewEntry::new(Kind::Pattern, &format!("item {i}"), body));
        }
        for i in 0..3_000 {
            entries.push(NewEntry::new(
                Kind::Pattern,
                &format!("other {i}"),
                "common filler",
            ));
        }
        memory.write_entries(entries).unwrap();
        let hits = memory.query("alpha common", "", 20).unwrap();
        assert_eq!(hits.len(), 20);
        for hit in &hits {
            assert_eq!(hit.body, "alpha common", "{hit:?}");
        }
    }

    use crate::team::testing::{on_both_stores, TestStore as Stores};

    impl Stores {
        fn open(&self) -> Memory {
            Memory::open(self.store(), self.project_root().as_deref(), None).unwrap()
        }
    }

    /// Waits (up to 10 s) until `seen` holds: another PostgreSQL instance learns of a write
    /// when its notification arrives, not at once.
    fn eventually(what: &str, mut seen: impl FnMut() -> bool) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !seen() {
            assert!(std::time::Instant::now() < until, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    on_both_stores!(
        the_background_embedder_takes_what_a_write_wrote_and_a_start_takes_the_rest,
        |stores: &Stores| {
            let (a, b) = (stores.open(), stores.open());
            let has_vector = |id: &str| -> bool {
                a.store()
                    .read(|sql| {
                        sql.value::<i64>(
                            "SELECT count(*) FROM memory_vectors WHERE node_id = ?1",
                            args![id],
                        )
                    })
                    .unwrap()
                    .unwrap_or(0)
                    > 0
            };
            // An entry of an older release: written, then its vector taken away.
            a.embed_on_write();
            a.write(NewEntry::new(
                Kind::Pattern,
                "release",
                "release on tuesdays",
            ))
            .unwrap();
            assert!(has_vector("fact-1"));
            a.store()
                .transaction::<_, MemoryError>(|tx| {
                    tx.execute("DELETE FROM memory_vectors", args![])?;
                    Ok(())
                })
                .unwrap();
            // b's write returns before its entry is embedded; its embedder embeds that entry and
            // does not walk every entry for others.
            let written = b
                .write(NewEntry::new(
                    Kind::Pattern,
                    "deploys",
                    "deploys need a canary",
                ))
                .unwrap();
            eventually("the write's entry embedded", || has_vector(&written.id));
            assert!(!has_vector("fact-1"));
            assert_eq!(missing_vectors(b.store()).unwrap(), 1);
            // Starting up looks at every entry.
            b.warm().unwrap();
            eventually("the older entry embedded", || has_vector("fact-1"));
            assert_eq!(missing_vectors(b.store()).unwrap(), 0);
        }
    );

    on_both_stores!(
        another_instance_sees_writes_supersessions_and_deletes,
        |stores: &Stores| {
            let (a, b) = (stores.open(), stores.open());
            assert!(b.query("release", "", 5).unwrap().is_empty());
            a.write(NewEntry::new(
                Kind::Pattern,
                "release",
                "release on tuesdays",
            ))
            .unwrap();
            let found = |ids_now: &[&str]| ids(&b.query("release", "", 5).unwrap()) == ids_now;
            eventually("b sees fact-1", || found(&["fact-1"]));
            let w = a
                .write(NewEntry::new(
                    Kind::Pattern,
                    "Release",
                    "release on thursdays",
                ))
                .unwrap();
            assert_eq!(w.superseded, ["fact-1"]);
            eventually("b sees the correction", || found(&["fact-2"]));
            assert_eq!(b.entry_count("").unwrap(), 1);
            a.delete("fact-2", "").unwrap();
            // Deleting the correction makes the old fact current again, in both.
            eventually("b sees the delete", || found(&["fact-1"]));
            assert_eq!(b.entry_count("").unwrap(), 1);
            assert_eq!(a.entry_count("").unwrap(), 1);
            // A third, opened now, loads the same graph from the store.
            let c = stores.open();
            assert_eq!(ids(&c.query("release", "", 5).unwrap()), ["fact-1"]);
            assert_eq!(c.history_of("fact-1", "").unwrap().len(), 0);
        }
    );

    on_both_stores!(
        superseding_a_premise_flags_what_depended_on_it,
        |stores: &Stores| {
            let memory = stores.open();
            memory
                .write(NewEntry::new(Kind::Pattern, "budget", "$200,000 available"))
                .unwrap();
            let mut derived = NewEntry::new(
                Kind::Pattern,
                "decision",
                "approved $150,000, $50,000 remaining",
            );
            derived.depends_on = vec!["budget".into()];
            memory.write(derived).unwrap();
            let mut correction = NewEntry::new(Kind::Pattern, "budget corrected", "$120,000 total");
            correction.supersedes = vec!["budget".into()];
            let written = memory.write(correction).unwrap();
            assert_eq!(written.superseded, ["fact-1"]);
            assert_eq!(written.invalidated, ["fact-2"]);
            let context = memory
                .context(&ContextRequest::new("remaining budget"))
                .unwrap();
            for line in context.text.lines() {
                if line.contains("$200,000") || line.contains("$50,000") {
                    assert!(
                        line.contains(OUTDATED_MARK),
                        "stale value on a current line: {line}"
                    );
                }
            }
            assert!(context
                .text
                .contains("- [fact-3] budget corrected: $120,000 total"));
            assert!(context.text.contains("RECALCULATE [fact-2]"));
            // Another instance reads the same flags from the store.
            let other = stores.open();
            let node = other.get("fact-2", "").unwrap().unwrap();
            assert!(node.needs_review(), "{node:?}");
        }
    );

    on_both_stores!(
        a_batch_is_planned_as_if_each_entry_were_written_alone,
        |stores: &Stores| {
            let memory = stores.open();
            let mut derived = NewEntry::new(
                Kind::Pattern,
                "payout window",
                "payouts close at 18:00 on the ledger cutoff",
            );
            derived.depends_on = vec!["ledger cutoff".into()];
            let mut explicit = NewEntry::new(
                Kind::Pattern,
                "ledger cutoff v3",
                "the ledger cutoff is 17:30",
            );
            explicit.supersedes = vec!["ledger cutoff".into()];
            let written = memory
                .write_entries(vec![
                    NewEntry::new(
                        Kind::Pattern,
                        "ledger cutoff",
                        "the ledger cutoff is 17:00 UTC",
                    ),
                    NewEntry::new(
                        Kind::Pattern,
                        "Ledger cutoff ",
                        "the ledger cutoff is 16:00 UTC",
                    ),
                    derived,
                    explicit,
                ])
                .unwrap();
            let made: Vec<&str> = written.iter().map(|w| w.id.as_str()).collect();
            assert_eq!(made, ["fact-1", "fact-2", "fact-3", "fact-4"]);
            // The second replaces the first, in the same transaction.
            assert_eq!(written[1].superseded, ["fact-1"]);
            // The third links to the second (planned before it ran) and depends on it.
            assert!(written[2].links >= 1, "{:?}", written[2]);
            // The fourth replaces the second by subject and flags what depended on it.
            assert_eq!(written[3].superseded, ["fact-2"]);
            assert_eq!(written[3].invalidated, ["fact-3"]);
            // Another instance reads the same graph from the store.
            let other = stores.open();
            assert!(other.get("fact-3", "").unwrap().unwrap().needs_review());
            assert_eq!(
                other
                    .get("fact-1", "")
                    .unwrap()
                    .unwrap()
                    .superseded_by
                    .as_deref(),
                Some("fact-2")
            );
            let found = other.query("when is the ledger cutoff", "", 5).unwrap();
            assert!(!ids(&found).contains(&"fact-1"), "{found:?}");
            assert!(ids(&found).contains(&"fact-4"), "{found:?}");
            let links = other.links_of("fact-3", "", 10).unwrap();
            assert!(!links.is_empty(), "the batch's links are stored");
            // A deleted entry's id is not given again (SQLite keeps every number used).
            memory.delete("fact-4", "").unwrap();
            let next = memory
                .write(NewEntry::new(
                    Kind::Pattern,
                    "refunds",
                    "refunds post nightly",
                ))
                .unwrap();
            if matches!(stores, Stores::Sqlite(_)) {
                assert_eq!(next.id, "fact-5");
            } else {
                assert_ne!(next.id, "fact-4");
            }
        }
    );

    on_both_stores!(
        concurrent_writers_each_get_their_own_entries,
        |stores: &Stores| {
            let memory = Arc::new(stores.open());
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let memory = memory.clone();
                    std::thread::spawn(move || {
                        (0..15)
                            .map(|w| {
                                let subject = format!("writer {t} entry {w}");
                                let written = memory
                                    .write(NewEntry::new(
                                        Kind::Knowledge,
                                        &subject,
                                        "a note of the storm",
                                    ))
                                    .unwrap();
                                assert_eq!(written.subject, subject);
                                written.id
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut ids: Vec<String> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), 120, "every write has an id of its own");
            let other = stores.open();
            assert_eq!(other.entry_count("").unwrap(), 120);
            for id in &ids {
                assert!(other.get(id, "").unwrap().is_some(), "{id}");
            }
        }
    );

    #[test]
    fn a_groups_rows_go_in_chunks_of_powers_of_two() {
        let sizes = |n: usize| {
            let items = vec![0u8; n];
            store::sql::chunks(&items)
                .map(<[u8]>::len)
                .collect::<Vec<_>>()
        };
        assert!(sizes(0).is_empty());
        assert_eq!(sizes(1), [1]);
        assert_eq!(sizes(13), [8, 4, 1]);
        assert_eq!(sizes(32), [32]);
        assert_eq!(sizes(70), [32, 32, 4, 2]);
    }

    on_both_stores!(
        a_large_group_is_written_as_its_plan_says,
        |stores: &Stores| {
            let memory = stores.open();
            memory
                .write(NewEntry::new(
                    Kind::Pattern,
                    "anchor",
                    "the queue drains nightly",
                ))
                .unwrap();
            // 45 entries in one group (chunks of 32, 8, 4 and 1): every third repeats the
            // subject before it and replaces that entry, pairs link through a rare word, and
            // one names a target (the rows before it are sent first, then it is looked up).
            let mut entries: Vec<NewEntry> = (0..45)
                .map(|i| {
                    let subject = if i % 3 == 2 {
                        format!("topic {}", i - 1)
                    } else {
                        format!("topic {i}")
                    };
                    // Entries 2k and 2k + 1 share a word no other entry has.
                    let rare: String = [b'a' + (i / 2 / 26) as u8, b'a' + (i / 2 % 26) as u8]
                        .iter()
                        .map(|&b| b as char)
                        .collect();
                    NewEntry::new(Kind::Pattern, &subject, &format!("the zz{rare} queue note"))
                })
                .collect();
            entries[40].depends_on = vec!["anchor".into()];
            let written = memory.write_entries(entries).unwrap();
            assert_eq!(written.len(), 45);
            let other = stores.open();
            for (i, w) in written.iter().enumerate() {
                let here = memory.get(&w.id, "").unwrap().unwrap();
                let there = other.get(&w.id, "").unwrap().unwrap();
                assert_eq!(
                    here.seq, there.seq,
                    "{}: the index holds the database's number",
                    w.id
                );
                assert_eq!(here.superseded_by, there.superseded_by, "{}", w.id);
                if i % 3 == 2 {
                    assert_eq!(w.superseded, [written[i - 1].id.clone()]);
                    assert_eq!(there.superseded_by, None);
                }
                let related = other
                    .links_of(&w.id, "", 100)
                    .unwrap()
                    .into_iter()
                    .filter(|l| l.outgoing && l.kind == EdgeKind::RelatedTo)
                    .count();
                assert_eq!(w.links, related, "{}: links reported as made", w.id);
            }
            assert!(written.iter().any(|w| w.links > 0));
            assert!(other
                .links_of(&written[40].id, "", 100)
                .unwrap()
                .iter()
                .any(|l| l.outgoing && l.kind == EdgeKind::DependsOn));
            assert_eq!(other.entry_count("").unwrap(), 1 + 45 - 15);
            assert_eq!(
                memory.entry_count("").unwrap(),
                other.entry_count("").unwrap()
            );
        }
    );

    on_both_stores!(
        the_embedders_vectors_go_straight_into_its_processes_index,
        |stores: &Stores| {
            let memory = stores.open();
            memory.warm().unwrap();
            let written = memory
                .write_entries(vec![
                    NewEntry::new(Kind::Pattern, "deploys", "deploys need a canary"),
                    NewEntry::new(Kind::Pattern, "schema", "migrations need sign-off"),
                    NewEntry::new(Kind::Knowledge, "pager", "the pager rotates weekly"),
                ])
                .unwrap();
            let head = || memory.store().memory_head().unwrap();
            // Nothing reads or writes meanwhile, so only the embedder can bring the index up
            // to the vectors' changes; a catch-up would have to read the entries again.
            eventually("the index holds every change, the embedder's too", || {
                missing_vectors(memory.store()).unwrap() == 0
                    && memory.index.read().unwrap().last_change() == head()
            });
            let index = memory.index.read().unwrap();
            for w in &written {
                let slot = index.slot_of(&w.id).unwrap();
                assert!(index.has_vector(slot), "{} has its vector", w.id);
            }
        }
    );

    on_both_stores!(a_failed_batch_writes_nothing, |stores: &Stores| {
        let memory = stores.open();
        let good = NewEntry::new(Kind::Pattern, "a", "b");
        let bad = NewEntry::new(Kind::Pattern, "c", " ");
        assert!(memory.write_entries(vec![good, bad]).is_err());
        assert_eq!(memory.entry_count("").unwrap(), 0);
        assert_eq!(stores.open().entry_count("").unwrap(), 0);
    });

    on_both_stores!(
        status_slots_retractions_injections_and_tenants,
        |stores: &Stores| {
            let memory = stores.open();
            assert!(memory.status("").unwrap().is_none());
            memory.update_status("", "deploying").unwrap();
            memory.update_status("", "deployed").unwrap();
            memory.update_status("alice", "reviewing").unwrap();
            let other = stores.open();
            assert_eq!(other.status("").unwrap().unwrap().body, "deployed");
            assert_eq!(other.status("alice").unwrap().unwrap().body, "reviewing");
            assert!(other.delete("proactive-status:global", "").unwrap().deleted);
            assert!(memory.status("").unwrap().is_none());

            let fact = memory
                .write(NewEntry::new(
                    Kind::Pattern,
                    "cache",
                    "the cache is warm at 9",
                ))
                .unwrap();
            let mut private = NewEntry::new(Kind::Pattern, "cache", "alice's cache note");
            private.tenant = "alice".into();
            memory.write(private).unwrap();
            assert_eq!(
                ids(&memory.query("cache warm", "", 5).unwrap()),
                [fact.id.as_str()]
            );
            assert_eq!(memory.query("cache note", "alice", 5).unwrap().len(), 1);
            assert_eq!(
                memory.invalidate("cache", "", "measured wrong").unwrap(),
                vec![fact.id.clone()]
            );
            memory
                .count_injections(std::slice::from_ref(&fact.id))
                .unwrap();
            assert_eq!(memory.bump_injections(&fact.id).unwrap(), 2);
            eventually("the other instance sees the retraction", || {
                other.get(&fact.id, "").unwrap().is_some_and(|n| {
                    n.invalidated_note.as_deref() == Some("measured wrong") && n.injections == 2
                })
            });
            let notes = other.export_notes().unwrap();
            assert_eq!(notes.len(), 1, "{notes:?}");
        }
    );

    /// Distractors that share the question's words (and, some, the bridge's name) but not the
    /// named thing that ties the question to its answer.
    fn bridge_memory() -> (Memory, String, String) {
        let memory = Memory::in_memory().unwrap();
        let words = [
            "worker",
            "invoice",
            "rendering",
            "depends",
            "runtime",
            "queue",
            "retries",
            "cache",
            "export",
            "ledger",
            "payout",
            "schema",
            "deploy",
            "alerts",
            "tokens",
            "cluster",
            "latency",
            "budget",
            "staging",
            "metrics",
            "logs",
            "config",
            "release",
            "tests",
        ];
        let n = words.len();
        let mut entries: Vec<NewEntry> = (0..2000)
            .map(|i| {
                let (a, b, c) = (words[i % n], words[(i / n) % n], words[(i / 7) % n]);
                let extra = if i % 397 == 0 {
                    " The Falcon room is booked."
                } else {
                    ""
                };
                NewEntry::new(
                    Kind::Pattern,
                    &format!("note {i}"),
                    &format!("The {a} {b} {c} batch number {i} was tuned.{extra}"),
                )
            })
            .collect();
        entries.push(NewEntry::new(
            Kind::Pattern,
            "invoice rendering worker codename",
            "Falcon is the codename of the invoice rendering worker.",
        ));
        entries.push(NewEntry::new(
            Kind::Pattern,
            "Falcon stack",
            "Falcon runs headless Chromium and needs assets/fonts embedded.",
        ));
        let written = memory.write_entries(entries).unwrap();
        let bridge = written[written.len() - 2].id.clone();
        let answer = written[written.len() - 1].id.clone();
        (memory, bridge, answer)
    }

    #[test]
    fn a_fact_is_found_through_the_named_thing_that_bridges_it_to_the_question() {
        let (memory, bridge, answer) = bridge_memory();
        let hits = memory
            .query(
                "what does the invoice rendering worker depend on at runtime?",
                "",
                5,
            )
            .unwrap();
        let Some(found) = hits.iter().find(|h| h.id == answer) else {
            panic!("the answer is not in the top 5: {hits:#?}");
        };
        assert!(found.why.matched.is_empty(), "{:?}", found.why);
        let via = found.why.via.as_ref().expect("reached through the bridge");
        assert_eq!(
            (via.id.as_str(), via.through.as_str()),
            (bridge.as_str(), "falcon")
        );
        assert_eq!(found.why.to_string(), format!("via {bridge} \"falcon\""));
        let direct = hits
            .iter()
            .find(|h| h.id == bridge)
            .expect("the bridge is in the top 5");
        assert_eq!(direct.why.matched, ["invoice", "rendering", "worker"]);
        assert!(direct.why.via.is_none());
    }

    /// A number, a version or a single character links nothing: facts that share "0" (of
    /// "canary 0") or "2.1" are not reached through it.
    #[test]
    fn numbers_versions_and_single_letters_bridge_nothing() {
        use super::retrieve::worth_a_name;
        for weak in ["0", "42", "1.2.3", "v2", "v1.4", "x"] {
            assert!(!worth_a_name(weak), "{weak}");
        }
        for name in ["falcon", "s3", "k8s", "invoice_svc", "v2beta", "ab"] {
            assert!(worth_a_name(name), "{name}");
        }
        let memory = Memory::in_memory().unwrap();
        let mut entries = vec![NewEntry::new(
            Kind::Pattern,
            "service 42 deploys",
            "Service 42 deploys with a canary 0 stage first, since release 2.1.",
        )];
        for (i, topic) in ["billing", "search", "mailer", "ledger"].iter().enumerate() {
            entries.push(NewEntry::new(
                Kind::Pattern,
                &format!("{topic} queue"),
                &format!("The {topic} queue drains batch 0 nightly, since release 2.{i}."),
            ));
        }
        memory.write_entries(entries).unwrap();
        let hits = memory
            .query("how do we deploy service 42 with canary", "", 5)
            .unwrap();
        let walked: Vec<_> = hits.iter().filter_map(|h| h.why.via.as_ref()).collect();
        assert!(
            walked.is_empty(),
            "nothing is reached through a number: {hits:#?}"
        );
    }

    #[test]
    fn a_reminder_stays_silent_when_no_entry_is_about_the_request() {
        let (memory, bridge, _) = bridge_memory();
        let mut request = InterveneRequest {
            query: Some("write a haiku about autumn".into()),
            ..InterveneRequest::default()
        };
        request.trigger.tool_error = true;
        let silent = memory.intervene(&request).unwrap();
        assert_eq!(silent.decision, proactive::Choice::Silent);
        assert!(
            silent.reason.as_deref().unwrap_or("").contains("no"),
            "{silent:?}"
        );
        request.query = Some("about to edit the invoice rendering worker config".into());
        let reminded = memory.intervene(&request).unwrap();
        assert_eq!(reminded.decision, proactive::Choice::Inject, "{reminded:?}");
        assert_eq!(reminded.selected.map(|s| s.id), Some(bridge));
    }

    #[test]
    fn a_fresh_process_starts_from_the_snapshot_and_never_from_another_databases() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("car.db");
        let root = dir.path().join("project");
        let open = || Memory::open(Arc::new(Store::open(&db).unwrap()), Some(&root), None).unwrap();
        let entries = |prefix: &str| -> Vec<NewEntry> {
            (0..index::SNAPSHOT_MIN_LIVE + 10)
                .map(|i| {
                    NewEntry::new(
                        Kind::Pattern,
                        &format!("{prefix} {i}"),
                        &format!("{prefix} body {i} about ledgers"),
                    )
                })
                .collect()
        };
        let first = open();
        first.write_entries(entries("alpha")).unwrap();
        let snapshot = db.with_extension("memory-index");
        assert!(snapshot.exists(), "a large import writes the snapshot");
        let loads = || {
            let store = Store::open(&db).unwrap();
            let conn = store.conn();
            index::Index::load_snapshot(&snapshot, &*conn).is_some()
        };
        assert!(loads(), "the snapshot is of this database");
        // The same database where another node holds the snapshot's last change (a log
        // rewritten under it) is not what the snapshot was taken of.
        {
            let store = Store::open(&db).unwrap();
            let last = "(SELECT max(seq) FROM memory_changes)";
            let node: String = store
                .conn()
                .query_row(
                    &format!("SELECT node_id FROM memory_changes WHERE seq = {last}"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            let set = |node: &str| {
                store
                    .conn()
                    .execute(
                        &format!("UPDATE memory_changes SET node_id = ?1 WHERE seq = {last}"),
                        [node],
                    )
                    .unwrap();
            };
            set("elsewhere");
            assert!(!loads(), "another node at the snapshot's last change");
            set(&node);
            assert!(loads());
        }
        // Another process starts from it, then replays what changed since.
        let second = open();
        first
            .write(NewEntry::new(
                Kind::Pattern,
                "falcon",
                "the falcon ledger closes at noon",
            ))
            .unwrap();
        let found = second
            .query("when does the falcon ledger close", "", 1)
            .unwrap();
        assert_eq!(found[0].subject, "falcon");
        assert_eq!(
            second.query("alpha 7", "", 1).unwrap()[0].subject,
            first.query("alpha 7", "", 1).unwrap()[0].subject
        );
        // A database rebuilt with as many changes is not the one the snapshot was taken of.
        drop((first, second));
        let kept = std::fs::read(&snapshot).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.path().join(format!("car.db{suffix}")));
        }
        let rebuilt = open();
        let mut other = entries("beta");
        other.push(NewEntry::new(
            Kind::Pattern,
            "heron",
            "the heron ledger closes at noon",
        ));
        rebuilt.write_entries(other).unwrap();
        drop(rebuilt);
        std::fs::write(&snapshot, kept).unwrap();
        assert!(!loads(), "a snapshot of another database");
        let fresh = open();
        assert!(fresh
            .query("alpha 7", "", 5)
            .unwrap()
            .iter()
            .all(|h| !h.subject.starts_with("alpha")));
        assert_eq!(fresh.query("beta 7", "", 1).unwrap()[0].subject, "beta 7");
        // A damaged snapshot is ignored.
        std::fs::write(&snapshot, b"garbage").unwrap();
        assert!(!loads());
        assert_eq!(open().query("beta 7", "", 1).unwrap()[0].subject, "beta 7");
    }
}
