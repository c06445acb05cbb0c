//! car-server's dashboard (`/`): pages rendered by a real browser (Debian's headless Chromium,
//! installed by scripts/test.sh) with data written through the CLI, a search by meaning that says
//! why, a correction and a forgetting that go through the tools (the CLI sees them, the execution
//! log records them with the `web` face), and the refusals in front of every change.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::server::Server;
use crate::support::Peer as _;
use crate::support::TestHome;

#[path = "../../benches/common/cdp.rs"]
#[allow(dead_code)] // the benchmark uses more of it
mod cdp;

/// One HTTP exchange: (status, headers, body). Redirects are not followed.
fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut request = client.request(method.parse().unwrap(), url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        (status, headers, response.text().await.unwrap_or_default())
    })
}

/// The page's form token and the cookie that goes with it.
fn form_token(url: &str) -> (String, String) {
    let (status, headers, body) = http("GET", url, &[], None);
    assert_eq!(status, 200, "{url}: {body}");
    let cookie = headers["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let token = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no form token in {body}"))
        .to_string();
    assert!(cookie.ends_with(&token), "{cookie} {token}");
    (cookie, token)
}

fn chromium() -> PathBuf {
    cdp::chromium()
        .expect("chromium is not installed: scripts/test.sh installs Debian's chromium package")
}

fn shots() -> PathBuf {
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screens");
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// The DOM of `url` after Chromium rendered it, and a screenshot of it at `shot`.
fn render(url: &str, shot: &Path, profile: &Path) -> String {
    let base = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
    };
    let mut dom = Command::new(chromium());
    base(&mut dom);
    let out = dom.arg("--dump-dom").arg(url).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut picture = Command::new(chromium());
    base(&mut picture);
    let pic = picture
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,900")
        .arg(url)
        .output()
        .unwrap();
    assert!(pic.status.success() && shot.is_file(), "{pic:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_dashboard_finds_by_meaning_and_corrects_and_forgets_through_the_tools() {
    let home = TestHome::new();
    home.car_json(&[
        "memory",
        "add",
        "schema migrations",
        "Schema migrations need sign-off from the data team",
    ]);
    home.car_json(&[
        "memory",
        "add",
        "deploys",
        "Deploys go through the canary cluster before production <b>always</b>",
    ]);
    home.car_json(&[
        "task",
        "create",
        "Fix the flaky payout test",
        "--priority",
        "P1",
    ]);
    home.car_json(&["task", "create", "Ship the release"]);
    home.car_json(&["task", "create", "Write the changelog"]);
    home.car_json(&["task", "claim", "CTX-0001", "--agent", "alice"]);
    home.car_json(&["task", "block", "CTX-0002", "--reason", "waiting on QA"]);
    home.car_json(&[
        "progress",
        "create",
        "flake reproduced with seed 42",
        "--task",
        "CTX-0001",
    ]);
    home.car_json(&["task", "create", "Publish", "--depends-on", "CTX-0003"]);
    home.car_json(&[
        "decision",
        "record",
        "Use PostgreSQL for teams",
        "--decision",
        "PostgreSQL, never a home-made store",
        "--context",
        "teams share one database",
    ]);
    home.car_json(&[
        "skill",
        "add",
        "run-tests",
        "--code",
        "cargo test",
        "--description",
        "Run the whole test suite",
    ]);
    home.car_json(&["skill", "report", "run-tests", "success"]);
    home.car_json(&["skill", "report", "run-tests", "failure"]);
    home.car_json(&["skill", "report", "run-tests", "success"]);
    // Two connectors whose configuration names secrets only by where they would sit: the page
    // shows neither a URL's credentials or query nor a program's arguments.
    std::fs::write(
        home.home.join("connectors.json"),
        serde_json::json!({"version": 1, "connectors": [
            {"slug": "docs", "name": "docs", "transport": "http",
             "url": "https://user:PASSWORD-IN-URL@mcp.example.com/mcp?key=KEY-IN-QUERY",
             "headers": ["X-Api-Key"], "enabled": ["search"], "added_at": "2026-12-04T00:00:00Z",
             "last_error": "error sending request for url (https://mcp.example.com/mcp?key=KEY-IN-ERROR)",
             "tools": [{"name": "search", "input_schema": {"type": "object"}},
                       {"name": "delete_all", "input_schema": {"type": "object"}}]},
            {"slug": "local", "name": "local", "transport": "stdio", "command": "/usr/bin/npx",
             "args": ["--token", "TOKEN-IN-ARGS"], "env": ["API_TOKEN"], "enabled": [],
             "added_at": "2026-12-04T00:00:00Z", "tools": []}
        ]})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(&home, &[]);
    let base = server.mcp().trim_end_matches("/mcp").to_string();
    let shots = shots();
    let profile = tempfile::tempdir().unwrap();
    // A page of the dashboard rendered by Chromium, and its screenshot as NAME.png.
    let shot = |path: &str, name: &str| {
        render(
            &format!("{base}{path}"),
            &shots.join(format!("{name}.png")),
            profile.path(),
        )
    };

    // Rendered by a browser: the overview, a search in a person's words, an entry, the audit.
    let overview = shot("/", "overview");
    assert!(overview.contains("Memory entries"), "{overview}");
    let search = format!("{base}/memory?q=who+must+approve+a+database+migration");
    let found = render(&search, &shots.join("search.png"), profile.path());
    assert!(
        found.contains("Schema migrations need sign-off from the data team"),
        "{found}"
    );
    assert!(found.contains("; meaning 0."), "{found}");
    // Browsing by kind, without a question.
    let (_, _, facts) = http("GET", &format!("{base}/memory?kind=pattern"), &[], None);
    assert!(facts.contains("Schema migrations need sign-off"), "{facts}");
    let (_, _, knowledge) = http("GET", &format!("{base}/memory?kind=knowledge"), &[], None);
    assert!(!knowledge.contains("Schema migrations"), "{knowledge}");
    assert!(
        knowledge.contains("Latest knowledge entries"),
        "{knowledge}"
    );
    // Text from memory is shown, never run as markup.
    let deploys = shot("/memory?q=canary+deploys", "escaped");
    assert!(deploys.contains("&lt;b&gt;always&lt;/b&gt;"), "{deploys}");
    let page = shot("/memory/entry/fact-1", "entry");
    assert!(page.contains("Correct it") && page.contains("Forget this entry"));

    // The task board and the decisions, from the project tools.
    let board = shot("/tasks", "tasks");
    let column = |heading: &str| -> String {
        let id = format!("id=\"col-{}\"", heading.to_lowercase().replace(' ', "-"));
        let start = board
            .find(&id)
            .unwrap_or_else(|| panic!("{heading}: {board}"));
        let rest = &board[start..];
        rest[..rest.find("</section>").unwrap()].to_string()
    };
    assert!(column("Ready").contains("CTX-0003"), "{board}");
    let claimed = column("In progress");
    assert!(
        claimed.contains("CTX-0001") && claimed.contains("claimed by alice"),
        "{board}"
    );
    assert!(column("Blocked").contains("waiting on QA"), "{board}");
    assert!(board.contains("flake reproduced with seed 42"), "{board}");
    // A task's page: what it waits on, its history, its notes.
    let (_, _, waiting) = http("GET", &format!("{base}/tasks/CTX-0004"), &[], None);
    assert!(
        waiting.contains("href=\"/tasks/CTX-0003\"") && waiting.contains("created"),
        "{waiting}"
    );
    let (_, _, claimed) = http("GET", &format!("{base}/tasks/CTX-0001"), &[], None);
    assert!(
        claimed.contains("alice") && claimed.contains("flake reproduced with seed 42"),
        "{claimed}"
    );
    let (status, _, _) = http("GET", &format!("{base}/tasks/CTX-9999"), &[], None);
    assert_eq!(status, 404);
    let adr = shot("/decisions", "decisions");
    assert!(
        adr.contains("ADR-0001") && adr.contains("PostgreSQL, never a home-made store"),
        "{adr}"
    );

    // Skills with their outcome counts.
    let skills = shot("/skills", "skills");
    assert!(
        skills.contains("run-tests") && skills.contains("<td>2</td><td>1</td>"),
        "{skills}"
    );

    // Connectors with their enabled tools, and no secret anywhere on the page.
    let listed = shot("/connectors", "connectors");
    assert!(
        listed.contains("https://mcp.example.com/mcp") && listed.contains("1 of 2"),
        "{listed}"
    );
    assert!(listed.contains("npx (stdio)") && listed.contains("none (disabled)"));
    for secret in [
        "PASSWORD-IN-URL",
        "KEY-IN-QUERY",
        "TOKEN-IN-ARGS",
        "KEY-IN-ERROR",
    ] {
        assert!(!listed.contains(secret), "{secret} on the page: {listed}");
    }

    // A correction through the page: the CLI answers with it, the log has it from `web`.
    let entry = format!("{base}/memory/entry/fact-1");
    let (cookie, token) = form_token(&entry);
    let body = format!(
        "csrf={token}&body={}",
        "Schema+migrations+need+sign-off+from+the+platform+team"
    );
    let (status, headers, text) = http(
        "POST",
        &format!("{entry}/correct"),
        &[("cookie", &cookie), ("origin", &base)],
        Some(body.clone()),
    );
    assert_eq!(status, 303, "{text}");
    let corrected = headers["location"].to_str().unwrap().to_string();
    assert!(corrected.starts_with("/memory/entry/"), "{corrected}");
    let answer = home.car_json(&["memory", "query", "who signs off schema migrations"]);
    let bodies: Vec<&str> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert!(
        bodies.contains(&"Schema migrations need sign-off from the platform team"),
        "{answer}"
    );
    assert!(
        !bodies.contains(&"Schema migrations need sign-off from the data team"),
        "{answer}"
    );
    let (_, _, old) = http("GET", &entry, &[], None);
    assert!(old.contains("Replaced by"), "{old}");
    let audit = shot("/audit?face=web", "audit");
    assert!(audit.contains("memory_add_fact"), "{audit}");
    assert!(audit.contains("<td>web</td>"), "{audit}");

    // Refused, and nothing changed: no token, a stale token, another site's page, another host.
    let new_entry = format!("{base}{corrected}");
    let (cookie, token) = form_token(&new_entry);
    let forget = format!("{new_entry}/forget");
    let form = format!("csrf={token}");
    for (what, headers, body) in [
        ("no token", vec![("cookie", cookie.as_str())], String::new()),
        (
            "another token",
            vec![("cookie", cookie.as_str())],
            format!("csrf={}", "0".repeat(32)),
        ),
        (
            "another local site",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", "http://127.0.0.1:1"),
            ],
            form.clone(),
        ),
        (
            "a foreign site",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", "https://evil.example"),
            ],
            form.clone(),
        ),
        (
            "a cross-site form",
            vec![
                ("cookie", cookie.as_str()),
                ("sec-fetch-site", "cross-site"),
            ],
            form.clone(),
        ),
        (
            "another host",
            vec![("cookie", cookie.as_str()), ("host", "evil.example")],
            form.clone(),
        ),
    ] {
        let (status, _, text) = http("POST", &forget, &headers, Some(body));
        assert_eq!(status, 403, "{what}: {text}");
    }
    let (status, _, _) = http("GET", &new_entry, &[], None);
    assert_eq!(status, 200, "nothing was forgotten");

    // Forgetting: the confirmation names what goes; then it is gone from every face.
    let (_, _, confirm) = http("GET", &forget, &[], None);
    assert!(
        confirm.contains("Schema migrations need sign-off from the platform team"),
        "{confirm}"
    );
    let (status, headers, text) = http(
        "POST",
        &forget,
        &[("cookie", &cookie), ("origin", &base)],
        Some(form),
    );
    assert_eq!(status, 303, "{text}");
    assert!(headers["location"]
        .to_str()
        .unwrap()
        .starts_with("/memory?notice="));
    let (status, _, _) = http("GET", &new_entry, &[], None);
    assert_eq!(status, 404);
    let answer = home.car_json(&["memory", "query", "who signs off schema migrations"]);
    assert!(
        !answer.to_string().contains("platform team"),
        "forgotten, yet the CLI answers with it: {answer}"
    );
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    let answer = mcp.call_ok(
        "memory_query",
        json!({"query": "who signs off schema migrations"}),
    );
    assert!(
        !answer.to_string().contains("platform team"),
        "forgotten, yet car-mcp answers with it: {answer}"
    );
    mcp.finish();
}

/// A deny rule for `git push --force`, in the CAR home's rules.
fn deny_force_push(home: &TestHome) {
    std::fs::create_dir_all(home.home.join("policies")).unwrap();
    std::fs::write(
        home.home.join("policies/force.toml"),
        "[[deny_tool_param]]\ntool = \"Bash\"\nparam = \"command\"\ncontains = \"git push --force\"\n",
    )
    .unwrap();
}

#[test]
fn a_hook_deny_appears_in_the_open_audit_page_without_a_reload() {
    let home = TestHome::new();
    deny_force_push(&home);
    let server = Server::start(&home, &[]);
    let base = server.mcp().trim_end_matches("/mcp").to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut browser = cdp::Browser::launch(&chromium()).await.unwrap();
        // More pages than a browser opens connections to one server (six): they share one
        // stream through the dashboard's worker, so every one of them follows.
        let mut tabs = Vec::new();
        for _ in 0..8 {
            tabs.push(browser.open(&format!("{base}/audit")).await.unwrap());
        }
        for tab in &tabs {
            browser
                .wait_for(
                    tab,
                    "document.querySelector('main[data-following]') !== null",
                    std::time::Duration::from_secs(30),
                )
                .await
                .unwrap();
            browser.eval(tab, "window.carStayed = true").await.unwrap();
        }
        let tab = tabs[0].clone();
        // Codex's hook payload, through the gate the hosts run.
        let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "git push --force origin main"},
            "cwd": home.project, "session_id": "codex-session-7", "turn_id": "t1"});
        let out = home.gate_with_input(&[], payload.to_string().as_bytes());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("deny_tool_param:Bash.command"),
            "{out:?}"
        );
        let took = browser
            .wait_for(
                &tab,
                "document.getElementById('main').textContent.includes('git push --force origin main')",
                std::time::Duration::from_secs(10),
            )
            .await;
        let took = match took {
            Ok(took) => took,
            Err(e) => {
                let status = browser
                    .eval(&tab, "document.getElementById('live-status').textContent + ' | ' + document.getElementById('main').textContent")
                    .await;
                let gate = std::fs::read_to_string(home.home.join("gate.jsonl"));
                panic!("{e}; the page: {status:?}; the decision file: {gate:?}")
            }
        };
        eprintln!("the deny reached the open audit page in {took:?}");
        for other in &tabs[1..] {
            browser
                .wait_for(
                    other,
                    "document.getElementById('main').textContent.includes('git push --force origin main') && window.carStayed === true",
                    std::time::Duration::from_secs(10),
                )
                .await
                .unwrap();
        }
        // The same page, its content replaced in place: no reload.
        assert_eq!(
            browser.eval(&tab, "window.carStayed === true").await.unwrap(),
            json!(true)
        );
        let row = browser
            .eval(
                &tab,
                "[...document.querySelectorAll('tbody tr')].map(r => r.textContent).find(t => t.includes('git push --force')) || ''",
            )
            .await
            .unwrap();
        let row = row.as_str().unwrap();
        for part in ["Bash", "denied", "hook", "codex", "codex-session-7", "deny_tool_param:Bash.command"] {
            assert!(row.contains(part), "{part} missing from {row}");
        }
        // A laptop's screen.
        browser
            .call(
                Some(&tab),
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await
            .unwrap();
        let shot = browser
            .call(Some(&tab), "Page.captureScreenshot", json!({"format": "png"}))
            .await
            .unwrap();
        let png = base64_decode(shot["data"].as_str().unwrap());
        std::fs::write(shots().join("audit-live.png"), png).unwrap();
    });
    // The CLI reads the same log, by host and session.
    let listed = home.car_json(&[
        "executions",
        "--host",
        "codex",
        "--session",
        "codex-session-7",
    ]);
    let rows = listed["executions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["status"], "denied");
    assert_eq!(rows[0]["face"], "hook");
}

/// Standard base64 (what DevTools sends a screenshot in).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, c)| n | (value(*c) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[test]
fn an_entry_page_draws_its_links_its_history_and_who_wrote_it() {
    let home = TestHome::new();
    // Written by an MCP client: the page names the client and its session.
    let mut mcp = home.spawn_mcp();
    mcp.initialize();
    mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "release train", "body": "The release train leaves every Tuesday"}),
    );
    let written = mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "release train", "body": "The release train leaves every Wednesday"}),
    );
    let current = written["id"].as_str().unwrap().to_string();
    mcp.call_ok(
        "memory_add_fact",
        json!({"subject": "release freeze", "body": "The release train waits during a freeze"}),
    );
    mcp.finish();
    let server = Server::start(&home, &[]);
    let base = server.mcp().trim_end_matches("/mcp").to_string();
    let profile = tempfile::tempdir().unwrap();
    let page = render(
        &format!("{base}/memory/entry/{current}"),
        &shots().join("entry-graph.png"),
        profile.path(),
    );
    // Its history: the Tuesday version it replaced.
    assert!(page.contains("What it replaced"), "{page}");
    assert!(
        page.contains("The release train leaves every Tuesday"),
        "{page}"
    );
    // Its links, drawn and listed: the freeze entry shares "release train".
    assert!(page.contains("<svg class=\"graph\""), "{page}");
    assert!(page.contains("release freeze"), "{page}");
    // Who wrote it: memory_add_fact from the MCP client, in its session.
    let written = &page[page.find("Written by").unwrap()..];
    assert!(written.contains("memory_add_fact"), "{written}");
    assert!(written.contains("<td>mcp</td>"), "{written}");
    assert!(written.contains("car-tests"), "{written}");
    assert!(written.contains("/audit?session="), "{written}");
}

#[test]
fn beyond_loopback_the_dashboard_asks_for_the_token_and_a_browser_signs_in_once() {
    let home = TestHome::new();
    let server = Server::start(&home, &["--allow-remote"]);
    let base = server.mcp().trim_end_matches("/mcp").to_string();
    let token = std::fs::read_to_string(home.home.join("daemon/token")).unwrap();
    let token = token.trim();
    // No token: 401 and the sign-in form, no data.
    for path in ["/", "/audit", "/memory?q=x", "/events", "/dashboard.js"] {
        let (status, _, body) = http("GET", &format!("{base}{path}"), &[], None);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(!body.contains("Memory entries"), "{path}");
    }
    let (_, _, form) = http("GET", &format!("{base}/"), &[], None);
    assert!(form.contains("action=\"/login\""), "{form}");
    // The bearer header admits, as on /mcp.
    let bearer = format!("Bearer {token}");
    let (status, _, page) = http(
        "GET",
        &format!("{base}/"),
        &[("authorization", &bearer)],
        None,
    );
    assert_eq!(status, 200, "{page}");
    // A wrong token signs nothing in; another site's form is refused.
    let (status, headers, _) = http(
        "POST",
        &format!("{base}/login"),
        &[("origin", &base)],
        Some("token=wrong".into()),
    );
    assert_eq!(status, 401);
    assert!(headers.get("set-cookie").is_none());
    let (status, _, _) = http(
        "POST",
        &format!("{base}/login"),
        &[("origin", "https://evil.example")],
        Some(format!("token={token}")),
    );
    assert_eq!(status, 403);
    // The right one: a session cookie that then admits the browser.
    let (status, headers, _) = http(
        "POST",
        &format!("{base}/login"),
        &[("origin", &base)],
        Some(format!("token={token}")),
    );
    assert_eq!(status, 303);
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (status, _, page) = http("GET", &format!("{base}/"), &[("cookie", &cookie)], None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Memory entries"));
    let (status, _, _) = http(
        "GET",
        &format!("{base}/"),
        &[(
            "cookie",
            "car_session=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        )],
        None,
    );
    assert_eq!(status, 401, "a made-up session is not signed in");
}

#[cfg(unix)]
#[test]
fn files_an_agent_plants_among_the_runs_neither_hang_nor_exhaust_the_server() {
    let home = TestHome::new();
    let runs = home.home.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let fifo = runs.join("fifo.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink("/dev/zero", runs.join("zero.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", runs.join("zero.done.json")).unwrap();
    let server = Server::start(&home, &[]);
    let base = server.mcp().trim_end_matches("/mcp").to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // A hang is a failure here, not a test that never ends.
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap();
        for path in ["/runs", "/runs/fifo", "/runs/zero", "/health"] {
            let response = client
                .get(format!("{base}{path}"))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            let status = response.status().as_u16();
            assert!(status == 200 || status == 404, "{path}: {status}");
        }
    });
}

#[test]
fn car_server_moves_the_gates_decisions_into_the_log_with_no_page_open() {
    let home = TestHome::new();
    deny_force_push(&home);
    let _server = Server::start(&home, &[]);
    let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin main"}, "cwd": home.project});
    home.gate_with_input(&[], payload.to_string().as_bytes());
    // Read the database itself: `car executions` would move the line in on its own.
    let db = home.home.join("car.db");
    let logged = || -> i64 {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            "SELECT count(*) FROM executions WHERE face = 'hook' AND status = 'denied'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let mut seen = logged();
    for _ in 0..600 {
        if seen == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = logged();
    }
    assert_eq!(seen, 1, "car-server read the deny from the decision file");
}
