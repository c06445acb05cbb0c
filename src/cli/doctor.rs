//! `car doctor`: checks the home, the database and the project, and says what to fix.

use serde::{Deserialize, Serialize};

use super::{render_typed, Env, Failure, Printed};
use crate::memory::Memory;
use crate::project::lifecycle::Check;
use crate::project::Mode;
use crate::store::Store;

/// What `car doctor` found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Doctor {
    /// Every check passed.
    pub healthy: bool,
    /// CAR_HOME.
    pub home: String,
    /// CAR's version.
    pub version: String,
    pub checks: Vec<Check>,
}

/// Runs the checks; with [`Mode::Apply`] (`--fix`), repairs what the project checks can.
pub(crate) fn execute(env: &Env, mode: Mode) -> Printed {
    let mut checks = Vec::new();
    let home = env.home.root();
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
    let db = env.home.db_path();
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
                Some(&env.project_root),
                Some(&env.home.assistant_json()),
            ) {
                Ok(memory) => {
                    let count = memory.entry_count("").unwrap_or(0);
                    checks.push(Check::new(
                        "memory",
                        true,
                        format!("{count} current entries visible from this project"),
                    ));
                }
                Err(e) => checks.push(Check::new("memory", false, e.to_string())),
            }
        }
        Err(e) => checks.push(Check::new("database", false, e.to_string())),
    }
    let assistant = env.home.assistant_json();
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
    checks.push(super::policy::doctor_check(env));
    checks.push(connectors_check(env));
    checks.push(daemon_check(env));
    checks.push(sandbox_check(env));
    checks.push(Check::new(
        "project",
        true,
        format!("{}", env.project_root.display()),
    ));
    checks.extend(super::session::doctor_checks(env, mode));
    let doctor = Doctor {
        healthy: checks.iter().all(|c| c.ok),
        home: home.display().to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        checks,
    };
    let result = if doctor.healthy {
        Ok(doctor)
    } else {
        Err(Failure::new(
            "unhealthy",
            format!(
                "some checks failed: {}",
                serde_json::to_value(&doctor.checks).unwrap_or_default()
            ),
        ))
    };
    render_typed(env.json, "doctor", result, |doctor| {
        doctor
            .checks
            .iter()
            .map(|c| {
                format!(
                    "{} {:<15} {}\n",
                    if c.ok { "ok  " } else { "FAIL" },
                    c.check,
                    c.detail
                )
            })
            .collect()
    })
}

/// connectors.json parses, and the keychain is reachable when a connector keeps secrets there.
/// Whether this CAR_HOME's car-server runs (not running is fine: car-mcp needs none).
fn daemon_check(env: &Env) -> Check {
    let dir = crate::server::lifecycle::DaemonDir::new(env.home.root());
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
fn sandbox_check(env: &Env) -> Check {
    use crate::agent::sandbox::{docker_engine, Request, Sandbox};
    let engine = docker_engine();
    let docker = match &engine {
        Ok(version) => format!("docker: engine {version} reachable"),
        Err(_) => "docker: not reachable (only --sandbox docker needs it)".into(),
    };
    match Sandbox::choose(Request::Auto, &env.project_root, false) {
        Ok(sandbox) => Check::new(
            "sandbox",
            true,
            format!(
                "car do runs commands under {}, network {}{}; {docker}",
                sandbox.mode,
                sandbox.network,
                if sandbox.layers.iter().any(|l| l.starts_with("seccomp:")) {
                    ", seccomp socket filter"
                } else {
                    ""
                }
            ),
        ),
        // car do still runs with --sandbox docker when the engine answers.
        Err(why) => Check::new("sandbox", engine.is_ok(), format!("{why}; {docker}")),
    }
}

fn connectors_check(env: &Env) -> Check {
    let list = match crate::connectors::config::load(env.home.root()) {
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
    match crate::secrets::Secrets::open(env.home.root()) {
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
