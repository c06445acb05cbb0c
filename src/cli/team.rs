//! `car team …`: a team's shared database on PostgreSQL — its projects, its people with their
//! tokens and roles, and who may reach which project (see [`crate::team`]).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use std::io::BufRead;

use super::progress::Reporter;
use super::{finish_typed, open_app, open_project, remote, Env, Failure};
use crate::secrets::Secrets;
use crate::team::client::{Server, TeamClient};
use crate::team::push::{self, Local, PushError, Pushed};
use crate::team::{Issued, Role, TeamDb, TeamError, TeamProject, User};

pub const HELP: &str = "Administration (user, project, grant) works on the database itself.
The database is PostgreSQL, named by --database or CAR_DATABASE_URL
(postgres://USER:PASSWORD@HOST:5432/DATABASE); CAR creates its tables there on first use.
A user's token is printed once, when the user is added or the token rotated: hand it to them
(it is stored only as its SHA-256). Roles: admin manages the team, member reads and writes a
project, reader only reads.

Examples:
  export CAR_DATABASE_URL=postgres://car@db.internal:5432/car
  car team project add web
  car team user add alice --role member --grant web
  car team grant bob web reader
  car team user token-rotate alice
  car team user list --json

A person on the team logs in once with the token they were given, then works against the
team server with --server (or CAR_SERVER):
  printf %s \"$TOKEN\" | car team login --server https://car.example.com
  car --server https://car.example.com/mcp/web team push     # copy this project up, once
  export CAR_SERVER=https://car.example.com/mcp/web
  car task ready                                            # the team's board";

const PUSH_HELP: &str = "Copied: the project's current facts, knowledge and procedures (not global
preferences, not replaced versions), active skills, every task with its description, labels,
priority, parent, dependencies and status, every decision with its status and what it
supersedes. Not copied: progress notes, checkpoints, the execution log.

Each item goes up through the server's own tools under a request id made from this database,
the project and the item, so a second push (or one resumed after an interruption) sends only
what is new or changed; the server stamps every copy with your name.

Example:
  car --server https://car.example.com/mcp/web team push";

#[derive(Debug, Args)]
pub struct TeamArgs {
    /// The team database: postgres://USER:PASSWORD@HOST:5432/DATABASE.
    #[arg(long, env = "CAR_DATABASE_URL", hide_env_values = true, global = true)]
    database: Option<String>,
    #[command(subcommand)]
    command: TeamCommand,
}

#[derive(Debug, Subcommand)]
enum TeamCommand {
    /// Add, remove and list people; give one a new token.
    #[command(subcommand)]
    User(UserCommand),
    /// Add and list the team's projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Keep your token for a team server (--server) in the OS keychain: read from stdin,
    /// checked against the server first.
    Login,
    /// Forget the token stored for a team server (--server).
    Logout,
    /// Copy this project's memory, skills, tasks and decisions up to the team server's project
    /// (--server); run it again and nothing doubles.
    #[command(after_help = PUSH_HELP)]
    Push,
    /// Give USER ROLE on PROJECT (replacing the role they had there).
    Grant {
        /// Who.
        user: String,
        /// Which project.
        #[arg(id = "team_project", value_name = "PROJECT")]
        project: String,
        /// admin, member (reads and writes) or reader (reads only).
        #[arg(value_enum)]
        role: Role,
    },
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Add a person; prints their token once.
    Add {
        /// Their name: letters, digits, '.', '_' or '-'.
        name: String,
        /// Their role, also on each --grant.
        #[arg(long, value_enum, default_value_t = Role::Member)]
        role: Role,
        /// A project they may reach, with their role (repeatable). (`--project` names the
        /// project directory, as everywhere in car.)
        #[arg(long = "grant", value_name = "PROJECT")]
        projects: Vec<String>,
    },
    /// Remove a person: their token stops working on every team server within moments.
    Remove {
        /// Whom.
        name: String,
    },
    /// A new token for a person (printed once); the old one stops working on every team server within moments.
    TokenRotate {
        /// Whose.
        name: String,
    },
    /// Everyone, with their role and projects (never a token).
    List,
}

#[derive(Debug, Subcommand)]
enum ProjectCommand {
    /// Add a project.
    Add {
        /// Its name: letters, digits, '.', '_' or '-'.
        name: String,
    },
    /// Every project.
    List,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Done {
    Issued(Issued),
    User(User),
    Users { users: Vec<User> },
    Project(TeamProject),
    Projects { projects: Vec<TeamProject> },
    Removed { removed: String },
}

fn failure(e: TeamError) -> Failure {
    match e {
        TeamError::Url(_) => Failure::usage(e.to_string()),
        TeamError::Invalid(_) => Failure::usage(e.to_string()),
        TeamError::NotFound(_) => Failure::new("not_found", e.to_string()),
        TeamError::Exists(_) => Failure::new("exists", e.to_string()),
        TeamError::Connect { .. } => Failure::new("unreachable", e.to_string()),
        TeamError::NewerSchema { .. } | TeamError::Db(_) => Failure::new("database", e.to_string()),
    }
}

fn grants(user: &User) -> String {
    if user.projects.is_empty() {
        "no project".to_string()
    } else {
        user.projects
            .iter()
            .map(|g| format!("{} ({})", g.project, g.role.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn human(done: &Done) -> String {
    match done {
        Done::Issued(issued) => format!(
            "{} ({}): {}\ntoken, shown this once: {}\n",
            issued.user.name,
            issued.user.role.as_str(),
            grants(&issued.user),
            issued.token
        ),
        Done::User(user) => format!("{} ({}): {}\n", user.name, user.role.as_str(), grants(user)),
        Done::Users { users } if users.is_empty() => {
            "no users yet (car team user add NAME)\n".to_string()
        }
        Done::Users { users } => users
            .iter()
            .map(|u| format!("{:<20} {:<7} {}\n", u.name, u.role.as_str(), grants(u)))
            .collect(),
        Done::Project(p) => format!("added project {}\n", p.name),
        Done::Projects { projects } if projects.is_empty() => {
            "no projects yet (car team project add NAME)\n".to_string()
        }
        Done::Projects { projects } => projects
            .iter()
            .map(|p| format!("{:<24} since {}\n", p.name, p.created_at))
            .collect(),
        Done::Removed { removed } => format!("removed {removed}; their token no longer works\n"),
    }
}

pub async fn run(env: &Env, args: TeamArgs) -> ExitCode {
    match args.command {
        TeamCommand::Login => return login(env).await,
        TeamCommand::Logout => return logout(env),
        TeamCommand::Push => return push(env).await,
        _ => {}
    }
    let name = match &args.command {
        TeamCommand::Login | TeamCommand::Logout | TeamCommand::Push => unreachable!(),
        TeamCommand::User(UserCommand::Add { .. }) => "team.user.add",
        TeamCommand::User(UserCommand::Remove { .. }) => "team.user.remove",
        TeamCommand::User(UserCommand::TokenRotate { .. }) => "team.user.token_rotate",
        TeamCommand::User(UserCommand::List) => "team.user.list",
        TeamCommand::Project(ProjectCommand::Add { .. }) => "team.project.add",
        TeamCommand::Project(ProjectCommand::List) => "team.project.list",
        TeamCommand::Grant { .. } => "team.grant",
    };
    let result = async {
        let url = args.database.as_deref().ok_or_else(|| {
            Failure::usage(
                "no team database: pass --database postgres://USER:PASSWORD@HOST:5432/DATABASE or set CAR_DATABASE_URL",
            )
        })?;
        let db = TeamDb::connect(url).await.map_err(failure)?;
        let done = match args.command {
            TeamCommand::User(UserCommand::Add {
                name,
                role,
                projects,
            }) => Done::Issued(db.add_user(&name, role, &projects).await.map_err(failure)?),
            TeamCommand::User(UserCommand::Remove { name }) => {
                db.remove_user(&name).await.map_err(failure)?;
                Done::Removed { removed: name }
            }
            TeamCommand::User(UserCommand::TokenRotate { name }) => {
                Done::Issued(db.rotate_token(&name).await.map_err(failure)?)
            }
            TeamCommand::User(UserCommand::List) => Done::Users {
                users: db.users().await.map_err(failure)?,
            },
            TeamCommand::Project(ProjectCommand::Add { name }) => {
                Done::Project(db.add_project(&name).await.map_err(failure)?)
            }
            TeamCommand::Project(ProjectCommand::List) => Done::Projects {
                projects: db.projects().await.map_err(failure)?,
            },
            TeamCommand::Grant {
                user,
                project,
                role,
            } => Done::User(db.grant(&user, &project, role).await.map_err(failure)?),
            TeamCommand::Login | TeamCommand::Logout | TeamCommand::Push => unreachable!(),
        };
        Ok(done)
    }
    .await;
    finish_typed(env.json, name, result, human)
}

/// The team server `--server` names, or the error that says to name one.
fn named_server(env: &Env, command: &str) -> Result<Server, Failure> {
    remote::server(env).unwrap_or_else(|| {
        Err(Failure::usage(format!(
            "no team server: pass --server https://HOST[:PORT][/mcp/PROJECT] or set CAR_SERVER (car team {command})"
        )))
    })
}

#[derive(Debug, Serialize)]
struct LoggedIn {
    server: String,
    /// Where the token is kept.
    backend: &'static str,
    /// How many tools the server offers this user on the project.
    tools: usize,
}

async fn login(env: &Env) -> ExitCode {
    let result = async {
        let server = named_server(env, "login")?;
        let mut line = String::new();
        let read = std::io::stdin().lock().read_line(&mut line);
        let token = line.trim().to_string();
        if read.is_err() || token.is_empty() {
            return Err(Failure::usage(format!(
                "no token on stdin; pipe it in: printf %s \"$TOKEN\" | car team login --server {}",
                server.origin()
            )));
        }
        let client = TeamClient::connect(&server, &token).await?;
        let tools = client.tool_count().await?;
        client.close().await;
        let secrets =
            Secrets::open(env.home.root()).map_err(|e| Failure::new("keychain", e.to_string()))?;
        secrets
            .set(&server.account(), &token)
            .map_err(|e| Failure::new("keychain", e.to_string()))?;
        Ok(LoggedIn {
            server: server.origin(),
            backend: secrets.backend(),
            tools,
        })
    }
    .await;
    finish_typed(env.json, "team.login", result, |done| {
        format!(
            "logged in to {} ({} tools); the token is in {}\n",
            done.server, done.tools, done.backend
        )
    })
}

#[derive(Debug, Serialize)]
struct LoggedOut {
    server: String,
    /// Whether a token was stored.
    removed: bool,
}

fn logout(env: &Env) -> ExitCode {
    let result = (|| {
        let server = named_server(env, "logout")?;
        let secrets =
            Secrets::open(env.home.root()).map_err(|e| Failure::new("keychain", e.to_string()))?;
        let removed = secrets
            .delete(&server.account())
            .map_err(|e| Failure::new("keychain", e.to_string()))?;
        Ok(LoggedOut {
            server: server.origin(),
            removed,
        })
    })();
    finish_typed(env.json, "team.logout", result, |done| {
        if done.removed {
            format!("forgot the token for {}\n", done.server)
        } else {
            format!("no token was stored for {}\n", done.server)
        }
    })
}

async fn push(env: &Env) -> ExitCode {
    let reporter = Reporter::new("team.push", env.json);
    let result = async {
        let server = named_server(env, "push")?;
        let client = remote::connect(env, &server).await?;
        let app = open_app(env)?;
        let project = match app.memory() {
            Some(memory) => {
                crate::project::Project::open(memory.store().clone(), &env.project_root)?
            }
            None => open_project(env)?,
        };
        let from = Local {
            project: &project,
            memory: app.memory(),
            skills: app.skills(),
        };
        let pushed = push::push(&client, from, &mut |done, total| {
            reporter.update("pushing", done as u64, Some(total as u64))
        })
        .await;
        client.close().await;
        pushed.map_err(|e| match e {
            PushError::Client(e) => Failure::from(e),
            PushError::Local(message) => Failure::new("store", message),
            PushError::Denied(message) => {
                Failure::new("denied", format!("nothing was pushed: {message}"))
            }
        })
    }
    .await;
    reporter.finish();
    let result = result.and_then(|pushed| match pushed.refused.first() {
        // Everything else went up; the exit status says not all did.
        Some(first) => {
            let text = human_pushed(&pushed);
            if env.json {
                Ok(pushed)
            } else {
                crate::console::stdout(&text);
                Err(Failure::new(
                    "refused",
                    format!(
                        "the server refused {} item(s); the first, {}: {} ({})",
                        pushed.refused.len(),
                        first.item,
                        first.message,
                        first.code
                    ),
                ))
            }
        }
        None => Ok(pushed),
    });
    let refused = matches!(&result, Ok(p) if !p.refused.is_empty());
    let code = finish_typed(env.json, "team.push", result, human_pushed);
    if refused {
        ExitCode::from(1)
    } else {
        code
    }
}

fn human_pushed(pushed: &Pushed) -> String {
    let mut out = format!("pushed to {}\n", pushed.server);
    for (what, count) in pushed.counts() {
        if count.sent + count.already > 0 {
            out.push_str(&format!(
                "  {what:<14} {} sent, {} already there\n",
                count.sent, count.already
            ));
        }
    }
    if pushed.refused.is_empty() && pushed.counts().iter().all(|(_, c)| c.sent + c.already == 0) {
        out.push_str("  nothing to push: this project has no memory, skills, tasks or decisions\n");
    }
    for refused in &pushed.refused {
        out.push_str(&format!(
            "  refused {}: {} ({})\n",
            refused.item, refused.message, refused.code
        ));
    }
    out
}
