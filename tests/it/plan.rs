//! The plan tools through the real binaries: `car plan …` and `verify`/`simulate`/`equivalent`/
//! `optimize` over `car-mcp`, checked against the real registry.

use serde_json::{json, Value};

use crate::mcp::assert_matches_output_schema;
use crate::support::Peer as _;
use crate::support::TestHome;

fn query(id: &str) -> Value {
    json!({"id": id, "type": "tool_call", "tool": "memory_query", "parameters": {"query": "release"}})
}

/// A proposal with three problems verify must find against the real registry.
fn flawed_proposal() -> Value {
    json!({"actions": [
        {"id": "save", "type": "tool_call", "tool": "memory_add_fact", "parameters": {"subject": 3}},
        {"id": "push", "type": "tool_call", "tool": "git_push", "parameters": {"force": true}},
        query("q1"), query("q2"), query("q3")
    ]})
}

fn flawed_issues() -> Value {
    json!([
        {"action_id": "save", "severity": "error", "tier": "decision_procedure",
         "message": "parameters break the input schema of 'memory_add_fact': \"body\" is a required property; /subject: 3 is not of type \"string\""},
        {"action_id": "push", "severity": "error", "tier": "decision_procedure",
         "message": "tool 'git_push' is not registered"},
        {"action_id": "q1", "severity": "error", "tier": "heuristic",
         "message": "likely loop: 'memory_query' is called 3 times with identical parameters (q1, q2, q3)"}
    ])
}

fn write(home: &TestHome, name: &str, value: &Value) -> String {
    let path = home.project.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn verify_over_mcp_checks_tool_calls_against_the_real_registry() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let tools = mcp.tools();
    let verdict = mcp.call_ok("verify", json!({"proposal": flawed_proposal()}));
    assert_matches_output_schema(&tools, "verify", &verdict);
    assert_eq!(verdict["valid"], false);
    assert_eq!(verdict["issues"], flawed_issues());
    assert_eq!(
        verdict["execution_levels"],
        json!([["save", "push", "q1", "q2", "q3"]])
    );

    // The plan tools see themselves too: a verify call with bad arguments is flagged, and a
    // tool named in extra_tools is accepted.
    let nested = mcp.call_ok(
        "verify",
        json!({"proposal": {"actions": [
            {"id": "v", "type": "tool_call", "tool": "verify", "parameters": {"max_actions": 0}},
            {"id": "p", "type": "tool_call", "tool": "git_push"}
        ]}, "extra_tools": ["git_push"]}),
    );
    assert_eq!(
        nested["issues"],
        json!([{"action_id": "v", "severity": "error", "tier": "decision_procedure",
                "message": "parameters break the input schema of 'verify': /max_actions: 0 is less than the minimum of 1; \"proposal\" is a required property"}])
    );

    let empty = mcp.call("verify", json!({"proposal": {"actions": []}}));
    assert_eq!(empty["isError"], true, "{empty}");
    mcp.finish();
}

#[test]
fn simulate_equivalent_and_optimize_over_mcp_match_their_output_schemas() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let tools = mcp.tools();
    let gated = json!({"actions": [
        {"id": "deploy", "type": "state_write", "parameters": {"key": "deployed", "value": true},
         "preconditions": [{"key": "tests", "operator": "eq", "value": "green"}]},
        {"id": "announce", "type": "tool_call", "tool": "notify", "state_dependencies": ["deployed"],
         "expected_effects": {"announced": true}}
    ]});
    let red = mcp.call_ok(
        "simulate",
        json!({"proposal": gated, "initial_state": {"tests": "red"}}),
    );
    assert_matches_output_schema(&tools, "simulate", &red);
    assert_eq!(
        red,
        json!({"final_state": {"tests": "red"}, "applied": [], "skipped": [
            {"action_id": "deploy", "reason": "precondition failed: 'tests' eq \"green\" does not hold: the state has \"red\""},
            {"action_id": "announce", "reason": "depends on skipped action 'deploy'"}
        ]})
    );

    let same = mcp.call_ok(
        "equivalent",
        json!({"proposal_a": gated, "proposal_b": gated, "test_states": []}),
    );
    assert_matches_output_schema(&tools, "equivalent", &same);
    assert_eq!(
        same,
        json!({"equivalent": true, "tier": "sampled", "states_tested": 2, "used_default_states": true})
    );
    let differs = mcp.call_ok(
        "equivalent",
        json!({"proposal_a": gated,
               "proposal_b": {"actions": [{"id": "x", "type": "state_write", "parameters": {"key": "deployed", "value": true}}]},
               "test_states": [{"tests": "green"}]}),
    );
    assert_matches_output_schema(&tools, "equivalent", &differs);
    assert_eq!(
        differs["divergence"],
        json!({"state": {"tests": "green"}, "key": "announced", "a": true, "b": null})
    );
    assert_eq!(differs["used_default_states"], false);

    let tidy = mcp.call_ok(
        "optimize",
        json!({"proposal": {"id": "p1", "actions": [
            {"id": "a", "type": "assertion", "state_dependencies": ["ghost", "k"]},
            {"id": "b", "type": "state_write", "parameters": {"key": "k", "value": 1}}
        ]}}),
    );
    assert_matches_output_schema(&tools, "optimize", &tidy);
    assert_eq!(
        tidy["pruned"],
        json!([{"action_id": "a", "removed": ["ghost"]}])
    );
    assert_eq!(tidy["proposal"]["id"], "p1");
    assert_eq!(tidy["proposal"]["source"], "unknown");
    assert_eq!(
        tidy["proposal"]["actions"][0]["state_dependencies"],
        json!(["k"])
    );
    assert_eq!(tidy["proposal"]["actions"][1]["id"], "b");
    mcp.finish();
}

#[test]
fn car_plan_verify_exits_1_on_an_invalid_proposal_with_the_same_document() {
    let home = TestHome::new();
    let file = write(&home, "plan.json", &flawed_proposal());
    let out = home.car(&["--json", "plan", "verify", &file]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["command"], "plan.verify");
    assert_eq!(doc["success"], true);
    assert_eq!(doc["data"]["issues"], flawed_issues());

    let human = home.car(&["plan", "verify", &file]);
    assert_eq!(human.status.code(), Some(1));
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(
        text.starts_with("INVALID: 3 errors, 0 warnings\n"),
        "{text}"
    );
    assert!(
        text.contains("tool 'git_push' is not registered [decision_procedure]"),
        "{text}"
    );

    let allowed = home.car(&[
        "plan",
        "verify",
        &file,
        "--extra-tool",
        "git_push",
        "--max-actions",
        "4",
    ]);
    let text = String::from_utf8(allowed.stdout).unwrap();
    assert!(!text.contains("git_push"), "{text}");
    assert!(
        text.contains("the proposal has 5 actions, more than max_actions 4"),
        "{text}"
    );
}

#[test]
fn car_plan_reads_stdin_and_a_valid_plan_exits_0() {
    let home = TestHome::new();
    let plan = json!({"actions": [
        {"id": "w", "type": "state_write", "parameters": {"key": "n", "value": 2}},
        {"id": "check", "type": "assertion", "state_dependencies": ["n"],
         "preconditions": [{"key": "n", "operator": "gte", "value": 2}]}
    ]});
    let out = home.car_with_input(
        &["--json", "plan", "verify", "-"],
        plan.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["data"],
        json!({"valid": true, "issues": [], "simulated_state": {"n": 2},
               "execution_levels": [["w"], ["check"]], "conflicts": []})
    );

    let file = write(&home, "plan.json", &plan);
    let sim = home.car_json(&["plan", "simulate", &file, "--initial-state", r#"{"n":0}"#]);
    assert_eq!(
        sim,
        json!({"final_state": {"n": 2}, "applied": ["w", "check"], "skipped": []})
    );
    let other = write(
        &home,
        "other.json",
        &json!({"actions": [{"id": "z", "type": "state_write", "parameters": {"key": "n", "value": 3}}]}),
    );
    let states = write(&home, "states.json", &json!([{"n": 1}]));
    let eq = home.car_json(&["plan", "equivalent", &file, &other, "--states", &states]);
    assert_eq!(
        eq,
        json!({"equivalent": false, "tier": "sampled", "states_tested": 1, "used_default_states": false,
               "divergence": {"state": {"n": 1}, "key": "n", "a": 2, "b": 3}})
    );
    let opt = home.car_json(&["plan", "optimize", &file]);
    assert_eq!(opt["pruned"], json!([]));
}

/// `car plan verify FILE` on an invalid proposal: exit 1 and its issues' messages.
fn invalid_messages(home: &TestHome, file: &str) -> Vec<String> {
    let out = home.car(&["--json", "plan", "verify", file]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["data"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn bad_proposals_get_clear_answers() {
    let home = TestHome::new();
    // Not JSON, no actions, an empty list: usage errors (exit 2), nothing panics.
    let garbage = home.project.join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let out = home.car(&["--json", "plan", "verify", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "usage");
    for bad in [json!({"id": "p"}), json!({"actions": []}), json!([])] {
        let file = write(&home, "bad.json", &bad);
        let out = home.car(&["--json", "plan", "verify", &file]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["error"]["code"], "invalid_arguments", "{bad}: {doc}");
    }

    // A self-referencing action, an unknown operator: reported as issues.
    let file = write(
        &home,
        "cycle.json",
        &json!({"actions": [{"id": "a", "type": "assertion", "dependencies": ["a"],
                             "preconditions": [{"key": "k", "operator": "about", "value": 1}]}]}),
    );
    let messages = invalid_messages(&home, &file);
    assert_eq!(
        messages,
        [
            "dependency cycle: a → a",
            "precondition on 'k' uses unknown operator 'about' (known: eq, neq, gt, lt, gte, lte, exists, not_exists, contains); it fails"
        ]
    );

    // A longer cycle and a non-ASCII tool name.
    let file = write(
        &home,
        "cycle3.json",
        &json!({"actions": [
            {"id": "a", "type": "tool_call", "tool": "outil_é→工具", "dependencies": ["c"]},
            {"id": "b", "type": "assertion", "dependencies": ["a"]},
            {"id": "c", "type": "assertion", "dependencies": ["b"]}]}),
    );
    let messages = invalid_messages(&home, &file);
    assert!(
        messages.iter().any(|m| m.starts_with("dependency cycle: ")
            && ["a", "b", "c"].iter().all(|id| m.contains(id))),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m == "tool 'outil_é→工具' is not registered"),
        "{messages:?}"
    );

    // 1,000 actions: accepted up to max_actions 1000, reported above the default.
    let actions: Vec<Value> = (0..1000)
        .map(|i| json!({"id": format!("a{i}"), "type": "state_write", "parameters": {"key": format!("k{}", i % 7), "value": i}}))
        .collect();
    let file = write(&home, "big.json", &json!({ "actions": actions }));
    let big = home.car_json(&["plan", "verify", &file, "--max-actions", "1000"]);
    assert_eq!(big["valid"], true);
    let out = home.car(&["--json", "plan", "verify", &file]);
    assert_eq!(out.status.code(), Some(1));
    let too_many = home.car(&["--json", "plan", "verify", &file, "--max-actions", "1001"]);
    assert_eq!(too_many.status.code(), Some(2));
}
