//! The skill store through the real binaries: the skill tools over `car-mcp`, `car skill …`,
//! `.car/skills/*.json` import and export, and outcome counts under concurrent reporters.

use serde_json::{json, Value};

use crate::mcp::assert_matches_output_schema;
use crate::support::Peer as _;
use crate::support::{TestHome, CAR};

fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn skills_over_mcp_rank_by_trigger_and_record_and_flag_degraded_ones() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let tools = mcp.tools();

    let saved = mcp.call_ok(
        "skill_ingest",
        json!({"name": "deploy_staging", "code": "make deploy ENV=staging",
               "description": "Deploy the current branch to staging",
               "task_keywords": ["deploy", "staging"]}),
    );
    assert_matches_output_schema(&tools, "skill_ingest", &saved);
    assert_eq!(saved["change"], "created");
    assert_eq!(saved["skill"]["scope"], "global");
    assert_eq!(saved["skill"]["platform"], "shell");
    let again = mcp.call_ok(
        "skill_ingest",
        json!({"name": "deploy_staging", "code": "make deploy ENV=staging",
               "description": "Deploy the current branch to staging",
               "task_keywords": ["deploy", "staging"]}),
    );
    assert_eq!(again["change"], "unchanged");
    mcp.call_ok(
        "skill_ingest",
        json!({"name": "deploy_canary", "code": "make deploy ENV=canary", "task_keywords": ["deploy"]}),
    );
    mcp.call_ok(
        "skill_ingest",
        json!({"name": "gh_review", "code": "await page.click('#review')", "platform": "playwright",
               "url_pattern": "*github.com/*/pull/*", "persona": "reviewer", "task_keywords": ["review"]}),
    );

    // Ranked by trigger match; a skill matching nothing is not offered.
    let found = mcp.call_ok(
        "skill_find",
        json!({"task": "deploying this branch to staging", "k": 5}),
    );
    assert_matches_output_schema(&tools, "skill_find", &found);
    assert_eq!(names(&found), ["deploy_staging", "deploy_canary"]);
    assert!(
        found["skills"][0]["score"].as_f64().unwrap()
            > found["skills"][1]["score"].as_f64().unwrap()
    );
    assert_eq!(found["skills"][0]["match"]["keywords"], 1.0);

    // The domain skill: offered on its host, listed with its domain, never for another host.
    let on_gh = mcp.call_ok(
        "skill_find",
        json!({"task": "review the pull request", "url": "https://github.com/car/car/pull/7", "persona": "Reviewer"}),
    );
    assert_eq!(names(&on_gh), ["gh_review"]);
    assert_eq!(on_gh["skills"][0]["match"]["persona"], 1.0);
    assert_eq!(on_gh["skills"][0]["match"]["url"], 1.0);
    let on_gl = mcp.call_ok(
        "skill_find",
        json!({"task": "review the pull request", "url": "https://gitlab.com/car/merge_requests/7"}),
    );
    assert_eq!(names(&on_gl), Vec::<String>::new());
    let listed = mcp.call_ok("skill_list", json!({"domain": "github.com"}));
    assert_matches_output_schema(&tools, "skill_list", &listed);
    assert_eq!(
        names(&listed),
        ["deploy_canary", "deploy_staging", "gh_review"]
    );
    let listed = mcp.call_ok("skill_list", json!({"domain": "gitlab.com"}));
    assert_eq!(names(&listed), ["deploy_canary", "deploy_staging"]);

    // Four failures against one success: degraded, ranked after the healthy skill, flagged.
    let report = |mcp: &mut crate::support::McpProcess, outcome: &str| {
        mcp.call_ok(
            "skill_report",
            json!({"name": "deploy_staging", "outcome": outcome}),
        )
    };
    let first = report(&mut mcp, "success");
    assert_matches_output_schema(&tools, "skill_report", &first);
    for _ in 0..3 {
        assert_eq!(report(&mut mcp, "failure")["newly_degraded"], false);
    }
    let tipped = report(&mut mcp, "failure");
    assert_eq!(tipped["newly_degraded"], true);
    assert_eq!(tipped["skill"]["stats"]["fail_count"], 4);
    let found = mcp.call_ok(
        "skill_find",
        json!({"task": "deploying this branch to staging", "k": 5}),
    );
    assert_eq!(names(&found), ["deploy_canary", "deploy_staging"]);
    assert_eq!(found["skills"][1]["degraded"], true);
    assert!(found["skills"][1]["note"]
        .as_str()
        .unwrap()
        .contains("supersedes"));

    // Repair: a fixed skill supersedes the broken one, which disappears from find and list.
    let fixed = mcp.call_ok(
        "skill_ingest",
        json!({"name": "deploy_staging_v2", "code": "make deploy ENV=staging RETRIES=3",
               "task_keywords": ["deploy", "staging"], "supersedes": "deploy_staging"}),
    );
    assert_eq!(fixed["deprecated"], json!(["deploy_staging"]));
    let found = mcp.call_ok(
        "skill_find",
        json!({"task": "deploying this branch to staging", "k": 5}),
    );
    assert_eq!(names(&found), ["deploy_staging_v2", "deploy_canary"]);
    let all = mcp.call_ok("skill_list", json!({"include_deprecated": true}));
    let old = all["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "deploy_staging")
        .unwrap()
        .clone();
    assert_eq!(old["status"], "deprecated");
    assert_eq!(old["superseded_by"], "deploy_staging_v2");

    // The resource template serves a skill as JSON.
    let read = mcp.request(
        "resources/read",
        json!({"uri": "car://memory/skill/gh_review"}),
    );
    let content = &read["result"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json");
    let skill: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(skill["scope"], "domain:github.com");
    let missing = mcp.request("resources/read", json!({"uri": "car://memory/skill/nope"}));
    assert!(missing["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no active skill 'nope'"));
    mcp.finish();
}

#[test]
fn bad_skill_calls_get_clear_errors_and_write_nothing() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let cases = [
        (
            json!({"name": "x", "code": "y", "supersedes": "ghost"}),
            "no skill named \"ghost\"",
        ),
        (
            json!({"name": "x", "code": "y", "platform": "cobol"}),
            "cobol",
        ),
        (json!({"name": "x", "code": "   "}), "has no code"),
        (json!({"name": "x\u{7}", "code": "y"}), "control characters"),
    ];
    for (args, expected) in cases {
        let result = mcp.call("skill_ingest", args.clone());
        assert_eq!(result["isError"], true, "{args}: {result}");
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        let message = text["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{args}: {message}");
    }
    let result = mcp.call("skill_report", json!({"name": "x", "outcome": "success"}));
    assert_eq!(result["isError"], true);
    let result = mcp.call("skill_find", json!({"task": "x", "k": 21}));
    assert_eq!(result["isError"], true);
    let listed = mcp.call_ok("skill_list", json!({"include_deprecated": true}));
    assert_eq!(listed["count"], 0);
    mcp.finish();
}

#[test]
fn cli_skills_round_trip_through_project_files() {
    let home = TestHome::new();
    let code = home.project.join("deploy.sh");
    std::fs::write(&code, "#!/bin/sh\nmake deploy ENV=staging\n").unwrap();
    let saved = home.car_json(&[
        "skill",
        "add",
        "Deploy Staging",
        "--code-file",
        code.to_str().unwrap(),
        "--keyword",
        "deploy",
        "--keyword",
        "staging",
        "--description",
        "ship the branch to staging",
    ]);
    assert_eq!(saved["change"], "created");
    home.car_json(&[
        "skill",
        "add",
        "lint",
        "--code",
        "cargo clippy -- -D warnings",
        "--platform",
        "shell",
        "--url-pattern",
        "https://ci.example.com/*",
    ]);
    let out = home.car(&["skill", "find", "deploy to staging"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("Deploy Staging v1 [shell, global]"), "{text}");
    let shown = home.car(&["skill", "show", "Deploy Staging"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("make deploy ENV=staging"));

    let exported = home.car_json(&["skill", "export"]);
    assert_eq!(exported["exported"], 2);
    let dir = home.project.join(".car").join("skills");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("deploy-staging.json")).unwrap())
            .unwrap();
    assert_eq!(
        file["trigger"]["task_keywords"],
        json!(["deploy", "staging"])
    );
    assert_eq!(file["domain"], Value::Null);
    let lint: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("lint.json")).unwrap()).unwrap();
    assert_eq!(lint["domain"], "ci.example.com");

    // A teammate's fresh home imports the project's skills; importing again changes nothing.
    let teammate = TestHome::new();
    let project = teammate.project.join(".car").join("skills");
    std::fs::create_dir_all(&project).unwrap();
    for name in ["deploy-staging.json", "lint.json"] {
        std::fs::copy(dir.join(name), project.join(name)).unwrap();
    }
    let imported = teammate.car_json(&["skill", "import"]);
    assert_eq!(imported["created"], 2);
    assert_eq!(teammate.car_json(&["skill", "import"])["unchanged"], 2);
    let listed = teammate.car_json(&["skill", "list"]);
    assert_eq!(names(&listed), ["Deploy Staging", "lint"]);
    assert_eq!(listed["skills"][1]["scope"], "domain:ci.example.com");

    // A broken file imports nothing and is named.
    std::fs::write(project.join("zz.json"), r#"{"name": "half"}"#).unwrap();
    std::fs::write(
        project.join("deploy-staging.json"),
        r#"{"name": "Deploy Staging", "code": "changed"}"#,
    )
    .unwrap();
    let out = teammate.car(&["skill", "import"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zz.json") && err.contains("code"), "{err}");
    let shown = teammate.car_json(&["skill", "show", "Deploy Staging"]);
    assert_eq!(shown["version"], 1, "the failed import changed a skill");
}

#[test]
fn concurrent_outcome_reports_lose_no_count() {
    let home = TestHome::new();
    home.car_json(&["skill", "add", "build", "--code", "cargo build"]);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let mut cmd = home.command(CAR);
            cmd.args([
                "skill",
                "report",
                "build",
                if i % 2 == 0 { "success" } else { "failure" },
            ]);
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let out = cmd.output().unwrap();
                    assert!(out.status.success(), "{out:?}");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let shown = home.car_json(&["skill", "show", "build"]);
    assert_eq!(shown["stats"]["success_count"], 20);
    assert_eq!(shown["stats"]["fail_count"], 20);
}
