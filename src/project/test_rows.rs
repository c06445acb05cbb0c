//! Rows of every per-project table, written by SQL, for the admin tests (the task and graph
//! code lands separately; these tests must not depend on it).

use rusqlite::params;

use crate::store::Store;

/// A timestamp this many days ago.
pub fn days_ago(days: u64) -> String {
    crate::store::now_minus(std::time::Duration::from_secs(days * 86_400))
}

/// Seeds project `id`: task 1 done two months ago, task 2 open and depending on it (ready),
/// task 3 open and depending on task 2 (not ready); events; a resolved note on task 1, an open
/// blocker on task 3 and an old resolved project note; an accepted decision; two graph nodes
/// and an edge; a checkpoint; a setting; a memory entry with its status slot.
pub fn seed(store: &Store, id: i64, tag: &str) {
    let old = days_ago(60);
    let now = crate::store::now();
    store
        .write(|tx| {
            let task = |number: i64, status: &str, open_deps: i64, closed: Option<&str>| {
                tx.execute(
                    "INSERT INTO tasks(project_id, number, title, status, open_deps, created_at,
                         updated_at, closed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
                    params![
                        id,
                        number,
                        format!("{tag} task {number}"),
                        status,
                        open_deps,
                        old,
                        closed
                    ],
                )?;
                Ok::<_, rusqlite::Error>(tx.last_insert_rowid())
            };
            let t1 = task(1, "done", 0, Some(&old))?;
            let t2 = task(2, "open", 0, None)?;
            let t3 = task(3, "open", 1, None)?;
            tx.execute(
                "INSERT INTO task_deps VALUES (?1, ?2), (?3, ?1)",
                params![t2, t1, t3],
            )?;
            for (task, event) in [
                (t1, "created"),
                (t1, "done"),
                (t2, "created"),
                (t3, "created"),
            ] {
                tx.execute(
                    "INSERT INTO task_events(task_id, at, actor, event) VALUES (?1, ?2, 'me', ?3)",
                    params![task, old, event],
                )?;
            }
            let progress = |task: Option<i64>, kind: &str, status: &str, resolved: Option<&str>| {
                tx.execute(
                    "INSERT INTO progress(project_id, task_id, kind, body, status, created_at,
                         updated_at, resolved_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
                    params![
                        id,
                        task,
                        kind,
                        format!("{tag} {kind}"),
                        status,
                        old,
                        resolved
                    ],
                )
            };
            progress(Some(t1), "note", "resolved", Some(&old))?;
            progress(Some(t3), "blocker", "open", None)?;
            progress(None, "note", "resolved", Some(&old))?;
            progress(None, "note", "open", None)?;
            tx.execute(
                "INSERT INTO decisions(project_id, number, title, decision, status, created_at,
                     updated_at) VALUES (?1, 1, ?2, 'use sqlite', 'accepted', ?3, ?3)",
                params![id, format!("{tag} storage"), now],
            )?;
            for key in ["src/a.rs", "src/b.rs"] {
                tx.execute(
                    "INSERT INTO graph_nodes(project_id, key, kind, created_at)
                     VALUES (?1, ?2, 'file', ?3)",
                    params![id, key, now],
                )?;
            }
            tx.execute(
                "INSERT INTO graph_edges SELECT a.id, b.id, 'uses', 'scan', ?2
                 FROM graph_nodes a, graph_nodes b
                 WHERE a.project_id = ?1 AND b.project_id = ?1 AND a.key = 'src/a.rs'
                   AND b.key = 'src/b.rs'",
                params![id, now],
            )?;
            tx.execute(
                "INSERT INTO checkpoints(project_id, name, state, created_at)
                 VALUES (?1, 'start', '{}', ?2)",
                params![id, now],
            )?;
            tx.execute(
                "INSERT INTO project_config VALUES (?1, 'task.prefix', ?2)",
                params![id, tag],
            )?;
            tx.execute(
                "INSERT INTO memory_nodes(id, project_id, kind, subject, subject_key, body,
                     created_at) VALUES (?1, ?2, 'fact', 'build', 'build', 'cargo test', ?3)",
                params![format!("m-{tag}"), id, now],
            )?;
            tx.execute(
                "INSERT INTO memory_status(project_id, body, updated_at) VALUES (?1, 'busy', ?2)",
                params![id, now],
            )?;
            Ok::<_, rusqlite::Error>(())
        })
        .unwrap();
}

/// Every row of project `id` in every per-project table, as text, table by table.
pub fn table_dump(store: &Store, id: i64) -> Vec<(&'static str, Vec<String>)> {
    const TASKS: &str = "(SELECT id FROM tasks WHERE project_id = ?1)";
    let queries: [(&str, String); 12] = [
        ("projects", "SELECT * FROM projects WHERE id = ?1".into()),
        ("tasks", "SELECT * FROM tasks WHERE project_id = ?1".into()),
        ("task_deps", format!("SELECT * FROM task_deps WHERE task_id IN {TASKS} OR depends_on IN {TASKS}")),
        ("task_events", format!("SELECT * FROM task_events WHERE task_id IN {TASKS}")),
        ("progress", "SELECT * FROM progress WHERE project_id = ?1".into()),
        ("decisions", "SELECT * FROM decisions WHERE project_id = ?1".into()),
        ("graph_nodes", "SELECT * FROM graph_nodes WHERE project_id = ?1".into()),
        ("graph_edges", "SELECT e.* FROM graph_edges e JOIN graph_nodes n ON n.id = e.src WHERE n.project_id = ?1".into()),
        ("checkpoints", "SELECT * FROM checkpoints WHERE project_id = ?1".into()),
        ("project_config", "SELECT * FROM project_config WHERE project_id = ?1".into()),
        ("memory_nodes", "SELECT * FROM memory_nodes WHERE project_id = ?1".into()),
        ("memory_status", "SELECT * FROM memory_status WHERE project_id = ?1".into()),
    ];
    let conn = store.conn();
    queries
        .iter()
        .map(|(table, sql)| {
            let mut stmt = conn.prepare(&format!("{sql} ORDER BY 1, 2")).unwrap();
            let width = stmt.column_count();
            let rows = stmt
                .query_map([id], |r| {
                    let cells: Vec<String> = (0..width)
                        .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                        .collect();
                    Ok(cells.join("|"))
                })
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap();
            (*table, rows)
        })
        .collect()
}
