//! Where `car do` runs shell commands, failing closed: under bubblewrap on Linux (no network,
//! the working directory the only writable root, its `.git` read-only unless allowed, a seccomp
//! filter on sockets), under Seatbelt on macOS (a deny-by-default profile), in a
//! Docker container when asked for (`--sandbox docker`: no network, the image read-only, the
//! project mounted), or not sandboxed at all only when the user said `--no-sandbox`. The
//! `sandbox` block of the document says what was used and which layers applied.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// Where `car do` runs shell commands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SandboxChoice {
    /// This machine's own: bubblewrap on Linux, Seatbelt on macOS.
    Auto,
    /// A container on the Docker engine.
    Docker,
}

/// The image of `--sandbox docker` when none is named.
pub const DEFAULT_IMAGE: &str = "debian:stable-slim";

/// What a run's commands (and its Write and Edit) may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Writes {
    /// The working directory, but its `.car` and `.git`.
    #[default]
    Project,
    /// The working directory and its `.git` (`--allow-git-writes`), never its `.car`.
    ProjectAndGit,
    /// Nothing: a read-only run (`assistant_start {local: true}`) reads and runs, changes nothing.
    Nothing,
}

/// What the run asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The best sandbox here (bubblewrap on Linux, Seatbelt on macOS), or refuse to run.
    Auto,
    /// A container of `image` on the Docker engine (`DOCKER_HOST`), or refuse to run.
    Docker { image: String },
    /// `--no-sandbox`: commands run as the user, with the network.
    Off,
}

/// The sandbox a run uses (the document's `sandbox` block).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Sandbox {
    /// `bwrap`, `seatbelt`, `docker` or `none`.
    pub mode: &'static str,
    /// The container image (`docker` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `none` or `host`.
    pub network: &'static str,
    /// `read_only` (commands change nothing), `sandbox_edit` (commands write only in the
    /// project) or `full_access`.
    pub tier: &'static str,
    pub root: PathBuf,
    /// What applies, one line each.
    pub layers: Vec<String>,
    /// Set when a sandbox was not used: why.
    pub fallback_notice: Option<String>,
    #[serde(skip)]
    git_writable: bool,
    #[serde(skip)]
    writes: Writes,
    #[serde(skip)]
    backend: Backend,
}

/// What runs the commands, with what each needs to build them.
#[derive(Debug, Clone)]
enum Backend {
    /// `--no-sandbox`.
    None,
    Bwrap {
        /// The seccomp program (see [`socket_filter`]), in a private file.
        filter: Option<Arc<tempfile::NamedTempFile>>,
    },
    Seatbelt {
        profile: String,
        /// The private directory commands may write (their home, caches and TMPDIR), kept
        /// while the sandbox lives; `scratch_path` is its real path.
        _scratch: Arc<tempfile::TempDir>,
        scratch_path: PathBuf,
    },
    Docker {
        image: String,
        /// The user commands run as: the project's owner, so what they write is theirs.
        owner: Option<(u32, u32)>,
    },
}

/// `docker rm --force name`: the container of a command that was stopped (killing the
/// `docker` client leaves the container running).
fn remove_container(name: &str) -> std::process::Command {
    let mut c = std::process::Command::new("docker");
    c.args(["rm", "--force", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The container of a command that has not exited: removed when this is dropped, however the
/// command's wait ended (a time limit, a cancel, the wait itself dropped).
struct Container(Option<String>);

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            if let Err(e) = remove_container(&name).spawn() {
                tracing::warn!("could not remove the container {name} of a stopped command: {e}");
            }
        }
    }
}

/// How a sandboxed command ended.
#[derive(Debug)]
pub enum Ended {
    Exited(std::process::Output),
    /// Stopped at its time limit.
    TimedOut,
    /// Stopped because the run was.
    Cancelled,
}

impl Sandbox {
    /// The sandbox block for `backend`: its mode, image, network and tier follow from it.
    fn new(
        backend: Backend,
        root: PathBuf,
        layers: Vec<String>,
        git_writable: bool,
        writes: Writes,
    ) -> Sandbox {
        let (mode, image) = match &backend {
            Backend::None => ("none", None),
            Backend::Bwrap { .. } => ("bwrap", None),
            Backend::Seatbelt { .. } => ("seatbelt", None),
            Backend::Docker { image, .. } => ("docker", Some(image.clone())),
        };
        let off = matches!(backend, Backend::None);
        Sandbox {
            mode,
            image,
            network: if off { "host" } else { "none" },
            tier: match (off, writes) {
                (true, _) => "full_access",
                (false, Writes::Nothing) => "read_only",
                (false, _) => "sandbox_edit",
            },
            root,
            layers,
            fallback_notice: off.then(|| "sandbox turned off with --no-sandbox".to_string()),
            git_writable,
            writes,
            backend,
        }
    }

    /// What the run may change.
    pub fn writes(&self) -> Writes {
        self.writes
    }

    /// Picks the sandbox for `root`; `Err` says why none can be had and what to do.
    pub fn choose(request: Request, root: &Path, writes: Writes) -> Result<Sandbox, String> {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let read_only = writes == Writes::Nothing;
        let git_writable =
            !read_only && (writes == Writes::ProjectAndGit || !root.join(".git").exists());
        let writable = |layers: &mut Vec<String>, line: String| {
            layers.push(if read_only {
                format!(
                    "filesystem: read-only, {} included (a read-only run)",
                    root.display()
                )
            } else {
                line
            });
        };
        let protected = |layers: &mut Vec<String>| {
            if read_only {
                return;
            }
            layers.push(".car (policies, connectors): read-only".into());
            if !git_writable {
                layers.push(".git: read-only (--allow-git-writes to commit)".into());
            }
        };
        match request {
            Request::Off if read_only => Err(
                "a read-only run needs a sandbox to hold its commands to reading; it cannot run with --no-sandbox".into(),
            ),
            Request::Off => Ok(Sandbox::new(
                Backend::None,
                root,
                vec!["none: commands run as you, with the network (--no-sandbox)".into()],
                true,
                writes,
            )),
            Request::Auto if cfg!(target_os = "macos") => {
                let scratch = tempfile::tempdir()
                    .map_err(|e| format!("cannot make the sandbox's temporary directory: {e}"))?;
                let scratch_path = scratch
                    .path()
                    .canonicalize()
                    .unwrap_or_else(|_| scratch.path().to_path_buf());
                // Every name the home goes by: $HOME and the account's, as the real paths
                // Seatbelt compares.
                let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .into_iter()
                    .chain(directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()))
                    .flat_map(|h| [h.canonicalize().ok(), Some(h)])
                    .flatten()
                    .filter(|h| h.is_absolute() && h != Path::new("/"))
                    .collect();
                homes.sort();
                homes.dedup();
                // Commands get a home of their own in the scratch directory (a config file
                // they may not read is an error to git; caches need somewhere to go); the
                // toolchains stay where they are.
                std::fs::create_dir_all(scratch_path.join("home"))
                    .map_err(|e| format!("cannot make the sandbox's home: {e}"))?;
                let profile =
                    seatbelt_profile(&root, !read_only, git_writable, &homes, &scratch_path);
                seatbelt_works(&profile).map_err(|why| {
                    format!("no sandbox is available for shell commands: {why}. Run commands in a container with --sandbox docker, or pass --no-sandbox to run them unsandboxed")
                })?;
                let mut layers = vec![
                    "seatbelt: sandbox-exec with a deny-by-default profile".to_string(),
                    "network: none (no connection of any kind, unix sockets included)".to_string(),
                ];
                writable(
                    &mut layers,
                    format!(
                        "filesystem: writable only {} and a private temporary directory (TMPDIR)",
                        root.display()
                    ),
                );
                layers.extend([
                    "home: unreadable; toolchains (.cargo, .rustup, …) readable".to_string(),
                    "environment: cleared but PATH, HOME, locale and toolchain variables"
                        .to_string(),
                ]);
                protected(&mut layers);
                let backend = Backend::Seatbelt {
                    profile,
                    _scratch: Arc::new(scratch),
                    scratch_path,
                };
                Ok(Sandbox::new(backend, root, layers, git_writable, writes))
            }
            Request::Auto => {
                bwrap_works(None).map_err(|why| format!(
                    "no sandbox is available for shell commands: {why}. Install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap), run commands in a container with --sandbox docker, or pass --no-sandbox to run them unsandboxed"
                ))?;
                // The socket filter where this architecture has one and the kernel takes it.
                let filter = socket_filter()
                    .and_then(|program| {
                        let mut file = tempfile::NamedTempFile::new().ok()?;
                        std::io::Write::write_all(&mut file, &program).ok()?;
                        Some(file)
                    })
                    .filter(|file| bwrap_works(Some(file.path())).is_ok())
                    .map(Arc::new);
                let mut layers = vec![
                    "bubblewrap: a new mount, PID and network namespace".to_string(),
                    "network: none (loopback only, inside the sandbox)".to_string(),
                ];
                writable(
                    &mut layers,
                    format!("filesystem: read-only except {}", root.display()),
                );
                layers.extend([
                    "/tmp and /run: private and empty (no session sockets)".to_string(),
                    "home: hidden; toolchains (.cargo, .rustup, …) read-only".to_string(),
                    "environment: cleared but PATH, HOME, locale and toolchain variables"
                        .to_string(),
                ]);
                if filter.is_some() {
                    layers.push("seccomp: sockets of the unix, IPv4 and IPv6 families only (no netlink, packet, vsock, …), socket pairs of unix only, no io_uring, no other syscall ABI".into());
                }
                protected(&mut layers);
                Ok(Sandbox::new(
                    Backend::Bwrap { filter },
                    root,
                    layers,
                    git_writable,
                    writes,
                ))
            }
            Request::Docker { image } => {
                if image.trim().is_empty() || image.starts_with('-') {
                    return Err(format!("'{image}' is not a container image name"));
                }
                let root_text = root.display().to_string();
                if root_text.contains(',') {
                    return Err(format!(
                        "the project path {root_text} holds a comma, which Docker's --mount cannot take"
                    ));
                }
                let engine = docker_engine()?;
                let mut layers = vec![
                    format!("docker: a container of {image} (engine {engine}), removed after each command"),
                    "network: none (--network none)".to_string(),
                ];
                writable(
                    &mut layers,
                    format!("filesystem: the image read-only; {} mounted read-write", root.display()),
                );
                layers.extend([
                    "/tmp: a private tmpfs".to_string(),
                    "privileges: every capability dropped, no-new-privileges, Docker's default seccomp profile".to_string(),
                    "environment: the image's own (nothing from yours)".to_string(),
                ]);
                if !docker_has_image(&image) {
                    layers.push(format!(
                        "image: not present locally; Docker pulls {image} on the first command"
                    ));
                }
                protected(&mut layers);
                let owner = project_owner(&root);
                if let Some((uid, gid)) = owner {
                    layers.push(format!("user: {uid}:{gid} (the project's owner)"));
                }
                Ok(Sandbox::new(
                    Backend::Docker { image, owner },
                    root,
                    layers,
                    git_writable,
                    writes,
                ))
            }
        }
    }

    /// Runs `script` in the sandbox in `cwd` until it exits, `limit` passes or `cancel` fires;
    /// a container left behind by a stopped command is removed.
    pub async fn run(
        &self,
        script: &str,
        cwd: &Path,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> std::io::Result<Ended> {
        let mut container = Container(
            matches!(self.backend, Backend::Docker { .. })
                .then(|| format!("car-{}", uuid::Uuid::new_v4().simple())),
        );
        let child = self
            .command_named(script, cwd, container.0.as_deref())
            .spawn()?;
        let ended = tokio::select! {
            out = child.wait_with_output() => Ended::Exited(out?),
            _ = tokio::time::sleep(limit) => Ended::TimedOut,
            _ = cancel.cancelled() => Ended::Cancelled,
        };
        // An exited container was removed by `docker run --rm`; a stopped one is removed here,
        // waited for (the guard covers a wait that is itself dropped).
        if let (Some(name), false) = (container.0.take(), matches!(ended, Ended::Exited(_))) {
            let removed = tokio::time::timeout(
                Duration::from_secs(30),
                tokio::process::Command::from(remove_container(&name)).status(),
            )
            .await;
            if !matches!(removed, Ok(Ok(status)) if status.success()) {
                tracing::warn!("could not remove the container {name} of a stopped command");
            }
        }
        Ok(ended)
    }

    /// The command that runs `script` with `sh -c` in the sandbox, in `cwd` (for a container,
    /// prefer [`Sandbox::run`], which removes one left behind).
    pub fn command(&self, script: &str, cwd: &Path) -> tokio::process::Command {
        self.command_named(script, cwd, None)
    }

    fn command_named(
        &self,
        script: &str,
        cwd: &Path,
        container: Option<&str>,
    ) -> tokio::process::Command {
        let mut command = match &self.backend {
            Backend::Docker { image, owner } => {
                self.docker_command(image, *owner, script, cwd, container)
            }
            Backend::Seatbelt {
                profile,
                scratch_path,
                ..
            } => seatbelt_command(profile, scratch_path, script, cwd),
            Backend::Bwrap { filter } => {
                self.bwrap_command(filter.as_ref().map(|f| f.path()), script, cwd)
            }
            Backend::None => {
                let mut c = tokio::process::Command::new("sh");
                c.args(["-c", script]).current_dir(cwd);
                c
            }
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    fn bwrap_command(
        &self,
        filter: Option<&Path>,
        script: &str,
        cwd: &Path,
    ) -> tokio::process::Command {
        let mut c = tokio::process::Command::from(bwrap(filter));
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
            // The credentials kept beside the toolchains read as empty.
            for file in TOOLCHAIN_SECRETS {
                let path = home.join(file);
                if path.is_file() {
                    c.arg("--ro-bind").arg("/dev/null").arg(&path);
                }
            }
        }
        let bind = if self.writes == Writes::Nothing {
            "--ro-bind"
        } else {
            "--bind"
        };
        c.arg(bind).arg(&self.root).arg(&self.root);
        for protected in self.protected_dirs() {
            c.arg("--ro-bind").arg(&protected).arg(&protected);
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
    }

    fn docker_command(
        &self,
        image: &str,
        owner: Option<(u32, u32)>,
        script: &str,
        cwd: &Path,
        container: Option<&str>,
    ) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("docker");
        c.args(["run", "--rm", "--network", "none", "--cap-drop", "ALL"])
            .args(["--security-opt", "no-new-privileges", "--read-only"])
            .args([
                "--tmpfs",
                "/tmp:rw,exec,nosuid,nodev",
                "--pids-limit",
                "4096",
            ])
            .args(["--label", "dev.car.sandbox=car-do", "--env", "HOME=/tmp"]);
        if let Some(name) = container {
            c.args(["--name", name]);
        }
        if let Some((uid, gid)) = owner {
            c.arg("--user").arg(format!("{uid}:{gid}"));
        }
        let mount = |path: &Path, readonly: bool| {
            let mut spec = format!("type=bind,source={0},target={0}", path.display());
            if readonly {
                spec.push_str(",readonly");
            }
            spec
        };
        c.arg("--mount")
            .arg(mount(&self.root, self.writes == Writes::Nothing));
        for protected in self.protected_dirs() {
            c.arg("--mount").arg(mount(&protected, true));
        }
        c.arg("--workdir").arg(cwd);
        c.arg(image).args(["sh", "-c", script]);
        c
    }

    /// The project's directories commands may not write: its `.car`, and its `.git` unless
    /// `--allow-git-writes` (see [`own_dir`]).
    fn protected_dirs(&self) -> impl Iterator<Item = PathBuf> {
        let git = (!self.git_writable)
            .then(|| own_dir(&self.root, ".git"))
            .flatten();
        own_dir(&self.root, ".car").into_iter().chain(git)
    }
}

/// `sandbox-exec` with `profile`, the environment cleared but the build variables, and the
/// home, caches and TMPDIR in `scratch`.
fn seatbelt_command(
    profile: &str,
    scratch: &Path,
    script: &str,
    cwd: &Path,
) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(SANDBOX_EXEC);
    c.arg("-p")
        .arg(profile)
        .args(["--", "sh", "-c", script])
        .current_dir(cwd)
        .env_clear();
    for name in KEPT_ENV {
        if let Some(value) = std::env::var_os(name) {
            c.env(name, value);
        }
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for (name, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            if std::env::var_os(name).is_none() && home.join(dir).is_dir() {
                c.env(name, home.join(dir));
            }
        }
    }
    c.env("HOME", scratch.join("home"))
        .env("TMPDIR", scratch)
        .env("XDG_CACHE_HOME", scratch.join("cache"))
        .env("XDG_CONFIG_HOME", scratch.join("config"))
        .env("GOCACHE", scratch.join("cache/go-build"));
    c
}

/// macOS's Seatbelt front end.
const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// A Seatbelt profile (SBPL) that denies by default: commands may run and fork, read the
/// filesystem but the home (its toolchains excepted, the project included), write only `root`
/// (never its `.car/policies`, nor its `.git` unless `git_writable`) and the private `scratch`
/// directory, and open no connection of any kind.
fn seatbelt_profile(
    root: &Path,
    root_writable: bool,
    git_writable: bool,
    homes: &[PathBuf],
    scratch: &Path,
) -> String {
    // A string literal of SBPL.
    let quote = |path: &Path| {
        format!(
            "\"{}\"",
            path.display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        )
    };
    let mut profile = String::from(
        "(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow user-preference-read)
(allow sysctl-read)
(allow mach-host*)
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\"))
(allow file-read-metadata)
(allow file-write-data file-ioctl (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\") (literal \"/dev/stdout\") (literal \"/dev/stderr\") (regex #\"^/dev/fd/[0-9]+$\"))
(allow file-read* file-write* file-ioctl (literal \"/dev/ptmx\") (regex #\"^/dev/ttys[0-9]+$\"))
",
    );
    if homes.is_empty() {
        // No home is known: there is none to hide.
        profile.push_str("(allow file-read*)\n");
    } else {
        let hidden: Vec<String> = homes
            .iter()
            .map(|h| format!(" (require-not (subpath {}))", quote(h)))
            .collect();
        profile.push_str(&format!(
            "(allow file-read* (require-all (subpath \"/\"){}))\n",
            hidden.concat()
        ));
        for home in homes {
            for dir in TOOLCHAIN_DIRS {
                // The toolchain, but not the credentials kept in it.
                let secrets: String = TOOLCHAIN_SECRETS
                    .iter()
                    .filter(|f| Path::new(f).starts_with(dir))
                    .map(|f| format!(" (require-not (literal {}))", quote(&home.join(f))))
                    .collect();
                profile.push_str(&format!(
                    "(allow file-read* (require-all (subpath {}){secrets}))\n",
                    quote(&home.join(dir))
                ));
            }
        }
    }
    profile.push_str(&format!("(allow file-read* (subpath {}))\n", quote(root)));
    // `.car` and `.git` themselves too: a command that renamed one could put its own in its
    // place.
    let mut protected = vec![root.join(".car")];
    if !git_writable {
        protected.push(root.join(".git"));
    }
    let exceptions: String = protected
        .iter()
        .map(|p| {
            format!(
                " (require-not (subpath {0})) (require-not (literal {0}))",
                quote(p)
            )
        })
        .collect();
    if root_writable {
        profile.push_str(&format!(
            "(allow file-write* (require-all (subpath {}){exceptions}))\n",
            quote(root)
        ));
    }
    profile.push_str(&format!(
        "(allow file-read* file-write* (subpath {}))\n",
        quote(scratch)
    ));
    profile
}

/// Whether `sandbox-exec` is there and takes `profile`.
fn seatbelt_works(profile: &str) -> Result<(), String> {
    let mut command = std::process::Command::new(SANDBOX_EXEC);
    command.args(["-p", profile, "--", "/usr/bin/true"]);
    probe(
        command,
        "Seatbelt refused the sandbox's profile",
        &format!("{SANDBOX_EXEC} is missing"),
    )
}

/// Runs a sandbox's trial command: `Ok` when it succeeds, else what `refused` or `missing` (the
/// program is not installed) says, with what it printed.
fn probe(mut command: std::process::Command, refused: &str, missing: &str) -> Result<(), String> {
    let out = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{refused} ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing.to_string()),
        Err(e) => Err(format!("{refused}: {e}")),
    }
}

/// `root/relative` when it is a directory of the project itself: a link on the way (which an
/// earlier command could have planted, `.car/policies -> /`) would have the sandbox mount what
/// it leads to, so it counts as absent.
fn own_dir(root: &Path, relative: &str) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    for part in relative.split('/') {
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_dir() {
            return None;
        }
    }
    Some(path)
}

/// The Docker engine's version, or why it cannot be reached.
pub fn docker_engine() -> Result<String, String> {
    let out = std::process::Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        Ok(out) => Err(format!(
            "the Docker engine is not reachable ({}); start it, point DOCKER_HOST at it, or leave out --sandbox docker to use bubblewrap",
            String::from_utf8_lossy(&out.stderr).trim().lines().last().unwrap_or("no answer")
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
            "the docker command is not installed; install Docker, or leave out --sandbox docker to use bubblewrap".into(),
        ),
        Err(e) => Err(format!("cannot run docker: {e}")),
    }
}

fn docker_has_image(image: &str) -> bool {
    std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(unix)]
fn project_owner(root: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(root).ok().map(|m| (m.uid(), m.gid()))
}

#[cfg(not(unix))]
fn project_owner(_root: &Path) -> Option<(u32, u32)> {
    None
}

/// Files under those directories that hold credentials (registry tokens, repository
/// passwords): they read as empty inside the sandbox.
const TOOLCHAIN_SECRETS: &[&str] = &[
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
];

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

/// `bwrap`, installing the seccomp program in `filter` when given: bwrap reads it from a file
/// descriptor, which the shell opens as fd 3 for bwrap alone (nothing else inherits it).
fn bwrap(filter: Option<&Path>) -> std::process::Command {
    match filter {
        Some(filter) => {
            let mut c = std::process::Command::new("sh");
            c.args([
                "-c",
                "f=$1; shift; exec bwrap --seccomp 3 \"$@\" 3<\"$f\"",
                "sh",
            ])
            .arg(filter);
            c
        }
        None => std::process::Command::new("bwrap"),
    }
}

/// Whether bubblewrap is installed and can make its namespaces here (and install the seccomp
/// program in `filter`, when given).
fn bwrap_works(filter: Option<&Path>) -> Result<(), String> {
    let args = [
        "--die-with-parent",
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "true",
    ];
    let mut command = bwrap(filter);
    command.args(args);
    probe(
        command,
        "bubblewrap cannot create its namespaces here",
        "bubblewrap (bwrap) is not installed",
    )
}

/// A classic BPF program for seccomp (`struct sock_filter` records, native byte order) that
/// lets a sandboxed command open sockets of the unix, IPv4 and IPv6 families only — the network
/// namespace already leaves IP nothing but loopback, and a project's tests may serve on it —
/// and refuses the families a namespace does not confine or that widen the kernel's surface
/// (netlink, packet, vsock, bluetooth, alg, …) with `EAFNOSUPPORT`, `io_uring_setup` (whose
/// rings open sockets past this filter) and any other syscall ABI (32-bit, x32) with `ENOSYS`.
/// `None` on an architecture without the numbers here.
fn socket_filter() -> Option<Vec<u8>> {
    // (audit architecture, socket, socketpair, io_uring_setup)
    let (arch, socket, socketpair, io_uring_setup): (u32, u32, u32, u32) =
        if cfg!(target_arch = "x86_64") {
            (0xc000_003e, 41, 53, 425)
        } else if cfg!(target_arch = "aarch64") {
            (0xc000_00b7, 198, 199, 425)
        } else {
            return None;
        };
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    // Offsets in struct seccomp_data.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const ARG0: u32 = 16;
    const ENOSYS: u32 = 38;
    const EAFNOSUPPORT: u32 = 97;
    const AF_UNIX: u32 = 1;
    const AF_INET: u32 = 2;
    const AF_INET6: u32 = 10;
    const X32_BIT: u32 = 0x4000_0000;
    // Jumps count the instructions skipped (true branch, false branch).
    let program: [(u16, u8, u8, u32); 21] = [
        (LD_ABS, 0, 0, ARCH), //  0
        (JEQ, 1, 0, arch),    //  1: native → 3
        (RET, 0, 0, ERRNO | ENOSYS),
        (LD_ABS, 0, 0, NR),   //  3
        (JGE, 0, 1, X32_BIT), //  4: x32 → 5, else 6
        (RET, 0, 0, ERRNO | ENOSYS),
        (JEQ, 0, 6, socket), //  6: socket → 7, else 13
        (LD_ABS, 0, 0, ARG0),
        (JEQ, 3, 0, AF_UNIX),  //  8: → 12
        (JEQ, 2, 0, AF_INET),  //  9: → 12
        (JEQ, 1, 0, AF_INET6), // 10: → 12
        (RET, 0, 0, ERRNO | EAFNOSUPPORT),
        (RET, 0, 0, ALLOW),      // 12
        (JEQ, 0, 4, socketpair), // 13: socketpair → 14, else 18
        (LD_ABS, 0, 0, ARG0),
        (JEQ, 1, 0, AF_UNIX), // 15: → 17
        (RET, 0, 0, ERRNO | EAFNOSUPPORT),
        (RET, 0, 0, ALLOW),          // 17
        (JEQ, 0, 1, io_uring_setup), // 18: → 19, else 20
        (RET, 0, 0, ERRNO | ENOSYS),
        (RET, 0, 0, ALLOW), // 20
    ];
    Some(
        program
            .iter()
            .flat_map(|&(code, jt, jf, k)| {
                let mut record = Vec::with_capacity(8);
                record.extend_from_slice(&code.to_ne_bytes());
                record.push(jt);
                record.push(jf);
                record.extend_from_slice(&k.to_ne_bytes());
                record
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seatbelt_profile_writes_only_the_project_and_its_scratch_and_keeps_the_home_out() {
        let root = Path::new("/Users/me/proj \"q\"");
        let home = Path::new("/Users/me");
        let scratch = Path::new("/private/var/folders/x/T/car");
        let profile = seatbelt_profile(root, true, false, &[home.to_path_buf()], scratch);
        let lines: Vec<&str> = profile.lines().collect();
        assert_eq!(lines[..2], ["(version 1)", "(deny default)"]);
        assert!(lines.contains(&"(allow file-read* (require-all (subpath \"/\") (require-not (subpath \"/Users/me\"))))"));
        assert!(lines.contains(&"(allow file-read* (require-all (subpath \"/Users/me/.cargo\") (require-not (literal \"/Users/me/.cargo/credentials.toml\")) (require-not (literal \"/Users/me/.cargo/credentials\"))))"), "{profile}");
        assert!(
            lines.contains(&"(allow file-read* (require-all (subpath \"/Users/me/.rustup\")))"),
            "{profile}"
        );
        assert!(lines.contains(
            &"(allow file-write* (require-all (subpath \"/Users/me/proj \\\"q\\\"\") (require-not (subpath \"/Users/me/proj \\\"q\\\"/.car\")) (require-not (literal \"/Users/me/proj \\\"q\\\"/.car\")) (require-not (subpath \"/Users/me/proj \\\"q\\\"/.git\")) (require-not (literal \"/Users/me/proj \\\"q\\\"/.git\"))))"
        ), "{profile}");
        assert!(lines.contains(
            &"(allow file-read* file-write* (subpath \"/private/var/folders/x/T/car\"))"
        ));
        assert!(
            !profile.contains("network"),
            "no network rule: every connection is denied"
        );
        let depth = profile.chars().try_fold(0i32, |depth, c| {
            let depth = depth
                + match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
            (depth >= 0).then_some(depth)
        });
        assert_eq!(depth, Some(0), "balanced: {profile}");
        let writable = seatbelt_profile(root, true, true, &[home.to_path_buf()], scratch);
        assert!(
            !writable.contains("/.git"),
            "--allow-git-writes lets .git be written"
        );
        let read_only = seatbelt_profile(root, false, false, &[home.to_path_buf()], scratch);
        assert!(
            !read_only.contains("(allow file-write* (require-all (subpath \"/Users/me/proj"),
            "a read-only run writes only its scratch: {read_only}"
        );
        assert!(read_only.contains("(allow file-read* (subpath \"/Users/me/proj"));
    }

    #[test]
    fn every_jump_of_the_socket_filter_lands_inside_it_and_every_path_returns() {
        let Some(program) = socket_filter() else {
            return; // no filter on this architecture
        };
        assert_eq!(program.len() % 8, 0);
        let records: Vec<(u16, u8, u8)> = program
            .chunks(8)
            .map(|r| (u16::from_ne_bytes([r[0], r[1]]), r[2], r[3]))
            .collect();
        let last = records.len() - 1;
        assert_eq!(records[last].0, 0x06, "the program ends in a return");
        for (i, &(code, jt, jf)) in records.iter().enumerate() {
            if code & 0x07 == 0x05 {
                // A conditional jump: both targets are later instructions inside the program.
                for target in [i + 1 + usize::from(jt), i + 1 + usize::from(jf)] {
                    assert!(target <= last, "instruction {i} jumps to {target}");
                }
            } else if code != 0x06 {
                assert!(i < last, "instruction {i} falls off the end");
            }
        }
    }
}
