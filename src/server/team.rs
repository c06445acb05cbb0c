//! `car-server --database postgres://…`: one team's server. Many projects, many people, and
//! several instances on one database behind any load balancer; an instance holds nothing of
//! its own but caches (each project's memory index, which follows the database's
//! notifications).
//!
//! A client names its project in the URL (`/mcp/<project>`; `/mcp` alone is the token's first
//! granted project) and sends its user's token (`Authorization: Bearer …`, from
//! `car team user add`). Before anything reaches MCP:
//! - no token, or one that is wrong, rotated or revoked: 401, saying nothing of projects;
//! - a project that does not exist or is not granted to the token's user: 404 (the two are not
//!   told apart);
//! - the database unreachable: 503 with what failed, until it is back (the pool reconnects);
//! - a reader's calls that change anything are denied by the runtime (the user is on every
//!   call's context), and every call is logged with its author.
//!
//! Row-level security in the database holds the same line again: each project's store runs as
//! `car_app` with the project set per transaction (see `crate::store::postgres`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{admit, refuse, Exposure, Guard, MAX_BODY_BYTES, SESSION_IDLE};
use crate::app::App;
use crate::mcp::McpServer;
use crate::memory::Memory;
use crate::project::tools::ProjectTools;
use crate::runtime::{Caller, Context, Face};
use crate::team::{Admission, TeamDb, TeamProjectRef};

type Mcp = StreamableHttpService<McpServer, LocalSessionManager>;

/// The state of one team server instance.
pub struct TeamServer {
    db: TeamDb,
    shutdown: CancellationToken,
    /// Each project's MCP service, made on its first request.
    projects: tokio::sync::Mutex<HashMap<i64, Mcp>>,
    /// What a token (its hash) admits to a project (named or not), with the access epoch it
    /// was read at: valid while the epoch is the same, i.e. until the database tells of any
    /// change to users, tokens, grants or projects, and for [`ADMITTED_FOR`] at most. Only
    /// admissions are kept, never refusals.
    admitted: std::sync::Mutex<HashMap<AdmittedKey, Admitted>>,
}

/// A token's hash and the project a request named.
type AdmittedKey = (Vec<u8>, Option<String>);

/// What a token admitted to, the access epoch then, and when it was read.
type Admitted = (u64, std::time::Instant, Admission);

/// The longest an admission is remembered, notified or not (a belt to the notifications'
/// braces: a change the listener somehow missed holds no longer than this).
const ADMITTED_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// The most admissions kept (beyond it, all are forgotten and read again).
const MAX_ADMITTED: usize = 10_000;

impl TeamServer {
    pub fn new(db: TeamDb, shutdown: CancellationToken) -> Arc<TeamServer> {
        // Start listening for access changes now, so the first requests can be remembered.
        let _ = db.access_epoch();
        Arc::new(TeamServer {
            db,
            shutdown,
            projects: tokio::sync::Mutex::default(),
            admitted: std::sync::Mutex::default(),
        })
    }

    /// What `token` admits to: remembered while nothing about access changed, else asked of
    /// the database (the epoch is read first, so a change that lands meanwhile voids it).
    async fn admit(&self, token: &str, project: Option<&str>) -> crate::team::Result<Admission> {
        let key = (crate::team::token_hash(token), project.map(str::to_string));
        let epoch = self.db.access_epoch();
        if let Some(epoch) = epoch {
            let admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, read, admission)) = admitted.get(&key) {
                if *at == epoch && read.elapsed() < ADMITTED_FOR {
                    return Ok(admission.clone());
                }
            }
        }
        let admission = self.db.admit(token, project).await?;
        if let (Some(epoch), Admission::Project { .. }) = (epoch, &admission) {
            let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
            if admitted.len() >= MAX_ADMITTED {
                admitted.clear();
            }
            admitted.insert(key, (epoch, std::time::Instant::now(), admission.clone()));
        }
        Ok(admission)
    }

    /// The project's MCP service, opening the project (its store, its memory index) the first
    /// time.
    async fn service(&self, project: &TeamProjectRef) -> Result<Mcp, String> {
        let mut projects = self.projects.lock().await;
        if let Some(mcp) = projects.get(&project.id) {
            return Ok(mcp.clone());
        }
        let (db, opened) = (self.db.clone(), project.clone());
        let app = tokio::task::spawn_blocking(move || open_project(&db, &opened))
            .await
            .map_err(|e| format!("opening the project failed: {e}"))??;
        let server = McpServer::new(app)
            .named("car-server")
            .context(Context::new(Face::Mcp));
        let mut sessions = LocalSessionManager::default();
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = Some(SESSION_IDLE);
        sessions.session_config = session_config;
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(self.shutdown.child_token())
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        let mcp = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            Arc::new(sessions),
            config,
        );
        projects.insert(project.id, mcp.clone());
        tracing::info!(project = %project.name, "serving a team project");
        Ok(mcp)
    }
}

/// CAR over one project of the team database: memory, skills, tasks, progress, decisions and
/// checkpoints, the plan tools, and every call logged
/// with its author in the project's execution log.
fn open_project(db: &TeamDb, project: &TeamProjectRef) -> Result<App, String> {
    let store = Arc::new(db.project_store(project.id));
    let memory = Arc::new(Memory::open(store.clone(), None, None).map_err(|e| e.to_string())?);
    memory.warm().map_err(|e| e.to_string())?;
    let project_tools = ProjectTools {
        store: store.clone(),
        // Names the project in messages; nothing is read from or written to it.
        root: std::path::PathBuf::from(format!("team project {}", project.name)),
        archive: std::path::PathBuf::new(),
        memory: Some(memory.clone()),
        doctor: None,
    };
    let mut builder = App::builder()
        .store(store.clone())
        .memory(memory)
        .skills(Arc::new(crate::skills::Skills::new(store)));
    for tool in project_tools.team_tools() {
        builder = builder.tool(tool);
    }
    builder.build().map_err(|e| e.to_string())
}

/// The routes of a team server: `/mcp`, `/mcp/<project>` and `/health`, behind the same Host
/// and Origin checks as a one-person server (Host only on a loopback bind).
pub fn router(team: Arc<TeamServer>, exposure: &Exposure) -> Router {
    Router::new()
        .route("/mcp", any(default_project))
        .route("/mcp/{project}", any(named_project))
        .with_state(team)
        .layer(middleware::from_fn_with_state(
            Guard::origins_only(exposure),
            admit,
        ))
        .route("/health", get(super::health))
}

async fn default_project(State(team): State<Arc<TeamServer>>, request: Request) -> Response {
    serve(team, None, request).await
}

async fn named_project(
    State(team): State<Arc<TeamServer>>,
    Path(project): Path<String>,
    request: Request,
) -> Response {
    serve(team, Some(project), request).await
}

fn unauthorized() -> Response {
    let mut response = refuse(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({"error": "a valid bearer token is required: send `Authorization: Bearer <token>` with your token from `car team user add` (or `car team user token-rotate`)"}),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"car\""),
    );
    response
}

async fn serve(team: Arc<TeamServer>, project: Option<String>, mut request: Request) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return unauthorized();
    };
    let admission = match team.admit(token, project.as_deref()).await {
        Ok(admission) => admission,
        Err(e) => {
            tracing::warn!(error = %e, "the team database did not answer");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": format!("the team database is unavailable ({e}); try again: the server reconnects by itself")}),
            );
        }
    };
    let (user, project, role) = match admission {
        Admission::Unknown => return unauthorized(),
        Admission::NoProject { .. } => {
            let error = match &project {
                Some(name) => format!("no project '{name}' for this token"),
                None => "this token has no project granted; an admin grants one with `car team grant USER PROJECT ROLE`".to_string(),
            };
            return refuse(StatusCode::NOT_FOUND, serde_json::json!({ "error": error }));
        }
        Admission::Project {
            user,
            project,
            role,
        } => (user, project, role),
    };
    let mcp = match team.service(&project).await {
        Ok(mcp) => mcp,
        Err(e) => {
            tracing::warn!(project = %project.name, error = %e, "cannot open a team project");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": format!("cannot open project '{}': {e}", project.name)}),
            );
        }
    };
    request.extensions_mut().insert(Caller {
        author: Arc::from(user.as_str()),
        read_only: !role.writes(),
    });
    mcp.handle(request).await.into_response()
}
