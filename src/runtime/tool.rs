//! A registered tool: its declaration plus the code that runs it, and the errors a call can end in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::ToolError;
use super::spec::ToolSpec;

/// The future a tool's handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

type Handler = Arc<dyn Fn(ToolCall) -> ToolFuture + Send + Sync>;

/// One call as a handler sees it: validated arguments, a cancellation token, the context, and
/// the tools beside it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub args: Value,
    pub cancel: CancellationToken,
    pub context: Context,
    /// The client of the call: progress, logs, sampling and elicitation requests.
    pub client: super::client::Client,
    pub tools: Arc<dyn Tools>,
}

/// A tool: declaration and handler.
#[derive(Clone)]
pub struct Tool {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Handler,
    /// The work its calls start and leave running (see [`Tool::with_jobs`]).
    pub(crate) jobs: Option<Arc<dyn super::Jobs>>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("spec", &self.spec).finish()
    }
}

/// A typed tool's arguments, deserialized once (a failure is `InvalidArguments`, -32602,
/// naming the field).
fn arguments<A: serde::de::DeserializeOwned>(args: &Value) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ToolError::InvalidArguments(if path == "." {
            inner.to_string()
        } else {
            format!("`{path}`: {inner}")
        })
    })
}

/// A typed tool's result as the JSON the faces carry.
fn answer<R: serde::Serialize>(result: Result<R, ToolError>) -> Result<Value, ToolError> {
    serde_json::to_value(result?).map_err(|e| ToolError::Failed(e.to_string()))
}

impl Tool {
    /// A tool whose handler is async.
    pub fn new<F, Fut>(spec: ToolSpec, handler: F) -> Tool
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Tool {
            spec,
            handler: Arc::new(move |call| Box::pin(handler(call))),
            jobs: None,
        }
    }

    /// A blocking tool whose arguments and result are Rust types: `spec`'s input and output
    /// schemas are generated from `A` and `R` (see `runtime::schema::of`), so the declaration
    /// and the extraction cannot drift; the dispatcher validates the arguments against that
    /// schema, and they are deserialized once, here (a failure is `InvalidArguments`, -32602).
    pub fn typed<A, R, F>(spec: ToolSpec, handler: F) -> Tool
    where
        A: serde::de::DeserializeOwned + schemars::JsonSchema,
        R: serde::Serialize + schemars::JsonSchema,
        F: Fn(A, &ToolCall) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        let spec = spec.typed::<A, R>();
        Tool::blocking(spec, move |call| {
            answer(handler(arguments(&call.args)?, &call))
        })
    }

    /// A typed tool that is usually quick (an in-memory read): `quick` runs on the calling
    /// thread, sparing the hand-off to the blocking pool and back, and returns `None` when the
    /// work would block or take long (a cache to fill from the database, a lock held by a
    /// writer); `handler` then runs on the blocking pool, as for [`Tool::typed`].
    pub fn typed_quick<A, R, Q, F>(spec: ToolSpec, quick: Q, handler: F) -> Tool
    where
        A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
        R: serde::Serialize + schemars::JsonSchema,
        Q: Fn(&A, &ToolCall) -> Option<Result<R, ToolError>> + Send + Sync + 'static,
        F: Fn(A, &ToolCall) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        let spec = spec.typed::<A, R>();
        let (quick, handler) = (Arc::new(quick), Arc::new(handler));
        Tool {
            spec,
            handler: Arc::new(move |call| {
                let (quick, handler) = (quick.clone(), handler.clone());
                Box::pin(async move {
                    let args: A = arguments(&call.args)?;
                    // A panic is an error for this call, as on the blocking pool.
                    let quickly = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        quick(&args, &call).map(answer)
                    }))
                    .unwrap_or_else(|_| Some(Err(ToolError::Failed("the tool panicked".into()))));
                    if let Some(done) = quickly {
                        return done;
                    }
                    tokio::task::spawn_blocking(move || answer(handler(args, &call)))
                        .await
                        .unwrap_or_else(|join| {
                            Err(ToolError::Failed(format!("the tool panicked: {join}")))
                        })
                })
            }),
            jobs: None,
        }
    }

    /// A tool whose handler blocks (database work); it runs on tokio's blocking pool and should
    /// check `call.cancel` between steps of long work.
    pub fn blocking<F>(spec: ToolSpec, handler: F) -> Tool
    where
        F: Fn(ToolCall) -> Result<Value, ToolError> + Send + Sync + 'static,
    {
        let handler = Arc::new(handler);
        Tool {
            spec,
            handler: Arc::new(move |call| {
                let handler = handler.clone();
                Box::pin(async move {
                    tokio::task::spawn_blocking(move || handler(call))
                        .await
                        .unwrap_or_else(|join| {
                            Err(ToolError::Failed(format!("the tool panicked: {join}")))
                        })
                })
            }),
            jobs: None,
        }
    }

    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Declares that a successful call starts work that goes on after it answers, followed in
    /// `jobs` (a face may then hand its client a handle to that work, such as an MCP task).
    pub fn with_jobs(mut self, jobs: std::sync::Arc<dyn super::Jobs>) -> Tool {
        self.jobs = Some(jobs);
        self
    }
}

/// The tools beside a running tool, as a handler may see them (the plan tools check a
/// proposal's calls against them): the registry it is served from, then the tools that come and
/// go.
pub trait Tools: Send + Sync {
    /// Every way `args` break the input schema of the tool called `name` (none: they fit), or
    /// `None` when there is no such tool.
    fn problems(&self, name: &str, args: &Value) -> Option<Vec<String>>;
}

impl std::fmt::Debug for dyn Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tools")
    }
}
