//! The CLI against a team server (`--server URL`, `CAR_SERVER`): the commands a team server
//! serves (memory, skills, tasks, progress, decisions, status, briefing, checkpoints) call its
//! tools over HTTP MCP with the token `car team login` stored, and render the answer as they
//! render their own. The rest of `car` works on this machine.

use serde_json::{json, Value};

use super::{Env, Failure};
use crate::secrets::Secrets;
use crate::team::client::{token_for, Answer, ClientError, Server, TeamClient, ToolFailed};

impl From<ClientError> for Failure {
    fn from(err: ClientError) -> Self {
        let code = match &err {
            ClientError::Invalid(_) => return Failure::usage(err.to_string()),
            ClientError::NoToken { .. } => "no_token",
            ClientError::Refused { .. } => "unauthorized",
            ClientError::NotFound { .. } => "not_found",
            ClientError::Unreachable { .. } => "unreachable",
            ClientError::Keychain(_) => "keychain",
        };
        Failure::new(code, err.to_string())
    }
}

impl From<ToolFailed> for Failure {
    fn from(failed: ToolFailed) -> Self {
        let exit = if matches!(failed.code.as_str(), "usage" | "invalid_arguments") {
            2
        } else {
            1
        };
        // The server's codes are open-ended; a command fails once per process.
        Failure {
            code: Box::leak(failed.code.into_boxed_str()),
            message: failed.message,
            exit,
        }
    }
}

/// The team server this command works against, when one is named.
pub(crate) fn server(env: &Env) -> Option<Result<Server, Failure>> {
    env.server
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|text| Server::parse(text).map_err(Failure::from))
}

/// Connects to `server` with the token for it (`CAR_TOKEN`, else the keychain).
pub(crate) async fn connect(env: &Env, server: &Server) -> Result<TeamClient, Failure> {
    let home = env.home.root().to_path_buf();
    let token = token_for(server, || Secrets::open(&home).map_err(|e| e.to_string()))?;
    Ok(TeamClient::connect(server, &token).await?)
}

/// One tool call on the team server: its structured result.
async fn call(env: &Env, server: &Server, tool: &str, args: Value) -> Result<Answer, Failure> {
    let client = connect(env, server).await?;
    let answer = client.call(tool, args, None).await;
    client.close().await;
    Ok(answer??)
}

/// A command that maps to a tool, on the team server: the tool it called and its structured
/// result. `call` is the command's tool call, `None` for a command of this machine's only
/// (`also` says which commands a team server answers).
pub(crate) async fn tool_command(
    env: &Env,
    server: Result<Server, Failure>,
    name: &str,
    call: Result<Option<(&'static str, Value)>, Failure>,
    also: &str,
) -> (&'static str, Result<Value, Failure>) {
    let call = call.and_then(|call| {
        call.ok_or_else(|| {
            Failure::usage(format!(
                "`car {}` works on this machine; against a team server use {also}",
                name.replace('.', " ")
            ))
        })
    });
    match (call, server) {
        (Ok((tool, args)), Ok(server)) => (
            tool,
            self::call(env, &server, tool, args).await.map(|a| a.value),
        ),
        (Err(e), _) | (_, Err(e)) => ("", Err(e)),
    }
}

/// The envelope's data read back as the command's own outcome, for its renderer.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(data: Value) -> Result<T, Failure> {
    serde_json::from_value(data).map_err(|e| {
        Failure::new(
            "failed",
            format!("the team server answered in a form this car does not read ({e}); are the two the same version?"),
        )
    })
}

/// A project command on the team server: the tool, and the words after `command` (the first
/// is the action, unless `action` names it: `status`, `context`, …).
pub(crate) async fn project(
    env: &Env,
    server: Result<Server, Failure>,
    tool: &str,
    command: &str,
    action: Option<&str>,
) -> Result<Value, Failure> {
    let server = server?;
    let mut words = words_after(command);
    let action = match action {
        Some(action) => action.to_string(),
        None if words.is_empty() => {
            return Err(Failure::usage(format!("car {command} needs a subcommand")))
        }
        None => words.remove(0),
    };
    let answer = call(env, &server, tool, json!({"action": action, "args": words})).await?;
    let mut envelope = answer.value;
    Ok(envelope["data"].take())
}

/// The words of this command line after `command` (`task`, `status`, …), without the flags
/// every command takes (`--json`, `--server`, `--home`, `--project`): what the server's tool
/// parses with the same definitions.
pub(crate) fn words_after(command: &str) -> Vec<String> {
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    strip_global(&argv, command)
}

fn strip_global(argv: &[String], command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = false;
    let mut iter = argv.iter().peekable();
    while let Some(word) = iter.next() {
        if word == "--" {
            out.push(word.clone());
            out.extend(iter.cloned());
            break;
        }
        let flag = word.split('=').next().unwrap_or_default();
        match flag {
            "--json" => continue,
            "--server" | "--home" => {
                if !word.contains('=') {
                    iter.next();
                }
                continue;
            }
            // `--project` alone means the default project.
            "--project" => {
                if !word.contains('=') && iter.peek().is_some_and(|next| !next.starts_with('-')) {
                    iter.next();
                }
                continue;
            }
            _ => {}
        }
        if !seen {
            seen = word == command;
            continue;
        }
        out.push(word.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_global;

    fn words(line: &str, command: &str) -> Vec<String> {
        let argv: Vec<String> = line.split(' ').map(str::to_string).collect();
        strip_global(&argv, command)
    }

    #[test]
    fn the_words_after_a_command_leave_out_the_global_flags() {
        assert_eq!(
            words("--server http://x/mcp task ready --json --limit 5", "task"),
            ["ready", "--limit", "5"]
        );
        assert_eq!(
            words("--json --project /p task create T --label a", "task"),
            ["create", "T", "--label", "a"]
        );
        assert_eq!(
            words("--server=http://x status", "status"),
            Vec::<String>::new()
        );
        assert_eq!(
            words("checkpoint before-merge --note n --home /h", "checkpoint"),
            ["before-merge", "--note", "n"]
        );
        assert_eq!(
            words("task create -- --json", "task"),
            ["create", "--", "--json"]
        );
    }
}
