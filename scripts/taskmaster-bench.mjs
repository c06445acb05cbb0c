#!/usr/bin/env node
// Measures task-master-ai's ready queue (`next_task`) and claims (`set_task_status` → in-progress)
// through its MCP server (stdio JSON-RPC), on the same task graph as benches/tasks.rs.
//
// Usage:
//   node scripts/taskmaster-bench.mjs --generate N [--deps 2] > graph.jsonl
//   node scripts/taskmaster-bench.mjs GRAPH.jsonl --calls 50 --server "<server command line>"
//       [--timeout-s 120] [--keep]
//
// The second form converts the JSON Lines graph ({"ref":"t17","title":…,"priority":0-4,
// "status":"done"|"open","depends_on":["t3",…]}) into task-master's tasks file
// (.taskmaster/tasks/tasks.json, tag "master") in a temporary project, starts the server there
// (cwd = the project, HOME = a scratch dir, no API keys, telemetry off) and, one request at a time,
// times N rounds of: next_task → set_task_status(that task, in-progress). Each claimed task is
// then moved to "review" (untimed, reported as release_ms) because task-master keeps in-progress
// tasks eligible for next_task, so without it every round would return and "claim" the same task
// (an unchanged status is not even written). Every answer is checked against the graph: the
// next task must be open, have all its dependencies done, and be the one task-master's own
// ordering picks (priority, then fewest dependencies, then lowest id). One JSON object goes to
// stdout; progress to stderr. No dependencies beyond node's built-ins.

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

function die(msg) {
    process.stderr.write(`taskmaster-bench: ${msg}\n`);
    process.exit(1);
}

function parseArgs(argv) {
    const opts = { calls: 50, timeoutS: 120, deps: 2, keep: false };
    const rest = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const val = () => {
            if (i + 1 >= argv.length) die(`${a} needs a value`);
            return argv[++i];
        };
        if (a === "--calls") opts.calls = Number(val());
        else if (a === "--server") opts.server = val();
        else if (a === "--timeout-s") opts.timeoutS = Number(val());
        else if (a === "--generate") opts.generate = Number(val());
        else if (a === "--deps") opts.deps = Number(val());
        else if (a === "--keep") opts.keep = true;
        else if (a === "-h" || a === "--help") {
            process.stdout.write(
                "usage: taskmaster-bench.mjs --generate N [--deps 2] > graph.jsonl\n" +
                    '       taskmaster-bench.mjs GRAPH.jsonl --calls 50 --server "CMD" [--timeout-s 120] [--keep]\n',
            );
            process.exit(0);
        } else if (a.startsWith("--")) die(`unknown option ${a}`);
        else rest.push(a);
    }
    opts.graph = rest[0];
    return opts;
}

// ---- the graph: a port of benches/tasks.rs `graph()` (same xorshift, same loop, same bytes) ----

const MASK = (1n << 64n) - 1n;

class Rng {
    constructor(seed) {
        this.s = BigInt(seed) & MASK;
    }
    next() {
        let s = this.s;
        s ^= (s << 13n) & MASK;
        s ^= s >> 7n;
        s ^= (s << 17n) & MASK;
        this.s = s;
        return s;
    }
    below(n) {
        return Number(this.next() % BigInt(n));
    }
}

function* graphLines(n, deps) {
    const rng = new Rng(0x5eedcafe);
    for (let i = 1; i <= n; i++) {
        const status = i * 10 <= n * 6 ? "done" : "open";
        const on = [];
        if (i > 1) {
            for (let k = 0; k < deps; k++) {
                const r = `t${1 + rng.below(i - 1)}`;
                if (!on.includes(r)) on.push(r);
            }
        }
        const priority = rng.below(5);
        // serde_json's json! (no preserve_order) writes keys sorted.
        yield JSON.stringify({
            depends_on: on,
            priority,
            ref: `t${i}`,
            status,
            title: `task ${i} of the benchmark graph`,
        });
    }
}

function generate(n, deps) {
    if (!Number.isInteger(n) || n < 1) die("--generate needs a positive task count");
    const out = fs.createWriteStream(null, { fd: 1 });
    let buf = [];
    for (const line of graphLines(n, deps)) {
        buf.push(line);
        if (buf.length === 5000) {
            out.write(buf.join("\n") + "\n");
            buf = [];
        }
    }
    if (buf.length) out.write(buf.join("\n") + "\n");
    out.end();
}

// ---- conversion to task-master's project layout ----

const PRIORITY = ["high", "high", "medium", "low", "low"];

function refId(ref) {
    const m = /^t(\d+)$/.exec(ref);
    if (!m) die(`unexpected task ref ${JSON.stringify(ref)} (want t<number>)`);
    return Number(m[1]);
}

function loadGraph(file) {
    const tasks = [];
    const lines = fs.readFileSync(file, "utf8").split("\n");
    for (const line of lines) {
        if (!line.trim()) continue;
        const t = JSON.parse(line);
        const status = t.status === "done" ? "done" : "pending";
        tasks.push({
            id: refId(t.ref),
            title: t.title,
            description: t.title,
            details: "",
            testStrategy: "",
            status,
            dependencies: (t.depends_on || []).map(refId),
            priority: PRIORITY[t.priority] ?? "medium",
            subtasks: [],
        });
    }
    return tasks;
}

function writeProject(dir, tasks) {
    const tm = path.join(dir, ".taskmaster");
    fs.mkdirSync(path.join(tm, "tasks"), { recursive: true });
    fs.mkdirSync(path.join(dir, "home"), { recursive: true });
    const now = new Date().toISOString();
    const tasksFile = path.join(tm, "tasks", "tasks.json");
    fs.writeFileSync(
        tasksFile,
        JSON.stringify(
            {
                master: {
                    tasks,
                    metadata: { created: now, updated: now, description: "Tasks live here by default" },
                },
            },
            null,
            2,
        ),
    );
    // The defaults, with telemetry off (task-master reports to Sentry unless
    // global.anonymousTelemetry is false). The models are never called: no AI tool is used.
    fs.writeFileSync(
        path.join(tm, "config.json"),
        JSON.stringify(
            {
                models: {
                    main: { provider: "anthropic", modelId: "claude-sonnet-4-20250514", maxTokens: 64000, temperature: 0.2 },
                    research: { provider: "perplexity", modelId: "sonar", maxTokens: 8700, temperature: 0.1 },
                    fallback: { provider: "anthropic", modelId: "claude-3-7-sonnet-20250219", maxTokens: 120000, temperature: 0.2 },
                },
                global: {
                    logLevel: "info",
                    debug: false,
                    defaultNumTasks: 10,
                    defaultSubtasks: 5,
                    defaultPriority: "medium",
                    projectName: "car-bench",
                    responseLanguage: "English",
                    enableCodebaseAnalysis: false,
                    enableProxy: false,
                    anonymousTelemetry: false,
                },
            },
            null,
            2,
        ),
    );
    fs.writeFileSync(
        path.join(tm, "state.json"),
        JSON.stringify({ currentTag: "master", lastSwitched: now, branchTagMapping: {}, migrationNoticeShown: true }, null, 2),
    );
    return tasksFile;
}

// ---- a newline-delimited JSON-RPC client over the server's stdio ----

class Rpc {
    constructor(command, cwd, env, timeoutMs) {
        this.timeoutMs = timeoutMs;
        this.child = spawn("/bin/sh", ["-c", `exec ${command}`], { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
        this.next = 1;
        this.pending = new Map();
        this.buf = "";
        this.stderr = "";
        this.exited = null;
        this.child.stdout.setEncoding("utf8");
        this.child.stdout.on("data", (d) => this.onData(d));
        this.child.stderr.setEncoding("utf8");
        this.child.stderr.on("data", (d) => {
            this.stderr = (this.stderr + d).slice(-8000);
        });
        this.child.on("exit", (code, signal) => {
            this.exited = { code, signal };
            for (const p of this.pending.values()) p.reject(new Error(`the server exited (${code ?? signal})`));
            this.pending.clear();
        });
        this.child.stdin.on("error", () => {});
    }

    onData(d) {
        this.buf += d;
        let nl;
        while ((nl = this.buf.indexOf("\n")) >= 0) {
            const line = this.buf.slice(0, nl);
            this.buf = this.buf.slice(nl + 1);
            let msg;
            try {
                msg = JSON.parse(line);
            } catch {
                continue;
            }
            if (msg.method !== undefined && msg.id !== undefined) {
                // A request from the server (ping, roots/list…): answer with an empty result.
                this.send({ jsonrpc: "2.0", id: msg.id, result: {} });
                continue;
            }
            const p = msg.id !== undefined && this.pending.get(msg.id);
            if (p) {
                this.pending.delete(msg.id);
                p.resolve(msg);
            }
        }
    }

    send(obj) {
        this.child.stdin.write(JSON.stringify(obj) + "\n");
    }

    // Resolves to [result, milliseconds from writing the request to reading its answer].
    request(method, params) {
        if (this.exited) return Promise.reject(new Error(`the server exited (${this.exited.code ?? this.exited.signal})`));
        const id = this.next++;
        return new Promise((resolve, reject) => {
            const timer = setTimeout(() => {
                this.pending.delete(id);
                reject(new Error(`${method} ${params?.name ?? ""} took over ${this.timeoutMs / 1000} s`));
            }, this.timeoutMs);
            const start = process.hrtime.bigint();
            this.pending.set(id, {
                resolve: (msg) => {
                    const took = Number(process.hrtime.bigint() - start) / 1e6;
                    clearTimeout(timer);
                    if (msg.error) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
                    else resolve([msg.result, took]);
                },
                reject: (e) => {
                    clearTimeout(timer);
                    reject(e);
                },
            });
            this.send({ jsonrpc: "2.0", id, method, params });
        });
    }

    async call(tool, args) {
        const [result, took] = await this.request("tools/call", { name: tool, arguments: args });
        const text = result?.content?.[0]?.text ?? "";
        if (result?.isError) throw new Error(`${tool}: ${text}`);
        let body;
        try {
            body = JSON.parse(text);
        } catch {
            throw new Error(`${tool}: the answer is not JSON: ${text.slice(0, 500)}`);
        }
        return [body, took];
    }

    kill() {
        if (!this.exited) this.child.kill("SIGKILL");
    }
}

// ---- the checks: task-master's own next-task rule, on our copy of the graph ----

const RANK = { high: 3, medium: 2, low: 1 };

function expectedNext(tasks, status) {
    let best = null;
    for (const t of tasks) {
        const s = status.get(t.id);
        if (s !== "pending" && s !== "in-progress") continue;
        if (!t.dependencies.every((d) => status.get(d) === "done")) continue;
        if (
            best === null ||
            RANK[t.priority] > RANK[best.priority] ||
            (RANK[t.priority] === RANK[best.priority] &&
                (t.dependencies.length < best.dependencies.length ||
                    (t.dependencies.length === best.dependencies.length && t.id < best.id)))
        )
            best = t;
    }
    return best;
}

function stats(values) {
    const v = [...values].sort((a, b) => a - b);
    const r = (x) => Math.round(x * 1000) / 1000;
    return { p50: r(v[Math.floor(v.length / 2)]), p90: r(v[Math.min(Math.floor((v.length * 9) / 10), v.length - 1)]) };
}

async function bench(opts) {
    if (!opts.graph) die("give a graph file (or --generate N)");
    if (!opts.server) die('give the server command line with --server "…"');
    if (!Number.isInteger(opts.calls) || opts.calls < 1) die("--calls needs a positive integer");

    const tasks = loadGraph(opts.graph);
    const byId = new Map(tasks.map((t) => [t.id, t]));
    const status = new Map(tasks.map((t) => [t.id, t.status]));
    const deps = tasks.reduce((n, t) => n + t.dependencies.length, 0);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "taskmaster-bench-"));
    const project = path.join(dir, "project");
    const tasksFile = writeProject(project, tasks);
    process.stderr.write(
        `taskmaster-bench: ${tasks.length} tasks, ${deps} dependencies → ${tasksFile} ` +
            `(${(fs.statSync(tasksFile).size / 1e6).toFixed(1)} MB)\n`,
    );

    // No API keys and no user state: a scratch HOME, and every *_API_KEY dropped.
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!/_API_KEY$|^TASK_MASTER_PROJECT_ROOT$/.test(k)) env[k] = v;
    env.HOME = path.join(project, "home");

    const rpc = new Rpc(opts.server, project, env, opts.timeoutS * 1000);
    const cleanup = () => {
        rpc.kill();
        if (!opts.keep) fs.rmSync(dir, { recursive: true, force: true });
        else process.stderr.write(`taskmaster-bench: kept ${dir}\n`);
    };
    try {
        const [init, startupMs] = await rpc.request("initialize", {
            protocolVersion: "2025-06-18",
            capabilities: {},
            clientInfo: { name: "car-bench", version: "1" },
        });
        rpc.send({ jsonrpc: "2.0", method: "notifications/initialized" });
        const [list] = await rpc.request("tools/list", {});
        const names = (list.tools || []).map((t) => t.name);
        for (const need of ["next_task", "set_task_status"])
            if (!names.includes(need)) throw new Error(`the server has no ${need} tool (tools: ${names.join(", ")})`);

        const nextMs = [];
        const setMs = [];
        const releaseMs = [];
        let version = null;
        for (let i = 0; i < opts.calls; i++) {
            const [next, tookNext] = await rpc.call("next_task", { projectRoot: project });
            nextMs.push(tookNext);
            version ??= next.version?.version ?? null;
            const got = next.data?.nextTask;
            if (!got) throw new Error(`next_task returned no task: ${JSON.stringify(next).slice(0, 500)}`);
            const id = Number(got.id);
            const task = byId.get(id);
            if (!task) throw new Error(`next_task returned unknown task ${got.id}`);
            if (status.get(id) !== "pending") throw new Error(`next_task returned task ${id}, which is ${status.get(id)}`);
            const undone = task.dependencies.filter((d) => status.get(d) !== "done");
            if (undone.length) throw new Error(`next_task returned task ${id} with open dependencies ${undone.join(", ")}`);
            const want = expectedNext(tasks, status);
            if (want.id !== id) throw new Error(`next_task returned task ${id}; task-master's ordering picks ${want.id}`);

            const [set, tookSet] = await rpc.call("set_task_status", { id: String(id), status: "in-progress", projectRoot: project });
            setMs.push(tookSet);
            const change = set.data?.tasks?.[0];
            if (!change || change.oldStatus !== "pending" || change.newStatus !== "in-progress")
                throw new Error(`set_task_status ${id}: unexpected answer ${JSON.stringify(set).slice(0, 500)}`);
            status.set(id, "in-progress");

            const [rel, tookRel] = await rpc.call("set_task_status", { id: String(id), status: "review", projectRoot: project });
            releaseMs.push(tookRel);
            if (rel.data?.tasks?.[0]?.newStatus !== "review")
                throw new Error(`set_task_status ${id} → review: unexpected answer ${JSON.stringify(rel).slice(0, 500)}`);
            status.set(id, "review");
            if ((i + 1) % 10 === 0 || i === 0)
                process.stderr.write(
                    `taskmaster-bench: ${i + 1}/${opts.calls}: next_task ${tookNext.toFixed(1)} ms → ${id}, ` +
                        `set_task_status ${tookSet.toFixed(1)} ms\n`,
                );
        }

        // The writes reached the file: every claimed task is in review, nothing was lost.
        const saved = JSON.parse(fs.readFileSync(tasksFile, "utf8"));
        const savedTasks = saved.master?.tasks ?? saved.tasks;
        if (!Array.isArray(savedTasks) || savedTasks.length !== tasks.length)
            throw new Error(`tasks.json holds ${savedTasks?.length} tasks after the run, want ${tasks.length}`);
        for (const t of savedTasks)
            if (t.status !== status.get(Number(t.id)))
                throw new Error(`tasks.json: task ${t.id} is ${t.status}, want ${status.get(Number(t.id))}`);

        const result = {
            peer: "task-master-ai",
            version,
            server: init?.serverInfo ?? null,
            tasks: tasks.length,
            dependencies: deps,
            tasks_json_mb: Math.round(fs.statSync(tasksFile).size / 1e5) / 10,
            startup_ms: Math.round(startupMs * 1000) / 1000,
            next_task_ms: stats(nextMs),
            set_status_ms: stats(setMs),
            release_ms: stats(releaseMs),
            calls: opts.calls,
        };
        process.stdout.write(JSON.stringify(result) + "\n");
    } catch (e) {
        process.stderr.write(`taskmaster-bench: FAILED: ${e.message}\n`);
        if (rpc.stderr) process.stderr.write(`--- server stderr (tail) ---\n${rpc.stderr.slice(-3000)}\n`);
        cleanup();
        process.exit(1);
    }
    cleanup();
    process.exit(0);
}

const opts = parseArgs(process.argv.slice(2));
if (opts.generate !== undefined) generate(opts.generate, opts.deps);
else await bench(opts);
