//! A newline-delimited JSON-RPC transport that answers malformed input itself: a line that is
//! not JSON gets -32700, a message that is not a JSON-RPC request gets -32600, a known method
//! with malformed params gets -32602 — each with the request's id when it has one — and the
//! server stays up. rmcp's own codec drops unparsable lines silently; agents deserve an answer.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Mutex};

/// The longest line accepted (a request past it is answered -32600 and skipped).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

type Writer = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

pub struct GuardedTransport {
    rx: mpsc::Receiver<ClientJsonRpcMessage>,
    out: Writer,
}

impl GuardedTransport {
    pub fn new<R, W>(reader: R, writer: W) -> GuardedTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let out: Writer = Arc::new(Mutex::new(Box::new(writer)));
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(read_loop(reader, tx, out.clone()));
        GuardedTransport { rx, out }
    }
}

async fn write_line(out: &Writer, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut writer = out.lock().await;
    writer.write_all(&line).await?;
    writer.flush().await
}

impl Transport<RoleServer> for GuardedTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move { write_line(&out, &item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.rx.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.rx.close();
        std::future::ready(Ok(()))
    }
}

fn error_reply(id: Value, code: i64, message: &str, detail: Option<&str>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(detail) = detail {
        error["data"] = json!({"error": detail});
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    tx: mpsc::Sender<ClientJsonRpcMessage>,
    out: Writer,
) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let read = match (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                tracing::error!("reading stdin failed: {e}");
                return;
            }
        };
        if read > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
            // Skip the rest of the oversized line.
            let mut sink = Vec::new();
            if reader.read_until(b'\n', &mut sink).await.is_err() {
                return;
            }
            let reply = error_reply(
                Value::Null,
                -32600,
                "Invalid Request",
                Some("message exceeds 16 MiB"),
            );
            if write_line(&out, &reply).await.is_err() {
                return;
            }
            continue;
        }
        match check(&buf) {
            Checked::Skip => {}
            Checked::Forward(message) => {
                if tx.send(*message).await.is_err() {
                    return;
                }
            }
            Checked::Reply(reply) => {
                if write_line(&out, &reply).await.is_err() {
                    return;
                }
            }
            Checked::Drop(reason) => tracing::warn!("dropped a malformed notification: {reason}"),
        }
    }
}

enum Checked {
    Skip,
    Forward(Box<ClientJsonRpcMessage>),
    Reply(Value),
    Drop(String),
}

fn check(line: &[u8]) -> Checked {
    let Ok(text) = std::str::from_utf8(line) else {
        return Checked::Reply(error_reply(
            Value::Null,
            -32700,
            "Parse error",
            Some("the line is not valid UTF-8"),
        ));
    };
    let text = text.trim();
    if text.is_empty() {
        return Checked::Skip;
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Checked::Reply(error_reply(
                Value::Null,
                -32700,
                "Parse error",
                Some(&e.to_string()),
            ))
        }
    };
    let Value::Object(map) = &value else {
        let why = if value.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a JSON-RPC message must be an object"
        };
        return Checked::Reply(error_reply(
            Value::Null,
            -32600,
            "Invalid Request",
            Some(why),
        ));
    };
    let id = match map.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(Value::Null) | None => None,
        Some(_) => {
            return Checked::Reply(error_reply(
                Value::Null,
                -32600,
                "Invalid Request",
                Some("id must be a string or a number"),
            ))
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Checked::Reply(error_reply(
            reply_id,
            -32600,
            "Invalid Request",
            Some("jsonrpc must be \"2.0\""),
        ));
    }
    let method = match map.get("method") {
        Some(Value::String(m)) => Some(m.clone()),
        None => None,
        Some(_) => {
            return Checked::Reply(error_reply(
                reply_id,
                -32600,
                "Invalid Request",
                Some("method must be a string"),
            ))
        }
    };
    if method.is_none() && !(map.contains_key("result") || map.contains_key("error")) {
        return Checked::Reply(error_reply(
            reply_id,
            -32600,
            "Invalid Request",
            Some("a request needs a method"),
        ));
    }
    if let Some(method) = &method {
        if let Some(problem) = params_problem(method, map.get("params")) {
            return match id {
                Some(id) => {
                    Checked::Reply(error_reply(id, -32602, "Invalid params", Some(&problem)))
                }
                None => Checked::Drop(problem),
            };
        }
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(message) => Checked::Forward(Box::new(message)),
        Err(e) => match (id, method) {
            (Some(id), Some(_)) => Checked::Reply(error_reply(
                id,
                -32602,
                "Invalid params",
                Some(&e.to_string()),
            )),
            (Some(id), None) => Checked::Reply(error_reply(
                id,
                -32600,
                "Invalid Request",
                Some(&e.to_string()),
            )),
            (None, _) => Checked::Drop(e.to_string()),
        },
    }
}

/// The shape checks for the params of the methods CAR serves.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    let object = match params {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return Some("params must be an object".into()),
    };
    let string_field = |name: &str| -> Option<String> {
        match object.and_then(|o| o.get(name)) {
            Some(Value::String(_)) => None,
            Some(_) => Some(format!("params.{name} must be a string")),
            None => Some(format!("params.{name} is required")),
        }
    };
    match method {
        "tools/call" => {
            string_field("name").or_else(|| match object.and_then(|o| o.get("arguments")) {
                None | Some(Value::Null) | Some(Value::Object(_)) => None,
                Some(_) => Some("params.arguments must be an object".into()),
            })
        }
        "prompts/get" => string_field("name"),
        "resources/read" => string_field("uri"),
        "initialize" => string_field("protocolVersion"),
        _ => None,
    }
}
