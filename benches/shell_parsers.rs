//! CAR's hand-written shell parser (`src/policy/shell.rs`) against brush-parser, the parser of a
//! bash-compatible shell, on what the hook reads: every command of the preset and gate corpora
//! (`tests/it/data/*.tsv`) and a fuzz set of mutants made from them (deterministic: characters
//! the shell cares about inserted, deleted and swapped, commands cut short). For each parser:
//! how many inputs it reads (a parse it returns, not an error or a panic), how many simple
//! commands it finds in the corpus (CAR counts those inside `$(…)`, backticks and `<(…)`;
//! brush-parser leaves a substitution as the text of a word, to be parsed again when expanded),
//! and the median time of one parse, in the same run, interleaved.
//!
//! Run with `scripts/bench-shell-parsers.sh` (it enables the `shell-parser-bench` feature).
//! Results: `bench-results/shell_parsers.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

/// Mutants made from each corpus command.
const MUTANTS: usize = 12;
/// Times each input is parsed by each parser for the timing.
const REPEATS: usize = 20;

fn corpus(manifest: &std::path::Path) -> Vec<String> {
    let mut commands = Vec::new();
    for name in ["shell_corpus.tsv", "gate_corpus.tsv"] {
        let text = std::fs::read_to_string(manifest.join("tests/it/data").join(name)).unwrap();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let command = line.splitn(3, '\t').nth(2).unwrap();
            commands.push(
                command
                    .replace("\\n", "\n")
                    .replace("{root}", "/work/project")
                    .replace("{car_home}", "/home/u/.car"),
            );
        }
    }
    commands
}

/// A small deterministic generator (xorshift), so every run sees the same fuzz set.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutants(commands: &[String]) -> Vec<String> {
    const SHELLY: &[char] = &[
        '\'', '"', '$', '(', ')', '`', ';', '|', '&', '<', '>', '\\', '{', '}', '\n', '#', ' ',
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for command in commands {
        for _ in 0..MUTANTS {
            let mut chars: Vec<char> = command.chars().collect();
            for _ in 0..1 + rng.below(3) {
                match rng.below(4) {
                    0 => {
                        let at = rng.below(chars.len() + 1);
                        chars.insert(at, SHELLY[rng.below(SHELLY.len())]);
                    }
                    1 if !chars.is_empty() => {
                        let at = rng.below(chars.len());
                        chars.remove(at);
                    }
                    2 if chars.len() > 1 => {
                        let (a, b) = (rng.below(chars.len()), rng.below(chars.len()));
                        chars.swap(a, b);
                    }
                    _ => {
                        let keep = rng.below(chars.len() + 1);
                        chars.truncate(keep);
                    }
                }
            }
            out.push(chars.into_iter().collect());
        }
    }
    out
}

fn brush(text: &str) -> Option<usize> {
    let mut parser = brush_parser::Parser::new(
        std::io::Cursor::new(text.as_bytes()),
        &brush_parser::ParserOptions::default(),
    );
    let program = parser.parse_program().ok()?;
    Some(format!("{program:?}").matches("SimpleCommand {").count())
}

/// What one parser did with a set of inputs.
#[derive(Default)]
struct Tally {
    read: usize,
    refused: usize,
    panicked: usize,
    commands: usize,
    nanos: Vec<f64>,
}

fn tally(inputs: &[String], parse: &dyn Fn(&str) -> Option<usize>, tally: &mut Tally) {
    for input in inputs {
        match catch_unwind(AssertUnwindSafe(|| parse(input))) {
            Ok(Some(n)) => {
                tally.read += 1;
                tally.commands += n;
            }
            Ok(None) => tally.refused += 1,
            Err(_) => tally.panicked += 1,
        }
    }
}

fn time(inputs: &[String], parse: &dyn Fn(&str) -> Option<usize>, nanos: &mut Vec<f64>) {
    for input in inputs {
        let start = Instant::now();
        for _ in 0..REPEATS {
            let _ = catch_unwind(AssertUnwindSafe(|| std::hint::black_box(parse(input))));
        }
        nanos.push(start.elapsed().as_nanos() as f64 / REPEATS as f64);
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[sorted.len() / 2]
}

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let commands = corpus(&manifest);
    let fuzz = mutants(&commands);
    // brush-parser's panics would print a backtrace per input; the tally counts them instead.
    std::panic::set_hook(Box::new(|_| {}));
    let car = |text: &str| car::shell_simple_commands(text);
    let parsers: [(&str, &dyn Fn(&str) -> Option<usize>); 2] = [
        ("car (src/policy/shell.rs)", &car),
        ("brush-parser 0.4", &brush),
    ];
    let mut report = Vec::new();
    let mut lines = Vec::new();
    for (set, inputs) in [("corpus", &commands), ("fuzz", &fuzz)] {
        let mut tallies: Vec<Tally> = parsers.iter().map(|_| Tally::default()).collect();
        for ((_, parse), t) in parsers.iter().zip(&mut tallies) {
            tally(inputs, *parse, t);
        }
        // Interleaved timing: each input by each parser in turn.
        for input in inputs.iter() {
            for ((_, parse), t) in parsers.iter().zip(&mut tallies) {
                time(std::slice::from_ref(input), *parse, &mut t.nanos);
            }
        }
        for ((name, _), t) in parsers.iter().zip(&tallies) {
            let line = format!(
                "{set:6} {name:26} read {:4}/{} refused {:4} panicked {:3} simple commands {:5} median {:8.1} µs",
                t.read,
                inputs.len(),
                t.refused,
                t.panicked,
                t.commands,
                median(&t.nanos) / 1000.0
            );
            println!("{line}");
            lines.push(line);
            report.push(json!({
                "set": set, "parser": name, "inputs": inputs.len(), "read": t.read,
                "refused": t.refused, "panicked": t.panicked, "simple_commands": t.commands,
                "median_us": median(&t.nanos) / 1000.0,
            }));
        }
    }
    let results = manifest.join("bench-results");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::write(
        results.join("shell_parsers.json"),
        serde_json::to_string_pretty(&json!({"results": report})).unwrap(),
    )
    .unwrap();
    eprintln!("results: {}/shell_parsers.json", results.display());
}
