//! `car connector …`: remote MCP servers as tool sources — add, list, see and enable their
//! tools, refresh, test, remove, sync the team file, log in and out (OAuth).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;

use super::{finish, Env, Failure};
use crate::connectors::oauth::{Authorize, LoginOptions, PreregisteredClient};
use crate::connectors::outcome::Listed;
use crate::connectors::{
    self, Added, ConnectorError, ConnectorStatus, Connectors, Endpoint, LoggedOut, NewConnector,
    Refreshed, Removed, Selection, Switch, Switched, Synced, Tested, ToolList,
};
use crate::output::table;

pub const HELP: &str = "\
A connector is a remote MCP server whose tools become CAR tools named mcp_<slug>_<tool>. New
tools are disabled: they are not listed to agents and cannot be called until you enable them.
Enabled tools pass CAR's policy gate (deny_tool, deny_connector, parameter rules), run under a
time bound (300 s unless --timeout) and are logged like every other call.

Secret values (--header values, --env values, OAuth tokens) go to the OS keychain (service
'car'); $CAR_HOME/connectors.json holds only their names.

Examples:
  car connector add docs --url https://mcp.example.com/mcp --header 'Authorization=Bearer …'
  car connector add docs --url https://mcp.example.com/mcp --header-from-env X-Api-Key=DOCS_KEY
  car connector add everything --command npx --arg -y --arg @modelcontextprotocol/server-everything
  car connector tools everything
  car connector enable everything echo get-sum
  car connector test everything
  car connector login docs          # OAuth 2.1: opens the browser, stores tokens in the keychain
  car connector login docs --no-browser --scope files:write
  car connector logout docs         # forget the tokens, keep the connector
  car connector sync                # add the connectors of .car/connectors.toml";

#[derive(Debug, Subcommand)]
pub enum ConnectorCommand {
    /// Add a remote MCP server (--url for streamable HTTP, --command for a local stdio server) and discover its tools, all disabled.
    Add(AddArgs),
    /// List the connectors with their tool counts and state.
    List,
    /// A connector's tools: name, canonical mcp_… name, effect, enabled.
    Tools {
        /// The connector's slug, as `car connector list` shows it.
        slug: String,
    },
    /// Enable tools (by the server's names, or --all) so agents see and can call them.
    Enable(ToggleArgs),
    /// Disable tools (by name, or --all).
    Disable(ToggleArgs),
    /// Reconnect and rediscover a connector's tools (enabled choices are kept).
    Refresh {
        /// The connector's slug, as `car connector list` shows it.
        slug: String,
    },
    /// Remove a connector and every keychain entry it had.
    Remove {
        /// The connector's slug, as `car connector list` shows it.
        slug: String,
        /// Remove it even when the keychain cannot be reached (its entries stay there; they are named).
        #[arg(long)]
        force: bool,
    },
    /// Connect, list the tools and report the latency.
    Test {
        /// The connector's slug, as `car connector list` shows it.
        slug: String,
    },
    /// Authorize CAR with an HTTP connector's server (OAuth 2.1 with PKCE), then discover its tools.
    #[command(long_about = LOGIN_HELP)]
    Login(LoginArgs),
    /// Delete a connector's OAuth tokens from the keychain; the connector and its tools stay.
    Logout {
        /// The connector's slug.
        slug: String,
    },
    /// Add the connectors listed in the nearest .car/connectors.toml that are missing here.
    Sync,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("endpoint").required(true).args(["url", "command"])))]
pub struct AddArgs {
    /// A name for the connector; its slug (lowercase, dashes) prefixes its tools.
    name: String,
    /// The server's streamable HTTP endpoint, e.g. https://example.com/mcp.
    #[arg(long)]
    url: Option<String>,
    /// A header sent with every request, NAME=VALUE; the value goes to the keychain (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "url")]
    headers: Vec<String>,
    /// A header whose value is read from an environment variable (kept out of shell history), NAME=VAR.
    #[arg(long = "header-from-env", value_name = "NAME=VAR", requires = "url")]
    headers_from_env: Vec<String>,
    /// The program that runs a stdio MCP server.
    #[arg(long)]
    command: Option<String>,
    /// An argument of the program (repeatable, in order).
    #[arg(
        long = "arg",
        value_name = "ARG",
        requires = "command",
        allow_hyphen_values = true
    )]
    args: Vec<String>,
    /// An environment variable for the program, K=V; the value goes to the keychain (repeatable).
    #[arg(long = "env", value_name = "K=V", requires = "command")]
    env: Vec<String>,
    /// An environment variable for the program whose value is read from this process's variable VAR, K=VAR.
    #[arg(long = "env-from-env", value_name = "K=VAR", requires = "command")]
    env_from_env: Vec<String>,
    /// Seconds a call may run before it is cancelled (default 300).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout: Option<u64>,
}

const LOGIN_HELP: &str = "\
Authorize CAR with an HTTP connector's server (OAuth 2.1 with PKCE), then discover its tools.

CAR asks the server, finds its authorization server (protected resource metadata, RFC 9728;
authorization server metadata, RFC 8414), registers itself there (dynamic client registration)
unless you give --client-id, and opens the browser on the authorization page. The browser comes
back to a listener on 127.0.0.1 (a random port); CAR exchanges the code for tokens and keeps them
in the OS keychain (account connector/<slug>/oauth), never in connectors.json or the logs.
Tokens are refreshed before they expire. When a tool needs more permission than was granted,
the error names the scope: log in again with --scope.

A pre-registered client: --client-id ID, with its secret (if any) in CAR_OAUTH_CLIENT_SECRET or
on stdin with --client-secret-stdin. Register the redirect URI http://127.0.0.1/callback (the
port varies; RFC 8252 lets loopback redirects use any port).";

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The connector's slug, as `car connector list` shows it.
    slug: String,
    /// Print the authorization URL to stderr instead of opening a browser, then wait.
    #[arg(long)]
    no_browser: bool,
    /// A client registered with the authorization server beforehand (skips dynamic registration).
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// Read the pre-registered client's secret from stdin (one line); else CAR_OAUTH_CLIENT_SECRET.
    #[arg(long, requires = "client_id")]
    client_secret_stdin: bool,
    /// A scope to ask for beyond those the server names (repeatable; space-separated lists too).
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Seconds to wait for the browser to come back.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(5..=3600))]
    timeout: u64,
}

/// `enable`/`disable`: the named tools or `--all` (the CLI's own hint when neither is given).
fn switch_tools(
    connectors: &Connectors,
    args: &ToggleArgs,
    switch: Switch,
) -> Result<Switched, Failure> {
    let selection = if args.all {
        Selection::All
    } else if args.tools.is_empty() {
        let verb = if switch == Switch::On {
            "enable"
        } else {
            "disable"
        };
        return Err(Failure {
            exit: 2,
            ..Failure::new(
                "invalid",
                format!(
                    "name the tools to {verb}, or pass --all; `car connector tools {}` lists them",
                    args.slug
                ),
            )
        });
    } else {
        Selection::Named(&args.tools)
    };
    connectors
        .set_enabled(&args.slug, selection, switch)
        .map_err(Failure::from)
}

fn login_options(args: &LoginArgs) -> Result<LoginOptions, Failure> {
    let notice: crate::connectors::oauth::Notice =
        std::sync::Arc::new(|text: &str| super::console::stderr_line(text));
    let mut options = LoginOptions::new(if args.no_browser {
        Authorize::Print(notice)
    } else {
        Authorize::Browser(notice)
    });
    options.scopes = args.scopes.clone();
    options.timeout = std::time::Duration::from_secs(args.timeout);
    if let Some(client_id) = &args.client_id {
        let secret = if args.client_secret_stdin {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map_err(|e| {
                Failure::usage(format!("cannot read the client secret from stdin: {e}"))
            })?;
            Some(line.trim_end_matches(['\r', '\n']).to_string())
        } else {
            std::env::var(crate::home::env::CAR_OAUTH_CLIENT_SECRET).ok()
        }
        .filter(|s| !s.is_empty());
        options.client = Some(PreregisteredClient {
            client_id: client_id.clone(),
            client_secret: secret,
        });
    }
    Ok(options)
}

#[derive(Debug, Args)]
pub struct ToggleArgs {
    /// The connector's slug, as `car connector list` shows it.
    slug: String,
    /// Tool names, as the server calls them (or their mcp_<slug>_ names).
    tools: Vec<String>,
    /// Every tool of the connector.
    #[arg(long, conflicts_with = "tools")]
    all: bool,
}

impl From<ConnectorError> for Failure {
    fn from(err: ConnectorError) -> Self {
        let exit = match err {
            ConnectorError::Invalid(_) => 2,
            _ => 1,
        };
        Failure {
            exit,
            ..Failure::new(err.code(), err.to_string())
        }
    }
}

fn pairs(items: &[String], what: &str) -> Result<Vec<(String, String)>, Failure> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.to_string()))
            }
            _ => Err(Failure::usage(format!(
                "{what} must look like NAME=VALUE (got '{}')",
                item.split('=').next().unwrap_or_default()
            ))),
        })
        .collect()
}

/// `NAME=VAR` pairs whose values are read from the environment.
fn pairs_from_env(items: &[String], what: &str) -> Result<Vec<(String, String)>, Failure> {
    pairs(items, what)?
        .into_iter()
        .map(|(name, var)| match std::env::var(&var) {
            Ok(value) if !value.is_empty() => Ok((name, value)),
            _ => Err(Failure::usage(format!(
                "{what} {name}={var}: the environment variable {var} is not set (or empty)"
            ))),
        })
        .collect()
}

/// Secret values from the command line and from the environment; a name given twice is refused.
fn secret_values(
    given: &[String],
    from_env: &[String],
    what: &str,
) -> Result<Vec<(String, String)>, Failure> {
    let mut all = pairs(given, what)?;
    all.extend(pairs_from_env(from_env, &format!("{what}-from-env"))?);
    // Header names are case-insensitive, environment variable names are not.
    let fold = |name: &str| {
        if what == "--header" {
            name.to_ascii_lowercase()
        } else {
            name.to_string()
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in &all {
        if !seen.insert(fold(name)) {
            return Err(Failure::usage(format!("{what} '{name}' is given twice")));
        }
    }
    Ok(all)
}

fn new_connector(args: AddArgs) -> Result<NewConnector, Failure> {
    let (endpoint, secrets) = match (args.url, args.command) {
        (Some(url), None) => {
            let headers = secret_values(&args.headers, &args.headers_from_env, "--header")?;
            let names = headers.iter().map(|(n, _)| n.clone()).collect();
            (
                Endpoint::Http {
                    url,
                    headers: names,
                },
                headers,
            )
        }
        (None, Some(command)) => {
            let env = secret_values(&args.env, &args.env_from_env, "--env")?;
            let names = env.iter().map(|(n, _)| n.clone()).collect();
            (
                Endpoint::Stdio {
                    command,
                    args: args.args,
                    env: names,
                },
                env,
            )
        }
        _ => return Err(Failure::usage("give either --url or --command")),
    };
    Ok(NewConnector {
        name: args.name,
        endpoint,
        secrets,
        timeout_secs: args.timeout,
    })
}

/// What a connector command did, each by its own type.
enum Done {
    Added(Added),
    Listed(Listed),
    Tools(ToolList),
    Switched(Switched),
    Refreshed(Refreshed),
    Removed(Removed),
    Tested(Tested),
    LoggedIn(Refreshed),
    LoggedOut(LoggedOut),
    Synced(Synced),
}

impl Done {
    fn to_json(&self) -> Value {
        let value = match self {
            Done::Added(done) => serde_json::to_value(done),
            Done::Listed(done) => serde_json::to_value(done),
            Done::Tools(done) => serde_json::to_value(done),
            Done::Switched(done) => serde_json::to_value(done),
            Done::Refreshed(done) | Done::LoggedIn(done) => serde_json::to_value(done),
            Done::Removed(done) => serde_json::to_value(done),
            Done::Tested(done) => serde_json::to_value(done),
            Done::LoggedOut(done) => serde_json::to_value(done),
            Done::Synced(done) => serde_json::to_value(done),
        };
        value.unwrap_or_default()
    }

    fn render(&self) -> String {
        match self {
            Done::Added(added) => human_added(added),
            Done::Listed(listed) => human_list(listed),
            Done::Tools(list) => human_tools(list),
            Done::Switched(switched) => {
                let (verb, count) = match (switched.enabled, switched.disabled) {
                    (Some(n), _) => ("enabled", n),
                    (None, n) => ("disabled", n.unwrap_or(0)),
                };
                format!(
                    "{verb} {count} tool(s) of '{}'; {} enabled now\n",
                    switched.slug, switched.enabled_count
                )
            }
            Done::Refreshed(refreshed) => format!(
                "refreshed '{}': {} tools ({} new, {} gone)\n",
                refreshed.status.slug,
                refreshed.status.tool_count,
                refreshed.changes.added.len(),
                refreshed.changes.removed.len(),
            ),
            Done::Removed(removed) => {
                let mut out = format!(
                    "removed '{}' and {} keychain entr{}\n",
                    removed.slug,
                    removed.secrets_deleted,
                    if removed.secrets_deleted == 1 {
                        "y"
                    } else {
                        "ies"
                    }
                );
                if let Some(left) = &removed.secrets_left {
                    out.push_str(&format!(
                        "left in the keychain, delete them by hand: {left}\n"
                    ));
                }
                out
            }
            Done::Tested(tested) => {
                let server = tested.server.clone().unwrap_or_default();
                format!(
                    "'{}' answers: {} {} · {} tools · connect {} ms · tools/list {} ms\n",
                    tested.slug,
                    server.name.as_deref().unwrap_or("-"),
                    server.version.as_deref().unwrap_or("-"),
                    tested.tool_count,
                    tested.connect_ms,
                    tested.list_ms,
                )
            }
            Done::LoggedIn(refreshed) => human_login(refreshed),
            Done::LoggedOut(out) => {
                if out.logged_out {
                    format!(
                        "logged out of '{0}': its tokens are deleted from the keychain; `car connector login {0}` to log in again\n",
                        out.slug
                    )
                } else {
                    format!("'{}' had no OAuth tokens; nothing to do\n", out.slug)
                }
            }
            Done::Synced(synced) => human_sync(synced),
        }
    }
}

pub async fn run(env: &Env, command: ConnectorCommand) -> ExitCode {
    let connectors = Connectors::new(env.home.root().to_path_buf());
    let (name, result): (&str, Result<Done, Failure>) = match command {
        ConnectorCommand::Add(args) => (
            "connector.add",
            match new_connector(args) {
                Ok(new) => connectors
                    .add(new)
                    .await
                    .map(Done::Added)
                    .map_err(Failure::from),
                Err(f) => Err(f),
            },
        ),
        ConnectorCommand::List => (
            "connector.list",
            connectors
                .list()
                .map(|list| {
                    Done::Listed(Listed {
                        connectors: list.iter().map(ConnectorStatus::from).collect(),
                    })
                })
                .map_err(Failure::from),
        ),
        ConnectorCommand::Tools { slug } => (
            "connector.tools",
            connectors
                .get(&slug)
                .map(|c| Done::Tools(connectors::tool_list(&c)))
                .map_err(Failure::from),
        ),
        ConnectorCommand::Enable(args) => (
            "connector.enable",
            switch_tools(&connectors, &args, Switch::On).map(Done::Switched),
        ),
        ConnectorCommand::Disable(args) => (
            "connector.disable",
            switch_tools(&connectors, &args, Switch::Off).map(Done::Switched),
        ),
        ConnectorCommand::Refresh { slug } => (
            "connector.refresh",
            connectors
                .refresh(&slug)
                .await
                .map(Done::Refreshed)
                .map_err(Failure::from),
        ),
        ConnectorCommand::Remove { slug, force } => (
            "connector.remove",
            connectors
                .remove(&slug, force)
                .map(Done::Removed)
                .map_err(Failure::from),
        ),
        ConnectorCommand::Test { slug } => (
            "connector.test",
            connectors
                .test(&slug)
                .await
                .map(Done::Tested)
                .map_err(Failure::from),
        ),
        ConnectorCommand::Login(args) => (
            "connector.login",
            match login_options(&args) {
                Ok(options) => connectors
                    .login(&args.slug, options)
                    .await
                    .map(Done::LoggedIn)
                    .map_err(Failure::from),
                Err(f) => Err(f),
            },
        ),
        ConnectorCommand::Logout { slug } => (
            "connector.logout",
            connectors
                .logout(&slug)
                .await
                .map(Done::LoggedOut)
                .map_err(Failure::from),
        ),
        ConnectorCommand::Sync => (
            "connector.sync",
            connectors
                .sync(&env.project_root)
                .await
                .map(Done::Synced)
                .map_err(Failure::from),
        ),
    };
    let rendered = result.as_ref().map(Done::render).unwrap_or_default();
    finish(
        env.json,
        name,
        result.map(|done| done.to_json()),
        move |_| rendered,
    )
}

fn or_dash(text: Option<&str>) -> &str {
    text.unwrap_or("-")
}

fn human_added(added: &Added) -> String {
    let slug = &added.status.slug;
    let mut out = format!(
        "added connector '{slug}' ({}): {} tools discovered, all disabled\n",
        added.status.transport.as_str(),
        added.status.tool_count
    );
    if added.needs_login {
        out.push_str(&format!(
            "the server asks for authorization: run `car connector login {slug}`\n"
        ));
    } else {
        out.push_str(&format!(
            "see them with `car connector tools {slug}`, then `car connector enable {slug} TOOL…`\n"
        ));
    }
    out
}

fn human_list(listed: &Listed) -> String {
    if listed.connectors.is_empty() {
        return "no connectors; add one with `car connector add NAME --url URL`\n".to_string();
    }
    let rows: Vec<Vec<String>> = listed
        .connectors
        .iter()
        .map(|c| {
            vec![
                c.slug.clone(),
                c.transport.as_str().to_string(),
                format!("{}/{}", c.enabled_count, c.tool_count),
                c.auth.as_str().to_string(),
                c.target.clone(),
                or_dash(c.last_error.as_deref()).to_string(),
            ]
        })
        .collect();
    table(
        &[
            "SLUG",
            "TRANSPORT",
            "ENABLED",
            "AUTH",
            "TARGET",
            "LAST ERROR",
        ],
        &rows,
    )
}

fn human_tools(list: &ToolList) -> String {
    if list.tools.is_empty() {
        return format!(
            "connector '{0}' has no discovered tools; run `car connector refresh {0}`\n",
            list.slug
        );
    }
    let rows: Vec<Vec<String>> = list
        .tools
        .iter()
        .map(|t| {
            vec![
                if t.enabled { "on" } else { "off" }.to_string(),
                t.canonical.clone(),
                t.effect.clone(),
                t.description.chars().take(60).collect(),
            ]
        })
        .collect();
    table(&["", "TOOL", "EFFECT", "DESCRIPTION"], &rows)
}

fn human_login(refreshed: &Refreshed) -> String {
    let (registration, client_id, scopes) = match &refreshed.login {
        Some(login) => (
            login.registration.as_str(),
            login.client_id.as_str(),
            login.scopes.join(" "),
        ),
        None => ("-", "-", String::new()),
    };
    format!(
        "logged in to '{0}' ({registration} client {client_id}{1}); tokens are in the keychain\n{2} tools discovered, {3} enabled; see them with `car connector tools {0}`\n",
        refreshed.status.slug,
        if scopes.is_empty() {
            String::new()
        } else {
            format!(", scopes {scopes}")
        },
        refreshed.status.tool_count,
        refreshed.status.enabled_count,
    )
}

fn human_sync(synced: &Synced) -> String {
    let mut out = format!("team file {}\n", synced.file);
    for added in &synced.added {
        out.push_str(&format!(
            "  added   {} ({} tools, disabled){}\n",
            added.status.slug,
            added.status.tool_count,
            if added.needs_login {
                " — needs `car connector login`"
            } else {
                ""
            }
        ));
    }
    for skipped in &synced.skipped {
        out.push_str(&format!("  present {skipped}\n"));
    }
    for failed in &synced.failed {
        out.push_str(&format!("  failed  {}: {}\n", failed.slug, failed.error));
    }
    out
}
