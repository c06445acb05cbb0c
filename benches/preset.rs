//! The recommended preset against cc-safety-net and dcg, in the same run, and CAR on each host's
//! payload (Claude Code, Codex, Gemini CLI, Cursor) for the same command: every command of
//! `tests/it/data/shell_corpus.tsv` goes to both Claude Code PreToolUse hooks the way Claude
//! Code calls them — one process per call, the hook payload on stdin — and the decision
//! (a `permissionDecision: "deny"` JSON on stdout, or exit code 2) and the wall time from spawn
//! to exit are recorded. The calls alternate between the hooks so all see the same noise, in an
//! order shuffled anew each round.
//!
//! Configuration (arguments after `--`, or environment): `--runs N` (`BENCH_RUNS`, calls per
//! command per hook, default 5). `CAR_BIN_DIR` holds `car` and `car-gate` (default
//! `target/release`; `CAR_GATE_BIN` names another `car-gate`, such as the static one the Linux
//! archives ship; `car-gate` is the gate the hosts run, `car policy-check-hook` is measured
//! beside it);
//! `PEER_CMD` is the peer's hook command line (default: node and cc-safety-net under `tools/`
//! with `hook --coding-cli`, its Claude Code mode; `PEER_CMD=none` skips it), `PEER_VERSION`
//! its version for the report. Both hooks get the same fresh `HOME` (cc-safety-net keeps its
//! config and audit log there) and a project outside `/tmp` holding the preset, written by
//! `car policy init --preset recommended`. Results: `bench-results/preset.md` and `.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

#[path = "common/rng.rs"]
mod rng;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::{json, Value};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const PEER_ENTRY: &str = "tools/node_modules/cc-safety-net/dist/bin/cc-safety-net.js";
/// The goals: ≤ 2 ms per call, and ≤ 1.5× the spawn floor (`/bin/true` in this harness).
const GOAL_MS: f64 = 2.0;
const GOAL_FLOOR_RATIO: f64 = 1.5;

struct Case {
    destructive: bool,
    category: String,
    command: String,
}

struct Hook {
    name: String,
    argv: Vec<String>,
    /// The host whose payload this hook is sent.
    host: Host,
}

/// The agent host a payload comes from: CAR is timed on each host's payload for the same
/// command; the peers take Claude Code's.
#[derive(Clone, Copy)]
enum Host {
    Claude,
    Codex,
    Gemini,
    Cursor,
}

impl Host {
    fn payload(self, command: &str, cwd: &Path, transcript: &Path) -> Value {
        match self {
            Host::Claude => json!({
                "session_id": "bench", "transcript_path": transcript, "cwd": cwd,
                "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": command, "description": "bench"}, "tool_use_id": "toolu_bench"
            }),
            Host::Codex => json!({
                "session_id": "bench", "turn_id": "turn", "transcript_path": transcript, "cwd": cwd,
                "hook_event_name": "PreToolUse", "model": "gpt-5.5-codex", "permission_mode": "default",
                "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "call_bench"
            }),
            Host::Gemini => json!({
                "session_id": "bench", "transcript_path": transcript, "cwd": cwd,
                "hook_event_name": "BeforeTool", "timestamp": "2026-12-04T00:00:00.000Z",
                "tool_name": "run_shell_command", "tool_input": {"command": command, "description": "bench"}
            }),
            Host::Cursor => json!({
                "conversation_id": "bench", "generation_id": "g", "hook_event_name": "preToolUse",
                "cursor_version": "2.4.0", "workspace_roots": [cwd], "cwd": cwd, "tool_name": "Shell",
                "tool_input": {"command": command, "working_directory": cwd}, "tool_use_id": "bench"
            }),
        }
    }
}

/// One hook's verdicts and times on the corpus.
struct Outcome {
    denied: Vec<bool>,
    millis: Vec<f64>,
}

/// Which corpus a case comes from: the preset's (judged from the project root) or the gate's
/// (its `{root}`/`{car_home}` filled in, judged from a nested project's subdirectory).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Corpus {
    Preset,
    Gate,
}

fn corpus(manifest: &Path, which: Corpus) -> Result<Vec<Case>> {
    let path = manifest.join(match which {
        Corpus::Preset => "tests/it/data/shell_corpus.tsv",
        Corpus::Gate => "tests/it/data/gate_corpus.tsv",
    });
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let mut cases = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(3, '\t');
        let (Some(label), Some(category), Some(command)) =
            (fields.next(), fields.next(), fields.next())
        else {
            bail!("bad corpus line: {line}");
        };
        ensure!(
            matches!(label, "destructive" | "harmless"),
            "bad label: {line}"
        );
        cases.push(Case {
            destructive: label == "destructive",
            category: category.to_string(),
            command: command.replace("\\n", "\n"),
        });
    }
    Ok(cases)
}

/// Runs one hook call; returns whether it denied and the wall time in ms.
fn call(hook: &Hook, payload: &[u8], home: &Path, cwd: &Path) -> Result<(bool, f64)> {
    let start = Instant::now();
    let mut child = Command::new(&hook.argv[0])
        .args(&hook.argv[1..])
        .current_dir(cwd)
        .env("HOME", home)
        .env("CAR_HOME", home.join(".car"))
        .env_remove("CAR_PROJECT_DIR")
        .env_remove("RUST_LOG")
        .env_remove("CC_SAFETY_NET_LEVEL")
        .env_remove("CC_SAFETY_NET_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", hook.argv.join(" ")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that decides without reading its input (the `/bin/true` floor) closes it.
        match stdin.write_all(payload) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other?,
        }
    }
    let out = child.wait_with_output()?;
    let millis = start.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_deny = stdout.lines().any(|line| {
        serde_json::from_str::<Value>(line).is_ok_and(|doc| {
            doc["hookSpecificOutput"]["permissionDecision"] == "deny"
                || doc["decision"] == "block"
                || doc["decision"] == "deny"
                || doc["permission"] == "deny"
        })
    });
    Ok((json_deny || out.status.code() == Some(2), millis))
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn cell(command: &str) -> String {
    format!(
        "`{}`",
        command
            .replace('\n', "\\n")
            .replace('|', "\\|")
            .replace('`', "'")
    )
}

fn run() -> Result<()> {
    let manifest = PathBuf::from(MANIFEST_DIR);
    let mut runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().context("--runs N")?.parse()?,
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
    ensure!(runs > 0, "--runs must be at least 1");
    let bin_dir = std::env::var("CAR_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("target/release"));
    let car = bin_dir.join("car");
    // The gate the archives ship: on Linux a static binary (musl), `CAR_GATE_BIN`.
    let gate = std::env::var_os("CAR_GATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir.join("car-gate"));
    for bin in [&car, &gate] {
        ensure!(
            bin.exists(),
            "{} is missing: cargo build --release",
            bin.display()
        );
    }
    // car-gate is what `car setup` and the host packages wire in; `car policy-check-hook`
    // (the same gate inside the whole CLI) is measured beside it.
    let mut hooks = vec![Hook {
        name: "car-gate".into(),
        argv: vec![gate.display().to_string()],
        host: Host::Claude,
    }];
    for (name, host, flag) in [
        ("car-gate (Codex payload)", Host::Codex, "codex"),
        ("car-gate (Gemini CLI payload)", Host::Gemini, "gemini"),
        ("car-gate (Cursor payload)", Host::Cursor, "cursor"),
    ] {
        hooks.push(Hook {
            name: name.into(),
            argv: vec![gate.display().to_string(), "--host".into(), flag.into()],
            host,
        });
    }
    hooks.push(Hook {
        name: "car policy-check-hook".into(),
        argv: vec![car.display().to_string(), "policy-check-hook".into()],
        host: Host::Claude,
    });
    let peer_version = std::env::var("PEER_VERSION").unwrap_or_else(|_| "?".into());
    match std::env::var("PEER_CMD").ok().as_deref() {
        Some("none") => {}
        Some(cmd) => hooks.push(Hook {
            name: "cc-safety-net".into(),
            argv: cmd.split_whitespace().map(str::to_string).collect(),
            host: Host::Claude,
        }),
        None => hooks.push(Hook {
            name: "cc-safety-net".into(),
            argv: vec![
                "node".into(),
                manifest.join(PEER_ENTRY).display().to_string(),
                "hook".into(),
                "--coding-cli".into(),
            ],
            host: Host::Claude,
        }),
    }
    // dcg (destructive_command_guard), a Rust hook that also reads inline scripts.
    let dcg = std::env::var("DCG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("tools/dcg/bin/dcg"));
    if std::env::var("DCG_BIN").as_deref() != Ok("none") && dcg.exists() {
        hooks.push(Hook {
            name: "dcg".into(),
            argv: vec![dcg.display().to_string()],
            host: Host::Claude,
        });
    }
    // The floor: a process that reads nothing and allows everything.
    hooks.push(Hook {
        name: "/bin/true".into(),
        argv: vec!["/bin/true".into()],
        host: Host::Claude,
    });

    // A fresh HOME and a git project outside /tmp (the preset treats /tmp as scratch space).
    let work = manifest.join("target/bench-preset");
    let _ = std::fs::remove_dir_all(&work);
    let home = work.join("home");
    let project = work.join("project");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&project)?;
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status()?;
    ensure!(status.success(), "git init failed");
    let init = Command::new(&car)
        .args(["policy", "init", "--preset", "recommended"])
        .current_dir(&project)
        .env("CAR_HOME", home.join(".car"))
        .env_remove("CAR_PROJECT_DIR")
        .output()?;
    ensure!(
        init.status.success(),
        "car policy init failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    // The gate corpus runs in `packages/api`, a nested project with memory only.
    let sub = project.join("packages/api");
    std::fs::create_dir_all(sub.join(".car/skills"))?;
    std::fs::write(project.join(".env"), "API_KEY=sk-bench\n")?;
    std::fs::create_dir_all(project.join(".claude"))?;
    std::fs::write(
        project.join(".claude/settings.json"),
        "{\"enabledPlugins\": {\"car@car\": true}}\n",
    )?;
    // Archives holding a `.car/policies`, which unpacked over the project would replace its rules.
    let staging = work.join("evil");
    std::fs::create_dir_all(staging.join(".car/policies"))?;
    std::fs::write(staging.join(".car/policies/recommended.toml"), "")?;
    let tar = Command::new("tar")
        .args(["-cf", "../evil.tar", ".car"])
        .current_dir(&staging)
        .status()?;
    ensure!(tar.success(), "tar failed");
    let zip = Command::new("python3")
        .args(["-c", "import zipfile; z = zipfile.ZipFile('../evil.zip', 'w'); z.write('.car/policies/recommended.toml'); z.close()"])
        .current_dir(&staging)
        .status()?;
    ensure!(zip.success(), "python3 zipfile failed");
    let fill = |text: &str| {
        text.replace("{root}", &project.display().to_string())
            .replace("{car_home}", &home.join(".car").display().to_string())
            .replace("{evil_tar}", &work.join("evil.tar").display().to_string())
            .replace("{evil_zip}", &work.join("evil.zip").display().to_string())
    };
    let mut cases: Vec<(Case, PathBuf)> = corpus(&manifest, Corpus::Preset)?
        .into_iter()
        .map(|c| (c, project.clone()))
        .collect();
    for case in corpus(&manifest, Corpus::Gate)? {
        let command = fill(&case.command);
        cases.push((Case { command, ..case }, sub.clone()));
    }
    let mut outcomes: Vec<Outcome> = hooks
        .iter()
        .map(|_| Outcome {
            denied: Vec::new(),
            millis: Vec::new(),
        })
        .collect();
    let mut rng = rng::Rng::new(0x5eed);
    for (case, cwd) in &cases {
        let transcript = work.join("t.jsonl");
        let payloads: Vec<Vec<u8>> = hooks
            .iter()
            .map(|h| serde_json::to_vec(&h.host.payload(&case.command, cwd, &transcript)))
            .collect::<Result<_, _>>()?;
        let mut verdicts: Vec<Vec<bool>> = vec![Vec::new(); hooks.len()];
        for _ in 0..runs {
            // A new order each round (a fixed-seed shuffle), so that no hook always follows the
            // same one (the Node peer's process leaves the caches cold for whoever comes next).
            let mut order: Vec<usize> = (0..hooks.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            for index in order {
                let hook = &hooks[index];
                let (denied, millis) = call(hook, &payloads[index], &home, cwd)?;
                verdicts[index].push(denied);
                outcomes[index].millis.push(millis);
            }
        }
        for (index, seen) in verdicts.iter().enumerate() {
            ensure!(
                seen.iter().all(|d| *d == seen[0]),
                "{} is not deterministic on {:?}",
                hooks[index].name,
                case.command
            );
            outcomes[index].denied.push(seen[0]);
        }
    }

    let cases: Vec<Case> = cases.into_iter().map(|(case, _)| case).collect();
    let destructive = cases.iter().filter(|c| c.destructive).count();
    let harmless = cases.len() - destructive;
    let mut report = String::new();
    report.push_str(&format!(
        "# Recommended preset vs cc-safety-net {peer_version} and dcg\n\n{} commands ({destructive} destructive, {harmless} harmless; the gate corpus judged from a nested project's subdirectory), {runs} call(s) per command per hook, one process per call, interleaved.\n\n",
        cases.len()
    ));
    report.push_str("| command | label | category |");
    for hook in &hooks {
        report.push_str(&format!(" {} |", hook.name));
    }
    report.push_str("\n|---|---|---|");
    for _ in &hooks {
        report.push_str("---|");
    }
    report.push('\n');
    for (i, case) in cases.iter().enumerate() {
        let label = if case.destructive {
            "destructive"
        } else {
            "harmless"
        };
        report.push_str(&format!(
            "| {} | {label} | {} |",
            cell(&case.command),
            case.category
        ));
        for outcome in &outcomes {
            let denied = outcome.denied[i];
            let mark = match (denied, case.destructive) {
                (true, true) | (false, false) => "",
                (true, false) | (false, true) => " ✗",
            };
            report.push_str(&format!(
                " {}{mark} |",
                if denied { "deny" } else { "allow" }
            ));
        }
        report.push('\n');
    }
    report.push_str("\n| hook | destructive blocked | harmless blocked | median ms/call | p95 ms/call |\n|---|---|---|---|---|\n");
    let mut summary = Vec::new();
    for (hook, outcome) in hooks.iter().zip(&outcomes) {
        let blocked = |want: bool| {
            cases
                .iter()
                .zip(&outcome.denied)
                .filter(|(c, d)| c.destructive == want && **d)
                .count()
        };
        let (med, p95) = (median(&outcome.millis), percentile(&outcome.millis, 95.0));
        report.push_str(&format!(
            "| {} | {}/{destructive} | {}/{harmless} | {med:.2} | {p95:.2} |\n",
            hook.name,
            blocked(true),
            blocked(false)
        ));
        summary.push(json!({
            "hook": hook.name, "destructive_blocked": blocked(true), "destructive": destructive,
            "harmless_blocked": blocked(false), "harmless": harmless,
            "median_ms": med, "p95_ms": p95,
        }));
    }
    let car_ms = median(&outcomes[0].millis);
    let mut floor_ratio = None;
    if let Some(floor) = hooks.iter().position(|h| h.name == "/bin/true") {
        let floor_ms = median(&outcomes[floor].millis);
        floor_ratio = Some(car_ms / floor_ms);
        for (hook, outcome) in hooks
            .iter()
            .zip(&outcomes)
            .filter(|(h, _)| h.name.starts_with("car"))
        {
            report.push_str(&format!(
                "\n{}: {:.2}× the spawn floor (/bin/true {floor_ms:.2} ms).",
                hook.name,
                median(&outcome.millis) / floor_ms
            ));
        }
    }
    for (hook, outcome) in hooks.iter().zip(&outcomes).skip(1) {
        let ratio = median(&outcome.millis) / car_ms;
        report.push_str(&format!(
            "\n{}: {ratio:.2}× car-gate's median time per call.",
            hook.name
        ));
    }
    let met = |ok: bool| if ok { "met" } else { "missed" };
    report.push_str(&format!(
        "\n\ngoal ≤ {GOAL_MS} ms per call: car-gate {}.",
        met(car_ms <= GOAL_MS)
    ));
    if let Some(ratio) = floor_ratio {
        report.push_str(&format!(
            "\ngoal ≤ {GOAL_FLOOR_RATIO}× the spawn floor: car-gate {} ({ratio:.2}×).",
            met(ratio <= GOAL_FLOOR_RATIO)
        ));
    }
    report.push('\n');
    print!("{report}");
    let results = manifest.join("bench-results");
    std::fs::create_dir_all(&results)?;
    std::fs::write(results.join("preset.md"), &report)?;
    std::fs::write(
        results.join("preset.json"),
        serde_json::to_string_pretty(&json!({
            "runs": runs, "peer_version": peer_version, "summary": summary,
            "cases": cases.iter().enumerate().map(|(i, c)| json!({
                "command": c.command, "destructive": c.destructive, "category": c.category,
                "denied": hooks.iter().zip(&outcomes).map(|(h, o)| (h.name.clone(), json!(o.denied[i]))).collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
        }))?,
    )?;
    eprintln!("results: {}/preset.md and preset.json", results.display());
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-preset: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
