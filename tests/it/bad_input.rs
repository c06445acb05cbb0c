//! Malformed input gets a clear answer, the server stays up, and nothing is written.

use serde_json::{json, Value};

use crate::support::Peer as _;
use crate::support::TestHome;

fn next_error(mcp: &mut crate::support::McpProcess) -> Value {
    // Errors for unparsable lines carry id null.
    mcp.wait(&Value::Null)
}

#[test]
fn malformed_lines_get_json_rpc_errors_and_the_server_stays_up() {
    let home = TestHome::new();
    let mut mcp = home.spawn_mcp();
    mcp.initialize();

    mcp.send_raw(b"{not json\n");
    let parse = next_error(&mut mcp);
    assert_eq!(parse["error"]["code"], -32700);

    mcp.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\xff\xfe\n");
    assert_eq!(
        next_error(&mut mcp)["error"]["code"],
        -32700,
        "invalid UTF-8"
    );

    mcp.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n");
    assert_eq!(next_error(&mut mcp)["error"]["code"], -32600, "batch");

    mcp.send_raw(b"42\n");
    assert_eq!(
        next_error(&mut mcp)["error"]["code"],
        -32600,
        "not an object"
    );

    mcp.send(&json!({"jsonrpc": "1.0", "id": 900, "method": "ping"}));
    assert_eq!(mcp.wait(&json!(900))["error"]["code"], -32600);

    mcp.send(&json!({"jsonrpc": "2.0", "id": 901}));
    assert_eq!(mcp.wait(&json!(901))["error"]["code"], -32600, "no method");

    mcp.send(
        &json!({"jsonrpc": "2.0", "id": 902, "method": "tools/call", "params": {"arguments": {}}}),
    );
    let no_name = mcp.wait(&json!(902));
    assert_eq!(no_name["error"]["code"], -32602);
    assert_eq!(no_name["error"]["data"]["error"], "params.name is required");

    mcp.send(&json!({"jsonrpc": "2.0", "id": 903, "method": "tools/call", "params": {"name": "memory_query", "arguments": "x"}}));
    assert_eq!(mcp.wait(&json!(903))["error"]["code"], -32602);

    mcp.send(&json!({"jsonrpc": "2.0", "id": 904, "method": "no/such/method"}));
    assert_eq!(mcp.wait(&json!(904))["error"]["code"], -32601);

    // Wrong argument shapes are tool errors the agent can read.
    let wrong = mcp.call("memory_add_fact", json!({"subject": ["x"], "body": 5}));
    assert_eq!(wrong["isError"], true);
    let wrong = mcp.call(
        "memory_add_fact",
        json!({"subject": "x", "body": "y", "colour": "red"}),
    );
    assert_eq!(wrong["isError"], true, "unknown fields are refused");

    // A string over 1 MiB is refused with the bound named.
    let huge = "x".repeat(1024 * 1024 + 1);
    let too_big = mcp.call("memory_add_fact", json!({"subject": "big", "body": huge}));
    assert_eq!(too_big["isError"], true);
    let message = too_big["_meta"]["car/error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/body") && message.contains("1 MiB"),
        "{message}"
    );

    // Still serving.
    assert_eq!(mcp.request("ping", json!({}))["result"], json!({}));
    mcp.finish();
    assert_eq!(home.entry_count(), 0, "nothing was written by bad input");
}
