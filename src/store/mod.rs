//! The SQLite store under `CAR_HOME`: connection setup (WAL, busy timeout, foreign keys) and
//! append-only migrations. Every write in CAR goes through a transaction here, so any number of
//! processes can write at once without losing an acknowledged write.

pub mod postgres;
pub mod sql;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use sql::{Dialect, Sql};

/// The migrations, in order. Never edit one that has shipped; add a new file.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_runtime", include_str!("migrations/0001_runtime.sql")),
    ("0002_memory", include_str!("migrations/0002_memory.sql")),
    (
        "0003_invalidation_note",
        include_str!("migrations/0003_invalidation_note.sql"),
    ),
    ("0004_skills", include_str!("migrations/0004_skills.sql")),
    ("0005_project", include_str!("migrations/0005_project.sql")),
    ("0006_graph", include_str!("migrations/0006_graph.sql")),
    (
        "0007_injections",
        include_str!("migrations/0007_injections.sql"),
    ),
    ("0008_vectors", include_str!("migrations/0008_vectors.sql")),
    ("0009_audit", include_str!("migrations/0009_audit.sql")),
    ("0010_author", include_str!("migrations/0010_author.sql")),
];

/// How many times a writer retries a locked database before giving up (about 30 s in all).
const BUSY_ATTEMPTS: i32 = 30_000;

/// Statements a SQLite connection keeps prepared (rusqlite's default is 16).
const STATEMENT_CACHE: usize = 64;

/// Whether an error is SQLite saying another connection holds the lock.
fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `work` again while SQLite reports the database busy without having waited itself
/// (opening, switching the journal mode), for up to about 30 s.
fn retry_busy<T>(mut work: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut attempt = 0;
    loop {
        match work() {
            Err(err) if is_busy(&err) && attempt < BUSY_ATTEMPTS / 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// Waits briefly and says whether to retry. SQLite's default handler backs off to 100 ms
/// sleeps, which leaves the lock idle while writers queue; short steady waits keep it busy.
fn busy_wait(attempt: i32) -> bool {
    if attempt >= BUSY_ATTEMPTS {
        return false;
    }
    std::thread::sleep(Duration::from_micros(if attempt < 100 {
        200
    } else {
        1_000
    }));
    true
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the database {path} was written by a newer CAR (schema {found}, this CAR knows up to {supported}); upgrade CAR, or point CAR_HOME elsewhere. The file was left untouched.")]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("migration {name} failed: {source}")]
    Migration {
        name: &'static str,
        source: rusqlite::Error,
    },
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("a database task failed: {0}")]
    Task(String),
    #[error("the team database: {0}")]
    Postgres(String),
    /// Another writer changed memory after the index a write was planned against: the write
    /// was not made, and catching up and planning again makes it.
    #[error("the team database: {0}")]
    MemoryMoved(String),
    #[error("a value read from the database: {0}")]
    Decode(String),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        if e.code()
            .is_some_and(|code| code.code() == postgres::MEMORY_MOVED)
        {
            return StoreError::MemoryMoved(postgres::describe(&e));
        }
        StoreError::Postgres(postgres::describe(&e))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => StoreError::Postgres(format!("no connection to the team database: {other}")),
        }
    }
}

impl StoreError {
    /// Whether another writer held the database past the busy timeout.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sqlite(e) if is_busy(e))
    }
}

/// The data of one CAR: the SQLite file `car.db` under `CAR_HOME` (one connection, shared by
/// the threads of a process), or one project of a team's PostgreSQL database.
pub struct Store {
    backend: Backend,
    path: Option<PathBuf>,
}

enum Backend {
    Sqlite(Mutex<Connection>),
    Postgres(Box<postgres::PgProject>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::Sqlite(_) => write!(f, "Store(SQLite {:?})", self.path),
            Backend::Postgres(pg) => write!(f, "Store(PostgreSQL, project {})", pg.project()),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let mut conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_handler(Some(busy_wait)).map_err(open_err)?;
        // Refuse a newer schema before anything (even the journal mode) touches the file.
        let found: i64 = retry_busy(|| conn.query_row("PRAGMA user_version", [], |r| r.get(0)))
            .map_err(open_err)?;
        if found > MIGRATIONS.len() as i64 {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
                supported: MIGRATIONS.len() as i64,
            });
        }
        // WAL lets readers run beside one writer; NORMAL sync in WAL survives a killed process
        // (a commit is in the WAL before it is acknowledged); only power loss can drop the
        // newest transactions. Only the first opener switches the mode; the switch needs the
        // file to itself, and SQLite answers "locked" to the others without waiting, so they
        // retry.
        let mode: String = retry_busy(|| conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            retry_busy(|| {
                conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            })
            .map_err(open_err)?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        // A memory write group's rows go in chunks of a few sizes each (see
        // `memory::write::chunks`): room for every one of them and the rest.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let store = Store {
            backend: Backend::Sqlite(Mutex::new(conn)),
            path: Some(path.to_path_buf()),
        };
        retry_busy(|| match store.migrate() {
            Err(StoreError::Sqlite(e)) => Err(e),
            Err(StoreError::Migration { source, .. }) if is_busy(&source) => Err(source),
            other => Ok(other),
        })
        .map_err(open_err)??;
        Ok(store)
    }

    /// A private in-memory database (embedding without a home, tests, evaluation runs).
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let store = Store {
            backend: Backend::Sqlite(Mutex::new(conn)),
            path: None,
        };
        store.migrate()?;
        Ok(store)
    }

    /// One project of a team's PostgreSQL database (see [`postgres::PgProject`]).
    pub fn postgres(project: postgres::PgProject) -> Store {
        Store {
            backend: Backend::Postgres(Box::new(project)),
            path: None,
        }
    }

    /// The file, for a SQLite store on disk.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn dialect(&self) -> Dialect {
        match self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection, for one short unit of work. Poisoning is recovered: SQLite keeps
    /// the database consistent whatever a panicking thread left half done.
    ///
    /// Only for what stays on the local store (the code graph, connectors, the dashboard's
    /// file checks): capabilities a team shares go through [`Store::read`] and
    /// [`Store::transaction`], and the team server serves no tool that reaches this.
    pub fn conn(&self) -> MutexGuard<'_, Connection> {
        match &self.backend {
            Backend::Sqlite(conn) => conn.lock().unwrap_or_else(|poison| poison.into_inner()),
            Backend::Postgres(_) => {
                panic!("a capability that has no PostgreSQL store yet was called on a team store")
            }
        }
    }

    /// The SQLite connection if no other thread holds it (poisoning recovered as in
    /// [`Store::conn`]); never on a team store, whose every read may wait on the network.
    pub fn try_conn(&self) -> Option<MutexGuard<'_, Connection>> {
        let Backend::Sqlite(conn) = &self.backend else {
            return None;
        };
        match conn.try_lock() {
            Ok(conn) => Some(conn),
            Err(std::sync::TryLockError::Poisoned(poison)) => Some(poison.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Runs `work` with a connection for reading: SQLite's own (the latest committed data at
    /// each statement), or a PostgreSQL transaction that sees only this store's project.
    pub fn read<T, E: From<StoreError>>(
        &self,
        work: impl FnOnce(&dyn Sql) -> Result<T, E>,
    ) -> Result<T, E> {
        match &self.backend {
            Backend::Sqlite(_) => work(&*self.conn()),
            Backend::Postgres(pg) => pg.run(postgres::Lane::Pool, work),
        }
    }

    /// [`Store::read`] with every statement on one snapshot of the data (on SQLite, a deferred
    /// transaction unless one is open already).
    pub fn read_consistent<T, E: From<StoreError>>(
        &self,
        work: impl FnOnce(&dyn Sql) -> Result<T, E>,
    ) -> Result<T, E> {
        match &self.backend {
            Backend::Sqlite(_) => {
                let conn = self.conn();
                if !conn.is_autocommit() {
                    return work(&*conn);
                }
                let tx = conn.unchecked_transaction().map_err(StoreError::from)?;
                let value = work(&*tx)?;
                tx.commit().map_err(StoreError::from)?;
                Ok(value)
            }
            Backend::Postgres(pg) => pg.run(postgres::Lane::Pool, work),
        }
    }

    /// Runs `work` in a write transaction and commits it. On SQLite the write lock is taken up
    /// front (IMMEDIATE), as [`Store::write`] does; on PostgreSQL the transaction runs as the
    /// application's role in the store's project, and writers of one project queue on a lock
    /// so changes are logged in the order they commit.
    pub fn transaction<T, E: From<StoreError>>(
        &self,
        work: impl FnOnce(&dyn Sql) -> Result<T, E>,
    ) -> Result<T, E> {
        match &self.backend {
            Backend::Sqlite(_) => {
                let mut conn = self.conn();
                let tx =
                    rusqlite::Transaction::new(&mut conn, rusqlite::TransactionBehavior::Immediate)
                        .map_err(StoreError::from)?;
                let value = work(&*tx)?;
                tx.commit().map_err(StoreError::from)?;
                Ok(value)
            }
            Backend::Postgres(pg) => pg.run(postgres::Lane::Write, work),
        }
    }

    /// [`Store::transaction`] for writes that only add or finish rows nobody replays in
    /// order (the execution log): on PostgreSQL they do not queue behind the project's other
    /// writers.
    pub fn append<T, E: From<StoreError>>(
        &self,
        work: impl FnOnce(&dyn Sql) -> Result<T, E>,
    ) -> Result<T, E> {
        match &self.backend {
            Backend::Sqlite(_) => self.transaction(work),
            Backend::Postgres(pg) => pg.run(postgres::Lane::Pool, work),
        }
    }

    /// Tells the store that `entries` memory entries were written (a team store refreshes its
    /// planner statistics as a project grows: [`postgres::PgProject::grew`]).
    pub fn grew(&self, entries: usize) {
        if let Backend::Postgres(pg) = &self.backend {
            pg.grew(entries);
        }
    }

    /// The newest change to memory any writer has made: on SQLite read from the log; on a team
    /// store known from the database's notifications, so a current index costs no round trip.
    pub fn memory_head(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(_) => memory_head(&*self.conn()),
            Backend::Postgres(pg) => pg.memory_head(),
        }
    }

    /// The newest change to memory known without asking the database: on a team store what
    /// its notifications said (`None` while it is not listening or has heard nothing of its
    /// project yet); `None` on SQLite.
    pub fn notified_memory_head(&self) -> Option<i64> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(pg) => pg.notified_memory_head(),
        }
    }

    /// Runs `work` in an IMMEDIATE transaction (the write lock is taken up front, so two writers
    /// queue on the busy timeout instead of failing on upgrade) and commits it.
    pub fn write<T, E: From<rusqlite::Error>>(
        &self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.conn();
        let tx = rusqlite::Transaction::new(&mut conn, rusqlite::TransactionBehavior::Immediate)?;
        let value = work(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// The schema version this database is at.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// The schema version this build of CAR writes.
    pub fn supported_schema_version() -> i64 {
        MIGRATIONS.len() as i64
    }

    fn migrate(&self) -> Result<()> {
        let mut conn = self.conn();
        let tx = rusqlite::Transaction::new(&mut conn, rusqlite::TransactionBehavior::Immediate)?;
        // Re-read inside the write lock: another process may have migrated meanwhile.
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current > MIGRATIONS.len() as i64 {
            return Err(StoreError::NewerSchema {
                path: self.path.clone().unwrap_or_default(),
                found: current,
                supported: MIGRATIONS.len() as i64,
            });
        }
        for (index, (name, sql)) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            tx.execute_batch(sql)
                .map_err(|source| StoreError::Migration { name, source })?;
            tx.pragma_update(None, "user_version", index as i64 + 1)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The id of the project rooted at `root`, if CAR was ever used there (registers nothing).
    /// A team store is one project whatever the root: its id.
    pub fn registered_project_id(&self, root: &Path) -> Result<Option<i64>> {
        use rusqlite::OptionalExtension;
        if let Backend::Postgres(pg) = &self.backend {
            return Ok(Some(pg.project()));
        }
        Ok(self
            .conn()
            .query_row(
                "SELECT id FROM projects WHERE root = ?1",
                [root.to_string_lossy()],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The id of the project rooted at `root`, registering it on first use (a team store: its
    /// project's id).
    /// The team project a PostgreSQL store is opened on; `None` for SQLite.
    pub fn team_project(&self) -> Option<i64> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg.project()),
            Backend::Sqlite(_) => None,
        }
    }

    pub fn project_id(&self, root: &Path) -> Result<i64> {
        if let Some(project) = self.team_project() {
            return Ok(project);
        }
        if let Some(id) = self.registered_project_id(root)? {
            return Ok(id);
        }
        let root_text = root.to_string_lossy().to_string();
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| root_text.clone());
        self.write(|tx| {
            tx.execute(
                "INSERT INTO projects(root, name, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(root) DO NOTHING",
                rusqlite::params![root_text, name, now()],
            )?;
            Ok(tx.query_row(
                "SELECT id FROM projects WHERE root = ?1",
                [&root_text],
                |r| r.get(0),
            )?)
        })
    }

    /// A `meta` value.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.read(|sql| meta_value(sql, key))
    }
}

/// A `meta` value, read on `sql` (inside a transaction, or where the store is not at hand).
pub fn meta_value(sql: &dyn Sql, key: &str) -> Result<Option<String>> {
    sql.value("SELECT value FROM meta WHERE key = ?1", sql::args![key])
}

/// Sets a `meta` value.
pub fn set_meta(sql: &dyn Sql, key: &str, value: &str) -> Result<()> {
    sql.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        sql::args![key, value],
    )?;
    Ok(())
}

/// The newest entry of memory's change log, read on `sql`.
pub fn memory_head(sql: &dyn Sql) -> Result<i64> {
    Ok(sql
        .value("SELECT ifnull(max(seq), 0) FROM memory_changes", &[])?
        .unwrap_or(0))
}

/// The format of every timestamp CAR stores: RFC 3339 UTC with milliseconds, fixed width, so
/// SQLite's text comparison orders them in time.
const TIMESTAMP: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// The current time in [`TIMESTAMP`]'s format.
pub fn now() -> String {
    chrono::Utc::now().format(TIMESTAMP).to_string()
}

/// The time `ago` before now, in the same format as [`now`] (so the two compare as text).
pub fn now_minus(ago: Duration) -> String {
    let ago = chrono::TimeDelta::from_std(ago).unwrap_or(chrono::TimeDelta::MAX);
    let then = chrono::Utc::now()
        .checked_sub_signed(ago)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    then.format(TIMESTAMP).to_string()
}

/// Formats milliseconds since the epoch in [`TIMESTAMP`]'s format.
#[cfg(test)]
fn format_unix_millis(millis: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(millis)
        .unwrap_or_default()
        .format(TIMESTAMP)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_and_leap_day() {
        assert_eq!(format_unix_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_unix_millis(951_782_400_123),
            "2000-02-29T00:00:00.123Z"
        );
    }

    #[test]
    fn newer_schema_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("car.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::NewerSchema { found: 99, .. }));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn reopening_does_not_rerun_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("car.db");
        Store::open(&path).unwrap();
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            Store::supported_schema_version()
        );
    }
}
