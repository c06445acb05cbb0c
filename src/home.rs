//! Where CAR keeps its data and which project a command runs in.
//!
//! This module owns every environment variable name CAR reads and every path under `CAR_HOME`,
//! so the rest of the code receives resolved values and never reads the environment itself.

use std::path::{Path, PathBuf};

/// Every environment variable CAR reads, in one place.
pub mod env {
    /// The state root (default `~/.car`). Must be an absolute path.
    pub const CAR_HOME: &str = "CAR_HOME";
    /// Comma-separated tool names whose confirmation the host grants (`confirm:<tool>`).
    pub const CAR_CONFIRM: &str = "CAR_CONFIRM";
    /// Overrides the project root (otherwise discovered from the working directory).
    pub const CAR_PROJECT_DIR: &str = "CAR_PROJECT_DIR";
    /// Who is acting on tasks (claims, events) when `--agent` is not given; else `USER`.
    pub const CAR_AGENT_ID: &str = "CAR_AGENT_ID";
    /// The login name, the last fallback for the agent id.
    pub const USER: &str = "USER";
    /// Which store holds secrets: `auto` (default, the OS keychain), `secret-service`,
    /// `keyutils`, `macos`, `windows`, or `file` (plaintext `$CAR_HOME/secrets.json`, opt-in).
    pub const CAR_SECRET_STORE: &str = "CAR_SECRET_STORE";
    /// The secret of a pre-registered OAuth client for `car connector login --client-id`
    /// (read from here or from stdin, never from the command line).
    pub const CAR_OAUTH_CLIENT_SECRET: &str = "CAR_OAUTH_CLIENT_SECRET";
    /// Log filter for stderr logs (tracing `EnvFilter` syntax), e.g. `debug`.
    pub const RUST_LOG: &str = "RUST_LOG";
    /// Set by Claude Code for a plugin's hooks: the installed plugin's directory, which the
    /// gate protects (its `hooks/hooks.json` is what runs the gate).
    pub const CLAUDE_PLUGIN_ROOT: &str = "CLAUDE_PLUGIN_ROOT";
    /// Where the host finds `car`: a `car` put earlier on it would run instead of this one, so
    /// the gate guards each directory's `car`.
    pub const PATH: &str = "PATH";
    /// The model `car do` (and the daemon's `assistant_start`, and `car reason`) uses when none is named.
    pub const CAR_DO_MODEL: &str = "CAR_DO_MODEL";
    /// The image of `car do --sandbox docker` when `--image` is not given.
    pub const CAR_DO_IMAGE: &str = "CAR_DO_IMAGE";
    /// Who started a `car do` run (a host's name: `claude-code`, …), recorded in its document.
    pub const CAR_INVOKED_BY: &str = "CAR_INVOKED_BY";
    /// `car reason`'s model for little material, and for much.
    pub const CAR_REASON_SMALL_MODEL: &str = "CAR_REASON_SMALL_MODEL";
    pub const CAR_REASON_LARGE_MODEL: &str = "CAR_REASON_LARGE_MODEL";
    /// Where car-server's MCP listens (`HOST:PORT`, or `disabled`).
    pub const CAR_MCP_BIND: &str = "CAR_MCP_BIND";
    /// car-server's WebSocket port.
    pub const CAR_WS_PORT: &str = "CAR_WS_PORT";
    /// The model providers' API keys (`car keys` keeps them in the keychain instead).
    pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
    pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
    /// The model providers' API base URLs (a proxy, a local OpenAI-compatible server).
    pub const ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";
    pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
    // Not configuration, and so not here: what a sandboxed `car do` command inherits
    // (`agent::sandbox::KEPT_ENV`, `HOME`), passed through to it as is.
}

/// Why CAR's home could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("CAR_HOME must be an absolute path, got {0:?}; set it to something like /home/you/.car or unset it to use ~/.car")]
    NotAbsolute(PathBuf),
    #[error("cannot find your home directory to place ~/.car; set CAR_HOME to an absolute path")]
    NoUserHome,
}

/// The resolved state root and the paths CAR keeps under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// Resolves the home from an explicit value (flag or `CAR_HOME`), else `~/.car`.
    pub fn resolve(explicit: Option<&Path>) -> Result<Home, HomeError> {
        match explicit {
            Some(path) if path.as_os_str().is_empty() => Self::default_home(),
            Some(path) if path.is_absolute() => Ok(Home {
                root: path.to_path_buf(),
            }),
            Some(path) => Err(HomeError::NotAbsolute(path.to_path_buf())),
            None => Self::default_home(),
        }
    }

    /// Resolves the home from the process environment (for binaries and examples).
    pub fn from_env() -> Result<Home, HomeError> {
        let value = std::env::var_os(env::CAR_HOME).map(PathBuf::from);
        Self::resolve(value.as_deref())
    }

    fn default_home() -> Result<Home, HomeError> {
        let dirs = directories::BaseDirs::new().ok_or(HomeError::NoUserHome)?;
        Ok(Home {
            root: dirs.home_dir().join(".car"),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The one database: memory, executions and (later) everything else.
    pub fn db_path(&self) -> PathBuf {
        self.root.join("car.db")
    }

    /// Cold storage for `car prune`: closed tasks and old progress notes moved out of car.db.
    pub fn archive_db_path(&self) -> PathBuf {
        self.root.join("archive.db")
    }

    /// The policy gate's decision file ([`crate::policy::gate_log`]).
    pub fn gate_log_path(&self) -> PathBuf {
        crate::policy::gate_log::path(self.root())
    }

    /// User-wide policy rules (`*.toml`), read before the project's `.car/policies`.
    pub fn policies_dir(&self) -> PathBuf {
        self.root.join("policies")
    }

    /// The compatibility notes file, imported once and exportable.
    pub fn assistant_json(&self) -> PathBuf {
        self.root.join("memory").join("assistant.json")
    }
}

/// The user's home directory (what `~` means in a shell command), when it can be found.
pub fn user_home() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf())
}

/// Finds the project a working directory belongs to: the nearest ancestor holding `.car/`,
/// else the nearest git root, else the directory itself.
pub fn project_root(cwd: &Path) -> PathBuf {
    let ancestor_with = |marker: &str| {
        cwd.ancestors()
            .find(|dir| dir.join(marker).exists())
            .map(Path::to_path_buf)
    };
    // `~/.car` is CAR's home, not a project marker.
    let home_marker = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
    let car_dir = cwd
        .ancestors()
        .find(|dir| dir.join(".car").is_dir() && Some(dir.to_path_buf()) != home_marker)
        .map(Path::to_path_buf);
    car_dir
        .or_else(|| ancestor_with(".git"))
        .unwrap_or_else(|| cwd.to_path_buf())
}

/// The directories whose `.car/policies` govern a working directory, outermost first: every
/// ancestor of `cwd` (itself included) holding a `.car/policies` directory, all the way up to
/// `/` — past the git root too, so a nested repository (a submodule, a vendored checkout) or a
/// nested `.car/` (a sub-project's memory) never escapes an outer project's rules. The user
/// home's `.car` is CAR's default home (its `policies` are the user-wide rules), not a project.
///
/// This is the one discovery every face uses (the hook, car-mcp, car-server, `car do`, the CLI):
/// the rules in force are `<CAR_HOME>/policies` plus these, merged, and each rule judges
/// "inside the project" against the directory that holds its `.car/`.
pub fn policy_anchors(cwd: &Path) -> Vec<PathBuf> {
    let home_marker = user_home();
    let mut anchors: Vec<PathBuf> = cwd
        .ancestors()
        .filter(|dir| Some(dir.to_path_buf()) != home_marker)
        .filter(|dir| dir.join(".car").join("policies").is_dir())
        .map(Path::to_path_buf)
        .collect();
    anchors.reverse();
    anchors
}

thread_local! {
    /// The person a team server runs this thread's call for (see [`acting_for`]).
    static ACTING_FOR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `author` as the default agent id on this thread: on a team server a task's
/// history names the person whose token made the call, not the server's own user.
pub fn acting_for<T>(author: Option<&str>, f: impl FnOnce() -> T) -> T {
    let previous = ACTING_FOR.with(|cell| cell.replace(author.map(str::to_string)));
    let result = f();
    ACTING_FOR.with(|cell| *cell.borrow_mut() = previous);
    result
}

/// The agent id to act as: `explicit`, else the person a team server acts for, else
/// `CAR_AGENT_ID`, else `USER`, else `agent`.
pub fn agent_id(explicit: Option<&str>) -> String {
    explicit
        .map(str::to_string)
        .or_else(|| ACTING_FOR.with(|cell| cell.borrow().clone()))
        .or_else(|| std::env::var(env::CAR_AGENT_ID).ok())
        .or_else(|| std::env::var(env::USER).ok())
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "agent".into())
}

/// Reads the confirmation grants a host passes in `CAR_CONFIRM` (`a,b` → `confirm:a`, `confirm:b`).
pub fn confirm_grants_from_env() -> Vec<String> {
    std::env::var(env::CAR_CONFIRM)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| format!("confirm:{name}"))
        .collect()
}

/// The regular file at `path`, opened for reading without following a link or waiting on a
/// FIFO, and its metadata taken from the opened file (so it describes what is read). A file an
/// agent can plant under `CAR_HOME` must not hang or redirect whoever reads it.
pub(crate) fn open_regular(path: &Path) -> Option<(std::fs::File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).ok()?;
    let meta = file.metadata().ok()?;
    meta.is_file().then_some((file, meta))
}

/// The bytes of the regular file at `path` ([`open_regular`]) when it holds at most `limit`.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Writes a file so that readers see the old content or the new, never a torn one: the bytes go
/// to a temporary file beside it (created with its directory if needed), which is then renamed
/// over the target.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir
        }
        None => Path::new("."),
    };
    // A fresh name created exclusively (never an existing file or a link planted under a
    // predictable name), then renamed over the target.
    let mut tmp = tempfile::Builder::new()
        .prefix(".car-write-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data().ok();
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// Creates `path` with `bytes`, readable by the owner only (0600 on Unix), unless it exists:
/// the file appears whole or not at all, and of two processes racing to create it one wins and
/// the other keeps what is there. Returns whether this call created it.
pub(crate) fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // tempfile creates the file with mode 0600 on Unix.
    let mut tmp = tempfile::Builder::new()
        .prefix(".private-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(true),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_car_home_is_refused() {
        let err = Home::resolve(Some(Path::new("rel/home"))).unwrap_err();
        assert!(matches!(err, HomeError::NotAbsolute(_)));
    }

    #[test]
    fn project_root_prefers_dot_car_then_git() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let sub = repo.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(project_root(&sub), sub);
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        assert_eq!(project_root(&sub), repo);
        std::fs::create_dir_all(repo.join("a/.car")).unwrap();
        assert_eq!(project_root(&sub), repo.join("a"));
    }

    #[test]
    fn policy_anchors_are_every_enclosing_rule_directory_past_nested_projects_and_repositories() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let api = repo.join("packages/api");
        let vendored = api.join("vendor/lib");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join(".car/policies")).unwrap();
        // A nested project with memory only, and a nested repository with rules of its own.
        std::fs::create_dir_all(api.join(".car/skills")).unwrap();
        std::fs::create_dir_all(vendored.join(".git")).unwrap();
        std::fs::create_dir_all(vendored.join(".car/policies")).unwrap();
        assert_eq!(policy_anchors(&api.join("src")), vec![repo.clone()]);
        assert_eq!(project_root(&api.join("src")), api);
        assert_eq!(policy_anchors(&vendored), [repo.clone(), vendored.clone()]);
        assert_eq!(policy_anchors(tmp.path()), Vec::<PathBuf>::new());
    }
}
