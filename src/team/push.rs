//! `car team push`: a local project's memory, skills, tasks and decisions copied up to a team
//! server, through the server's own tools (so a reader's push is refused like any write, and
//! every copy is stamped with its author).
//!
//! Pushing twice doubles nothing. Each step is one tool call with a request id made from this
//! database's identity, the project and the item (`car-push/<database>/<project>/task/CTX-0003/…`);
//! the server records each keyed call's result and answers a repeated id with it instead of
//! running the call again. An interrupted push resumes where it stopped; a fact replaced
//! locally since the last push goes up as its replacement (a new id), and a task that changed
//! status since goes up with that status.
//!
//! Copied: current untenanted project entries (facts, knowledge, procedures; not global
//! preferences, not superseded history), active skills, every task with its description,
//! labels, priority, parent, dependencies and status, and every decision with its status and
//! supersession. Not copied: progress notes, checkpoints, the execution log, outcome counts.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::client::{Answer, ClientError, TeamClient, ToolFailed};
use crate::memory::{Kind, Memory};
use crate::project::decisions::DecisionStatus;
use crate::project::tasks::{Filter, TaskStatus};
use crate::project::Project;
use crate::skills::{Skills, Versions};

/// How many of one kind went up, and how many the server already had from an earlier push.
#[derive(Debug, Default, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct Count {
    /// Written to the server by this push.
    pub sent: usize,
    /// Already there from an earlier push (answered from the server's record).
    pub already: usize,
}

impl Count {
    fn add(&mut self, answer: &Answer, unchanged: bool) {
        if answer.replayed || unchanged {
            self.already += 1;
        } else {
            self.sent += 1;
        }
    }
}

/// One item the server refused, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Refused {
    /// What it was: `fact-12`, `skill deploy`, `CTX-0003`, `CTX-0003 depends on CTX-0001`, …
    pub item: String,
    /// The server's error code (`denied`, `invalid_arguments`, …).
    pub code: String,
    pub message: String,
}

/// What a push did.
#[derive(Debug, Default, Clone, Serialize, schemars::JsonSchema)]
pub struct Pushed {
    /// The server's MCP endpoint.
    pub server: String,
    pub facts: Count,
    pub knowledge: Count,
    pub procedures: Count,
    pub skills: Count,
    pub tasks: Count,
    /// Task dependencies and parents.
    pub links: Count,
    /// Task statuses, each as it was at its last change.
    pub statuses: Count,
    pub decisions: Count,
    /// Items the server refused; the rest went up.
    pub refused: Vec<Refused>,
}

/// What is pushed from.
pub struct Local<'a> {
    pub project: &'a Project,
    pub memory: Option<&'a Arc<Memory>>,
    pub skills: Option<&'a Arc<Skills>>,
}

/// Why a push stopped before the end.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("reading the local project: {0}")]
    Local(String),
    /// The token may not write this project (a reader): nothing was written.
    #[error("{0}")]
    Denied(String),
}

fn local<E: std::fmt::Display>(e: E) -> PushError {
    PushError::Local(e.to_string())
}

/// One push, reporting each step to `progress` (done, total).
pub async fn push(
    client: &TeamClient,
    from: Local<'_>,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<Pushed, PushError> {
    let database = from
        .project
        .store
        .meta("database_id")
        .map_err(local)?
        .unwrap_or_else(|| "unknown".into());
    let key = |item: &str| format!("car-push/{database}/{}/{item}", from.project.id);
    let mut pushed = Pushed {
        server: client.server().to_string(),
        ..Pushed::default()
    };

    // What there is to send, read up front so progress has a total.
    let entries = match from.memory {
        Some(memory) => {
            let mut entries = Vec::new();
            let mut after = 0;
            loop {
                let page = memory.list_entries(after, 1000).map_err(local)?;
                let Some(last) = page.last() else { break };
                after = last.seq;
                entries.extend(page.into_iter().filter(|n| n.project.is_some()));
            }
            entries
        }
        None => Vec::new(),
    };
    let skills = match from.skills {
        Some(skills) => skills.list(None, Versions::Active).map_err(local)?,
        None => Vec::new(),
    };
    let tasks = from
        .project
        .list_tasks(&Filter {
            status: Some("all".into()),
            label: None,
            claimed_by: None,
            parent: None,
            limit: 0,
        })
        .map_err(local)?;
    let mut tasks = tasks
        .iter()
        .map(|t| from.project.task_detail(&t.display_id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(local)?;
    tasks.sort_by_key(|t| t.task.id);
    let mut decisions = from
        .project
        .list_decisions(Some("all"), None, 0)
        .map_err(local)?;
    decisions.sort_by(|a, b| a.display_id.cmp(&b.display_id));
    let total = entries.len() + skills.len() + tasks.len() * 2 + decisions.len();
    let mut done = 0;
    progress(done, total);

    for entry in &entries {
        let (tool, args, count) = match entry.kind {
            Kind::Pattern | Kind::Constraint => (
                "memory_add_fact",
                json!({"subject": entry.subject, "body": entry.body, "kind": entry.kind.as_str()}),
                &mut pushed.facts,
            ),
            Kind::Knowledge | Kind::Procedural => {
                let mut args = json!({"id": entry.id, "subject": entry.subject, "body": entry.body, "tags": entry.tags});
                if let Some(confidence) = &entry.confidence {
                    args["confidence"] = json!(confidence);
                }
                if entry.kind == Kind::Knowledge {
                    ("memory_save_knowledge", args, &mut pushed.knowledge)
                } else {
                    ("memory_save_procedural", args, &mut pushed.procedures)
                }
            }
            _ => continue,
        };
        match client
            .call(tool, args, Some(&key(&format!("memory/{}", entry.id))))
            .await?
        {
            Ok(answer) => count.add(&answer, false),
            Err(failed) => refuse(&mut pushed.refused, &entry.id, failed),
        }
        done += 1;
        progress(done, total);
        if let Some(denied) = denied(&pushed) {
            return Err(denied);
        }
    }

    for skill in &skills {
        let args = json!({
            "name": skill.name,
            "code": skill.code,
            "platform": skill.platform,
            "description": skill.description,
            "persona": skill.persona,
            "url_pattern": skill.url_pattern,
            "task_keywords": skill.task_keywords,
        });
        // Re-ingesting the same content changes nothing on the server: no request id needed.
        match client.call("skill_ingest", args, None).await? {
            Ok(answer) => {
                let unchanged = answer.value["change"].as_str() == Some("unchanged");
                pushed.skills.add(&answer, unchanged)
            }
            Err(failed) => refuse(
                &mut pushed.refused,
                &format!("skill {}", skill.name),
                failed,
            ),
        }
        done += 1;
        progress(done, total);
        if let Some(denied) = denied(&pushed) {
            return Err(denied);
        }
    }

    // Tasks: each created first (the server numbers its own), then parents, dependencies and
    // statuses, which name other tasks by their server ids.
    let mut ids: HashMap<String, String> = HashMap::new();
    for detail in &tasks {
        let task = &detail.task;
        // Every value after `=` and the title after `--`: text that starts with a dash (a
        // Markdown bullet, `-Wall`) is a value, never taken for a flag.
        let mut words = vec![format!("--priority={}", task.priority)];
        if !detail.description.is_empty() {
            words.push(format!("--description={}", detail.description));
        }
        for label in &task.labels {
            words.push(format!("--label={label}"));
        }
        words.extend(["--".into(), task.title.clone()]);
        let item = &task.display_id;
        match task_call(client, "create", words, &key(&format!("task/{item}"))).await? {
            Ok(answer) => match answer.value["data"]["displayId"].as_str() {
                Some(remote) => {
                    ids.insert(item.clone(), remote.to_string());
                    pushed.tasks.add(&answer, false);
                }
                None => refuse(
                    &mut pushed.refused,
                    item,
                    ToolFailed {
                        code: "failed".into(),
                        message: format!("the server's answer has no task id: {}", answer.value),
                    },
                ),
            },
            Err(failed) => refuse(&mut pushed.refused, item, failed),
        }
        done += 1;
        progress(done, total);
        if let Some(denied) = denied(&pushed) {
            return Err(denied);
        }
    }
    for detail in &tasks {
        let task = &detail.task;
        let item = &task.display_id;
        let Some(remote) = ids.get(item) else {
            done += 1;
            continue;
        };
        let mut steps: Vec<(String, &str, Vec<String>, String)> = Vec::new();
        if let Some(parent) = task
            .parent
            .as_ref()
            .and_then(|p| ids.get(p).map(|r| (p, r)))
        {
            steps.push((
                format!("{item} is part of {}", parent.0),
                "update",
                vec![remote.clone(), format!("--parent={}", parent.1)],
                format!("task/{item}/parent/{}", parent.0),
            ));
        }
        for on in &detail.depends_on {
            if let Some(remote_on) = ids.get(&on.display_id) {
                steps.push((
                    format!("{item} depends on {}", on.display_id),
                    "dep",
                    vec!["add".into(), remote.clone(), remote_on.clone()],
                    format!("task/{item}/dep/{}", on.display_id),
                ));
            }
        }
        for (what, action, words, item_key) in steps {
            match task_call(client, action, words, &key(&item_key)).await? {
                Ok(answer) => {
                    let unchanged = answer.value["data"]["changed"].as_bool() == Some(false);
                    pushed.links.add(&answer, unchanged)
                }
                Err(failed) => refuse(&mut pushed.refused, &what, failed),
            }
        }
        // Keyed by the status and when the task last changed, so a task that moved since the
        // last push (blocked again, claimed anew) goes up as it is now. An open task is open
        // on the server when created; one reopened locally after a push stays as it was there.
        let status = match task.status {
            TaskStatus::Open | TaskStatus::Ready => None,
            TaskStatus::Done => Some(("update", vec![remote.clone(), "--status=done".into()])),
            TaskStatus::Cancelled => {
                Some(("update", vec![remote.clone(), "--status=cancelled".into()]))
            }
            TaskStatus::Blocked => Some((
                "block",
                vec![
                    remote.clone(),
                    format!(
                        "--reason={}",
                        task.blocked_reason.as_deref().unwrap_or("blocked")
                    ),
                ],
            )),
            TaskStatus::Claimed => Some((
                "claim",
                vec![
                    remote.clone(),
                    format!(
                        "--agent={}",
                        task.claimed_by.as_deref().unwrap_or("unknown")
                    ),
                ],
            )),
        };
        if let Some((action, words)) = status {
            let item_key = key(&format!(
                "task/{item}/status/{}/{}",
                task.status, task.updated_at
            ));
            match task_call(client, action, words, &item_key).await? {
                Ok(answer) => pushed.statuses.add(&answer, false),
                // Already so on the server (claimed, done): nothing to change.
                Err(failed) if failed.code == "conflict" => pushed.statuses.already += 1,
                Err(failed) => refuse(
                    &mut pushed.refused,
                    &format!("{item} {}", task.status),
                    failed,
                ),
            }
        }
        done += 1;
        progress(done, total);
        if let Some(denied) = denied(&pushed) {
            return Err(denied);
        }
    }

    let mut adrs: HashMap<String, String> = HashMap::new();
    for decision in &decisions {
        let item = &decision.display_id;
        let mut words = vec![format!("--decision={}", decision.decision)];
        for (flag, text) in [
            ("context", &decision.context),
            ("consequences", &decision.consequences),
        ] {
            if !text.is_empty() {
                words.push(format!("--{flag}={text}"));
            }
        }
        if decision.status == DecisionStatus::Proposed {
            words.push("--status=proposed".into());
        }
        if let Some(replaced) = decision.supersedes.as_ref().and_then(|s| adrs.get(s)) {
            words.push(format!("--supersedes={replaced}"));
        }
        words.extend(["--".into(), decision.title.clone()]);
        let recorded = client
            .call(
                "decision_logger",
                json!({"action": "record", "args": words}),
                Some(&key(&format!("decision/{item}"))),
            )
            .await?;
        match recorded {
            Ok(answer) => {
                if let Some(remote) = answer.value["data"]["displayId"].as_str() {
                    adrs.insert(item.clone(), remote.to_string());
                    if matches!(
                        decision.status,
                        DecisionStatus::Rejected | DecisionStatus::Deprecated
                    ) {
                        let mut words =
                            vec![remote.to_string(), format!("--status={}", decision.status)];
                        if let Some(note) = &decision.resolution {
                            words.push(format!("--note={note}"));
                        }
                        let item_key = key(&format!(
                            "decision/{item}/status/{}/{}",
                            decision.status, decision.updated_at
                        ));
                        if let Err(failed) = client
                            .call(
                                "decision_logger",
                                json!({"action": "resolve", "args": words}),
                                Some(&item_key),
                            )
                            .await?
                        {
                            refuse(
                                &mut pushed.refused,
                                &format!("{item} {}", decision.status),
                                failed,
                            );
                        }
                    }
                }
                pushed.decisions.add(&answer, false);
            }
            Err(failed) => refuse(&mut pushed.refused, item, failed),
        }
        done += 1;
        progress(done, total);
        if let Some(denied) = denied(&pushed) {
            return Err(denied);
        }
    }
    Ok(pushed)
}

async fn task_call(
    client: &TeamClient,
    action: &str,
    words: Vec<String>,
    request_id: &str,
) -> Result<Result<Answer, ToolFailed>, ClientError> {
    client
        .call(
            "task_manager",
            json!({"action": action, "args": words}),
            Some(request_id),
        )
        .await
}

/// The first refusal of a push that is refused everything: a token that may only read.
fn denied(pushed: &Pushed) -> Option<PushError> {
    let first = pushed.refused.first()?;
    let sent = pushed
        .counts()
        .iter()
        .map(|(_, c)| c.sent + c.already)
        .sum::<usize>();
    (first.code == "denied" && sent == 0).then(|| PushError::Denied(first.message.clone()))
}

fn refuse(refused: &mut Vec<Refused>, item: &str, failed: ToolFailed) {
    refused.push(Refused {
        item: item.to_string(),
        code: failed.code,
        message: failed.message,
    });
}

impl Pushed {
    /// Every count, by name, for a person.
    pub fn counts(&self) -> [(&'static str, Count); 8] {
        [
            ("facts", self.facts),
            ("knowledge", self.knowledge),
            ("procedures", self.procedures),
            ("skills", self.skills),
            ("tasks", self.tasks),
            ("task links", self.links),
            ("task statuses", self.statuses),
            ("decisions", self.decisions),
        ]
    }
}
