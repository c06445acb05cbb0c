//! The MCP face: an rmcp `ServerHandler` over the runtime's registry — tools with their hints,
//! the `car_context` prompt, and `car://memory/fact/{id}` and `car://memory/skill/{name}` resources
//! — served over stdio.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod channel;
pub mod process;
mod stdio;

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, CreateTaskResult, DetailedTask, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerConfig, SubscribeRequestParams, Task, TaskPayload, TaskStatus, UnsubscribeRequestParams,
    UpdateTaskParams, TASKS_EXTENSION_ID,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use channel::{McpChannel, SessionLevel};

use crate::app::App;
use crate::memory::surfaces::{
    Briefing, EntryPage, EntryText, CONTEXT_PROMPT, FACT_RESOURCE, FACT_RESOURCES,
};
use crate::runtime::{
    CallOptions, CallOutcome, Client, Context, DispatchError, Face, JobState, JobStatus,
    ResultText, ToolError,
};

/// The protocol revisions CAR serves (newest preferred). 2025-03-26 is left out on purpose: it
/// requires JSON-RPC batches, which CAR refuses; a client asking for it is offered 2025-11-25.
/// 2026-07-28 has no `initialize`: each request carries its revision and capabilities, and
/// the server keeps no session (rmcp's stateless path, on stdio and HTTP alike).
pub(crate) const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];
const FACT_URI: &str = "car://memory/fact/";
const SKILL_URI: &str = "car://memory/skill/";
const RESOURCES_PER_PAGE: usize = 100;

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}

/// Prompts and resources an embedding program serves beside CAR's own, through the same
/// adapter (the conformance suite's fixtures are one). Values are MCP's JSON shapes: `Prompt`,
/// `GetPromptResult`, `Resource`, `ResourceTemplate`, `ReadResourceResult`. A method answers
/// `None` for a name or URI that is not its own, and CAR's own surfaces answer instead.
pub trait McpExtension: Send + Sync {
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }
    /// `prompts/get`; `Some(Err(message))` refuses the arguments (invalid params).
    fn get_prompt(&self, _name: &str, _args: &Map<String, Value>) -> Option<Result<Value, String>> {
        None
    }
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// `resources/read`; `Some(Err(message))` when the URI is its own but cannot be read.
    fn read_resource(&self, _uri: &str) -> Option<Result<Value, String>> {
        None
    }
    /// Whether clients may subscribe to this extension's resources (advertised as
    /// `resources.subscribe`).
    fn subscribable(&self) -> bool {
        false
    }
    /// `completion/complete` for one of its prompts' or templates' arguments: the values that
    /// complete `value`, best first.
    fn complete(&self, _reference: &Value, _argument: &str, _value: &str) -> Option<Vec<String>> {
        None
    }
}

/// What one MCP session remembers: the log level the client set and its subscriptions, and
/// the id its calls carry in the execution log.
#[derive(Clone)]
struct Session {
    level: SessionLevel,
    subscriptions: Arc<Mutex<HashSet<String>>>,
    id: Arc<str>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            level: SessionLevel::default(),
            subscriptions: Arc::default(),
            id: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
        }
    }
}

/// An MCP server over an [`App`].
#[derive(Clone)]
pub struct McpServer {
    /// `serverInfo.name`: `car-mcp` or `car-server`.
    name: &'static str,
    app: App,
    context: Context,
    tools: Arc<Vec<Value>>,
    /// Some tool starts jobs, so the tasks extension is advertised.
    takes_tasks: bool,
    extension: Option<Arc<dyn McpExtension>>,
    session: Session,
}

impl McpServer {
    pub fn new(app: App) -> McpServer {
        let tools = app
            .runtime()
            .registry()
            .specs()
            .filter(|s| s.listed)
            .map(|s| s.to_json())
            .collect();
        let takes_tasks = app.runtime().registry().has_jobs();
        McpServer {
            name: "car-mcp",
            takes_tasks,
            app,
            context: Context::new(Face::Mcp),
            tools: Arc::new(tools),
            extension: None,
            session: Session::default(),
        }
    }

    /// Also serves `extension`'s prompts and resources.
    pub fn extension(mut self, extension: Arc<dyn McpExtension>) -> McpServer {
        self.extension = Some(extension);
        self
    }

    /// The same server for a new session (its own log level and subscriptions); the HTTP face
    /// calls it for each session it opens.
    pub fn for_new_session(&self) -> McpServer {
        McpServer {
            session: Session::default(),
            ..self.clone()
        }
    }

    /// Task `id` (a job of one of the tools) and where it stands; unknown is invalid params.
    fn job(&self, id: &str) -> Result<(Arc<dyn crate::runtime::Jobs>, JobState), McpError> {
        self.app
            .runtime()
            .registry()
            .job(id)
            .map(|(jobs, state)| (jobs.clone(), state))
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("Failed to retrieve task: no task {id} on this server (tasks nobody asks after for an hour are forgotten)"),
                    None,
                )
            })
    }

    /// The way back to the client for one call.
    fn client_of(
        &self,
        tool: &str,
        context: &RequestContext<RoleServer>,
        meta: Option<&rmcp::model::RequestMetaObject>,
    ) -> Client {
        let progress_token = context
            .meta
            .get_progress_token()
            .or_else(|| meta.and_then(|m| m.get_progress_token()));
        Client::new(Arc::new(McpChannel {
            peer: context.peer.clone(),
            progress_token,
            level: self.session.level.clone(),
            tool: tool.to_string(),
        }))
    }

    /// The name the server gives in `initialize`.
    pub fn named(mut self, name: &'static str) -> McpServer {
        self.name = name;
        self
    }

    /// The trusted context of the connection (confirmation grants decided by the host).
    pub fn context(mut self, context: Context) -> McpServer {
        self.context = context;
        self
    }

    /// Serves one client on stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        self.serve(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client on any byte streams (newline-delimited JSON-RPC).
    pub async fn serve<R, W>(self, reader: R, writer: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let transport = stdio::GuardedTransport::new(reader, writer);
        let running = ServiceExt::serve(self, transport)
            .await
            .map_err(|e| ServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| ServeError::Session(e.to_string()))
    }

    /// The context of one request's calls: the execution log says which session and which
    /// client made it, and on a team server which user (the one its token belongs to), whose
    /// role the runtime then holds it to.
    fn call_context(&self, request: &RequestContext<RoleServer>) -> Context {
        let mut context = self.context.clone().session(self.session.id.clone());
        if let Some(caller) = request
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<crate::runtime::Caller>())
        {
            context = context.caller(caller);
        }
        if let Some(info) = request.peer.peer_info() {
            // As the client calls itself (self-reported), at most 64 characters.
            let name: String = info.client_info.name.chars().take(64).collect();
            context = context.host(name);
        }
        context
    }

    /// Runs an unlisted operation (the prompt, a resource) through the dispatcher: the schema
    /// check, the policy gate and the execution log see it like a tool call.
    async fn operate<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        args: Value,
        request: &RequestContext<RoleServer>,
    ) -> Result<T, McpError> {
        let value = self.operate_value(name, args, request).await?;
        serde_json::from_value(value).map_err(|e| {
            McpError::internal_error(format!("{name} returned an unexpected result: {e}"), None)
        })
    }

    async fn operate_value(
        &self,
        name: &str,
        args: Value,
        request: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let options = CallOptions {
            request_id: None,
            cancel: request.ct.clone(),
            client: Client::none(),
        };
        match self
            .app
            .runtime()
            .operate(name, args, &self.call_context(request), options)
            .await
        {
            Ok(outcome) => outcome.result.map_err(|e| match e {
                ToolError::InvalidArguments(m) => McpError::invalid_params(m, None),
                ToolError::NotFound(m) => McpError::resource_not_found(m, None),
                ToolError::Denied(_) | ToolError::ConfirmationRequired(_) => {
                    McpError::invalid_request(e.to_string(), None)
                }
                other => McpError::internal_error(other.to_string(), None),
            }),
            Err(DispatchError::UnknownTool(_)) => Err(McpError::invalid_params(
                format!("this server does not serve {name}"),
                None,
            )),
            Err(err @ DispatchError::Store(_)) => {
                Err(McpError::internal_error(err.to_string(), None))
            }
        }
    }

    /// `car://memory/skill/{name}`: the active skill as JSON.
    async fn read_skill(
        &self,
        uri: &str,
        name: &str,
        request: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        // A name in a URI may be percent-encoded (spaces, slashes).
        let name = percent_decode(name);
        let skill = self
            .operate_value(
                crate::skills::tools::SKILL_RESOURCE,
                json!({"name": name}),
                request,
            )
            .await?;
        let text = serde_json::to_string_pretty(&skill)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let result: ReadResourceResult = from_json(json!({"contents": [{
            "uri": uri, "mimeType": "application/json", "text": text
        }]}))?;
        Ok(ReadResourceResponse::Complete(result))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Decodes `%XX` escapes (invalid ones stay as they are).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A result of MCP's shape from its JSON. Every result says `resultType: "complete"`, as the
/// 2026-07-28 revision asks of them all; rmcp takes the field off again for a client of an
/// earlier revision.
fn from_json<T: serde::de::DeserializeOwned>(mut value: Value) -> Result<T, McpError> {
    if let Some(result) = value.as_object_mut() {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("cannot build the result: {e}"), None))
}

/// The wire form of a dispatched call.
fn tool_result(outcome: CallOutcome) -> Value {
    let mut meta = json!({
        "car/execution_id": outcome.execution_id,
        "car/status": outcome.status.as_str(),
    });
    if outcome.replayed {
        meta["car/replayed"] = json!(true);
    }
    match outcome.result {
        // A tool's own account of its failure (a connector's error content, a project
        // action's failure envelope) goes to the client as it gave it.
        Err(ToolError::Reported { code, text }) => {
            meta["car/error"] = json!({"code": code, "message": text});
            json!({"content": [{"type": "text", "text": text}], "isError": true, "_meta": meta})
        }
        Ok(value) => {
            let text = match outcome.text {
                ResultText::Json => value.to_string(),
                ResultText::JsonLine => format!("{value}\n"),
            };
            let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
            if value.is_object() {
                result["structuredContent"] = value;
            }
            result["_meta"] = meta;
            result
        }
        Err(error) => {
            let body = json!({"code": error.code(), "message": error.to_string()});
            meta["car/error"] = body.clone();
            json!({
                "content": [{"type": "text", "text": json!({"error": body}).to_string()}],
                "isError": true,
                "_meta": meta,
            })
        }
    }
}

/// The wire form of a connector tool's call: the remote server's content as it sent it, with
/// CAR's execution metadata; CAR's own errors (policy, timeout, gone away) as usual.
fn remote_result(outcome: CallOutcome) -> Value {
    match outcome.result {
        Ok(Value::Object(mut remote)) => {
            let mut meta = match remote.remove("_meta") {
                Some(Value::Object(meta)) => meta,
                _ => Default::default(),
            };
            meta.insert("car/execution_id".into(), json!(outcome.execution_id));
            meta.insert("car/status".into(), json!(outcome.status.as_str()));
            remote.insert("_meta".into(), Value::Object(meta));
            remote.entry("content").or_insert_with(|| json!([]));
            remote.entry("isError").or_insert(json!(false));
            Value::Object(remote)
        }
        _ => tool_result(outcome),
    }
}

/// How long a client may keep `tools/list` before asking again: a minute, as CAR's documents'
/// adapter does (a connector's tools changing is announced with `notifications/tools/list_changed`
/// whatever the hint).
const TOOLS_TTL_MS: u64 = 60_000;

/// How often a task's client is asked to poll.
const TASK_POLL_MS: u64 = 1000;

/// A job as an MCP task (the tasks extension, SEP-2663): its status, what it is doing, and once
/// done the tool's result — the document the call would have answered had it waited.
fn task_of(id: &str, job: JobState) -> DetailedTask {
    let stamp =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut task = Task::new(
        id,
        TaskStatus::Working,
        stamp(job.created),
        stamp(job.updated),
    )
    .with_ttl_ms(job.ttl.as_millis() as u64)
    .with_poll_interval_ms(TASK_POLL_MS);
    if let Some(message) = job.message {
        task = task.with_status_message(message);
    }
    let payload = match job.status {
        JobStatus::Working => TaskPayload::Working,
        JobStatus::Cancelled => TaskPayload::Cancelled,
        JobStatus::Done { result, failed } => {
            let mut call_result = Map::new();
            call_result.insert("resultType".into(), json!("complete"));
            call_result.insert(
                "content".into(),
                json!([{"type": "text", "text": result.to_string()}]),
            );
            if result.is_object() {
                call_result.insert("structuredContent".into(), result);
            }
            call_result.insert("isError".into(), json!(failed));
            TaskPayload::Completed {
                result: call_result,
            }
        }
    };
    DetailedTask::new(task, payload)
}

/// How often a session checks whether the connector tools changed.
const TOOLS_WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

impl ServerHandler for McpServer {
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // Announce changes of the connector tools (enabled or disabled by `car connector`
        // in another process) until the client goes away.
        let Some(source) = self.app.runtime().dispatcher().source().cloned() else {
            return;
        };
        let peer = context.peer;
        tokio::spawn(async move {
            let mut seen = source.generation();
            loop {
                tokio::time::sleep(TOOLS_WATCH_INTERVAL).await;
                if peer.is_transport_closed() {
                    break;
                }
                let now = source.generation();
                if now != seen {
                    seen = now;
                    if peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                }
            }
        });
    }

    fn get_info(&self) -> ServerConfig {
        let subscribable = self.extension.as_ref().is_some_and(|e| e.subscribable());
        let value = json!({
            "protocolVersion": ProtocolVersion::V_2025_11_25,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": subscribable, "listChanged": false},
                "prompts": {"listChanged": false},
                "completions": {},
                "logging": {}
            },
            "serverInfo": {"name": self.name, "title": "CAR", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "CAR gives you durable memory and a project's state across sessions. At session start, context_manager {action: \"context\"} briefs you (ready tasks, blockers, decisions, relevant memory). Recall with memory_query before you rely on assumptions; remember decisions, conventions and gotchas with memory_add_fact (a fact with the same subject replaces the old one). Track work with task_manager (ready, claim, complete), record architecture decisions with decision_logger, and look for a saved skill with skill_find before writing a script anew. Check a multi-step plan with verify before running it."
        });
        let mut value = value;
        if self.takes_tasks {
            // Tools that start long work hand clients that take tasks a task to follow.
            value["capabilities"]["extensions"] = json!({ TASKS_EXTENSION_ID: {} });
        }
        serde_json::from_value(value).unwrap_or_default()
    }

    /// The lowest level of the log messages tools send this session (SEP-2577 deprecates
    /// logging; the revisions CAR serves still have it).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session
            .level
            .set(channel::from_mcp_level(request.level));
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let readable = self
            .extension
            .as_ref()
            .filter(|e| e.subscribable())
            .and_then(|e| e.read_resource(&request.uri))
            .is_some_and(|r| r.is_ok());
        if !readable {
            return Err(McpError::invalid_params(
                format!(
                    "cannot subscribe to {}: only resources that send updates can be subscribed to, and CAR's memory resources do not",
                    request.uri
                ),
                None,
            ));
        }
        lock(&self.session.subscriptions).insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        lock(&self.session.subscriptions).remove(&request.uri);
        Ok(())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut result = match self.app.runtime().dispatcher().source() {
            Some(source) => {
                let mut tools = (*self.tools).clone();
                tools.extend(source.current().specs().map(|s| s.to_json()));
                json!({"tools": tools})
            }
            None => json!({"tools": *self.tools}),
        };
        // The revision that has caching hints (SEP-2549) gets how long the list may be kept.
        let has_ttl = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if has_ttl {
            result["ttlMs"] = json!(TOOLS_TTL_MS);
        }
        from_json(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let request_id = context
            .meta
            .get("car/request_id")
            .or_else(|| request.meta.as_ref().and_then(|m| m.get("car/request_id")))
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
        let client = self.client_of(&request.name, &context, request.meta.as_ref());
        // A tool that starts long work answers a client that takes tasks with one to follow.
        let jobs = self
            .app
            .runtime()
            .registry()
            .jobs(&request.name)
            .filter(|_| {
                context
                    .client_capabilities()
                    .is_some_and(|c| c.supports_tasks())
            })
            .cloned();
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let options = CallOptions {
            request_id,
            cancel: context.ct.clone(),
            client,
        };
        let call_context = self.call_context(&context);
        match self
            .app
            .runtime()
            .call(&request.name, args, &call_context, options)
            .await
        {
            Ok(outcome) => {
                let job = match (&jobs, &outcome.result) {
                    (Some(jobs), Ok(value)) => jobs
                        .started(value)
                        .and_then(|id| jobs.state(&id).map(|state| (id, state))),
                    _ => None,
                };
                if let Some((id, state)) = job {
                    let task = task_of(&id, state).task;
                    let mut meta = Map::new();
                    meta.insert("car/execution_id".into(), json!(outcome.execution_id));
                    return Ok(CallToolResponse::Task(
                        CreateTaskResult::new(task).with_meta(rmcp::model::MetaObject(meta)),
                    ));
                }
                let result: CallToolResult = from_json(if outcome.passthrough {
                    remote_result(outcome)
                } else {
                    tool_result(outcome)
                })?;
                Ok(CallToolResponse::Complete(result))
            }
            Err(DispatchError::UnknownTool(name)) => {
                let message = if crate::agent::runs::ASSISTANT_TOOLS.contains(&name.as_str()) {
                    format!(
                        "unknown tool '{name}' here; run car-server for the assistant tools \
                         (`car daemon start`, then connect to the MCP endpoint it prints)"
                    )
                } else {
                    format!("unknown tool '{name}'; call tools/list for the available tools")
                };
                Err(McpError::invalid_params(
                    message.clone(),
                    Some(json!({"error": message})),
                ))
            }
            Err(err @ DispatchError::Store(_)) => {
                Err(McpError::internal_error(err.to_string(), None))
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let (_, state) = self.job(&request.task_id)?;
        Ok(GetTaskResult::new(task_of(&request.task_id, state)))
    }

    /// CAR's tasks never wait for input, so there is nothing to update: responses for a known
    /// task are acknowledged and ignored, as the extension says of keys not outstanding.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.job(&request.task_id).map(|_| ())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (jobs, _) = self.job(&request.task_id)?;
        jobs.cancel(&request.task_id);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompts = if self.app.memory().is_some() {
            json!([{
                "name": "car_context",
                "title": "CAR context briefing",
                "description": "A briefing from memory for a task: identity, active constraints, current facts (most relevant last), recent context and environment, within a token budget.",
                "arguments": [
                    {"name": "query", "description": "What you are working on.", "required": true},
                    {"name": "mode", "description": "full (ranked, default) or fast (newest first, no ranking).", "required": false}
                ]
            }])
        } else {
            json!([])
        };
        let mut prompts = match prompts {
            Value::Array(prompts) => prompts,
            _ => Vec::new(),
        };
        if let Some(extension) = &self.extension {
            prompts.extend(extension.prompts());
        }
        from_json(json!({"prompts": prompts}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        if let Some(answer) = self
            .extension
            .as_ref()
            .and_then(|e| e.get_prompt(&request.name, &args))
        {
            let value = answer.map_err(|m| McpError::invalid_params(m, None))?;
            return Ok(GetPromptResponse::Complete(from_json(value)?));
        }
        if request.name != CONTEXT_PROMPT {
            return Err(McpError::invalid_params(
                format!(
                    "unknown prompt '{}'; the only prompt is {CONTEXT_PROMPT}",
                    request.name
                ),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        if args
            .get("query")
            .and_then(Value::as_str)
            .is_none_or(|q| q.trim().is_empty())
        {
            return Err(McpError::invalid_params(
                "car_context needs the argument 'query'",
                None,
            ));
        }
        if let Some(mode) = args.get("mode").and_then(Value::as_str) {
            if mode != "full" && mode != "fast" {
                return Err(McpError::invalid_params(
                    format!("mode must be 'full' or 'fast', not '{mode}'"),
                    None,
                ));
            }
        }
        let briefing: Briefing = self.operate(CONTEXT_PROMPT, args, &context).await?;
        let result: GetPromptResult = from_json(json!({
            "description": briefing.description,
            "messages": [{"role": "user", "content": {"type": "text", "text": briefing.text}}]
        }))?;
        Ok(GetPromptResponse::Complete(result))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let request = serde_json::to_value(&request).unwrap_or_default();
        let is_mode = request["ref"]["type"] == "ref/prompt"
            && request["ref"]["name"] == "car_context"
            && request["argument"]["name"] == "mode";
        let prefix = request["argument"]["value"].as_str().unwrap_or_default();
        if let Some(values) = self.extension.as_ref().and_then(|e| {
            e.complete(
                &request["ref"],
                request["argument"]["name"].as_str().unwrap_or_default(),
                prefix,
            )
        }) {
            return from_json(json!({"completion": {
                "values": values, "total": values.len(), "hasMore": false
            }}));
        }
        let values: Vec<&str> = if is_mode {
            ["full", "fast"]
                .into_iter()
                .filter(|m| m.starts_with(prefix))
                .collect()
        } else {
            Vec::new()
        };
        from_json(
            json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
        )
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<Value> = self
            .extension
            .as_ref()
            .map(|e| e.resources())
            .unwrap_or_default();
        if self.app.memory().is_none() {
            return from_json(json!({ "resources": resources }));
        }
        let after = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor.parse::<i64>().map_err(|_| {
                McpError::invalid_params(format!("invalid cursor '{cursor}'"), None)
            })?,
        };
        let page: EntryPage = self
            .operate(
                FACT_RESOURCES,
                json!({"after": after, "limit": RESOURCES_PER_PAGE + 1}),
                &context,
            )
            .await?;
        let page = page.entries;
        let more = page.len() > RESOURCES_PER_PAGE;
        let shown = &page[..page.len().min(RESOURCES_PER_PAGE)];
        resources.extend(shown.iter().map(|n| {
            json!({"uri": format!("{FACT_URI}{}", n.id),
                       "name": n.id, "title": n.subject, "mimeType": "text/plain"})
        }));
        let mut result = json!({"resources": resources});
        if more {
            if let Some(last) = shown.last() {
                result["nextCursor"] = json!(last.seq.to_string());
            }
        }
        from_json(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates = vec![json!({
            "uriTemplate": format!("{FACT_URI}{{id}}"),
            "name": "memory-fact",
            "title": "A remembered entry",
            "description": "One memory entry by id (as returned by memory_query).",
            "mimeType": "text/plain"
        })];
        if self.app.skills().is_some() {
            templates.push(json!({
                "uriTemplate": format!("{SKILL_URI}{{name}}"),
                "name": "skill",
                "title": "A saved skill",
                "description": "One active skill by name (as returned by skill_find or skill_list), with its code and record.",
                "mimeType": "application/json"
            }));
        }
        if let Some(extension) = &self.extension {
            templates.extend(extension.resource_templates());
        }
        from_json(json!({ "resourceTemplates": templates }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        if let Some(answer) = self.extension.as_ref().and_then(|e| e.read_resource(&uri)) {
            let value = answer.map_err(|m| McpError::resource_not_found(m, None))?;
            return Ok(ReadResourceResponse::Complete(from_json(value)?));
        }
        if let Some(name) = uri.strip_prefix(SKILL_URI) {
            return self.read_skill(&uri, name, &context).await;
        }
        let Some(id) = uri.strip_prefix(FACT_URI).filter(|id| !id.is_empty()) else {
            return Err(McpError::resource_not_found(
                format!("no resource at {uri}; memory entries are at {FACT_URI}{{id}}, skills at {SKILL_URI}{{name}}"),
                None,
            ));
        };
        let entry: EntryText = self
            .operate(FACT_RESOURCE, json!({"id": id}), &context)
            .await?;
        let result: ReadResourceResult = from_json(json!({"contents": [{
            "uri": uri, "mimeType": "text/plain", "text": entry.text
        }]}))?;
        Ok(ReadResourceResponse::Complete(result))
    }
}
