//! Proactive memory: `intervene` chooses at most one grounded reminder for the agent's next
//! step (or stays silent and says why), and `evaluate` scores that policy against
//! always-inject, passive-retrieval and no-memory baselines on labelled cases.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::index::Index;
use super::model::{Kind, Scope};
use super::retrieve::{self, Filter, Hit};
use super::{Memory, Result};

/// A reminder is injected only for an entry at least this grounded in the request (the share
/// of the request's term weight it matches, see `retrieve::grounding`). Calibrated on labelled
/// requests (`cargo bench --bench recall` prints the sweep): the lowest threshold at which
/// precision reaches 0.9 on the calibration set.
pub const MIN_GROUNDING: f64 = 0.35;

/// What just happened that may warrant a reminder.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct Trigger {
    /// Failed attempts in a row; 2 or more fires.
    #[arg(long, default_value_t = 0)]
    pub repeated_failures: u32,
    /// The last tool call failed.
    #[arg(long)]
    pub tool_error: bool,
    /// The agent said it is unsure.
    #[arg(long = "uncertain")]
    pub explicit_uncertainty: bool,
    /// The next step is risky (deploy, delete, migrate).
    #[arg(long = "high-risk")]
    pub high_risk_action: bool,
    /// The work moved to another area.
    #[arg(long)]
    pub context_shift: bool,
}

impl Trigger {
    /// The names of the triggers that fired.
    pub fn fired(&self) -> Vec<&'static str> {
        let mut fired = Vec::new();
        if self.repeated_failures >= 2 {
            fired.push("repeated_failures");
        }
        if self.tool_error {
            fired.push("tool_error");
        }
        if self.explicit_uncertainty {
            fired.push("explicit_uncertainty");
        }
        if self.high_risk_action {
            fired.push("high_risk_action");
        }
        if self.context_shift {
            fired.push("context_shift");
        }
        fired
    }

    fn favours_procedures(&self) -> bool {
        self.tool_error || self.repeated_failures >= 2
    }
}

/// An `intervene` request (`memory_intervene`'s arguments, `car memory intervene`'s flags).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct InterveneRequest {
    /// What the agent is about to do or asking about.
    #[schemars(with = "String")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[arg(long)]
    pub query: Option<String>,
    /// Recent messages or tool output.
    #[arg(long)]
    pub recent: Vec<String>,
    #[command(flatten)]
    pub trigger: Trigger,
    /// Consider a reminder even when no trigger fired.
    #[arg(long)]
    pub force: bool,
    /// How many candidates to consider (and list).
    #[schemars(range(min = 1, max = 32))]
    #[arg(long, default_value_t = MAX_CANDIDATES)]
    pub max_candidates: usize,
    /// Isolates entries inside the project: a tenant sees only its own entries, and calls without a tenant see only untenanted ones.
    #[schemars(with = "String")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenant_id: Option<String>,
}

/// How many candidates an intervene request considers unless it says.
pub const MAX_CANDIDATES: usize = 8;

impl Default for InterveneRequest {
    fn default() -> Self {
        InterveneRequest {
            query: None,
            recent: Vec::new(),
            trigger: Trigger::default(),
            force: false,
            max_candidates: MAX_CANDIDATES,
            tenant_id: None,
        }
    }
}

/// A labelled evaluation case.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluationCase {
    pub id: String,
    pub request: InterveneRequest,
    /// Entries a reminder should show for this request; empty when none concerns it.
    #[serde(default)]
    pub relevant_fact_ids: Vec<String>,
}

/// Whether `intervene` reminds the agent of something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Choice {
    Inject,
    Silent,
}

/// An entry `intervene` considered.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CandidateView {
    pub id: String,
    pub subject: String,
    pub kind: Kind,
    /// Retrieval activation, weighted by the trigger.
    pub activation: f64,
    /// The share of the request's term weight this entry matches, in [0, 1]; a reminder needs
    /// at least `min_grounding`.
    pub grounding: f64,
}

/// The entry a reminder shows.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Selected {
    pub id: String,
    pub subject: String,
    pub body: String,
    pub kind: Kind,
    pub activation: f64,
    /// Times this entry has been injected, this one included.
    pub injections: i64,
}

/// How many current entries of each kind the request could draw on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Bank {
    pub knowledge: usize,
    pub procedural: usize,
    pub facts: usize,
    pub constraints: usize,
}

/// What `intervene` decided.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Intervention {
    pub decision: Choice,
    /// Why it stayed silent (absent on inject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The text to show the agent (absent when silent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<Selected>,
    /// The entries considered, best first.
    pub candidates: Vec<CandidateView>,
    pub bank: Bank,
}

/// One mode's figures over the cases.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ModeFigures {
    /// Cases where the mode showed something.
    pub interventions: usize,
    pub true_positives: usize,
    pub false_positives: usize,
    pub false_negatives: usize,
    pub precision: f64,
    pub recall: f64,
    /// Interventions over cases.
    pub interruption_rate: f64,
    /// Entries shown per case.
    pub avg_candidates_exposed: f64,
}

/// Selective intervention against the three baselines.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Evaluation {
    pub cases: usize,
    pub selective: ModeFigures,
    /// The top candidate, every time.
    pub always_inject: ModeFigures,
    /// Every candidate, every time.
    pub passive_retrieval: ModeFigures,
    pub no_memory: ModeFigures,
}

struct Candidate {
    id: String,
    subject: String,
    body: String,
    kind: Kind,
    injections: i64,
    score: f64,
    grounding: f64,
}

struct Decision {
    chosen: Option<usize>,
    reason: Option<String>,
    candidates: Vec<Candidate>,
}

fn decide(index: &Index, scope: &Scope, request: &InterveneRequest) -> Decision {
    let mut text = request.query.clone().unwrap_or_default();
    for line in &request.recent {
        text.push(' ');
        text.push_str(line);
    }
    let kinds = [
        Kind::Knowledge,
        Kind::Procedural,
        Kind::Constraint,
        Kind::Pattern,
    ];
    let filter = Filter {
        scope,
        kinds: &kinds,
    };
    let k = request.max_candidates.clamp(1, 32);
    let hits: Vec<Hit> = retrieve::lexical(index, &text, &filter, k);
    let mut candidates: Vec<Candidate> = hits
        .iter()
        .filter_map(|hit| {
            let node = index.node(hit.slot)?;
            let mut score = hit.activation;
            if node.kind == Kind::Procedural && request.trigger.favours_procedures() {
                score *= 1.5;
            }
            if node.kind == Kind::Constraint && request.trigger.high_risk_action {
                score *= 1.3;
            }
            Some(Candidate {
                id: node.id.clone(),
                subject: node.subject.clone(),
                body: node.body.clone(),
                kind: node.kind,
                injections: node.injections,
                score: (score * 10_000.0).round() / 10_000.0,
                grounding: (retrieve::grounding(index, &text, node) * 10_000.0).round() / 10_000.0,
            })
        })
        .collect();
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let fired = request.trigger.fired();
    if fired.is_empty() && !request.force {
        return Decision {
            chosen: None,
            reason: Some("no trigger fired (repeated_failures >= 2, tool_error, explicit_uncertainty, high_risk_action, context_shift) and force is false".into()),
            candidates,
        };
    }
    match candidates.iter().position(|c| c.grounding >= MIN_GROUNDING) {
        Some(i) => Decision {
            chosen: Some(i),
            reason: None,
            candidates,
        },
        None => Decision {
            chosen: None,
            reason: Some(if candidates.is_empty() {
                "no remembered entry matches the request".into()
            } else {
                format!(
                    "no entry is about this request: the best matches {:.0}% of its terms' weight, a reminder needs {:.0}%",
                    candidates.iter().map(|c| c.grounding).fold(0.0, f64::max) * 100.0,
                    MIN_GROUNDING * 100.0
                )
            }),
            candidates,
        },
    }
}

fn candidate_view(c: &Candidate) -> CandidateView {
    CandidateView {
        id: c.id.clone(),
        subject: c.subject.clone(),
        kind: c.kind,
        activation: c.score,
        grounding: c.grounding,
    }
}

fn bank(index: &Index, scope: &Scope) -> Bank {
    Bank {
        knowledge: index.current_count(scope, Kind::Knowledge),
        procedural: index.current_count(scope, Kind::Procedural),
        facts: index.current_count(scope, Kind::Pattern),
        constraints: index.current_count(scope, Kind::Constraint),
    }
}

/// One entry a prompt's reminders show: grounded in the prompt (at least [`MIN_GROUNDING`] of
/// its terms' weight), with what tied the two.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Reminder {
    pub id: String,
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    /// The share of the prompt's term weight the entry matches, in [0, 1].
    pub grounding: f64,
    pub why: super::Why,
}

/// A later reminder must score at least this share of the first one's activation: a second
/// entry shows only when it is nearly as much about the prompt, not merely grounded.
pub const NEXT_REMINDER: f64 = 0.6;

/// The longest prompt text reminders read (a pasted log or file is mostly not the question).
pub const PROMPT_CHARS: usize = 2_000;

impl Memory {
    /// The reminders for a prompt the user just sent: the selective `intervene` decision over
    /// it (a prompt is itself the trigger), keeping up to `max` grounded entries not in
    /// `exclude` (what this session was already shown). Usually none: an entry shows only when
    /// the prompt is about it. Nothing is counted here: the caller counts what it really
    /// showed with [`Memory::count_injections`] (it may withhold some).
    pub fn remind(&self, prompt: &str, max: usize, exclude: &[String]) -> Result<Vec<Reminder>> {
        let prompt: String = prompt.chars().take(PROMPT_CHARS).collect();
        let request = InterveneRequest {
            query: Some(prompt.clone()),
            force: true,
            ..InterveneRequest::default()
        };
        let scope = self.scope("");
        let reminders = self.read(|index| {
            let decision = decide(index, &scope, &request);
            let asked = retrieve::Asked::new(index, &prompt);
            let best = decision
                .candidates
                .iter()
                .find(|c| c.grounding >= MIN_GROUNDING)
                .map(|c| c.score);
            decision
                .candidates
                .iter()
                .filter(|c| {
                    c.grounding >= MIN_GROUNDING
                        && best.is_some_and(|best| c.score >= best * NEXT_REMINDER)
                        && !exclude.contains(&c.id)
                })
                .take(max)
                .filter_map(|c| {
                    let node = index.by_id(&c.id)?;
                    Some(Reminder {
                        id: c.id.clone(),
                        kind: c.kind,
                        subject: c.subject.clone(),
                        body: c.body.clone(),
                        grounding: c.grounding,
                        why: super::Why {
                            matched: retrieve::matched_terms(index, &asked, node),
                            meaning: None,
                            via: None,
                        },
                    })
                })
                .collect::<Vec<_>>()
        })?;
        Ok(reminders)
    }

    /// Chooses at most one grounded reminder, counting its injection.
    pub fn intervene(&self, request: &InterveneRequest) -> Result<Intervention> {
        let scope = self.scope(request.tenant_id.as_deref().unwrap_or(""));
        let (decision, bank) =
            self.read(|index| (decide(index, &scope, request), bank(index, &scope)))?;
        let candidates = decision.candidates.iter().map(candidate_view).collect();
        let Some(chosen) = decision.chosen.map(|i| &decision.candidates[i]) else {
            return Ok(Intervention {
                decision: Choice::Silent,
                reason: decision.reason,
                reminder: None,
                selected: None,
                candidates,
                bank,
            });
        };
        let injections = self.bump_injections(&chosen.id)?;
        Ok(Intervention {
            decision: Choice::Inject,
            reason: None,
            reminder: Some(format!(
                "Reminder from memory ({} {}): {} — {}",
                chosen.kind.as_str(),
                chosen.id,
                chosen.subject,
                chosen.body
            )),
            selected: Some(Selected {
                id: chosen.id.clone(),
                subject: chosen.subject.clone(),
                body: chosen.body.clone(),
                kind: chosen.kind,
                activation: chosen.score,
                injections: injections.max(chosen.injections + 1),
            }),
            candidates,
            bank,
        })
    }

    /// Scores selective intervention against the three baselines; changes nothing.
    pub fn evaluate(
        &self,
        cases: &[EvaluationCase],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Evaluation>> {
        #[derive(Default)]
        struct Tally {
            interventions: usize,
            tp: usize,
            fp: usize,
            fn_: usize,
            exposed: usize,
        }
        let mut modes: [Tally; 4] = Default::default();
        for case in cases {
            if cancelled() {
                return Ok(None);
            }
            let scope = self.scope(case.request.tenant_id.as_deref().unwrap_or(""));
            let decision = self.read(|index| decide(index, &scope, &case.request))?;
            let relevant = |id: &str| case.relevant_fact_ids.iter().any(|r| r == id);
            let has_relevant = !case.relevant_fact_ids.is_empty();
            let top = decision.candidates.first().map(|c| c.id.as_str());
            let selective = decision.chosen.map(|i| decision.candidates[i].id.as_str());
            let passive: Vec<&str> = decision.candidates.iter().map(|c| c.id.as_str()).collect();
            let shown: [Vec<&str>; 4] = [
                selective.into_iter().collect(),
                top.into_iter().collect(),
                passive,
                Vec::new(),
            ];
            for (tally, ids) in modes.iter_mut().zip(shown.iter()) {
                tally.exposed += ids.len();
                if ids.is_empty() {
                    if has_relevant {
                        tally.fn_ += 1;
                    }
                    continue;
                }
                tally.interventions += 1;
                if ids.iter().any(|id| relevant(id)) {
                    tally.tp += 1;
                } else {
                    tally.fp += 1;
                    if has_relevant {
                        tally.fn_ += 1;
                    }
                }
            }
        }
        let n = cases.len().max(1) as f64;
        let ratio = |a: usize, b: usize| {
            if b == 0 {
                0.0
            } else {
                round(a as f64 / b as f64)
            }
        };
        let summary = |t: &Tally| ModeFigures {
            interventions: t.interventions,
            true_positives: t.tp,
            false_positives: t.fp,
            false_negatives: t.fn_,
            precision: ratio(t.tp, t.tp + t.fp),
            recall: ratio(t.tp, t.tp + t.fn_),
            interruption_rate: round(t.interventions as f64 / n),
            avg_candidates_exposed: round(t.exposed as f64 / n),
        };
        Ok(Some(Evaluation {
            cases: cases.len(),
            selective: summary(&modes[0]),
            always_inject: summary(&modes[1]),
            passive_retrieval: summary(&modes[2]),
            no_memory: summary(&modes[3]),
        }))
    }
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
