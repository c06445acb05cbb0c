//! Running a verified plan: its dependency levels one after another, the actions of a level at
//! once, preconditions checked against the state as it stands, `failure_behavior` honoured
//! (`abort` stops what has not started, `retry` calls again up to `max_retries`, `skip` lets the
//! rest go on), state writes and declared effects applied in the level's order so a run is
//! repeatable. Who runs a tool call — CAR's registry, a client's callback — is the [`Runner`]'s
//! business; what came of each action is an [`ActionOutcome`] carrying the typed error.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Action, ActionProposal, ActionType, FailureBehavior};
use crate::runtime::ToolError;

/// How long a tool call may take when its action names no `timeout_ms`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most retries an action may ask for.
pub const MAX_RETRIES: u32 = 10;

/// Runs a plan's tool calls.
pub trait Runner: Sync {
    /// Whether the call may run at all (the policy gate): a refusal is final, nothing is called.
    fn admit(&self, action: &Action, state: &Map<String, Value>) -> Result<(), ActionError>;

    /// One attempt at the call (`attempt` counts from 1), given `timeout` to answer.
    fn call(
        &self,
        action: &Action,
        attempt: u32,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, ActionError>> + Send;
}

/// Why an action did not complete.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    /// An earlier action failed with `failure_behavior = "abort"`.
    #[error("not run: action '{0}' failed and aborted the proposal")]
    Aborted(String),
    #[error("not run: its dependency '{0}' did not complete")]
    Dependency(String),
    #[error("not run: precondition failed: {0}")]
    Precondition(String),
    /// The tool answered with an error, or the gate refused it ([`ToolError::Denied`]).
    #[error(transparent)]
    Tool(ToolError),
    /// Whoever runs the tool did not answer in time.
    #[error("the callback did not answer within {} ms", .0.as_millis())]
    NoAnswer(Duration),
    /// Whoever runs the tool went away.
    #[error("the client is gone")]
    Gone,
}

impl ActionError {
    /// How the action ended because of this error.
    pub fn status(&self) -> ActionStatus {
        match self {
            ActionError::Aborted(_) | ActionError::Dependency(_) | ActionError::Precondition(_) => {
                ActionStatus::Skipped
            }
            ActionError::Tool(ToolError::Denied(_)) => ActionStatus::Denied,
            ActionError::Tool(_) | ActionError::NoAnswer(_) | ActionError::Gone => {
                ActionStatus::Failed
            }
        }
    }

    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ActionError::Aborted(_) => "aborted",
            ActionError::Dependency(_) => "dependency_failed",
            ActionError::Precondition(_) => "precondition_failed",
            ActionError::Tool(error) => error.code(),
            ActionError::NoAnswer(_) => "timeout",
            ActionError::Gone => "client_gone",
        }
    }

    /// Whether another attempt could go differently.
    fn retriable(&self) -> bool {
        !matches!(
            self,
            ActionError::Gone
                | ActionError::Tool(ToolError::Denied(_))
                | ActionError::Tool(ToolError::InvalidArguments(_))
                | ActionError::Tool(ToolError::ConfirmationRequired(_))
        )
    }
}

/// How one action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Ok,
    Failed,
    /// Not run: a precondition failed, a dependency did not complete, or the run was aborted.
    Skipped,
    /// The policy gate refused it.
    Denied,
}

/// What came of one action.
#[derive(Debug, Clone)]
pub struct ActionOutcome {
    pub action_id: String,
    pub output: Value,
    pub error: Option<ActionError>,
    /// What the action changed in the state.
    pub state_changes: Map<String, Value>,
    pub duration: Duration,
    /// Attempts at the call (retries included); 0 for actions that call nothing.
    pub attempts: u32,
}

impl ActionOutcome {
    fn new(action: &Action) -> ActionOutcome {
        ActionOutcome {
            action_id: action.id.clone(),
            output: Value::Null,
            error: None,
            state_changes: Map::new(),
            duration: Duration::ZERO,
            attempts: 0,
        }
    }

    pub fn status(&self) -> ActionStatus {
        self.error
            .as_ref()
            .map_or(ActionStatus::Ok, ActionError::status)
    }
}

/// What running a proposal cost.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    pub actions: usize,
    pub callbacks: u32,
    pub retries: u32,
    /// Levels run one after another (the critical path, in actions).
    pub levels: usize,
    pub duration_ms: u64,
}

/// Every action's outcome, in the proposal's order, and the cost.
#[derive(Debug, Clone)]
pub struct Run {
    pub outcomes: Vec<ActionOutcome>,
    pub cost: Cost,
}

/// Runs `proposal` level by level (`levels`, from [`super::verify`]) over `state`, which it
/// reads for preconditions and state reads and updates with each completed action's changes.
pub async fn execute<R: Runner>(
    proposal: &ActionProposal,
    levels: &[Vec<String>],
    state: &Mutex<Map<String, Value>>,
    runner: &R,
) -> Run {
    let started = Instant::now();
    let by_id: HashMap<&str, &Action> = proposal
        .actions
        .iter()
        .map(|a| (a.id.as_str(), a))
        .collect();
    let mut done: HashMap<String, ActionOutcome> = HashMap::new();
    let mut aborted: Option<String> = None;
    for level in levels {
        let mut running = Vec::new();
        for id in level {
            let Some(action) = by_id.get(id.as_str()).copied() else {
                continue;
            };
            match not_runnable(action, &done, aborted.as_deref(), &lock(state)) {
                Some(error) => {
                    let mut outcome = ActionOutcome::new(action);
                    outcome.error = Some(error);
                    done.insert(action.id.clone(), outcome);
                }
                None => running.push(run_action(action, state, runner)),
            }
        }
        // Apply the level's changes in the level's order.
        for outcome in futures_util::future::join_all(running).await {
            if outcome.error.is_none() {
                lock(state).extend(outcome.state_changes.clone());
            } else if aborted.is_none()
                && by_id
                    .get(outcome.action_id.as_str())
                    .is_some_and(|a| a.failure_behavior != FailureBehavior::Skip)
            {
                aborted = Some(outcome.action_id.clone());
            }
            done.insert(outcome.action_id.clone(), outcome);
        }
    }
    let outcomes: Vec<ActionOutcome> = proposal
        .actions
        .iter()
        .filter_map(|a| done.remove(&a.id))
        .collect();
    Run {
        cost: Cost {
            actions: outcomes.len(),
            callbacks: outcomes.iter().map(|o| o.attempts).sum(),
            retries: outcomes.iter().map(|o| o.attempts.saturating_sub(1)).sum(),
            levels: levels.len(),
            duration_ms: started.elapsed().as_millis() as u64,
        },
        outcomes,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why an action cannot run now, if it cannot.
fn not_runnable(
    action: &Action,
    done: &HashMap<String, ActionOutcome>,
    aborted: Option<&str>,
    state: &Map<String, Value>,
) -> Option<ActionError> {
    if let Some(failed) = aborted {
        return Some(ActionError::Aborted(failed.to_string()));
    }
    if let Some(dep) = action
        .dependencies
        .iter()
        .find(|d| done.get(d.as_str()).is_some_and(|o| o.error.is_some()))
    {
        return Some(ActionError::Dependency(dep.clone()));
    }
    action
        .preconditions
        .iter()
        .find_map(|p| p.check(state).err())
        .map(ActionError::Precondition)
}

async fn run_action<R: Runner>(
    action: &Action,
    state: &Mutex<Map<String, Value>>,
    runner: &R,
) -> ActionOutcome {
    let started = Instant::now();
    let mut outcome = ActionOutcome::new(action);
    match action.kind {
        ActionType::StateWrite => {
            if let Some(key) = action.parameters.get("key").and_then(Value::as_str) {
                let value = action
                    .parameters
                    .get("value")
                    .cloned()
                    .unwrap_or(Value::Null);
                outcome.state_changes.insert(key.to_string(), value);
            }
        }
        ActionType::StateRead => {
            let key = action
                .parameters
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default();
            outcome.output = lock(state).get(key).cloned().unwrap_or(Value::Null);
        }
        ActionType::Assertion => {}
        ActionType::ToolCall => call(action, state, runner, &mut outcome).await,
    }
    if outcome.error.is_none() {
        outcome.state_changes.extend(
            action
                .expected_effects
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    outcome.duration = started.elapsed();
    outcome
}

/// The gate, then attempts until one succeeds, an error is final or the retries run out.
async fn call<R: Runner>(
    action: &Action,
    state: &Mutex<Map<String, Value>>,
    runner: &R,
    outcome: &mut ActionOutcome,
) {
    let admitted = runner.admit(action, &lock(state));
    if let Err(refused) = admitted {
        outcome.error = Some(refused);
        return;
    }
    let attempts = match action.failure_behavior {
        FailureBehavior::Retry => 1 + action.max_retries.min(MAX_RETRIES),
        FailureBehavior::Abort | FailureBehavior::Skip => 1,
    };
    let timeout = action
        .timeout_ms
        .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis);
    for attempt in 1..=attempts {
        outcome.attempts = attempt;
        match runner.call(action, attempt, timeout).await {
            Ok(output) => {
                outcome.output = output;
                outcome.error = None;
                return;
            }
            Err(error) => {
                let last = !error.retriable();
                outcome.error = Some(error);
                if last {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails `flaky` on its first attempt, denies `forbidden`, answers the rest.
    struct Scripted {
        flaky: AtomicU32,
    }

    impl Runner for Scripted {
        fn admit(&self, action: &Action, _: &Map<String, Value>) -> Result<(), ActionError> {
            match action.tool.as_deref() {
                Some("forbidden") => Err(ActionError::Tool(ToolError::Denied("no".into()))),
                _ => Ok(()),
            }
        }

        async fn call(
            &self,
            action: &Action,
            attempt: u32,
            timeout: Duration,
        ) -> Result<Value, ActionError> {
            match action.tool.as_deref() {
                Some("flaky") if self.flaky.fetch_add(1, Ordering::SeqCst) == 0 => Err(
                    ActionError::Tool(ToolError::Failed("first attempt fails".into())),
                ),
                Some("slow") => Err(ActionError::NoAnswer(timeout)),
                Some("broken") => Err(ActionError::Tool(ToolError::Failed("broke".into()))),
                tool => Ok(json!({"tool": tool, "attempt": attempt})),
            }
        }
    }

    /// Runs `actions` in the levels `verify` finds (it must pass), or in `levels` as given.
    fn run_plan(actions: Value, levels: Option<Vec<Vec<String>>>) -> (Run, Map<String, Value>) {
        let proposal: ActionProposal =
            serde_json::from_value(json!({"id": "p", "actions": actions})).unwrap();
        let levels = levels.unwrap_or_else(|| {
            let catalog = super::super::ToolCatalog::default().with_declared(
                ["echo", "flaky", "slow", "forbidden", "broken"]
                    .iter()
                    .map(|t| (t.to_string(), json!({"type": "object"}))),
            );
            let verdict = super::super::verify(&proposal, &catalog, &Default::default());
            assert!(verdict.valid, "{:?}", verdict.issues);
            verdict.execution_levels
        });
        let state = Mutex::new(Map::new());
        let runner = Scripted {
            flaky: AtomicU32::new(0),
        };
        let run = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(execute(&proposal, &levels, &state, &runner));
        (run, state.into_inner().unwrap())
    }

    fn by_id(run: &Run) -> HashMap<&str, &ActionOutcome> {
        run.outcomes
            .iter()
            .map(|o| (o.action_id.as_str(), o))
            .collect()
    }

    #[test]
    fn levels_retries_skips_and_denials_each_end_as_the_plan_says() {
        let (run, state) = run_plan(
            json!([
                {"id": "ready", "type": "state_write", "parameters": {"key": "ready", "value": true}},
                {"id": "say", "type": "tool_call", "tool": "echo", "dependencies": ["ready"],
                 "preconditions": [{"key": "ready", "value": true}], "expected_effects": {"said": "hi"}},
                {"id": "retry", "type": "tool_call", "tool": "flaky", "dependencies": ["ready"],
                 "failure_behavior": "retry", "max_retries": 2},
                {"id": "hang", "type": "tool_call", "tool": "slow", "dependencies": ["say"],
                 "timeout_ms": 300, "failure_behavior": "skip"},
                {"id": "after", "type": "assertion", "dependencies": ["hang"]},
                {"id": "nope", "type": "tool_call", "tool": "forbidden", "dependencies": ["say"],
                 "failure_behavior": "skip"}
            ]),
            None,
        );
        let by = by_id(&run);
        assert_eq!(by["ready"].status(), ActionStatus::Ok);
        assert_eq!(by["say"].output["tool"], "echo");
        assert_eq!(state["said"], "hi", "a declared effect lands");
        assert_eq!(
            (by["retry"].status(), by["retry"].attempts),
            (ActionStatus::Ok, 2)
        );
        assert_eq!(
            by["hang"].error,
            Some(ActionError::NoAnswer(Duration::from_millis(300)))
        );
        assert_eq!(
            by["after"].error,
            Some(ActionError::Dependency("hang".into()))
        );
        assert_eq!(by["after"].status(), ActionStatus::Skipped);
        // Denied by the error's type, not its text; a denial is never retried or called.
        assert_eq!(by["nope"].status(), ActionStatus::Denied);
        assert_eq!(by["nope"].attempts, 0);
        assert_eq!(run.cost.retries, 1);
        assert_eq!(run.cost.levels, 4);
        assert!(!state.contains_key("hang"));
    }

    #[test]
    fn an_abort_stops_what_has_not_started_and_a_failed_precondition_skips() {
        let (run, state) = run_plan(
            json!([
                {"id": "first", "type": "tool_call", "tool": "broken"},
                {"id": "beside", "type": "tool_call", "tool": "echo", "expected_effects": {"x": 1}},
                {"id": "later", "type": "tool_call", "tool": "echo", "dependencies": ["beside"]},
            ]),
            None,
        );
        let by = by_id(&run);
        assert_eq!(by["first"].status(), ActionStatus::Failed);
        assert_eq!(by["first"].error.as_ref().unwrap().code(), "failed");
        assert_eq!(
            by["beside"].status(),
            ActionStatus::Ok,
            "same level, already running"
        );
        assert_eq!(state["x"], 1);
        assert_eq!(
            by["later"].error,
            Some(ActionError::Aborted("first".into()))
        );

        let (run, _) = run_plan(
            json!([
                {"id": "guarded", "type": "tool_call", "tool": "echo",
                 "preconditions": [{"key": "ready", "value": true}]}
            ]),
            Some(vec![vec!["guarded".into()]]),
        );
        assert!(matches!(
            run.outcomes[0].error,
            Some(ActionError::Precondition(_))
        ));
        assert_eq!(run.outcomes[0].attempts, 0);
    }
}
