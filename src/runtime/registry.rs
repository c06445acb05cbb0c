//! The one registry of tools that every face serves, with each input schema compiled once, on
//! its tool's first call (compiling them all at start-up cost a few milliseconds per process).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::spec::ToolSpec;
use super::tool::{Tool, Tools};

/// An input schema, compiled when first needed.
pub(crate) struct LazyValidator {
    schema: Value,
    compiled: OnceLock<Result<jsonschema::Validator, String>>,
}

impl LazyValidator {
    pub(crate) fn new(schema: Value) -> LazyValidator {
        LazyValidator {
            schema,
            compiled: OnceLock::new(),
        }
    }

    fn compiled(&self) -> &Result<jsonschema::Validator, String> {
        self.compiled
            .get_or_init(|| jsonschema::validator_for(&self.schema).map_err(|e| e.to_string()))
    }

    /// Whether the schema compiles (CAR's own tools are checked by a test).
    #[cfg(test)]
    pub(crate) fn compiles(&self) -> bool {
        self.compiled().is_ok()
    }

    /// Every way `value` breaks the schema, each prefixed with where (`/field: …`); a schema
    /// that does not compile is itself the one problem.
    pub(crate) fn problems(&self, value: &Value) -> Vec<String> {
        match self.compiled() {
            Ok(validator) => validator
                .iter_errors(value)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("{at}: {e}")
                    }
                })
                .collect(),
            Err(message) => vec![format!(
                "the tool's input schema does not compile: {message}"
            )],
        }
    }
}

/// Tools that come and go while the process runs (a connector's enabled tools). The dispatcher
/// looks a name up in its own registry first, then here.
pub trait ToolSource: Send + Sync {
    /// The tools now. Called on every lookup and listing, so it must be cheap.
    fn current(&self) -> Arc<Registry>;
    /// A number that changes whenever the set of tools changes.
    fn generation(&self) -> u64;
}

/// A registry and the source beside it: the tools a handler sees ([`Tools`]).
pub(crate) struct Served {
    pub registry: Arc<Registry>,
    pub source: Option<Arc<dyn ToolSource>>,
}

impl Tools for Served {
    fn problems(&self, name: &str, args: &Value) -> Option<Vec<String>> {
        if let Some(found) = self.registry.problems(name, args) {
            return Some(found);
        }
        self.source.as_ref()?.current().problems(name, args)
    }
}

/// A registered tool with its input validator.
pub(crate) struct Entry {
    pub(crate) tool: Tool,
    pub(crate) validator: Arc<LazyValidator>,
}

/// Tools by name, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Arc<Entry>>,
    by_name: HashMap<String, usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("tool '{0}' is registered twice")]
    Duplicate(String),
    #[error("tool '{0}' must have an object input schema (\"type\": \"object\")")]
    NotObject(String),
}

impl Registry {
    pub fn register(&mut self, tool: Tool) -> Result<(), RegistryError> {
        let name = tool.spec.name.clone();
        if self.by_name.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        if tool.spec.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(RegistryError::NotObject(name));
        }
        let validator = Arc::new(LazyValidator::new(tool.spec.input_schema.clone()));
        self.by_name.insert(name, self.entries.len());
        self.entries.push(Arc::new(Entry { tool, validator }));
        Ok(())
    }

    pub(crate) fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.by_name.get(name).map(|&i| self.entries[i].clone())
    }

    /// Every declaration, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|e| &e.tool.spec)
    }

    /// Each tool's name and compiled input validator, for checks that validate arguments
    /// without calling (plan `verify`). Shares the validators; holds no handler.
    /// Every way `args` break the input schema of `name`, or `None` when it is not here.
    pub(crate) fn problems(&self, name: &str, args: &Value) -> Option<Vec<String>> {
        self.by_name
            .get(name)
            .map(|&i| self.entries[i].validator.problems(args))
    }

    pub(crate) fn validators(&self) -> impl Iterator<Item = (&str, &Arc<LazyValidator>)> {
        self.entries
            .iter()
            .map(|e| (e.tool.spec.name.as_str(), &e.validator))
    }

    /// The jobs tool `name` starts, if its calls start any.
    pub fn jobs(&self, name: &str) -> Option<&Arc<dyn super::Jobs>> {
        self.by_name
            .get(name)
            .and_then(|&i| self.entries[i].tool.jobs.as_ref())
    }

    /// Where job `id` stands, whichever tool started it, with the jobs that hold it.
    pub fn job(&self, id: &str) -> Option<(&Arc<dyn super::Jobs>, super::JobState)> {
        self.entries
            .iter()
            .filter_map(|e| e.tool.jobs.as_ref())
            .find_map(|jobs| jobs.state(id).map(|state| (jobs, state)))
    }

    /// Whether any tool starts jobs.
    pub fn has_jobs(&self) -> bool {
        self.entries.iter().any(|e| e.tool.jobs.is_some())
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.by_name.get(name).map(|&i| &self.entries[i].tool.spec)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
