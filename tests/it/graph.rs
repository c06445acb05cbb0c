//! The context graph through the real `car`: a scan of a small multi-language tree checked
//! against the edges known by hand, rescans that read only what changed, manual nodes and links,
//! exports with golden output, and bad input that writes nothing.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::support::TestHome;

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A Rust crate, a Python package, a TypeScript app, a Go module with two packages, a C file,
/// and files that must not be scanned (ignored and hidden).
const TREE: &[(&str, &str)] = &[
    (".gitignore", "ignored/\n*.log\n"),
    ("ignored/skip.py", "import app\n"),
    ("build.log", "noise\n"),
    (".hidden/x.py", "import app\n"),
    ("README.md", "# demo\n"),
    ("rust/Cargo.toml", "[package]\nname = \"demo\"\n"),
    (
        "rust/src/lib.rs",
        "//! use crate::a::Ignored;\nmod a;\npub mod b;\nuse crate::b::x;\nuse std::fmt;\n",
    ),
    (
        "rust/src/a.rs",
        "use super::b::x::helper;\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    ),
    ("rust/src/b/mod.rs", "pub mod x;\n"),
    ("rust/src/b/x.rs", "pub fn helper() -> &'static str { \"use crate::a;\" }\n"),
    ("py/app/__init__.py", ""),
    (
        "py/app/main.py",
        "import os\nfrom . import util\nfrom .core import db\nimport app.core.models as m\n",
    ),
    ("py/app/util.py", "def f():\n    \"\"\"import app.core\"\"\"\n"),
    ("py/app/core/__init__.py", ""),
    ("py/app/core/db.py", "from ..util import f\n"),
    ("py/app/core/models.py", "from app.util import f  # absolute\n"),
    (
        "web/src/main.ts",
        "import { x } from './x';\nimport { y } from '../lib/y/index.ts';\nimport React from 'react';\nconst lazy = () => import('./lazy');\n",
    ),
    ("web/src/x.ts", "export const x = 1;\n"),
    ("web/lib/y/index.ts", "export const y = 2;\n"),
    ("go/go.mod", "module example.com/shop\n\ngo 1.22\n"),
    (
        "go/main.go",
        "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/shop/internal/store\"\n)\n",
    ),
    (
        "go/internal/store/store.go",
        "package store\n\nimport \"example.com/shop/internal/money\"\n",
    ),
    ("go/internal/store/store_test.go", "package store\n\nimport \"testing\"\n"),
    ("go/internal/money/money.go", "package money\n"),
    ("go/internal/money/format.go", "package money\n"),
    ("c/main.c", "#include \"util.h\"\n#include <stdio.h>\n"),
    ("c/util.h", "int util(void);\n"),
];

/// The edges of TREE, worked out by hand.
const EDGES: &[(&str, &str, &str)] = &[
    ("c/main.c", "c/util.h", "includes"),
    (
        "go/internal/store/store.go",
        "go/internal/money/format.go",
        "imports",
    ),
    (
        "go/internal/store/store.go",
        "go/internal/money/money.go",
        "imports",
    ),
    ("go/main.go", "go/internal/store/store.go", "imports"),
    ("py/app/core/db.py", "py/app/util.py", "imports"),
    ("py/app/core/models.py", "py/app/util.py", "imports"),
    ("py/app/main.py", "py/app/__init__.py", "imports"),
    ("py/app/main.py", "py/app/core/__init__.py", "imports"),
    ("py/app/main.py", "py/app/core/db.py", "imports"),
    ("py/app/main.py", "py/app/core/models.py", "imports"),
    ("py/app/main.py", "py/app/util.py", "imports"),
    ("rust/src/a.rs", "rust/src/b/x.rs", "uses"),
    ("rust/src/b/mod.rs", "rust/src/b/x.rs", "mod"),
    ("rust/src/lib.rs", "rust/src/a.rs", "mod"),
    ("rust/src/lib.rs", "rust/src/b/mod.rs", "mod"),
    ("rust/src/lib.rs", "rust/src/b/x.rs", "uses"),
    ("web/src/main.ts", "web/lib/y/index.ts", "imports"),
    ("web/src/main.ts", "web/src/x.ts", "imports"),
];

type EdgeSet = BTreeSet<(String, String, String, String)>;

fn edge_set(edges: &[(&str, &str, &str)], origin: &str) -> EdgeSet {
    edges
        .iter()
        .map(|(s, d, k)| {
            (
                s.to_string(),
                d.to_string(),
                k.to_string(),
                origin.to_string(),
            )
        })
        .collect()
}

/// Every edge of the graph, from `car graph export`.
fn exported_edges(home: &TestHome) -> EdgeSet {
    let data = home.car_json(&["graph", "export"]);
    data["content"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let field = |f: &str| e[f].as_str().unwrap().to_string();
            (field("src"), field("dst"), field("kind"), field("origin"))
        })
        .collect()
}

fn node_keys(home: &TestHome) -> Vec<String> {
    let data = home.car_json(&["graph", "export"]);
    data["content"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `car --json ARGS`, expects failure; returns (exit code, error object).
fn car_error(home: &TestHome, args: &[&str]) -> (i32, Value) {
    let out = home
        .command(crate::support::CAR)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "car {args:?}: stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(doc["success"], false, "{doc}");
    (out.status.code().unwrap(), doc["error"].clone())
}

fn report_counts(report: &Value) -> Value {
    json!({
        "files_seen": report["files_seen"], "parsed": report["parsed"],
        "unchanged": report["unchanged"], "removed": report["removed"],
        "kept_for_links": report["kept_for_links"], "edges": report["edges"],
    })
}

#[test]
fn scan_of_a_multi_language_tree_finds_exactly_the_edges_known_by_hand() {
    let home = TestHome::new();
    write(&home.project, TREE);
    let report = home.car_json(&["graph", "scan"]);
    assert_eq!(
        report_counts(&report),
        json!({"files_seen": 23, "parsed": 23, "unchanged": 0, "removed": 0,
               "kept_for_links": 0, "edges": EDGES.len()})
    );
    assert_eq!(
        report["by_language"],
        json!({"c": 2, "go": 5, "gomod": 1, "other": 2, "python": 6, "rust": 4, "typescript": 3})
    );
    assert_eq!(report["path"], "");
    assert_eq!(exported_edges(&home), edge_set(EDGES, "scan"));
    let keys = node_keys(&home);
    assert!(keys.contains(&"README.md".to_string()));
    assert!(keys.contains(&"rust/Cargo.toml".to_string()));
    for hidden in [
        "ignored/skip.py",
        "build.log",
        ".hidden/x.py",
        ".gitignore",
        ".car",
    ] {
        assert!(
            !keys.iter().any(|k| k.starts_with(hidden)),
            "{hidden} scanned"
        );
    }
    assert_eq!(keys.len(), 23);

    // Human output: one summary line and the languages.
    let out = home.car(&["graph", "scan"]);
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "no progress off a terminal");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(": 23 files (0 parsed, 23 unchanged, 0 removed), 18 edges (+0 -0) in "),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("  c 2, go 5, gomod 1, other 2, python 6, rust 4, typescript 3\n"),
        "{stdout}"
    );
}

#[test]
fn a_rescan_reads_only_changed_files_resolves_new_targets_and_keeps_manual_links() {
    let home = TestHome::new();
    write(&home.project, TREE);
    home.car_json(&["graph", "scan"]);
    let again = home.car_json(&["graph", "scan"]);
    assert_eq!(
        report_counts(&again),
        json!({"files_seen": 23, "parsed": 0, "unchanged": 23, "removed": 0,
               "kept_for_links": 0, "edges": 18})
    );
    let linked = home.car_json(&[
        "graph",
        "link",
        "py/app/util.py",
        "web/src/x.ts",
        "--kind",
        "mirrors",
    ]);
    assert_eq!(
        linked,
        json!({"src": "py/app/util.py", "dst": "web/src/x.ts", "kind": "mirrors", "created": true})
    );

    // One file changed: only it is read, and its old edge goes.
    write(
        &home.project,
        &[("py/app/core/db.py", "import os  # no longer imports util\n")],
    );
    let changed = home.car_json(&["graph", "scan"]);
    assert_eq!(
        report_counts(&changed),
        json!({"files_seen": 23, "parsed": 1, "unchanged": 22, "removed": 0,
               "kept_for_links": 0, "edges": 17})
    );
    assert_eq!(
        (
            changed["edges_added"].clone(),
            changed["edges_removed"].clone()
        ),
        (json!(0), json!(1))
    );

    // New files: unchanged importers (main.ts's dynamic import, store.go's package) gain
    // edges without being read again.
    write(
        &home.project,
        &[
            ("web/src/lazy.tsx", "export default 1;\n"),
            ("go/internal/money/round.go", "package money\n"),
        ],
    );
    let added = home.car_json(&["graph", "scan"]);
    assert_eq!(
        report_counts(&added),
        json!({"files_seen": 25, "parsed": 2, "unchanged": 23, "removed": 0,
               "kept_for_links": 0, "edges": 19})
    );
    let mut expected: Vec<_> = EDGES
        .iter()
        .copied()
        .filter(|e| e.0 != "py/app/core/db.py")
        .collect();
    expected.push(("web/src/main.ts", "web/src/lazy.tsx", "imports"));
    expected.push((
        "go/internal/store/store.go",
        "go/internal/money/round.go",
        "imports",
    ));
    let mut with_link = edge_set(&expected, "scan");
    with_link.insert((
        "py/app/util.py".into(),
        "web/src/x.ts".into(),
        "mirrors".into(),
        "manual".into(),
    ));
    assert_eq!(exported_edges(&home), with_link);

    // Deleted files: a plain one goes with its edges; one a manual link touches stays.
    std::fs::remove_file(home.project.join("go/internal/money/format.go")).unwrap();
    std::fs::remove_file(home.project.join("web/src/x.ts")).unwrap();
    let deleted = home.car_json(&["graph", "scan"]);
    assert_eq!(
        report_counts(&deleted),
        json!({"files_seen": 23, "parsed": 0, "unchanged": 23, "removed": 1,
               "kept_for_links": 1, "edges": 17})
    );
    expected.retain(|e| e.1 != "go/internal/money/format.go" && e.1 != "web/src/x.ts");
    let mut with_link = edge_set(&expected, "scan");
    with_link.insert((
        "py/app/util.py".into(),
        "web/src/x.ts".into(),
        "mirrors".into(),
        "manual".into(),
    ));
    assert_eq!(exported_edges(&home), with_link);
    let kept = home.car_json(&["graph", "edges", "web/src/x.ts"]);
    assert_eq!(
        kept,
        json!({"node": {"key": "web/src/x.ts", "kind": "file", "lang": "typescript", "label": null},
               "out": [], "in": [{"key": "py/app/util.py", "kind": "mirrors", "origin": "manual"}]})
    );

    // The file comes back: read again, its importer's edge returns.
    write(&home.project, &[("web/src/x.ts", "export const x = 3;\n")]);
    let back = home.car_json(&["graph", "scan"]);
    assert_eq!(
        (back["parsed"].clone(), back["edges"].clone()),
        (json!(1), json!(18))
    );
}

#[test]
fn scanning_a_subdirectory_touches_only_nodes_under_it() {
    let home = TestHome::new();
    write(&home.project, TREE);
    home.car_json(&["graph", "scan"]);
    std::fs::remove_file(home.project.join("rust/src/a.rs")).unwrap();
    write(
        &home.project,
        &[("py/app/extra.py", "from . import util\n")],
    );
    let report = home.car_json(&["graph", "scan", "py"]);
    assert_eq!(
        report_counts(&report),
        json!({"files_seen": 7, "parsed": 1, "unchanged": 6, "removed": 0,
               "kept_for_links": 0, "edges": 9})
    );
    assert_eq!(report["path"], "py");
    let keys = node_keys(&home);
    assert!(
        keys.contains(&"rust/src/a.rs".to_string()),
        "outside py/: untouched"
    );
    assert!(keys.contains(&"py/app/extra.py".to_string()));
    // An absolute path inside the project is the same scan.
    let absolute = home.project.join("py").display().to_string();
    let same = home.car_json(&["graph", "scan", &absolute]);
    assert_eq!(
        (same["path"].clone(), same["parsed"].clone()),
        (json!("py"), json!(0))
    );
}

#[test]
fn edges_link_add_node_and_export_with_golden_output() {
    let home = TestHome::new();
    write(
        &home.project,
        &[
            ("a.py", "import b\n"),
            ("b.py", ""),
            ("dir \"q\"/c.py", "import b\n"),
        ],
    );
    home.car_json(&["graph", "scan"]);
    let added = home.car_json(&[
        "graph",
        "add-node",
        "ADR-1",
        "--kind",
        "decision",
        "--label",
        "Use \"b\" #1",
    ]);
    assert_eq!(
        added,
        json!({"node": {"key": "ADR-1", "kind": "decision", "lang": null, "label": "Use \"b\" #1"}, "created": true})
    );
    home.car_json(&["graph", "link", "./a.py", "ADR-1", "--kind", "decided-by"]);
    // Linking an existing scan edge makes it manual.
    let relinked = home.car_json(&["graph", "link", "a.py", "b.py", "--kind", "imports"]);
    assert_eq!(relinked["created"], false);

    let edges = home.car_json(&["graph", "edges", "a.py", "--direction", "out"]);
    assert_eq!(
        edges,
        json!({"node": {"key": "a.py", "kind": "file", "lang": "python", "label": null},
               "out": [{"key": "ADR-1", "kind": "decided-by", "origin": "manual"},
                       {"key": "b.py", "kind": "imports", "origin": "manual"}]})
    );
    let human = home.car(&["graph", "edges", "b.py"]);
    assert_eq!(
        String::from_utf8(human.stdout).unwrap(),
        "b.py (file, python)\n  <- a.py  imports (manual)\n  <- dir \"q\"/c.py  imports\n"
    );

    let dot = home.car(&["graph", "export", "--format", "dot"]);
    let dot = String::from_utf8(dot.stdout).unwrap();
    assert_eq!(
        dot,
        "digraph car {\n  rankdir=LR;\n  node [shape=box];\n  \"ADR-1\" [shape=ellipse, label=\"Use \\\"b\\\" #1\\n(decision)\"];\n  \"a.py\";\n  \"b.py\";\n  \"dir \\\"q\\\"/c.py\";\n  \"a.py\" -> \"ADR-1\" [label=\"decided-by\", style=dashed];\n  \"a.py\" -> \"b.py\" [label=\"imports\", style=dashed];\n  \"dir \\\"q\\\"/c.py\" -> \"b.py\" [label=\"imports\"];\n}\n"
    );
    let mermaid = home.car(&["graph", "export", "--format", "mermaid"]);
    assert_eq!(
        String::from_utf8(mermaid.stdout).unwrap(),
        "flowchart LR\n  n0(\"Use #quot;b#quot; #35;1 (decision)\")\n  n1[\"a.py\"]\n  n2[\"b.py\"]\n  n3[\"dir #quot;q#quot;/c.py\"]\n  n1 -.->|\"decided-by\"| n0\n  n1 -.->|\"imports\"| n2\n  n3 -->|\"imports\"| n2\n"
    );
    // --json carries the same text; -o writes it to a file.
    let data = home.car_json(&["graph", "export", "--format", "dot"]);
    assert_eq!(data["content"], json!(dot));
    assert_eq!(
        (data["nodes"].clone(), data["edges"].clone()),
        (json!(4), json!(3))
    );
    let file = home.project.join("graph.dot");
    let written = home.car_json(&[
        "graph",
        "export",
        "--format",
        "dot",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(written["output"], json!(file));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), dot);

    // Adding the node again: same kind is fine, another kind is a conflict.
    let again = home.car_json(&["graph", "add-node", "ADR-1", "--kind", "decision"]);
    assert_eq!(again["created"], false);
    assert_eq!(again["node"]["label"], "Use \"b\" #1");
    let (exit, error) = car_error(&home, &["graph", "add-node", "a.py", "--kind", "decision"]);
    assert_eq!((exit, error["code"].clone()), (1, json!("conflict")));
}

#[test]
fn bad_graph_input_gets_clear_errors_and_writes_nothing() {
    let home = TestHome::new();
    write(&home.project, &[("a.py", "import b\n"), ("b.py", "")]);
    home.car_json(&["graph", "scan"]);
    let before = home.car_json(&["graph", "export"]);

    let (exit, error) = car_error(&home, &["graph", "edges", "nope.py"]);
    assert_eq!((exit, error["code"].clone()), (1, json!("not_found")));
    assert_eq!(
        error["message"],
        "no node \"nope.py\" in the context graph: run `car graph scan` to add the project's files, or `car graph add-node nope.py --kind KIND` for anything else"
    );
    let (exit, error) = car_error(&home, &["graph", "link", "a.py", "missing", "--kind", "x"]);
    assert_eq!((exit, error["code"].clone()), (1, json!("not_found")));
    let (exit, error) = car_error(
        &home,
        &["graph", "link", "a.py", "b.py", "--kind", "has space"],
    );
    assert_eq!(
        (exit, error["code"].clone()),
        (2, json!("invalid_arguments"))
    );
    let (exit, error) = car_error(&home, &["graph", "add-node", "../up", "--kind", "x"]);
    assert_eq!(
        (exit, error["code"].clone()),
        (2, json!("invalid_arguments"))
    );
    let outside = home.other_project("elsewhere");
    let (exit, error) = car_error(&home, &["graph", "scan", outside.to_str().unwrap()]);
    assert_eq!(
        (exit, error["code"].clone()),
        (2, json!("invalid_arguments"))
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("is outside the project"),
        "{error}"
    );
    let (exit, error) = car_error(&home, &["graph", "scan", "no/such/dir"]);
    assert_eq!(
        (exit, error["code"].clone()),
        (2, json!("invalid_arguments"))
    );
    let (exit, error) = car_error(&home, &["graph", "edges", "/elsewhere/a.py"]);
    assert_eq!(
        (exit, error["code"].clone()),
        (2, json!("invalid_arguments"))
    );

    let bad_format = home.car(&["graph", "export", "--format", "svg"]);
    assert_eq!(bad_format.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad_format.stderr).contains("possible values: json, dot, mermaid")
    );

    assert_eq!(
        home.car_json(&["graph", "export"]),
        before,
        "nothing written"
    );
}

/// Long work shows a bar to a person at a terminal (a pty from `script`) and JSON Lines progress
/// on stderr otherwise; stdout carries only the result either way.
#[test]
fn a_scan_shows_a_bar_on_a_terminal_and_json_lines_elsewhere() {
    let home = TestHome::new();
    let files: Vec<(String, String)> = (0..40)
        .map(|i| (format!("src/m{i}.rs"), format!("pub fn f{i}() {{}}\n")))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write(&home.project, &files);
    let out = home.car(&["--json", "graph", "scan"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["success"], true);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!lines.is_empty());
    for line in &lines {
        assert_eq!(
            (&line["type"], &line["command"]),
            (&json!("progress"), &json!("graph.scan")),
            "{line}"
        );
    }

    std::fs::write(home.project.join("src/new.rs"), "pub fn g() {}\n").unwrap();
    let mut script = home.command("script");
    script
        .args(["-qec"])
        .arg(format!("{} graph scan", crate::support::CAR))
        .arg("/dev/null");
    let out = script.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(screen.contains("Scanned"), "{screen}");
    assert!(!screen.contains("\"type\":\"progress\""), "{screen}");
    assert!(
        screen.contains("\u{1b}[2K"),
        "the bar was drawn and cleared: {screen:?}"
    );
}
