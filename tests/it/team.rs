//! The team store on PostgreSQL (a temporary cluster `scripts/test.sh` starts, named by
//! `CAR_TEST_DATABASE_URL`; each test gets a database of its own): `car team` manages people,
//! tokens and projects; tokens are kept only as their hash; row-level security keeps each
//! project's rows to its own transactions even for a query without a filter, proven with an
//! application role that is not the tables' owner; instances migrating at once migrate once.

use serde_json::Value;
use sha2::Digest;

use crate::support::TestHome;
use car::team::{Role, TeamDb};

/// A database of its own on the test cluster, dropped when done.
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::spawn(connection);
    client
}

impl TestDb {
    fn new() -> TestDb {
        let admin = std::env::var("CAR_TEST_DATABASE_URL").expect(
            "CAR_TEST_DATABASE_URL is not set: ./scripts/test.sh starts PostgreSQL for these tests",
        );
        let name = format!("car_{}", uuid::Uuid::new_v4().simple());
        runtime().block_on(async {
            client(&admin)
                .await
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
        });
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("{admin}"),
        };
        TestDb { admin, name, url }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        runtime().block_on(async move {
            let _ = client(&admin)
                .await
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        });
    }
}

fn team(home: &TestHome, db: &TestDb, args: &[&str]) -> (i32, Value) {
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "team"])
        .args(args)
        .env("CAR_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), doc)
}

#[test]
fn car_team_manages_people_and_projects_and_keeps_only_token_hashes() {
    let home = TestHome::new();
    let db = TestDb::new();
    for project in ["web", "api"] {
        let (code, doc) = team(&home, &db, &["project", "add", project]);
        assert_eq!(code, 0, "{doc}");
    }
    let (code, doc) = team(&home, &db, &["project", "add", "web"]);
    assert_eq!((code, doc["error"]["code"].as_str()), (1, Some("exists")));

    let (code, added) = team(
        &home,
        &db,
        &["user", "add", "alice", "--role", "member", "--grant", "web"],
    );
    assert_eq!(code, 0, "{added}");
    let token = added["data"]["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("car_") && token.len() == 68, "{token}");
    assert_eq!(added["data"]["user"]["projects"][0]["project"], "web");
    assert_eq!(added["data"]["user"]["projects"][0]["role"], "member");
    // A project that is not there: nothing is added.
    let (code, doc) = team(&home, &db, &["user", "add", "bob", "--grant", "nope"]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("car team project add nope"));
    let (_, listed) = team(&home, &db, &["user", "list"]);
    let names: Vec<&str> = listed["data"]["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice"]);
    assert!(
        !listed.to_string().contains(&token),
        "a listing never shows a token"
    );
    // A reader on another project.
    let (code, _) = team(&home, &db, &["user", "add", "bob", "--role", "reader"]);
    assert_eq!(code, 0);
    let (code, granted) = team(&home, &db, &["grant", "bob", "api", "reader"]);
    assert_eq!(code, 0, "{granted}");
    assert_eq!(granted["data"]["projects"][0]["role"], "reader");

    runtime().block_on(async {
        // Stored as its SHA-256 only.
        let raw = client(&db.url).await;
        let stored: Vec<u8> = raw
            .query_one("SELECT token_hash FROM car_users WHERE name = 'alice'", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(stored, sha2::Sha256::digest(token.as_bytes()).to_vec());
        let dump: String = raw
            .query_one("SELECT string_agg(t::text, ' ') FROM car_users t", &[])
            .await
            .unwrap()
            .get(0);
        assert!(!dump.contains(&token[4..]), "{dump}");

        let team_db = TeamDb::connect(&db.url).await.unwrap();
        let alice = team_db.authenticate(&token).await.unwrap().unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.projects[0].role, Role::Member);
        assert!(team_db.authenticate("car_wrong").await.unwrap().is_none());
    });

    // A rotated token replaces the old one; a removed user's token works no more.
    let (code, rotated) = team(&home, &db, &["user", "token-rotate", "alice"]);
    assert_eq!(code, 0);
    let fresh = rotated["data"]["token"].as_str().unwrap().to_string();
    assert_ne!(fresh, token);
    runtime().block_on(async {
        let team_db = TeamDb::connect(&db.url).await.unwrap();
        assert!(team_db.authenticate(&token).await.unwrap().is_none());
        assert!(team_db.authenticate(&fresh).await.unwrap().is_some());
    });
    let (code, _) = team(&home, &db, &["user", "remove", "alice"]);
    assert_eq!(code, 0);
    let (code, doc) = team(&home, &db, &["user", "remove", "alice"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("not_found"))
    );
    runtime().block_on(async {
        let team_db = TeamDb::connect(&db.url).await.unwrap();
        assert!(team_db.authenticate(&fresh).await.unwrap().is_none());
    });

    // Bad input: a name that is not one, no database, one that is not there.
    let (code, doc) = team(&home, &db, &["user", "add", "a b"]);
    assert_eq!((code, doc["error"]["code"].as_str()), (2, Some("usage")));
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "team", "project", "list"])
        .env_remove("CAR_DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("CAR_DATABASE_URL"));
    let out = home
        .command(crate::support::CAR)
        .args(["--json", "team", "project", "list", "--database"])
        .arg("postgres://car:hunter2@127.0.0.1:1/x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cannot reach PostgreSQL") && !text.contains("hunter2"),
        "{text}"
    );
}

#[test]
fn row_level_security_keeps_each_project_to_itself_even_without_a_filter() {
    let db = TestDb::new();
    runtime().block_on(async {
        let team_db = TeamDb::connect(&db.url).await.unwrap();
        let web = team_db.add_project("web").await.unwrap().id;
        let api = team_db.add_project("api").await.unwrap().id;
        team_db
            .record_execution(web, "alice", "memory_add_fact", "ok", "mcp")
            .await
            .unwrap();
        team_db
            .record_execution(api, "bob", "task_manager", "ok", "cli")
            .await
            .unwrap();
        let seen = team_db.executions(web, 10).await.unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].author.as_deref(), Some("alice"));

        // The test connects as a superuser, like a careless deployment: the server's queries
        // still run as the application's role, which row-level security binds.
        let raw = client(&db.url).await;
        let superuser: bool = raw
            .query_one(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(superuser);
        // At the SQL level, as the application's role.
        raw.batch_execute("SET ROLE car_app").await.unwrap();
        let count = |sql: &'static str| {
            let raw = &raw;
            async move { raw.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
        };
        // No project set: a query without a filter sees nothing.
        assert_eq!(count("SELECT count(*) FROM car_executions").await, 0);
        // One project set: only its rows, however the query is written.
        raw.batch_execute(&format!("SET car.project = '{web}'"))
            .await
            .unwrap();
        assert_eq!(count("SELECT count(*) FROM car_executions").await, 1);
        let other = raw
            .query(
                "SELECT id FROM car_executions WHERE project_id = $1",
                &[&api],
            )
            .await
            .unwrap();
        assert!(other.is_empty(), "another project's rows are invisible");
        // Nor can it write into another project.
        let refused = raw
            .execute(
                "INSERT INTO car_executions(id, project_id, tool, status, started_at)
                 VALUES ('x', $1, 't', 'ok', now())",
                &[&api],
            )
            .await;
        let e = refused.expect_err("a row of another project");
        assert!(format!("{e:?}").contains("row-level security"), "{e:?}");
        // And the role itself bypasses nothing.
        let bypass: bool = raw
            .query_one(
                "SELECT rolbypassrls OR rolsuper FROM pg_roles WHERE rolname = 'car_app'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(!bypass);
    });
}

#[test]
fn instances_starting_together_migrate_once() {
    let db = TestDb::new();
    runtime().block_on(async {
        let starts = (0..8).map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move { TeamDb::connect(&url).await.map(|_| ()) })
        });
        for started in futures_util::future::join_all(starts).await {
            started.unwrap().unwrap();
        }
        let raw = client(&db.url).await;
        let rows: i64 = raw
            .query_one("SELECT count(*) FROM car_schema_migrations", &[])
            .await
            .unwrap()
            .get(0);
        let team_db = TeamDb::connect(&db.url).await.unwrap();
        let version = team_db.schema_version().await.unwrap();
        assert!(version >= 2, "{version}");
        assert_eq!(rows, i64::from(version), "each migration ran once");
        assert_eq!(team_db.migrate().await.unwrap(), 0, "nothing left to run");
    });
}
