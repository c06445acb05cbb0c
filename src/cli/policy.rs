//! `car policy check|list|lint|init` and `car policy-check-hook`. `check` goes through the
//! `policy_check` tool; `list`, `lint` and the hook read rule files only and never open the
//! database (the hook runs before every tool call of Claude Code, so it must stay fast).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use super::{call_tool, finish, open_app, Env, Failure};
use crate::home::{Home, HomeError};
use crate::policy::hook::{self, HookAnswer};
use crate::policy::preset::{self, Overwrite, PresetError};
use crate::policy::{rules, PolicyEngine};
use crate::project::lifecycle::Check;

const INIT_HELP: &str = "\
Presets:
  recommended  blocks history-destroying git (reset --hard, push --force, clean -f, checkout -- .,
               stash clear, branch -D), recursive rm of /, ~ or anything outside the project,
               find -delete, dd/mkfs onto devices, recursive chmod/chown outside the project,
               curl|sh installs and reads of secrets (~/.ssh, .env, cloud credentials), also
               inside bash -c, sudo, env, timeout, xargs, $(...) and git -C. Ordinary work such
               as rm -rf target/, git push origin main and git push --force-with-lease passes.

The file is plain TOML with a comment on every rule: edit or delete rules freely, then check
it with `car policy lint`. Claude Code reads it through the hook `car policy-check-hook`.

Examples:
  car policy init --preset recommended            # <project>/.car/policies/recommended.toml
  car policy init --preset recommended --global   # $CAR_HOME/policies/recommended.toml
  car policy check Bash --params '{\"command\":\"git push -f\"}'";

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Ask the policy what it would decide about a call (exit 1 on deny).
    Check {
        /// The tool name, e.g. Bash or memory_add_fact.
        tool: String,
        /// The call's arguments as a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        params: String,
    },
    /// Show where rules are read from and every loaded rule.
    List,
    /// Parse the rule files (default: the ones that apply here) and check their regexes; exit 1 on any error.
    Lint {
        /// Rule files to check instead of the ones that apply here.
        files: Vec<PathBuf>,
    },
    /// Write a built-in rule preset to <project>/.car/policies/<preset>.toml (or CAR_HOME's with --global).
    #[command(after_help = INIT_HELP)]
    Init {
        /// The preset to write (the only one today: recommended).
        #[arg(long, value_name = "NAME")]
        preset: String,
        /// Write under $CAR_HOME/policies, for every project, instead of the project's .car/policies.
        #[arg(long)]
        global: bool,
        /// Replace the file if it exists (otherwise it is left unchanged and the command fails).
        #[arg(long)]
        force: bool,
    },
}

fn init(env: &Env, name: &str, global: bool, force: bool) -> Result<Value, Failure> {
    let dir = if global {
        env.home.policies_dir()
    } else {
        env.project_root.join(".car").join("policies")
    };
    let overwrite = if force {
        Overwrite::Replace
    } else {
        Overwrite::Refuse
    };
    match preset::write(name, &dir, overwrite) {
        Ok(written) => Ok(json!({
            "preset": name,
            "scope": if global { "global" } else { "project" },
            "path": written.path,
            "rules": written.rules,
            "replaced": written.replaced,
        })),
        Err(e @ PresetError::Unknown { .. }) => Err(Failure::usage(e.to_string())),
        Err(e @ PresetError::Exists(_)) => Err(Failure::new("exists", e.to_string())),
        Err(e @ PresetError::Io { .. }) => Err(Failure::new("io", e.to_string())),
    }
}

/// The note for each parent directory whose rules do not apply.
fn parent_notes(env: &Env) -> Vec<String> {
    rules::ignored_parent_dirs(&env.project_root, &env.home.policies_dir())
        .iter()
        .map(|dir| {
            format!(
                "{} has rules that do NOT apply here: project rules are read from {} only (never a parent directory)",
                dir.display(),
                env.project_root.join(".car").join("policies").display()
            )
        })
        .collect()
}

/// The `policies` check of `car doctor`.
pub(crate) fn doctor_check(env: &Env) -> Check {
    let engine = PolicyEngine::load(&env.home.policies_dir(), &env.project_root);
    let set = engine.rules();
    let mut detail = match &set.failure {
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
    for note in parent_notes(env) {
        detail.push_str("; ");
        detail.push_str(&note);
    }
    Check::new("policies", set.failure.is_none(), detail)
}

fn list(env: &Env) -> Result<Value, Failure> {
    let engine = PolicyEngine::load(&env.home.policies_dir(), &env.project_root);
    let set = engine.rules();
    let rules: Vec<Value> = set
        .rules
        .iter()
        .map(|r| json!({"rule": r.name(), "file": r.file}))
        .collect();
    Ok(json!({
        "policy_sources": set.sources,
        "rules": rules,
        "egress": {"allow_hosts": set.egress.allow_hosts, "strict": set.egress.strict},
        "load_error": set.failure.as_ref().map(ToString::to_string),
        "notes": parent_notes(env),
    }))
}

fn render_list(data: &Value) -> String {
    let mut out = String::new();
    for source in data["policy_sources"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{} ({}, {} rule(s))\n",
            source["path"].as_str().unwrap_or(""),
            if source["exists"] == true {
                "exists"
            } else {
                "missing"
            },
            source["rules"]
        ));
    }
    for rule in data["rules"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  [{}]\n",
            rule["rule"].as_str().unwrap_or(""),
            rule["file"].as_str().unwrap_or("")
        ));
    }
    if let Some(error) = data["load_error"].as_str() {
        out.push_str(&format!("LOAD ERROR (every call is denied): {error}\n"));
    }
    for note in data["notes"].as_array().into_iter().flatten() {
        out.push_str(&format!("note: {}\n", note.as_str().unwrap_or("")));
    }
    out
}

fn lint(env: &Env, files: &[PathBuf]) -> Result<Value, Failure> {
    let files = if files.is_empty() {
        let mut found = Vec::new();
        for dir in rules::rule_dirs(&env.home.policies_dir(), &env.project_root) {
            found.extend(rules::toml_files(&dir).map_err(|e| Failure::new("io", e.to_string()))?);
        }
        found
    } else {
        files.to_vec()
    };
    let reports: Vec<Value> = files
        .iter()
        .map(|file| {
            let parsed = std::fs::read_to_string(file)
                .map_err(|e| rules::LoadFailure {
                    file: file.clone(),
                    line: None,
                    message: format!("cannot read: {e}"),
                })
                .and_then(|text| rules::parse(file, &text));
            match parsed {
                Ok((rules, _)) => json!({"file": file, "ok": true, "rules": rules.len()}),
                Err(e) => {
                    json!({"file": file, "ok": false, "line": e.line, "error": e.to_string()})
                }
            }
        })
        .collect();
    let errors = reports.iter().filter(|r| r["ok"] == false).count();
    let data = json!({"files": reports, "errors": errors});
    if errors > 0 {
        let messages: Vec<&str> = data["files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["error"].as_str())
            .collect();
        return Err(Failure::new("invalid_policy", messages.join("\n")));
    }
    Ok(data)
}

pub async fn run(env: &Env, command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Check { tool, params } => {
            let name = "policy.check";
            let params: Value = match serde_json::from_str(&params) {
                Ok(value @ Value::Object(_)) => value,
                Ok(_) | Err(_) => {
                    let f = Failure::usage("--params must be a JSON object");
                    return finish(env.json, name, Err(f), |_| String::new());
                }
            };
            let app = match open_app(env) {
                Ok(r) => r,
                Err(f) => return finish(env.json, name, Err(f), |_| String::new()),
            };
            let result = call_tool(
                &app,
                "policy_check",
                json!({"tool": tool, "params": params}),
                None,
            )
            .await;
            let denied = matches!(&result, Ok(data) if data["decision"] == "deny");
            let code = finish(env.json, name, result, |data| {
                let mut out = format!(
                    "{} ({})\n",
                    data["decision"].as_str().unwrap_or(""),
                    data["basis"].as_str().unwrap_or("")
                );
                for f in data["findings"].as_array().into_iter().flatten() {
                    out.push_str(&format!(
                        "  {:<5} {}: {}\n",
                        f["severity"].as_str().unwrap_or(""),
                        f["rule"].as_str().unwrap_or(""),
                        f["reason"].as_str().unwrap_or("")
                    ));
                }
                out
            });
            if denied {
                ExitCode::from(1)
            } else {
                code
            }
        }
        PolicyCommand::List => finish(env.json, "policy.list", list(env), render_list),
        PolicyCommand::Init {
            preset,
            global,
            force,
        } => finish(
            env.json,
            "policy.init",
            init(env, &preset, global, force),
            |data| {
                format!(
                    "{} {} ({} rules of preset '{}'); edit it freely, check it with `car policy lint`\n",
                    if data["replaced"] == true { "replaced" } else { "wrote" },
                    data["path"].as_str().unwrap_or(""),
                    data["rules"],
                    data["preset"].as_str().unwrap_or("")
                )
            },
        ),
        PolicyCommand::Lint { files } => {
            finish(env.json, "policy.lint", lint(env, &files), |data| {
                let mut out = String::new();
                for f in data["files"].as_array().into_iter().flatten() {
                    out.push_str(&format!(
                        "ok  {} ({} rule(s))\n",
                        f["file"].as_str().unwrap_or(""),
                        f["rules"]
                    ));
                }
                if out.is_empty() {
                    out.push_str("no rule files\n");
                }
                out
            })
        }
    }
}

/// `car policy-check-hook` with the resolved home (`--home`, else `CAR_HOME`, else `~/.car`):
/// always exits 0; stdout holds the deny JSON or nothing.
pub fn hook(home: Result<Home, HomeError>) -> ExitCode {
    let note =
        |message: &str| super::console::stderr_line(&format!("car policy-check-hook: {message}"));
    let home = match home {
        Ok(home) => home,
        Err(e) => {
            note(&format!("{e}; not evaluated"));
            return ExitCode::SUCCESS;
        }
    };
    let mut payload = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(64 * 1024 * 1024)
        .read_to_end(&mut payload)
    {
        note(&format!("cannot read the payload ({e}); not evaluated"));
        return ExitCode::SUCCESS;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| Path::new("/").to_path_buf());
    match hook::answer(&payload, &home.policies_dir(), &cwd) {
        HookAnswer::Allow { warnings } => {
            for warning in warnings {
                note(&format!("warning: {warning}"));
            }
        }
        HookAnswer::Deny { output } => super::console::stdout(&format!("{output}\n")),
        HookAnswer::FailOpen { note: message } => note(&message),
    }
    ExitCode::SUCCESS
}
