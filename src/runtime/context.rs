//! What the host of a connection has decided for it: confirmation grants and who is calling.

use std::collections::BTreeSet;

/// The trusted context of one connection (an MCP session, a CLI invocation, an embedder).
#[derive(Debug, Clone, Default)]
pub struct Context {
    grants: BTreeSet<String>,
    face: Face,
    /// The connection calls come through (an MCP session's id), recorded with each execution.
    session: Option<std::sync::Arc<str>>,
    /// The agent making the calls (the MCP client's name), recorded with each execution.
    host: Option<std::sync::Arc<str>>,
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
            session: None,
            host: None,
        }
    }

    /// The connection's id, for the execution log.
    pub fn session(mut self, session: impl Into<std::sync::Arc<str>>) -> Context {
        self.session = Some(session.into());
        self
    }

    /// The calling agent's name, for the execution log.
    pub fn host(mut self, host: impl Into<std::sync::Arc<str>>) -> Context {
        self.host = Some(host.into());
        self
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    pub fn host_name(&self) -> Option<&str> {
        self.host.as_deref()
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
