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
    /// The team user making the calls (a team server's token holder), recorded with each
    /// execution.
    author: Option<std::sync::Arc<str>>,
    /// Calls that change anything are denied (a team reader).
    read_only: bool,
}

/// Who a request comes from, as a team server authenticated it: put on the HTTP request by
/// the server, applied to each call's context by the MCP face.
#[derive(Debug, Clone)]
pub struct Caller {
    pub author: std::sync::Arc<str>,
    /// A reader of the project: every call that changes anything is denied.
    pub read_only: bool,
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
            author: None,
            read_only: false,
        }
    }

    /// The team user making the calls, for the execution log.
    pub fn author(mut self, author: impl Into<std::sync::Arc<str>>) -> Context {
        self.author = Some(author.into());
        self
    }

    /// The context of a call from `caller`.
    pub fn caller(self, caller: &Caller) -> Context {
        let context = self.author(caller.author.clone());
        if caller.read_only {
            context.read_only()
        } else {
            context
        }
    }

    pub fn author_name(&self) -> Option<&str> {
        self.author.as_deref()
    }

    /// Denies every call that changes anything (the connection of a team reader).
    pub fn read_only(mut self) -> Context {
        self.read_only = true;
        self
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
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
