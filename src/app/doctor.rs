//! `doctor`: checks CAR's home, database, memory, policies, connectors, daemon, sandbox and the
//! project's data, and says what to fix. It looks at every capability, so it lives in the
//! composition root; the CLI's `car doctor` and the `context_manager` tool both run it.

use std::path::Path;
use std::sync::Arc;

use crate::home::Home;
use crate::memory::Memory;
use crate::policy::PolicyEngine;
use crate::project::commands::session::Doctor;
use crate::project::lifecycle::Check;
use crate::project::{Mode, Project, ProjectError};
use crate::store::Store;

/// Runs the checks; with [`Mode::Apply`] (`--fix`), repairs what the project checks can.
pub fn run(home_dir: &Home, project_root: &Path, mode: Mode) -> Doctor {
    let mut checks = Vec::new();
    let home = home_dir.root();
    let home_ok = std::fs::create_dir_all(home).is_ok() && tempfile_probe(home);
    checks.push(Check::new(
        "home",
        home_ok,
        if home_ok {
            format!("{} is writable", home.display())
        } else {
            format!(
                "{} is not writable: set CAR_HOME to a directory you own",
                home.display()
            )
        },
    ));
    let db = home_dir.db_path();
    match Store::open(&db) {
        Ok(store) => {
            let version = store.schema_version().unwrap_or(-1);
            checks.push(Check::new(
                "database",
                true,
                format!(
                    "{} (schema {version} of {})",
                    db.display(),
                    Store::supported_schema_version()
                ),
            ));
            let mode: String = store
                .conn()
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap_or_default();
            checks.push(Check::new(
                "wal",
                mode.eq_ignore_ascii_case("wal"),
                format!("journal_mode={mode}"),
            ));
            let integrity: String = store
                .conn()
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .unwrap_or_else(|e| e.to_string());
            checks.push(Check::new(
                "integrity",
                integrity == "ok",
                format!("quick_check: {integrity}"),
            ));
            match Memory::open(
                std::sync::Arc::new(store),
                Some(project_root),
                Some(&home_dir.assistant_json()),
            ) {
                Ok(memory) => {
                    let count = memory.entry_count("").unwrap_or(0);
                    checks.push(Check::new(
                        "memory",
                        true,
                        format!("{count} current entries visible from this project"),
                    ));
                    checks.push(meaning_check(&memory));
                }
                Err(e) => checks.push(Check::new("memory", false, e.to_string())),
            }
        }
        Err(e) => checks.push(Check::new("database", false, e.to_string())),
    }
    let assistant = home_dir.assistant_json();
    checks.push(Check::new(
        "assistant.json",
        true,
        if assistant.exists() {
            format!(
                "{} present (imported once into car.db)",
                assistant.display()
            )
        } else {
            "none (nothing to import)".to_string()
        },
    ));
    checks.push(policy_check(home_dir, project_root));
    checks.push(hosts_check(project_root));
    checks.push(connectors_check(home_dir));
    checks.push(daemon_check(home_dir));
    checks.push(sandbox_check(project_root));
    checks.push(Check::new(
        "project",
        true,
        format!("{}", project_root.display()),
    ));
    match Store::open(&home_dir.db_path())
        .map_err(ProjectError::from)
        .and_then(|store| Project::open(Arc::new(store), project_root))
        .and_then(|project| project.check(mode))
    {
        Ok(project_checks) => checks.extend(project_checks),
        Err(e) => checks.push(Check::new("project data", false, e.to_string())),
    }
    Doctor {
        healthy: checks.iter().all(|c| c.ok),
        home: home.display().to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        checks,
    }
}

/// The `meaning` check of `car doctor`: the embedding model and whether every entry has its
/// vector (a backfill after an upgrade may still be under way).
fn meaning_check(memory: &Memory) -> Check {
    let card = crate::memory::embed::card();
    let model = format!(
        "{}, {} dimensions, {} (assets/embed/NOTICE)",
        card.name, card.dims, card.licence
    );
    match crate::memory::missing_vectors(memory.store()) {
        Ok(0) => Check::new("meaning", true, format!("{model}; every entry embedded")),
        Ok(missing) => Check::new(
            "meaning",
            true,
            format!("{model}; {missing} entries still to embed (a server embeds them in the background, `car memory import` at once; until then they are found by their words)"),
        ),
        Err(e) => Check::new("meaning", false, format!("{model}; {e}")),
    }
}

/// The `hosts` check of `car doctor`: which agent hosts' files run CAR's gate, for the user or
/// this project (`car setup <host>` wires one; Claude Code's plugin is the other way in).
pub(crate) fn hosts_check(project_root: &Path) -> Check {
    use crate::hooks::hosts::Host;
    let wired: Vec<String> = Host::ALL
        .into_iter()
        .filter_map(|host| {
            let scopes = crate::setup::wired(host, project_root);
            (!scopes.is_empty()).then(|| {
                let scopes: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
                format!("{} ({})", host.as_str(), scopes.join(", "))
            })
        })
        .collect();
    let mut detail = if wired.is_empty() {
        "no host's settings run CAR's gate (`car setup claude-code|codex|gemini|cursor` wires one; Claude Code's plugin is another way)".to_string()
    } else {
        format!("gate wired in {}", wired.join("; "))
    };
    // The packages run car-gate from PATH (falling back to `car policy-check-hook`, slower).
    if crate::setup::Binaries::beside_current().car_gate.is_none() {
        detail.push_str(
            "; car-gate is not installed beside car: the gate runs as `car policy-check-hook`, which answers the same but starts slower (reinstall CAR to get it)",
        );
    }
    Check::new("hosts", true, detail)
}

/// The `policies` check of `car doctor`.
fn policy_check(home: &Home, project_root: &Path) -> Check {
    let engine = PolicyEngine::load(&home.policies_dir(), project_root, project_root);
    let set = engine.rules();
    let detail = match &set.failure {
        Some(failure) => format!("{failure}; every tool call is denied until it is fixed"),
        None => format!(
            "{} rule(s) from {}",
            set.rules.len(),
            set.sources
                .iter()
                .map(|s| s.path.display().to_string())
                .collect::<Vec<_>>()
                .join(" then ")
        ),
    };
    Check::new("policies", set.failure.is_none(), detail)
}

/// connectors.json parses, and the keychain is reachable when a connector keeps secrets there.
/// Whether this CAR_HOME's car-server runs (not running is fine: car-mcp needs none).
fn daemon_check(home: &Home) -> Check {
    let dir = crate::server::lifecycle::DaemonDir::new(home.root());
    match crate::server::lifecycle::running(&dir) {
        Some(state) => Check::new(
            "daemon",
            true,
            format!(
                "car-server runs (pid {}), MCP at {}",
                state.pid, state.mcp_url
            ),
        ),
        None => Check::new(
            "daemon",
            true,
            "not running (`car daemon start` shares one engine over HTTP)",
        ),
    }
}

/// Where `car do` would run shell commands: the sandbox and its layers, and whether the Docker
/// engine answers for `--sandbox docker` (optional: only that flag needs it).
fn sandbox_check(project_root: &Path) -> Check {
    let engine = crate::agent::sandbox::docker_engine();
    let docker = match &engine {
        Ok(version) => format!("docker: engine {version} reachable"),
        Err(_) => "docker: not reachable (only --sandbox docker needs it)".into(),
    };
    match sandbox_in(project_root) {
        Ok(sandbox) => Check::new("sandbox", true, format!("{sandbox}; {docker}")),
        // car do still runs with --sandbox docker when the engine answers.
        Err(why) => Check::new("sandbox", engine.is_ok(), format!("{why}; {docker}")),
    }
}

/// The sandbox `car do` would run commands under in `project_root`, in words, or why there is
/// none (the dashboard's health strip says the same as `car doctor`).
pub(crate) fn sandbox_in(project_root: &Path) -> Result<String, String> {
    use crate::agent::sandbox::{Request, Sandbox, Writes};
    Sandbox::choose(Request::Auto, project_root, Writes::Project).map(|sandbox| {
        format!(
            "car do runs commands under {}, network {}{}",
            sandbox.mode,
            sandbox.network,
            if sandbox.layers.iter().any(|l| l.starts_with("seccomp:")) {
                ", seccomp socket filter"
            } else {
                ""
            }
        )
    })
}

fn connectors_check(home: &Home) -> Check {
    let list = match crate::connectors::config::load(home.root()) {
        Ok(file) => file.connectors,
        Err(e) => return Check::new("connectors", false, e.to_string()),
    };
    if list.is_empty() {
        return Check::new("connectors", true, "none");
    }
    let enabled: usize = list.iter().map(|c| c.enabled.len()).sum();
    let summary = format!("{} ({enabled} tools enabled)", list.len());
    let with_secrets = list
        .iter()
        .filter(|c| {
            crate::connectors::ConnectorStatus::from(*c).auth
                != crate::connectors::outcome::Auth::None
        })
        .count();
    if with_secrets == 0 {
        return Check::new("connectors", true, summary);
    }
    match crate::secrets::Secrets::open(home.root()) {
        Ok(secrets) => Check::new(
            "connectors",
            true,
            format!(
                "{summary}; {with_secrets} keep secrets in the keychain ({})",
                secrets.backend()
            ),
        ),
        Err(e) => Check::new(
            "connectors",
            false,
            format!("{summary}; {with_secrets} need the keychain, which is unreachable: {e}"),
        ),
    }
}

fn tempfile_probe(dir: &std::path::Path) -> bool {
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}
