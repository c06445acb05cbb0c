//! `car reason "<problem>"`: one grounded answer (see `crate::agent::reason`).

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{console, open_app, Env};
use crate::agent::model::{Model, ModelConfig, Provider};
use crate::agent::reason::{self, Note, Reasoned};
use crate::runtime::{CallOptions, Context, Face};

pub const HELP: &str = "Examples:
  car reason \"why does the payout scheduler skip weekends?\"
  car reason --format json \"where is the retry limit set?\" | jq .files

It picks the files that bear on the problem (their paths and text, then one step through the
context graph's imports: run `car graph scan` first for that), adds what memory recalls, and asks
the small model — or the large one when the material passes --large-above tokens. Models:
--small-model / CAR_REASON_SMALL_MODEL (default $CAR_DO_MODEL), --large-model /
CAR_REASON_LARGE_MODEL (default the small one). Keys as for car do.";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ReasonArgs {
    /// The question or problem, in words.
    #[arg(required = true, num_args = 1.., value_name = "PROBLEM")]
    pub problem: Vec<String>,
    /// text: the answer for a person; json: the car.reason document.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// The model that answers over little material.
    #[arg(long, env = crate::home::env::CAR_REASON_SMALL_MODEL)]
    pub small_model: Option<String>,
    /// The model that answers over much material (past --large-above).
    #[arg(long, env = crate::home::env::CAR_REASON_LARGE_MODEL)]
    pub large_model: Option<String>,
    /// Past this many estimated tokens of material, the large model answers.
    #[arg(long, default_value_t = 6000, value_name = "TOKENS")]
    pub large_above: usize,
    /// The API the models speak (default: anthropic for claude-* models, else openai-compatible).
    #[arg(long, value_enum)]
    pub provider: Option<Provider>,
    /// The API's base URL (e.g. http://localhost:11434/v1 for Ollama).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
}

pub async fn run(env: &Env, args: ReasonArgs) -> ExitCode {
    let json = env.json || matches!(args.format, Format::Json);
    let problem = args.problem.join(" ");
    let fail = |message: String, exit: u8| {
        if json {
            console::stdout(&format!(
                "{}\n",
                json!({"schema": reason::SCHEMA, "status": crate::agent::RunStatus::Error, "message": message})
            ));
        } else {
            console::stderr_line(&format!("error: {message}"));
        }
        ExitCode::from(exit)
    };
    let small = args
        .small_model
        .clone()
        .or_else(|| std::env::var(crate::home::env::CAR_DO_MODEL).ok())
        .filter(|m| !m.trim().is_empty());
    let Some(small) = small else {
        return fail(
            "no model named: pass --small-model or set CAR_REASON_SMALL_MODEL or CAR_DO_MODEL"
                .into(),
            2,
        );
    };
    let large = args.large_model.clone().unwrap_or_else(|| small.clone());
    let app = match open_app(env) {
        Ok(app) => app,
        Err(failure) => return fail(failure.message, 1),
    };
    let project = app
        .memory()
        .and_then(|m| crate::project::Project::open(m.store().clone(), &env.project_root).ok());
    let files = reason::gather_files(&env.project_root, &problem, project.as_ref());
    // What memory recalls, through the registry like any call.
    let recalled: Option<crate::Recall> = app
        .runtime()
        .call(
            "memory_query",
            serde_json::to_value(crate::memory::QueryArgs {
                query: problem.clone(),
                k: 6,
                tenant_id: None,
            })
            .unwrap_or_default(),
            &Context::new(Face::Cli),
            CallOptions::default(),
        )
        .await
        .ok()
        .and_then(|o| o.result.ok())
        .and_then(|v| serde_json::from_value(v).ok());
    let memory: Vec<Note> = recalled
        .map(|r| r.results)
        .unwrap_or_default()
        .into_iter()
        .map(|hit| Note {
            id: hit.id,
            subject: hit.subject,
            body: hit.body,
        })
        .collect();
    let (size, name) = if reason::size_of(&problem, &files, &memory) > args.large_above {
        ("large", large)
    } else {
        ("small", small)
    };
    let provider = args.provider.unwrap_or_else(|| Provider::infer(&name));
    let model = match Model::new(ModelConfig {
        provider,
        model: name,
        base_url: args.base_url.clone(),
        max_tokens: 4096,
        api_key: crate::app::launch::key_for(&env.home, provider),
    }) {
        Ok(model) => model,
        Err(e) => return fail(e.to_string(), 1),
    };
    let reasoned = reason::answer(&model, size, &problem, files, memory).await;
    show(json, &reasoned);
    if reasoned.status == crate::agent::RunStatus::Success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn show(json: bool, reasoned: &Reasoned) {
    if json {
        console::stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(reasoned).unwrap_or_default()
        ));
        return;
    }
    let mut out = match (&reasoned.answer, &reasoned.message) {
        (Some(answer), _) => format!("{answer}\n"),
        (None, Some(message)) => format!("error: {message}\n"),
        (None, None) => String::new(),
    };
    if !reasoned.files.is_empty() {
        out.push_str("\nfiles:\n");
        for file in &reasoned.files {
            out.push_str(&format!(
                "  {} {} ({})\n",
                if file.cited { "✓" } else { " " },
                file.path,
                file.why
            ));
        }
    }
    out.push_str(&format!(
        "\n{} model {} · ~{} tokens sent\n",
        reasoned.size, reasoned.model_used, reasoned.context_tokens
    ));
    console::stdout(&out);
}
