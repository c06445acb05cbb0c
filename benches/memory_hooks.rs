//! Memory-hooks benchmark: what `car hook session-start` and `car hook prompt` inject, and what
//! they cost, through the real binary with Claude Code's payloads.
//!
//! 1. **Reminders**: the 60 prompts of `benches/memory_hooks/cases.json` (40 about one of its 40
//!    facts, 20 about none), each in a fresh session, against those facts among `--distractors`
//!    generated ones (default 10,000). Scored per prompt: precision (prompts where what was
//!    injected includes the fact the prompt is about, over prompts where anything was
//!    injected), recall (over prompts about a fact), and how often a prompt about nothing got
//!    something. The same prompts through `car memory query --k 1` (always inject the top hit)
//!    are the baseline, in the same run.
//! 2. **Briefing size** in tokens (4 characters a token, the estimate the hook budgets with) for
//!    a small project (the 40 facts, 5 tasks, 3 decisions) and a large one (10,000 facts, 500
//!    tasks, 200 decisions).
//! 3. **Latency**: `car hook prompt` and `car hook session-start` on the large project, one
//!    process per call as the host runs them, interleaved with `/bin/true` fed the same payload
//!    (the floor: what any process costs here); warm (the memory index snapshot in place) and
//!    cold (removed before each call: the first call after an upgrade).
//!
//! `cargo bench --bench memory_hooks -- [--distractors N] [--calls N]` (defaults 10000, 200), or
//! `scripts/bench-memory-hooks.sh`. `CAR_BIN_DIR` holds `car` (default `target/release`).
//! Results go to `bench-results/memory_hooks.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // bench code may unwrap and print

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context as _, Result};
use car::{Kind, Memory, NewDecision, NewEntry, NewTask, Priority, Project, Store};
use serde_json::{json, Value};

#[path = "common/stats.rs"]
mod stats;
use stats::{round, Stats};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The goal: p50 ≤ 50 ms for the prompt hook at 10k facts, process included.
const GOAL_PROMPT_P50_MS: f64 = 50.0;

struct Config {
    distractors: usize,
    calls: usize,
    car: PathBuf,
}

impl Config {
    fn load() -> Result<Config> {
        let mut config = Config {
            distractors: 10_000,
            calls: 200,
            car: std::env::var_os("CAR_BIN_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(MANIFEST_DIR).join("target/release"))
                .join("car"),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |name: &str| -> Result<usize> {
                args.next()
                    .with_context(|| format!("{name} needs a number"))?
                    .parse()
                    .with_context(|| format!("{name} needs a number"))
            };
            match arg.as_str() {
                "--distractors" => config.distractors = number("--distractors")?,
                "--calls" => config.calls = number("--calls")?,
                "--bench" => {}
                other => bail!("unknown argument {other:?} (expected --distractors N, --calls N)"),
            }
        }
        ensure!(
            config.car.exists(),
            "{} not found; build with `cargo build --release --bin car` or set CAR_BIN_DIR",
            config.car.display()
        );
        Ok(config)
    }
}

/// A CAR home and a project directory.
struct Place {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(".car")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Place {
            _dir: dir,
            home,
            project,
        }
    }

    fn open(&self) -> (Memory, Project) {
        let store = Arc::new(Store::open(&self.home.join("car.db")).unwrap());
        let memory = Memory::open(store.clone(), Some(&self.project), None).unwrap();
        let project = Project::open(store, &self.project).unwrap();
        (memory, project)
    }
}

fn kind(name: &str) -> Kind {
    match name {
        "constraint" => Kind::Constraint,
        "knowledge" => Kind::Knowledge,
        "procedural" => Kind::Procedural,
        _ => Kind::Pattern,
    }
}

/// Facts of the kind a real project accumulates: runbooks, owners, settings, gotchas, sharing
/// the prompts' everyday words (service, team, deploy, test, database, API, cache, build).
fn distractors(n: usize) -> Vec<NewEntry> {
    const SERVICES: &[&str] = &[
        "accounts",
        "inventory",
        "shipping",
        "catalogue",
        "loyalty",
        "reviews",
        "pricing",
        "recommendations",
        "fraud",
        "ledger",
        "exports",
        "reports",
        "gateway",
        "scheduler",
        "uploads",
        "thumbnails",
        "audit",
        "tenants",
        "quotas",
        "webhooks-relay",
    ];
    const TEAMS: &[&str] = &[
        "core", "growth", "checkout", "data", "identity", "infra", "mobile",
    ];
    const TEMPLATES: &[&str] = &[
        "The {s} service {n} deploys from its own pipeline and pages the {t} team when its health check fails",
        "{s} worker {n} reads from queue {s}.jobs and writes results to the {s} database",
        "The {s} API {n} caches responses for 60 seconds; bust the cache with the admin endpoint",
        "Build {n} of {s} needs the protobuf compiler on the PATH",
        "The {t} team owns {s} component {n}; questions go to their channel",
        "{s} job {n} runs every hour and retries twice before alerting",
        "Test suite {n} of {s} uses fixtures from tests/fixtures/{s}",
        "The {s} dashboard {n} shows request latency and error rate per endpoint",
        "Config flag {s}_{n}_enabled turns the new {s} flow on for internal users",
        "Migration {n} of the {s} tables backfills a column in batches of 1000 rows",
    ];
    (0..n)
        .map(|i| {
            let s = SERVICES[i % SERVICES.len()];
            let t = TEAMS[(i / 3) % TEAMS.len()];
            let body = TEMPLATES[(i / 7) % TEMPLATES.len()]
                .replace("{s}", s)
                .replace("{t}", t)
                .replace("{n}", &i.to_string());
            let kind = match i % 10 {
                0 => Kind::Knowledge,
                1 => Kind::Procedural,
                _ => Kind::Pattern,
            };
            NewEntry::new(kind, &format!("{s} note {i}"), &body)
        })
        .collect()
}

/// Writes the case facts with fixed ids (`case-<key>`) and `distractors` others.
fn load_memory(place: &Place, cases: &Value, distractor_count: usize) -> Result<()> {
    let (memory, _) = place.open();
    let mut entries: Vec<NewEntry> = cases["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let mut entry = NewEntry::new(
                kind(f["kind"].as_str().unwrap()),
                f["subject"].as_str().unwrap(),
                f["body"].as_str().unwrap(),
            );
            entry.id = Some(format!("case-{}", f["key"].as_str().unwrap()));
            entry
        })
        .collect();
    entries.extend(distractors(distractor_count));
    for chunk in entries.chunks(2_000) {
        memory.write_entries(chunk.to_vec())?;
    }
    Ok(())
}

fn load_project(place: &Place, tasks: usize, decisions: usize) -> Result<()> {
    let (_, project) = place.open();
    for i in 0..tasks {
        project.create_task(
            NewTask {
                title: format!("Move the {} service to the new deploy pipeline", i),
                priority: Some(Priority::of_level((i % 4) as i64)),
                ..NewTask::default()
            },
            None,
        )?;
    }
    for i in 0..decisions {
        project.record_decision(NewDecision {
            title: format!("Pipeline stage {i}"),
            context: String::new(),
            decision: format!("Stage {i} runs after the canary and before the full rollout"),
            consequences: String::new(),
            status: None,
            supersedes: None,
        })?;
    }
    Ok(())
}

fn session_payload(cwd: &Path, session: &str) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
           "hook_event_name": "SessionStart", "source": "startup"})
    .to_string()
    .into_bytes()
}

fn prompt_payload(cwd: &Path, session: &str, prompt: &str) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
           "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    .to_string()
    .into_bytes()
}

/// Runs `argv` with `input` on stdin in `cwd` with `home` as CAR_HOME; (stdout, wall ms).
fn run(argv: &[&str], input: &[u8], cwd: &Path, home: &Path) -> Result<(String, f64)> {
    let started = Instant::now();
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env("CAR_HOME", home)
        .env_remove("CAR_PROJECT_DIR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", argv[0]))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    let output = child.wait_with_output()?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    ensure!(output.status.success(), "{argv:?} failed: {output:?}");
    ensure!(
        output.stderr.is_empty() || argv[0] != "car",
        "{argv:?} wrote to stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((String::from_utf8_lossy(&output.stdout).into_owned(), ms))
}

/// The context a hook's answer adds ("" for none).
fn context(stdout: &str) -> String {
    if stdout.trim().is_empty() {
        return String::new();
    }
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The entry ids a reminder names: `- [kind id] …`.
fn reminded_ids(context: &str) -> Vec<String> {
    context
        .lines()
        .filter_map(|line| {
            let inner = line.strip_prefix("- [")?;
            let end = inner.find(']')?;
            inner[..end].split_whitespace().nth(1).map(str::to_string)
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    injected: usize,
    true_positives: usize,
    about_a_fact: usize,
    nothing_prompts: usize,
    nothing_injected: usize,
    entries: usize,
    relevant_entries: usize,
}

impl Tally {
    fn add(&mut self, shown: &[String], about: &[String]) {
        let hit = shown.iter().any(|id| about.contains(id));
        if !shown.is_empty() {
            self.injected += 1;
        }
        if hit {
            self.true_positives += 1;
        }
        if about.is_empty() {
            self.nothing_prompts += 1;
            if !shown.is_empty() {
                self.nothing_injected += 1;
            }
        } else {
            self.about_a_fact += 1;
        }
        self.entries += shown.len();
        self.relevant_entries += shown.iter().filter(|id| about.contains(id)).count();
    }

    fn json(&self) -> Value {
        let ratio = |a: usize, b: usize| {
            if b == 0 {
                0.0
            } else {
                round(a as f64 / b as f64)
            }
        };
        json!({
            "precision": ratio(self.true_positives, self.injected),
            "recall": ratio(self.true_positives, self.about_a_fact),
            "entry_precision": ratio(self.relevant_entries, self.entries),
            "prompts_injected": self.injected,
            "prompts_about_a_fact": self.about_a_fact,
            "found": self.true_positives,
            "prompts_about_nothing": self.nothing_prompts,
            "of_which_injected": self.nothing_injected,
            "entries_injected": self.entries,
        })
    }
}

fn main() -> Result<()> {
    let config = Config::load()?;
    let car = config.car.to_string_lossy().into_owned();
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(
        Path::new(MANIFEST_DIR).join("benches/memory_hooks/cases.json"),
    )?)?;
    let prompts: Vec<(String, Vec<String>)> = cases["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["prompt"].as_str().unwrap().to_string(),
                p["about"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| format!("case-{}", k.as_str().unwrap()))
                    .collect(),
            )
        })
        .collect();

    // The small project: the case facts, 5 tasks, 3 decisions.
    let briefed = |distractors: usize, tasks: usize, decisions: usize| -> Result<(Place, Value)> {
        let place = Place::new();
        load_memory(&place, &cases, distractors)?;
        load_project(&place, tasks, decisions)?;
        let (out, _) = run(
            &[&car, "--json", "hook", "session-start"],
            &session_payload(&place.project, "size"),
            &place.project,
            &place.home,
        )?;
        Ok((place, serde_json::from_str(&out)?))
    };
    let (_, small_brief) = briefed(0, 5, 3)?;

    // The large project: the case facts among the distractors, 500 tasks, 200 decisions.
    eprintln!(
        "loading {} distractors, 500 tasks, 200 decisions…",
        config.distractors
    );
    let (large, large_brief) = briefed(config.distractors, 500, 200)?;

    // Reminders: every prompt in a fresh session, through the hook; the baseline in the same
    // loop.
    let mut selective = Tally::default();
    let mut always = Tally::default();
    let mut misses = Vec::new();
    let mut noise = Vec::new();
    for (i, (prompt, about)) in prompts.iter().enumerate() {
        let (out, _) = run(
            &[&car, "hook", "prompt"],
            &prompt_payload(&large.project, &format!("quality-{i}"), prompt),
            &large.project,
            &large.home,
        )?;
        let shown = reminded_ids(&context(&out));
        selective.add(&shown, about);
        if !about.is_empty() && !shown.iter().any(|id| about.contains(id)) {
            misses.push(prompt.clone());
        }
        if !shown.is_empty() && !shown.iter().any(|id| about.contains(id)) {
            noise.push(json!({"prompt": prompt, "shown": shown}));
        }
        let (out, _) = run(
            &[&car, "--json", "memory", "query", prompt, "--k", "1"],
            b"",
            &large.project,
            &large.home,
        )?;
        let top: Value = serde_json::from_str(&out)?;
        let top: Vec<String> = top["data"]["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect();
        always.add(&top, about);
    }

    // Latency, interleaved with the floor.
    let snapshot = large.home.join("car.memory-index");
    let mut prompt_warm = Vec::new();
    let mut prompt_cold = Vec::new();
    let mut session_warm = Vec::new();
    let mut floor = Vec::new();
    let cold_every = 5;
    for i in 0..config.calls {
        let (prompt, _) = &prompts[i % prompts.len()];
        let payload = prompt_payload(&large.project, &format!("latency-{i}"), prompt);
        let (_, ms) = run(&["/bin/true"], &payload, &large.project, &large.home)?;
        floor.push(ms);
        let (_, ms) = run(
            &[&car, "hook", "prompt"],
            &payload,
            &large.project,
            &large.home,
        )?;
        prompt_warm.push(ms);
        let (_, ms) = run(
            &[&car, "hook", "session-start"],
            &session_payload(&large.project, &format!("latency-{i}")),
            &large.project,
            &large.home,
        )?;
        session_warm.push(ms);
        if i % cold_every == 0 {
            let _ = std::fs::remove_file(&snapshot);
            let (_, ms) = run(
                &[&car, "hook", "prompt"],
                &payload,
                &large.project,
                &large.home,
            )?;
            prompt_cold.push(ms);
        }
    }
    let floor_stats = Stats::of(&floor);
    let row = |name: &str, times: &[f64]| -> Value {
        let s = Stats::of(times);
        let mut row = s.json();
        row["name"] = json!(name);
        row["p50_vs_floor"] = json!(round(s.p50 / floor_stats.p50));
        row
    };
    let latency = vec![
        row("/bin/true (floor)", &floor),
        row("car hook prompt (warm)", &prompt_warm),
        row("car hook prompt (cold: no index snapshot)", &prompt_cold),
        row("car hook session-start (warm)", &session_warm),
    ];
    let prompt_p50 = Stats::of(&prompt_warm).p50;

    let results = json!({
        "machine": {
            "load_average": std::fs::read_to_string("/proc/loadavg").ok()
                .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        },
        "facts": 40 + config.distractors,
        "reminders": {
            "prompts": prompts.len(),
            "selective_hook": selective.json(),
            "always_top1_baseline": always.json(),
            "missed": misses,
            "wrong": noise,
        },
        "briefing_tokens": {
            "estimate": "4 characters a token",
            "small": {"tokens": small_brief["data"]["tokens"], "budget": small_brief["data"]["budget"],
                      "left_out": small_brief["data"]["left_out"]},
            "large": {"tokens": large_brief["data"]["tokens"], "budget": large_brief["data"]["budget"],
                      "left_out": large_brief["data"]["left_out"]},
        },
        "latency": latency,
        "goal_prompt_p50_ms": GOAL_PROMPT_P50_MS,
        "goal_met": prompt_p50 <= GOAL_PROMPT_P50_MS,
    });
    let out_dir = Path::new(MANIFEST_DIR).join("bench-results");
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(
        out_dir.join("memory_hooks.json"),
        serde_json::to_string_pretty(&results)?,
    )?;

    println!(
        "memory hooks: {} facts, {} prompts ({} about nothing)",
        40 + config.distractors,
        prompts.len(),
        selective.nothing_prompts
    );
    for (name, tally) in [("selective hook", &selective), ("always top-1", &always)] {
        let j = tally.json();
        println!(
            "  {name:<15} precision {:.3}  recall {:.3}  entry precision {:.3}  prompts about nothing that got something: {}/{}",
            j["precision"].as_f64().unwrap(),
            j["recall"].as_f64().unwrap(),
            j["entry_precision"].as_f64().unwrap(),
            tally.nothing_injected,
            tally.nothing_prompts
        );
    }
    println!(
        "  briefing: small {} tokens, large {} tokens (budget {}, {} items left out)",
        small_brief["data"]["tokens"],
        large_brief["data"]["tokens"],
        large_brief["data"]["budget"],
        large_brief["data"]["left_out"]
    );
    for r in &results["latency"].as_array().unwrap().clone() {
        println!(
            "  {:<44} p50 {:>7.2} ms  p90 {:>7.2} ms  ({:.2}x floor, n={})",
            r["name"].as_str().unwrap(),
            r["p50_ms"].as_f64().unwrap(),
            r["p90_ms"].as_f64().unwrap(),
            r["p50_vs_floor"].as_f64().unwrap(),
            r["n"]
        );
    }
    println!(
        "  goal: prompt hook p50 <= {GOAL_PROMPT_P50_MS} ms at 10k facts: {}",
        if prompt_p50 <= GOAL_PROMPT_P50_MS {
            "met"
        } else {
            "MISSED"
        }
    );
    Ok(())
}
