//! `car-mcp` over stdio, driven as a client would drive it.

use serde_json::{json, Value};

use crate::support::{example_bin, McpProcess, Peer, TestHome};

#[test]
fn initialize_negotiates_each_supported_revision() {
    let home = TestHome::new();
    for (asked, agreed) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let mut mcp = home.spawn_mcp();
        let response = mcp.initialize_with(asked);
        let result = &response["result"];
        assert_eq!(result["protocolVersion"], agreed, "{response}");
        assert_eq!(result["serverInfo"]["name"], "car-mcp");
        assert_eq!(
            result["capabilities"],
            json!({"completions": {}, "logging": {}, "prompts": {"listChanged": false},
                   "resources": {"subscribe": false, "listChanged": false}, "tools": {"listChanged": true}})
        );
        assert_eq!(mcp.request("ping", json!({}))["result"], json!({}));
        let level = mcp.request("logging/setLevel", json!({"level": "warning"}));
        assert_eq!(
            level["result"],
            json!({}),
            "a log level is accepted: {level}"
        );
        mcp.finish();
    }
}

#[test]
fn tools_list_matches_the_snapshot_in_one_page() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let result = mcp.request("tools/list", json!({}))["result"].clone();
    assert!(result.get("nextCursor").is_none());
    let tools = result["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "memory_add_fact",
            "memory_query",
            "memory_update_status",
            "memory_save_knowledge",
            "memory_save_procedural",
            "memory_delete",
            "memory_intervene",
            "memory_evaluate",
            "skill_ingest",
            "skill_list",
            "skill_find",
            "skill_report",
            "verify",
            "simulate",
            "equivalent",
            "optimize",
            "policy_check",
            "graph_explorer",
            "context_manager",
            "task_manager",
            "progress_tracker",
            "decision_logger",
            "project_admin"
        ]
    );
    for tool in tools {
        let hints = &tool["annotations"];
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(hints[hint].is_boolean(), "{} lacks {hint}", tool["name"]);
        }
        for key in ["car/effect", "car/confirmation", "car/parallel_safe"] {
            assert!(
                tool["_meta"].get(key).is_some(),
                "{} lacks _meta {key}",
                tool["name"]
            );
        }
    }
    crate::support::assert_snapshot("tools_list.json", &result);
    mcp.finish();
}

/// Validates a structured result against the tool's declared output schema.
pub(crate) fn assert_matches_output_schema(tools: &[Value], name: &str, structured: &Value) {
    let tool = tools.iter().find(|t| t["name"] == name).unwrap();
    let schema = &tool["outputSchema"];
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(structured)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?} in {structured}");
}

/// The memory suite, on both stores: car-mcp over stdio on SQLite, and a team server over
/// HTTP on PostgreSQL (`CAR_TEST_DATABASE_URL`, which scripts/test.sh provides).
macro_rules! on_both_stores {
    ($suite:ident, $sqlite:ident, $team:ident) => {
        #[test]
        fn $sqlite() {
            let home = TestHome::new();
            let mut mcp = home.spawn_mcp();
            mcp.initialize();
            $suite(&mut mcp);
            mcp.finish();
        }

        #[test]
        fn $team() {
            let mut peer = crate::team::TeamPeer::start();
            $suite(&mut peer);
        }
    };
}

on_both_stores!(
    every_memory_tool,
    every_memory_tool_works_and_matches_its_output_schema,
    every_memory_tool_works_on_the_team_server
);

fn every_memory_tool(mcp: &mut dyn Peer) {
    let tools = mcp.tools();

    let fact = mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "Heron", "body": "Heron is the codename of the payout scheduler"}),
    );
    assert_eq!(
        fact,
        json!({"id": "fact-1", "kind": "pattern", "subject": "Heron", "scope": "project", "tenant_id": null,
               "superseded": [], "invalidated": [], "links": 0, "fact_count": 1, "durable": true})
    );
    assert_matches_output_schema(&tools, "memory_add_fact", &fact);
    let linked = mcp.call_ok("memory_add_fact", json!({"subject": "payout scheduler", "body": "The payout scheduler runs nightly at 02:00 UTC", "kind": "constraint"}));
    assert_eq!(
        linked["links"], 1,
        "shares rare terms with the Heron fact: {linked}"
    );

    // Found through the link: the query shares no word with the schedule fact but "heron".
    let query = mcp.call_ok(
        "memory_query",
        json!({"query": "when does heron run", "k": 5}),
    );
    assert_matches_output_schema(&tools, "memory_query", &query);
    let ids: Vec<&str> = query["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["fact-1", "fact-2"]);

    let status = mcp.call_ok(
        "memory_update_status",
        json!({"body": "migrating the scheduler", "tenant_id": "agent-7"}),
    );
    assert_eq!(status["id"], "proactive-status:agent-7");
    assert_matches_output_schema(&tools, "memory_update_status", &status);

    let knowledge = mcp.call_ok("memory_save_knowledge", json!({"id": "deploy-rule", "subject": "deploys", "body": "Deploys to production need a green canary first", "tags": ["deploy"]}));
    assert_eq!(knowledge["id"], "deploy-rule");
    let again = mcp.call_ok(
        "memory_save_knowledge",
        json!({"id": "deploy-rule", "subject": "deploys", "body": "Deploys are frozen on Fridays"}),
    );
    assert_eq!(again["id"], "deploy-rule-2", "a reused id mints a new one");
    assert_matches_output_schema(&tools, "memory_save_knowledge", &again);

    let procedure = mcp.call_ok("memory_save_procedural", json!({"subject": "flaky migration test", "body": "When the migration test fails with 'database is locked', rerun with --test-threads=1"}));
    assert_eq!(procedure["kind"], "procedural");
    assert_matches_output_schema(&tools, "memory_save_procedural", &procedure);

    let inject = mcp.call_ok("memory_intervene", json!({"query": "migration test failed: database is locked", "trigger": {"tool_error": true}}));
    assert_matches_output_schema(&tools, "memory_intervene", &inject);
    assert_eq!(inject["decision"], "inject", "{inject}");
    assert_eq!(inject["selected"]["id"], procedure["id"]);
    assert_eq!(inject["selected"]["injections"], 1);
    let silent = mcp.call_ok(
        "memory_intervene",
        json!({"query": "migration test failed: database is locked"}),
    );
    assert_eq!(silent["decision"], "silent");
    assert!(silent["reason"].as_str().unwrap().contains("no trigger"));

    let evaluation = mcp.call_ok("memory_evaluate", json!({"cases": [
        {"id": "c1", "request": {"query": "database is locked in the migration test", "trigger": {"tool_error": true}}, "relevant_fact_ids": [procedure["id"]]},
        {"id": "c2", "request": {"query": "what colour is the logo"}, "relevant_fact_ids": []}
    ]}));
    assert_matches_output_schema(&tools, "memory_evaluate", &evaluation);
    assert_eq!(evaluation["cases"], 2);
    assert_eq!(evaluation["selective"]["true_positives"], 1);
    assert_eq!(evaluation["selective"]["interruption_rate"], 0.5);
    assert_eq!(evaluation["no_memory"]["interventions"], 0);

    let deleted = mcp.call_ok("memory_delete", json!({"id": "deploy-rule"}));
    assert_eq!(deleted["deleted"], true);
    assert_eq!(deleted["kind"], "knowledge");
    assert_matches_output_schema(&tools, "memory_delete", &deleted);
    let missing = mcp.call_ok("memory_delete", json!({"id": "deploy-rule"}));
    assert_eq!(missing["deleted"], false);
    let cleared = mcp.call_ok("memory_delete", json!({"id": "proactive-status:agent-7"}));
    assert_eq!(cleared["deleted"], true);
}

on_both_stores!(
    execution_meta_and_errors,
    results_carry_execution_meta_and_errors_stay_out_of_structured_content,
    results_carry_execution_meta_on_the_team_server
);

fn execution_meta_and_errors(mcp: &mut dyn Peer) {
    let ok = mcp.call("memory_add_fact", json!({"subject": "a", "body": "b"}));
    assert_eq!(ok["_meta"]["car/status"], "ok");
    assert_eq!(ok["_meta"]["car/execution_id"].as_str().unwrap().len(), 32);
    let text: Value = serde_json::from_str(ok["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, ok["structuredContent"],
        "the text block is the same JSON"
    );

    let bad = mcp.call("memory_query", json!({"query": "x", "k": 99}));
    assert_eq!(bad["isError"], true);
    assert!(bad.get("structuredContent").is_none());
    assert_eq!(bad["_meta"]["car/status"], "error");
    assert_eq!(bad["_meta"]["car/error"]["code"], "invalid_arguments");
    let text: Value = serde_json::from_str(bad["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["error"]["code"], "invalid_arguments");
    assert!(
        text["error"]["message"].as_str().unwrap().contains("/k"),
        "{text}"
    );

    let unknown = mcp.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(unknown["error"]["data"]["error"]
        .as_str()
        .unwrap()
        .contains("no_such_tool"));
}

on_both_stores!(
    request_id_replay,
    a_repeated_request_id_replays_the_recorded_result,
    a_repeated_request_id_replays_on_the_team_server
);

fn request_id_replay(mcp: &mut dyn Peer) {
    let call = |mcp: &mut dyn Peer, request_id: &str, body: &str| {
        let response = mcp.request(
            "tools/call",
            json!({
            "name": "memory_add_fact", "arguments": {"subject": format!("s-{body}"), "body": body},
            "_meta": {"car/request_id": request_id}}),
        );
        response["result"].clone()
    };
    let first = call(mcp, "req-1", "one");
    let second = call(mcp, "req-1", "one");
    assert_eq!(first["structuredContent"], second["structuredContent"]);
    assert_eq!(
        first["_meta"]["car/execution_id"],
        second["_meta"]["car/execution_id"]
    );
    assert_eq!(second["_meta"]["car/replayed"], true);
    let third = call(mcp, "req-2", "two");
    assert_ne!(
        third["structuredContent"]["id"],
        first["structuredContent"]["id"]
    );
    assert_eq!(
        third["structuredContent"]["fact_count"], 2,
        "the replay did not write again: {third}"
    );
}

#[test]
fn notifications_cancelled_stops_the_running_call_and_records_it() {
    let home = TestHome::new();
    // Enough memory that an evaluation of many cases takes seconds.
    let notes: Vec<Value> = (0..400)
        .map(|i| json!({"subject": format!("service-{i}"), "body": format!("service-{i} retries batch {} nightly with backoff {}", i % 17, i % 5), "kind": "fact"}))
        .collect();
    let file = home.project.join("notes.json");
    std::fs::write(&file, json!({"notes": notes}).to_string()).unwrap();
    home.car_json(&["memory", "import", file.to_str().unwrap()]);

    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let cases: Vec<Value> = (0..10_000)
        .map(|i| json!({"id": format!("c{i}"), "request": {"query": format!("service-{} batch nightly", i % 400), "trigger": {"tool_error": true}}}))
        .collect();
    let id = mcp.start(
        "tools/call",
        json!({"name": "memory_evaluate", "arguments": {"cases": cases}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    mcp.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "user pressed escape"}),
    );
    // The server stays responsive and records the cancellation.
    assert_eq!(mcp.request("ping", json!({}))["result"], json!({}));
    let mut status = Value::Null;
    for _ in 0..100 {
        let rows = home.car_json(&["executions", "--tool", "memory_evaluate"]);
        status = rows["executions"][0]["status"].clone();
        if status != Value::Null {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(status, "cancelled");
    mcp.finish();
}

#[test]
fn confirmation_required_tools_run_only_with_the_hosts_grant() {
    let home = TestHome::new();
    let embed = example_bin("embed");
    let mut without = McpProcess::spawn(home.command(embed.to_str().unwrap()));
    without.initialize();
    let refused = without.call("reset_cache", json!({}));
    assert_eq!(refused["isError"], true);
    assert_eq!(
        refused["_meta"]["car/error"]["code"],
        "confirmation_required"
    );
    assert!(refused["_meta"]["car/error"]["message"]
        .as_str()
        .unwrap()
        .contains("confirm:reset_cache"));
    without.finish();

    let mut command = home.command(embed.to_str().unwrap());
    command.env("CAR_CONFIRM", "reset_cache");
    let mut with = McpProcess::spawn(command);
    with.initialize();
    assert_eq!(
        with.call_ok("reset_cache", json!({})),
        json!({"reset": true})
    );
    // The embedder's tools sit beside CAR's memory in one registry.
    let names: Vec<String> = with.request("tools/list", json!({}))["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"memory_query".to_string()) && names.contains(&"wait".to_string()));
    with.finish();
}

#[test]
fn an_embedded_async_tool_is_cancelled_with_its_token() {
    let home = TestHome::new();
    let mut mcp = McpProcess::spawn(home.command(example_bin("embed").to_str().unwrap()));
    mcp.initialize();
    let id = mcp.start(
        "tools/call",
        json!({"name": "wait", "arguments": {"ms": 60000}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    mcp.notify("notifications/cancelled", json!({"requestId": id}));
    assert_eq!(
        mcp.call_ok("wait", json!({"ms": 1})),
        json!({"waited_ms": 1})
    );
    mcp.finish();
    let rows = home.car_json(&["executions", "--tool", "wait"]);
    let statuses: Vec<&str> = rows["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "cancelled"]);
}

on_both_stores!(
    context_prompt,
    the_car_context_prompt_and_its_completion,
    the_car_context_prompt_on_the_team_server
);

fn context_prompt(mcp: &mut dyn Peer) {
    mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "release", "body": "Releases are cut from main on Tuesdays"}),
    );
    mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "release", "body": "Releases are cut from main on Thursdays"}),
    );
    mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "secrets", "body": "Never print tokens in logs", "kind": "constraint"}),
    );

    let prompts = mcp.request("prompts/list", json!({}))["result"]["prompts"].clone();
    assert_eq!(prompts[0]["name"], "car_context");
    let prompt = mcp.request(
        "prompts/get",
        json!({"name": "car_context", "arguments": {"query": "when do we release"}}),
    );
    let text = prompt["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(prompt["result"]["messages"][0]["role"], "user");
    assert_eq!(
        text,
        "## Active Constraints\n- ⚠️ [fact-3] secrets: Never print tokens in logs\n\n\
         ## Current Facts\n- [fact-2] release: Releases are cut from main on Thursdays\n  - [outdated] changed from: Releases are cut from main on Tuesdays\n\n"
    );
    let fast = mcp.request(
        "prompts/get",
        json!({"name": "car_context", "arguments": {"query": "x", "mode": "fast"}}),
    );
    assert!(fast["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("Thursdays"));
    let bad_mode = mcp.request(
        "prompts/get",
        json!({"name": "car_context", "arguments": {"query": "x", "mode": "slow"}}),
    );
    assert_eq!(bad_mode["error"]["code"], -32602);
    let missing = mcp.request(
        "prompts/get",
        json!({"name": "car_context", "arguments": {}}),
    );
    assert_eq!(missing["error"]["code"], -32602);

    let complete = |mcp: &mut dyn Peer, value: &str| {
        mcp.request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "car_context"}, "argument": {"name": "mode", "value": value}}))["result"]["completion"]["values"].clone()
    };
    assert_eq!(complete(mcp, "fa"), json!(["fast"]));
    assert_eq!(complete(mcp, ""), json!(["full", "fast"]));
    assert_eq!(complete(mcp, "x"), json!([]));
}

on_both_stores!(
    facts_as_resources,
    memory_facts_are_resources,
    memory_facts_are_resources_on_the_team_server
);

fn facts_as_resources(mcp: &mut dyn Peer) {
    for i in 0..105 {
        mcp.call_ok(
            "memory_add_fact",
            json!({"subject": format!("s{i}"), "body": format!("body {i}")}),
        );
    }
    let templates =
        mcp.request("resources/templates/list", json!({}))["result"]["resourceTemplates"].clone();
    assert_eq!(templates[0]["uriTemplate"], "car://memory/fact/{id}");
    let page1 = mcp.request("resources/list", json!({}))["result"].clone();
    assert_eq!(page1["resources"].as_array().unwrap().len(), 100);
    let cursor = page1["nextCursor"].as_str().unwrap().to_string();
    let page2 = mcp.request("resources/list", json!({"cursor": cursor}))["result"].clone();
    assert_eq!(page2["resources"].as_array().unwrap().len(), 5);
    assert!(page2.get("nextCursor").is_none());
    assert_eq!(
        mcp.request("resources/list", json!({"cursor": "nope"}))["error"]["code"],
        -32602
    );

    let read =
        mcp.request("resources/read", json!({"uri": "car://memory/fact/fact-7"}))["result"].clone();
    assert_eq!(read["contents"][0]["mimeType"], "text/plain");
    assert!(read["contents"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("s6\n\nbody 6\n"));
    let missing = mcp.request(
        "resources/read",
        json!({"uri": "car://memory/fact/fact-9999"}),
    );
    // Resource not found: -32002 until the 2026-07-28 revision, invalid params from it on.
    let not_found = if mcp.revision() >= "2026-07-28" {
        -32602
    } else {
        -32002
    };
    assert_eq!(missing["error"]["code"], not_found, "{missing}");
}

#[test]
fn car_mcp_subcommand_serves_the_same_server() {
    let home = TestHome::new();
    let mut command = home.command(crate::support::CAR);
    command.args(["mcp", "--stdio"]);
    let mut mcp = McpProcess::spawn(command);
    assert_eq!(mcp.initialize()["result"]["serverInfo"]["name"], "car-mcp");
    assert_eq!(
        mcp.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        23
    );
    mcp.finish();
}

#[test]
fn project_scope_global_scope_and_tenants_never_mix() {
    let home = TestHome::new();
    let mut a = home.spawn_mcp();
    a.initialize();
    a.call_ok(
        "memory_add_fact",
        json!({"subject": "db", "body": "project A uses postgres"}),
    );
    a.call_ok(
        "memory_add_fact",
        json!({"subject": "editor", "body": "the user prefers helix", "scope": "global"}),
    );
    a.call_ok(
        "memory_add_fact",
        json!({"subject": "db", "body": "tenant t1 uses sqlite", "tenant_id": "t1"}),
    );
    let untenanted = a.call_ok("memory_query", json!({"query": "postgres sqlite helix"}));
    let bodies: Vec<&str> = untenanted["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies.len(), 2);
    assert!(!bodies.contains(&"tenant t1 uses sqlite"));
    let tenant = a.call_ok(
        "memory_query",
        json!({"query": "postgres sqlite helix", "tenant_id": "t1"}),
    );
    let bodies: Vec<&str> = tenant["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["tenant t1 uses sqlite"],
        "a tenant sees only its own entries"
    );
    a.finish();

    let b_dir = home.other_project("project-b");
    let mut command = home.command(crate::support::CAR_MCP);
    command.current_dir(&b_dir);
    let mut b = McpProcess::spawn(command);
    b.initialize();
    let seen = b.call_ok("memory_query", json!({"query": "postgres helix"}));
    let bodies: Vec<&str> = seen["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["the user prefers helix"],
        "another project sees only global entries"
    );
    b.finish();
}

/// The prompt and the resources pass the dispatcher like tools: a policy rule denying
/// `car_context` denies the prompt, one denying `memory_fact_resource` denies reading a fact,
/// each read is in the execution log, and neither is a tool (`tools/list`, `tools/call`).
#[test]
fn the_prompt_and_resources_pass_the_policy_gate_and_the_execution_log() {
    let home = TestHome::new();
    let fact = home.car_json(&["memory", "add", "release", "we release on Tuesdays"]);
    let id = fact["id"].as_str().unwrap().to_string();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let prompt = json!({"name": "car_context", "arguments": {"query": "when do we release"}});
    let allowed = mcp.request("prompts/get", prompt.clone());
    assert!(
        allowed["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Tuesdays"),
        "{allowed}"
    );
    let uri = format!("car://memory/fact/{id}");
    let read = mcp.request("resources/read", json!({"uri": uri}));
    assert!(
        read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Tuesdays"),
        "{read}"
    );
    let names: Vec<String> = mcp
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n == "car_context" || n.ends_with("_resource") || n.ends_with("_resources")),
        "{names:?}"
    );
    let as_tool = mcp.request(
        "tools/call",
        json!({"name": "car_context", "arguments": {"query": "x"}}),
    );
    assert_eq!(as_tool["error"]["code"], -32602, "{as_tool}");
    mcp.finish();

    std::fs::create_dir_all(home.project.join(".car/policies")).unwrap();
    std::fs::write(
        home.project.join(".car/policies/surfaces.toml"),
        "deny_tool = [\"car_context\", \"memory_fact_resource\"]\n",
    )
    .unwrap();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let denied = mcp.request("prompts/get", prompt);
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .contains("denied by policy"),
        "{denied}"
    );
    let denied = mcp.request("resources/read", json!({"uri": uri}));
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deny_tool:memory_fact_resource"),
        "{denied}"
    );
    mcp.finish();
    let log = home.car_json(&["executions", "--limit", "20"]);
    let seen: Vec<(String, String)> = log["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(tool, _)| tool == "car_context" || tool == "memory_fact_resource")
        .collect();
    for want in [
        ("car_context", "ok"),
        ("memory_fact_resource", "ok"),
        ("car_context", "denied"),
        ("memory_fact_resource", "denied"),
    ] {
        assert!(
            seen.iter().any(|(t, s)| t == want.0 && s == want.1),
            "{want:?} not in the execution log: {seen:?}"
        );
    }
}

/// The MCP Inspector CLI (pinned in scripts/test.sh), in its strict mode, finds nothing
/// unportable in CAR's tool schemas: no `type: [T, "null"]`, no schema without a keyword.
#[test]
fn the_mcp_inspector_reports_no_schema_warnings_in_strict_mode() {
    let inspector = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/node_modules/.bin/mcp-inspector");
    assert!(
        inspector.exists(),
        "the MCP Inspector is not installed at {}: run scripts/test.sh (it installs \
         @modelcontextprotocol/inspector into tools/)",
        inspector.display()
    );
    let home = TestHome::new();
    let out = home
        .command(inspector.to_str().unwrap())
        .args([
            "--cli",
            crate::support::CAR_MCP,
            "--method",
            "tools/list",
            "--strict",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    // What car-mcp serves: the 17 capability tools and the 6 project tools.
    assert_eq!(listed["tools"].as_array().unwrap().len(), 23);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("Warning"))
        .collect();
    assert!(
        warnings.is_empty(),
        "{} warnings:\n{stderr}",
        warnings.len()
    );
}

#[test]
fn car_mcp_sends_the_assistant_tools_to_car_server() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    for tool in ["assistant_start", "assistant_poll", "assistant_cancel"] {
        let response = mcp.request(
            "tools/call",
            json!({"name": tool, "arguments": {"task": "x", "run_id": "r"}}),
        );
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("unknown tool '{tool}'"))
                && message.contains("run car-server for the assistant tools"),
            "{response}"
        );
    }
    // Any other unknown tool is still pointed at tools/list.
    let response = mcp.request("tools/call", json!({"name": "nope", "arguments": {}}));
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("call tools/list"), "{response}");
    mcp.finish();
}

#[test]
fn tools_list_says_how_long_it_may_be_kept_where_the_revision_has_the_field() {
    let home = TestHome::new();
    // 2026-07-28 (stateless: the revision rides in each request's _meta) has the field.
    let mut mcp = home.spawn_mcp();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                     "params": {"_meta": meta}}));
    let list = mcp.wait(&json!(1));
    assert_eq!(list["result"]["ttlMs"], 60_000, "{list}");
    assert!(!list["result"]["tools"].as_array().unwrap().is_empty());
    mcp.finish();
    // Earlier revisions have no such field, and get none.
    for version in ["2025-11-25", "2025-06-18"] {
        let mut mcp = home.spawn_mcp();
        let init = mcp.initialize_with(version);
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        let list = mcp.request("tools/list", json!({}));
        assert!(list["result"].get("ttlMs").is_none(), "{version}: {list}");
        assert!(!list["result"]["tools"].as_array().unwrap().is_empty());
        mcp.finish();
    }
}

/// The value of `THP_enabled` in a process's status (Linux 5.0 and later).
#[cfg(target_os = "linux")]
fn huge_pages_allowed(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled in {status}"));
    line.split_whitespace().nth(1) == Some("1")
}

/// The servers take no transparent huge pages (their allocator gives memory back and touches it
/// again, and each huge page was zeroed whole: docs/benchmarks.md); a short command such as the
/// policy hook keeps the kernel's default, with which it touches fewer pages.
#[test]
#[cfg(target_os = "linux")]
fn the_servers_take_no_transparent_huge_pages_and_the_hook_keeps_them() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    assert!(!huge_pages_allowed(mcp.pid()), "car-mcp");

    let mut hook = home
        .command(crate::support::CAR)
        .arg("policy-check-hook")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once it waits for its payload it has started (state S, not running or loading).
    let stat = format!("/proc/{}/stat", hook.id());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(&stat)
        .unwrap()
        .rsplit(") ")
        .next()
        .is_some_and(|rest| rest.starts_with('S'))
    {
        assert!(std::time::Instant::now() < until, "the hook never waited");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let allowed = huge_pages_allowed(hook.id());
    drop(hook.stdin.take());
    hook.wait().unwrap();
    assert!(allowed, "car policy-check-hook");
}
