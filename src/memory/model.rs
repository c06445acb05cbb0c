//! The memory graph's vocabulary: node kinds, edge kinds and their activation multipliers,
//! and the scope a call sees.

use serde::{Deserialize, Serialize};

/// What a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A fact: how things are or are done.
    Pattern,
    /// A fact that is a rule to respect.
    Constraint,
    /// Proactive knowledge: requirements, policies, verified environment facts.
    Knowledge,
    /// Procedural evidence: failed attempts, fixes, gotchas.
    Procedural,
    /// One conversation turn.
    Turn,
    /// Who the user is (the Identity layer).
    Identity,
    /// The environment now (the Environment layer).
    Environment,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pattern => "pattern",
            Kind::Constraint => "constraint",
            Kind::Knowledge => "knowledge",
            Kind::Procedural => "procedural",
            Kind::Turn => "turn",
            Kind::Identity => "identity",
            Kind::Environment => "environment",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "pattern" => Kind::Pattern,
            "constraint" => Kind::Constraint,
            "knowledge" => Kind::Knowledge,
            "procedural" => Kind::Procedural,
            "turn" => Kind::Turn,
            "identity" => Kind::Identity,
            "environment" => Kind::Environment,
            _ => return None,
        })
    }

    /// Entries `memory_query` returns and proactive memory draws on.
    pub fn is_entry(self) -> bool {
        match self {
            Kind::Pattern | Kind::Constraint | Kind::Knowledge | Kind::Procedural => true,
            Kind::Turn | Kind::Identity | Kind::Environment => false,
        }
    }

    /// The prefix of generated ids.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Kind::Pattern | Kind::Constraint => "fact",
            Kind::Knowledge => "knowledge",
            Kind::Procedural => "procedural",
            Kind::Turn => "turn",
            Kind::Identity => "identity",
            Kind::Environment => "env",
        }
    }
}

/// How two nodes are linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeKind {
    RelatedTo,
    DependsOn,
    Triggers,
    Supersedes,
    TemporalNext,
}

impl EdgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::RelatedTo => "related_to",
            EdgeKind::DependsOn => "depends_on",
            EdgeKind::Triggers => "triggers",
            EdgeKind::Supersedes => "supersedes",
            EdgeKind::TemporalNext => "temporal_next",
        }
    }

    pub fn parse(text: &str) -> Option<EdgeKind> {
        Some(match text {
            "related_to" => EdgeKind::RelatedTo,
            "depends_on" => EdgeKind::DependsOn,
            "triggers" => EdgeKind::Triggers,
            "supersedes" => EdgeKind::Supersedes,
            "temporal_next" => EdgeKind::TemporalNext,
            _ => return None,
        })
    }

    /// How much activation crosses an edge of this kind.
    pub fn multiplier(self) -> f64 {
        match self {
            EdgeKind::Triggers => 0.9,
            EdgeKind::DependsOn => 0.8,
            EdgeKind::RelatedTo => 0.6,
            EdgeKind::TemporalNext => 0.5,
            EdgeKind::Supersedes => 0.3,
        }
    }

    /// Whether activation also flows from the edge's target back to its source.
    pub fn walks_backwards(self) -> bool {
        match self {
            EdgeKind::RelatedTo | EdgeKind::DependsOn | EdgeKind::Triggers => true,
            EdgeKind::Supersedes | EdgeKind::TemporalNext => false,
        }
    }
}

/// Which part of memory a call sees: its project's entries plus global ones, and only its
/// tenant's (no tenant sees only untenanted entries; tenants never mix).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    pub project: Option<i64>,
    pub tenant: String,
}

impl Scope {
    pub fn sees(&self, project: Option<i64>, tenant: &str) -> bool {
        tenant == self.tenant && (project.is_none() || project == self.project)
    }
}

/// One node as the engine holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub seq: i64,
    pub id: String,
    pub project: Option<i64>,
    pub tenant: String,
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    pub tags: Vec<String>,
    pub confidence: Option<String>,
    pub source: Option<String>,
    pub created_at: String,
    pub superseded_by: Option<String>,
    /// The entry whose arrival invalidated this one (deleting it lifts the invalidation).
    pub invalidated_by: Option<String>,
    /// Why this entry needs review, when it does.
    pub invalidated_note: Option<String>,
    pub injections: i64,
}

impl Node {
    pub fn is_current(&self) -> bool {
        self.superseded_by.is_none()
    }

    /// Still current, but derived from something that no longer holds.
    pub fn needs_review(&self) -> bool {
        self.invalidated_note.is_some()
    }

    /// The distinct terms of subject and body, sorted (for membership tests). Computed when
    /// asked, not kept: a node's terms are needed for a few nodes per query, and keeping them
    /// would make the index (and its snapshot) several times larger.
    pub fn terms(&self) -> Vec<String> {
        let mut terms = super::text::terms(&self.text());
        terms.sort_unstable();
        terms
    }

    pub fn text(&self) -> String {
        format!("{} {}", self.subject, self.body)
    }
}
