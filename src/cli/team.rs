//! `car team …`: a team's shared database on PostgreSQL — its projects, its people with their
//! tokens and roles, and who may reach which project (see [`crate::team`]).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{finish_typed, Env, Failure};
use crate::team::{Issued, Role, TeamDb, TeamError, TeamProject, User};

pub const HELP: &str = "The database is PostgreSQL, named by --database or CAR_DATABASE_URL
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
  car team user list --json";

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
    let name = match &args.command {
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
        };
        Ok(done)
    }
    .await;
    finish_typed(env.json, name, result, human)
}
