//! OAuth 2.1 for connectors against real peers: the official MCP conformance suite's client
//! suites `core` and `auth` (driving `examples/conformance_client.rs`, built on the connector
//! code), and `oidc-provider` as a real authorization server in front of a protected MCP
//! resource (`oauth/provider.mjs`), with the test playing the browser.
//!
//! The npm packages and Node 22 (which the suite needs) are installed into `tools/` by
//! `scripts/test.sh`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::Peer as _;
use crate::support::{example_bin, McpProcess, TestHome, CAR, CAR_MCP};

fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools")
}

fn installed(path: &Path) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing; run scripts/test.sh (it installs the npm test peers into tools/)",
        path.display()
    );
    path.to_path_buf()
}

/// Scenarios that fail for a reason, with the reason. Every other scenario must pass.
const EXPECTED_FAILURES: &[(&str, &str)] = &[
    (
        "elicitation-sep1034-client-defaults",
        "CAR's connector client is a tool source: it advertises no elicitation capability and \
         has no user to ask, so it cannot answer elicitation/create",
    ),
    (
        "auth/basic-cimd",
        "all its checks pass, but the suite warns that CAR registers dynamically instead of \
         using a Client ID Metadata Document: CAR has no HTTPS URL to host one at",
    ),
];

/// One scenario's line of the suite's summary.
#[derive(Debug, PartialEq)]
struct Outcome {
    ok: bool,
    passed: u64,
    failed: u64,
}

/// Scenarios that measure the client's timing (sse-retry: reconnect 450–1000 ms after a
/// `retry: 500`). The suite runs its scenarios in parallel, so on a loaded 2-core machine a
/// correct client can miss the window; such a scenario, failed in the suite, is run again alone
/// (up to three times), and must pass then.
const TIMED: &[&str] = &["sse-retry"];

/// Runs one scenario alone; true when it passes.
/// Up to three runs: the other tests of this binary run beside it and load the machine too.
fn scenario_passes_alone(scenario: &str) -> bool {
    (1..=3).any(|attempt| {
        let out = conformance_command()
            .args(["--scenario", scenario, "--timeout", "60000"])
            .output()
            .unwrap();
        // The suite prints its verdict on stdout or stderr depending on the mode: read both.
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{scenario} alone, attempt {attempt}:\n{text}");
        text.contains("OVERALL: PASSED")
    })
}

fn conformance_command() -> Command {
    let conformance = installed(&tools_dir().join("node_modules/.bin/conformance"));
    let node22 = installed(&tools_dir().join("node22/node_modules/.bin"));
    let path = format!(
        "{}:{}",
        node22.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(conformance);
    command
        .args(["client", "--command"])
        .arg(example_bin("conformance_client"))
        .env("PATH", path)
        .env_remove("RUST_LOG");
    command
}

fn run_suite(suite: &str) -> BTreeMap<String, Outcome> {
    let out = conformance_command()
        .args(["--suite", suite, "--timeout", "120000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = regex::Regex::new(r"(?m)^([✓✗]) (\S+): (\d+) passed, (\d+) failed").unwrap();
    let summary: BTreeMap<String, Outcome> = line
        .captures_iter(&text)
        .map(|c| {
            (
                c[2].to_string(),
                Outcome {
                    ok: &c[1] == "✓",
                    passed: c[3].parse().unwrap(),
                    failed: c[4].parse().unwrap(),
                },
            )
        })
        .collect();
    assert!(
        !summary.is_empty(),
        "no summary from the {suite} suite:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    summary
}

fn check_suite(suite: &str, scenarios: usize) {
    let summary = run_suite(suite);
    let (passed, failed): (u64, u64) = summary
        .values()
        .fold((0, 0), |(p, f), o| (p + o.passed, f + o.failed));
    let clean = summary.values().filter(|o| o.ok).count();
    eprintln!(
        "conformance {suite}: {clean}/{} scenarios pass, {passed} checks passed, {failed} failed",
        summary.len()
    );
    assert_eq!(summary.len(), scenarios, "{summary:#?}");
    for (scenario, outcome) in &summary {
        match EXPECTED_FAILURES.iter().find(|(name, _)| name == scenario) {
            Some((_, reason)) => assert!(
                !outcome.ok,
                "{scenario} passes now; take it off EXPECTED_FAILURES ({reason})"
            ),
            None if !outcome.ok && TIMED.contains(&scenario.as_str()) => assert!(
                scenario_passes_alone(scenario),
                "{suite}: {scenario} failed in the suite and alone: {outcome:?}"
            ),
            None => assert!(outcome.ok, "{suite}: {scenario} failed: {outcome:?}"),
        }
    }
}

#[test]
fn conformance_suite_client_core() {
    // 16 of 18 scenarios pass; see EXPECTED_FAILURES for the other two.
    check_suite("core", 18);
}

#[test]
fn conformance_suite_client_auth() {
    // 13 of 14 scenarios pass; auth/basic-cimd passes its checks with a warning.
    check_suite("auth", 14);
}

/// The authorization server and its MCP resource, stopped on drop.
struct Provider {
    _child: crate::support::Reaped,
    issuer: String,
    mcp: String,
}

impl Provider {
    fn start(access_ttl: u64) -> Provider {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/oauth/provider.mjs");
        let package = installed(&tools_dir().join("node_modules/oidc-provider"));
        let mut child = Command::new("node")
            .arg(script)
            .env("OIDC_PROVIDER", package)
            .env("ACCESS_TTL", access_ttl.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("provider.mjs did not start ({e}): {line:?}"));
        Provider {
            _child: crate::support::Reaped(child),
            issuer: ready["issuer"].as_str().unwrap().to_string(),
            mcp: ready["mcp"].as_str().unwrap().to_string(),
        }
    }
}

/// A browser for the test: keeps cookies, follows no redirects, fills devInteractions' login
/// and consent forms.
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

impl Browser {
    fn new() -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> reqwest::Response {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let response = request.header("cookie", cookie).send().await.unwrap();
        for value in response.headers().get_all("set-cookie") {
            let pair = value.to_str().unwrap().split(';').next().unwrap();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        response
    }

    /// Walks an authorization from `url` through the login and consent forms, and returns the
    /// redirect that starts with `redirect_uri` (not followed).
    async fn authorize(&mut self, url: &str, redirect_uri: &str) -> String {
        let form = regex::Regex::new(r#"<form[^>]*action="([^"]+)"[^>]*method="post""#).unwrap();
        let prompt = regex::Regex::new(r#"name="prompt" value="([a-z]+)""#).unwrap();
        let mut next = self.http.get(url);
        for _ in 0..12 {
            let response = self.send(next).await;
            let base = response.url().clone();
            if response.status().is_redirection() {
                let location = response.headers()["location"].to_str().unwrap();
                let target = base.join(location).unwrap().to_string();
                if target.starts_with(redirect_uri) {
                    return target;
                }
                next = self.http.get(target);
                continue;
            }
            let status = response.status();
            let page = response.text().await.unwrap();
            let action = form
                .captures(&page)
                .unwrap_or_else(|| panic!("no form on a {status} page:\n{page}"))[1]
                .to_string();
            let body = match &prompt.captures(&page).unwrap()[1] {
                "login" => "prompt=login&login=alice&password=secret".to_string(),
                other => format!("prompt={other}"),
            };
            next = self
                .http
                .post(base.join(&action).unwrap())
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        panic!("the authorization did not come back to {redirect_uri}");
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://form.invalid/").unwrap();
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_string()
}

/// The connector's OAuth state as the file store keeps it.
fn oauth_state(home: &TestHome, slug: &str) -> Value {
    let text = std::fs::read_to_string(home.home.join("secrets.json")).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let entry = file["secrets"][format!("connector/{slug}/oauth")]
        .as_str()
        .unwrap_or_else(|| panic!("no OAuth state in the store: {file}"));
    serde_json::from_str(entry).unwrap()
}

fn grants(provider: &Provider, runtime: &tokio::runtime::Runtime, kind: &str) -> u64 {
    runtime.block_on(async {
        let stats: Value = reqwest::get(format!("{}/stats", provider.issuer))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["grants"][kind].as_u64().unwrap_or(0)
    })
}

#[test]
fn oidc_provider_as_a_real_authorization_server() {
    const TTL: u64 = 3;
    let provider = Provider::start(TTL);
    let home = TestHome::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let car = |args: &[&str]| {
        home.command(CAR)
            .env("CAR_SECRET_STORE", "file")
            .arg("--json")
            .args(args)
            .output()
            .unwrap()
    };

    // Added, it needs a login.
    let out = car(&["connector", "add", "protected", "--url", &provider.mcp]);
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["data"]["needs_login"], true, "{added}");

    // Log in without a browser: the test reads the URL CAR prints and plays the browser.
    let mut login = home
        .command(CAR)
        .env("CAR_SECRET_STORE", "file")
        .env("RUST_LOG", "debug")
        .args(["--json", "connector", "login", "protected", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(login.stderr.take().unwrap());
    let mut login_stderr = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "car connector login printed no URL:\n{login_stderr}"
        );
        login_stderr.push_str(&line);
        if line
            .trim_start()
            .starts_with(&format!("{}/auth?", provider.issuer))
        {
            break line.trim().to_string();
        }
    };
    let authorize_url = reqwest::Url::parse(&url).unwrap();
    let param = |name: &str| {
        authorize_url
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    assert_eq!(param("code_challenge_method"), "S256");
    assert_eq!(param("resource"), provider.mcp);
    assert!(!param("state").is_empty());
    let redirect_uri = param("redirect_uri");
    assert!(
        redirect_uri.starts_with("http://127.0.0.1:"),
        "{redirect_uri}"
    );
    let mut browser = Browser::new();
    let callback = runtime.block_on(async {
        let callback = browser.authorize(&url, &redirect_uri).await;
        let page = browser.http.get(&callback).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("close this tab"));
        callback
    });
    assert!(callback.contains("code="), "{callback}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    login_stderr.push_str(&rest);
    let output = login.wait_with_output().unwrap();
    let done: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "login printed no JSON ({e}): {}\n{login_stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(done["success"], true, "{done}\n{login_stderr}");
    assert_eq!(done["data"]["tool_count"], 1);
    assert_eq!(done["data"]["login"]["registration"], "dynamic");
    assert_eq!(done["data"]["login"]["scopes"], json!(["mcp:tools"]));
    let first = oauth_state(&home, "protected");
    let first_refresh = first["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_string();
    let first_access = first["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_string();

    // A tool call works; after the access token expires the next call refreshes it.
    assert!(car(&["connector", "enable", "protected", "whoami"])
        .status
        .success());
    let mut command = home.command(CAR_MCP);
    command.env("CAR_SECRET_STORE", "file");
    let mut mcp = McpProcess::spawn(command);
    mcp.initialize();
    let result = mcp.call("mcp_protected_whoami", json!({}));
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "hello alice"}]),
        "{result}"
    );
    assert_eq!(grants(&provider, &runtime, "refresh_token"), 0);
    std::thread::sleep(Duration::from_secs(TTL + 1));
    let result = mcp.call("mcp_protected_whoami", json!({}));
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "hello alice"}]),
        "{result}"
    );
    assert_eq!(grants(&provider, &runtime, "refresh_token"), 1);
    let mcp_stderr = mcp.stderr_tail();
    mcp.finish();
    let second = oauth_state(&home, "protected");
    let second_refresh = second["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    let second_access = second["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first_refresh, second_refresh, "the refresh token rotates");

    // Nothing secret outside the keychain (here the opt-in file store).
    let connectors_json = std::fs::read_to_string(home.home.join("connectors.json")).unwrap();
    let db = std::fs::read(home.home.join("car.db")).unwrap_or_default();
    for token in [
        &first_refresh,
        &first_access,
        &second_refresh,
        &second_access,
    ] {
        assert!(!connectors_json.contains(token.as_str()));
        assert!(!String::from_utf8_lossy(&db).contains(token.as_str()));
        assert!(!login_stderr.contains(token.as_str()));
        assert!(!mcp_stderr.contains(token.as_str()));
    }
    let client_id = done["data"]["login"]["client_id"].as_str().unwrap();
    let stored: Value = serde_json::from_str(&connectors_json).unwrap();
    assert_eq!(stored["connectors"][0]["oauth"]["client_id"], client_id);

    runtime.block_on(async {
        let token_url = format!("{}/token", provider.issuer);
        let post = |body: String| {
            reqwest::Client::new()
                .post(&token_url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
        };
        // A wrong PKCE verifier is rejected.
        let challenge = "A".repeat(43);
        let mut url = reqwest::Url::parse(&format!("{}/auth", provider.issuer)).unwrap();
        url.query_pairs_mut().extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect_uri.as_str()),
            ("scope", "mcp:tools"),
            ("state", "test-state"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", provider.mcp.as_str()),
        ]);
        let back = browser.authorize(url.as_str(), &redirect_uri).await;
        let code = reqwest::Url::parse(&back)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v.into_owned())
            .expect("a code");
        let wrong = "B".repeat(43);
        let response = post(form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &redirect_uri),
            ("client_id", client_id),
            ("code_verifier", &wrong),
            ("resource", &provider.mcp),
        ]))
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "invalid_grant", "{body}");

        // The rotated refresh token, replayed, is rejected.
        let response = post(form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &first_refresh),
            ("client_id", client_id),
        ]))
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "invalid_grant", "{body}");
    });

    // Logout forgets the tokens and keeps the connector; a call then says to log in.
    let out = car(&["connector", "logout", "protected"]);
    let logout: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        logout["data"],
        json!({"slug": "protected", "logged_out": true})
    );
    let out = car(&["connector", "test", "protected"]);
    let test: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(test["error"]["code"], "auth_required", "{test}");
}
