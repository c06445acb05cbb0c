//! Task tracker benchmarks on a 100,000-task graph with 200,000 dependencies:
//!
//! 1. the ready queue in-process (`Project::list_tasks`, status ready, 50 rows) — goal ≤ 5 ms;
//! 2. `task_manager list --status ready` over MCP (one `car-mcp`, in-process command) against
//!    spawning `car --json task list --status ready` per call (the seed's design) — goal ≥ 20×;
//! 3. `car task claim` (the next ready task) as a process per call, and over MCP;
//! 4. optionally the same ready/claim through task-master-ai's MCP server on the same graph
//!    (`TASKMASTER_CMD`; see scripts/bench-tasks.sh) — goal ≥ 100×.
//!
//! `CAR_BIN_DIR` holds `car` and `car-mcp` (default target/release). `BENCH_TASKS` (default
//! 100000), `BENCH_DEPS_PER_TASK` (2), `BENCH_CALLS` (200). Results: bench-results/tasks.json.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn p90(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() * 9 / 10).min(values.len() - 1)]
}

/// A deterministic xorshift generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The graph as JSON Lines: tasks 1..=n; each depends on `deps` random earlier tasks (so the
/// graph is acyclic); the first 60% are done, so a few thousand open tasks are ready.
fn graph(n: usize, deps: usize) -> String {
    let mut rng = Rng(0x5EED_CAFE);
    let mut out = String::with_capacity(n * 90);
    for i in 1..=n {
        let status = if i * 10 <= n * 6 { "done" } else { "open" };
        let mut on: Vec<String> = Vec::new();
        if i > 1 {
            for _ in 0..deps {
                let d = 1 + rng.below((i - 1) as u64) as usize;
                let r = format!("t{d}");
                if !on.contains(&r) {
                    on.push(r);
                }
            }
        }
        out.push_str(
            &json!({"ref": format!("t{i}"), "title": format!("task {i} of the benchmark graph"),
                    "priority": rng.below(5), "status": status, "depends_on": on})
            .to_string(),
        );
        out.push('\n');
    }
    out
}

struct Setup {
    bin: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Setup {
    fn car(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("car"));
        cmd.current_dir(&self.project)
            .env("CAR_HOME", &self.home)
            .env("CAR_AGENT_ID", "bench")
            .env_remove("CAR_PROJECT_DIR")
            .env_remove("RUST_LOG");
        cmd
    }
}

/// A newline-delimited JSON-RPC client over a child's stdio.
struct Rpc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Rpc {
    fn spawn(mut cmd: Command) -> Result<Rpc> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning the MCP server")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let mut rpc = Rpc {
            child,
            stdin,
            stdout,
            next: 1,
        };
        rpc.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        )?;
        writeln!(
            rpc.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )?;
        Ok(rpc)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )?;
        self.stdin.flush()?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("the server closed stdout");
            }
            let msg: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if msg["id"] == json!(id) {
                if msg.get("error").is_some() {
                    bail!("{method}: {}", msg["error"]);
                }
                return Ok(msg["result"].clone());
            }
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Result<Value> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": args}))?;
        if result["isError"] == true {
            bail!("{tool}: {}", result["content"][0]["text"]);
        }
        Ok(result)
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn time_process(mut cmd: Command) -> Result<f64> {
    let start = Instant::now();
    let out = cmd.output()?;
    let took = ms(start.elapsed());
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(took)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-tasks: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let n = env_usize("BENCH_TASKS", 100_000);
    let deps = env_usize("BENCH_DEPS_PER_TASK", 2);
    let calls = env_usize("BENCH_CALLS", 200);
    let bin = std::path::absolute(
        std::env::var("CAR_BIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| Path::new(MANIFEST_DIR).join("target/release")),
    )?;
    let scratch = tempfile::tempdir()?;
    let setup = Setup {
        bin,
        home: scratch.path().join("home"),
        project: scratch.path().join("project"),
    };
    std::fs::create_dir_all(setup.project.join(".car"))?;
    let file = scratch.path().join("graph.jsonl");
    std::fs::write(&file, graph(n, deps))?;

    eprintln!("importing {n} tasks with ~{} dependencies…", n * deps);
    let start = Instant::now();
    let out = setup
        .car()
        .args(["--json", "task", "import"])
        .arg(&file)
        .output()?;
    if !out.status.success() {
        bail!("import failed: {}", String::from_utf8_lossy(&out.stdout));
    }
    let import_s = start.elapsed().as_secs_f64();
    let imported: Value = serde_json::from_slice(&out.stdout)?;
    let dependencies = imported["data"]["dependencies"].as_u64().unwrap_or(0);

    // 1. The ready queue in-process.
    let store = std::sync::Arc::new(car::Store::open(&setup.home.join("car.db"))?);
    let project = car::Project::open(store, &setup.project)?;
    let filter = car::TaskFilter {
        status: Some("ready".into()),
        limit: 50,
        ..car::TaskFilter::default()
    };
    let ready_total = project
        .list_tasks(&car::TaskFilter {
            limit: 0,
            ..filter.clone()
        })?
        .len();
    let mut in_process: Vec<f64> = (0..calls)
        .map(|_| {
            let start = Instant::now();
            let tasks = project.list_tasks(&filter).expect("ready query");
            assert_eq!(tasks.len(), 50.min(ready_total));
            ms(start.elapsed())
        })
        .collect();

    // 2. task_manager over MCP against a process per call, interleaved.
    let mut mcp = Rpc::spawn({
        let mut cmd = Command::new(setup.bin.join("car-mcp"));
        cmd.current_dir(&setup.project)
            .env("CAR_HOME", &setup.home)
            .env("CAR_AGENT_ID", "bench");
        cmd
    })?;
    let list_args = json!({"action": "list", "args": ["--status", "ready"]});
    mcp.call("task_manager", list_args.clone())?;
    let mut over_mcp = Vec::new();
    let mut spawned = Vec::new();
    for _ in 0..calls {
        let start = Instant::now();
        mcp.call("task_manager", list_args.clone())?;
        over_mcp.push(ms(start.elapsed()));
        let mut cmd = setup.car();
        cmd.args(["--json", "task", "list", "--status", "ready"]);
        spawned.push(time_process(cmd)?);
    }

    // 3. Claims: the next ready task each time, as a process and over MCP.
    let claims = calls.min(100);
    let mut claim_process = Vec::new();
    let mut claim_mcp = Vec::new();
    for _ in 0..claims {
        let mut cmd = setup.car();
        cmd.args(["--json", "task", "claim"]);
        claim_process.push(time_process(cmd)?);
        let start = Instant::now();
        mcp.call("task_manager", json!({"action": "claim", "args": []}))?;
        claim_mcp.push(ms(start.elapsed()));
    }

    let ready_ms = median(&mut in_process);
    let mcp_ms = median(&mut over_mcp);
    let spawn_ms = median(&mut spawned);
    let report = json!({
        "tasks": n,
        "dependencies": dependencies,
        "ready_tasks": ready_total,
        "import_s": (import_s * 100.0).round() / 100.0,
        "ready_in_process_ms": {"p50": ready_ms, "p90": p90(&mut in_process), "goal_ms": 5.0, "met": ready_ms <= 5.0},
        "task_manager_list": {
            "mcp_in_process_ms": {"p50": mcp_ms, "p90": p90(&mut over_mcp)},
            "process_per_call_ms": {"p50": spawn_ms, "p90": p90(&mut spawned)},
            "ratio": ((spawn_ms / mcp_ms) * 10.0).round() / 10.0,
            "goal_ratio": 20.0,
        },
        "claim": {
            "process_ms": {"p50": median(&mut claim_process), "p90": p90(&mut claim_process)},
            "mcp_ms": {"p50": median(&mut claim_mcp), "p90": p90(&mut claim_mcp)},
        },
        "calls": calls,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    let results = Path::new(MANIFEST_DIR).join("bench-results");
    std::fs::create_dir_all(&results)?;
    std::fs::write(
        results.join("tasks.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}
