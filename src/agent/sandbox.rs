//! Where `car do` runs shell commands, failing closed: under bubblewrap on Linux (no network,
//! the working directory the only writable root, its `.git` read-only unless allowed), or not
//! sandboxed at all only when the user said `--no-sandbox`. The `sandbox` block of the document
//! says what was used and which layers applied.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::Serialize;

/// What the run asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The best sandbox here, or refuse to run.
    Required,
    /// `--no-sandbox`: commands run as the user, with the network.
    Off,
}

/// The sandbox a run uses (the document's `sandbox` block).
#[derive(Debug, Clone, Serialize)]
pub struct Sandbox {
    /// `bwrap` or `none`.
    pub mode: &'static str,
    /// `none` or `host`.
    pub network: &'static str,
    pub root: PathBuf,
    /// What applies, one line each.
    pub layers: Vec<String>,
    /// Set when a sandbox was not used: why.
    pub fallback_notice: Option<String>,
    #[serde(skip)]
    git_writable: bool,
}

impl Sandbox {
    /// Picks the sandbox for `root`; `Err` says why none can be had and what to do.
    pub fn choose(
        request: Request,
        root: &Path,
        allow_git_writes: bool,
    ) -> Result<Sandbox, String> {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        if request == Request::Off {
            return Ok(Sandbox {
                mode: "none",
                network: "host",
                layers: vec!["none: commands run as you, with the network (--no-sandbox)".into()],
                fallback_notice: Some("sandbox turned off with --no-sandbox".into()),
                root,
                git_writable: true,
            });
        }
        match bwrap_works() {
            Ok(()) => {
                let mut layers = vec![
                    "bubblewrap: a new mount, PID and network namespace".to_string(),
                    "network: none (loopback only, inside the sandbox)".to_string(),
                    format!("filesystem: read-only except {}", root.display()),
                    "/tmp and /run: private and empty (no session sockets)".to_string(),
                    "home: hidden; toolchains (.cargo, .rustup, …) read-only".to_string(),
                    "environment: cleared but PATH, HOME, locale and toolchain variables".to_string(),
                    ".car/policies: read-only".to_string(),
                ];
                let has_git = root.join(".git").exists();
                if has_git && !allow_git_writes {
                    layers.push(".git: read-only (--allow-git-writes to commit)".into());
                }
                Ok(Sandbox {
                    mode: "bwrap",
                    network: "none",
                    root,
                    layers,
                    fallback_notice: None,
                    git_writable: allow_git_writes || !has_git,
                })
            }
            Err(why) => Err(format!(
                "no sandbox is available for shell commands: {why}. Install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap), or pass --no-sandbox to run commands unsandboxed"
            )),
        }
    }

    /// The command that runs `script` with `sh -c` in the sandbox, in `cwd`.
    pub fn command(&self, script: &str, cwd: &Path) -> tokio::process::Command {
        let mut command = if self.mode == "bwrap" {
            let mut c = tokio::process::Command::new("bwrap");
            c.args([
                "--die-with-parent",
                "--unshare-net",
                "--unshare-pid",
                "--new-session",
            ])
            .args(["--ro-bind", "/", "/"])
            .args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            // Sockets of the session (D-Bus, the Docker daemon, an SSH agent) would let a
            // command act outside the sandbox: /run is empty inside.
            .args(["--tmpfs", "/run"]);
            // The user's home is hidden (keys, tokens, CAR_HOME); the toolchains under it come
            // back read-only.
            if let Some(home) = std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_dir() && h != Path::new("/"))
            {
                c.arg("--tmpfs").arg(&home);
                for dir in TOOLCHAIN_DIRS {
                    let path = home.join(dir);
                    if path.exists() {
                        c.arg("--ro-bind").arg(&path).arg(&path);
                    }
                }
            }
            c.arg("--bind").arg(&self.root).arg(&self.root);
            let git = self.root.join(".git");
            if !self.git_writable && git.exists() {
                c.arg("--ro-bind").arg(&git).arg(&git);
            }
            let policies = self.root.join(".car/policies");
            if policies.exists() {
                c.arg("--ro-bind").arg(&policies).arg(&policies);
            }
            // Only the environment a build needs: no API keys or tokens reach the command.
            c.arg("--clearenv");
            for name in KEPT_ENV {
                if let Some(value) = std::env::var_os(name) {
                    c.arg("--setenv").arg(name).arg(value);
                }
            }
            c.arg("--chdir").arg(cwd).args(["--", "sh", "-c", script]);
            c
        } else {
            let mut c = tokio::process::Command::new("sh");
            c.args(["-c", script]).current_dir(cwd);
            c
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// Directories under the home that hold toolchains, shown read-only inside the sandbox.
const TOOLCHAIN_DIRS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".local/bin",
    ".local/lib",
    ".local/share/uv",
    ".nvm",
    ".volta",
    ".pyenv",
    ".bun",
    ".deno",
    "go",
    ".sdkman",
    ".m2",
    ".gradle",
];

/// The environment variables a sandboxed command keeps; everything else (API keys, tokens,
/// `SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`) is cleared.
const KEPT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "NODE_PATH",
    "CI",
];

/// Whether bubblewrap is installed and can make its namespaces here.
fn bwrap_works() -> Result<(), String> {
    let out = std::process::Command::new("bwrap")
        .args([
            "--die-with-parent",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "bubblewrap cannot create its namespaces here ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("bubblewrap (bwrap) is not installed".into())
        }
        Err(e) => Err(format!("cannot run bwrap: {e}")),
    }
}
