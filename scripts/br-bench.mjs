#!/usr/bin/env node
// Measures beads_rust (`br`) on the same task graph as benches/tasks.rs: the ready query and a
// claim, each as one `br` process per call, the way an agent runs it.
//
// Usage:
//   node scripts/br-bench.mjs convert GRAPH.jsonl [--prefix bench] > issues.jsonl
//   node scripts/br-bench.mjs run GRAPH.jsonl --br PATH/TO/br [--ready-calls 10] [--claim-calls 5]
//       [--prefix bench] [--keep]
//
// GRAPH.jsonl is the output of `node scripts/taskmaster-bench.mjs --generate N`
// ({"ref":"t17","title":…,"priority":0-4,"status":"done"|"open","depends_on":["t3",…]}).
// `convert` writes beads' issues.jsonl: id "<prefix>-<n>", status closed (done) or open, the same
// priority (br's P0-P4 are CAR's 0-4), issue_type task, and one "blocks" dependency per depends_on.
// `run` makes a temporary workspace (`br init --prefix`), writes the converted file to
// .beads/issues.jsonl, times `br sync --import-only`, checks the imported count, then times
// `br ready --json` (default limit: the whole ready set) N times and `br update ID --claim --json`
// on the first M ready tasks (each a different one), then one more claim under
// `/usr/bin/time -v` for its peak RSS. The ready set is checked against the graph (open tasks
// whose dependencies are all done). One JSON object goes to stdout; progress to stderr.
// Node built-ins only.

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

function die(msg) {
    process.stderr.write(`br-bench: ${msg}\n`);
    process.exit(1);
}

function parseArgs(argv) {
    const opts = { readyCalls: 10, claimCalls: 5, prefix: "bench", keep: false };
    const rest = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const val = () => {
            if (i + 1 >= argv.length) die(`${a} needs a value`);
            return argv[++i];
        };
        if (a === "--br") opts.br = val();
        else if (a === "--ready-calls") opts.readyCalls = Number(val());
        else if (a === "--claim-calls") opts.claimCalls = Number(val());
        else if (a === "--prefix") opts.prefix = val();
        else if (a === "--keep") opts.keep = true;
        else if (a.startsWith("--")) die(`unknown option ${a}`);
        else rest.push(a);
    }
    [opts.mode, opts.graph] = rest;
    return opts;
}

const STAMP = "2026-01-01T00:00:00Z";

function loadGraph(file) {
    const tasks = [];
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        if (line.trim()) tasks.push(JSON.parse(line));
    }
    return tasks;
}

function brId(prefix, ref) {
    const m = /^t(\d+)$/.exec(ref);
    if (!m) die(`unexpected task ref ${JSON.stringify(ref)}`);
    return `${prefix}-${m[1]}`;
}

function convertLines(tasks, prefix) {
    return tasks.map((t) => {
        const id = brId(prefix, t.ref);
        const closed = t.status === "done";
        const issue = {
            id,
            title: t.title,
            status: closed ? "closed" : "open",
            priority: t.priority,
            issue_type: "task",
            created_at: STAMP,
            updated_at: STAMP,
        };
        if (closed) {
            issue.closed_at = STAMP;
            issue.close_reason = "done";
        }
        if (t.depends_on.length) {
            issue.dependencies = t.depends_on.map((d) => ({
                issue_id: id,
                depends_on_id: brId(prefix, d),
                type: "blocks",
                created_at: STAMP,
            }));
        }
        return JSON.stringify(issue);
    });
}

function expectedReady(tasks, prefix) {
    const done = new Set(tasks.filter((t) => t.status === "done").map((t) => t.ref));
    return new Set(
        tasks
            .filter((t) => t.status !== "done" && t.depends_on.every((d) => done.has(d)))
            .map((t) => brId(prefix, t.ref)),
    );
}

const ms = (ns) => Math.round(Number(ns) / 1e3) / 1e3;
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function run(opts) {
    if (!opts.br) die("give --br PATH");
    const br = path.resolve(opts.br);
    const tasks = loadGraph(opts.graph);
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "br-bench-"));
    const ws = path.join(scratch, "ws");
    const home = path.join(scratch, "home");
    fs.mkdirSync(ws);
    fs.mkdirSync(home);
    const env = { ...process.env, HOME: home, RUST_LOG: "error", NO_COLOR: "1" };
    delete env.BEADS_DIR;
    delete env.BR_OUTPUT_FORMAT;

    const call = (args, { check = true, prefix = [] } = {}) => {
        const argv = [...prefix, br, ...args];
        const t0 = process.hrtime.bigint();
        const r = spawnSync(argv[0], argv.slice(1), {
            cwd: ws,
            env,
            encoding: "utf8",
            maxBuffer: 1 << 30,
        });
        const wall = ms(process.hrtime.bigint() - t0);
        if (r.error) die(`${args.join(" ")}: ${r.error.message}`);
        if (check && r.status !== 0)
            die(`br ${args.join(" ")} exited ${r.status}\n${r.stderr}\n${r.stdout.slice(0, 2000)}`);
        return { wall, ...r };
    };

    const version = call(["--version"]).stdout.trim();
    process.stderr.write(`br-bench: ${version}; workspace ${ws}\n`);
    call(["init", "--prefix", opts.prefix]);

    const lines = convertLines(tasks, opts.prefix);
    const jsonl = path.join(ws, ".beads", "issues.jsonl");
    fs.writeFileSync(jsonl, lines.join("\n") + "\n");
    process.stderr.write(`br-bench: importing ${tasks.length} issues\n`);
    const imp = call(["sync", "--import-only", "--json"]);
    process.stderr.write(`br-bench: import ${imp.wall} ms\n`);
    const count = call(["count", "--json", "--include-closed", "--by", "status"]);
    const dbBytes = fs
        .readdirSync(path.join(ws, ".beads"))
        .filter((f) => f.endsWith(".db") || f.includes(".db-"))
        .reduce((s, f) => s + fs.statSync(path.join(ws, ".beads", f)).size, 0);

    const want = expectedReady(tasks, opts.prefix);
    const readyMs = [];
    let ready = [];
    for (let i = 0; i < opts.readyCalls; i++) {
        const r = call(["ready", "--json"]);
        readyMs.push(r.wall);
        const parsed = JSON.parse(r.stdout);
        ready = Array.isArray(parsed) ? parsed : parsed.issues;
        process.stderr.write(`br-bench: ready #${i + 1} ${r.wall} ms, ${ready.length} rows\n`);
    }
    const got = new Set(ready.map((x) => x.id));
    const readyOk = got.size === want.size && [...got].every((id) => want.has(id));
    if (!readyOk)
        process.stderr.write(
            `br-bench: WARNING ready set differs: got ${got.size}, want ${want.size}\n`,
        );

    const claimMs = [];
    const claimed = [];
    const ids = ready.map((x) => x.id);
    for (let i = 0; i < opts.claimCalls; i++) {
        const id = ids[i];
        const r = call(["update", id, "--claim", "--actor", "bench", "--json"]);
        claimMs.push(r.wall);
        claimed.push(id);
        process.stderr.write(`br-bench: claim ${id} ${r.wall} ms\n`);
    }
    // Each claim moved a task out of the ready set.
    const after = JSON.parse(call(["ready", "--json", "--limit", "1"]).stdout);
    const afterFirst = (Array.isArray(after) ? after : after.issues)[0]?.id;
    const shown = JSON.parse(call(["show", claimed[0], "--json"]).stdout);
    const shownIssue = Array.isArray(shown) ? shown[0] : (shown.issue ?? shown);

    // One more claim under /usr/bin/time -v, for its peak RSS.
    const rssId = ids[opts.claimCalls];
    const timed = call(["update", rssId, "--claim", "--actor", "bench", "--json"], {
        prefix: ["/usr/bin/time", "-v"],
    });
    const rssKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(timed.stderr)?.[1]);
    const rssReady = call(["ready", "--json"], { prefix: ["/usr/bin/time", "-v"] });
    const rssReadyKb = Number(
        /Maximum resident set size \(kbytes\): (\d+)/.exec(rssReady.stderr)?.[1],
    );
    process.stderr.write(`br-bench: claim peak RSS ${rssKb} kB (${timed.wall} ms)\n`);

    const result = {
        tool: "beads_rust (br)",
        version,
        tasks: tasks.length,
        dependencies: tasks.reduce((s, t) => s + t.depends_on.length, 0),
        imported: JSON.parse(count.stdout),
        import_ms: imp.wall,
        import_command: "br sync --import-only --json (after br init --prefix; .beads/issues.jsonl written by the converter)",
        db_bytes: dbBytes,
        ready: {
            command: "br ready --json (default limit: the whole ready set, default hybrid sort)",
            calls: readyMs.length,
            p50_ms: p50(readyMs),
            min_ms: Math.min(...readyMs),
            max_ms: Math.max(...readyMs),
            all_ms: readyMs,
            rows: ready.length,
            expected_rows: want.size,
            matches_graph: readyOk,
            peak_rss_kb: rssReadyKb,
        },
        claim: {
            command: "br update ID --claim --actor bench --json (ID = the next task of the ready list)",
            calls: claimMs.length,
            p50_ms: p50(claimMs),
            min_ms: Math.min(...claimMs),
            max_ms: Math.max(...claimMs),
            all_ms: claimMs,
            claimed,
            claimed_status: shownIssue?.status,
            claimed_assignee: shownIssue?.assignee,
            next_ready_after_claims: afterFirst,
            rss_claim: { id: rssId, wall_ms: timed.wall, peak_rss_kb: rssKb },
        },
        host: { cpus: os.cpus().length, node: process.version },
    };
    if (!opts.keep) fs.rmSync(scratch, { recursive: true, force: true });
    else result.workspace = ws;
    process.stdout.write(JSON.stringify(result, null, 2) + "\n");
}

const opts = parseArgs(process.argv.slice(2));
if (opts.mode === "convert") {
    if (!opts.graph) die("give a graph file");
    const lines = convertLines(loadGraph(opts.graph), opts.prefix);
    process.stdout.write(lines.join("\n") + "\n");
} else if (opts.mode === "run") {
    if (!opts.graph) die("give a graph file");
    run(opts);
} else {
    die("usage: br-bench.mjs convert GRAPH.jsonl | run GRAPH.jsonl --br PATH [--ready-calls N] [--claim-calls N]");
}
