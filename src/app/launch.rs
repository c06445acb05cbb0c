//! Launching a run of CAR's governed agent: the model, the sandbox and an [`App`] with the
//! workspace tools, from `car do`'s flags or the daemon's `assistant_start` arguments. It draws
//! on several capabilities (the agent, the sandbox, the secrets of `car keys`), so it lives in
//! the composition root; the CLI and car-server both launch through it.

use std::path::Path;
use std::sync::Arc;

use super::App;
use crate::agent::model::{Model, ModelConfig, Provider};
use crate::agent::runs::{Launch, Runs, StartArgs};
use crate::agent::sandbox::{Request, Sandbox, SandboxChoice, Writes};
use crate::agent::tools::Workspace;
use crate::agent::{self, Checkpoint, Failure, Task};
use crate::home::Home;
use crate::runtime::{Context, Face};
use crate::secrets::Secrets;

/// The keychain account of a provider's API key (`car keys`).
pub fn key_account(provider: Provider) -> String {
    format!("model/{}", provider.as_str())
}

/// A provider's key: the environment first, then the keychain.
pub fn key_for(home: &Home, provider: Provider) -> Option<String> {
    if let Some(key) = std::env::var(provider.key_env())
        .ok()
        .filter(|k| !k.trim().is_empty())
    {
        return Some(key);
    }
    Secrets::open(home.root())
        .ok()?
        .get(&key_account(provider))
        .ok()
        .flatten()
}

/// What a run is asked for, from `car do`'s flags or `assistant_start`'s arguments.
#[derive(Debug, Clone)]
pub struct Options {
    pub task: String,
    pub model: Option<String>,
    pub provider: Option<Provider>,
    pub base_url: Option<String>,
    pub max_turns: u32,
    pub token_budget: u64,
    pub max_tokens: u32,
    pub no_sandbox: bool,
    pub sandbox: SandboxChoice,
    pub image: String,
    pub allow_git_writes: bool,
    /// Change nothing (`assistant_start {local: true}`).
    pub read_only: bool,
    /// Where the run works, when not the project root (a directory inside the project).
    pub workdir: Option<std::path::PathBuf>,
    pub until: Option<String>,
    /// The hosts that led to this run, outermost first.
    pub invoked_by: Vec<String>,
    pub resume: Option<String>,
}

impl Options {
    /// `assistant_start`'s arguments, with the daemon's defaults for the rest; `workdir` is
    /// its `cwd`, resolved ([`workdir_of`]).
    pub fn of_start(args: &StartArgs, workdir: std::path::PathBuf) -> Options {
        Options {
            task: args.task.clone(),
            model: args
                .model
                .clone()
                .or_else(|| std::env::var(crate::home::env::CAR_DO_MODEL).ok()),
            provider: None,
            base_url: None,
            max_turns: args
                .max_turns
                .unwrap_or(crate::agent::runs::DEFAULT_TURNS)
                .clamp(1, crate::agent::runs::MAX_TURNS),
            token_budget: 1_000_000,
            max_tokens: 8192,
            no_sandbox: false,
            sandbox: args.sandbox.unwrap_or(SandboxChoice::Auto),
            image: args
                .image
                .clone()
                .or_else(|| std::env::var(crate::home::env::CAR_DO_IMAGE).ok())
                .unwrap_or_else(|| crate::agent::sandbox::DEFAULT_IMAGE.into()),
            allow_git_writes: false,
            read_only: args.local,
            workdir: Some(workdir),
            until: args.until.clone(),
            invoked_by: crate::agent::runs::ancestry(args.invoked_by)
                .iter()
                .map(|h| h.as_str().to_string())
                .collect(),
            resume: None,
        }
    }
}

/// `assistant_start`'s `cwd`: the project root, or a directory inside it (relative paths from
/// the project root); anything else is refused, so a client cannot point a run elsewhere.
pub fn workdir_of(project_root: &Path, cwd: Option<&str>) -> Result<std::path::PathBuf, String> {
    let root = project_root
        .canonicalize()
        .unwrap_or_else(|_| project_root.to_path_buf());
    let Some(cwd) = cwd.filter(|c| !c.trim().is_empty()) else {
        return Ok(root);
    };
    let asked = root.join(cwd);
    let dir = asked
        .canonicalize()
        .map_err(|e| format!("cwd {cwd} cannot be used: {e}"))?;
    if !dir.is_dir() {
        return Err(format!("cwd {cwd} is not a directory"));
    }
    if !dir.starts_with(&root) {
        return Err(format!(
            "cwd {cwd} is outside the project this daemon serves ({}); start car-server in that project to run there",
            root.display()
        ));
    }
    Ok(dir)
}

/// Why a run could not start: the failure, the sandbox if one was chosen, the exit code.
pub struct Refused {
    pub failure: Failure,
    pub sandbox: Option<Sandbox>,
    pub exit: u8,
}

/// The model, the sandbox and an `App` with the workspace tools, for one run.
pub fn prepare(
    home: &Home,
    project_root: &Path,
    options: &Options,
) -> Result<Launch, Box<Refused>> {
    let model_name = options.model.clone().unwrap_or_default();
    let provider = options
        .provider
        .unwrap_or_else(|| Provider::infer(&model_name));
    let runs_dir = home.root().join("runs");
    let resume = match &options.resume {
        Some(id) => Some(Checkpoint::load(&runs_dir, id).map_err(|message| {
            Box::new(Refused {
                failure: Failure {
                    kind: agent::FailureKind::InvalidArguments,
                    message,
                    suggestions: vec![format!(
                        "the runs that can be resumed are in {}",
                        runs_dir.display()
                    )],
                },
                sandbox: None,
                exit: 2,
            })
        })?),
        None => None,
    };
    if model_name.trim().is_empty() {
        return Err(Box::new(Refused {
            failure: Failure {
                kind: agent::FailureKind::InvalidArguments,
                message: "no model named: pass --model or set CAR_DO_MODEL".into(),
                suggestions: vec!["car do --model claude-sonnet-4-5 \"…\"".into()],
            },
            sandbox: None,
            exit: 2,
        }));
    }
    let request = match (options.no_sandbox, options.sandbox) {
        (true, _) => Request::Off,
        (false, SandboxChoice::Auto) => Request::Auto,
        (false, SandboxChoice::Docker) => Request::Docker {
            image: options.image.clone(),
        },
    };
    let writes = match (options.read_only, options.allow_git_writes) {
        (true, _) => Writes::Nothing,
        (false, true) => Writes::ProjectAndGit,
        (false, false) => Writes::Project,
    };
    let workdir = options.workdir.as_deref().unwrap_or(project_root);
    let sandbox = Sandbox::choose(request, workdir, writes).map_err(|why| Refused {
        failure: Failure {
            kind: agent::FailureKind::SandboxUnavailable,
            message: why,
            suggestions: match options.sandbox {
                SandboxChoice::Auto => vec![
                    "apt install bubblewrap".into(),
                    "car do --sandbox docker --image IMAGE …".into(),
                    "car do --no-sandbox …".into(),
                ],
                SandboxChoice::Docker => vec![
                    "start the Docker engine (or set DOCKER_HOST)".into(),
                    "car do --sandbox auto … (bubblewrap)".into(),
                ],
            },
        },
        sandbox: None,
        exit: 1,
    })?;
    let model = Model::new(ModelConfig {
        provider,
        model: model_name,
        base_url: options.base_url.clone(),
        max_tokens: options.max_tokens,
        api_key: key_for(home, provider),
    })
    .map_err(|e| {
        Box::new(Refused {
            failure: Failure {
                kind: agent::FailureKind::AssistantLoopFailed,
                message: e.to_string(),
                suggestions: vec![format!("export {}=…", provider.key_env())],
            },
            sandbox: Some(sandbox.clone()),
            exit: 1,
        })
    })?;
    let workspace = Arc::new(Workspace {
        root: sandbox.root.clone(),
        sandbox: sandbox.clone(),
        invoked_by: options.invoked_by.clone(),
    });
    let app = App::open_at(
        home,
        project_root,
        workdir,
        agent::tools::tools(workspace.clone()),
    )
    .map_err(|e| {
        Box::new(Refused {
            failure: Failure {
                kind: agent::FailureKind::AssistantLoopFailed,
                message: e.to_string(),
                suggestions: vec![],
            },
            sandbox: Some(sandbox.clone()),
            exit: 1,
        })
    })?;
    let run_id = resume.as_ref().map_or_else(
        || uuid::Uuid::new_v4().simple().to_string(),
        |c| c.run_id.clone(),
    );
    Ok(Launch {
        model,
        sandbox,
        runtime: Arc::new(app),
        // The run's calls carry its id as their session in the execution log.
        context: Context::new(Face::Agent)
            .grants(crate::home::confirm_grants_from_env())
            .session(run_id.as_str()),
        task: Task {
            task: resume
                .as_ref()
                .map_or_else(|| options.task.clone(), |c| c.task.clone()),
            run_id,
            checkpoints: std::fs::create_dir_all(&runs_dir)
                .ok()
                .map(|()| runs_dir.clone()),
            resume,
            max_turns: options.max_turns.max(1),
            token_budget: options.token_budget,
            until: options.until.clone(),
        },
    })
}

/// The daemon's runs: `assistant_start|poll|cancel` over runs prepared like `car do`'s.
pub fn daemon_runs(home: &Home, project_root: &Path) -> Runs {
    let home = home.clone();
    let root = project_root.to_path_buf();
    Runs::new(Arc::new(move |args: &StartArgs| {
        let workdir = workdir_of(&root, args.cwd.as_deref())?;
        prepare(&home, &root, &Options::of_start(args, workdir)).map_err(|refused| {
            let mut message = refused.failure.message;
            for suggestion in refused.failure.suggestions {
                message.push_str(&format!("; try: {suggestion}"));
            }
            message
        })
    }))
}
