//! `car policy check|list|lint|init` and `car policy-check-hook`. `check` goes through the
//! `policy_check` tool; `list`, `lint` and the hook read rule files only and never open the
//! database (the hook runs before every tool call of Claude Code, so it must stay fast).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{call_tool, finish, finish_typed, human_as, open_app, tool_args, Env, Failure};
use crate::home::{Home, HomeError};
use crate::hooks::hosts::Host;
use crate::policy::gate_log;
use crate::policy::hook::{self, HookAnswer};
use crate::policy::preset::{self, Overwrite, PresetError};
use crate::policy::{rules, CheckArgs, Decision, Evaluation, PolicyEngine};

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

/// Where `policy init` writes a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `$CAR_HOME/policies`, for every project.
    Global,
    /// `<project>/.car/policies`.
    Project,
}

/// What `policy init` wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Initialized {
    pub preset: String,
    pub scope: Scope,
    /// The rule file written.
    pub path: PathBuf,
    /// How many rules it holds.
    pub rules: usize,
    /// Whether it replaced a file that was there (`--force`).
    pub replaced: bool,
}

fn init(env: &Env, name: &str, scope: Scope, overwrite: Overwrite) -> Result<Initialized, Failure> {
    let dir = match scope {
        Scope::Global => env.home.policies_dir(),
        Scope::Project => env.project_root.join(".car").join("policies"),
    };
    match preset::write(name, &dir, overwrite) {
        Ok(written) => Ok(Initialized {
            preset: name.to_string(),
            scope,
            path: written.path,
            rules: written.rules,
            replaced: written.replaced,
        }),
        Err(e @ PresetError::Unknown { .. }) => Err(Failure::usage(e.to_string())),
        Err(e @ PresetError::Exists(_)) => Err(Failure::new("exists", e.to_string())),
        Err(e @ PresetError::Io { .. }) => Err(Failure::new("io", e.to_string())),
    }
}

fn human_init(done: &Initialized) -> String {
    format!(
        "{} {} ({} rules of preset '{}'); edit it freely, check it with `car policy lint`\n",
        if done.replaced { "replaced" } else { "wrote" },
        done.path.display(),
        done.rules,
        done.preset
    )
}

/// What `policy list` shows: where rules are read from and every rule loaded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listing {
    pub policy_sources: Vec<rules::Source>,
    pub rules: Vec<ListedRule>,
    pub egress: Egress,
    /// Why the rules did not load (every call is denied until it is fixed); null when they did.
    pub load_error: Option<String>,
}

/// One loaded rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListedRule {
    /// Its name in findings, e.g. `deny_tool:deploy`.
    pub rule: String,
    /// The file it is read from.
    pub file: PathBuf,
}

/// The egress guard's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Egress {
    /// Hosts added to the default allowlist.
    pub allow_hosts: Vec<String>,
    /// Whether warnings are denials.
    pub strict: bool,
}

fn list(env: &Env) -> Listing {
    let engine = PolicyEngine::load(
        &env.home.policies_dir(),
        &env.project_root,
        &env.project_root,
    );
    let set = engine.rules();
    Listing {
        policy_sources: set.sources.clone(),
        rules: set
            .rules
            .iter()
            .map(|r| ListedRule {
                rule: r.name(),
                file: r.file.clone(),
            })
            .collect(),
        egress: Egress {
            allow_hosts: set.egress.allow_hosts.clone(),
            strict: set.egress.strict,
        },
        load_error: set.failure.as_ref().map(ToString::to_string),
    }
}

fn render_list(listing: &Listing) -> String {
    let mut out = String::new();
    for source in &listing.policy_sources {
        out.push_str(&format!(
            "{} ({}, {} rule(s))\n",
            source.path.display(),
            if source.exists { "exists" } else { "missing" },
            source.rules
        ));
    }
    for rule in &listing.rules {
        out.push_str(&format!("  {}  [{}]\n", rule.rule, rule.file.display()));
    }
    if let Some(error) = &listing.load_error {
        out.push_str(&format!("LOAD ERROR (every call is denied): {error}\n"));
    }
    out
}

/// What `policy lint` found in each rule file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LintReport {
    pub files: Vec<Linted>,
    /// How many files did not parse.
    pub errors: usize,
}

/// One rule file, checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Linted {
    pub file: PathBuf,
    /// Whether it parsed (then `rules` says how many it holds; else `line` and `error` why not).
    pub ok: bool,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// A rule file's lint verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Verdict {
    Parsed {
        rules: usize,
    },
    Failed {
        /// The 1-based line, when known.
        line: Option<usize>,
        error: String,
    },
}

fn lint_file(file: &Path) -> Linted {
    let parsed = std::fs::read_to_string(file)
        .map_err(|e| rules::LoadFailure {
            file: file.to_path_buf(),
            line: None,
            message: format!("cannot read: {e}"),
        })
        .and_then(|text| rules::parse(file, &text));
    let verdict = match parsed {
        Ok((rules, _)) => Verdict::Parsed { rules: rules.len() },
        Err(e) => Verdict::Failed {
            line: e.line,
            error: e.to_string(),
        },
    };
    Linted {
        file: file.to_path_buf(),
        ok: matches!(verdict, Verdict::Parsed { .. }),
        verdict,
    }
}

fn lint(env: &Env, files: &[PathBuf]) -> Result<LintReport, Failure> {
    let files = if files.is_empty() {
        let mut found = Vec::new();
        for dir in rules::rule_dirs(
            &env.home.policies_dir(),
            &env.project_root,
            &env.project_root,
        ) {
            found.extend(
                rules::toml_files(&dir.dir).map_err(|e| Failure::new("io", e.to_string()))?,
            );
        }
        found
    } else {
        files.to_vec()
    };
    let files: Vec<Linted> = files.iter().map(|file| lint_file(file)).collect();
    let messages: Vec<&str> = files
        .iter()
        .filter_map(|linted| match &linted.verdict {
            Verdict::Failed { error, .. } => Some(error.as_str()),
            Verdict::Parsed { .. } => None,
        })
        .collect();
    if !messages.is_empty() {
        return Err(Failure::new("invalid_policy", messages.join("\n")));
    }
    Ok(LintReport {
        errors: messages.len(),
        files,
    })
}

fn human_lint(report: &LintReport) -> String {
    let mut out = String::new();
    for linted in &report.files {
        if let Verdict::Parsed { rules } = linted.verdict {
            out.push_str(&format!(
                "ok  {} ({rules} rule(s))\n",
                linted.file.display()
            ));
        }
    }
    if out.is_empty() {
        out.push_str("no rule files\n");
    }
    out
}

fn human_evaluation(evaluation: &Evaluation) -> String {
    let mut out = format!(
        "{} ({})\n",
        evaluation.decision.as_str(),
        evaluation.basis.as_str()
    );
    for f in &evaluation.findings {
        out.push_str(&format!(
            "  {:<5} {}: {}\n",
            f.severity.as_str(),
            f.rule,
            f.reason
        ));
    }
    out
}

pub async fn run(env: &Env, command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Check { tool, params } => {
            let name = "policy.check";
            let params = match serde_json::from_str(&params) {
                Ok(Value::Object(params)) => params,
                Ok(_) | Err(_) => {
                    let f = Failure::usage("--params must be a JSON object");
                    return finish(env.json, name, Err(f), |_| String::new());
                }
            };
            let app = match open_app(env) {
                Ok(r) => r,
                Err(f) => return finish(env.json, name, Err(f), |_| String::new()),
            };
            let args = CheckArgs {
                tool,
                params,
                state: Default::default(),
            };
            let result = match tool_args(&args) {
                Ok(args) => call_tool(&app, "policy_check", args, None).await,
                Err(f) => Err(f),
            };
            let denied = matches!(&result, Ok(data) if Evaluation::deserialize(data)
                .is_ok_and(|evaluation| evaluation.decision == Decision::Deny));
            let code = finish(env.json, name, result, |data| {
                human_as(data, human_evaluation)
            });
            if denied {
                ExitCode::from(1)
            } else {
                code
            }
        }
        PolicyCommand::List => finish_typed(env.json, "policy.list", Ok(list(env)), render_list),
        PolicyCommand::Init {
            preset,
            global,
            force,
        } => {
            let scope = if global {
                Scope::Global
            } else {
                Scope::Project
            };
            let overwrite = if force {
                Overwrite::Replace
            } else {
                Overwrite::Refuse
            };
            let done = init(env, &preset, scope, overwrite);
            finish_typed(env.json, "policy.init", done, human_init)
        }
        PolicyCommand::Lint { files } => {
            finish_typed(env.json, "policy.lint", lint(env, &files), human_lint)
        }
    }
}

/// The files a shell reads before it runs a hook's command (a login shell's profile, zsh's and
/// fish's start-up files) and Gemini CLI's environment file: guarded like the hook itself.
const SHELL_STARTUP: &[&str] = &[
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".bashrc",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".config/fish",
    ".gemini/.env",
    // Which Gemini CLI extensions load, and CAR's own.
    ".gemini/extensions/extension-enablement.json",
    ".gemini/extensions/car",
    // Which folders Gemini CLI trusts: an untrusted project's hooks (`car setup gemini
    // --project`) do not run.
    ".gemini/trustedFolders.json",
];

/// The programs a host's hooks run: `car` (`car policy-check-hook`, the memory hooks) and
/// `car-gate`.
const HOOK_PROGRAMS: [&str; 2] = ["car", "car-gate"];

/// A program's file name on this platform (`car-gate.exe` on Windows).
fn program_file(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// `car policy-check-hook` with the resolved home (`--home`, else `CAR_HOME`, else `~/.car`):
/// its exit status is always 0; stdout holds the host's answer.
/// `name` is how its notes on stderr begin (`car policy-check-hook` or `car-gate`).
pub fn hook(home: Result<Home, HomeError>, host: Option<Host>, name: &str) {
    let note = |message: &str| super::console::stderr_line(&format!("{name}: {message}"));
    let home = match home {
        Ok(home) => home,
        Err(e) => {
            note(&format!("{e}; not evaluated"));
            return;
        }
    };
    let mut payload = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(64 * 1024 * 1024)
        .read_to_end(&mut payload)
    {
        note(&format!("cannot read the payload ({e}); not evaluated"));
        return;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| Path::new("/").to_path_buf());
    // What runs this hook is guarded like the rules: the plugin Claude Code ran it from, and
    // this executable.
    let plugin_root = std::env::var_os(crate::home::env::CLAUDE_PLUGIN_ROOT)
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute());
    // This executable, and `car` and `car-gate` beside it (installed together: either one may
    // be what a host's hook runs).
    let exe: Vec<std::path::PathBuf> = std::env::current_exe()
        .ok()
        .map(|exe| {
            let siblings = HOOK_PROGRAMS.map(|name| exe.with_file_name(program_file(name)));
            std::iter::once(exe).chain(siblings).collect()
        })
        .unwrap_or_default();
    // A `car` or `car-gate` earlier on PATH would be run instead of this one, and Claude Code's
    // record of installed plugins decides whether the plugin loads at all.
    let on_path: Vec<std::path::PathBuf> = std::env::var_os(crate::home::env::PATH)
        .map(|path| {
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .flat_map(|dir| HOOK_PROGRAMS.map(|name| dir.join(program_file(name))))
                .collect()
        })
        .unwrap_or_default();
    let plugins = crate::home::user_home().map(|home| home.join(".claude").join("plugins"));
    // Codex runs hooks through a login shell and Gemini CLI with the variables of its `.env`:
    // a line in a shell start-up file (`exit 0`) or a `BASH_ENV` there would silence the gate.
    let startup: Vec<std::path::PathBuf> = crate::home::user_home()
        .map(|home| SHELL_STARTUP.iter().map(|name| home.join(name)).collect())
        .unwrap_or_default();
    // The gate's decision file: an agent that deletes or rewrites it hides its denied calls
    // from the audit log.
    let decisions = [
        home.gate_log_path(),
        gate_log::rotated(&home.gate_log_path()),
    ];
    let hooks: Vec<&Path> = plugin_root
        .iter()
        .chain(exe.iter())
        .chain(on_path.iter())
        .chain(plugins.iter())
        .chain(startup.iter())
        .chain(decisions.iter())
        .map(|p| p.as_path())
        .collect();
    let print = |output: Option<&str>| {
        if let Some(output) = output {
            super::console::stdout(&format!("{output}\n"));
        }
    };
    // Each deny and warning goes to the decision file the audit log reads; a file that cannot
    // be written costs a note, never the answer.
    let log = |entry: Option<Box<gate_log::Entry>>| {
        if let Some(entry) = entry {
            match gate_log::append(&home.gate_log_path(), &entry) {
                // No CAR home yet: nothing reads a log there either.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => note(&format!("cannot log the decision ({e})")),
                Ok(()) => {}
            }
        }
    };
    match hook::answer(&payload, host, &home.policies_dir(), &cwd, &hooks) {
        HookAnswer::Allow {
            output,
            warnings,
            logged,
        } => {
            for warning in warnings {
                note(&format!("warning: {warning}"));
            }
            print(output);
            log(logged);
        }
        HookAnswer::Deny { output, logged } => {
            print(Some(&output));
            log(logged);
        }
        HookAnswer::FailOpen {
            output,
            note: message,
        } => {
            note(&message);
            print(output);
        }
    }
}
