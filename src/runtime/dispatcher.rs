//! The dispatcher: every call of every face goes through the same steps — argument validation
//! against the input schema, the policy gate, the confirmation check, execution under a time
//! bound and a cancellation token, and a record in the execution log.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::ToolError;
use super::executions::{self, Claim, ExecStatus, Finished};
use super::registry::Registry;
use super::registry::{Served, ToolSource};
use super::spec::{Confirmation, Gating, Idempotence, ToolSpec};
use super::tool::ToolCall;
use crate::store::{self, Store};

/// The longest string accepted in any argument, so one call cannot flood the store.
pub const MAX_STRING_BYTES: usize = 1024 * 1024;

/// The policy decision for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyVerdict {
    Allow,
    Deny { reason: String },
}

/// The gate every call passes before it runs. Rule files plug in here.
pub trait PolicyGate: Send + Sync {
    fn check(&self, spec: &ToolSpec, args: &Value, context: &Context) -> PolicyVerdict;
}

/// The gate used until rules are configured: everything passes.
#[derive(Debug, Default)]
pub struct AllowAll;

impl PolicyGate for AllowAll {
    fn check(&self, _spec: &ToolSpec, _args: &Value, _context: &Context) -> PolicyVerdict {
        PolicyVerdict::Allow
    }
}

/// Per-call options a face passes in.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// An idempotency key: on a non-idempotent tool, a repeated id returns the recorded result.
    pub request_id: Option<String>,
    /// Trips when the client cancels the call.
    pub cancel: CancellationToken,
    /// The way back to the client (progress, logs, sampling, elicitation), if the face has one.
    pub client: super::client::Client,
}

/// The outcome of a dispatched call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub execution_id: String,
    pub status: ExecStatus,
    pub result: Result<Value, ToolError>,
    /// True when the result was replayed from an earlier call with the same request id.
    pub replayed: bool,
    /// The result is an MCP `CallToolResult` to serve as is ([`ToolSpec::passthrough`]).
    pub passthrough: bool,
    /// How a face writes the result as text ([`ToolSpec::text`]).
    pub text: super::spec::ResultText,
}

/// A call that could not be routed at all (a protocol error, not a tool error).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("unknown tool '{0}'; list the available tools with tools/list or `car tools list`")]
    UnknownTool(String),
    #[error("cannot record the execution: {0}")]
    Store(#[from] store::StoreError),
}

/// Routes calls to registered tools.
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    source: Option<Arc<dyn ToolSource>>,
    store: Arc<Store>,
    policy: Arc<dyn PolicyGate>,
    journal: Arc<executions::Journal>,
}

impl Dispatcher {
    pub fn new(registry: Registry, store: Arc<Store>, policy: Arc<dyn PolicyGate>) -> Dispatcher {
        Dispatcher {
            registry: Arc::new(registry),
            source: None,
            journal: Arc::new(executions::Journal::new(store.clone())),
            store,
            policy,
        }
    }

    /// Also routes calls to the tools of `source`.
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Dispatcher {
        self.source = Some(source);
        self
    }

    /// The built-in tools (fixed for the process's life).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The tools that come and go, if any.
    pub fn source(&self) -> Option<&Arc<dyn ToolSource>> {
        self.source.as_ref()
    }

    fn entry(&self, name: &str) -> Option<Arc<super::registry::Entry>> {
        self.registry
            .entry(name)
            .or_else(|| self.source.as_ref()?.current().entry(name))
    }

    /// The policy gate's verdict on a call that runs elsewhere (a WebSocket client's own tool
    /// in a proposal): the same rules as every registry call.
    pub fn check_policy(&self, spec: &ToolSpec, args: &Value, context: &Context) -> PolicyVerdict {
        self.policy.check(spec, args, context)
    }

    /// Runs one call through validation, policy, confirmation and execution, and records it.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        context: &Context,
        options: CallOptions,
    ) -> Result<CallOutcome, DispatchError> {
        let entry = self
            .entry(name)
            .ok_or_else(|| DispatchError::UnknownTool(name.to_string()))?;
        let spec = &entry.tool.spec;
        let execution_id = uuid::Uuid::new_v4().simple().to_string();
        let started_at = store::now();
        let started = Instant::now();
        let face = context.face().as_str();

        // The idempotency claim comes first so a replay costs nothing else.
        let keyed = match (&options.request_id, spec.idempotence) {
            (Some(request_id), Idempotence::NotIdempotent) => {
                let call = executions::KeyedCall {
                    id: execution_id.clone(),
                    tool: name.to_string(),
                    request_id: request_id.clone(),
                    key: executions::idem_key(name, context.author_name(), request_id),
                    face: face.to_string(),
                    abandoned_before: store::now_minus(
                        spec.timeout + std::time::Duration::from_secs(60),
                    ),
                };
                match self.claim(call).await? {
                    Claim::Fresh => true,
                    Claim::Replay(recorded) => {
                        let result = match (recorded.status, recorded.result) {
                            (ExecStatus::Running, _) => {
                                Err(ToolError::InProgress(request_id.clone()))
                            }
                            (ExecStatus::Ok, Some(value)) => Ok(value),
                            (_, _) => Err(ToolError::Failed(
                                recorded
                                    .error
                                    .unwrap_or_else(|| "the earlier call failed".into()),
                            )),
                        };
                        return Ok(CallOutcome {
                            execution_id: recorded.execution_id,
                            status: recorded.status,
                            result,
                            replayed: true,
                            passthrough: spec.passthrough,
                            text: spec.text,
                        });
                    }
                }
            }
            (Some(_), Idempotence::Idempotent) | (None, _) => false,
        };

        let result = self.run(&entry, args, context, &options).await;
        let status = match &result {
            Ok(_) => ExecStatus::Ok,
            Err(ToolError::Cancelled) => ExecStatus::Cancelled,
            Err(ToolError::Timeout(_)) => ExecStatus::Timeout,
            Err(ToolError::Denied(_)) => ExecStatus::Denied,
            Err(_) => ExecStatus::Error,
        };
        let error_text = result.as_ref().err().map(ToString::to_string);
        let done = Finished {
            id: execution_id.clone(),
            tool: name.to_string(),
            request_id: options.request_id.clone(),
            claimed: keyed,
            face: face.to_string(),
            started_at,
            status,
            duration_ms: started.elapsed().as_millis() as u64,
            error: error_text,
            result: if keyed {
                result.as_ref().ok().cloned()
            } else {
                None
            },
            // A keyed call that did not complete, or that nothing ran for (denied, or its
            // arguments refused), gives its key back: the client can retry, and a retry after
            // the grant or the arguments are fixed runs instead of replaying the refusal.
            release: keyed
                && (matches!(
                    status,
                    ExecStatus::Cancelled | ExecStatus::Timeout | ExecStatus::Denied
                ) || matches!(
                    &result,
                    Err(ToolError::InvalidArguments(_))
                        | Err(ToolError::Reported {
                            code: "usage" | "invalid_arguments" | "denied",
                            ..
                        })
                )),
            session: context.session_id().map(str::to_string),
            host: context.host_name().map(str::to_string),
            author: context.author_name().map(str::to_string),
            // What a memory write created (an entry's id), so the entry's page can say who
            // wrote it. Only CAR's own memory writes: a remote tool's result could name any id.
            subject: result
                .as_ref()
                .ok()
                .filter(|_| {
                    entry.tool.spec.effect == super::spec::Effect::Write
                        && name.starts_with("memory_")
                        && !entry.tool.spec.passthrough
                })
                .and_then(|r| r.get("id"))
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        if let Err(e) = self.record(done).await {
            // A call that failed already says why, and the log most likely failed for the same
            // reason (the database went away): its error is the answer, the log's is logged. A
            // call that worked is not answered as if nothing were wrong.
            if status == ExecStatus::Ok {
                return Err(e);
            }
            tracing::warn!(tool = name, error = %e, "could not record a failed call");
        }
        Ok(CallOutcome {
            execution_id,
            status,
            result,
            replayed: false,
            passthrough: spec.passthrough,
            text: spec.text,
        })
    }

    async fn run(
        &self,
        entry: &super::registry::Entry,
        args: Value,
        context: &Context,
        options: &CallOptions,
    ) -> Result<Value, ToolError> {
        let spec = &entry.tool.spec;
        // A missing arguments object means "no arguments".
        let args = if args.is_null() {
            Value::Object(Default::default())
        } else {
            args
        };
        check_string_sizes(&args, "")?;
        let problems = entry.validator.problems(&args);
        if !problems.is_empty() {
            return Err(ToolError::InvalidArguments(problems.join("; ")));
        }
        if context.is_read_only() && !spec.effect_of(&args).read_only() {
            return Err(ToolError::Denied(format!(
                "{} changes the project, and this connection may only read it (a reader of the \
                 team's project; an admin can grant more with `car team grant`)",
                spec.name
            )));
        }
        if spec.gating == Gating::Gated {
            if let PolicyVerdict::Deny { reason } = self.policy.check(spec, &args, context) {
                return Err(ToolError::Denied(reason));
            }
        }
        match spec.confirmation {
            Confirmation::Required if !context.has_grant(&format!("confirm:{}", spec.name)) => {
                return Err(ToolError::ConfirmationRequired(spec.name.clone()));
            }
            Confirmation::Required | Confirmation::NotRequired => {}
        }
        let call = ToolCall {
            args,
            cancel: options.cancel.child_token(),
            context: context.clone(),
            client: options.client.clone(),
            tools: Arc::new(Served {
                registry: self.registry.clone(),
                source: self.source.clone(),
            }),
        };
        let cancel = call.cancel.clone();
        let work = (entry.tool.handler)(call);
        tokio::pin!(work);
        let stopped = tokio::select! {
            biased;
            _ = options.cancel.cancelled() => Err(ToolError::Cancelled),
            outcome = tokio::time::timeout(spec.timeout, &mut work) => match outcome {
                Ok(result) => return result,
                Err(_) => Err(ToolError::Timeout(spec.timeout.as_secs())),
            },
        };
        // The tool's token trips, and a tool that honours it gets a moment to stop on its own
        // (kill a child, tell a remote server, write what it must); one that does not is dropped.
        cancel.cancel();
        let _ = tokio::time::timeout(CANCEL_GRACE, work).await;
        stopped
    }

    async fn claim(&self, call: executions::KeyedCall) -> Result<Claim, DispatchError> {
        let store = self.store.clone();
        blocking(move || executions::claim(&store, &call)).await
    }

    async fn record(&self, done: Finished) -> Result<(), DispatchError> {
        self.journal
            .record(done)
            .await
            .map_err(DispatchError::Store)
    }
}

/// How long a cancelled or timed-out tool may take to stop after its token trips.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> store::Result<T> + Send + 'static,
) -> Result<T, DispatchError> {
    // A short write (one row of the execution log): on a multi-threaded runtime it runs on this
    // worker, sparing the hand-off to the blocking pool and back on every call.
    if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(work).map_err(DispatchError::Store);
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|join| DispatchError::Store(store::StoreError::Task(join.to_string())))?
        .map_err(DispatchError::Store)
}

/// Rejects any string longer than [`MAX_STRING_BYTES`], naming where it is.
fn check_string_sizes(value: &Value, path: &str) -> Result<(), ToolError> {
    match value {
        Value::String(text) if text.len() > MAX_STRING_BYTES => {
            Err(ToolError::InvalidArguments(format!(
                "{} is {} bytes; the limit is {} bytes (1 MiB) per string",
                if path.is_empty() { "the value" } else { path },
                text.len(),
                MAX_STRING_BYTES
            )))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check_string_sizes(item, &format!("{path}/{i}"))),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(key, item)| check_string_sizes(item, &format!("{path}/{key}"))),
        Value::String(_) | Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}
