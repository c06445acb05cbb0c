//! `car-memgine-eval`: the real binary on the StateBench dev split, on hand-written timelines
//! whose figures are known exactly, and on bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const EVAL: &str = env!("CARGO_BIN_EXE_car-memgine-eval");
/// The first 20 timelines of the StateBench dev split (MIT; its licence is beside it).
const DEV: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/data/statebench/dev-sample.jsonl"
);

fn eval(dir: &Path, args: &[&str]) -> Output {
    Command::new(EVAL)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .args(args)
        .output()
        .unwrap()
}

/// Runs `car-memgine-eval --json ARGS`, expects success and returns the document.
fn eval_json(dir: &Path, args: &[&str]) -> Value {
    let out = eval(dir, &[&["--json"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The value with every leaf replaced by its JSON type, to compare shapes.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), shape(v))).collect(),
        Value::Array(items) => items.iter().map(shape).collect(),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!("null"),
    }
}

fn strategy_shape() -> Value {
    json!({
        "must_mention": {"recall": "number", "found": "number", "retrievable": "number"},
        "stale_as_current": {
            "query_rate": "number", "queries": "number", "queries_with_must_not_mention": "number",
            "phrase_rate": "number", "phrases": "number", "must_not_mention_phrases": "number",
        },
        "context_tokens": {"mean": "number", "p95": "number", "max": "number"},
    })
}

fn dev_first_20() -> Value {
    let dir = tempfile::tempdir().unwrap();
    eval_json(dir.path(), &["--data", DEV, "--limit", "20"])
}

#[test]
fn dev_split_report_has_the_documented_shape_and_memgine_recalls() {
    let doc = dev_first_20();
    assert_eq!(doc["schema_version"], json!(1));
    assert_eq!(doc["command"], json!("memgine-eval"));
    assert_eq!(doc["success"], json!(true));
    let data = &doc["data"];
    assert_eq!(data["mode"], json!("full"));
    assert_eq!(data["budget_tokens"], json!(8000));
    assert_eq!(data["overall"]["counts"]["timelines"], json!(20));
    assert_eq!(
        shape(&data["overall"]),
        json!({
            "counts": {
                "timelines": "number", "queries": "number", "must_mention_phrases": "number",
                "must_mention_retrievable": "number", "must_not_mention_phrases": "number",
                "queries_with_must_not_mention": "number", "regex_phrases_unchecked": "number",
            },
            "memgine": strategy_shape(),
            "transcript_replay": strategy_shape(),
            "no_memory": strategy_shape(),
        })
    );
    let tracks = data["tracks"].as_object().unwrap();
    assert!(tracks.len() > 5, "{tracks:?}");
    let timelines: u64 = tracks
        .values()
        .map(|t| t["counts"]["timelines"].as_u64().unwrap())
        .sum();
    assert_eq!(timelines, 20);

    let recall = |strategy: &str| {
        data["overall"][strategy]["must_mention"]["recall"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(recall("no_memory"), 0.0);
    assert!(recall("memgine") > recall("no_memory"), "{data}");
}

#[test]
fn memgine_presents_fewer_stale_phrases_than_transcript_replay() {
    let doc = dev_first_20();
    let rate = |strategy: &str| {
        doc["data"]["overall"][strategy]["stale_as_current"]["query_rate"]
            .as_f64()
            .unwrap()
    };
    assert!(
        rate("memgine") < rate("transcript_replay"),
        "memgine {} vs transcript_replay {}",
        rate("memgine"),
        rate("transcript_replay")
    );
}

/// Two timelines: a fact corrected by a supersession (a turn restates the old value), and a
/// plain fact with a phrase no event mentions and a regex phrase.
fn two_timelines() -> String {
    let corrected = json!({
        "id": "T-CORRECTED", "version": "1.0", "track": "supersession",
        "initial_state": {
            "identity_role": {"user_name": "Dana", "communication_style": null},
            "persistent_facts": [{"id": "F-OFFICE", "key": "offsite_location",
                                  "value": "Seattle office, Building A", "supersedes": null,
                                  "depends_on": [], "is_constraint": false}],
            "working_set": [],
            "environment": {"now": "2025-01-06T09:00:00"}
        },
        "events": [
            {"type": "conversation_turn", "speaker": "user",
             "text": "The offsite is at Seattle office, Building A"},
            {"type": "supersession", "writes": [{"id": "W-AUTO", "layer": "persistent_facts",
                "key": "offsite_location_corrected", "value": "Portland office, Building C",
                "supersedes": "offsite_location", "depends_on": [], "is_constraint": false}]},
            {"type": "query", "prompt": "Where is the offsite?",
             "ground_truth": {"decision": "Portland", "must_mention": ["Portland office"],
                              "must_not_mention": ["Seattle"]}}
        ]
    });
    let plain = json!({
        "id": "T-PLAIN", "version": "1.0", "track": "causality",
        "initial_state": {"identity_role": {}, "persistent_facts": [], "working_set": [],
                          "environment": {}},
        "events": [
            {"type": "conversation_turn", "speaker": "user", "text": "Vendor quote is $40,000 per year"},
            {"type": "state_write", "writes": [{"id": "W-AUTO", "layer": "persistent_facts",
                "key": "vendor_quote", "value": "$40,000 per year", "supersedes": null,
                "depends_on": [], "is_constraint": false}]},
            {"type": "query", "prompt": "What did the vendor quote?",
             "ground_truth": {"decision": "$40,000",
                              "must_mention": ["$40,000", "never stated anywhere", "regex:\\$4\\d,000"],
                              "must_not_mention": ["$55,000"]}}
        ]
    });
    format!("{corrected}\n\n{plain}\n")
}

fn figures(found: u64, retrievable: u64, stale_queries: u64, stale_phrases: u64) -> Value {
    json!({
        "must_mention": {"found": found, "retrievable": retrievable},
        "stale_queries": stale_queries,
        "stale_phrases": stale_phrases,
    })
}

/// The scored figures of a strategy (tokens aside: memgine's layout is memory's business).
fn scored(group: &Value, strategy: &str) -> Value {
    let s = &group[strategy];
    figures(
        s["must_mention"]["found"].as_u64().unwrap(),
        s["must_mention"]["retrievable"].as_u64().unwrap(),
        s["stale_as_current"]["queries"].as_u64().unwrap(),
        s["stale_as_current"]["phrases"].as_u64().unwrap(),
    )
}

#[test]
fn a_superseded_fact_is_shown_only_as_outdated_and_figures_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("two.jsonl");
    std::fs::write(&data, two_timelines()).unwrap();
    let contexts = dir.path().join("contexts.jsonl");
    let doc = eval_json(
        dir.path(),
        &[
            "--data",
            data.to_str().unwrap(),
            "--contexts",
            contexts.to_str().unwrap(),
        ],
    );
    let report = &doc["data"];

    assert_eq!(
        report["overall"]["counts"],
        json!({"timelines": 2, "queries": 2, "must_mention_phrases": 3,
               "must_mention_retrievable": 2, "must_not_mention_phrases": 2,
               "queries_with_must_not_mention": 2, "regex_phrases_unchecked": 1})
    );
    let overall = &report["overall"];
    assert_eq!(scored(overall, "memgine"), figures(2, 2, 0, 0));
    assert_eq!(scored(overall, "transcript_replay"), figures(1, 2, 1, 1));
    assert_eq!(scored(overall, "no_memory"), figures(0, 2, 0, 0));
    let supersession = &report["tracks"]["supersession"];
    assert_eq!(scored(supersession, "memgine"), figures(1, 1, 0, 0));
    assert_eq!(
        scored(supersession, "transcript_replay"),
        figures(0, 1, 1, 1)
    );
    assert_eq!(
        supersession["transcript_replay"]["stale_as_current"]["query_rate"],
        json!(1.0)
    );
    assert_eq!(
        supersession["memgine"]["must_mention"]["recall"],
        json!(1.0)
    );

    // Transcript tokens are the turn lines' bytes / 4; no memory presents nothing.
    let turn_tokens = |line: &str| line.len().div_ceil(4) as u64;
    let corrected = turn_tokens("user: The offsite is at Seattle office, Building A");
    let plain = turn_tokens("user: Vendor quote is $40,000 per year");
    assert_eq!(
        overall["transcript_replay"]["context_tokens"],
        json!({"mean": (corrected + plain) as f64 / 2.0, "p95": corrected.max(plain),
               "max": corrected.max(plain)})
    );
    assert_eq!(
        overall["no_memory"]["context_tokens"],
        json!({"mean": 0.0, "p95": 0, "max": 0})
    );

    // The export: one line per query and strategy; in memgine's context the old value is
    // only on [outdated] lines and the new one is there.
    let lines: Vec<Value> = std::fs::read_to_string(&contexts)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let keys: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["timeline_id"].as_str().unwrap().to_string(),
                l["strategy"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = ["T-CORRECTED", "T-PLAIN"]
        .iter()
        .flat_map(|t| {
            ["memgine", "transcript_replay", "no_memory"].map(|s| (t.to_string(), s.to_string()))
        })
        .collect();
    assert_eq!(keys, expected);
    let memgine = &lines[0];
    assert_eq!(memgine["query"], json!("Where is the offsite?"));
    assert_eq!(memgine["track"], json!("supersession"));
    assert_eq!(memgine["must_not_mention"], json!(["Seattle"]));
    let context = memgine["context"].as_str().unwrap();
    assert!(context.contains("Portland office, Building C"), "{context}");
    let seattle: Vec<&str> = context.lines().filter(|l| l.contains("Seattle")).collect();
    assert!(!seattle.is_empty(), "{context}");
    assert!(
        seattle.iter().all(|l| l.contains(car::OUTDATED_MARK)),
        "{context}"
    );
    assert_eq!(lines[2]["context"], json!(""));
}

#[test]
fn a_malformed_line_fails_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("bad.jsonl");
    let good = two_timelines().lines().next().unwrap().to_string();
    std::fs::write(
        &data,
        format!("{good}\n{{\"id\": \"T-2\", \"track\": 7}}\n"),
    )
    .unwrap();

    let out = eval(dir.path(), &["--data", data.to_str().unwrap()]);
    let message = format!(
        "{}: line 2, column 24: not a StateBench timeline: invalid type: integer `7`, expected a string",
        data.display()
    );
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string()
        ),
        (Some(1), String::new(), format!("error: {message}\n"))
    );

    let out = eval(dir.path(), &["--json", "--data", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc,
        json!({"schema_version": 1, "command": "memgine-eval", "success": false,
               "error": {"code": "invalid_input", "message": message}})
    );
}

#[test]
fn without_data_the_usage_error_names_the_sample_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let nested: PathBuf = dir.path().join("work");
    std::fs::create_dir(&nested).unwrap();
    let out = eval(&nested, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pass --data PATH"), "{stderr}");
    assert!(stderr.contains("dev-sample.jsonl"), "{stderr}");
}
