//! `car-memgine-eval`: replays StateBench timelines into memgine and scores the contexts
//! against two baselines (see [`crate::eval`]).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::console;
use clap::{CommandFactory, Parser, ValueEnum};

const AFTER_HELP: &str = "\
Examples:
  car-memgine-eval --data dev.jsonl           # a StateBench split (JSON Lines)
  car-memgine-eval --data tests/it/data/statebench/dev-sample.jsonl   # the sample in a checkout
  car-memgine-eval --data dev.jsonl --json    # one JSON document on stdout
  car-memgine-eval --track supersession --track causality --limit 10
  car-memgine-eval --mode fast --budget 4000
  car-memgine-eval --contexts contexts.jsonl  # every context, for an LLM judge

Figures per strategy (memgine, transcript_replay, no_memory), per track and overall:
  must-mention recall   retrievable must_mention phrases found in the context
  stale/query           queries with a must_not_mention phrase on a line without [outdated]
  stale/phrase          the same, counted per phrase
  tokens                context size, bytes/4 (mean and 95th percentile)

Progress goes to stderr as JSON Lines: {\"type\":\"progress\",\"done\":N,\"total\":M}.
Exit status: 0 done, 1 bad or unreadable input, 2 bad command line.";

/// Replay StateBench timelines into a fresh memgine memory each and score the assembled
/// contexts, next to transcript replay and no memory.
#[derive(Debug, Parser)]
#[command(name = "car-memgine-eval", version, after_help = AFTER_HELP)]
struct Cli {
    /// The StateBench JSONL file (a checkout ships a 20-timeline sample of the dev split in
    /// tests/it/data/statebench/dev-sample.jsonl).
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Token budget of the memgine context and of the transcript.
    #[arg(long, value_name = "N", default_value_t = 8000)]
    budget: usize,
    /// How memgine assembles the context.
    #[arg(long, value_enum, default_value_t = Mode::Full)]
    mode: Mode,
    /// Only timelines of this track (repeatable).
    #[arg(long = "track", value_name = "NAME")]
    tracks: Vec<String>,
    /// At most this many timelines.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print one JSON document: {"schema_version":1,"command":"memgine-eval","success":…,"data"|"error":…}.
    #[arg(long)]
    json: bool,
    /// Write every query's contexts (one JSON line per query and strategy) to this file.
    #[arg(long, value_name = "OUT.jsonl")]
    contexts: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Ranked by retrieval.
    Full,
    /// Newest first, no ranking.
    Fast,
}

const COMMAND: &str = "memgine-eval";

/// `car-memgine-eval`'s entry point (the `car` binary started under that name).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init_logging();
    let Some(data) = cli.data.clone() else {
        let message = format!(
            "no StateBench file given; pass --data PATH (a checkout of CAR has a sample in {})",
            crate::eval::SAMPLE_DATA
        );
        if cli.json {
            console::stdout(&format!(
                "{}\n",
                crate::envelope_failure(COMMAND, "usage", &message)
            ));
        }
        let _ = Cli::command()
            .error(clap::error::ErrorKind::MissingRequiredArgument, message)
            .print();
        return ExitCode::from(2);
    };
    let config = crate::eval::Config {
        budget_tokens: cli.budget,
        mode: match cli.mode {
            Mode::Full => crate::ContextMode::Full,
            Mode::Fast => crate::ContextMode::Fast,
        },
        tracks: cli.tracks,
        limit: cli.limit,
        contexts: cli.contexts,
        ..crate::eval::Config::new(data)
    };
    // A bar for a person at a terminal; JSON Lines on stderr otherwise (the documented stream).
    let bar = crate::cli::progress::Reporter::new("memgine-eval", cli.json);
    let mut progress = |p: crate::eval::Progress| {
        if bar.is_bar() {
            bar.update("replay", p.done as u64, Some(p.total as u64));
        } else {
            console::stderr_line(&format!(
                r#"{{"type":"progress","done":{},"total":{}}}"#,
                p.done, p.total
            ));
        }
    };
    let result = crate::eval::run(&config, &mut progress);
    bar.finish();
    match result {
        Ok(outcome) => {
            if cli.json {
                console::stdout(&format!(
                    "{}\n",
                    crate::envelope_success(COMMAND, outcome.to_json())
                ));
            } else {
                console::stdout(&outcome.to_table());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            let (code, exit) = (err.code(), err.exit_code());
            let message = format!("{:#}", anyhow::Error::new(err));
            if cli.json {
                console::stdout(&format!(
                    "{}\n",
                    crate::envelope_failure(COMMAND, code, &message)
                ));
            }
            console::stderr_line(&format!("error: {message}"));
            ExitCode::from(exit)
        }
    }
}
