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
    let rt = runtime();
    let (team_db, web, api) = rt.block_on(async {
        let team_db = TeamDb::connect(&db.url).await.unwrap();
        let web = team_db.add_project("web").await.unwrap().id;
        let api = team_db.add_project("api").await.unwrap().id;
        (team_db, web, api)
    });
    // Each project's memory goes through its own store, as the server writes it.
    for (project, fact) in [(web, "web deploys on fridays"), (api, "api deploys daily")] {
        let memory = car::Memory::open(
            std::sync::Arc::new(team_db.project_store(project)),
            None,
            None,
        )
        .unwrap();
        memory
            .write(car::NewEntry::new(car::Kind::Pattern, "deploys", fact))
            .unwrap();
        let seen = memory.query("when do we deploy?", "", 5).unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].body, fact);
    }
    rt.block_on(async {
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
        assert_eq!(count("SELECT count(*) FROM memory_nodes").await, 0);
        // One project set: only its rows, however the query is written.
        raw.batch_execute(&format!("SET car.project = '{web}'"))
            .await
            .unwrap();
        assert_eq!(count("SELECT count(*) FROM memory_nodes").await, 1);
        let other = raw
            .query(
                "SELECT id FROM memory_nodes WHERE team_project = $1",
                &[&api],
            )
            .await
            .unwrap();
        assert!(other.is_empty(), "another project's rows are invisible");
        // Nor can it write into another project.
        let refused = raw
            .execute(
                "INSERT INTO executions(id, team_project, tool, status, started_at)
                 VALUES ('x', $1, 't', 'ok', '2026-12-04T00:00:00.000Z')",
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

/// `car-server --database` on the test database, on a port it chose.
struct TeamServer {
    child: Option<crate::support::Reaped>,
    base: String,
}

impl TeamServer {
    fn start(home: &TestHome, url: &str) -> TeamServer {
        use std::io::{BufRead, BufReader};
        let mut child = home
            .command(crate::support::CAR_SERVER)
            .args(["--mcp-bind", "127.0.0.1:0", "--database", url])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next()
                .expect("car-server exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("car-server: MCP at ") {
                break rest.split("/mcp").next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        TeamServer {
            child: Some(crate::support::Reaped(child)),
            base,
        }
    }

    /// A `tools/call` on `path` (`/mcp`, `/mcp/web`) with `token`, in the stateless revision:
    /// the HTTP status and the JSON-RPC message.
    fn call(&self, path: &str, token: Option<&str>, tool: &str, arguments: Value) -> (u16, Value) {
        self.call_keyed(path, token, tool, arguments, None)
    }

    /// [`TeamServer::call`] with a `car/request_id` (an idempotency key).
    fn call_keyed(
        &self,
        path: &str,
        token: Option<&str>,
        tool: &str,
        arguments: Value,
        request_id: Option<&str>,
    ) -> (u16, Value) {
        let mut params = serde_json::json!({"name": tool, "arguments": arguments});
        if let Some(id) = request_id {
            params["_meta"] = serde_json::json!({"car/request_id": id});
        }
        self.request(path, token, "tools/call", params)
    }

    /// Any request on `path` with `token`, in the stateless revision (the protocol version and
    /// capabilities in `_meta`, the method and name in headers): the HTTP status and the
    /// JSON-RPC message.
    pub(crate) fn request(
        &self,
        path: &str,
        token: Option<&str>,
        method: &str,
        mut params: Value,
    ) -> (u16, Value) {
        if !params["_meta"].is_object() {
            params["_meta"] = serde_json::json!({});
        }
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] =
            serde_json::json!("2026-07-28");
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = serde_json::json!({});
        let bearer = token.map(|t| format!("Bearer {t}"));
        let name = params["name"]
            .as_str()
            .or_else(|| params["uri"].as_str())
            .map(str::to_string);
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        if let Some(name) = &name {
            headers.push(("mcp-name", name));
        }
        if let Some(bearer) = &bearer {
            headers.push(("authorization", bearer));
        }
        let (status, body, _) = crate::server::post(
            &format!("{}{path}", self.base),
            &headers,
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                .to_string(),
        );
        let message = if status == 200 {
            crate::server::message_of(&body)
        } else {
            body
        };
        (status, message)
    }
}

/// A team server on a database of its own, as one member of its project `web`: the MCP peer
/// the memory suite runs against as it does against car-mcp on SQLite.
pub(crate) struct TeamPeer {
    server: TeamServer,
    token: String,
    _db: TestDb,
    _home: TestHome,
}

impl TeamPeer {
    pub(crate) fn start() -> TeamPeer {
        let home = TestHome::new();
        let db = TestDb::new();
        let (code, added) = team(&home, &db, &["project", "add", "web"]);
        assert_eq!(code, 0, "{added}");
        let token = token_of(&team(&home, &db, &["user", "add", "alice", "--grant", "web"]).1);
        let server = TeamServer::start(&home, &db.url);
        TeamPeer {
            server,
            token,
            _db: db,
            _home: home,
        }
    }
}

impl crate::support::Peer for TeamPeer {
    fn revision(&self) -> &'static str {
        "2026-07-28"
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let (status, message) = self
            .server
            .request("/mcp/web", Some(&self.token), method, params);
        assert!(
            status == 200 || message.get("error").is_some(),
            "{method}: HTTP {status}: {message}"
        );
        message
    }
}

fn token_of(doc: &Value) -> String {
    doc["data"]["token"].as_str().unwrap().to_string()
}

/// Projects `web` and `api`; alice a member of web, bob of api, carol a reader of web: their
/// tokens.
fn web_and_api(home: &TestHome, db: &TestDb) -> [String; 3] {
    for project in ["web", "api"] {
        assert_eq!(team(home, db, &["project", "add", project]).0, 0);
    }
    [
        &["alice", "--grant", "web"][..],
        &["bob", "--grant", "api"][..],
        &["carol", "--role", "reader", "--grant", "web"][..],
    ]
    .map(|who| {
        let args: Vec<&str> = ["user", "add"].iter().chain(who).copied().collect();
        token_of(&team(home, db, &args).1)
    })
}

/// The text a tool answered with, whatever its shape.
fn answered(message: &Value) -> String {
    message["result"].to_string()
}

#[test]
fn two_users_on_two_projects_see_only_their_own_through_http_mcp() {
    let home = TestHome::new();
    let db = TestDb::new();
    let [alice, bob, carol] = web_and_api(&home, &db);
    let server = TeamServer::start(&home, &db.url);

    let fact = serde_json::json!({"subject": "web deploys",
                                  "body": "the web app deploys through the blue-green pipeline on fridays"});
    let (status, added) = server.call("/mcp/web", Some(&alice), "memory_add_fact", fact);
    assert_eq!(status, 200, "{added}");
    assert_eq!(added["result"]["isError"], false, "{added}");
    let (_, added) = server.call(
        "/mcp",
        Some(&bob),
        "memory_add_fact",
        serde_json::json!({"subject": "api deploys", "body": "the api deploys by canary every morning"}),
    );
    assert_eq!(
        added["result"]["isError"], false,
        "bob's default project is api: {added}"
    );

    let question = serde_json::json!({"query": "how do we deploy the app to production?"});
    // Each sees their own project's fact and nothing of the other's, through any tool.
    let (_, seen) = server.call("/mcp/web", Some(&alice), "memory_query", question.clone());
    assert!(answered(&seen).contains("blue-green"), "{seen}");
    assert!(!answered(&seen).contains("canary"), "{seen}");
    let (_, seen) = server.call("/mcp/api", Some(&bob), "memory_query", question.clone());
    assert!(answered(&seen).contains("canary"), "{seen}");
    assert!(!answered(&seen).contains("blue-green"), "{seen}");
    // Asked in the other's own words, still nothing; nor is a reminder drawn from it.
    let (_, seen) = server.call(
        "/mcp/api",
        Some(&bob),
        "memory_query",
        serde_json::json!({"query": "blue-green pipeline on fridays"}),
    );
    assert_eq!(seen["result"]["isError"], false, "{seen}");
    let results = seen["result"]["structuredContent"]["results"].to_string();
    assert!(!results.contains("blue-green"), "{seen}");
    let remind = serde_json::json!({"query": "deploy the web app through the blue-green pipeline", "force": true});
    let (_, reminder) = server.call("/mcp/web", Some(&alice), "memory_intervene", remind.clone());
    assert!(
        answered(&reminder).contains("fridays"),
        "in its own project: {reminder}"
    );
    let (_, reminder) = server.call("/mcp/api", Some(&bob), "memory_intervene", remind);
    assert_eq!(reminder["result"]["isError"], false, "{reminder}");
    assert!(!answered(&reminder).contains("fridays"), "{reminder}");
    // Another's project is not found, exactly as a project that does not exist.
    let (status, refused) = server.call("/mcp/web", Some(&bob), "memory_query", question.clone());
    assert_eq!(status, 404, "{refused}");
    let (status, missing) = server.call("/mcp/nope", Some(&bob), "memory_query", question.clone());
    assert_eq!(status, 404, "{missing}");
    assert_eq!(
        refused["error"].as_str().unwrap().replace("web", "nope"),
        missing["error"].as_str().unwrap(),
        "the answers do not tell a hidden project from a missing one"
    );
    // No token or a wrong one: 401, saying nothing of projects.
    for token in [None, Some("car_wrong")] {
        let (status, body) = server.call("/mcp/web", token, "memory_query", question.clone());
        assert_eq!(status, 401, "{body}");
        assert!(!body.to_string().contains("web"), "{body}");
    }
    // A reader reads, and is denied every write.
    let (_, seen) = server.call("/mcp/web", Some(&carol), "memory_query", question.clone());
    assert!(answered(&seen).contains("blue-green"), "{seen}");
    let (_, denied) = server.call(
        "/mcp/web",
        Some(&carol),
        "memory_add_fact",
        serde_json::json!({"subject": "x", "body": "a reader's fact"}),
    );
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(answered(&denied).contains("may only read"), "{denied}");
    // A token rotated stops as soon as the server hears of it from the database (the server
    // remembers what a token admits until then), and the new one works.
    let (_, rotated) = team(&home, &db, &["user", "token-rotate", "alice"]);
    let stopped = std::time::Instant::now();
    loop {
        let (status, _) = server.call("/mcp/web", Some(&alice), "memory_query", question.clone());
        if status == 401 {
            break;
        }
        assert!(
            stopped.elapsed().as_secs() < 5,
            "the rotated token still works: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    eprintln!(
        "a rotated token stopped working after {:?}",
        stopped.elapsed()
    );
    let (status, _) = server.call(
        "/mcp/web",
        Some(&token_of(&rotated)),
        "memory_query",
        question,
    );
    assert_eq!(status, 200);

    // The audit log says who wrote what, through which tool; a reader's attempt is there too.
    runtime().block_on(async {
        let raw = client(&db.url).await;
        let rows = raw
            .query(
                "SELECT p.name, e.author, e.tool, e.status, e.subject FROM executions e
                 JOIN car_projects p ON p.id = e.team_project
                 WHERE e.tool = 'memory_add_fact' ORDER BY e.rowid",
                &[],
            )
            .await
            .unwrap();
        let log: Vec<(String, String, String, String, Option<String>)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect();
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(
            (log[0].0.as_str(), log[0].1.as_str(), log[0].3.as_str()),
            ("web", "alice", "ok")
        );
        assert!(log[0].4.is_some(), "the fact written: {log:?}");
        assert_eq!((log[1].0.as_str(), log[1].1.as_str()), ("api", "bob"));
        assert_eq!((log[2].1.as_str(), log[2].3.as_str()), ("carol", "denied"));
    });
    drop(server.child);
}

/// One `memory_add_fact` over HTTP in the stateless revision; `Ok(true)` when acknowledged,
/// `Ok(false)` when the server answered but refused, `Err` when no answer came (a dead server).
async fn add_fact(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    subject: &str,
    body: &str,
) -> Result<bool, reqwest::Error> {
    let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                  "io.modelcontextprotocol/clientCapabilities": {}});
    let response = http
        .post(format!("{base}/mcp/web"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "memory_add_fact")
        .header("authorization", format!("Bearer {token}"))
        .body(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "memory_add_fact", "_meta": meta,
                           "arguments": {"subject": subject, "body": body}}})
            .to_string(),
        )
        .send()
        .await?;
    let ok = response.status().is_success();
    let text = response.text().await?;
    let message =
        crate::server::message_of(&serde_json::from_str(&text).unwrap_or(Value::String(text)));
    Ok(ok && message["result"]["isError"] == false)
}

/// Two instances on one database, 8 clients writing 1,000 facts each through both as a load
/// balancer would;
/// one instance is killed (SIGKILL) in the middle. Every write either instance acknowledged
/// is read back through the survivor, and a write through one is seen through the other.
#[test]
fn a_killed_instance_loses_no_acknowledged_write_and_instances_see_each_other() {
    const CLIENTS: usize = 8;
    const EACH: usize = 1_000;
    const WRITES: usize = CLIENTS * EACH;
    let home = TestHome::new();
    let db = TestDb::new();
    assert_eq!(team(&home, &db, &["project", "add", "web"]).0, 0);
    let token = token_of(&team(&home, &db, &["user", "add", "alice", "--grant", "web"]).1);
    let mut doomed = TeamServer::start(&home, &db.url);
    let survivor = TeamServer::start(&home, &db.url);

    // Freshness: written through one, found through the other.
    let (_, added) = doomed.call(
        "/mcp/web",
        Some(&token),
        "memory_add_fact",
        serde_json::json!({"subject": "release train", "body": "the release train leaves on wednesdays"}),
    );
    assert_eq!(added["result"]["isError"], false, "{added}");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, seen) = survivor.call(
            "/mcp/web",
            Some(&token),
            "memory_query",
            serde_json::json!({"query": "when does the release train leave?"}),
        );
        if answered(&seen).contains("wednesdays") {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the other instance never saw the write"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    let bases = [doomed.base.clone(), survivor.base.clone()];
    let acknowledged = runtime().block_on(async {
        let http = reqwest::Client::new();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let clients = (0..CLIENTS).map(|c| {
            let (http, bases, token, done) =
                (http.clone(), bases.clone(), token.clone(), done.clone());
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for w in 0..EACH {
                    let subject = format!("storm c{c} w{w}");
                    let body = format!("writer {c} wrote entry {w} of the storm");
                    // Round robin, and to the other instance when one does not answer.
                    let first = (c + w) % 2;
                    for attempt in 0..2 {
                        match add_fact(
                            &http,
                            &bases[(first + attempt) % 2],
                            &token,
                            &subject,
                            &body,
                        )
                        .await
                        {
                            Ok(true) => {
                                acknowledged.push(subject);
                                break;
                            }
                            Ok(false) | Err(_) => continue,
                        }
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                acknowledged
            })
        });
        let clients: Vec<_> = clients.collect();
        // Kill one instance a third of the way through.
        while done.load(std::sync::atomic::Ordering::Relaxed) < WRITES / 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        drop(doomed.child.take());
        let mut all = Vec::new();
        for client in clients {
            all.extend(client.await.unwrap());
        }
        all
    });
    assert!(
        acknowledged.len() >= WRITES * 9 / 10,
        "most writes are acknowledged by one instance or the other: {}",
        acknowledged.len()
    );
    // Every acknowledged write is in the database, and the survivor finds it.
    let missing: Vec<&String> = runtime().block_on(async {
        let raw = client(&db.url).await;
        let rows = raw
            .query(
                "SELECT subject FROM memory_nodes WHERE subject LIKE 'storm %'",
                &[],
            )
            .await
            .unwrap();
        let stored: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        acknowledged
            .iter()
            .filter(|s| !stored.contains(*s))
            .collect()
    });
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    for subject in acknowledged.iter().step_by(37) {
        let (_, seen) = survivor.call(
            "/mcp/web",
            Some(&token),
            "memory_query",
            serde_json::json!({ "query": format!("what did {subject} write?") }),
        );
        assert!(
            answered(&seen).contains(subject.as_str()),
            "{subject}: {seen}"
        );
    }
}

/// The real Claude Code, pointed at a team server the way docs/team.md says (`claude mcp add
/// --transport http … --header "Authorization: Bearer …"`), recalls what a teammate taught the
/// project; the audit log has the call under the user whose token Claude Code sent.
#[test]
fn claude_code_recalls_a_teammates_fact_from_a_team_server_with_its_token() {
    use crate::claude::{claude, result_text, run_against, tool_results, ScriptedModel, ToolCall};
    let home = TestHome::new();
    let db = TestDb::new();
    assert_eq!(team(&home, &db, &["project", "add", "web"]).0, 0);
    let alice = token_of(&team(&home, &db, &["user", "add", "alice", "--grant", "web"]).1);
    let bob = token_of(&team(&home, &db, &["user", "add", "bob", "--grant", "web"]).1);
    let server = TeamServer::start(&home, &db.url);
    let fact =
        "Production deploys go through the blue-green pipeline and need a green canary first.";
    let (_, added) = server.call(
        "/mcp/web",
        Some(&bob),
        "memory_add_fact",
        serde_json::json!({"subject": "production deploys", "body": fact}),
    );
    assert_eq!(added["result"]["isError"], false, "{added}");

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let url = format!("{}/mcp/web", server.base);
    let added = claude(root, "http://127.0.0.1:9")
        .current_dir(root)
        .args([
            "mcp",
            "add",
            "--scope",
            "user",
            "--transport",
            "http",
            "car",
            &url,
        ])
        .args(["--header", &format!("Authorization: Bearer {alice}")])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let model = ScriptedModel::start(
        vec![ToolCall {
            id: "toolu_recall",
            name: "mcp__car__memory_query".to_string(),
            input: serde_json::json!({"query": "how do we ship to production?"}),
        }],
        "Recalled.",
    );
    let mut cmd = claude(root, &format!("http://127.0.0.1:{}", model.port));
    cmd.current_dir(root)
        .args(["-p", "How do we ship to production? Ask the team's memory."])
        .args(["--allowedTools", "mcp__car__memory_query"])
        .args(["--output-format", "stream-json", "--verbose"]);
    let run = run_against(cmd, root, &model);
    let context = &run.context;
    assert_eq!(run.code, Some(0), "{context}");
    let results = model
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .flat_map(|r| tool_results(&r.body))
        .collect::<Vec<_>>();
    let recalled = results
        .iter()
        .find(|r| r["tool_use_id"] == "toolu_recall")
        .unwrap_or_else(|| panic!("memory_query was never answered\n{context}"));
    assert_ne!(recalled["is_error"], true, "{recalled}\n{context}");
    assert!(
        result_text(&recalled["content"]).contains("blue-green"),
        "{recalled}\n{context}"
    );
    runtime().block_on(async {
        let raw = client(&db.url).await;
        let author: String = raw
            .query_one(
                "SELECT author FROM executions WHERE tool = 'memory_query' ORDER BY rowid DESC LIMIT 1",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(author, "alice");
    });
}

/// A TCP proxy to the test cluster that can be cut (every connection dropped, new ones closed
/// at once) and restored: the database going away and coming back, for one server only.
struct Cuttable {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl Cuttable {
    fn to(url: &str) -> Cuttable {
        use std::sync::atomic::Ordering;
        let target = url
            .split('@')
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap()
            .to_string();
        let runtime = runtime();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let generation = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepting, current) = (up.clone(), generation.clone());
        runtime.spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !accepting.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let (target, current) = (target.clone(), current.clone());
                let born = current.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                    let cut = async {
                        while current.load(Ordering::SeqCst) == born {
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        }
                    };
                    tokio::select! { _ = copy => {}, _ = cut => {} }
                });
            }
        });
        Cuttable {
            port,
            up,
            generation,
            _runtime: runtime,
        }
    }

    fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn the_database_going_away_fails_requests_clearly_and_the_server_recovers_without_a_restart() {
    let home = TestHome::new();
    let db = TestDb::new();
    assert_eq!(team(&home, &db, &["project", "add", "web"]).0, 0);
    let token = token_of(&team(&home, &db, &["user", "add", "alice", "--grant", "web"]).1);
    let proxy = Cuttable::to(&db.url);
    let server_at = db.url.split('@').nth(1).unwrap().split('/').next().unwrap();
    let via_proxy = db
        .url
        .replace(server_at, &format!("127.0.0.1:{}", proxy.port));
    let server = TeamServer::start(&home, &via_proxy);
    let write = |subject: &str| {
        server.call(
            "/mcp/web",
            Some(&token),
            "memory_add_fact",
            serde_json::json!({"subject": subject, "body": format!("{subject} is written down")}),
        )
    };
    let (status, added) = write("before the outage");
    assert_eq!(
        (status, &added["result"]["isError"]),
        (200, &Value::Bool(false)),
        "{added}"
    );

    proxy.cut();
    let (status, failed) = write("during the outage");
    let said = failed.to_string();
    assert!(
        status == 503 || failed["result"]["isError"] == true,
        "a write with the database gone fails: {status} {failed}"
    );
    assert!(
        said.contains("database"),
        "the error says what failed: {said}"
    );
    eprintln!("with the database gone: {status} {said}");

    proxy.restore();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, added) = write("after the outage");
        if status == 200 && added["result"]["isError"] == false {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "never recovered: {status} {added}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (_, seen) = server.call(
        "/mcp/web",
        Some(&token),
        "memory_query",
        serde_json::json!({"query": "what was written before and after the outage?"}),
    );
    let text = answered(&seen);
    assert!(
        text.contains("before the outage") && text.contains("after the outage"),
        "{seen}"
    );
}

/// The project's content in the tool's answer: its text is `car --json`'s envelope.
fn envelope(message: &Value) -> Value {
    let text = message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    serde_json::from_str(text.lines().next().unwrap_or_default()).unwrap_or(Value::Null)
}

#[test]
fn a_team_shares_its_board_decisions_and_checkpoints_and_a_reader_only_reads_them() {
    let home = TestHome::new();
    let db = TestDb::new();
    let [alice, bob, carol] = web_and_api(&home, &db);
    let dave = token_of(&team(&home, &db, &["user", "add", "dave", "--grant", "web"]).1);
    let server = TeamServer::start(&home, &db.url);
    // Two people's agents that number their requests alike are each answered for their own.
    for (token, body) in [
        (&alice, "alice's note on billing"),
        (&dave, "dave's note on billing"),
    ] {
        let fact = serde_json::json!({"subject": format!("note {body}"), "body": body});
        let (_, added) = server.call_keyed(
            "/mcp/web",
            Some(token),
            "memory_add_fact",
            fact,
            Some("req-1"),
        );
        assert_eq!(added["result"]["isError"], false, "{added}");
        assert_ne!(added["result"]["_meta"]["car/replayed"], true, "{added}");
        assert!(answered(&added).contains(body), "{added}");
    }
    // The same person's retry is replayed, not written twice.
    let again = serde_json::json!({"subject": "note alice's note on billing", "body": "alice's note on billing"});
    let (_, replayed) = server.call_keyed(
        "/mcp/web",
        Some(&alice),
        "memory_add_fact",
        again,
        Some("req-1"),
    );
    assert!(answered(&replayed).contains("alice's note"), "{replayed}");
    let tool = |token: &str, path: &str, name: &str, action: &str, args: &[&str]| {
        let (status, message) = server.call(
            path,
            Some(token),
            name,
            serde_json::json!({"action": action, "args": args}),
        );
        assert_eq!(status, 200, "{message}");
        message
    };
    // Alice plans, Dave (another member) picks up what is ready.
    let made = tool(
        &alice,
        "/mcp/web",
        "task_manager",
        "create",
        &["Wire the billing API", "--priority", "P1"],
    );
    assert_eq!(envelope(&made)["data"]["displayId"], "CTX-0001", "{made}");
    tool(
        &alice,
        "/mcp/web",
        "task_manager",
        "create",
        &["Write the docs", "--depends-on", "CTX-0001"],
    );
    let claimed = tool(
        &dave,
        "/mcp/web",
        "task_manager",
        "claim",
        &["--agent", "dave"],
    );
    assert_eq!(
        envelope(&claimed)["data"]["displayId"],
        "CTX-0001",
        "{claimed}"
    );
    tool(&dave, "/mcp/web", "task_manager", "complete", &["CTX-0001"]);
    let ready = tool(
        &alice,
        "/mcp/web",
        "task_manager",
        "list",
        &["--status", "ready"],
    );
    let ready = envelope(&ready);
    assert_eq!(ready["data"][0]["displayId"], "CTX-0002", "{ready}");
    // Decisions, searched by a word of a stemmed form; progress; a checkpoint.
    tool(
        &alice,
        "/mcp/web",
        "decision_logger",
        "record",
        &[
            "Bill monthly",
            "--decision",
            "invoices are issued monthly",
            "--context",
            "customers asked for fewer invoices",
        ],
    );
    let found = tool(
        &dave,
        "/mcp/web",
        "decision_logger",
        "list",
        &["--search", "invoice"],
    );
    assert_eq!(
        envelope(&found)["data"][0]["displayId"],
        "ADR-0001",
        "{found}"
    );
    tool(
        &dave,
        "/mcp/web",
        "progress_tracker",
        "create",
        &[
            "waiting on the tax table",
            "--task",
            "CTX-0002",
            "--blocker",
        ],
    );
    tool(
        &alice,
        "/mcp/web",
        "context_manager",
        "checkpoint",
        &["sprint-1", "--note", "billing done"],
    );
    let status = tool(&carol, "/mcp/web", "context_manager", "status", &[]);
    let status = envelope(&status);
    assert_eq!(status["data"]["tasks"]["done"], 1, "{status}");
    assert_eq!(status["data"]["project"]["name"], "web", "{status}");
    assert_eq!(
        status["data"]["lastCheckpoint"]["name"], "sprint-1",
        "{status}"
    );

    // A reader reads the board and may change nothing on it.
    let listed = tool(
        &carol,
        "/mcp/web",
        "task_manager",
        "list",
        &["--status", "all"],
    );
    assert_eq!(
        envelope(&listed)["data"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    for (name, action, args) in [
        ("task_manager", "create", &["a reader's task"][..]),
        ("task_manager", "claim", &[][..]),
        ("decision_logger", "record", &["x", "--decision", "y"][..]),
        ("context_manager", "checkpoint", &["mine"][..]),
    ] {
        let denied = tool(&carol, "/mcp/web", name, action, args);
        assert_eq!(
            denied["result"]["isError"], true,
            "{name} {action}: {denied}"
        );
        assert!(answered(&denied).contains("may only read"), "{denied}");
    }
    // Another project's board is its own.
    let theirs = tool(
        &bob,
        "/mcp/api",
        "task_manager",
        "list",
        &["--status", "all"],
    );
    assert_eq!(envelope(&theirs)["data"], serde_json::json!([]), "{theirs}");
    let searched = tool(
        &bob,
        "/mcp/api",
        "decision_logger",
        "list",
        &["--search", "invoice"],
    );
    assert_eq!(
        envelope(&searched)["data"],
        serde_json::json!([]),
        "{searched}"
    );
    // Doctor checks one machine: not a team tool.
    let (_, refused) = server.call(
        "/mcp/web",
        Some(&alice),
        "context_manager",
        serde_json::json!({"action": "doctor"}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    // The board's history says who did what.
    let shown = tool(&carol, "/mcp/web", "task_manager", "show", &["CTX-0001"]);
    let events = envelope(&shown)["data"]["events"].to_string();
    assert!(events.contains("dave"), "{events}");
}

/// `car` against a team server, as the person holding `token` (or the one `car team login`
/// stored): `--json` output and exit code.
fn as_member(
    home: &TestHome,
    keyring: &crate::keychain::Keyring,
    token: Option<&str>,
    args: &[&str],
) -> (i32, Value) {
    let mut cmd = home.command(crate::support::CAR);
    keyring.apply(&mut cmd);
    if let Some(token) = token {
        cmd.env("CAR_TOKEN", token);
    }
    let out = cmd.arg("--json").args(args).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "car {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), doc)
}

#[test]
fn car_team_push_copies_a_project_once_and_the_cli_works_on_the_team_board() {
    use std::io::Write;
    let keyring = crate::keychain::Keyring::start();
    let home = TestHome::new();
    let db = TestDb::new();
    let [alice, _bob, carol] = web_and_api(&home, &db);
    let server = TeamServer::start(&home, &db.url);
    let web = format!("{}/mcp/web", server.base);

    // One person's project, grown locally before the team existed.
    let local = |args: &[&str]| home.car_json(args);
    local(&[
        "task",
        "create",
        "Wire the billing API",
        "--priority",
        "P1",
        "--label",
        "api",
    ]);
    local(&[
        "task",
        "create",
        "Write the docs",
        "--depends-on",
        "CTX-0001",
        "--description",
        "for integrators",
    ]);
    local(&["task", "create", "Drop the old exporter"]);
    local(&["task", "create", "Pick a queue"]);
    // Text that starts with a dash is text, not a flag, when it goes up.
    local(&["task", "create", "--", "-Wall warnings in CI"]);
    local(&[
        "task",
        "update",
        "CTX-0005",
        "--description=- a bullet: fix them all",
    ]);
    local(&["task", "complete", "CTX-0003"]);
    local(&[
        "task",
        "block",
        "CTX-0004",
        "--reason",
        "waiting on the vendor",
    ]);
    local(&["decision", "record", "Use SQLite", "--decision", "one file"]);
    local(&[
        "decision",
        "record",
        "Use PostgreSQL",
        "--decision",
        "teams share one database",
        "--supersedes",
        "ADR-0001",
    ]);
    local(&[
        "memory",
        "add",
        "deploys",
        "deploys go through the canary first",
    ]);
    local(&[
        "memory",
        "knowledge",
        "billing",
        "invoices are issued on the first of the month",
    ]);
    local(&[
        "memory",
        "procedure",
        "flaky payout test",
        "rerun with the clock frozen",
    ]);
    local(&[
        "memory",
        "add",
        "editor",
        "prefers vim keybindings",
        "--global",
    ]);
    local(&[
        "skill",
        "add",
        "deploy-staging",
        "--code",
        "make deploy ENV=staging",
        "--keyword",
        "deploy",
    ]);

    // Without a token the CLI says how to get one.
    let (code, doc) = as_member(&home, &keyring, None, &["--server", &web, "task", "ready"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("no_token")),
        "{doc}"
    );
    // A wrong token is refused at login and nothing is stored.
    let login = |token: &str| {
        let mut cmd = home.command(crate::support::CAR);
        keyring.apply(&mut cmd);
        let mut child = cmd
            .args(["--json", "team", "login", "--server", &server.base])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(token.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), doc)
    };
    let (code, doc) = login("not-a-token");
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("unauthorized")),
        "{doc}"
    );
    assert!(keyring.items().is_empty(), "{:?}", keyring.items());
    let (code, doc) = login(&alice);
    assert_eq!(code, 0, "{doc}");
    let account = format!("team/{}/token", server.base);
    assert_eq!(
        keyring.items(),
        vec![crate::keychain::Item::car(&account, &alice)],
        "the token is in the OS keychain, under the server's origin"
    );

    let push = || as_member(&home, &keyring, None, &["--server", &web, "team", "push"]);
    let (code, first) = push();
    assert_eq!(code, 0, "{first}");
    const KINDS: [&str; 8] = [
        "facts",
        "knowledge",
        "procedures",
        "skills",
        "tasks",
        "links",
        "statuses",
        "decisions",
    ];
    let counts = |doc: &Value| -> Vec<(String, u64, u64)> {
        KINDS
            .iter()
            .map(|k| {
                let c = &doc["data"][k];
                (
                    k.to_string(),
                    c["sent"].as_u64().unwrap(),
                    c["already"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let expect = |sent: [u64; 8]| -> Vec<(String, u64, u64)> {
        KINDS
            .iter()
            .zip(sent)
            .map(|(k, n)| (k.to_string(), n, 0))
            .collect()
    };
    // The global preference stays personal; everything else goes up.
    assert_eq!(counts(&first), expect([1, 1, 1, 1, 5, 1, 2, 2]), "{first}");
    assert_eq!(first["data"]["refused"], serde_json::json!([]));

    // Run twice: nothing doubles; the second push is answered from the server's record.
    let (code, second) = push();
    assert_eq!(code, 0, "{second}");
    for (kind, sent, already) in counts(&second) {
        assert_eq!(sent, 0, "{kind} sent again: {second}");
        let before = counts(&first).into_iter().find(|c| c.0 == kind).unwrap().1;
        assert_eq!(already, before, "{kind}: {second}");
    }

    // The CLI on the team's board, with the stored token.
    let remote = |args: &[&str]| {
        let mut all = vec!["--server", web.as_str()];
        all.extend_from_slice(args);
        let (code, doc) = as_member(&home, &keyring, None, &all);
        assert_eq!(code, 0, "{args:?}: {doc}");
        doc["data"].clone()
    };
    let tasks = remote(&["task", "list", "--status", "all"]);
    let board: Vec<(String, String, String)> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["displayId"].as_str().unwrap().to_string(),
                t["title"].as_str().unwrap().to_string(),
                t["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(board.len(), 5, "{tasks}");
    for (title, status) in [
        ("-Wall warnings in CI", "ready"),
        ("Wire the billing API", "ready"),
        ("Write the docs", "open"),
        ("Drop the old exporter", "done"),
        ("Pick a queue", "blocked"),
    ] {
        assert!(
            board.iter().any(|(_, t, s)| t == title && s == status),
            "{title} {status}: {board:?}"
        );
    }
    let ready = remote(&["task", "ready"]);
    assert_eq!(ready.as_array().unwrap().len(), 2, "{ready}");
    assert_eq!(
        ready[0]["title"], "Wire the billing API",
        "the P1 first: {ready}"
    );
    let docs_task = board
        .iter()
        .find(|b| b.1 == "Write the docs")
        .unwrap()
        .0
        .clone();
    let shown = remote(&["task", "show", &docs_task]);
    assert_eq!(shown["description"], "for integrators", "{shown}");
    assert_eq!(
        shown["dependsOn"][0]["title"], "Wire the billing API",
        "{shown}"
    );
    assert_eq!(
        shown["events"][0]["actor"], "alice",
        "history names the pusher: {shown}"
    );
    let decisions = remote(&["decision", "list", "--status", "all"]);
    let statuses: Vec<(&str, &str)> = decisions
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["title"].as_str().unwrap(), d["status"].as_str().unwrap()))
        .collect();
    assert!(
        statuses.contains(&("Use SQLite", "superseded")),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&("Use PostgreSQL", "accepted")),
        "{statuses:?}"
    );
    let recalled = remote(&[
        "memory",
        "query",
        "how do deploys reach production",
        "-k",
        "10",
    ]);
    let text = recalled.to_string();
    assert!(text.contains("canary"), "{text}");
    assert!(
        !text.contains("vim keybindings"),
        "a global preference stayed home: {text}"
    );
    let skills = remote(&["skill", "list"]);
    assert!(skills.to_string().contains("deploy-staging"), "{skills}");
    // The human form is the same as on a local board.
    let mut cmd = home.command(crate::support::CAR);
    keyring.apply(&mut cmd);
    let out = cmd
        .args(["--server", &web, "task", "ready"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Wire the billing API") && text.contains("PRI"),
        "{text}"
    );

    // A command of this machine's only says so, and which ones the server answers.
    let (code, doc) = as_member(
        &home,
        &keyring,
        None,
        &["--server", &web, "memory", "export", "-o", "-"],
    );
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (2, Some("usage")),
        "{doc}"
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory add, query"),
        "{doc}"
    );
    let (code, doc) = as_member(
        &home,
        &keyring,
        None,
        &["--server", &web, "task", "import", "x.jsonl"],
    );
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (2, Some("usage")),
        "{doc}"
    );

    // Work done locally since goes up with the next push; the rest is not sent again.
    local(&["task", "complete", "CTX-0001"]);
    local(&[
        "memory",
        "add",
        "deploys",
        "deploys go through the canary, then 10% of traffic",
    ]);
    let (code, third) = push();
    assert_eq!(code, 0, "{third}");
    assert_eq!(third["data"]["statuses"]["sent"], 1, "{third}");
    assert_eq!(third["data"]["facts"]["sent"], 1, "{third}");
    assert_eq!(third["data"]["tasks"]["sent"], 0, "{third}");
    let ready = remote(&["task", "ready"]);
    let titles = ready.to_string();
    assert!(
        titles.contains("Write the docs") && !titles.contains("Wire the billing"),
        "{ready}"
    );
    let recalled = remote(&["memory", "query", "how do deploys reach production"]);
    assert!(
        recalled.to_string().contains("10% of traffic"),
        "{recalled}"
    );
    assert!(
        !recalled.to_string().contains("canary first"),
        "replaced, not doubled: {recalled}"
    );

    // A reader's push is refused, and writes nothing.
    let (code, doc) = as_member(
        &home,
        &keyring,
        Some(&carol),
        &["--server", &web, "team", "push"],
    );
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("denied")),
        "{doc}"
    );
    let (code, doc) = as_member(
        &home,
        &keyring,
        Some(&carol),
        &["--server", &web, "task", "create", "a reader's task"],
    );
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("denied")),
        "{doc}"
    );
    assert_eq!(
        remote(&["task", "list", "--status", "all"])
            .as_array()
            .unwrap()
            .len(),
        5
    );
    // A refusal is not replayed: once the reader may write, the same request id runs.
    let fact = serde_json::json!({"subject": "carol's note", "body": "carol writes now"});
    let (_, denied) = server.call_keyed(
        "/mcp/web",
        Some(&carol),
        "memory_add_fact",
        fact.clone(),
        Some("carol-1"),
    );
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert_eq!(team(&home, &db, &["grant", "carol", "web", "member"]).0, 0);
    let mut written = Value::Null;
    for _ in 0..200 {
        let (_, answer) = server.call_keyed(
            "/mcp/web",
            Some(&carol),
            "memory_add_fact",
            fact.clone(),
            Some("carol-1"),
        );
        if answer["result"]["isError"] == false {
            written = answer;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_ne!(
        written["result"]["_meta"]["car/replayed"], true,
        "{written}"
    );
    assert!(answered(&written).contains("carol's note"), "{written}");
    // A project the token has no grant on is the same 404 as one that does not exist.
    let (code, doc) = as_member(
        &home,
        &keyring,
        None,
        &[
            "--server",
            &format!("{}/mcp/api", server.base),
            "task",
            "ready",
        ],
    );
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("not_found")),
        "{doc}"
    );
    // Logged out, the token is gone from the keychain.
    let (code, doc) = as_member(&home, &keyring, None, &["--server", &web, "team", "logout"]);
    assert_eq!(
        (code, doc["data"]["removed"].as_bool()),
        (0, Some(true)),
        "{doc}"
    );
    assert!(keyring.items().is_empty());
    let (code, doc) = as_member(&home, &keyring, None, &["--server", &web, "status"]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("no_token")),
        "{doc}"
    );
}
