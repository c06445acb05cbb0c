//! The runtime: the registry of tools, the dispatcher in front of them and the store that
//! records every execution. Faces (CLI, MCP) only translate their protocol to [`Runtime::call`].

mod client;
mod context;
mod dispatcher;
mod error;
pub(crate) mod executions;
mod jobs;
mod registry;
pub(crate) mod schema;
mod spec;
mod tool;

use std::sync::Arc;

pub use client::{ChannelFuture, Client, ClientChannel, ClientRequest, LogLevel};
pub use context::{Caller, Context, Face};
pub use dispatcher::{
    AllowAll, CallOptions, CallOutcome, DispatchError, Dispatcher, PolicyGate, PolicyVerdict,
    MAX_STRING_BYTES,
};
pub use error::ToolError;
pub use executions::ExecStatus;
pub use jobs::{JobState, JobStatus, Jobs};
pub(crate) use registry::LazyValidator;
pub use registry::ToolSource;
pub use registry::{Registry, RegistryError};
pub use spec::{Confirmation, Effect, Gating, Idempotence, Parallelism, ResultText, ToolSpec};
pub use tool::{Tool, ToolCall, Tools};

use crate::store::{Store, StoreError};

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A registry, the dispatcher in front of it and the store executions are recorded in. It
/// knows no capability: the composition root (`crate::app`) registers their tools.
#[derive(Clone)]
pub struct Runtime {
    dispatcher: Dispatcher,
    store: Arc<Store>,
}

impl Runtime {
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    pub fn registry(&self) -> &Registry {
        self.dispatcher.registry()
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Every tool a client may call now: the built-ins, then the enabled connector tools
    /// (not the unlisted operations, see [`ToolSpec::listed`]).
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .registry()
            .specs()
            .filter(|s| s.listed)
            .cloned()
            .collect();
        if let Some(source) = self.dispatcher.source() {
            specs.extend(source.current().specs().cloned());
        }
        specs
    }

    /// The declaration of one tool, built-in or from a connector.
    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        self.registry().get(name).cloned().or_else(|| {
            self.dispatcher
                .source()
                .and_then(|source| source.current().get(name).cloned())
        })
    }

    /// Dispatches one call of a tool (see [`Dispatcher::call`]); an unlisted operation is not a
    /// tool and is refused as unknown.
    pub async fn call(
        &self,
        name: &str,
        args: serde_json::Value,
        context: &Context,
        options: CallOptions,
    ) -> Result<CallOutcome, DispatchError> {
        if self.registry().get(name).is_some_and(|spec| !spec.listed) {
            return Err(DispatchError::UnknownTool(name.to_string()));
        }
        self.dispatcher.call(name, args, context, options).await
    }

    /// Dispatches one call of an unlisted operation (the MCP prompt, a resource) or a tool:
    /// the same schema check, policy gate, time bound and execution log.
    pub async fn operate(
        &self,
        name: &str,
        args: serde_json::Value,
        context: &Context,
        options: CallOptions,
    ) -> Result<CallOutcome, DispatchError> {
        self.dispatcher.call(name, args, context, options).await
    }
}

/// Assembles a [`Runtime`] from tools, a store, a gate and a tool source.
#[derive(Default)]
pub struct RuntimeBuilder {
    tools: Vec<Tool>,
    store: Option<Arc<Store>>,
    policy: Option<Arc<dyn PolicyGate>>,
    source: Option<Arc<dyn ToolSource>>,
}

impl RuntimeBuilder {
    /// Also serves the tools of `source` (a connector's enabled tools), which may change while
    /// the runtime runs.
    pub fn source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Registers a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Registers tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The store executions are recorded in (default: a private in-memory database).
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The policy gate every call passes (default: [`AllowAll`]).
    pub fn policy(mut self, policy: Arc<dyn PolicyGate>) -> Self {
        self.policy = Some(policy);
        self
    }

    pub fn build(self) -> Result<Runtime, BuildError> {
        let store = match self.store {
            Some(store) => store,
            None => Arc::new(Store::open_in_memory()?),
        };
        let mut registry = Registry::default();
        for tool in self.tools {
            registry.register(tool)?;
        }
        let policy = self.policy.unwrap_or_else(|| Arc::new(AllowAll));
        let mut dispatcher = Dispatcher::new(registry, store.clone(), policy);
        if let Some(source) = self.source {
            dispatcher = dispatcher.with_source(source);
        }
        Ok(Runtime { dispatcher, store })
    }
}
