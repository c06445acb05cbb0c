//! The MCP server in-process, over `tokio::io::duplex`: protocol edge cases that need exact
//! control of the byte stream (lines split across writes, several messages in one write, garbage
//! between requests, cancellation of a call in flight), without spawning a process. The
//! real-binary tests (`mcp.rs`) stay the proof that `car-mcp` itself behaves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use car::{App, Effect, McpServer, Memory, Store, Tool, ToolError, ToolSpec};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// A client end of one in-process server with memory and a `wait` tool that honours cancellation.
struct Client {
    writer: tokio::io::WriteHalf<DuplexStream>,
    lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    /// Set by the `wait` tool when its call is cancelled.
    cancelled: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl Client {
    async fn start() -> Client {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("car.db")).unwrap());
        let memory = Memory::open(store, Some(dir.path()), None).unwrap();
        let cancelled = Arc::new(AtomicBool::new(false));
        let seen = cancelled.clone();
        let wait = Tool::new(
            ToolSpec::new(
                "wait",
                "Wait for ms milliseconds.",
                json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}},
                       "required": ["ms"], "additionalProperties": false}),
            )
            .effect(Effect::None),
            move |call| {
                let seen = seen.clone();
                async move {
                    let ms = call.args["ms"].as_u64().unwrap_or(0);
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!({"waited_ms": ms})),
                        _ = call.cancel.cancelled() => {
                            seen.store(true, Ordering::SeqCst);
                            Err(ToolError::Cancelled)
                        }
                    }
                }
            },
        );
        let app = App::builder()
            .memory(Arc::new(memory))
            .tool(wait)
            .build()
            .unwrap();
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        tokio::spawn(McpServer::new(app).serve(server_read, server_write));
        let (read, writer) = tokio::io::split(client);
        Client {
            writer,
            lines: BufReader::new(read).lines(),
            cancelled,
            _dir: dir,
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    async fn send(&mut self, message: Value) {
        self.write(format!("{message}\n").as_bytes()).await;
    }

    /// The next message from the server (at most 10 s).
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("the server answered within 10 s")
            .unwrap()
            .expect("the server kept the stream open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The response to `id`, skipping notifications.
    async fn response(&mut self, id: i64) -> Value {
        loop {
            let message = self.next().await;
            if message["id"] == id {
                return message;
            }
        }
    }

    async fn initialize(&mut self) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "inproc", "version": "1"}}}),
        )
        .await;
        let init = self.response(0).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "car-mcp", "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }
}

fn call(id: i64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test]
async fn a_message_split_across_writes_and_two_in_one_write_are_each_answered() {
    let mut client = Client::start().await;
    client.initialize().await;
    let message = format!(
        "{}\n",
        call(
            1,
            "memory_add_fact",
            json!({"subject": "build", "body": "cargo nextest run"})
        )
    );
    let (head, tail) = message.split_at(17);
    client.write(head.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.write(tail.as_bytes()).await;
    let added = client.response(1).await;
    assert_ne!(added["result"]["isError"], true, "{added}");

    let two = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        call(
            3,
            "memory_query",
            json!({"query": "how do we run the tests?"})
        )
    );
    client.write(two.as_bytes()).await;
    assert_eq!(client.response(2).await["result"], json!({}));
    let found = client.response(3).await;
    assert_eq!(
        found["result"]["structuredContent"]["results"][0]["body"], "cargo nextest run",
        "{found}"
    );
}

#[tokio::test]
async fn garbage_between_requests_gets_a_parse_error_and_the_session_goes_on() {
    let mut client = Client::start().await;
    client.initialize().await;
    client.write(b"{this is not json\n").await;
    let error = client.next().await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    client
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .await;
    assert_eq!(client.response(5).await["result"], json!({}));
    client
        .send(json!({"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}))
        .await;
    assert_eq!(client.response(6).await["error"]["code"], -32601);
    client.send(call(7, "no_such_tool", json!({}))).await;
    assert_eq!(client.response(7).await["error"]["code"], -32602);
}

#[tokio::test]
async fn a_cancelled_call_stops_while_the_next_one_is_answered() {
    let mut client = Client::start().await;
    client.initialize().await;
    client.send(call(10, "wait", json!({"ms": 60_000}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 10, "reason": "the user stopped it"}}),
        )
        .await;
    client.send(call(11, "wait", json!({"ms": 1}))).await;
    let quick = client.response(11).await;
    assert_eq!(
        quick["result"]["structuredContent"]["waited_ms"], 1,
        "{quick}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !client.cancelled.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The cancelled request gets no answer (MCP: a cancelled request is not responded to) or
    // an error; never a result after its full minute. Check nothing for id 10 arrives as a result.
    client
        .send(json!({"jsonrpc": "2.0", "id": 12, "method": "ping"}))
        .await;
    loop {
        let message = client.next().await;
        assert!(
            !(message["id"] == 10 && message.get("result").is_some_and(|r| r["isError"] != true)),
            "the cancelled call returned a result: {message}"
        );
        if message["id"] == 12 {
            break;
        }
    }
}
