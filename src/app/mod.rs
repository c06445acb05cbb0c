//! The composition root: the one module that knows every capability. It opens the store once,
//! builds each capability (memory, skills, plans, policy, connectors), collects each one's
//! tools into the registry of a generic [`Runtime`], and hands a face an [`App`]: the runtime,
//! plus the capabilities a face serves in other ways (the MCP server offers the `car_context`
//! prompt when there is memory, and the skill resource template when there is a skill store).
//! Faces (the CLI, `car-mcp`, the hook, the daemon to come) open CAR through here; `runtime`
//! names no capability, and no capability names this module.

pub mod doctor;
pub mod launch;
pub mod location;

use std::path::Path;
use std::sync::Arc;

use crate::home::Home;
use crate::memory::Memory;
use crate::policy::PolicyEngine;
use crate::project::tools::ProjectTools;
use crate::runtime::{BuildError, PolicyGate, Runtime, RuntimeBuilder, Tool, ToolSource};
use crate::skills::Skills;
use crate::store::{Store, StoreError};

/// CAR, assembled: the runtime every call goes through and the capabilities behind it.
#[derive(Clone)]
pub struct App {
    runtime: Runtime,
    memory: Option<Arc<Memory>>,
    skills: Option<Arc<Skills>>,
}

/// Why CAR could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

impl App {
    pub fn builder() -> AppBuilder {
        AppBuilder::default()
    }

    /// CAR as the CLI and `car-mcp` open it for a project: the database under `home` (opened
    /// once), memory scoped to the project (importing `memory/assistant.json` once), skills,
    /// the project's tools, the policy rules of `home` and the project as the gate, and the
    /// enabled connector tools.
    pub fn open(home: &Home, project_root: &Path) -> Result<App, AppError> {
        App::open_with(home, project_root, Vec::new())
    }

    /// [`App::open`] with a face's own tools too (the daemon's `assistant_*`).
    pub fn open_with(
        home: &Home,
        project_root: &Path,
        face_tools: Vec<Tool>,
    ) -> Result<App, AppError> {
        App::open_at(home, project_root, project_root, face_tools)
    }

    /// As [`App::open_with`], for work in `cwd` (the project root or a directory inside it):
    /// the policies of every `.car/policies` down to `cwd` apply.
    pub fn open_at(
        home: &Home,
        project_root: &Path,
        cwd: &Path,
        face_tools: Vec<Tool>,
    ) -> Result<App, AppError> {
        let store = Arc::new(Store::open(&home.db_path())?);
        let memory = Memory::open(
            store.clone(),
            Some(project_root),
            Some(&home.assistant_json()),
        )?;
        let policy = PolicyEngine::load(&home.policies_dir(), cwd, project_root);
        if let Some(failure) = &policy.rules().failure {
            tracing::warn!("policy rules did not load, every call will be denied: {failure}");
        }
        let memory = Arc::new(memory);
        let project_tools = ProjectTools {
            store: store.clone(),
            root: project_root.to_path_buf(),
            archive: home.archive_db_path(),
            memory: Some(memory.clone()),
            doctor: {
                let (home, root) = (home.clone(), project_root.to_path_buf());
                Some(Arc::new(move |mode| doctor::run(&home, &root, mode)))
            },
        };
        let mut builder = App::builder()
            .store(store.clone())
            .memory(memory)
            .skills(Arc::new(Skills::new(store)))
            .policy_engine(Arc::new(policy))
            .source(Arc::new(crate::connectors::ConnectorTools::new(
                home.root().to_path_buf(),
            )));
        for tool in project_tools.tools().into_iter().chain(face_tools) {
            builder = builder.tool(tool);
        }
        builder.build()
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The memory engine, when CAR serves memory.
    pub fn memory(&self) -> Option<&Arc<Memory>> {
        self.memory.as_ref()
    }

    /// The skill store, when CAR serves skills.
    pub fn skills(&self) -> Option<&Arc<Skills>> {
        self.skills.as_ref()
    }
}

/// Assembles an [`App`]. Every app serves the four plan tools (`verify`, `simulate`,
/// `equivalent`, `optimize`); with [`AppBuilder::memory`] also the memory tools (and the prompt
/// and fact resources); with [`AppBuilder::policy_engine`] also `policy_check`; with
/// [`AppBuilder::skills`] also the skill tools (and the skill resource).
#[derive(Default)]
pub struct AppBuilder {
    runtime: RuntimeBuilder,
    store: Option<Arc<Store>>,
    memory: Option<Arc<Memory>>,
    skills: Option<Arc<Skills>>,
    policy_engine: Option<Arc<PolicyEngine>>,
    source: Option<Arc<dyn ToolSource>>,
    tools: Vec<Tool>,
}

impl AppBuilder {
    /// Serves the memory tools from this engine (and records executions in its store unless
    /// [`AppBuilder::store`] names another).
    pub fn memory(mut self, memory: Arc<Memory>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Serves the skill tools from this store.
    pub fn skills(mut self, skills: Arc<Skills>) -> Self {
        self.skills = Some(skills);
        self
    }

    /// Uses this policy engine as the gate and serves `policy_check`, which evaluates it.
    pub fn policy_engine(mut self, engine: Arc<PolicyEngine>) -> Self {
        self.policy_engine = Some(engine);
        self
    }

    /// A custom policy gate instead (serves no `policy_check`).
    pub fn policy(mut self, policy: Arc<dyn PolicyGate>) -> Self {
        self.policy_engine = None;
        self.runtime = self.runtime.policy(policy);
        self
    }

    /// Also serves the tools of `source` (a connector's enabled tools), which may change.
    pub fn source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// The store executions are recorded in.
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Registers a tool of the embedding program or face.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn build(self) -> Result<App, AppError> {
        let mut runtime = self.runtime;
        let store = match (self.store, &self.memory) {
            (Some(store), _) => Some(store),
            (None, Some(memory)) => Some(memory.store().clone()),
            (None, None) => None,
        };
        if let Some(store) = store {
            runtime = runtime.store(store);
        }
        if let Some(memory) = &self.memory {
            runtime = runtime.tools(crate::memory::tools(memory.clone()));
        }
        if let Some(skills) = &self.skills {
            runtime = runtime.tools(crate::skills::tools(skills.clone()));
        }
        runtime = runtime.tools(crate::plan::tools());
        if let Some(engine) = self.policy_engine {
            runtime = runtime
                .policy(engine.clone())
                .tool(crate::policy::tool(engine));
        }
        runtime = runtime.tools(self.tools);
        if let Some(source) = self.source {
            runtime = runtime.source(source);
        }
        let runtime = runtime.build()?;
        Ok(App {
            runtime,
            memory: self.memory,
            skills: self.skills,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Probe {
        panic: bool,
    }

    #[test]
    fn a_quick_tool_that_panics_fails_its_call_and_the_call_is_recorded() {
        use crate::runtime::{CallOptions, Context, Face, Tool, ToolError, ToolSpec};
        let tool = Tool::typed_quick(
            ToolSpec::new("probe", "Panics when asked to.", serde_json::Value::Null),
            |args: &Probe, _call: &crate::runtime::ToolCall| -> Option<Result<String, ToolError>> {
                assert!(!args.panic, "asked to panic");
                Some(Ok("quick".into()))
            },
            |_args: Probe, _call| Ok("slow".to_string()),
        );
        let app = App::builder().tool(tool).build().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let context = Context::new(Face::Mcp);
        let call = |panic: bool| {
            runtime.block_on(app.runtime().call(
                "probe",
                serde_json::json!({"panic": panic}),
                &context,
                CallOptions::default(),
            ))
        };
        let failed = call(true).unwrap();
        assert_eq!(
            failed.result,
            Err(ToolError::Failed("the tool panicked".into()))
        );
        let done = call(false).unwrap();
        assert_eq!(done.result, Ok(serde_json::json!("quick")));
        let log = crate::runtime::executions::recent(
            app.runtime().store(),
            &crate::runtime::executions::Filter {
                tool: Some("probe"),
                ..Default::default()
            },
            10,
        )
        .unwrap();
        let statuses: Vec<&str> = log.iter().map(|e| e.status.as_str()).collect();
        assert_eq!(statuses, ["ok", "error"]);
    }

    #[test]
    fn every_built_in_tool_schema_compiles() {
        let dir = tempfile::tempdir().unwrap();
        let engine = PolicyEngine::load(&dir.path().join("home"), dir.path(), dir.path());
        let app = App::builder()
            .memory(Arc::new(Memory::in_memory().unwrap()))
            .policy_engine(Arc::new(engine))
            .skills(Arc::new(Skills::new(Arc::new(
                Store::open_in_memory().unwrap(),
            ))))
            .build()
            .unwrap();
        let names: Vec<&str> = app
            .runtime()
            .registry()
            .validators()
            .map(|(n, _)| n)
            .collect();
        // 17 tools and 4 unlisted operations (the prompt and the resources).
        assert_eq!(names.len(), 21, "{names:?}");
        assert_eq!(app.runtime().specs().len(), 17);
        for (name, validator) in app.runtime().registry().validators() {
            assert!(
                validator.compiles(),
                "{name}'s input schema does not compile"
            );
        }
    }
}
