//! Unit tests of the task tracker.

use super::*;
use crate::team::testing::{on_both_stores, TestStore};

fn project(stores: &TestStore) -> Project {
    let root = stores
        .project_root()
        .unwrap_or_else(|| std::path::PathBuf::from("/p"));
    Project::open(stores.store(), &root).unwrap()
}

fn task(p: &Project, title: &str, deps: &[&str]) -> Task {
    p.create_task(
        NewTask {
            title: title.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            ..NewTask::default()
        },
        None,
    )
    .unwrap()
}

fn ready(p: &Project) -> Vec<String> {
    p.list_tasks(&Filter {
        status: Some("ready".into()),
        ..Filter::default()
    })
    .unwrap()
    .into_iter()
    .map(|t| t.display_id)
    .collect()
}

on_both_stores!(
    completing_dependencies_makes_dependents_ready_and_reopening_takes_it_back,
    |stores: &TestStore| {
        let p = project(stores);
        let a = task(&p, "a", &[]);
        let b = task(&p, "b", &[]);
        let c = task(&p, "c", &["1", "CTX-0002"]);
        assert_eq!(c.status, "open");
        assert_eq!(c.waiting_on, 2);
        assert_eq!(ready(&p), [a.display_id.as_str(), b.display_id.as_str()]);
        p.complete_task("1", None, None).unwrap();
        p.update_task(
            "2",
            TaskUpdate {
                status: Some("cancelled".into()),
                ..TaskUpdate::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(ready(&p), ["CTX-0003"]);
        p.update_task(
            "1",
            TaskUpdate {
                status: Some("open".into()),
                ..TaskUpdate::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(ready(&p), ["CTX-0001"]);
        p.remove_dependency("3", "1", None).unwrap();
        assert_eq!(ready(&p), ["CTX-0001", "CTX-0003"]);
    }
);

on_both_stores!(
    a_cycle_is_refused_with_its_path_and_nothing_changes,
    |stores: &TestStore| {
        let p = project(stores);
        task(&p, "a", &[]);
        task(&p, "b", &["1"]);
        task(&p, "c", &["2"]);
        let err = p.add_dependency("1", "3", None).unwrap_err().to_string();
        assert_eq!(
            err,
            "that dependency would close a cycle: CTX-0001 → CTX-0003 → CTX-0002 → CTX-0001"
        );
        assert!(p.add_dependency("1", "1", None).is_err());
        assert_eq!(ready(&p), ["CTX-0001"]);
    }
);

on_both_stores!(
    claims_are_exclusive_and_explain_refusals,
    |stores: &TestStore| {
        let p = project(stores);
        task(&p, "a", &[]);
        task(&p, "b", &["1"]);
        let won = p.claim_task(None, "agent-1").unwrap();
        assert_eq!(
            (won.status.as_str(), won.claimed_by.as_deref()),
            ("claimed", Some("agent-1"))
        );
        assert!(
            p.claim_task(Some("1"), "agent-1").is_ok(),
            "re-claiming is a no-op"
        );
        let err = p.claim_task(Some("1"), "agent-2").unwrap_err().to_string();
        assert_eq!(err, "CTX-0001 is already claimed by agent-1");
        let err = p.claim_task(Some("2"), "agent-2").unwrap_err().to_string();
        assert!(err.contains("waits on 1 unfinished dependency"), "{err}");
        assert!(p.claim_task(None, "agent-2").is_err());
    }
);

on_both_stores!(block_unblock_and_history, |stores: &TestStore| {
    let p = project(stores);
    task(&p, "a", &[]);
    p.claim_task(Some("1"), "me").unwrap();
    let blocked = p
        .block_task("1", "waiting for the API key", Some("me"))
        .unwrap();
    assert_eq!(
        blocked.blocked_reason.as_deref(),
        Some("waiting for the API key")
    );
    let back = p.unblock_task("1", Some("me")).unwrap();
    assert_eq!(back.status, "claimed");
    let done = p.complete_task("1", Some("me"), Some("shipped")).unwrap();
    assert!(done.closed_at.is_some());
    let events: Vec<String> = p
        .task_detail("1")
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        ["created", "claimed", "blocked", "unblocked", "completed"]
    );
});

on_both_stores!(
    bad_input_is_refused_before_anything_is_written,
    |stores: &TestStore| {
        let p = project(stores);
        assert!(p
            .create_task(
                NewTask {
                    title: " ".into(),
                    ..NewTask::default()
                },
                None
            )
            .is_err());
        assert!(p
            .create_task(
                NewTask {
                    title: "x".into(),
                    depends_on: vec!["9".into()],
                    ..NewTask::default()
                },
                None
            )
            .is_err());
        assert!(p
            .list_tasks(&Filter {
                status: Some("all".into()),
                ..Filter::default()
            })
            .unwrap()
            .is_empty());
        assert!(parse_priority("P5").is_err());
        assert_eq!(parse_priority("p1").unwrap(), Priority::P1);
        // Stored as a level, shown and serialized as its name.
        assert_eq!(Priority::of_level(1).to_string(), "P1");
        assert_eq!(serde_json::to_value(Priority::of_level(3)).unwrap(), "P3");
        assert_eq!(Priority::of_level(9), Priority::P4);
        assert!(crate::project::number_of("CTX-x", "task", "CTX-0001").is_err());
    }
);
