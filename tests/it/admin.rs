//! The admin commands through the real `car`: stats, config, project list/show/rename/prune and
//! the cold-storage prune and restore. Rows are written with SQL into the test's car.db (the task
//! commands land separately); every check compares whole values or whole table dumps.

use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::{json, Value};

use crate::support::TestHome;

const OLD: &str = "2020-01-01T00:00:00.000Z";
const RECENT: &str = "2999-01-01T00:00:00.000Z";

/// Registers the project at `root` (running `car` there) and returns its id.
fn register(home: &TestHome, root: &Path) -> i64 {
    let data = home.car_json(&["--project", root.to_str().unwrap(), "project", "show"]);
    data["project"]["id"].as_i64().unwrap()
}

fn db(home: &TestHome) -> Connection {
    let conn = Connection::open(home.home.join("car.db")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    conn
}

/// Task 1 done long ago (prunable), task 2 open depending on it (ready), task 3 open depending
/// on task 2, task 4 done recently; events, progress, a decision, graph, a checkpoint, memory.
fn seed(home: &TestHome, id: i64) {
    let conn = db(home);
    let task = |number: i64, status: &str, open_deps: i64, closed: Option<&str>| {
        conn.execute(
            "INSERT INTO tasks(project_id, number, title, status, open_deps, created_at,
                 updated_at, closed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
            params![
                id,
                number,
                format!("task {number}"),
                status,
                open_deps,
                OLD,
                closed
            ],
        )
        .unwrap();
        conn.last_insert_rowid()
    };
    let t1 = task(1, "done", 0, Some(OLD));
    let t2 = task(2, "open", 0, None);
    let t3 = task(3, "open", 1, None);
    let t4 = task(4, "cancelled", 0, Some(RECENT));
    conn.execute(
        "INSERT INTO task_deps VALUES (?1, ?2), (?3, ?1)",
        params![t2, t1, t3],
    )
    .unwrap();
    for (task, event) in [
        (t1, "created"),
        (t1, "closed"),
        (t2, "created"),
        (t4, "created"),
    ] {
        conn.execute(
            "INSERT INTO task_events(task_id, at, actor, event) VALUES (?1, ?2, 'agent', ?3)",
            params![task, OLD, event],
        )
        .unwrap();
    }
    let progress = |task: Option<i64>, kind: &str, status: &str, resolved: Option<&str>| {
        conn.execute(
            "INSERT INTO progress(project_id, task_id, kind, body, status, created_at, updated_at,
                 resolved_at) VALUES (?1, ?2, ?3, 'text', ?4, ?5, ?5, ?6)",
            params![id, task, kind, status, OLD, resolved],
        )
        .unwrap();
    };
    progress(Some(t1), "note", "resolved", Some(OLD));
    progress(Some(t3), "blocker", "open", None);
    progress(None, "note", "resolved", Some(OLD));
    progress(None, "note", "resolved", Some(RECENT));
    conn.execute_batch(&format!(
        "INSERT INTO decisions(project_id, number, title, decision, status, created_at, updated_at)
             VALUES ({id}, 1, 'storage', 'use sqlite', 'accepted', '{OLD}', '{OLD}'),
                    ({id}, 2, 'cache', 'no cache', 'proposed', '{OLD}', '{OLD}');
         INSERT INTO graph_nodes(project_id, key, kind, created_at)
             VALUES ({id}, 'src/a.rs', 'file', '{OLD}'), ({id}, 'src/b.rs', 'file', '{OLD}');
         INSERT INTO graph_edges SELECT a.id, b.id, 'uses', 'scan', '{OLD}'
             FROM graph_nodes a, graph_nodes b WHERE a.project_id = {id} AND b.project_id = {id}
             AND a.key = 'src/a.rs' AND b.key = 'src/b.rs';
         INSERT INTO checkpoints(project_id, name, state, created_at)
             VALUES ({id}, 'start', '{{}}', '{OLD}');
         INSERT INTO memory_nodes(id, project_id, kind, subject, subject_key, body, created_at)
             VALUES ('m{id}', {id}, 'fact', 'build', 'build', 'cargo test', '{OLD}');"
    ))
    .unwrap();
}

/// Every row of every per-project table (all projects), as text.
fn dump(home: &TestHome) -> Vec<(String, Vec<String>)> {
    let conn = db(home);
    [
        "projects",
        "tasks",
        "task_deps",
        "task_events",
        "progress",
        "decisions",
        "decisions_fts",
        "graph_nodes",
        "graph_edges",
        "checkpoints",
        "project_config",
        "memory_nodes",
        "memory_edges",
        "memory_status",
    ]
    .iter()
    .map(|table| {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
            .unwrap();
        let width = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                Ok((0..width)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap();
        (table.to_string(), rows)
    })
    .collect()
}

/// Runs `car --json ARGS` expecting failure; returns (exit code, error object).
fn car_fails(home: &TestHome, args: &[&str]) -> (i32, Value) {
    let out = home
        .command(crate::support::CAR)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["success"], false, "{doc}");
    (out.status.code().unwrap(), doc["error"].clone())
}

#[test]
fn stats_counts_what_the_project_holds() {
    let home = TestHome::new();
    let id = register(&home, &home.project);
    seed(&home, id);
    let stats = home.car_json(&["stats"]);
    assert_eq!(stats["projects"].as_array().unwrap().len(), 1);
    assert_eq!(
        stats["projects"][0]["counts"],
        json!({
            "tasks": {"total": 4, "ready": 1, "open": 2, "claimed": 0, "blocked": 0, "done": 1,
                      "cancelled": 1},
            "dependencies": 2,
            "task_events": 4,
            "progress": {"open": 1, "resolved": 3, "blockers_open": 1},
            "decisions": {"total": 2, "proposed": 1, "accepted": 1, "rejected": 0,
                          "deprecated": 0, "superseded": 0},
            "graph_nodes": 2,
            "graph_edges": 1,
            "checkpoints": 1,
            "settings": 0,
            "memory_entries": 1,
            "memory_nodes": 1,
        })
    );
    assert_eq!(
        stats["projects"][0]["archived"],
        json!({"tasks": 0, "dependencies": 0, "events": 0, "progress": 0})
    );
    assert!(stats["db_bytes"].as_i64().unwrap() > 0);
    assert_eq!(stats["archive_bytes"], 0);
    let other = home.other_project("other");
    register(&home, &other);
    assert_eq!(
        home.car_json(&["stats", "--all"])["projects"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn config_sets_validated_values_and_refuses_bad_ones_writing_nothing() {
    let home = TestHome::new();
    let defaults = home.car_json(&["config", "list"]);
    let summary = |list: &Value| -> Vec<(String, String, bool)> {
        list["settings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["key"].as_str().unwrap().to_string(),
                    s["value"].as_str().unwrap().to_string(),
                    s["set"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let expected_defaults = vec![
        ("task.prefix".to_string(), "CTX".to_string(), false),
        ("prune.older_than_days".to_string(), "30".to_string(), false),
        ("context.max_ready".to_string(), "10".to_string(), false),
        ("hooks.session_start".to_string(), "on".to_string(), false),
        (
            "hooks.briefing_tokens".to_string(),
            "1500".to_string(),
            false,
        ),
        ("hooks.prompt".to_string(), "on".to_string(), false),
        ("hooks.max_reminders".to_string(), "2".to_string(), false),
    ];
    assert_eq!(summary(&defaults), expected_defaults);

    for args in [
        ["config", "set", "task.prefix", "web"],
        ["config", "set", "prune.older_than_days", "0"],
        ["config", "set", "colour", "blue"],
        ["config", "set", "hooks.prompt", "maybe"],
        ["config", "set", "hooks.briefing_tokens", "50"],
    ] {
        let (exit, error) = car_fails(&home, &args);
        assert_eq!(
            (exit, error["code"].as_str().unwrap()),
            (2, "invalid_arguments"),
            "{args:?}"
        );
    }
    let (_, error) = car_fails(&home, &["config", "get", "colour"]);
    assert_eq!(
        error["message"],
        "unknown setting \"colour\"; known settings: task.prefix, prune.older_than_days, context.max_ready, hooks.session_start, hooks.briefing_tokens, hooks.prompt, hooks.max_reminders"
    );
    assert_eq!(
        summary(&home.car_json(&["config", "list"])),
        expected_defaults
    );

    let set = home.car_json(&["config", "set", "task.prefix", "WEB"]);
    assert_eq!(
        (set["value"].as_str(), set["set"].as_bool()),
        (Some("WEB"), Some(true))
    );
    assert_eq!(
        home.car_json(&["config", "get", "task.prefix"])["value"],
        "WEB"
    );
    let out = home.car(&["config", "get", "task.prefix"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "WEB\n");
    let unset = home.car_json(&["config", "unset", "task.prefix"]);
    assert_eq!(
        (unset["value"].as_str(), unset["removed"].as_bool()),
        (Some("CTX"), Some(true))
    );
    assert_eq!(
        summary(&home.car_json(&["config", "list"])),
        expected_defaults
    );
}

#[test]
fn project_list_show_and_rename() {
    let home = TestHome::new();
    let id = register(&home, &home.project);
    let other = home.other_project("other");
    let other_id = register(&home, &other);
    let list = home.car_json(&["project", "list"]);
    let rows: Vec<Value> = list["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!([p["id"], p["name"], p["root"], p["root_exists"]]))
        .collect();
    assert_eq!(
        rows,
        [
            json!([id, "project", home.project.to_str().unwrap(), true]),
            json!([other_id, "other", other.to_str().unwrap(), true]),
        ]
    );
    let by_name = home.car_json(&["project", "show", "other"]);
    let by_id = home.car_json(&["project", "show", &other_id.to_string()]);
    let by_root = home.car_json(&["project", "show", other.to_str().unwrap()]);
    assert_eq!(by_name, by_id);
    assert_eq!(by_name, by_root);
    assert_eq!(by_name["project"]["id"], other_id);

    let renamed = home.car_json(&["project", "rename", "Payments API"]);
    assert_eq!(renamed["project"]["name"], "Payments API");
    let renamed = home.car_json(&[
        "project",
        "rename",
        "legacy",
        "--project-id",
        &other_id.to_string(),
    ]);
    assert_eq!(renamed["project"]["name"], "legacy");
    assert_eq!(
        home.car_json(&["project", "show", "legacy"])["project"]["id"],
        other_id
    );
    let (exit, error) = car_fails(&home, &["project", "rename", "  "]);
    assert_eq!(
        (exit, error["code"].as_str().unwrap()),
        (2, "invalid_arguments")
    );
    let (exit, error) = car_fails(&home, &["project", "show", "nothing-here"]);
    assert_eq!((exit, error["code"].as_str().unwrap()), (1, "not_found"));
}

#[test]
fn project_prune_forgets_only_projects_whose_root_is_gone() {
    let home = TestHome::new();
    let live = register(&home, &home.project);
    let other = home.other_project("gone");
    let gone = register(&home, &other);
    seed(&home, live);
    seed(&home, gone);
    home.car_json(&[
        "--project",
        other.to_str().unwrap(),
        "config",
        "set",
        "task.prefix",
        "G",
    ]);

    assert_eq!(home.car_json(&["project", "prune"])["projects"], json!([]));
    std::fs::remove_dir_all(&other).unwrap();
    let before = dump(&home);
    let dry = home.car_json(&["project", "prune", "--dry-run"]);
    assert_eq!(dry["projects"].as_array().unwrap().len(), 1);
    assert_eq!(dry["projects"][0]["project"]["id"], gone);
    assert_eq!(dry["projects"][0]["counts"]["tasks"]["total"], 4);
    assert_eq!(dump(&home), before, "a dry run changes nothing");

    let done = home.car_json(&["project", "prune"]);
    assert_eq!(done["projects"], dry["projects"]);
    // What is left is exactly the live project's rows.
    let conn = db(&home);
    for table in [
        "tasks",
        "progress",
        "decisions",
        "graph_nodes",
        "checkpoints",
        "project_config",
        "memory_nodes",
    ] {
        let others: i64 = conn
            .query_row(
                &format!("SELECT count(*) FROM {table} WHERE project_id <> ?1"),
                [live],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(others, 0, "{table}");
    }
    let after = dump(&home);
    for ((table, rows_before), (_, rows_after)) in before.iter().zip(&after) {
        if [
            "tasks",
            "progress",
            "decisions",
            "decisions_fts",
            "graph_nodes",
            "checkpoints",
            "memory_nodes",
            "task_deps",
            "task_events",
            "graph_edges",
            "projects",
        ]
        .contains(&table.as_str())
        {
            assert_eq!(
                rows_after.len(),
                rows_before.len() / 2,
                "{table}: the gone project's half"
            );
        }
    }
    let fts: i64 = conn
        .query_row(
            "SELECT count(*) FROM decisions_fts WHERE decisions_fts MATCH 'sqlite'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(fts, 1);
    assert_eq!(
        home.car_json(&["project", "list"])["projects"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn prune_then_restore_loses_nothing() {
    let home = TestHome::new();
    let id = register(&home, &home.project);
    seed(&home, id);
    let archive = home.home.join("archive.db");
    let before = dump(&home);

    let dry = home.car_json(&["prune", "--dry-run"]);
    assert_eq!(dump(&home), before, "a dry run changes nothing");
    assert!(!archive.exists());
    let titles = |data: &Value| -> Vec<Value> {
        data["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].clone())
            .collect()
    };
    assert_eq!(titles(&dry), [json!("task 1")]);
    assert_eq!(
        [&dry["dependencies"], &dry["events"], &dry["progress"]],
        [&json!(1), &json!(2), &json!(2)]
    );

    let moved = home.car_json(&["prune"]);
    assert_eq!(titles(&moved), titles(&dry));
    assert!(archive.exists());
    assert_ne!(dump(&home), before);
    let stats = home.car_json(&["stats"]);
    assert_eq!(
        stats["projects"][0]["counts"]["tasks"]["ready"], 1,
        "task 2 stays ready"
    );
    assert_eq!(
        stats["projects"][0]["archived"],
        json!({"tasks": 1, "dependencies": 1, "events": 2, "progress": 2})
    );
    let out = home.car(&["prune", "--restore", "--all", "--dry-run"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["CTX-0001", "done", OLD, "task", "1"]
    );

    let restored = home.car_json(&["prune", "--restore", "CTX-0001"]);
    assert_eq!(titles(&restored), titles(&dry));
    // The project note resolved long ago is still archived; --all brings it back.
    let rest = home.car_json(&["prune", "--restore", "--all"]);
    assert_eq!(
        (rest["tasks"].as_array().unwrap().len(), &rest["progress"]),
        (0, &json!(1))
    );
    assert_eq!(dump(&home), before);
    assert_eq!(
        home.car_json(&["stats"])["projects"][0]["archived"],
        json!({"tasks": 0, "dependencies": 0, "events": 0, "progress": 0})
    );
    let (exit, error) = car_fails(&home, &["prune", "--restore", "CTX-0001"]);
    assert_eq!((exit, error["code"].as_str().unwrap()), (1, "not_found"));
    let (exit, _) = car_fails(&home, &["prune", "--older-than", "soon"]);
    assert_eq!(exit, 2);
}
