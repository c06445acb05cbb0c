//! The execution log: one row per tool call, and the idempotency record behind
//! `_meta["car/request_id"]`.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::{self, Store};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecStatus {
    Running,
    Ok,
    Error,
    Denied,
    Cancelled,
    Timeout,
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
        }
    }

    fn parse(text: &str) -> ExecStatus {
        match text {
            "ok" => ExecStatus::Ok,
            "denied" => ExecStatus::Denied,
            "cancelled" => ExecStatus::Cancelled,
            "timeout" => ExecStatus::Timeout,
            "running" => ExecStatus::Running,
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

/// The key under which a non-idempotent call's result is kept.
pub fn idem_key(tool: &str, request_id: &str) -> String {
    format!("{tool}\u{1f}{request_id}")
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
    store.write(|tx| {
        let existing = tx
            .query_row(
                "SELECT id, status, result, error, started_at FROM executions WHERE idem_key = ?1",
                [key],
                |r| {
                    Ok((
                        Recorded {
                            execution_id: r.get(0)?,
                            status: ExecStatus::parse(&r.get::<_, String>(1)?),
                            result: r
                                .get::<_, Option<String>>(2)?
                                .and_then(|text| serde_json::from_str(&text).ok()),
                            error: r.get(3)?,
                        },
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        match existing {
            Some((found, started_at))
                if found.status == ExecStatus::Running
                    && started_at.as_str() < abandoned_before.as_str() =>
            {
                tx.execute(
                    "UPDATE executions SET status = 'error', idem_key = NULL,
                         error = 'abandoned: the process running it stopped before it finished'
                     WHERE id = ?1",
                    [&found.execution_id],
                )?;
            }
            Some((found, _)) => return Ok(Claim::Replay(found)),
            None => {}
        }
        tx.execute(
            "INSERT INTO executions(id, tool, status, request_id, idem_key, face, started_at)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6)",
            params![id, tool, request_id, key, face, store::now()],
        )?;
        Ok(Claim::Fresh)
    })
}

/// Forgets a key whose call did not complete (cancelled, timed out), so a retry can run.
pub fn release(store: &Store, id: &str) -> store::Result<()> {
    store.write(|tx| {
        tx.execute("UPDATE executions SET idem_key = NULL WHERE id = ?1", [id])?;
        Ok(())
    })
}

/// The outcome of one finished call, to record.
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
}

/// Records a finished call: updates the keyed row, or inserts the row of an unkeyed call.
pub fn finish(store: &Store, done: &Finished) -> store::Result<()> {
    let result_text = done.result.as_ref().map(Value::to_string);
    store.write(|tx| {
        tx.execute(
            "INSERT INTO executions(id, tool, status, request_id, face, started_at, duration_ms, error, result)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT(id) DO UPDATE SET status = excluded.status,
                 duration_ms = excluded.duration_ms, error = excluded.error, result = excluded.result",
            params![
                done.id,
                done.tool,
                done.status.as_str(),
                done.request_id,
                done.face,
                done.started_at,
                done.duration_ms as i64,
                done.error,
                result_text
            ],
        )?;
        Ok(())
    })
}

/// One row of the execution log, as `car executions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub id: String,
    pub tool: String,
    /// How the call ended (see [`ExecStatus`]), `running` until it does.
    pub status: String,
    /// The idempotency key it was called with.
    pub request_id: Option<String>,
    /// The face it came through: `cli` or `mcp`.
    pub face: Option<String>,
    pub started_at: String,
    /// Null while it runs.
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
}

/// The latest executions, newest first (only `tool`'s when given).
pub fn recent(store: &Store, tool: Option<&str>, limit: usize) -> store::Result<Vec<Execution>> {
    let conn = store.conn();
    let mut stmt = conn.prepare(
        "SELECT id, tool, status, request_id, face, started_at, duration_ms, error
         FROM executions WHERE (?1 IS NULL OR tool = ?1)
         ORDER BY started_at DESC, rowid DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![tool, limit as i64], |r| {
        Ok(Execution {
            id: r.get(0)?,
            tool: r.get(1)?,
            status: r.get(2)?,
            request_id: r.get(3)?,
            face: r.get(4)?,
            started_at: r.get(5)?,
            duration_ms: r.get(6)?,
            error: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
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
}
