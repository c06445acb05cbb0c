//! The store on a team's PostgreSQL database: one project of it, as the capabilities see a
//! store (see [`super::sql`] for how their statements run on it).
//!
//! Every transaction runs as the application's role `car_app` with `car.project` set to the
//! store's project, so row-level security keeps every other project's rows out of every
//! statement, whether or not it filters. Writers of one project queue on a transaction-level
//! advisory lock: memory's change log is then numbered in commit order, which is what lets an
//! instance replay it past the last number it saw without missing a change.
//!
//! Instances learn of each other's memory writes by `LISTEN`: a trigger on the change log
//! notifies `car_memory` with `<project>:<seq>` when a write commits, and [`Heads`] keeps the
//! newest number per project, so a query of a current index costs no round trip.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sql::{PgTx, Sql};
use super::{Result, StoreError};

/// The notification channel of memory's change log.
pub const MEMORY_CHANNEL: &str = "car_memory";
/// The notification channel of changes to users, tokens, grants and projects.
pub const AUTH_CHANNEL: &str = "car_auth";
/// How often the listening connection is checked, and how long an answer may take.
const HEARTBEAT: Duration = Duration::from_secs(5);
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The SQLSTATE of `car_memory_unchanged` (migration 0009): memory changed after the change a
/// write was planned against.
pub const MEMORY_MOVED: &str = "CAR01";

/// The first key of the per-project write lock (`pg_advisory_xact_lock(key, project)`): "CAR\0".
const WRITE_LOCK: i32 = 0x4341_5200;

/// A PostgreSQL error as a person reads it: the server's message and detail, or the
/// connection's error and its cause.
pub fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_string(),
        };
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The newest memory change per project, as notified.
#[derive(Debug, Default)]
pub struct Heads {
    /// Listening now: without it, a head is read from the database.
    live: AtomicBool,
    heads: Mutex<HashMap<i64, i64>>,
    /// Bumped by every access change heard of, and by every (re)connection (what changed
    /// while no one listened is unknown).
    auth: std::sync::atomic::AtomicU64,
    /// Bumped each time listening starts or stops: a head read from the database is kept only
    /// if listening was on, and the same, before and after the read.
    generation: std::sync::atomic::AtomicU64,
}

impl Heads {
    fn get(&self, project: i64) -> Option<i64> {
        if !self.live.load(Ordering::Acquire) {
            return None;
        }
        self.heads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&project)
            .copied()
    }

    /// The listening generation, when listening.
    fn live_generation(&self) -> Option<u64> {
        self.is_live()
            .then(|| self.generation.load(Ordering::Acquire))
    }

    fn set_live(&self, live: bool) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.live.store(live, Ordering::Release);
    }

    /// Records `seq` as seen for `project` (keeping the newest).
    fn saw(&self, project: i64, seq: i64) {
        let mut heads = self.heads.lock().unwrap_or_else(|p| p.into_inner());
        let head = heads.entry(project).or_insert(seq);
        *head = (*head).max(seq);
    }

    fn notified(&self, payload: &str) {
        let parsed = payload
            .split_once(':')
            .and_then(|(p, s)| Some((p.parse().ok()?, s.parse().ok()?)));
        match parsed {
            Some((project, seq)) => self.saw(project, seq),
            None => tracing::warn!(payload, "an unreadable memory notification"),
        }
    }

    /// The access epoch (see `TeamDb::access_epoch`), while listening.
    pub fn auth_epoch(&self) -> Option<u64> {
        self.is_live().then(|| self.auth.load(Ordering::Acquire))
    }

    fn heard(&self, channel: &str, payload: &str) {
        if channel == AUTH_CHANNEL {
            self.auth.fetch_add(1, Ordering::AcqRel);
        } else {
            self.notified(payload);
        }
    }

    /// Whether notifications are arriving now.
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Listens on `config`'s database for memory changes, on `rt`, until the runtime stops:
    /// reconnecting after a lost connection, and forgetting every head meanwhile (what was
    /// notified while no one listened is read from the database again).
    pub fn listen(mut config: tokio_postgres::Config, rt: &tokio::runtime::Handle) -> Arc<Heads> {
        // A connection dropped without a word (a NAT, a failover) is noticed in seconds, not
        // after the system's two-hour keepalive; a heartbeat catches the rest.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3)
            .tcp_user_timeout(HEARTBEAT_TIMEOUT);
        let heads = Arc::new(Heads::default());
        let listening = heads.clone();
        rt.spawn(async move {
            let mut delay = Duration::from_millis(100);
            loop {
                match listening.listen_once(&config).await {
                    Ok(()) => delay = Duration::from_millis(100),
                    Err(e) => tracing::warn!(error = %e, "no notifications from the team database; retrying"),
                }
                listening.set_live(false);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        });
        heads
    }

    async fn listen_once(
        &self,
        config: &tokio_postgres::Config,
    ) -> std::result::Result<(), String> {
        use futures_util::StreamExt;
        let pg = |e: tokio_postgres::Error| describe(&e);
        let (client, mut connection) = config.connect(tokio_postgres::NoTls).await.map_err(pg)?;
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        let client = Arc::new(client);
        let statement = format!("LISTEN {MEMORY_CHANNEL}; LISTEN {AUTH_CHANNEL}");
        {
            let listen = client.batch_execute(&statement);
            tokio::pin!(listen);
            // The connection must be driven while LISTEN runs.
            loop {
                tokio::select! {
                    done = &mut listen => { done.map_err(pg)?; break; }
                    message = messages.next() => match message {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => self.heard(n.channel(), n.payload()),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(pg(e)),
                        None => return Ok(()),
                    }
                }
            }
        }
        self.heads.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.auth.fetch_add(1, Ordering::AcqRel);
        self.set_live(true);
        // The heartbeat: a query every few seconds that must answer in time, or listening is
        // over (and the next connection starts afresh).
        let (stopped, mut heartbeat_failed) = tokio::sync::oneshot::channel::<String>();
        let beating = client.clone();
        let _heartbeat = AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                let answered =
                    tokio::time::timeout(HEARTBEAT_TIMEOUT, beating.batch_execute("SELECT 1"))
                        .await;
                let failure = match answered {
                    Ok(Ok(())) => continue,
                    Ok(Err(e)) => describe(&e),
                    Err(_) => format!("no answer to a heartbeat within {HEARTBEAT_TIMEOUT:?}"),
                };
                let _ = stopped.send(failure);
                return;
            }
        }));
        loop {
            tokio::select! {
                failure = &mut heartbeat_failed => {
                    return Err(failure.unwrap_or_else(|_| "the heartbeat stopped".into()));
                }
                message = messages.next() => match message {
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => self.heard(n.channel(), n.payload()),
                    Some(Ok(tokio_postgres::AsyncMessage::Notice(notice))) => {
                        tracing::debug!(notice = %notice.message(), "team database notice")
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(pg(e)),
                    None => return Ok(()),
                }
            }
        }
    }
}

/// A pooled connection inside a transaction: back to the pool once the transaction ended
/// ([`Open::release`]); otherwise (a failure mid-way, a panic) closed when dropped, which ends
/// the transaction on the server, so no connection returns to the pool inside one.
struct Open(Option<deadpool_postgres::Object>);

impl Open {
    fn client(&self) -> Result<&deadpool_postgres::ClientWrapper> {
        self.0
            .as_deref()
            .ok_or_else(|| StoreError::Task("the connection was released".into()))
    }

    fn release(&mut self) {
        self.0.take();
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// What waits for a connection's answers.
#[derive(Clone, Copy)]
pub(crate) enum Driver<'a> {
    /// A pooled connection, which the runtime's workers drive.
    Pool(&'a tokio::runtime::Handle),
    /// The writers' own connection, driven by the thread that waits on it.
    Own(&'a OwnConnection),
}

impl Driver<'_> {
    /// Runs `work` to its end on the calling thread (never one of a runtime's workers).
    pub(crate) fn block_on<F: std::future::Future>(self, work: F) -> F::Output {
        match self {
            Driver::Pool(rt) => rt.block_on(work),
            Driver::Own(own) => own.block_on(work),
        }
    }
}

type Connection =
    tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>;

/// The connection a project's writers share (they queue on the project's write lock anyway),
/// driven by the thread that waits on it rather than by a runtime's worker: a write's round
/// trip is then the calling thread and PostgreSQL, with no hand-off to another thread and
/// back each way (each a wait to be scheduled on a busy machine). Its runtime has no thread of
/// its own: it runs only inside [`OwnConnection::block_on`].
pub(crate) struct OwnConnection {
    rt: Option<tokio::runtime::Runtime>,
    /// When its last transaction ended (see [`WRITER_IDLE`]).
    used: std::time::Instant,
    client: deadpool_postgres::ClientWrapper,
    /// `None` once the connection ended (the client's requests then fail).
    connection: std::cell::RefCell<Option<std::pin::Pin<Box<Connection>>>>,
}

impl OwnConnection {
    fn open(config: &tokio_postgres::Config) -> Result<OwnConnection> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Task(format!("cannot start a connection's runtime: {e}")))?;
        let (client, connection) = rt
            .block_on(config.connect(tokio_postgres::NoTls))
            .map_err(StoreError::from)?;
        // The wrapper keeps prepared statements; the task it aborts when dropped is a
        // placeholder, since the connection is driven here.
        let placeholder = rt.spawn(std::future::pending::<()>());
        Ok(OwnConnection {
            client: deadpool_postgres::ClientWrapper::new(client, placeholder),
            connection: std::cell::RefCell::new(Some(Box::pin(connection))),
            rt: Some(rt),
            used: std::time::Instant::now(),
        })
    }

    /// Whether the connection ended, after reading what arrived since its last use: a backend
    /// that was terminated (a restart, a failover, an administrator) says so, and is replaced
    /// before a write is sent to it rather than failing that write.
    fn is_closed(&self) -> bool {
        use std::task::Poll;
        if let Some(rt) = self.rt.as_ref() {
            let mut connection = self.connection.borrow_mut();
            let mut turns = 0;
            // Polled, then polled again after a turn of the runtime's driver that does not
            // wait: the first poll asks to hear of the socket, the turn hears, the second reads.
            rt.block_on(std::future::poll_fn(|cx| {
                if drive(&mut connection, cx) {
                    return Poll::Ready(());
                }
                turns += 1;
                if turns > 1 {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            }));
        }
        self.client.is_closed() || self.connection.borrow().is_none()
    }

    fn block_on<F: std::future::Future>(&self, work: F) -> F::Output {
        use std::task::Poll;
        let Some(rt) = self.rt.as_ref() else {
            unreachable!("the runtime goes only when the connection is dropped")
        };
        let mut connection = self.connection.borrow_mut();
        rt.block_on(async {
            let mut work = std::pin::pin!(work);
            std::future::poll_fn(|cx| {
                if let Poll::Ready(out) = work.as_mut().poll(cx) {
                    return Poll::Ready(out);
                }
                if drive(&mut connection, cx) {
                    // Its requests fail now that it is gone.
                    return work.as_mut().poll(cx);
                }
                Poll::Pending
            })
            .await
        })
    }
}

/// Drives `connection` as far as it can go without waiting; says whether it ended (it is then
/// `None`).
fn drive(
    connection: &mut Option<std::pin::Pin<Box<Connection>>>,
    cx: &mut std::task::Context<'_>,
) -> bool {
    use std::future::Future;
    let Some(open) = connection.as_mut() else {
        return true;
    };
    let std::task::Poll::Ready(ended) = open.as_mut().poll(cx) else {
        return false;
    };
    if let Err(e) = ended {
        tracing::debug!(error = %describe(&e), "a connection of its own ended");
    }
    *connection = None;
    true
}

impl Drop for OwnConnection {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            {
                let _inside = rt.enter();
                self.connection.get_mut().take();
            }
            // A runtime dropped on a runtime's worker would panic; this one has no threads.
            rt.shutdown_background();
        }
    }
}

/// Which connection a project's transaction runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    /// A pooled connection, without the project's write lock: reads, and the execution log
    /// (whose rows nobody replays in order).
    Pool,
    /// The writers' own connection, under the project's write lock: memory's change log is
    /// numbered in commit order.
    Write,
}

/// One project of a team database, as a store.
pub struct PgProject {
    pool: deadpool_postgres::Pool,
    /// Where the writers' own connection connects to.
    config: tokio_postgres::Config,
    /// The writers' own connection (see [`OwnConnection`]), opened on the first write and
    /// closed after [`WRITER_IDLE`] without one.
    writer: Arc<Mutex<Option<OwnConnection>>>,
    /// Closes the writers' connection when it has been idle.
    _sweeper: AbortOnDrop,
    rt: tokio::runtime::Handle,
    project: i64,
    heads: Arc<Heads>,
    /// Memory entries this process wrote to the project, and how many it will have written
    /// when it next refreshes the memory tables' statistics (see [`PgProject::grew`]).
    grown: AtomicU64,
    next_analyze: AtomicU64,
}

/// How long the writers' connection of a project stays open without a write. An instance's
/// pool has at most 16 connections, and each project it wrote to recently one more: one that
/// serves many projects does not keep a backend for each of them for ever.
pub(crate) const WRITER_IDLE: Duration = Duration::from_secs(60);
/// The `application_name` of a writers' connection.
const WRITER_APPLICATION: &str = "car writer";

/// Closes `writer`'s connection once it has been idle for `idle` (checked every `idle / 4`),
/// until the store is gone. (Dropping one shuts its runtime down in the background, which a
/// runtime's worker may do.)
fn sweep(
    writer: std::sync::Weak<Mutex<Option<OwnConnection>>>,
    idle: Duration,
    rt: &tokio::runtime::Handle,
) -> AbortOnDrop {
    AbortOnDrop(rt.spawn(async move {
        loop {
            tokio::time::sleep(idle / 4).await;
            let Some(writer) = writer.upgrade() else {
                return;
            };
            let mut slot = match writer.try_lock() {
                Ok(slot) => slot,
                // A writer that panicked left it poisoned: the writers go on with it, and so
                // does this.
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // A writer holding it is using it.
                Err(std::sync::TryLockError::WouldBlock) => continue,
            };
            if slot.as_ref().is_some_and(|c| c.used.elapsed() >= idle) {
                slot.take();
                tracing::debug!("closed the writers' idle connection");
            }
        }
    }))
}

/// The memory tables whose statistics [`PgProject::grew`] refreshes.
const MEMORY_TABLES: &str = "memory_nodes, memory_edges, memory_vectors, memory_changes";
/// Entries written before the first refresh; each later one waits for twice as many.
const FIRST_ANALYZE: u64 = 500;

impl PgProject {
    /// The project `project` of the database behind `pool`, whose connections `rt` drives
    /// (statements block the calling thread, which must not be one of `rt`'s workers), with
    /// memory heads from `heads`; its writers' connection goes to `config` and closes after
    /// `idle` without a write ([`WRITER_IDLE`] in a server).
    pub fn new(
        pool: deadpool_postgres::Pool,
        mut config: tokio_postgres::Config,
        rt: tokio::runtime::Handle,
        project: i64,
        heads: Arc<Heads>,
        idle: Duration,
    ) -> PgProject {
        // Told apart from the pool's in `pg_stat_activity`.
        config.application_name(WRITER_APPLICATION);
        let writer = Arc::new(Mutex::new(None));
        PgProject {
            pool,
            config,
            _sweeper: sweep(Arc::downgrade(&writer), idle, &rt),
            writer,
            rt,
            project,
            heads,
            grown: AtomicU64::new(0),
            next_analyze: AtomicU64::new(FIRST_ANALYZE),
        }
    }

    /// Counts `entries` memory entries written; past 500, 1,000, 2,000, … refreshes the memory
    /// tables' statistics in the background (`ANALYZE`, as the server's own role). A project's
    /// lookups filter by row-level security's `team_project = car_project()`, whose share of
    /// the rows PostgreSQL can only guess until the tables have statistics: with none it
    /// guesses "a few", and looks up 32 ids by walking all 20,000 of a project's nodes
    /// (measured: 4.8 ms instead of 0.2). Autovacuum refreshes them too, but only a minute or
    /// more after a table grew; a new project fills faster than that.
    pub fn grew(&self, entries: usize) {
        let total = self.grown.fetch_add(entries as u64, Ordering::Relaxed) + entries as u64;
        let next = self.next_analyze.load(Ordering::Relaxed);
        if total < next
            || self
                .next_analyze
                .compare_exchange(
                    next,
                    next.saturating_mul(2),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let pool = self.pool.clone();
        self.rt.spawn(async move {
            let analyzed = match pool.get().await {
                Ok(client) => client
                    .batch_execute(&format!("ANALYZE {MEMORY_TABLES}"))
                    .await
                    .map_err(|e| describe(&e)),
                Err(e) => Err(e.to_string()),
            };
            match analyzed {
                Ok(()) => {
                    tracing::debug!(entries = total, "refreshed the memory tables' statistics")
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not refresh the memory tables' statistics")
                }
            }
        });
    }

    pub fn project(&self) -> i64 {
        self.project
    }

    /// Runs `work` in a transaction of the project on `lane`'s connection (taking the
    /// project's write lock first on [`Lane::Write`]), committing it when `work` succeeds and
    /// rolling it back when it fails. Beginning it, taking the role, setting the project and
    /// taking the lock are one round trip. A `work` that panics leaves the connection to be
    /// closed, not reused: the server rolls the transaction back.
    pub(super) fn run<T, E: From<StoreError>>(
        &self,
        lane: Lane,
        work: impl FnOnce(&dyn Sql) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if lane == Lane::Write {
            // The project's writers queue on its lock in the database: here they queue on
            // their own connection first, and the one that holds it takes the lock.
            let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_none_or(OwnConnection::is_closed) {
                *slot = None;
                *slot = Some(OwnConnection::open(&self.config)?);
            }
            // Taken out while it runs, so a `work` that panics leaves it closed, not reused.
            let Some(connection) = slot.take() else {
                unreachable!("opened above")
            };
            let (result, fit) =
                self.run_on(&connection.client, Driver::Own(&connection), true, work);
            if fit {
                let mut connection = connection;
                connection.used = std::time::Instant::now();
                *slot = Some(connection);
            }
            return result;
        }
        let client = self
            .rt
            .block_on(self.pool.get())
            .map_err(StoreError::from)?;
        let mut open = Open(Some(client));
        let client = open.client()?;
        let (result, fit) = self.run_on(client, Driver::Pool(&self.rt), false, work);
        if fit {
            open.release();
        }
        result
    }

    /// [`PgProject::run`] on `client`; also says whether the connection is fit to be used
    /// again (its transaction ended cleanly).
    fn run_on<T, E: From<StoreError>>(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        driver: Driver<'_>,
        write: bool,
        work: impl FnOnce(&dyn Sql) -> std::result::Result<T, E>,
    ) -> (std::result::Result<T, E>, bool) {
        let lock = if write {
            format!(
                "; SELECT pg_advisory_xact_lock({WRITE_LOCK}, {})",
                self.project
            )
        } else {
            String::new()
        };
        let tx = PgTx {
            tx: client,
            rt: driver,
            begin: std::cell::Cell::new(Some(format!(
                "BEGIN; SET LOCAL ROLE car_app; SELECT set_config('car.project', '{}', true){lock}",
                self.project
            ))),
            committed: std::cell::Cell::new(false),
        };
        let value = match work(&tx) {
            Ok(value) => value,
            Err(e) => {
                let fit = !tx.began() || driver.block_on(client.batch_execute("ROLLBACK")).is_ok();
                return (Err(e), fit);
            }
        };
        if !tx.began() || tx.committed.get() {
            // Nothing was asked of the database, or the commit went with the last statements.
            return (Ok(value), true);
        }
        match driver.block_on(client.batch_execute("COMMIT")) {
            Ok(()) => (Ok(value), true),
            Err(e) => (Err(StoreError::from(e).into()), false),
        }
    }

    pub(super) fn notified_memory_head(&self) -> Option<i64> {
        self.heads.get(self.project)
    }

    pub(super) fn memory_head(&self) -> Result<i64> {
        if let Some(head) = self.heads.get(self.project) {
            return Ok(head);
        }
        let before = self.heads.live_generation();
        let head = self.run(Lane::Pool, super::memory_head)?;
        // Kept only if listening covered the whole read: a head read while listening was off
        // could miss a change no one will notify again.
        if before.is_some() && self.heads.live_generation() == before {
            self.heads.saw(self.project, head);
        }
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writers' own connection, lost between two writes (its backend ended, as by a
    /// restart), is replaced before the next write is sent: that write goes through.
    #[test]
    fn a_write_after_the_writers_connection_was_lost_goes_through() {
        let team = crate::team::testing::TestTeam::new();
        let store = team.store();
        let write = |key: &str| {
            store.transaction::<_, StoreError>(|tx| super::super::set_meta(tx, key, "written"))
        };
        write("first").unwrap();
        team.end_connections();
        write("second").unwrap();
        // A read (a pooled connection, replaced the same way) sees both.
        let read = store
            .read_consistent::<_, StoreError>(|sql| {
                Ok((
                    super::super::meta_value(sql, "first")?,
                    super::super::meta_value(sql, "second")?,
                ))
            })
            .unwrap();
        assert_eq!(read, (Some("written".into()), Some("written".into())));
    }

    /// A project's writers' connection is kept while it is used, closed after a while without
    /// a write (an instance serving many projects does not keep a backend for each), and the
    /// next write opens one.
    #[test]
    fn the_writers_idle_connection_is_closed_and_the_next_write_opens_one() {
        let team = crate::team::testing::TestTeam::new();
        let idle = Duration::from_secs(2);
        let store = team.store_with_idle(idle);
        // The writers' backend, from a write transaction.
        let writer = || {
            store
                .transaction::<_, StoreError>(|tx| {
                    super::super::set_meta(tx, "key", "written")?;
                    tx.value::<i64>("SELECT pg_backend_pid()::bigint", &[])
                })
                .unwrap()
                .expect("a backend")
        };
        let first = writer();
        assert_eq!(team.backends(WRITER_APPLICATION), 1);
        // Written to more often than `idle`, for longer than it: the same backend throughout.
        let until = std::time::Instant::now() + idle + idle / 2;
        while std::time::Instant::now() < until {
            std::thread::sleep(idle / 5);
            assert_eq!(writer(), first, "closed while in use");
        }
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while team.backends(WRITER_APPLICATION) != 0 {
            assert!(std::time::Instant::now() < until, "never closed");
            std::thread::sleep(Duration::from_millis(50));
        }
        let next = writer();
        assert_ne!(next, first, "the closed backend again");
        assert_eq!(team.backends(WRITER_APPLICATION), 1);
    }

    #[test]
    fn notifications_keep_the_newest_head_and_only_while_live() {
        let heads = Heads::default();
        heads.notified("3:10");
        assert_eq!(heads.get(3), None, "not listening: read from the database");
        heads.set_live(true);
        heads.notified("3:12");
        heads.notified("3:11");
        heads.notified("4:1");
        heads.notified("junk");
        assert_eq!(heads.get(3), Some(12));
        assert_eq!(heads.get(4), Some(1));
        assert_eq!(heads.get(5), None);
    }
}
