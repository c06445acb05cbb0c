//! Prune and restore against a real car.db and archive.db, including a move interrupted
//! between its two transactions.

use std::sync::Arc;

use super::*;
use crate::project::test_rows::{days_ago, seed, table_dump};

const MONTH: Duration = Duration::from_secs(30 * 86_400);

fn setup() -> (tempfile::TempDir, Project, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("car.db")).unwrap());
    let project = Project::open(store, &dir.path().join("p")).unwrap();
    seed(&project.store, project.id, "P");
    // Task 4 stays as the highest number; task 5 would be one if it existed.
    project
        .store
        .write(|tx| {
            tx.execute(
                "INSERT INTO tasks(project_id, number, title, status, created_at, updated_at,
                     closed_at) VALUES (?1, 4, 'last', 'done', ?2, ?2, ?2)",
                params![project.id, days_ago(90)],
            )
        })
        .unwrap();
    let archive = dir.path().join("archive.db");
    (dir, project, archive)
}

#[test]
fn prune_then_restore_loses_nothing() {
    let (_dir, project, archive) = setup();
    let before = table_dump(&project.store, project.id);

    let dry = prune(&project, &archive, MONTH, Mode::DryRun).unwrap();
    assert_eq!(dry.tasks.iter().map(|t| t.number).collect::<Vec<_>>(), [1]);
    assert_eq!((dry.dependencies, dry.events, dry.progress), (1, 2, 2));
    assert!(!archive.exists());
    assert_eq!(table_dump(&project.store, project.id), before);

    let moved = prune(&project, &archive, MONTH, Mode::Apply).unwrap();
    assert_eq!(moved, dry);
    let after = table_dump(&project.store, project.id);
    assert_ne!(after, before);
    let ready: i64 = project
        .store
        .conn()
        .query_row(
            "SELECT count(*) FROM tasks WHERE status = 'open' AND open_deps = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ready, 1, "task 2 stays ready without its done dependency");
    let held = archived(&project.store, &archive, project.id).unwrap();
    assert_eq!(
        (held.tasks, held.dependencies, held.events, held.progress),
        (1, 1, 2, 2)
    );
    assert_eq!(
        prune(&project, &archive, MONTH, Mode::Apply).unwrap(),
        Moved::default()
    );

    let dry_back = restore(&project, &archive, &Restore::All, Mode::DryRun).unwrap();
    assert_eq!(table_dump(&project.store, project.id), after);
    let back = restore(&project, &archive, &Restore::All, Mode::Apply).unwrap();
    assert_eq!(back, dry_back);
    assert_eq!(
        (
            back.tasks.len(),
            back.dependencies,
            back.events,
            back.progress
        ),
        (1, 1, 2, 2)
    );
    assert_eq!(table_dump(&project.store, project.id), before);
    let held = archived(&project.store, &archive, project.id).unwrap();
    assert_eq!(
        (held.tasks, held.dependencies, held.events, held.progress),
        (0, 0, 0, 0)
    );
}

#[test]
fn an_interrupted_move_leaves_rows_in_both_places_and_the_next_run_heals() {
    let (_dir, project, archive) = setup();
    let before = table_dump(&project.store, project.id);
    let cutoff = crate::store::now_minus(MONTH);
    // A crash after step 1 committed and before step 2: the rows are in both databases.
    with_archive(&project.store, &archive, |conn| {
        copy(conn, project.id, &cutoff)
    })
    .unwrap();
    assert_eq!(table_dump(&project.store, project.id), before);
    let held = archived(&project.store, &archive, project.id).unwrap();
    assert_eq!((held.tasks, held.progress), (1, 2));
    // Restoring finds them still in car.db and only drops the stale copies.
    let back = restore(&project, &archive, &Restore::Tasks(vec![1]), Mode::Apply).unwrap();
    assert_eq!(back.tasks.len(), 1);
    assert_eq!(table_dump(&project.store, project.id), before);
    let held = archived(&project.store, &archive, project.id).unwrap();
    assert_eq!(held, Archived::default());
    // The same crash, then a prune run again: it moves everything once.
    with_archive(&project.store, &archive, |conn| {
        copy(conn, project.id, &cutoff)
    })
    .unwrap();
    let moved = prune(&project, &archive, MONTH, Mode::Apply).unwrap();
    assert_eq!((moved.tasks.len(), moved.progress), (1, 2));
    restore(&project, &archive, &Restore::All, Mode::Apply).unwrap();
    assert_eq!(table_dump(&project.store, project.id), before);
}

#[test]
fn a_change_between_copy_and_delete_moves_nothing() {
    let (_dir, project, archive) = setup();
    let cutoff = crate::store::now_minus(MONTH);
    let err = with_archive(&project.store, &archive, |conn| {
        let copied = copy(conn, project.id, &cutoff)?;
        // Another agent adds an event to the done task in between.
        conn.execute(
            "INSERT INTO main.task_events(task_id, at, event)
             SELECT id, 'now', 'commented' FROM main.tasks WHERE number = 1",
            [],
        )?;
        delete_if_unchanged(conn, project.id, &cutoff, &copied)
    })
    .unwrap_err();
    assert!(matches!(err, ProjectError::Conflict(_)), "{err}");
    let dump = table_dump(&project.store, project.id);
    let events = &dump.iter().find(|(t, _)| *t == "task_events").unwrap().1;
    assert_eq!(events.len(), 5, "the task and its new event stay");
    assert_eq!(
        archived(&project.store, &archive, project.id).unwrap(),
        Archived::default(),
        "no stale copy is left in the archive"
    );
}

#[test]
fn restore_refuses_a_taken_number_and_restores_nothing() {
    let (_dir, project, archive) = setup();
    prune(&project, &archive, MONTH, Mode::Apply).unwrap();
    project
        .store
        .write(|tx| {
            tx.execute(
                "INSERT INTO tasks(project_id, number, title, status, created_at, updated_at)
                 VALUES (?1, 1, 'squatter', 'open', 'now', 'now')",
                [project.id],
            )
        })
        .unwrap();
    let during = table_dump(&project.store, project.id);
    let err = restore(&project, &archive, &Restore::All, Mode::Apply).unwrap_err();
    assert!(matches!(err, ProjectError::Conflict(_)), "{err}");
    assert_eq!(table_dump(&project.store, project.id), during);
    let err = restore(&project, &archive, &Restore::Tasks(vec![9]), Mode::Apply).unwrap_err();
    assert!(matches!(err, ProjectError::NotFound(_)), "{err}");
}
