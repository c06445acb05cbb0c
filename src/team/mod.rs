//! The team store on PostgreSQL: a team's projects, people and their access, and the team's
//! audit log, in a database several `car-server` instances share. SQLite stays the store of one
//! person's CAR; this is what a team points its servers at (`--database`, `CAR_DATABASE_URL`).
//!
//! Access is enforced twice. The server checks a caller's token and grants; and the tables of a
//! project's data carry PostgreSQL row-level security keyed on the `car.project` setting, which
//! a project's store ([`TeamDb::project_store`]) sets for one transaction only, so a query that
//! forgot its project filter still sees nothing of another project. Tokens are stored as their
//! SHA-256.
//!
//! Migrations are append-only (`migrations/NNNN_*.sql`) and run under a transaction-scoped
//! advisory lock: an instance that starts while another migrates waits for it and then finds
//! nothing left to run.

pub mod client;
pub mod push;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::postgres::{Heads, PgProject};
use crate::store::Store;

/// The migrations, in order. Never edit one that has shipped; add a new file.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "team", include_str!("migrations/0001_team.sql")),
    (2, "memory", include_str!("migrations/0002_memory.sql")),
    (
        3,
        "executions",
        include_str!("migrations/0003_executions.sql"),
    ),
    (4, "skills", include_str!("migrations/0004_skills.sql")),
    (5, "project", include_str!("migrations/0005_project.sql")),
    (
        6,
        "auth changes",
        include_str!("migrations/0006_auth_changes.sql"),
    ),
    (
        7,
        "node lookups",
        include_str!("migrations/0007_node_lookups.sql"),
    ),
    (
        8,
        "project memory",
        include_str!("migrations/0008_project_memory.sql"),
    ),
    (
        9,
        "memory unchanged",
        include_str!("migrations/0009_memory_unchanged.sql"),
    ),
    (
        10,
        "memory notify once",
        include_str!("migrations/0010_memory_notify_once.sql"),
    ),
];

/// The advisory lock every migrating instance takes (an arbitrary constant: "CAR" and 1).
const MIGRATION_LOCK: i64 = 0x4341_5200_0001;

/// How long a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A role: `admin` manages the team, `member` reads and writes, `reader` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Member,
    Reader,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Reader => "reader",
        }
    }

    fn parse(text: &str) -> Role {
        match text {
            "admin" => Role::Admin,
            "member" => Role::Member,
            // Anything else reads only.
            _ => Role::Reader,
        }
    }

    /// Whether the role may change a project's data.
    pub fn writes(self) -> bool {
        matches!(self, Role::Admin | Role::Member)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("the database URL is not one PostgreSQL takes ({0}); it looks like postgres://USER:PASSWORD@HOST:5432/DATABASE")]
    Url(String),
    #[error("cannot reach PostgreSQL at {at}: {message}; is it running, and does the URL (--database or CAR_DATABASE_URL) name the right host, port, user and database?")]
    Connect { at: String, message: String },
    #[error("the team database was migrated by a newer CAR (schema {found}, this CAR knows up to {known}); upgrade CAR")]
    NewerSchema { found: i32, known: i32 },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Exists(String),
    #[error("{0}")]
    Invalid(String),
    #[error("database error: {0}")]
    Db(String),
}

impl From<tokio_postgres::Error> for TeamError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => TeamError::Db(format!("{} ({})", db.message(), db.code().code())),
            None => TeamError::Db(with_cause(&e)),
        }
    }
}

impl From<deadpool_postgres::PoolError> for TeamError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            deadpool_postgres::PoolError::Timeout(_) => {
                TeamError::Db("no connection to it within 10 s".into())
            }
            other => TeamError::Db(format!("no connection to it: {other}")),
        }
    }
}

pub type Result<T, E = TeamError> = std::result::Result<T, E>;

/// A project of the team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TeamProject {
    pub id: i64,
    pub name: String,
    pub created_at: String,
}

/// A user, as listed (never the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The projects granted, with the role on each.
    pub projects: Vec<Grant>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    pub project: String,
    pub role: Role,
}

/// A user added, or whose token was rotated: the token, shown this once.
#[derive(Debug, Clone, Serialize)]
pub struct Issued {
    pub user: User,
    pub token: String,
}

/// What a token admits a request to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// No such token (never issued, rotated or revoked).
    Unknown,
    /// A user, with no such project granted (or none at all).
    NoProject { user: String },
    /// A user, to a project granted with this role.
    Project {
        user: String,
        project: TeamProjectRef,
        role: Role,
    },
}

/// A project, by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TeamProjectRef {
    pub id: i64,
    pub name: String,
}

/// A connection pool to a team database, migrated.
#[derive(Clone)]
pub struct TeamDb {
    pool: Pool,
    config: tokio_postgres::Config,
    /// The runtime the pool's connections run on (the one [`TeamDb::connect`] ran in).
    rt: tokio::runtime::Handle,
    /// Memory's change notifications, listened to from the first project store on.
    heads: Arc<OnceLock<Arc<Heads>>>,
}

/// `url` with its password, if any, replaced: for messages.
fn shown(url: &str) -> String {
    // Parameters (`?password=…`, `?sslpassword=…`) stay out as well.
    let url = url.split(['?', '#']).next().unwrap_or("");
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let rest = match rest.rsplit_once('@') {
                Some((user, host)) => {
                    let user = user.split(':').next().unwrap_or("");
                    format!("{user}@{host}")
                }
                None => rest.to_string(),
            };
            format!("{scheme}://{rest}")
        }
        None => "(not a URL)".to_string(),
    }
}

/// A new user token: `car_` and 64 hex digits (two random UUIDs' bits).
fn new_token() -> String {
    format!(
        "car_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A token's SHA-256: what the database keeps of it.
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A name for a user or project: 1 to 64 letters, digits, `.`, `_` or `-`.
fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(TeamError::Invalid(format!(
            "{what} name {name:?} is not 1 to 64 letters, digits, '.', '_' or '-'"
        )))
    }
}

impl TeamDb {
    /// Connects to `url` and brings the schema up to date (waiting for another instance that is
    /// migrating it).
    pub async fn connect(url: &str) -> Result<TeamDb> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| TeamError::Url(e.to_string()))?;
        let mut config = config;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("car");
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let manager_config = config.clone();
        let pool = Pool::builder(manager)
            .max_size(16)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| TeamError::Url(e.to_string()))?;
        let db = TeamDb {
            pool,
            config: manager_config,
            rt: tokio::runtime::Handle::current(),
            heads: Arc::default(),
        };
        // The first connection says whether the server is there at all.
        let _first = db.pool.get().await.map_err(|e| TeamError::Connect {
            at: shown(url),
            message: match &e {
                deadpool_postgres::PoolError::Backend(e) => with_cause(e),
                other => other.to_string(),
            },
        })?;
        db.migrate().await?;
        Ok(db)
    }

    /// The notifications of this database (listened to from the first call on).
    fn heads(&self) -> Arc<Heads> {
        self.heads
            .get_or_init(|| Heads::listen(self.config.clone(), &self.rt))
            .clone()
    }

    /// A number that changes whenever who may reach what changes (a user, token, grant or
    /// project), while this instance hears of every such change; `None` when it may not (not
    /// listening at this moment): then nothing about access may be kept.
    pub fn access_epoch(&self) -> Option<u64> {
        self.heads().auth_epoch()
    }

    /// The store of `project`'s data, for capabilities to run on (from a blocking thread, never
    /// one of the runtime's workers: see [`PgProject`]).
    pub fn project_store(&self, project: i64) -> Store {
        self.project_store_with_idle(project, crate::store::postgres::WRITER_IDLE)
    }

    /// [`TeamDb::project_store`], closing its writers' connection after `idle` without a write.
    pub(crate) fn project_store_with_idle(&self, project: i64, idle: Duration) -> Store {
        Store::postgres(PgProject::new(
            self.pool.clone(),
            self.config.clone(),
            self.rt.clone(),
            project,
            self.heads(),
            idle,
        ))
    }

    /// Runs the migrations this database lacks; returns how many ran.
    pub async fn migrate(&self) -> Result<usize> {
        self.ensure_app_role().await?;
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS car_schema_migrations (
                 version    integer PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
        let found: i32 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) FROM car_schema_migrations",
                &[],
            )
            .await?
            .get(0);
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if found > known {
            return Err(TeamError::NewerSchema { found, known });
        }
        let mut ran = 0;
        for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > found) {
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO car_schema_migrations(version, name) VALUES ($1, $2)",
                &[version, name],
            )
            .await?;
            ran += 1;
        }
        tx.commit().await?;
        Ok(ran)
    }

    /// Makes the cluster-wide role `car_app` before a fresh database's first migration. The
    /// migration's own advisory lock is per database, so two databases of one cluster
    /// migrating at once raced to create the role (a unique violation in `pg_authid`); here a
    /// lost race is retried. A migrated database skips this (its role exists).
    async fn ensure_app_role(&self) -> Result<()> {
        let client = self.pool.get().await?;
        let migrated = client
            .query_opt(
                "SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = 'car_schema_migrations'",
                &[],
            )
            .await?
            .is_some();
        if migrated {
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            let made = client
                .batch_execute(
                    "DO $$ BEGIN
                         IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'car_app') THEN
                             CREATE ROLE car_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
                         END IF;
                     END $$;
                     GRANT car_app TO CURRENT_USER;",
                )
                .await;
            match made {
                Ok(()) => return Ok(()),
                // unique_violation, duplicate_object, or "tuple concurrently updated".
                Err(e)
                    if attempt < 5
                        && e.code()
                            .is_some_and(|c| ["23505", "42710", "XX000"].contains(&c.code())) =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i32> {
        let client = self.pool.get().await?;
        Ok(client
            .query_one(
                "SELECT coalesce(max(version), 0) FROM car_schema_migrations",
                &[],
            )
            .await?
            .get(0))
    }

    /// Adds a project.
    pub async fn add_project(&self, name: &str) -> Result<TeamProject> {
        check_name("a project", name)?;
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "INSERT INTO car_projects(name) VALUES ($1) ON CONFLICT (name) DO NOTHING
                 RETURNING id, name, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
                &[&name],
            )
            .await?
            .ok_or_else(|| TeamError::Exists(format!("project '{name}' exists already")))?;
        Ok(TeamProject {
            id: row.get(0),
            name: row.get(1),
            created_at: row.get(2),
        })
    }

    /// Every project, by name.
    pub async fn projects(&self) -> Result<Vec<TeamProject>> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT id, name, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                 FROM car_projects ORDER BY name",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| TeamProject {
                id: r.get(0),
                name: r.get(1),
                created_at: r.get(2),
            })
            .collect())
    }

    /// Adds a user with `role`, granted `projects` (each with the same role); returns the user
    /// and their token, which is shown this once. Nothing is added when a project is unknown or
    /// the name is taken.
    pub async fn add_user(&self, name: &str, role: Role, projects: &[String]) -> Result<Issued> {
        check_name("a user", name)?;
        let token = new_token();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let id: i64 = tx
            .query_opt(
                "INSERT INTO car_users(name, role, token_hash) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING RETURNING id",
                &[&name, &role.as_str(), &token_hash(&token)],
            )
            .await?
            .ok_or_else(|| {
                TeamError::Exists(format!(
                    "user '{name}' exists already; `car team user token-rotate {name}` gives a new token"
                ))
            })?
            .get(0);
        for project in projects {
            grant_in(&tx, id, project, role).await?;
        }
        tx.commit().await?;
        Ok(Issued {
            user: self.user(name).await?,
            token,
        })
    }

    /// Removes a user: their token stops working at once.
    pub async fn remove_user(&self, name: &str) -> Result<()> {
        let client = self.pool.get().await?;
        let removed = client
            .execute("DELETE FROM car_users WHERE name = $1", &[&name])
            .await?;
        if removed == 0 {
            return Err(no_user(name));
        }
        Ok(())
    }

    /// A new token for a user; the old one stops working at once.
    pub async fn rotate_token(&self, name: &str) -> Result<Issued> {
        let token = new_token();
        let client = self.pool.get().await?;
        let changed = client
            .execute(
                "UPDATE car_users SET token_hash = $2, token_rotated_at = now() WHERE name = $1",
                &[&name, &token_hash(&token)],
            )
            .await?;
        if changed == 0 {
            return Err(no_user(name));
        }
        Ok(Issued {
            user: self.user(name).await?,
            token,
        })
    }

    /// Grants `user` `role` on `project` (replacing the role they had there).
    pub async fn grant(&self, user: &str, project: &str, role: Role) -> Result<User> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let id: i64 = tx
            .query_opt("SELECT id FROM car_users WHERE name = $1", &[&user])
            .await?
            .ok_or_else(|| no_user(user))?
            .get(0);
        grant_in(&tx, id, project, role).await?;
        tx.commit().await?;
        self.user(user).await
    }

    /// A user and their grants.
    pub async fn user(&self, name: &str) -> Result<User> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt("SELECT id, role FROM car_users WHERE name = $1", &[&name])
            .await?
            .ok_or_else(|| no_user(name))?;
        let id: i64 = row.get(0);
        let grants = client
            .query(
                "SELECT p.name, g.role FROM car_grants g JOIN car_projects p ON p.id = g.project_id
                 WHERE g.user_id = $1 ORDER BY p.name",
                &[&id],
            )
            .await?;
        Ok(User {
            id,
            name: name.to_string(),
            role: Role::parse(row.get(1)),
            projects: grants
                .iter()
                .map(|g| Grant {
                    project: g.get(0),
                    role: Role::parse(g.get(1)),
                })
                .collect(),
        })
    }

    /// Every user, by name.
    pub async fn users(&self) -> Result<Vec<User>> {
        let names: Vec<String> = {
            let client = self.pool.get().await?;
            client
                .query("SELECT name FROM car_users ORDER BY name", &[])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect()
        };
        let mut users = Vec::with_capacity(names.len());
        for name in names {
            users.push(self.user(&name).await?);
        }
        Ok(users)
    }

    /// The user a token belongs to, if any (compared by its hash, looked up by index).
    pub async fn authenticate(&self, token: &str) -> Result<Option<User>> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT name FROM car_users WHERE token_hash = $1",
                &[&token_hash(token)],
            )
            .await?;
        match row {
            Some(row) => Ok(Some(self.user(row.get(0)).await?)),
            None => Ok(None),
        }
    }

    /// Who a token belongs to and which of their projects a request reaches: the one named,
    /// or with none named the first granted (the oldest project). One round trip.
    pub async fn admit(&self, token: &str, project: Option<&str>) -> Result<Admission> {
        let client = self.pool.get().await?;
        let stmt = client
            .prepare_cached(
                "SELECT u.name, p.id, p.name, g.role
                 FROM car_users u
                 LEFT JOIN car_grants g ON g.user_id = u.id
                 LEFT JOIN car_projects p ON p.id = g.project_id
                     AND ($2::text IS NULL OR p.name = $2::text)
                 WHERE u.token_hash = $1
                 ORDER BY (p.id IS NULL), p.id
                 LIMIT 1",
            )
            .await?;
        let row = client
            .query_opt(&stmt, &[&token_hash(token), &project])
            .await?;
        Ok(match row {
            None => Admission::Unknown,
            Some(row) => match row.get::<_, Option<i64>>(1) {
                None => Admission::NoProject { user: row.get(0) },
                Some(id) => Admission::Project {
                    user: row.get(0),
                    project: TeamProjectRef {
                        id,
                        name: row.get(2),
                    },
                    role: Role::parse(row.get(3)),
                },
            },
        })
    }
}

/// An error and what caused it ("error connecting to server: Connection refused").
fn with_cause(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

fn no_user(name: &str) -> TeamError {
    TeamError::NotFound(format!(
        "no user '{name}' in this team (`car team user list` shows who there is)"
    ))
}

async fn grant_in(tx: &Transaction<'_>, user: i64, project: &str, role: Role) -> Result<()> {
    let project_id: i64 = tx
        .query_opt("SELECT id FROM car_projects WHERE name = $1", &[&project])
        .await?
        .ok_or_else(|| {
            TeamError::NotFound(format!(
                "no project '{project}' in this team; add it with `car team project add {project}`"
            ))
        })?
        .get(0);
    tx.execute(
        "INSERT INTO car_grants(user_id, project_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (user_id, project_id) DO UPDATE SET role = excluded.role",
        &[&user, &project_id, &role.as_str()],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_messages_and_tokens_are_long_and_hashed() {
        assert_eq!(
            shown("postgres://car:s3cret@db.example:5432/team"),
            "postgres://car@db.example:5432/team"
        );
        assert_eq!(
            shown("postgres://db.example/team"),
            "postgres://db.example/team"
        );
        let token = new_token();
        assert_eq!(token.len(), 4 + 64);
        assert_ne!(token, new_token());
        assert_eq!(token_hash(&token).len(), 32);
        assert!(check_name("a user", "alice.b-2_x").is_ok());
        for bad in ["", "a b", "x;drop", &"a".repeat(65)] {
            assert!(check_name("a user", bad).is_err(), "{bad}");
        }
    }
}

/// A database of its own on the test cluster `scripts/test.sh` starts (`CAR_TEST_DATABASE_URL`),
/// dropped when done: for the tests that run a capability on both stores.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub(crate) struct TestTeam {
        pub rt: tokio::runtime::Runtime,
        admin: String,
        name: String,
        pub url: String,
        project: i64,
    }

    async fn client(url: &str) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        tokio::spawn(connection);
        client
    }

    impl TestTeam {
        /// A fresh database with one project.
        pub fn new() -> TestTeam {
            let admin = std::env::var("CAR_TEST_DATABASE_URL").expect(
                "CAR_TEST_DATABASE_URL is not set: ./scripts/test.sh starts PostgreSQL for these tests",
            );
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let name = format!("car_{}", uuid::Uuid::new_v4().simple());
            let url = match admin.rsplit_once('/') {
                Some((server, _)) => format!("{server}/{name}"),
                None => panic!("{admin}"),
            };
            let project = rt.block_on(async {
                client(&admin)
                    .await
                    .batch_execute(&format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap();
                let db = TeamDb::connect(&url).await.unwrap();
                db.add_project("web").await.unwrap().id
            });
            TestTeam {
                rt,
                admin,
                name,
                url,
                project,
            }
        }

        /// Ends every connection to the database (as a restart would), and waits until they
        /// are gone.
        pub fn end_connections(&self) {
            self.rt.block_on(async {
                let admin = client(&self.admin).await;
                for _ in 0..500 {
                    let row = admin
                        .query_one(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                             WHERE datname = $1 AND pid <> pg_backend_pid()",
                            &[&self.name],
                        )
                        .await
                        .unwrap();
                    if row.get::<_, i64>(0) == 0 {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                panic!("the connections to {} did not end", self.name);
            });
        }

        /// How many connections to the database carry `application_name`.
        pub fn backends(&self, application_name: &str) -> i64 {
            self.rt.block_on(async {
                client(&self.admin)
                    .await
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                         WHERE datname = $1 AND application_name = $2",
                        &[&self.name, &application_name],
                    )
                    .await
                    .unwrap()
                    .get(0)
            })
        }

        /// [`TestTeam::store`], closing its writers' connection after `idle` without a write.
        pub fn store_with_idle(&self, idle: std::time::Duration) -> Store {
            let db = self.rt.block_on(TeamDb::connect(&self.url)).unwrap();
            db.project_store_with_idle(self.project, idle)
        }

        /// The project's store, through a connection of its own (another instance).
        pub fn store(&self) -> Store {
            self.store_with_idle(crate::store::postgres::WRITER_IDLE)
        }
    }

    /// Where a capability's data is kept in a test that runs on both stores: each
    /// [`TestStore::store`] is another process on the same file (SQLite), or another instance
    /// on the same team database (PostgreSQL).
    pub(crate) enum TestStore {
        Sqlite(tempfile::TempDir),
        Postgres(TestTeam),
    }

    impl TestStore {
        pub fn store(&self) -> Arc<Store> {
            Arc::new(match self {
                TestStore::Sqlite(dir) => Store::open(&dir.path().join("car.db")).unwrap(),
                TestStore::Postgres(team) => team.store(),
            })
        }

        /// The project directory a SQLite store's capabilities are scoped to (none on a team
        /// store, where the project is the store's).
        pub fn project_root(&self) -> Option<std::path::PathBuf> {
            match self {
                TestStore::Sqlite(dir) => Some(dir.path().join("project")),
                TestStore::Postgres(_) => None,
            }
        }
    }

    /// Runs a test, given a `&TestStore`, on both stores: `mod <name> { sqlite, postgres }`.
    macro_rules! on_both_stores {
        ($name:ident, $test:expr) => {
            mod $name {
                use super::*;
                #[test]
                fn sqlite() {
                    ($test)(&$crate::team::testing::TestStore::Sqlite(
                        tempfile::tempdir().unwrap(),
                    ))
                }
                #[test]
                fn postgres() {
                    ($test)(&$crate::team::testing::TestStore::Postgres(
                        $crate::team::testing::TestTeam::new(),
                    ))
                }
            }
        };
    }
    pub(crate) use on_both_stores;

    impl Drop for TestTeam {
        fn drop(&mut self) {
            let (admin, name) = (self.admin.clone(), self.name.clone());
            self.rt.block_on(async move {
                let _ = client(&admin)
                    .await
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
            });
        }
    }
}

#[cfg(test)]
mod store_tests {
    use std::sync::Arc;

    use crate::memory::{Kind, Memory, NewEntry};
    use crate::store::sql::args;

    const META_INSERT: &str = "INSERT INTO meta(key, value) VALUES (?1, ?2)";

    fn meta_of(store: &crate::store::Store, key: &str) -> Option<String> {
        store
            .read(|sql| sql.value::<String>("SELECT value FROM meta WHERE key = ?1", args![key]))
            .unwrap()
    }

    /// A transaction's last statements with its commit (one round trip on a team store): all
    /// of them or none, and the store goes on.
    fn last_statements(
        store: &crate::store::Store,
        rows: &[(&str, &dyn crate::store::sql::Param)],
    ) -> Result<(), crate::store::StoreError> {
        let params: Vec<[&dyn crate::store::sql::Param; 2]> = rows
            .iter()
            .map(|(key, value)| [key as &dyn crate::store::sql::Param, *value])
            .collect();
        let statements: Vec<(&str, &[&dyn crate::store::sql::Param])> =
            params.iter().map(|p| (META_INSERT, &p[..])).collect();
        store.transaction(|tx| tx.query_all_last(&statements).map(drop))
    }

    crate::team::testing::on_both_stores!(
        the_last_statements_commit_with_them_all_or_nothing,
        |stores: &crate::team::testing::TestStore| {
            let store = stores.store();
            last_statements(&store, &[("a", &"1"), ("b", &"2")]).unwrap();
            assert_eq!(meta_of(&store, "a").as_deref(), Some("1"));
            assert_eq!(meta_of(&store, "b").as_deref(), Some("2"));
            // The database refuses the second (its key is taken): the first is not kept.
            let refused = last_statements(&store, &[("c", &"3"), ("a", &"again")]);
            assert!(refused.is_err());
            assert_eq!(meta_of(&store, "c"), None);
            assert_eq!(meta_of(&store, "a").as_deref(), Some("1"));
            // The connection went back clean: the next transaction commits.
            last_statements(&store, &[("d", &"4")]).unwrap();
            assert_eq!(meta_of(&store, "d").as_deref(), Some("4"));
        }
    );

    /// A value PostgreSQL cannot take for its column fails before anything is sent: the
    /// statements before it are not sent alone with the commit.
    #[test]
    fn a_value_that_cannot_be_sent_stops_the_last_statements_before_any_is_sent() {
        let team = super::testing::TestTeam::new();
        let store = team.store();
        let bytes: Vec<u8> = vec![0xff, 0];
        let err = last_statements(&store, &[("e", &"5"), ("f", &bytes)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot send the values"), "{err}");
        assert_eq!(meta_of(&store, "e"), None);
        last_statements(&store, &[("g", &"7")]).unwrap();
        assert_eq!(meta_of(&store, "g").as_deref(), Some("7"));
    }

    #[test]
    fn a_project_store_sees_nothing_of_another_project_even_unfiltered() {
        let team = super::testing::TestTeam::new();
        let (db, other) = team.rt.block_on(async {
            let db = super::TeamDb::connect(&team.url).await.unwrap();
            let other = db.add_project("api").await.unwrap().id;
            (db, other)
        });
        let web = Memory::open(Arc::new(team.store()), None, None).unwrap();
        let api_store = Arc::new(db.project_store(other));
        let api = Memory::open(api_store.clone(), None, None).unwrap();
        web.write(NewEntry::new(
            Kind::Pattern,
            "deploy",
            "web deploys on fridays",
        ))
        .unwrap();
        assert!(api.query("deploy fridays", "", 5).unwrap().is_empty());
        // The same id is free in another project: ids are per project.
        let written = api
            .write(NewEntry::new(Kind::Pattern, "deploy", "api deploys daily"))
            .unwrap();
        assert_eq!(written.id, "fact-1");
        let mut named = NewEntry::new(Kind::Pattern, "x", "y");
        named.id = Some("fact-1".into());
        assert_eq!(api.write(named).unwrap().id, "fact-1-2");
        // A statement without any filter sees only the store's project.
        let rows: i64 = api_store
            .read(|sql| {
                sql.value::<i64>("SELECT count(*) FROM memory_nodes", &[])
                    .map(Option::unwrap_or_default)
            })
            .unwrap();
        assert_eq!(rows, 2);
        // Writing a row into another project is refused by row-level security.
        let err = api_store
            .transaction(|sql| {
                sql.execute(
                    "INSERT INTO meta(team_project, key, value) VALUES (?1, 'k', 'v')",
                    args![team_project_of(&team)],
                )
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("row-level security"), "{err}");
    }

    /// Migration 0008: memory a team server wrote without a project takes its team project,
    /// so a new fact with its subject replaces it, and another instance's index follows.
    #[test]
    fn memory_written_without_a_project_becomes_its_team_projects() {
        let team = super::testing::TestTeam::new();
        let project = team_project_of(&team);
        let store = Arc::new(team.store());
        let other = Memory::open(Arc::new(team.store()), None, None).unwrap();
        // As a server before this release wrote it: no project.
        team.rt.block_on(async {
            let (client, connection) = tokio_postgres::connect(&team.url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "INSERT INTO memory_nodes(team_project, id, project_id, tenant, kind, subject,
                         subject_key, body, created_at)
                     VALUES ({project}, 'fact-1', NULL, '', 'pattern', 'deploy', 'deploy',
                         'deploys on fridays', 'then');
                     INSERT INTO memory_changes(team_project, node_id) VALUES ({project}, 'fact-1');"
                ))
                .await
                .unwrap();
            client
                .batch_execute(include_str!("migrations/0008_project_memory.sql"))
                .await
                .unwrap();
        });
        let memory = Memory::open(store, None, None).unwrap();
        assert_eq!(
            memory.get("fact-1", "").unwrap().unwrap().project,
            Some(project)
        );
        let written = memory
            .write(NewEntry::new(
                Kind::Pattern,
                "deploy",
                "deploys on tuesdays",
            ))
            .unwrap();
        assert_eq!(written.superseded, ["fact-1"]);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ids_of(&other.query("deploy", "", 5).unwrap()) != [written.id.clone()] {
            assert!(
                std::time::Instant::now() < until,
                "the other instance never followed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A write group's changes are logged in multi-row statements, and so are the embedder's
    /// for a chunk of vectors: the instances listening hear of each statement once, with its
    /// newest change, not once for every entry.
    #[test]
    fn a_write_group_and_its_vectors_are_notified_once_each_with_the_newest_change() {
        use futures_util::StreamExt;
        let team = super::testing::TestTeam::new();
        let memory = Memory::open(Arc::new(team.store()), None, None).unwrap();
        // The write embeds what it wrote before it returns (one chunk), so nothing is logged
        // after it.
        memory.embed_on_write();
        let (client, mut connection) = team
            .rt
            .block_on(tokio_postgres::connect(&team.url, tokio_postgres::NoTls))
            .unwrap();
        let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
        team.rt.spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message {
                    let _ = heard_tx.send((n.channel().to_owned(), n.payload().to_owned()));
                }
            }
        });
        team.rt
            .block_on(client.batch_execute("LISTEN car_memory; LISTEN car_test_end"))
            .unwrap();
        // Eight: rows go in multi-row statements of powers of two, so eight go in one.
        let entries = (0..8)
            .map(|i| NewEntry::new(Kind::Pattern, &format!("service {i}"), "runs nightly"))
            .collect();
        let written = memory.write_entries(entries).unwrap();
        assert_eq!(written.len(), 8);
        // Notifications arrive in commit order: this one comes after every one of the group's.
        team.rt
            .block_on(client.batch_execute("NOTIFY car_test_end"))
            .unwrap();
        let mut memory_heads = Vec::new();
        team.rt.block_on(async {
            loop {
                let (channel, payload) =
                    tokio::time::timeout(std::time::Duration::from_secs(10), heard.recv())
                        .await
                        .expect("the end was never heard")
                        .unwrap();
                if channel == "car_test_end" {
                    break;
                }
                memory_heads.push(payload);
            }
        });
        // The group's newest change (each entry's first), then the vectors' (each entry's
        // second).
        let newest = |nth: &str| -> i64 {
            team.store()
                .read(|sql| {
                    sql.value::<i64>(
                        &format!(
                            "SELECT max(seq) FROM (SELECT seq, row_number() OVER
                             (PARTITION BY node_id ORDER BY seq) AS nth FROM memory_changes)
                             AS numbered WHERE nth = {nth}"
                        ),
                        &[],
                    )
                    .map(Option::unwrap_or_default)
                })
                .unwrap()
        };
        let (group, vectors) = (newest("1"), newest("2"));
        assert!(vectors > group, "the vectors were logged");
        let heads: Vec<i64> = memory_heads
            .iter()
            .map(|payload| payload.split_once(':').unwrap().1.parse().unwrap())
            .collect();
        assert_eq!(heads, [group, vectors], "heard {memory_heads:?}");
    }

    /// A write group planned before its transaction (one round trip) that another instance's
    /// write overtook is not made as planned: the writer catches up and plans it again, so it
    /// replaces that instance's fact with its subject, and nothing is written twice. Alone, a
    /// writer plans ahead.
    #[test]
    fn a_write_planned_ahead_that_another_instance_overtook_is_planned_again() {
        let team = super::testing::TestTeam::new();
        let store = Arc::new(team.store());
        let a = Memory::open(Arc::new(team.store()), None, None).unwrap();
        let b = Memory::open(store.clone(), None, None).unwrap();
        b.write(NewEntry::new(
            Kind::Pattern,
            "warm up",
            "loads the index of b",
        ))
        .unwrap();
        let first = a
            .write(NewEntry::new(
                Kind::Pattern,
                "deploy window",
                "web deploys on fridays",
            ))
            .unwrap();
        // b's index has not taken a's fact in: planned ahead, b's write would add a second
        // current fact on the subject.
        b.plan_ahead_always();
        let second = b
            .write(NewEntry::new(
                Kind::Pattern,
                "deploy window",
                "web deploys on tuesdays",
            ))
            .unwrap();
        assert_eq!(second.superseded, [first.id]);
        assert_eq!(second.id, "fact-3");
        assert_eq!(b.groups_planned_ahead(), 0, "the overtaken plan was made");
        assert_eq!(
            ids_of(&b.query("deploy window", "", 5).unwrap()),
            std::slice::from_ref(&second.id)
        );
        let nodes = || -> i64 {
            store
                .read(|sql| {
                    sql.value::<i64>("SELECT count(*) FROM memory_nodes", &[])
                        .map(Option::unwrap_or_default)
                })
                .unwrap()
        };
        assert_eq!(nodes(), 3);
        // A plan that was not made takes no number: after a change that adds no entry (a
        // delete through a), b's next id follows its last.
        a.delete("fact-1", "").unwrap();
        let fourth = b
            .write(NewEntry::new(
                Kind::Pattern,
                "rollback",
                "roll back with flags",
            ))
            .unwrap();
        assert_eq!(fourth.id, "fact-4");
        assert_eq!(nodes(), 3);
        // Once current (its embedder's changes taken in), b's plans are made, and its index
        // stays right.
        let mut current = second.id;
        let mut day = 0;
        while b.groups_planned_ahead() == 0 {
            day += 1;
            assert!(day < 100, "no plan of b's was made");
            let next = b
                .write(NewEntry::new(
                    Kind::Pattern,
                    "deploy window",
                    &format!("web deploys on day {day}"),
                ))
                .unwrap();
            assert_eq!(next.superseded, [current]);
            current = next.id;
        }
        assert_eq!(
            ids_of(&b.query("deploy window", "", 5).unwrap()),
            std::slice::from_ref(&current)
        );
        // a, writing alone, plans ahead once its notifications say its index is current.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut n = 0;
        while a.groups_planned_ahead() == 0 {
            assert!(std::time::Instant::now() < until, "a never planned ahead");
            a.write(NewEntry::new(Kind::Pattern, &format!("note {n}"), "alone"))
                .unwrap();
            n += 1;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(ids_of(&a.query("deploy window", "", 5).unwrap()), [current]);
    }

    fn ids_of(hits: &[crate::memory::QueryHit]) -> Vec<String> {
        hits.iter().map(|h| h.id.clone()).collect()
    }

    fn team_project_of(team: &super::testing::TestTeam) -> i64 {
        team.rt.block_on(async {
            let db = super::TeamDb::connect(&team.url).await.unwrap();
            let projects = db.projects().await.unwrap();
            projects.iter().find(|p| p.name == "web").unwrap().id
        })
    }
}
