//! The runtime: the registry of tools, the dispatcher in front of them and the store that
//! records every execution. Faces (CLI, MCP) only translate their protocol to [`Runtime::call`].

mod context;
mod dispatcher;
pub(crate) mod executions;
mod registry;
mod spec;
mod tool;

use std::sync::{Arc, OnceLock};

pub use context::{Context, Face};
pub use dispatcher::{
    AllowAll, CallOptions, CallOutcome, DispatchError, Dispatcher, PolicyGate, PolicyVerdict,
    ToolSource, MAX_STRING_BYTES,
};
pub use executions::ExecStatus;
pub(crate) use registry::LazyValidator;
pub use registry::{Registry, RegistryError};
pub use spec::{Confirmation, Effect, Gating, Idempotence, Parallelism, ToolSpec};
pub(crate) use tool::{arg_string, arg_strings};
pub use tool::{Tool, ToolCall, ToolError};

use crate::memory::Memory;
use crate::store::{Store, StoreError};

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A registry, a dispatcher and (optionally) the memory engine behind the memory tools.
#[derive(Clone)]
pub struct Runtime {
    dispatcher: Dispatcher,
    store: Arc<Store>,
    memory: Option<Arc<Memory>>,
    skills: Option<Arc<crate::skills::Skills>>,
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

    /// The memory engine, when the runtime serves the memory tools.
    pub fn memory(&self) -> Option<&Arc<Memory>> {
        self.memory.as_ref()
    }

    /// The skill store, when the runtime serves the skill tools.
    pub fn skills(&self) -> Option<&Arc<crate::skills::Skills>> {
        self.skills.as_ref()
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

/// Assembles a [`Runtime`]. Every runtime serves the four plan tools (`verify`, `simulate`,
/// `equivalent`, `optimize`); with [`RuntimeBuilder::memory`] also the eight memory tools; with
/// [`RuntimeBuilder::policy_engine`] also `policy_check`; with [`RuntimeBuilder::skills`] also
/// the four skill tools.
#[derive(Default)]
pub struct RuntimeBuilder {
    tools: Vec<Tool>,
    store: Option<Arc<Store>>,
    policy: Option<Arc<dyn PolicyGate>>,
    policy_engine: Option<Arc<crate::policy::PolicyEngine>>,
    memory: Option<Arc<Memory>>,
    skills: Option<Arc<crate::skills::Skills>>,
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

    /// The store executions are recorded in (default: a private in-memory database).
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The policy gate every call passes (default: [`AllowAll`]). A custom gate serves no
    /// `policy_check`; see [`RuntimeBuilder::policy_engine`].
    pub fn policy(mut self, policy: Arc<dyn PolicyGate>) -> Self {
        self.policy = Some(policy);
        self.policy_engine = None;
        self
    }

    /// Uses this policy engine as the gate and serves `policy_check`, which evaluates it.
    pub fn policy_engine(mut self, engine: Arc<crate::policy::PolicyEngine>) -> Self {
        self.policy = Some(engine.clone());
        self.policy_engine = Some(engine);
        self
    }

    /// Serves the eight memory tools from this engine (and uses its store).
    pub fn memory(mut self, memory: Arc<Memory>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Serves the four skill tools from this store.
    pub fn skills(mut self, skills: Arc<crate::skills::Skills>) -> Self {
        self.skills = Some(skills);
        self
    }

    pub fn build(self) -> Result<Runtime, BuildError> {
        let store = match (self.store, &self.memory) {
            (Some(store), _) => store,
            (None, Some(memory)) => memory.store().clone(),
            (None, None) => Arc::new(Store::open_in_memory()?),
        };
        let mut registry = Registry::default();
        if let Some(memory) = &self.memory {
            for tool in crate::memory::tools(memory.clone()) {
                registry.register(tool)?;
            }
        }
        if let Some(skills) = &self.skills {
            for tool in crate::skills::tools(skills.clone()) {
                registry.register(tool)?;
            }
        }
        // The plan tools check proposals against the whole registry, including tools
        // registered after them: they read a catalog of names and compiled input schemas
        // (no handlers, so no reference cycle) that is filled once the registry is complete.
        let catalog = Arc::new(OnceLock::new());
        for tool in crate::plan::tools(catalog.clone()) {
            registry.register(tool)?;
        }
        if let Some(engine) = &self.policy_engine {
            registry.register(crate::policy::tool(engine.clone()))?;
        }
        for tool in self.tools {
            registry.register(tool)?;
        }
        // A fresh OnceLock: this set always succeeds.
        let _ = catalog.set(
            crate::plan::ToolCatalog::from_registry(&registry).with_source(self.source.clone()),
        );
        let policy = self.policy.unwrap_or_else(|| Arc::new(AllowAll));
        let mut dispatcher = Dispatcher::new(registry, store.clone(), policy);
        if let Some(source) = self.source {
            dispatcher = dispatcher.with_source(source);
        }
        Ok(Runtime {
            dispatcher,
            store,
            memory: self.memory,
            skills: self.skills,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_tool_schema_compiles() {
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::policy::PolicyEngine::load(&dir.path().join("home"), dir.path());
        let runtime = Runtime::builder()
            .memory(Arc::new(Memory::in_memory().unwrap()))
            .policy_engine(Arc::new(engine))
            .skills(Arc::new(crate::skills::Skills::new(Arc::new(
                Store::open_in_memory().unwrap(),
            ))))
            .build()
            .unwrap();
        let names: Vec<&str> = runtime.registry().validators().map(|(n, _)| n).collect();
        // 17 tools and 4 unlisted operations (the prompt and the resources).
        assert_eq!(names.len(), 21, "{names:?}");
        assert_eq!(runtime.specs().len(), 17);
        for (name, validator) in runtime.registry().validators() {
            assert!(
                validator.compiles(),
                "{name}'s input schema does not compile"
            );
        }
    }
}
