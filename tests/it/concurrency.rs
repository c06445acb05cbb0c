//! Many writers at once, and a writer killed mid-storm: no acknowledged write is lost.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::support::TestHome;

#[test]
fn four_processes_writing_a_thousand_facts_each_keep_all_four_thousand() {
    let home = TestHome::new();
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let home = &home;
            scope.spawn(move || {
                let mut mcp = home.spawn_mcp();
                mcp.initialize();
                // Pipelined in windows of 50, as a busy agent would.
                for window in 0..20 {
                    let ids: Vec<i64> = (0..50)
                        .map(|i| {
                            let n = window * 50 + i;
                            mcp.start("tools/call", json!({"name": "memory_add_fact",
                                "arguments": {"subject": format!("w{writer}-{n}"), "body": format!("writer {writer} fact {n}")}}))
                        })
                        .collect();
                    for id in ids {
                        let response = mcp.wait(&json!(id));
                        assert_eq!(response["result"]["isError"], false, "{response}");
                    }
                }
                mcp.finish();
            });
        }
    });
    assert_eq!(home.entry_count(), 4000);
}

#[test]
fn kill_9_during_a_write_storm_loses_no_acknowledged_write() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let mut sent = Vec::new();
    for n in 0..600 {
        sent.push(mcp.start(
            "tools/call",
            json!({"name": "memory_add_fact",
            "arguments": {"subject": format!("storm-{n}"), "body": format!("storm fact {n}")}}),
        ));
    }
    // Collect acknowledgements for a while, then kill without warning.
    let mut acknowledged = Vec::new();
    for id in sent.iter().take(250) {
        let response = mcp.wait(&json!(id));
        assert_eq!(response["result"]["isError"], false);
        acknowledged.push(
            response["result"]["structuredContent"]["subject"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // `Child::kill` is SIGKILL on Unix: no chance to flush or clean up.
    mcp.kill();

    let doctor = home.car_json(&["doctor"]);
    assert_eq!(doctor["healthy"], true, "{doctor}");
    let export = home.car_json(&["memory", "export", "-o", "-"]);
    let stored: HashSet<String> = export["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n: &Value| n["subject"].as_str().unwrap().to_string())
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|s| !stored.contains(*s))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(stored.len() >= acknowledged.len());
}

#[test]
fn assistant_json_is_imported_once_even_when_servers_start_together() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.home.join("memory")).unwrap();
    let notes: Vec<Value> = (0..50)
        .map(|i| json!({"subject": format!("k{i}"), "body": format!("knowledge {i}"), "kind": "knowledge"}))
        .collect();
    std::fs::write(
        home.home.join("memory/assistant.json"),
        json!({ "notes": notes }).to_string(),
    )
    .unwrap();
    let mut servers: Vec<_> = (0..6).map(|_| home.spawn_mcp()).collect();
    for server in &mut servers {
        server.initialize();
    }
    for server in servers {
        server.finish();
    }
    assert_eq!(home.entry_count(), 50);
}

#[test]
fn many_processes_opening_a_fresh_home_at_once_all_succeed() {
    // Regression: a fresh database answered "database is locked" to processes that opened it
    // while the first one switched it to WAL.
    let home = TestHome::new();
    let runs: Vec<Vec<String>> = (0..10)
        .map(|i| {
            ["--json", "memory", "add", &format!("s{i}"), "b"]
                .map(String::from)
                .to_vec()
        })
        .collect();
    home.car_all_at_once(&runs);
    assert_eq!(home.entry_count(), 10);
}
