//! car-server's dashboard (`/`): pages rendered by a real browser (Debian's headless Chromium,
//! installed by scripts/test.sh) with data written through the CLI, a search by meaning that says
//! why, a correction and a forgetting that go through the tools (the CLI sees them, the execution
//! log records them with the `web` face), and the refusals in front of every change.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server::Server;
use crate::support::TestHome;

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
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file());
    found.expect("chromium is not installed: scripts/test.sh installs Debian's chromium package")
}

/// The DOM of `url` after Chromium rendered it, and a screenshot of it at `shot`.
fn render(url: &str, shot: &Path, profile: &Path) -> String {
    let base = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=3000",
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
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screens");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = tempfile::tempdir().unwrap();

    // Rendered by a browser: the overview, a search in a person's words, an entry, the audit.
    let overview = render(
        &format!("{base}/"),
        &shots.join("overview.png"),
        profile.path(),
    );
    assert!(overview.contains("Memory entries"), "{overview}");
    let search = format!("{base}/memory?q=who+has+to+approve+a+change+to+the+tables");
    let found = render(&search, &shots.join("search.png"), profile.path());
    assert!(
        found.contains("Schema migrations need sign-off from the data team"),
        "{found}"
    );
    assert!(found.contains("Why: meaning"), "{found}");
    // Text from memory is shown, never run as markup.
    let deploys = render(
        &format!("{base}/memory?q=canary+deploys"),
        &shots.join("escaped.png"),
        profile.path(),
    );
    assert!(deploys.contains("&lt;b&gt;always&lt;/b&gt;"), "{deploys}");
    let page = render(
        &format!("{base}/memory/entry/fact-1"),
        &shots.join("entry.png"),
        profile.path(),
    );
    assert!(page.contains("Correct it") && page.contains("Forget this entry"));

    // The task board and the decisions, from the project tools.
    let board = render(
        &format!("{base}/tasks"),
        &shots.join("tasks.png"),
        profile.path(),
    );
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
    let adr = render(
        &format!("{base}/decisions"),
        &shots.join("decisions.png"),
        profile.path(),
    );
    assert!(
        adr.contains("ADR-0001") && adr.contains("PostgreSQL, never a home-made store"),
        "{adr}"
    );

    // Skills with their outcome counts.
    let skills = render(
        &format!("{base}/skills"),
        &shots.join("skills.png"),
        profile.path(),
    );
    assert!(
        skills.contains("run-tests") && skills.contains("<td>2</td><td>1</td>"),
        "{skills}"
    );

    // Connectors with their enabled tools, and no secret anywhere on the page.
    let listed = render(
        &format!("{base}/connectors"),
        &shots.join("connectors.png"),
        profile.path(),
    );
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
    let audit = render(
        &format!("{base}/audit?face=web"),
        &shots.join("audit.png"),
        profile.path(),
    );
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
}
