//! The execution log: one row per tool call, and the idempotency record behind
//! `_meta["car/request_id"]`.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::gate_log;
use crate::store::sql::{args, Sql};
use crate::store::{self, Store};

/// How a call ended (`running` until it does), stored as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecStatus {
    Running,
    Ok,
    Error,
    Denied,
    Cancelled,
    Timeout,
    /// Let through with a warning (a policy hook's decision).
    Warned,
}

impl ExecStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Running => "running",
            ExecStatus::Ok => "ok",
            ExecStatus::Error => "error",
            ExecStatus::Denied => "denied",
            ExecStatus::Cancelled => "cancelled",
            ExecStatus::Timeout => "timeout",
            ExecStatus::Warned => "warned",
        }
    }

    /// A stored status; an unknown one (a newer CAR's) reads as `error`.
    fn parse(text: &str) -> ExecStatus {
        match text {
            "ok" => ExecStatus::Ok,
            "denied" => ExecStatus::Denied,
            "cancelled" => ExecStatus::Cancelled,
            "timeout" => ExecStatus::Timeout,
            "running" => ExecStatus::Running,
            "warned" => ExecStatus::Warned,
            _ => ExecStatus::Error,
        }
    }
}

/// A finished call recorded under an idempotency key.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub execution_id: String,
    pub status: ExecStatus,
    pub result: Option<Value>,
    pub error: Option<String>,
}

/// What starting a keyed call found.
pub enum Claim {
    /// This call owns the key; run it.
    Fresh,
    /// The key was used before; here is what that call returned.
    Replay(Recorded),
}

/// The key under which a non-idempotent call's result is kept: the tool and the request id,
/// and on a team server the author too (two people's agents numbering their requests alike
/// must not be answered with each other's results).
pub fn idem_key(tool: &str, author: Option<&str>, request_id: &str) -> String {
    match author {
        Some(author) => format!("{tool}\u{1f}{author}\u{1f}{request_id}"),
        None => format!("{tool}\u{1f}{request_id}"),
    }
}

/// A new call that wants to own an idempotency key.
pub struct KeyedCall {
    pub id: String,
    pub tool: String,
    pub request_id: String,
    pub key: String,
    pub face: String,
    /// A `running` owner that started before this is taken to be gone (its process died).
    pub abandoned_before: String,
}

/// Inserts a `running` row that owns the key, or returns the call that already owns it.
pub fn claim(store: &Store, call: &KeyedCall) -> store::Result<Claim> {
    let KeyedCall {
        id,
        tool,
        request_id,
        key,
        face,
        abandoned_before,
    } = call;
    store.transaction(|tx| {
        let existing = tx
            .query_opt(
                "SELECT id, status, result, error, started_at FROM executions WHERE idem_key = ?1",
                args![key],
            )?
            .map(|r| -> store::Result<_> {
                Ok((
                    Recorded {
                        execution_id: r.get(0)?,
                        status: ExecStatus::parse(&r.get::<String>(1)?),
                        result: r
                            .get::<Option<String>>(2)?
                            .and_then(|text| serde_json::from_str(&text).ok()),
                        error: r.get(3)?,
                    },
                    r.get::<String>(4)?,
                ))
            })
            .transpose()?;
        match existing {
            Some((found, started_at))
                if found.status == ExecStatus::Running
                    && started_at.as_str() < abandoned_before.as_str() =>
            {
                tx.execute(
                    "UPDATE executions SET status = 'error', idem_key = NULL,
                         error = 'abandoned: the process running it stopped before it finished'
                     WHERE id = ?1",
                    args![found.execution_id],
                )?;
            }
            Some((found, _)) => return Ok(Claim::Replay(found)),
            None => {}
        }
        tx.execute(
            "INSERT INTO executions(id, tool, status, request_id, idem_key, face, started_at)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6)",
            args![id, tool, request_id, key, face, store::now()],
        )?;
        Ok(Claim::Fresh)
    })
}

/// The outcome of one finished call, to record.
#[derive(Debug, Clone)]
pub struct Finished {
    pub id: String,
    pub tool: String,
    pub request_id: Option<String>,
    pub face: String,
    pub started_at: String,
    pub status: ExecStatus,
    pub duration_ms: u64,
    pub error: Option<String>,
    /// Kept only for keyed calls, to replay.
    pub result: Option<Value>,
    /// It claimed its idempotency key ([`claim`]): the `running` row the claim inserted is
    /// completed, not inserted.
    pub claimed: bool,
    /// A keyed call that did not complete: its key is given back so the client can retry.
    pub release: bool,
    /// The connection it came through.
    pub session: Option<String>,
    /// The agent that made it.
    pub host: Option<String>,
    /// What it wrote (the id of the entry it created).
    pub subject: Option<String>,
    /// Who made it: the team user whose token it came with (none where CAR serves one person).
    pub author: Option<String>,
}

/// Records a finished call: updates the keyed row, or inserts the row of an unkeyed call.
/// Its row may already be there (the journal's group that held it may have committed before
/// its connection failed, and this is the retry), so it is written over, not doubled.
pub fn finish(store: &Store, done: &Finished) -> store::Result<()> {
    store.append(|tx| finish_all(tx, &[done], true, true))
}

/// The journal's group of finished calls, in one transaction. Unlike [`finish`], a row of a
/// call that claimed no key is new: it is inserted plainly.
fn finish_group(store: &Store, all: &[&Finished]) -> store::Result<()> {
    store.append(|tx| finish_all(tx, all, true, false))
}

/// [`finish`] inside a transaction: the row, and for a keyed call that did not complete
/// (`release`), its key given back so the client can retry.
pub(crate) fn finish_in(tx: &dyn Sql, done: &Finished) -> store::Result<()> {
    finish_all(tx, &[done], false, false)
}

/// The columns one finished call writes, in the order [`finish_all`] binds them.
const FINISHED_COLUMNS: usize = 13;

/// [`finish_in`] for many calls in a few statements (a group the journal commits at once: one
/// round trip to a team database, not one per call, the commit's included when `last`: the
/// transaction's last statements, see [`Sql::query_all_last`]). The rows of calls that
/// claimed no key are new and inserted as they are; a claimed call's completes the `running`
/// row its claim inserted (an insert that may update costs PostgreSQL more); so does every
/// row where `retry` (the rows may have been committed already). Rows go in chunks of a few
/// sizes (see [`crate::store::sql::chunks`]).
fn finish_all(tx: &dyn Sql, all: &[&Finished], last: bool, retry: bool) -> store::Result<()> {
    use crate::store::sql::{chunks, values, Param, Value as SqlValue};
    if all.is_empty() {
        return Ok(());
    }
    let row = |done: &Finished| -> [SqlValue; FINISHED_COLUMNS] {
        [
            done.id.value(),
            done.tool.value(),
            done.status.as_str().value(),
            done.request_id.value(),
            done.face.value(),
            done.started_at.value(),
            (done.duration_ms as i64).value(),
            done.error.value(),
            done.result.as_ref().map(Value::to_string).value(),
            done.session.value(),
            done.host.value(),
            done.subject.value(),
            done.author.value(),
        ]
    };
    let (keyed, fresh): (Vec<&Finished>, Vec<&Finished>) =
        all.iter().partition(|done| done.claimed || retry);
    let mut statements: Vec<(String, Vec<SqlValue>)> = Vec::new();
    for (rows, keyed) in [(&fresh, false), (&keyed, true)] {
        for chunk in chunks(rows) {
            let mut sql = format!(
                "INSERT INTO executions(id, tool, status, request_id, face, started_at, duration_ms,
                     error, result, session, host, subject, author)
                 VALUES {}",
                values(chunk.len(), FINISHED_COLUMNS)
            );
            if keyed {
                sql.push_str(
                    " ON CONFLICT(id) DO UPDATE SET status = excluded.status,
                     duration_ms = excluded.duration_ms, error = excluded.error,
                     result = excluded.result, session = excluded.session, host = excluded.host,
                     subject = excluded.subject, author = excluded.author",
                );
            }
            statements.push((sql, chunk.iter().flat_map(|done| row(done)).collect()));
        }
    }
    for done in all.iter().filter(|d| d.release) {
        statements.push((
            "UPDATE executions SET idem_key = NULL WHERE id = ?1".into(),
            vec![done.id.value()],
        ));
    }
    let params: Vec<Vec<&dyn Param>> = statements
        .iter()
        .map(|(_, values)| values.iter().map(|v| v as &dyn Param).collect())
        .collect();
    let sent: Vec<(&str, &[&dyn Param])> = statements
        .iter()
        .zip(&params)
        .map(|((sql, _), params)| (sql.as_str(), params.as_slice()))
        .collect();
    if last {
        tx.query_all_last(&sent)?;
    } else {
        tx.query_all(&sent)?;
    }
    Ok(())
}

/// Writes finished calls in groups: each caller hands its row to one writer thread and waits
/// for the commit that holds it, and the thread commits every row that queued while it wrote
/// the last group in one transaction. Under load that is one commit for many calls instead of
/// one each (and no worker thread blocked on the database); alone, a call waits one commit.
pub struct Journal {
    queue: std::sync::Mutex<Option<std::sync::mpsc::Sender<Pending>>>,
    store: std::sync::Arc<Store>,
}

struct Pending {
    done: Finished,
    committed: tokio::sync::oneshot::Sender<store::Result<()>>,
}

/// The most rows one commit takes.
const GROUP: usize = 256;

impl Journal {
    pub fn new(store: std::sync::Arc<Store>) -> Journal {
        Journal {
            queue: std::sync::Mutex::new(None),
            store,
        }
    }

    /// Records `done`; returns once it is committed.
    pub async fn record(&self, done: Finished) -> store::Result<()> {
        let (committed, wait) = tokio::sync::oneshot::channel();
        let pending = Pending { done, committed };
        let pending = match self.sender() {
            Some(queue) => match queue.send(pending) {
                Ok(()) => return wait.await.unwrap_or_else(|_| Err(gone())),
                Err(std::sync::mpsc::SendError(pending)) => pending,
            },
            None => pending,
        };
        // No writer thread (it could not start, or it stopped): write it here.
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || finish(&store, &pending.done))
            .await
            .map_err(|join| store::StoreError::Task(join.to_string()))?
    }

    /// The writer's queue, starting the writer on first use.
    fn sender(&self) -> Option<std::sync::mpsc::Sender<Pending>> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if queue.is_none() {
            let (send, receive) = std::sync::mpsc::channel::<Pending>();
            let store = self.store.clone();
            let started = std::thread::Builder::new()
                .name("car-journal".into())
                .spawn(move || {
                    // Its own connection to the file, so a commit never holds up the
                    // process's readers (WAL lets them read beside it); an in-memory store
                    // has only the one.
                    let own = store.path().and_then(|path| Store::open(path).ok());
                    write_groups(own.as_ref().unwrap_or(&store), &receive)
                });
            if started.is_ok() {
                *queue = Some(send);
            }
        }
        queue.clone()
    }
}

/// The writer thread: until every sender is gone, commits what queued, a group at a time.
fn write_groups(store: &Store, queue: &std::sync::mpsc::Receiver<Pending>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < GROUP {
            match queue.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        // A panic here must not take the queue's callers with it: they get an error, and the
        // writer goes on with the next group.
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let rows: Vec<&Finished> = group.iter().map(|p| &p.done).collect();
            finish_group(store, &rows)
        }))
        .unwrap_or_else(|_| {
            Err(store::StoreError::Task(
                "the execution log's writer panicked".into(),
            ))
        });
        match written {
            Ok(()) => {
                for pending in group {
                    let _ = pending.committed.send(Ok(()));
                }
            }
            // The database stayed locked past the busy timeout: trying each row again would
            // make the last caller wait that long once per row before it. All get the error.
            Err(e) if e.is_busy() => {
                for pending in group {
                    let _ = pending
                        .committed
                        .send(Err(store::StoreError::Task(e.to_string())));
                }
            }
            // One bad row must not fail the others: each on its own, with its own answer. The
            // group may have committed before the error (a team database's connection lost
            // after its COMMIT): `finish` writes over a row that is there.
            Err(_) => {
                for pending in group {
                    let _ = pending.committed.send(finish(store, &pending.done));
                }
            }
        }
    }
}

fn gone() -> store::StoreError {
    store::StoreError::Task("the execution log's writer stopped".into())
}

/// One row of the execution log, as `car executions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub id: String,
    pub tool: String,
    /// How the call ended, `running` until it does.
    pub status: ExecStatus,
    /// The idempotency key it was called with.
    pub request_id: Option<String>,
    /// The face it came through: `cli` or `mcp`.
    pub face: Option<String>,
    pub started_at: String,
    /// Null while it runs.
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
    /// The connection it came through (an MCP session), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The agent that made it (an MCP client's name, a hook's host), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What it wrote (the memory entry it created), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The team user who made it, on a team server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

/// Which executions [`recent`] returns: every field given must match.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    pub tool: Option<&'a str>,
    /// The face it came through (`cli`, `mcp`, `web`, `agent`).
    pub face: Option<&'a str>,
    /// How it ended (`ok`, `error`, `denied`, …; see [`ExecStatus`]).
    pub status: Option<&'a str>,
    /// The connection it came through.
    pub session: Option<&'a str>,
    /// The agent that made it.
    pub host: Option<&'a str>,
    /// What it wrote.
    pub subject: Option<&'a str>,
}

/// The latest executions that `filter` admits, newest first.
pub fn recent(store: &Store, filter: &Filter, limit: usize) -> store::Result<Vec<Execution>> {
    store.read(|sql| {
        sql.query(
            "SELECT id, tool, status, request_id, face, started_at, duration_ms, error, session,
                 host, subject, author
             FROM executions
             WHERE (CAST(?1 AS TEXT) IS NULL OR tool = ?1) AND (CAST(?2 AS TEXT) IS NULL OR face = ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR status = ?3) AND (CAST(?4 AS TEXT) IS NULL OR session = ?4)
               AND (CAST(?5 AS TEXT) IS NULL OR host = ?5) AND (CAST(?6 AS TEXT) IS NULL OR subject = ?6)
             ORDER BY started_at DESC, rowid DESC LIMIT ?7",
            args![
                filter.tool,
                filter.face,
                filter.status,
                filter.session,
                filter.host,
                filter.subject,
                limit
            ],
        )?
        .iter()
        .map(|r| {
            Ok(Execution {
                id: r.get(0)?,
                tool: r.get(1)?,
                status: ExecStatus::parse(&r.get::<String>(2)?),
                request_id: r.get(3)?,
                face: r.get(4)?,
                started_at: r.get(5)?,
                duration_ms: r.get(6)?,
                error: r.get(7)?,
                session: r.get(8)?,
                host: r.get(9)?,
                subject: r.get(10)?,
                author: r.get(11)?,
            })
        })
        .collect()
    })
}

/// The `meta` key holding how far the gate's decision file was read: `<inode>:<offset>`.
const GATE_LOG_MARK: &str = "gate_log";
/// The most bytes read from a decision file at once (it rotates at 8 MiB).
const GATE_LOG_READ: u64 = 16 * 1024 * 1024;

/// A file's identity across renames: its inode on Unix (elsewhere the log never rotates away
/// from under a reader that could tell).
fn file_id(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0
    }
}

/// The complete entries of `file` from `offset`, and the offset after them.
fn gate_entries(mut file: std::fs::File, offset: u64) -> (Vec<gate_log::Entry>, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_err()
        || file.take(GATE_LOG_READ).read_to_end(&mut bytes).is_err()
    {
        return (Vec::new(), offset);
    }
    let (entries, used) = gate_log::parse(&bytes);
    (entries, offset + used as u64)
}

/// Moves the policy gate's decisions written since the last call from its decision file at
/// `path` into the execution log (face `hook`, outcome `denied` or `warned`, the host and its
/// session; the reason and what the call was about, secrets redacted). Safe to call from many
/// processes at once: the lines read and the mark of how far are committed together, so no
/// decision is logged twice or skipped. Returns how many were added.
pub fn ingest_gate_log(store: &Store, path: &std::path::Path) -> store::Result<usize> {
    let current = std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file);
    let read_mark = |conn: &rusqlite::Connection| -> store::Result<Option<(u64, u64)>> {
        let text: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [GATE_LOG_MARK],
                |r| r.get(0),
            )
            .optional()?;
        Ok(text.and_then(|t| {
            let (id, offset) = t.split_once(':')?;
            Some((id.parse().ok()?, offset.parse().ok()?))
        }))
    };
    // The common case, nothing new, without taking the write lock.
    let mark = read_mark(&store.conn())?;
    match (&current, mark) {
        (None, _) => return Ok(0),
        (Some(meta), Some((id, offset))) if file_id(meta) == id && meta.len() == offset => {
            return Ok(0)
        }
        _ => {}
    }
    store.write(|tx| {
        let mark = read_mark(tx)?;
        let Some((file, meta)) = crate::home::open_regular(path) else {
            return Ok(0);
        };
        let id = file_id(&meta);
        let mut entries = Vec::new();
        let start = match mark {
            Some((was, offset)) if was == id => {
                // A file cut shorter than what was read is a new one.
                if meta.len() < offset {
                    0
                } else {
                    offset
                }
            }
            Some((was, offset)) => {
                // Rotated since: the rest of the old file first, if it is still there.
                if let Some((old, old_meta)) = crate::home::open_regular(&gate_log::rotated(path)) {
                    if file_id(&old_meta) == was {
                        entries.extend(gate_entries(old, offset).0);
                    }
                }
                0
            }
            None => 0,
        };
        let (fresh, end) = gate_entries(file, start);
        entries.extend(fresh);
        let redact = |text: &str| crate::policy::secrets::redact(text).into_owned();
        let mut insert = tx.prepare_cached(
            "INSERT INTO executions(id, tool, status, face, started_at, error, session, host)
             VALUES (?1, ?2, ?3, 'hook', ?4, ?5, ?6, ?7)",
        )?;
        for entry in &entries {
            let status = if entry.decision == "deny" {
                ExecStatus::Denied
            } else {
                ExecStatus::Warned
            };
            let error = if entry.summary.is_empty() {
                redact(&entry.reason)
            } else {
                format!("{} (on: {})", redact(&entry.reason), redact(&entry.summary))
            };
            insert.execute(params![
                uuid::Uuid::new_v4().simple().to_string(),
                entry.tool,
                status.as_str(),
                entry.at,
                error,
                entry.session,
                entry.host,
            ])?;
        }
        tx.execute(
            "INSERT INTO meta(key, value) VALUES (?1, ?2)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![GATE_LOG_MARK, format!("{id}:{end}")],
        )?;
        Ok(entries.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(id: &str, abandoned_before: &str) -> KeyedCall {
        KeyedCall {
            id: id.into(),
            tool: "t".into(),
            request_id: "r".into(),
            key: "t\u{1f}r".into(),
            face: "cli".into(),
            abandoned_before: abandoned_before.into(),
        }
    }

    #[test]
    fn a_running_owner_blocks_the_key_until_it_is_abandoned() {
        let store = Store::open_in_memory().unwrap();
        let first = claim(&store, &keyed("a", "2000-01-01T00:00:00.000Z")).unwrap();
        assert!(matches!(first, Claim::Fresh));
        // Still running and recent: the second caller is told so.
        match claim(&store, &keyed("b", "2000-01-01T00:00:00.000Z")).unwrap() {
            Claim::Replay(found) => {
                assert_eq!(found.execution_id, "a");
                assert_eq!(found.status, ExecStatus::Running);
            }
            Claim::Fresh => panic!("the key is owned"),
        }
        // The owner died long ago (started before the cut-off): the key is taken over.
        let later = claim(&store, &keyed("c", "2999-01-01T00:00:00.000Z")).unwrap();
        assert!(matches!(later, Claim::Fresh));
        let status: String = store
            .conn()
            .query_row("SELECT status FROM executions WHERE id = 'a'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(status, "error");
    }

    /// A finished call; `claimed` (its key claimed first) when it is to `release` its key.
    fn done(id: &str, release: bool) -> Finished {
        Finished {
            id: id.into(),
            tool: "t".into(),
            request_id: None,
            claimed: release,
            face: "mcp".into(),
            started_at: store::now(),
            status: ExecStatus::Ok,
            duration_ms: 1,
            error: None,
            result: None,
            release,
            session: None,
            host: None,
            subject: None,
            author: None,
        }
    }

    fn count(store: &Store) -> i64 {
        store
            .conn()
            .query_row("SELECT count(*) FROM executions", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn the_journal_commits_every_row_of_concurrent_callers_before_they_return() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(Store::open(&dir.path().join("car.db")).unwrap());
        let journal = std::sync::Arc::new(Journal::new(store.clone()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let calls: Vec<_> = (0..300)
                .map(|n| {
                    let journal = journal.clone();
                    tokio::spawn(async move { journal.record(done(&format!("e{n}"), false)).await })
                })
                .collect();
            for call in calls {
                call.await.unwrap().unwrap();
            }
        });
        // Each caller returned after its commit: every row is there, seen from this
        // connection although the journal writes through its own.
        assert_eq!(count(&store), 300);
    }

    crate::team::testing::on_both_stores!(
        keyed_calls_replay_and_the_log_filters_by_every_field,
        |stores: &crate::team::testing::TestStore| {
            let store = stores.store();
            let call = keyed("a", "2000-01-01T00:00:00.000Z");
            assert!(matches!(claim(&store, &call).unwrap(), Claim::Fresh));
            let mut first = done("a", false);
            first.claimed = true;
            first.result = Some(serde_json::json!({"n": 1}));
            first.author = Some("alice".into());
            first.session = Some("s1".into());
            // Through the journal's group, where a row that claimed no key is inserted plainly:
            // this one must complete its claim's row.
            finish_group(&store, &[&first]).unwrap();
            // The same key again, from another process or instance: the first result.
            let again = keyed("b", "2000-01-01T00:00:00.000Z");
            match claim(&stores.store(), &again).unwrap() {
                Claim::Replay(recorded) => {
                    assert_eq!(recorded.execution_id, "a");
                    assert_eq!(recorded.result, Some(serde_json::json!({"n": 1})));
                }
                Claim::Fresh => panic!("the key was taken"),
            }
            let mut other = done("c", false);
            other.tool = "u".into();
            other.status = ExecStatus::Denied;
            finish(&store, &other).unwrap();
            let all = recent(&store, &Filter::default(), 10).unwrap();
            assert_eq!(
                all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
                ["c", "a"]
            );
            let by_session = Filter {
                session: Some("s1"),
                ..Filter::default()
            };
            let found = recent(&store, &by_session, 10).unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].author.as_deref(), Some("alice"));
            let denied = Filter {
                status: Some("denied"),
                tool: Some("u"),
                ..Filter::default()
            };
            assert_eq!(recent(&store, &denied, 10).unwrap()[0].id, "c");
        }
    );

    #[test]
    fn the_journal_gives_back_the_key_of_a_keyed_call_that_did_not_complete() {
        let store = std::sync::Arc::new(Store::open_in_memory().unwrap());
        assert!(matches!(
            claim(&store, &keyed("a", "2000-01-01T00:00:00.000Z")).unwrap(),
            Claim::Fresh
        ));
        let journal = Journal::new(store.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut cancelled = done("a", true);
        cancelled.status = ExecStatus::Cancelled;
        runtime.block_on(journal.record(cancelled)).unwrap();
        // The key is free again: a retry with the same request id runs.
        assert!(matches!(
            claim(&store, &keyed("b", "2000-01-01T00:00:00.000Z")).unwrap(),
            Claim::Fresh
        ));
        assert_eq!(count(&store), 2);
    }

    #[test]
    fn the_gates_decisions_join_the_log_once_across_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("car.db")).unwrap();
        let path = gate_log::path(dir.path());
        assert_eq!(ingest_gate_log(&store, &path).unwrap(), 0, "no file yet");
        let deny = |n: usize| {
            let mut entry = gate_log::Entry::new("codex", "deny", "Bash", &format!("rule {n}"))
                .about(&serde_json::json!({"command": format!("curl -H 'Authorization: Bearer ghp_{}' x", "a".repeat(36))}));
            entry.session = Some("s-9".into());
            gate_log::append(&path, &entry).unwrap();
        };
        deny(1);
        deny(2);
        assert_eq!(ingest_gate_log(&store, &path).unwrap(), 2);
        assert_eq!(ingest_gate_log(&store, &path).unwrap(), 0, "read once");
        // One more line, then the file rotates and a new one starts: both are read.
        deny(3);
        std::fs::rename(&path, gate_log::rotated(&path)).unwrap();
        deny(4);
        assert_eq!(ingest_gate_log(&store, &path).unwrap(), 2);
        let filter = Filter {
            face: Some("hook"),
            host: Some("codex"),
            session: Some("s-9"),
            status: Some("denied"),
            ..Filter::default()
        };
        let rows = recent(&store, &filter, 10).unwrap();
        assert_eq!(rows.len(), 4);
        let errors: Vec<&str> = rows.iter().filter_map(|r| r.error.as_deref()).collect();
        assert!(errors.iter().all(|e| !e.contains("ghp_aaaa")), "{errors:?}");
        assert!(
            errors.iter().any(|e| e.starts_with("rule 4 (on: curl")),
            "{errors:?}"
        );
    }

    crate::team::testing::on_both_stores!(
        a_group_retried_row_by_row_after_it_committed_doubles_nothing,
        |stores: &crate::team::testing::TestStore| {
            let store = stores.store();
            let first = done("x", false);
            let second = done("y", false);
            finish_group(&store, &[&first, &second]).unwrap();
            // The journal heard an error although the group committed (its connection went
            // after the COMMIT): it writes each row again on its own. Each call succeeded, so
            // each is answered so, and the log holds each once.
            let mut again = first.clone();
            again.status = ExecStatus::Error;
            again.error = Some("written twice".into());
            finish(&store, &again).unwrap();
            finish(&store, &second).unwrap();
            let all = recent(&store, &Filter::default(), 10).unwrap();
            let mut ids: Vec<&str> = all.iter().map(|e| e.id.as_str()).collect();
            ids.sort();
            assert_eq!(ids, ["x", "y"]);
            let x = all.iter().find(|e| e.id == "x").unwrap();
            assert_eq!(
                x.error.as_deref(),
                Some("written twice"),
                "the retry's row wins"
            );
        }
    );
}
