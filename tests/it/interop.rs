//! Interop with an MCP client nobody here wrote: the official Python SDK (`pip install mcp`).

use crate::support::{TestHome, CAR_MCP};

#[test]
fn the_python_mcp_sdk_lists_and_calls_tools() {
    let home = TestHome::new();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/py/sdk_client.py");
    let out = home
        .command("python3")
        .args([script, CAR_MCP])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python SDK client failed (is `pip install mcp==2.3.0` done? scripts/test.sh installs it):\n{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["server"], "car-mcp");
    assert_eq!(report["tools"].as_array().unwrap().len(), 23);
    assert_eq!(report["added"]["id"], "fact-1");
    assert_eq!(report["recalled"][0]["subject"], "deploys");
    assert_eq!(report["error_is_error"], true);
    assert!(report["prompt"].as_str().unwrap().contains("canary"));
}
