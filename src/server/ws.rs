//! The WebSocket protocol of `car-server` (JSON-RPC 2.0 over text frames, `ws://127.0.0.1:9100/`):
//! what MCP cannot do — run a verified plan whose tools are the caller's own callbacks.
//!
//! 1. `session.auth {token}` must be the first frame (the token of `$CAR_HOME/daemon/token`);
//!    anything else first gets an error and the connection is closed.
//! 2. `session.init {tools: [{name, description, parameters}], policies?}` declares the
//!    client's tools and, optionally, rules for this session on top of the policy files, in the
//!    policy engine's own language (see [`SessionRules`]): CAR's rules registered by name —
//!    `{name, rule: "deny_tool", target}`, `{name, rule: "deny_tool_param", target, key,
//!    pattern}` (the parameter's text contains the pattern), `{name, rule: "require_state", key,
//!    value}` (the session's state must hold that value), `{name, rule: "deny_connector",
//!    target}` — or a rule file's tables as JSON (`{"deny_tool": […], "rate_limit_tool": […]}`).
//! 3. `proposal.submit {proposal}` verifies the plan against those tools (and CAR's own) and
//!    runs it with the plan executor ([`crate::plan::execute`]): every tool call through the
//!    policy gate, CAR's own tools through the registry, the client's by calling it back with
//!    `tools.execute {action_id, tool, parameters, timeout_ms, attempt, request_id}`; a callback
//!    that does not answer within `timeout_ms` (default 30 s) gets `tools.cancel {request_id}`
//!    and counts as failed. The answer: `{proposal_id, results: [{action_id, status, output,
//!    error, error_code, state_changes, duration_ms, attempts}], cost}`.
//! 4. `state.get {key}`, `state.set {key, value}`, `state.keys`, `state.snapshot`: the session's
//!    state, which state writes and declared effects change; `verify`/`simulate {proposal}`.
//!
//! Session state lives with the connection: a client that vanishes mid-proposal takes it along,
//! and nothing is written anywhere else.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::app::App;
use crate::plan::{
    execute, verify, Action, ActionError, ActionOutcome, ActionProposal, Runner, ToolCatalog,
    VerifyOptions,
};
pub use crate::plan::{ActionStatus, Cost};
use crate::policy::SessionRules;
use crate::runtime::{Context, PolicyVerdict, ToolError, ToolSpec};

/// The largest frame a client may send.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// A tool the client runs itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Its input schema (JSON Schema).
    #[serde(default = "any_object")]
    pub parameters: Value,
}

fn any_object() -> Value {
    json!({"type": "object"})
}

/// One action's result, as the protocol sends it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionResult {
    pub action_id: String,
    pub status: ActionStatus,
    pub output: Value,
    pub error: Option<String>,
    /// What kind of error, for a client to tell apart without reading the text: `denied`,
    /// `timeout`, `failed`, `dependency_failed`, `precondition_failed`, `aborted`, … .
    #[serde(default)]
    pub error_code: Option<String>,
    /// What the action changed in the session state.
    pub state_changes: Map<String, Value>,
    pub duration_ms: u64,
    /// Callbacks made (retries included); 0 for actions that call nothing.
    pub attempts: u32,
}

impl From<ActionOutcome> for ActionResult {
    fn from(outcome: ActionOutcome) -> ActionResult {
        ActionResult {
            status: outcome.status(),
            error_code: outcome.error.as_ref().map(|e| e.code().to_string()),
            error: outcome.error.as_ref().map(ToString::to_string),
            action_id: outcome.action_id,
            output: outcome.output,
            state_changes: outcome.state_changes,
            duration_ms: outcome.duration.as_millis() as u64,
            attempts: outcome.attempts,
        }
    }
}

/// The answer to `proposal.submit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Executed {
    pub proposal_id: String,
    pub results: Vec<ActionResult>,
    pub cost: Cost,
}

/// A JSON-RPC error.
#[derive(Debug, Clone, Serialize)]
struct RpcError {
    code: i64,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    fn invalid(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }
}

/// What the WebSocket routes need.
#[derive(Clone)]
pub struct WsState {
    pub app: App,
    pub token: Arc<str>,
    pub context: Context,
    /// The project the daemon serves (what a session's path rules call the project).
    pub project: PathBuf,
}

/// `GET /` upgraded to the protocol.
pub async fn upgrade(State(state): State<WsState>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| connection(socket, state))
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>>;

/// One connection's session.
struct Session {
    state: WsState,
    tools: Mutex<Vec<ClientTool>>,
    policies: Mutex<Arc<SessionRules>>,
    store: Mutex<Map<String, Value>>,
    pending: Pending,
    out: mpsc::UnboundedSender<Value>,
    next_callback: std::sync::atomic::AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn connection(mut socket: WebSocket, state: WsState) {
    let (out, mut outgoing) = mpsc::unbounded_channel::<Value>();
    let session = Arc::new(Session {
        state,
        tools: Mutex::new(Vec::new()),
        policies: Mutex::new(Arc::new(SessionRules::default())),
        store: Mutex::new(Map::new()),
        pending: Arc::new(Mutex::new(HashMap::new())),
        out,
        next_callback: std::sync::atomic::AtomicU64::new(1),
    });
    let mut authed = false;
    loop {
        tokio::select! {
            frame = socket.recv() => {
                let Some(Ok(frame)) = frame else { break };
                let text = match frame {
                    Message::Text(text) => text.to_string(),
                    Message::Close(_) => break,
                    Message::Ping(_) | Message::Pong(_) => continue,
                    Message::Binary(_) => {
                        let _ = session.out.send(error_frame(Value::Null, RpcError::new(-32600, "send JSON-RPC as text frames")));
                        continue;
                    }
                };
                let message: Value = match serde_json::from_str(&text) {
                    Ok(value) => value,
                    Err(e) => {
                        let _ = session.out.send(error_frame(Value::Null, RpcError::new(-32700, format!("not JSON: {e}"))));
                        continue;
                    }
                };
                if !authed {
                    let given = message.pointer("/params/token").and_then(Value::as_str);
                    let ok = message["method"] == "session.auth"
                        && given.is_some_and(|t| super::tokens_match(t, &session.state.token));
                    let id = message.get("id").cloned().unwrap_or(Value::Null);
                    if !ok {
                        let error = RpcError::new(-32001, "the first frame must be session.auth {token} with the token of $CAR_HOME/daemon/token");
                        let _ = socket.send(Message::Text(error_frame(id, error).to_string().into())).await;
                        break;
                    }
                    authed = true;
                    let _ = session.out.send(result_frame(id, json!({"authenticated": true})));
                    continue;
                }
                dispatch(&session, message);
            }
            frame = outgoing.recv() => {
                let Some(frame) = frame else { break };
                if socket.send(Message::Text(frame.to_string().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    // The client is gone: every callback waiting on it fails at once.
    lock(&session.pending).clear();
}

fn result_frame(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error_frame(id: Value, error: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A frame from the client: a request to answer, or the answer to a callback.
fn dispatch(session: &Arc<Session>, message: Value) {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        // An answer to tools.execute.
        let key = id.as_str().unwrap_or_default().to_string();
        if let Some(waiter) = lock(&session.pending).remove(&key) {
            let outcome = match message.get("error") {
                Some(error) => Err(error
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| error.to_string(), str::to_string)),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = waiter.send(outcome);
        }
        return;
    };
    let params = message.get("params").cloned().unwrap_or(json!({}));
    let session = session.clone();
    tokio::spawn(async move {
        let answer = match handle(&session, &method, params).await {
            Ok(result) => result_frame(id, result),
            Err(error) => error_frame(id, error),
        };
        let _ = session.out.send(answer);
    });
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        RpcError::invalid(format!("`{path}`: {}", e.into_inner()))
    })
}

fn to_value(value: impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(-32603, e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InitParams {
    #[serde(default)]
    tools: Vec<ClientTool>,
    /// The session's own rules (see [`SessionRules`]).
    #[serde(default)]
    policies: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposalParams {
    proposal: ActionProposal,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyParams {
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetParams {
    key: String,
    value: Value,
}

async fn handle(session: &Arc<Session>, method: &str, params: Value) -> Result<Value, RpcError> {
    match method {
        "session.auth" => Ok(json!({"authenticated": true})),
        "session.init" => {
            let init: InitParams = parse(params)?;
            let rules = SessionRules::compile(&init.policies, &session.state.project)
                .map_err(RpcError::invalid)?;
            let names: Vec<String> = init.tools.iter().map(|t| t.name.clone()).collect();
            let policies = rules.names.clone();
            *lock(&session.tools) = init.tools;
            *lock(&session.policies) = Arc::new(rules);
            Ok(json!({"tools": names, "policies": policies}))
        }
        "state.get" => {
            let KeyParams { key } = parse(params)?;
            let value = lock(&session.store).get(&key).cloned();
            Ok(json!({"key": key, "exists": value.is_some(), "value": value}))
        }
        "state.set" => {
            let SetParams { key, value } = parse(params)?;
            lock(&session.store).insert(key.clone(), value);
            Ok(json!({"key": key}))
        }
        "state.keys" => Ok(json!({"keys": lock(&session.store).keys().cloned().collect::<Vec<_>>()})),
        "state.snapshot" => Ok(json!({"state": lock(&session.store).clone()})),
        // The registry's own tools, as MCP and the CLI call them (schema check, policy gate,
        // execution log); the client's tools count as present, the session state as the start.
        "verify" | "simulate" => {
            let mut args = match params {
                Value::Object(map) => map,
                _ => return Err(RpcError::invalid("params must be an object")),
            };
            if !args.contains_key("initial_state") {
                args.insert("initial_state".into(), Value::Object(lock(&session.store).clone()));
            }
            if method == "verify" {
                let declared: Vec<String> = lock(&session.tools).iter().map(|t| t.name.clone()).collect();
                args.insert("extra_tools".into(), json!(declared));
            }
            registry_call(session, method, Value::Object(args)).await
        }
        "proposal.submit" => {
            let p: ProposalParams = parse(params)?;
            to_value(submit(session, p.proposal).await?)
        }
        other => Err(RpcError::new(
            -32601,
            format!("unknown method '{other}'; the methods are session.init, proposal.submit, state.get|set|keys|snapshot, verify, simulate"),
        )),
    }
}

async fn registry_call(session: &Session, tool: &str, args: Value) -> Result<Value, RpcError> {
    own_call(session, tool, args).await.map_err(|e| match e {
        ToolError::InvalidArguments(m) => RpcError::invalid(m),
        other => RpcError::new(-32000, other.to_string()),
    })
}

/// One of CAR's own tools, through the registry like every other call (schema check, policy
/// gate, execution log).
async fn own_call(session: &Session, tool: &str, args: Value) -> Result<Value, ToolError> {
    let options = crate::runtime::CallOptions {
        request_id: None,
        cancel: tokio_util::sync::CancellationToken::new(),
        client: crate::runtime::Client::none(),
    };
    let runtime = session.state.app.runtime();
    match runtime
        .call(tool, args, &session.state.context, options)
        .await
    {
        Ok(outcome) => outcome.result,
        Err(e) => Err(ToolError::NotFound(e.to_string())),
    }
}

/// Verifies against the client's tools (their names and input schemas) and CAR's own, before
/// a proposal runs.
fn check(
    session: &Session,
    proposal: &ActionProposal,
    state: Map<String, Value>,
) -> crate::plan::Verification {
    let declared: Vec<(String, Value)> = lock(&session.tools)
        .iter()
        .map(|t| (t.name.clone(), t.parameters.clone()))
        .collect();
    let runtime = session.state.app.runtime();
    let catalog = ToolCatalog::from_registry(runtime.registry()).with_declared(declared);
    let options = VerifyOptions {
        max_actions: 10_000,
        extra_tools: Vec::new(),
        initial_state: state,
    };
    verify(proposal, &catalog, &options)
}

async fn submit(session: &Arc<Session>, proposal: ActionProposal) -> Result<Executed, RpcError> {
    let initial = lock(&session.store).clone();
    let verdict = check(session, &proposal, initial);
    if !verdict.valid {
        let mut error =
            RpcError::invalid("the proposal is not valid; nothing ran (see data.issues)");
        error.data = Some(json!({"issues": verdict.issues}));
        return Err(error);
    }
    let runner = SessionRunner { session };
    let run = execute(
        &proposal,
        &verdict.execution_levels,
        &session.store,
        &runner,
    )
    .await;
    Ok(Executed {
        proposal_id: proposal.id.clone(),
        results: run.outcomes.into_iter().map(ActionResult::from).collect(),
        cost: run.cost,
    })
}

/// Runs a plan's tool calls for a session: CAR's own tools in the daemon, the client's own by
/// calling it back.
struct SessionRunner<'a> {
    session: &'a Arc<Session>,
}

impl SessionRunner<'_> {
    /// A tool the client declared, or one CAR does not have (which the client then runs).
    fn client_tool(&self, tool: &str) -> Option<ToolSpec> {
        let declared = lock(&self.session.tools)
            .iter()
            .find(|t| t.name == tool)
            .cloned();
        match declared {
            Some(t) => Some(ToolSpec::new(&t.name, &t.description, t.parameters)),
            None if self
                .session
                .state
                .app
                .runtime()
                .registry()
                .get(tool)
                .is_some() =>
            {
                None
            }
            None => Some(ToolSpec::new(tool, "", any_object())),
        }
    }
}

impl Runner for SessionRunner<'_> {
    fn admit(&self, action: &Action, state: &Map<String, Value>) -> Result<(), ActionError> {
        let tool = action.tool.as_deref().unwrap_or_default();
        let parameters = Value::Object(action.parameters.clone());
        let rules = lock(&self.session.policies).clone();
        if let Some(reason) = rules.violations(tool, &parameters, state) {
            return Err(ActionError::Tool(ToolError::Denied(reason)));
        }
        // CAR's own tools pass the gate inside the registry's call; the client's, here.
        let Some(spec) = self.client_tool(tool) else {
            return Ok(());
        };
        let runtime = self.session.state.app.runtime();
        match runtime
            .dispatcher()
            .check_policy(&spec, &parameters, &self.session.state.context)
        {
            PolicyVerdict::Deny { reason } => Err(ActionError::Tool(ToolError::Denied(reason))),
            PolicyVerdict::Allow => Ok(()),
        }
    }

    async fn call(
        &self,
        action: &Action,
        attempt: u32,
        timeout: Duration,
    ) -> Result<Value, ActionError> {
        let tool = action.tool.clone().unwrap_or_default();
        let parameters = Value::Object(action.parameters.clone());
        if self.client_tool(&tool).is_none() {
            return own_call(self.session, &tool, parameters)
                .await
                .map_err(ActionError::Tool);
        }
        let session = self.session;
        let n = session
            .next_callback
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request_id = format!("cb-{n}");
        let (tx, rx) = oneshot::channel();
        lock(&session.pending).insert(request_id.clone(), tx);
        let call = json!({"jsonrpc": "2.0", "id": request_id, "method": "tools.execute", "params": {
            "action_id": action.id, "tool": tool, "parameters": parameters,
            "timeout_ms": timeout.as_millis() as u64, "attempt": attempt, "request_id": request_id}});
        if session.out.send(call).is_err() {
            lock(&session.pending).remove(&request_id);
            return Err(ActionError::Gone);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(output))) => Ok(output),
            Ok(Ok(Err(message))) => Err(ActionError::Tool(ToolError::Failed(message))),
            Ok(Err(_)) => Err(ActionError::Gone),
            Err(_) => {
                lock(&session.pending).remove(&request_id);
                let _ = session
                    .out
                    .send(json!({"jsonrpc": "2.0", "method": "tools.cancel",
                    "params": {"request_id": request_id, "reason": "timeout"}}));
                Err(ActionError::NoAnswer(timeout))
            }
        }
    }
}

/// A client of the protocol: run a proposal whose tool calls this process answers.
pub mod client {
    use std::collections::HashMap;
    use std::future::Future;

    use futures_util::{SinkExt, StreamExt};
    use serde_json::{json, Value};
    use tokio_tungstenite::tungstenite::Message;

    use super::{ClientTool, Executed};

    /// One `tools.execute` callback.
    #[derive(Debug, Clone)]
    pub struct Execute {
        pub action_id: String,
        pub tool: String,
        pub parameters: Value,
        pub attempt: u32,
        pub request_id: String,
    }

    /// Why a run did not return results.
    #[derive(Debug, thiserror::Error)]
    pub enum ClientError {
        #[error("cannot connect to {url}: {message}")]
        Connect { url: String, message: String },
        #[error("car-server refused {method}: {message}")]
        Refused {
            method: String,
            message: String,
            data: Option<Value>,
        },
        #[error("the connection broke: {0}")]
        Broken(String),
    }

    /// Connects to `url` (`ws://127.0.0.1:9100/`), authenticates with `token`, declares
    /// `tools`, submits `proposal` and answers every `tools.execute` with `execute` (callbacks
    /// run concurrently; a `tools.cancel` aborts its callback). Returns the server's results.
    pub async fn run_proposal<F, Fut>(
        url: &str,
        token: &str,
        tools: &[ClientTool],
        proposal: Value,
        execute: F,
    ) -> Result<Executed, ClientError>
    where
        F: Fn(Execute) -> Fut,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let (mut socket, _) =
            // No Nagle: each small frame goes out at once (see `server::no_delay`).
            tokio_tungstenite::connect_async_with_config(url, None, true)
                .await
                .map_err(|e| ClientError::Connect {
                    url: url.to_string(),
                    message: e.to_string(),
                })?;
        let requests = [
            ("session.auth", json!({"token": token})),
            ("session.init", json!({"tools": tools})),
            ("proposal.submit", json!({"proposal": proposal})),
        ];
        let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let mut running: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
        for (n, (method, params)) in requests.into_iter().enumerate() {
            let frame = json!({"jsonrpc": "2.0", "id": n + 1, "method": method, "params": params});
            socket
                .send(Message::Text(frame.to_string().into()))
                .await
                .map_err(|e| ClientError::Broken(e.to_string()))?;
            loop {
                let message = tokio::select! {
                    frame = socket.next() => match frame {
                        Some(Ok(Message::Text(text))) => serde_json::from_str::<Value>(&text)
                            .map_err(|e| ClientError::Broken(format!("not JSON: {e}")))?,
                        Some(Ok(Message::Close(_))) | None => {
                            return Err(ClientError::Broken("car-server closed the connection".into()))
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => return Err(ClientError::Broken(e.to_string())),
                    },
                    Some(answer) = answered.recv() => {
                        if let Some(id) = answer["id"].as_str() {
                            running.remove(id);
                        }
                        socket.send(Message::Text(answer.to_string().into())).await
                            .map_err(|e| ClientError::Broken(e.to_string()))?;
                        continue;
                    }
                };
                match message["method"].as_str() {
                    Some("tools.execute") => {
                        let p = &message["params"];
                        let call = Execute {
                            action_id: p["action_id"].as_str().unwrap_or_default().to_string(),
                            tool: p["tool"].as_str().unwrap_or_default().to_string(),
                            parameters: p["parameters"].clone(),
                            attempt: p["attempt"].as_u64().unwrap_or(1) as u32,
                            request_id: p["request_id"].as_str().unwrap_or_default().to_string(),
                        };
                        let id = message["id"].clone();
                        let key = id.as_str().unwrap_or_default().to_string();
                        let work = execute(call);
                        let answers = answers.clone();
                        let task = tokio::spawn(async move {
                            let answer = match work.await {
                                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                                Err(message) => json!({"jsonrpc": "2.0", "id": id,
                                    "error": {"code": -32000, "message": message}}),
                            };
                            let _ = answers.send(answer);
                        });
                        running.insert(key, task.abort_handle());
                    }
                    Some("tools.cancel") => {
                        let id = message["params"]["request_id"].as_str().unwrap_or_default();
                        if let Some(task) = running.remove(id) {
                            task.abort();
                        }
                    }
                    Some(_) => {}
                    None if message["id"] == json!(n + 1) => {
                        if let Some(error) = message.get("error") {
                            return Err(ClientError::Refused {
                                method: method.to_string(),
                                message: error["message"].as_str().unwrap_or_default().to_string(),
                                data: error.get("data").cloned(),
                            });
                        }
                        if method == "proposal.submit" {
                            return serde_json::from_value(message["result"].clone()).map_err(
                                |e| ClientError::Broken(format!("unexpected results: {e}")),
                            );
                        }
                        break;
                    }
                    None => {}
                }
            }
        }
        Err(ClientError::Broken("no results".into()))
    }
}
