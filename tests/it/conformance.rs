//! The official MCP conformance suite in server mode against `examples/conformance_server.rs`:
//! a server built from car-server's own adapter (`McpServer` → `car::server::mcp_router`: the
//! same access checks, sessions, tool dispatch, client channel and prompt/resource surfaces)
//! with the suite's fixtures registered the way an embedding program registers its own. All 32
//! server scenarios must pass. (car-server itself, with no fixtures, is held to the protocol
//! scenarios in `server.rs`.)

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{example_bin, Reaped};

/// Runs the suite (`--suite all`: every server scenario) and returns its output.
fn run_suite(url: &str) -> (bool, String) {
    let tools = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools");
    let conformance = tools.join("node_modules/.bin/conformance");
    assert!(
        conformance.exists(),
        "run scripts/test.sh: it installs the conformance suite into tools/"
    );
    let path = format!(
        "{}:{}",
        tools.join("node22/node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(&conformance)
        .args(["server", "--url", url, "--suite", "all"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_conformance_suite_passes_all_32_server_scenarios_against_the_fixture_server() {
    let mut child = Command::new(example_bin("conformance_server"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines
        .next()
        .expect("the fixture server exited before listening")
        .unwrap()
        .strip_prefix("conformance server at ")
        .unwrap()
        .to_string();
    let _server = Reaped(child);
    let (ok, text) = run_suite(&url);
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary:\n{text}"));
    let passed: Vec<&str> = summary
        .lines()
        .filter(|l| l.starts_with("✓ ") && l.ends_with(", 0 failed"))
        .collect();
    assert!(
        ok && passed.len() == 32,
        "{} of 32 passed:\n{text}",
        passed.len()
    );
}
