//! The one registry of tools that every face serves, with each input schema compiled once.

use std::collections::HashMap;
use std::sync::Arc;

use super::spec::ToolSpec;
use super::tool::Tool;

/// A registered tool with its compiled input validator.
pub(crate) struct Entry {
    pub(crate) tool: Tool,
    pub(crate) validator: Arc<jsonschema::Validator>,
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
    #[error("tool '{name}' has an invalid input schema: {message}")]
    BadSchema { name: String, message: String },
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
        let validator = jsonschema::validator_for(&tool.spec.input_schema).map_err(|e| {
            RegistryError::BadSchema {
                name: name.clone(),
                message: e.to_string(),
            }
        })?;
        self.by_name.insert(name, self.entries.len());
        self.entries.push(Arc::new(Entry {
            tool,
            validator: Arc::new(validator),
        }));
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
    pub(crate) fn validators(&self) -> impl Iterator<Item = (&str, &Arc<jsonschema::Validator>)> {
        self.entries
            .iter()
            .map(|e| (e.tool.spec.name.as_str(), &e.validator))
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
