//! What the host of a connection has decided for it: confirmation grants and who is calling.

use std::collections::BTreeSet;

/// The trusted context of one connection (an MCP session, a CLI invocation, an embedder).
#[derive(Debug, Clone, Default)]
pub struct Context {
    grants: BTreeSet<String>,
    face: Face,
}

/// Which face a call came through; recorded with each execution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Face {
    #[default]
    Embedded,
    Cli,
    Mcp,
    /// `car do`'s agent loop.
    Agent,
    /// car-server's dashboard.
    Web,
}

impl Face {
    pub fn as_str(self) -> &'static str {
        match self {
            Face::Embedded => "embedded",
            Face::Cli => "cli",
            Face::Mcp => "mcp",
            Face::Agent => "agent",
            Face::Web => "web",
        }
    }
}

impl Context {
    pub fn new(face: Face) -> Context {
        Context {
            grants: BTreeSet::new(),
            face,
        }
    }

    /// Adds a grant such as `confirm:memory_delete`.
    pub fn grant(mut self, grant: impl Into<String>) -> Context {
        self.grants.insert(grant.into());
        self
    }

    pub fn grants(mut self, grants: impl IntoIterator<Item = String>) -> Context {
        self.grants.extend(grants);
        self
    }

    pub fn has_grant(&self, grant: &str) -> bool {
        self.grants.contains(grant)
    }

    pub fn face(&self) -> Face {
        self.face
    }
}
