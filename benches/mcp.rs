//! MCP benchmarks: CAR's `car-mcp` side by side with the reference memory server
//! (`@modelcontextprotocol/server-memory`), both spoken to by the same newline-delimited
//! JSON-RPC client over stdio, one request at a time, in the same run.
//!
//! It measures (1) spawn → `initialize` answered, (2) `memory_query` against `search_nodes` on
//! the same synthetic facts at each size, with CAR's `car memory import` time, and (3)
//! `memory_add_fact` throughput with 1 and 4 concurrent `car-mcp` processes sharing one
//! `CAR_HOME`, then checks that the database holds exactly the acknowledged facts.
//!
//! Configuration (arguments after `--`, or environment): `--sizes 10000,100000` (`BENCH_SIZES`),
//! `--quick` (`BENCH_QUICK=1`: sizes 1000,10000), `--queries N` (`BENCH_QUERIES`, default 200),
//! `--spawns N` (`BENCH_SPAWNS`, default 30), `--writes N` (`BENCH_WRITES`, facts per writer,
//! default 500), `--keep` (`BENCH_KEEP=1`: keep each size's CAR_HOME, peer file and
//! `queries.json` for profiling). `CAR_BIN_DIR` holds `car` and `car-mcp` (default
//! `target/release`); `PEER_CMD` is the peer's command line (default: node and the peer under
//! `tools/`; `PEER_CMD=none` skips the peer). Results go to `bench-results/mcp.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const PEER_ENTRY: &str = "tools/node_modules/@modelcontextprotocol/server-memory/dist/index.js";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
const PROTOCOL_VERSION: &str = "2025-06-18";
const SEED: u64 = 0x00C0_FFEE_D00D;
const QUERY_K: u64 = 5;
const PINGS: usize = 50;

/// Goals from the issue: spawn ≤ 10 ms; p50 ≤ 2 ms at 100k; CAR ≥ 20× the peer at 10k, ≥ 100× at 100k.
const GOAL_SPAWN_MS: f64 = 10.0;
const GOAL_QUERY_P50_MS_100K: f64 = 2.0;

// ---------------------------------------------------------------------------------------------
// Configuration

struct Config {
    sizes: Vec<usize>,
    queries: usize,
    spawns: usize,
    writes: usize,
    /// Keep the generated homes and files (with the queries) for profiling.
    keep: bool,
    bin_dir: PathBuf,
    peer: Option<PeerCmd>,
    results: PathBuf,
}

struct PeerCmd {
    argv: Vec<String>,
    version: String,
}

fn env_or(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_sizes(text: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(|s| s.trim().replace('_', ""))
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!("bad size {s:?}"))
        })
        .collect()
}

fn parse_count(name: &str, text: &str) -> Result<usize> {
    text.trim()
        .parse()
        .with_context(|| format!("{name} must be a number, got {text:?}"))
}

/// The peer's version: `PEER_VERSION`, else the `package.json` beside the `dist/index.js` it runs.
fn peer_version(argv: &[String]) -> String {
    if let Some(version) = env_or("PEER_VERSION") {
        return version;
    }
    argv.iter()
        .find(|a| a.ends_with("dist/index.js"))
        .and_then(|entry| {
            Path::new(entry)
                .parent()?
                .parent()
                .map(|p| p.join("package.json"))
        })
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

impl Config {
    fn load() -> Result<Config> {
        let mut sizes = env_or("BENCH_SIZES").map(|s| parse_sizes(&s)).transpose()?;
        let mut quick = env_or("BENCH_QUICK").is_some_and(|v| v != "0");
        let mut keep = env_or("BENCH_KEEP").is_some_and(|v| v != "0");
        let mut queries = env_or("BENCH_QUERIES")
            .map(|s| parse_count("BENCH_QUERIES", &s))
            .transpose()?;
        let mut spawns = env_or("BENCH_SPAWNS")
            .map(|s| parse_count("BENCH_SPAWNS", &s))
            .transpose()?;
        let mut writes = env_or("BENCH_WRITES")
            .map(|s| parse_count("BENCH_WRITES", &s))
            .transpose()?;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg.clone(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .with_context(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--sizes" => sizes = Some(parse_sizes(&value()?)?),
                "--quick" => quick = true,
                "--keep" => keep = true,
                "--queries" => queries = Some(parse_count("--queries", &value()?)?),
                "--spawns" => spawns = Some(parse_count("--spawns", &value()?)?),
                "--writes" => writes = Some(parse_count("--writes", &value()?)?),
                // cargo bench passes --bench to every harness = false target.
                "--bench" => {}
                other => bail!("unknown argument {other:?}; expected --sizes N,M --quick --queries N --spawns N --writes N --keep"),
            }
        }
        let sizes = match (sizes, quick) {
            (Some(sizes), _) => sizes,
            (None, true) => vec![1_000, 10_000],
            (None, false) => vec![10_000, 100_000],
        };
        ensure!(
            !sizes.is_empty() && sizes.iter().all(|&n| n > 0),
            "sizes must be positive"
        );
        let manifest = Path::new(MANIFEST_DIR);
        let bin_dir =
            env_or("CAR_BIN_DIR").map_or_else(|| manifest.join("target/release"), PathBuf::from);
        let peer = match env_or("PEER_CMD") {
            Some(cmd) if cmd.trim() == "none" => None,
            Some(cmd) => Some(
                cmd.split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            None => {
                let entry = manifest.join(PEER_ENTRY);
                entry
                    .exists()
                    .then(|| vec!["node".to_string(), entry.display().to_string()])
            }
        }
        .map(|argv| PeerCmd {
            version: peer_version(&argv),
            argv,
        });
        Ok(Config {
            sizes,
            queries: queries.unwrap_or(200).max(1),
            spawns: spawns.unwrap_or(30).max(1),
            writes: writes.unwrap_or(500).max(1),
            keep,
            bin_dir,
            peer,
            results: manifest.join("bench-results"),
        })
    }

    fn car(&self) -> PathBuf {
        self.bin_dir.join("car")
    }

    fn car_mcp(&self) -> PathBuf {
        self.bin_dir.join("car-mcp")
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic facts

/// SplitMix64: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Words drawn by Zipf rank (s = 1): a few are everywhere, most are rare.
struct Zipf {
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(words: Vec<String>) -> Zipf {
        let mut total = 0.0;
        let mut cdf = Vec::with_capacity(words.len());
        for rank in 0..words.len() {
            total += 1.0 / (rank + 1) as f64;
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { words, cdf }
    }

    fn sample(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let i = self
            .cdf
            .partition_point(|&c| c < u)
            .min(self.words.len() - 1);
        &self.words[i]
    }
}

/// The common end of the vocabulary: real engineering words, most frequent first.
const HEAD_WORDS: &str =
    "payout ledger invoice deploy release migration schema cache token session webhook queue \
    backup snapshot config secret certificate build artifact index search billing refund account \
    tenant region cluster metrics alerts logs traces latency timeout retry quota limits upload \
    download thumbnail image video audio email sms notification report export import sync batch \
    stream event audit permission role policy user profile password login oauth scope api \
    endpoint gateway proxy dns tls firewall storage bucket blob archive compaction vacuum \
    replica shard partition checkpoint offset consumer producer topic pipeline job cron \
    scheduler worker daemon container image-pull registry package lockfile dependency lint \
    format test fixture benchmark profile-data flamegraph heap memory cpu disk network socket \
    connection pool transaction lock deadlock index-scan query-plan vector embedding model \
    prompt context budget cost currency tax discount coupon cart checkout shipping inventory \
    warehouse catalog price order customer support ticket feedback survey analytics";

/// What a fact says its subject does.
const VERBS: &str =
    "retries caches validates exports rotates shards throttles replays archives compacts signs \
    indexes migrates batches streams dedupes encrypts schedules reconciles snapshots prunes \
    mirrors audits queues flushes rebuilds paginates retains locks emits polls ships drains \
    verifies warms tags hashes pins releases compresses";

/// When it does it, `|`-separated.
const WHEN: &str =
    "nightly|hourly|weekly|on deploy|at startup|every five minutes|on failure|before release|\
    after merge|on demand|at midnight UTC|during maintenance|per request|per tenant|\
    in the background|on every push|after each import|once a day|when idle|on shutdown";

/// Kinds of codenames.
const PREFIXES: &str =
    "service job queue worker cron gateway pipeline bucket cluster topic table endpoint module \
    daemon shard replica cache bot hook lambda";

/// Owning teams.
const TEAMS: &str =
    "harbor ledger orbit falcon maple quartz cobalt juniper atlas ember nimbus onyx pioneer raven \
    sierra tundra vertex willow zephyr aurora basalt cedar delta echo fjord granite helios iris \
    jade kestrel";

/// Syllables of the made-up words in the long tail.
const SYLLABLES: &str =
    "ka lo mi ra ten vo zu bel dor fin gal hup jor kes lum nar pim quo ris sul tav wex yor zan \
    bri cos dra elm fro gri";

/// A vocabulary of `size` words: real engineering words first (the common ones), then made-up
/// words for the long tail.
fn vocabulary(rng: &mut Rng, size: usize) -> Vec<String> {
    let mut words: Vec<String> = HEAD_WORDS.split_whitespace().map(str::to_string).collect();
    let mut seen: HashSet<String> = words.iter().cloned().collect();
    seen.extend(VERBS.split_whitespace().map(str::to_string));
    let syllables: Vec<&str> = SYLLABLES.split_whitespace().collect();
    while words.len() < size {
        let parts = 2 + rng.below(2);
        let word: String = (0..parts).map(|_| rng.pick(&syllables)).collect();
        if seen.insert(word.clone()) {
            words.push(word);
        }
    }
    words
}

/// One fact: its subject (a unique codename) and its body as words.
struct Fact {
    subject: String,
    words: Vec<String>,
}

impl Fact {
    fn body(&self) -> String {
        self.words.join(" ")
    }
}

/// How selective a query is meant to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueryClass {
    /// The codename and the next word: one fact.
    Codename,
    /// Three contiguous words after the codename: a few facts.
    Phrase,
    /// The verb and the first object: two Zipf-drawn words, often in thousands of facts.
    Pair,
    /// A 5–12-word question as an agent asks it ("which team owns the job that retries the
    /// payout ledger nightly?"): a few of a fact's words among question words.
    Question,
}

impl QueryClass {
    fn name(self) -> &'static str {
        match self {
            QueryClass::Codename => "codename",
            QueryClass::Phrase => "phrase",
            QueryClass::Pair => "pair",
            QueryClass::Question => "question",
        }
    }
}

struct Query {
    text: String,
    class: QueryClass,
}

struct Corpus {
    facts: Vec<Fact>,
    queries: Vec<Query>,
}

/// `n` facts such as "service-4711 retries payout ledger nightly for team-harbor", and
/// `queries` queries cut from them as contiguous words, so that a substring search (the peer)
/// and a term search (CAR) both have something to find with the very same strings.
fn corpus(n: usize, queries: usize) -> Corpus {
    let mut rng = Rng(SEED);
    let vocab = Zipf::new(vocabulary(&mut rng, 3_000));
    let verbs = Zipf::new(VERBS.split_whitespace().map(str::to_string).collect());
    let prefixes: Vec<&str> = PREFIXES.split_whitespace().collect();
    let when: Vec<&str> = WHEN.split('|').collect();
    let teams: Vec<&str> = TEAMS.split_whitespace().collect();
    let facts: Vec<Fact> = (0..n)
        .map(|i| {
            let codename = format!("{}-{}", rng.pick(&prefixes), i + 1);
            let mut words = vec![codename.clone(), verbs.sample(&mut rng).to_string()];
            let first = vocab.sample(&mut rng).to_string();
            let mut second = vocab.sample(&mut rng).to_string();
            while second == first {
                second = vocab.sample(&mut rng).to_string();
            }
            words.push(first);
            words.push(second);
            words.extend(rng.pick(&when).split(' ').map(str::to_string));
            words.push("for".into());
            words.push(format!("team-{}", rng.pick(&teams)));
            Fact {
                subject: codename,
                words,
            }
        })
        .collect();
    let queries = (0..queries)
        .map(|j| {
            let fact = &facts[rng.below(n)];
            let (class, span) = match j % 4 {
                0 => (QueryClass::Codename, &fact.words[0..2]),
                1 => {
                    let start = 1 + rng.below(2);
                    (QueryClass::Phrase, &fact.words[start..start + 3])
                }
                2 => (QueryClass::Pair, &fact.words[1..3]),
                _ => {
                    return Query {
                        text: question(&mut rng, fact),
                        class: QueryClass::Question,
                    }
                }
            };
            Query {
                text: span.join(" "),
                class,
            }
        })
        .collect();
    Corpus { facts, queries }
}

/// A question of 5–12 words about one fact, in one of the shapes agents ask: the fact's object
/// words (and sometimes its codename, verb or team) among question words.
fn question(rng: &mut Rng, fact: &Fact) -> String {
    let w = &fact.words;
    let (codename, verb, first, second) = (&w[0], &w[1], &w[2], &w[3]);
    let team = w.last().map_or("", String::as_str);
    match rng.below(6) {
        0 => format!("which team owns the job that {verb} the {first} {second}?"),
        1 => format!("how often does {codename} run and what does it touch?"),
        2 => format!("what happens to the {first} {second} when the nightly run fails?"),
        3 => format!("who do I ask about the {first} {second} before changing it?"),
        4 => format!("is anything scheduled that {verb} {first} data for {team}?"),
        _ => format!("why is the {second} slow after we deploy the {first} change?"),
    }
}

// ---------------------------------------------------------------------------------------------
// The stdio JSON-RPC client

/// A command line that starts an MCP server over stdio.
struct ServerCmd {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

impl ServerCmd {
    fn car(config: &Config, home: &Path, project: &Path) -> ServerCmd {
        ServerCmd {
            name: "car-mcp",
            program: config.car_mcp(),
            args: Vec::new(),
            env: car_env(home, project),
            cwd: project.to_path_buf(),
        }
    }

    fn peer(peer: &PeerCmd, memory_file: &Path) -> ServerCmd {
        ServerCmd {
            name: "server-memory",
            program: PathBuf::from(&peer.argv[0]),
            args: peer.argv[1..].to_vec(),
            env: vec![("MEMORY_FILE_PATH".into(), memory_file.display().to_string())],
            cwd: memory_file
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        }
    }
}

fn car_env(home: &Path, project: &Path) -> Vec<(String, String)> {
    vec![
        ("CAR_HOME".into(), home.display().to_string()),
        ("CAR_PROJECT_DIR".into(), project.display().to_string()),
    ]
}

/// One answered request: the result, how long the round trip took (request written → reply
/// line read, before the client parses it) and the reply's size.
struct Reply {
    result: Value,
    elapsed: Duration,
    bytes: usize,
}

struct Server {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Server {
    /// Spawns the server and completes the handshake; the duration is spawn → `initialize`
    /// answered.
    async fn start(cmd: &ServerCmd) -> Result<(Server, Duration, Value)> {
        let started = Instant::now();
        let mut child = Command::new(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .env_remove("RUST_LOG")
            .current_dir(&cmd.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot spawn {}", cmd.program.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut server = Server {
            name: cmd.name,
            child,
            stdin,
            lines: BufReader::with_capacity(1 << 20, stdout).lines(),
            next_id: 0,
        };
        let init = server
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "car-bench", "version": "0"}
                }),
            )
            .await?;
        let handshake = started.elapsed();
        server
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok((server, handshake, init.result["serverInfo"].clone()))
    }

    async fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Reply> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let started = Instant::now();
        self.send(&message).await?;
        loop {
            let line = tokio::time::timeout(REQUEST_TIMEOUT, self.lines.next_line())
                .await
                .with_context(|| {
                    format!(
                        "{} did not answer {method} within {REQUEST_TIMEOUT:?}",
                        self.name
                    )
                })?
                .with_context(|| format!("reading from {}", self.name))?
                .with_context(|| format!("{} closed its stdout during {method}", self.name))?;
            let elapsed = started.elapsed();
            let mut reply: Value = serde_json::from_str(&line).with_context(|| {
                format!("{} wrote a line that is not JSON: {:.200}", self.name, line)
            })?;
            if reply.get("id").and_then(Value::as_u64) != Some(id) {
                // A notification or a request of the server's: not ours.
                continue;
            }
            if let Some(error) = reply.get("error") {
                bail!("{} answered {method} with an error: {error}", self.name);
            }
            return Ok(Reply {
                result: reply["result"].take(),
                elapsed,
                bytes: line.len(),
            });
        }
    }

    async fn call_tool(&mut self, tool: &str, arguments: Value) -> Result<Reply> {
        let reply = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await?;
        if reply.result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("{} {tool} failed: {}", self.name, reply.result["content"]);
        }
        Ok(reply)
    }

    /// Peak resident memory so far, from /proc (Linux), in MiB.
    fn peak_rss_mib(&self) -> Option<f64> {
        let pid = self.child.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    /// Closes stdin (the server's cue to exit) and waits; kills it if it lingers.
    async fn close(self) -> Result<()> {
        let Server {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            child.kill().await?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics

#[derive(Debug, Clone, Copy)]
struct Stats {
    n: usize,
    p50: f64,
    p95: f64,
    mean: f64,
    min: f64,
    max: f64,
}

impl Stats {
    /// Nearest-rank percentiles over durations, in milliseconds.
    fn of(samples: &[Duration]) -> Stats {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Stats {
            n: ms.len(),
            p50: rank(0.50),
            p95: rank(0.95),
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
            min: ms[0],
            max: ms[ms.len() - 1],
        }
    }

    fn json(&self) -> Value {
        json!({"n": self.n, "p50_ms": round(self.p50), "p95_ms": round(self.p95),
               "mean_ms": round(self.mean), "min_ms": round(self.min), "max_ms": round(self.max)})
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn median(values: &mut [usize]) -> usize {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn ms(d: Duration) -> f64 {
    round(d.as_secs_f64() * 1e3)
}

// ---------------------------------------------------------------------------------------------
// 1. Spawn → initialize

async fn bench_spawn(config: &Config, scratch: &Path) -> Result<Value> {
    let home = scratch.join("spawn-home");
    let project = scratch.join("spawn-project");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&project)?;
    let car = ServerCmd::car(config, &home, &project);
    let peer = config
        .peer
        .as_ref()
        .map(|p| ServerCmd::peer(p, &scratch.join("spawn-peer.jsonl")));
    let mut car_times = Vec::new();
    let mut peer_times = Vec::new();
    let mut car_info = Value::Null;
    let mut peer_info = Value::Null;
    // Two untimed rounds first: the first car-mcp creates the database, and both warm the page cache.
    for round in 0..config.spawns + 2 {
        let (server, took, info) = Server::start(&car).await?;
        server.close().await?;
        car_info = info;
        if round >= 2 {
            car_times.push(took);
        }
        if let Some(peer) = &peer {
            let (server, took, info) = Server::start(peer).await?;
            server.close().await?;
            peer_info = info;
            if round >= 2 {
                peer_times.push(took);
            }
        }
    }
    let car = Stats::of(&car_times);
    println!(
        "\n## 1. spawn → initialize answered ({} spawns each, alternating; empty CAR_HOME)",
        config.spawns
    );
    println!(
        "{:<16} {:>9} {:>9} {:>9}",
        "server", "p50 ms", "p95 ms", "min ms"
    );
    println!(
        "{:<16} {:>9.2} {:>9.2} {:>9.2}",
        "car-mcp", car.p50, car.p95, car.min
    );
    let mut out = json!({
        "spawns": config.spawns,
        "car": car.json(), "car_server_info": car_info,
        "goal_p50_ms": GOAL_SPAWN_MS, "goal_met": car.p50 <= GOAL_SPAWN_MS,
    });
    if !peer_times.is_empty() {
        let peer = Stats::of(&peer_times);
        println!(
            "{:<16} {:>9.2} {:>9.2} {:>9.2}",
            "server-memory", peer.p50, peer.p95, peer.min
        );
        println!("ratio peer/car p50: {:.1}×", peer.p50 / car.p50);
        out["peer"] = peer.json();
        out["peer_server_info"] = peer_info;
        out["ratio_peer_over_car_p50"] = json!(round(peer.p50 / car.p50));
    }
    println!(
        "goal p50 ≤ {GOAL_SPAWN_MS} ms: {}",
        verdict(car.p50 <= GOAL_SPAWN_MS)
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 2. Queries at each size

/// Imports notes with `car memory import` and returns how long it took.
fn car_import(
    config: &Config,
    home: &Path,
    project: &Path,
    file: &Path,
    expected: usize,
) -> Result<Duration> {
    let started = Instant::now();
    let output = std::process::Command::new(config.car())
        .args(["--json", "memory", "import"])
        .arg(file)
        .envs(car_env(home, project))
        .env_remove("RUST_LOG")
        .current_dir(project)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", config.car().display()))?;
    let took = started.elapsed();
    let reply: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "car memory import printed no JSON (exit {:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let imported = reply["data"]["imported"].as_u64().unwrap_or(0) as usize;
    ensure!(
        imported == expected,
        "car memory import imported {imported} of {expected}: {reply}"
    );
    Ok(took)
}

/// Current untenanted entries visible from the project, counted by `car memory export -o -`.
fn car_count(config: &Config, home: &Path, project: &Path) -> Result<usize> {
    let output = std::process::Command::new(config.car())
        .args(["--json", "memory", "export", "-o", "-"])
        .envs(car_env(home, project))
        .env_remove("RUST_LOG")
        .current_dir(project)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", config.car().display()))?;
    let reply: Value =
        serde_json::from_slice(&output.stdout).context("car memory export printed no JSON")?;
    reply["data"]["count"]
        .as_u64()
        .map(|n| n as usize)
        .with_context(|| {
            format!(
                "car memory export gave no count: {:.300}",
                reply.to_string()
            )
        })
}

/// One server's side of the query phase.
#[derive(Default)]
struct Side {
    /// `ping` round trips: the transport's floor.
    pings: Vec<Duration>,
    /// A trivial tool's round trips (`skill_list` on an empty registry), interleaved with the
    /// queries: what any tool call costs in this client, the yardstick.
    trivial: Vec<Duration>,
    /// The same, each right after a query of the one-server-at-a-time pass.
    trivial_alone: Vec<Duration>,
    times: Vec<Duration>,
    /// The same queries, alternating with the other server.
    interleaved: Vec<Duration>,
    hits: Vec<(QueryClass, usize)>,
    bytes: Vec<usize>,
}

impl Side {
    fn record(&mut self, class: QueryClass, reply: &Reply, hits: usize) {
        self.times.push(reply.elapsed);
        self.hits.push((class, hits));
        self.bytes.push(reply.bytes);
    }

    /// Latency, median hits, queries with no hit and most hits of one query class.
    fn class_stats(&self, class: QueryClass) -> (Stats, usize, usize, usize) {
        let times: Vec<Duration> = self
            .times
            .iter()
            .zip(&self.hits)
            .filter(|(_, (c, _))| *c == class)
            .map(|(t, _)| *t)
            .collect();
        let mut hits: Vec<usize> = self
            .hits
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, h)| *h)
            .collect();
        let zero = hits.iter().filter(|&&h| h == 0).count();
        let max = hits.iter().copied().max().unwrap_or(0);
        (Stats::of(&times), median(&mut hits), zero, max)
    }

    fn json(&self, first: Duration, start: Duration, rss: Option<f64>) -> Value {
        let mut bytes = self.bytes.clone();
        let classes: Vec<Value> = [
            QueryClass::Codename,
            QueryClass::Phrase,
            QueryClass::Pair,
            QueryClass::Question,
        ]
        .into_iter()
        .map(|class| {
            let (stats, median_hits, zero, max_hits) = self.class_stats(class);
            json!({"class": class.name(), "latency": stats.json(), "median_hits": median_hits,
                       "max_hits": max_hits, "queries_with_no_hit": zero})
        })
        .collect();
        json!({
            "latency": Stats::of(&self.times).json(),
            "ping": Stats::of(&self.pings).json(),
            "trivial_tool": (!self.trivial.is_empty()).then(|| Stats::of(&self.trivial).json()),
            "interleaved_latency": (!self.interleaved.is_empty()).then(|| Stats::of(&self.interleaved).json()),
            "first_query_ms": ms(first),
            "spawn_to_initialize_ms": ms(start),
            "median_reply_bytes": median(&mut bytes),
            "peak_rss_mib": rss.map(round),
            "by_class": classes,
        })
    }
}

/// How a server is asked a query.
struct QueryTool {
    name: &'static str,
    /// CAR takes a result count; the peer returns every match.
    k: Option<u64>,
}

const CAR_QUERY: QueryTool = QueryTool {
    name: "memory_query",
    k: Some(QUERY_K),
};

const PEER_QUERY: QueryTool = QueryTool {
    name: "search_nodes",
    k: None,
};

impl QueryTool {
    async fn ask(&self, server: &mut Server, query: &Query) -> Result<Reply> {
        let args = match self.k {
            Some(k) => json!({"query": query.text, "k": k}),
            None => json!({"query": query.text}),
        };
        server.call_tool(self.name, args).await
    }
}

fn car_hits(result: &Value) -> usize {
    result["structuredContent"]["results"]
        .as_array()
        .map_or(0, Vec::len)
}

fn peer_hits(result: &Value) -> usize {
    result["structuredContent"]["entities"]
        .as_array()
        .map_or(0, Vec::len)
}

async fn bench_queries(config: &Config, scratch: &Path, n: usize) -> Result<Value> {
    let dir = scratch.join(format!("size-{n}"));
    let home = dir.join("car-home");
    let project = dir.join("project");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&project)?;

    let generated = Instant::now();
    let corpus = corpus(n, config.queries);
    let generate_time = generated.elapsed();

    let notes: Vec<Value> = corpus
        .facts
        .iter()
        .map(|f| json!({"subject": f.subject, "body": f.body(), "kind": "fact"}))
        .collect();
    let notes_file = dir.join("notes.json");
    std::fs::write(&notes_file, serde_json::to_vec(&json!({"notes": notes}))?)?;
    let import_time = car_import(config, &home, &project, &notes_file, n)?;

    let peer_file = dir.join("memory.jsonl");
    let written = Instant::now();
    let mut jsonl = String::new();
    for f in &corpus.facts {
        let line = json!({"type": "entity", "name": f.subject, "entityType": "fact", "observations": [f.body()]});
        jsonl.push_str(&line.to_string());
        jsonl.push('\n');
    }
    std::fs::write(&peer_file, jsonl)?;
    let peer_write_time = written.elapsed();

    let (mut car, car_start, _) = Server::start(&ServerCmd::car(config, &home, &project)).await?;
    let mut peer = match &config.peer {
        Some(p) => Some(Server::start(&ServerCmd::peer(p, &peer_file)).await?),
        None => None,
    };

    // The first query of each server is timed apart: CAR builds its in-memory index on it.
    let warm = &corpus.queries[0];
    let car_first = CAR_QUERY.ask(&mut car, warm).await?.elapsed;
    let peer_first = match &mut peer {
        Some((server, _, _)) => Some(PEER_QUERY.ask(server, warm).await?.elapsed),
        None => None,
    };

    let mut car_side = Side::default();
    let mut peer_side = Side::default();
    // The transport's floor.
    for _ in 0..PINGS {
        let ping = car.request("ping", json!({})).await?;
        car_side.pings.push(ping.elapsed);
        if let Some((server, _, _)) = &mut peer {
            peer_side
                .pings
                .push(server.request("ping", json!({})).await?.elapsed);
        }
    }
    // Every query against one server, then against the other: each has the machine (and the
    // CPU caches) to itself. These are the headline figures.
    for query in &corpus.queries {
        let reply = CAR_QUERY.ask(&mut car, query).await?;
        car_side.record(query.class, &reply, car_hits(&reply.result));
        car_side
            .trivial_alone
            .push(car.call_tool("skill_list", json!({})).await?.elapsed);
    }
    if let Some((server, _, _)) = &mut peer {
        for query in &corpus.queries {
            let reply = PEER_QUERY.ask(server, query).await?;
            peer_side.record(query.class, &reply, peer_hits(&reply.result));
        }
    }
    // The same queries again, alternating between the servers: each query now finds the CPU
    // caches full of the other server's data, as it would after an agent's other work. The
    // query and the trivial tool take turns at coming right after the other server's call, so
    // both meet the same caches.
    for (i, query) in corpus.queries.iter().enumerate() {
        if i % 2 == 1 {
            car_side
                .trivial
                .push(car.call_tool("skill_list", json!({})).await?.elapsed);
        }
        car_side
            .interleaved
            .push(CAR_QUERY.ask(&mut car, query).await?.elapsed);
        if i % 2 == 0 {
            car_side
                .trivial
                .push(car.call_tool("skill_list", json!({})).await?.elapsed);
        }
        if let Some((server, _, _)) = &mut peer {
            peer_side
                .interleaved
                .push(PEER_QUERY.ask(server, query).await?.elapsed);
        }
    }
    let car_rss = car.peak_rss_mib();
    car.close().await?;

    let car_stats = Stats::of(&car_side.times);
    println!(
        "\n## 2. query at {n} facts ({} queries, one server at a time; k = {QUERY_K})",
        corpus.queries.len()
    );
    println!(
        "car memory import: {:.2} s ({:.0} facts/s); peer JSONL written directly in {:.3} s; corpus generated in {:.2} s",
        import_time.as_secs_f64(),
        n as f64 / import_time.as_secs_f64(),
        peer_write_time.as_secs_f64(),
        generate_time.as_secs_f64()
    );
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>9}",
        "server / tool",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "ping ms",
        "1st call ms",
        "start ms",
        "RSS MiB"
    );
    let rss = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.0}"));
    println!(
        "{:<30} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>11.1} {:>10.1} {:>9}",
        "car-mcp memory_query",
        car_stats.p50,
        car_stats.p95,
        car_stats.mean,
        Stats::of(&car_side.pings).p50,
        ms(car_first),
        ms(car_start),
        rss(car_rss)
    );
    let trivial = Stats::of(&car_side.trivial);
    let queried = Stats::of(&car_side.interleaved);
    let trivial_alone = Stats::of(&car_side.trivial_alone);
    println!(
        "car-mcp memory_query / skill_list (same client, one server at a time): p50 {:.3} / {:.3} ms = {:.2}× (goal ≤ 2× at 10k)",
        car_stats.p50,
        trivial_alone.p50,
        car_stats.p50 / trivial_alone.p50
    );
    println!(
        "car-mcp memory_query / skill_list (same client, interleaved with the peer, each after the peer's call half the time): p50 {:.3} / {:.3} ms = {:.2}×",
        queried.p50,
        trivial.p50,
        queried.p50 / trivial.p50
    );
    let mut out = json!({
        "facts": n,
        "query_over_trivial_tool_p50": round(queried.p50 / trivial.p50),
        "query_over_trivial_tool_alone_p50": round(car_stats.p50 / trivial_alone.p50),
        "queries": corpus.queries.len(),
        "car_import_s": round(import_time.as_secs_f64()),
        "car_import_facts_per_s": (n as f64 / import_time.as_secs_f64()).round(),
        "peer_file_write_s": round(peer_write_time.as_secs_f64()),
        "car": car_side.json(car_first, car_start, car_rss),
    });
    if let (Some((server, peer_start, _)), Some(peer_first)) = (peer, peer_first) {
        let peer_rss = server.peak_rss_mib();
        server.close().await?;
        let peer_stats = Stats::of(&peer_side.times);
        println!(
            "{:<30} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>11.1} {:>10.1} {:>9}",
            "server-memory search_nodes",
            peer_stats.p50,
            peer_stats.p95,
            peer_stats.mean,
            Stats::of(&peer_side.pings).p50,
            ms(peer_first),
            ms(peer_start),
            rss(peer_rss)
        );
        let ratio = peer_stats.p50 / car_stats.p50;
        println!(
            "ratio peer/car: p50 {ratio:.1}×, p95 {:.1}×",
            peer_stats.p95 / car_stats.p95
        );
        let car_mixed = Stats::of(&car_side.interleaved);
        let peer_mixed = Stats::of(&peer_side.interleaved);
        println!(
            "interleaved (car, peer, car, …): car p50 {:.3} p95 {:.3}; peer p50 {:.3} p95 {:.3}; ratio p50 {:.1}×",
            car_mixed.p50,
            car_mixed.p95,
            peer_mixed.p50,
            peer_mixed.p95,
            peer_mixed.p50 / car_mixed.p50
        );
        out["interleaved_ratio_peer_over_car_p50"] = json!(round(peer_mixed.p50 / car_mixed.p50));
        out["peer"] = peer_side.json(peer_first, peer_start, peer_rss);
        out["ratio_peer_over_car_p50"] = json!(round(ratio));
        out["ratio_peer_over_car_p95"] = json!(round(peer_stats.p95 / car_stats.p95));
        let goal = match n {
            10_000 => Some(20.0),
            100_000 => Some(100.0),
            _ => None,
        };
        if let Some(goal) = goal {
            println!("goal ratio ≥ {goal}×: {}", verdict(ratio >= goal));
            out["goal_ratio"] = json!(goal);
            out["goal_ratio_met"] = json!(ratio >= goal);
        }
    }
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>11} {:>11}",
        "by query class", "car p50", "peer p50", "car hits", "peer hits", "peer max"
    );
    for class in [
        QueryClass::Codename,
        QueryClass::Phrase,
        QueryClass::Pair,
        QueryClass::Question,
    ] {
        let (car_class, car_hits, _, _) = car_side.class_stats(class);
        let (peer_p50, peer_hits, peer_max) = if peer_side.times.is_empty() {
            ("-".to_string(), "-".to_string(), "-".to_string())
        } else {
            let (s, h, _, max) = peer_side.class_stats(class);
            (format!("{:.3}", s.p50), h.to_string(), max.to_string())
        };
        println!(
            "{:<30} {:>9.3} {:>9} {:>9} {:>11} {:>11}",
            format!("  {} (median hits)", class.name()),
            car_class.p50,
            peer_p50,
            car_hits,
            peer_hits,
            peer_max
        );
    }
    // Goals for questions as agents ask them (issue 13): p50 ≤ 1 ms at 10k, ≤ 2 ms at 100k.
    let (questions, question_hits, question_misses, _) = car_side.class_stats(QueryClass::Question);
    let question_goal = match n {
        10_000 => Some(1.0),
        100_000 => Some(2.0),
        _ => None,
    };
    out["question"] = json!({"latency": questions.json(), "median_hits": question_hits,
                             "no_hit": question_misses});
    if let Some(goal) = question_goal {
        let met = questions.p50 <= goal;
        println!(
            "goal question p50 ≤ {goal} ms at {n}: {} ({:.3} ms)",
            verdict(met),
            questions.p50
        );
        out["question"]["goal_p50_ms"] = json!(goal);
        out["question"]["goal_p50_met"] = json!(met);
    }
    if n == 100_000 {
        let met = car_stats.p50 <= GOAL_QUERY_P50_MS_100K;
        println!(
            "goal p50 ≤ {GOAL_QUERY_P50_MS_100K} ms at 100k: {}",
            verdict(met)
        );
        out["goal_p50_ms"] = json!(GOAL_QUERY_P50_MS_100K);
        out["goal_p50_met"] = json!(met);
    }
    if config.keep {
        let queries: Vec<&str> = corpus.queries.iter().map(|q| q.text.as_str()).collect();
        std::fs::write(dir.join("queries.json"), serde_json::to_vec(&queries)?)?;
    } else {
        // 100k facts are a few hundred MB with the WAL and the peer's file.
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 3. Concurrent writers

struct WriterRun {
    times: Vec<Duration>,
    acked: usize,
}

async fn write_facts(
    mut server: Server,
    writer: usize,
    count: usize,
    processes: usize,
) -> Result<(Server, WriterRun)> {
    let mut rng = Rng(SEED ^ ((processes as u64) << 32) ^ writer as u64);
    let mut run = WriterRun {
        times: Vec::with_capacity(count),
        acked: 0,
    };
    let verbs: Vec<&str> = VERBS.split_whitespace().collect();
    let objects: Vec<&str> = HEAD_WORDS.split_whitespace().collect();
    let when: Vec<&str> = WHEN.split('|').collect();
    let teams: Vec<&str> = TEAMS.split_whitespace().collect();
    for i in 0..count {
        let subject = format!("bench-p{processes}-w{writer}-{i}");
        let body = format!(
            "{subject} {} {} {} for team-{}",
            rng.pick(&verbs),
            rng.pick(&objects),
            rng.pick(&when),
            rng.pick(&teams)
        );
        let reply = server
            .call_tool("memory_add_fact", json!({"subject": subject, "body": body}))
            .await?;
        ensure!(
            reply.result["structuredContent"]["durable"] == json!(true),
            "memory_add_fact answered without durable: true: {}",
            reply.result
        );
        run.times.push(reply.elapsed);
        run.acked += 1;
    }
    Ok((server, run))
}

async fn bench_writes(config: &Config, scratch: &Path, processes: usize) -> Result<Value> {
    let dir = scratch.join(format!("writes-{processes}"));
    let home = dir.join("car-home");
    let project = dir.join("project");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&project)?;
    let cmd = ServerCmd::car(config, &home, &project);
    let mut servers = Vec::new();
    for _ in 0..processes {
        servers.push(Server::start(&cmd).await?.0);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (writer, server) in servers.into_iter().enumerate() {
        tasks.spawn(write_facts(server, writer, config.writes, processes));
    }
    let mut times = Vec::new();
    let mut acked = 0;
    let mut finished = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (server, run) = joined??;
        times.extend(run.times);
        acked += run.acked;
        finished.push(server);
    }
    let wall = started.elapsed();
    for server in finished {
        server.close().await?;
    }
    let stored = car_count(config, &home, &project)?;
    let per_second = acked as f64 / wall.as_secs_f64();
    let latency = Stats::of(&times);
    println!(
        "{:<12} {:>9} {:>10.0} {:>9.3} {:>9.3} {:>9} {:>9}",
        processes,
        acked,
        per_second,
        latency.p50,
        latency.p95,
        stored,
        if stored == acked { "yes" } else { "NO" }
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(json!({
        "processes": processes,
        "facts_per_process": config.writes,
        "acked": acked,
        "wall_s": round(wall.as_secs_f64()),
        "facts_per_s": per_second.round(),
        "latency": latency.json(),
        "stored_count": stored,
        "count_matches": stored == acked,
    }))
}

// ---------------------------------------------------------------------------------------------

/// The first line a command prints, if it runs.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(MANIFEST_DIR)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

/// The load average: the machine is shared, so a run says how busy it was.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn machine() -> Value {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_once(':').map(|(_, m)| m.trim().to_string()));
    let dirty = first_line("git", &["status", "--porcelain", "--untracked-files=no"]).is_some();
    json!({
        "cpus": cpus, "cpu_model": model, "os": std::env::consts::OS,
        "node": first_line("node", &["--version"]),
        "git_commit": first_line("git", &["rev-parse", "HEAD"]), "git_dirty": dirty,
    })
}

async fn run(config: Config) -> Result<()> {
    for bin in [config.car(), config.car_mcp()] {
        ensure!(
            bin.exists(),
            "{} not found; build with `cargo build --release --bins` or set CAR_BIN_DIR",
            bin.display()
        );
    }
    let scratch = tempfile::Builder::new().prefix("car-bench-").tempdir()?;
    let began = Instant::now();
    let load_before = load_average();
    println!("# car-mcp vs @modelcontextprotocol/server-memory — one stdio JSON-RPC client, one request at a time");
    println!("car binaries: {}", config.bin_dir.display());
    match &config.peer {
        Some(p) => println!("peer: {} (version {})", p.argv.join(" "), p.version),
        None => println!("peer: skipped (PEER_CMD=none or not installed under tools/)"),
    }
    let spawn = bench_spawn(&config, scratch.path()).await?;
    let mut sizes = Vec::new();
    for &n in &config.sizes {
        sizes.push(bench_queries(&config, scratch.path(), n).await?);
    }
    println!("\n## 3. memory_add_fact throughput ({} calls back to back per process, one CAR_HOME, fresh)", config.writes);
    println!(
        "{:<12} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "processes", "acked", "facts/s", "p50 ms", "p95 ms", "stored", "match"
    );
    let mut writes = Vec::new();
    for processes in [1, 4] {
        writes.push(bench_writes(&config, scratch.path(), processes).await?);
    }
    let total = began.elapsed();
    let load = json!({"before": load_before, "after": load_average()});
    println!(
        "load average (1, 5, 15 min) before: {}, after: {}",
        load["before"].as_str().unwrap_or("?"),
        load["after"].as_str().unwrap_or("?")
    );
    if config.keep {
        println!("kept the generated data in {}", scratch.keep().display());
    }
    let report = json!({
        "schema_version": 1,
        "machine": machine(),
        "load_average": load,
        "config": {
            "sizes": config.sizes, "queries": config.queries, "spawns": config.spawns,
            "writes_per_process": config.writes, "k": QUERY_K, "seed": SEED,
            "car_bin_dir": config.bin_dir.display().to_string(),
            "peer_cmd": config.peer.as_ref().map(|p| p.argv.join(" ")),
        },
        "peer_package": config.peer.as_ref().map(|p| json!({"name": "@modelcontextprotocol/server-memory", "version": p.version})),
        "spawn": spawn,
        "query": sizes,
        "write": writes,
        "total_s": round(total.as_secs_f64()),
    });
    std::fs::create_dir_all(&config.results)?;
    let path = config.results.join("mcp.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")?;
    println!(
        "\ntotal {:.0} s; results written to {}",
        total.as_secs_f64(),
        path.display()
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let outcome = Config::load().and_then(|config| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(run(config))
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench mcp: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
