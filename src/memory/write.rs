//! Writing entries: ids, supersession (explicit, or the same subject within a tenant), the
//! links the engine adds as an entry arrives, and the change log other processes replay.

use crate::store::sql::{args, Dialect, Param, Sql, Value};

use super::model::Node;

use super::index::Index;
use super::model::{EdgeKind, Kind, Scope};
use super::text;
use super::{MemoryError, Result};
use crate::runtime::MAX_STRING_BYTES;
use crate::store;

/// Links made when an entry arrives, to the entries that share its rarest terms.
const MAX_RELATED_LINKS: usize = 6;

/// An entry to write.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    pub tags: Vec<String>,
    pub confidence: Option<String>,
    pub source: Option<String>,
    /// A requested id; a taken id gets `-2`, `-3`, … appended.
    pub id: Option<String>,
    /// Seen from every project instead of only this one.
    pub global: bool,
    pub tenant: String,
    /// Ids or subjects this entry replaces.
    pub supersedes: Vec<String>,
    /// Ids or subjects this entry was derived from (invalidated when they are superseded).
    pub depends_on: Vec<String>,
    /// Replace the current fact with the same subject (facts only).
    pub replace_same_subject: bool,
}

impl NewEntry {
    pub fn new(kind: Kind, subject: &str, body: &str) -> NewEntry {
        NewEntry {
            kind,
            subject: subject.to_string(),
            body: body.to_string(),
            tags: Vec::new(),
            confidence: None,
            source: None,
            id: None,
            global: false,
            tenant: String::new(),
            supersedes: Vec::new(),
            depends_on: Vec::new(),
            replace_same_subject: matches!(kind, Kind::Pattern | Kind::Constraint),
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        if self.subject.trim().is_empty() && !matches!(self.kind, Kind::Turn) {
            return Err(MemoryError::Invalid("subject must not be empty".into()));
        }
        if self.body.trim().is_empty() {
            return Err(MemoryError::Invalid("body must not be empty".into()));
        }
        for (name, value) in [("subject", &self.subject), ("body", &self.body)] {
            if value.len() > MAX_STRING_BYTES {
                return Err(MemoryError::Invalid(format!(
                    "{name} is {} bytes; the limit is {MAX_STRING_BYTES} bytes (1 MiB)",
                    value.len()
                )));
            }
        }
        Ok(())
    }
}

/// What a write did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Written {
    pub id: String,
    pub kind: Kind,
    pub subject: String,
    pub tenant: String,
    pub global: bool,
    /// Entries this one retired from retrieval.
    pub superseded: Vec<String>,
    /// Entries that depended on a retired one and now need review.
    pub invalidated: Vec<String>,
    /// How many links the engine made to existing entries.
    pub links: usize,
    /// Current entries the tenant sees after the write.
    pub total: usize,
}

/// A planned RelatedTo link: target id and weight.
pub(super) type PlannedLink = (String, f64);

/// Chooses the entries a new one should link to: those sharing its rarest terms.
pub(super) fn plan_links(index: &Index, entry: &NewEntry, scope: &Scope) -> Vec<PlannedLink> {
    if !entry.kind.is_entry() {
        return Vec::new();
    }
    // Rare: in at most 1% of entries, and never more than 200 (linking stays cheap and specific).
    let rare_df = (index.live() / 100).clamp(3, 200);
    let mut shared: foldhash::HashMap<u32, f64> = foldhash::HashMap::default();
    for term in text::terms(&format!("{} {}", entry.subject, entry.body)) {
        let postings = index.postings(&term);
        if postings.is_empty() || postings.len() > rare_df {
            continue;
        }
        let idf = index.idf(postings.len());
        for &slot in postings {
            let visible = index.node(slot).is_some_and(|n| {
                n.kind.is_entry()
                    && n.is_current()
                    && scope.sees(n.project, &n.tenant)
                    && (scope.project.is_some() || n.project.is_none())
            });
            if visible {
                *shared.entry(slot).or_insert(0.0) += idf;
            }
        }
    }
    let mut ranked: Vec<(u32, f64)> = shared.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    ranked
        .into_iter()
        .take(MAX_RELATED_LINKS)
        .filter_map(|(slot, score)| {
            index
                .node(slot)
                .map(|n| (n.id.clone(), score / (score + 4.0)))
        })
        .collect()
}

/// What writing one entry takes: the statements (run later, in order, with the rest of its
/// group's, in one round trip on a team store) and what it will report. The index already
/// holds the entry when this is returned, so the group's next entries link to it, replace it
/// or take the next id as they would after a refresh.
pub(super) struct Planned {
    pub written: Written,
    pub statements: Vec<(String, Vec<Value>)>,
    /// Which of `statements` adds the related links (the rows it returns are `written.links`).
    pub related_at: Option<usize>,
    /// Which of `statements` log a change (each returns the change's number).
    pub changes_at: Vec<usize>,
}

/// What the database answers to a planned statement that the index needs: the first of an
/// entry's statements inserts its node (returning its sequence number), a change-log insert
/// returns the change's number, a related-links insert returns a row per link made.
pub(super) const NODE_AT: usize = 0;

/// Plans an entry with its supersessions and links against `index`, which is current with
/// the transaction and holds what the group planned before it (see [`Planned`]). `seq` is
/// the node's number in the sequence (its id's, unless it asks for one); `supersedes` and
/// `depends_on` are the entry's explicit targets, already resolved to ids.
pub(super) fn plan(
    index: &mut Index,
    scope: &Scope,
    entry: &NewEntry,
    seq: i64,
    supersedes: Vec<String>,
    depends_on: Vec<String>,
) -> Planned {
    let id = fresh_id(index, entry, seq);
    let subject_key = entry.subject.trim().to_lowercase();
    let mut superseded: Vec<String> = Vec::new();
    for old in supersedes {
        if !superseded.contains(&old) {
            superseded.push(old);
        }
    }
    if entry.replace_same_subject {
        // The current facts of this scope with the same subject, oldest first.
        for old in index.same_subject(scope.project, &scope.tenant, &subject_key) {
            if !superseded.contains(&old) {
                superseded.push(old);
            }
        }
    }
    let links = plan_links(index, entry, scope);
    let tags = serde_json::to_string(&entry.tags).unwrap_or_else(|_| "[]".into());
    let at = store::now();
    let related: Vec<(String, EdgeKind, f64)> = links
        .into_iter()
        .filter(|(target, _)| !superseded.contains(target))
        .map(|(target, weight)| (target, EdgeKind::RelatedTo, weight))
        .collect();
    let mut other: Vec<(String, EdgeKind, f64)> = Vec::new();
    other.extend(
        superseded
            .iter()
            .map(|old| (old.clone(), EdgeKind::Supersedes, 1.0)),
    );
    other.extend(
        depends_on
            .iter()
            .map(|dep| (dep.clone(), EdgeKind::DependsOn, 1.0)),
    );
    let mut statements: Vec<(String, Vec<Value>)> = vec![
        (
            "INSERT INTO memory_nodes(id, project_id, tenant, kind, subject, subject_key, body, tags,
                 confidence, source, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING seq"
                .into(),
            vec![
                id.value(),
                scope.project.value(),
                scope.tenant.value(),
                entry.kind.as_str().value(),
                entry.subject.value(),
                subject_key.value(),
                entry.body.value(),
                tags.value(),
                entry.confidence.value(),
                entry.source.value(),
                at.value(),
            ],
        ),
        (LOG_CHANGE.into(), vec![id.value()]),
    ];
    // The entry's meaning is embedded off the write path (`Memory`'s embedder), which logs a
    // change of its own so every index takes the vector in.
    let mut changes_at = vec![1];
    let mut related_at = None;
    if !related.is_empty() {
        related_at = Some(statements.len());
        statements.push(edges(&id, &related));
    }
    if !other.is_empty() {
        statements.push(edges(&id, &other));
    }
    let mut invalidated = Vec::new();
    for old in &superseded {
        statements.push((
            "UPDATE memory_nodes SET superseded_by = ?1 WHERE id = ?2".into(),
            vec![id.value(), old.value()],
        ));
        changes_at.push(statements.len());
        statements.push((LOG_CHANGE.into(), vec![old.value()]));
        for dependent in index.dependents(old) {
            // One this entry also replaces is not current any more: nothing to flag.
            if superseded.contains(&dependent) || invalidated.iter().any(|(d, _)| *d == dependent) {
                continue;
            }
            let note = format!("its premise {old} was superseded by {id}");
            statements.push((
                "UPDATE memory_nodes SET invalidated_by = ?1, invalidated_note = ?2
                 WHERE id = ?3 AND invalidated_note IS NULL AND superseded_by IS NULL"
                    .into(),
                vec![id.value(), note.value(), dependent.value()],
            ));
            changes_at.push(statements.len());
            statements.push((LOG_CHANGE.into(), vec![dependent.value()]));
            invalidated.push((dependent, note));
        }
    }
    let node = Node {
        seq,
        id: id.clone(),
        project: scope.project,
        tenant: scope.tenant.clone(),
        kind: entry.kind,
        subject: entry.subject.clone(),
        body: entry.body.clone(),
        tags: entry.tags.clone(),
        confidence: entry.confidence.clone(),
        source: entry.source.clone(),
        created_at: at,
        superseded_by: None,
        invalidated_by: None,
        invalidated_note: None,
        injections: 0,
    };
    let mut all_edges = related;
    all_edges.extend(other);
    index.apply_write(node, None, &all_edges, &superseded, &invalidated);
    Planned {
        written: Written {
            id,
            kind: entry.kind,
            subject: entry.subject.clone(),
            tenant: scope.tenant.clone(),
            global: scope.project.is_none(),
            superseded,
            invalidated: invalidated.into_iter().map(|(d, _)| d).collect(),
            links: 0,
            total: 0,
        },
        statements,
        related_at,
        changes_at,
    }
}

/// Logs a touched node for every index to replay.
const LOG_CHANGE: &str = "INSERT INTO memory_changes(node_id) VALUES (?1) RETURNING seq";

/// Edges from one entry, as one statement: each is added only if its target still exists
/// (another process may have deleted it), and one already there is left as it is.
fn edges(src: &str, edges: &[(String, EdgeKind, f64)]) -> (String, Vec<Value>) {
    let rows: Vec<String> = (0..edges.len())
        .map(|i| format!("(?{}, ?{}, ?{})", 3 * i + 2, 3 * i + 3, 3 * i + 4))
        .collect();
    let mut params = vec![src.value()];
    for (dst, kind, weight) in edges {
        params.extend([dst.value(), kind.as_str().value(), weight.value()]);
    }
    (
        format!(
            "INSERT OR IGNORE INTO memory_edges(src, dst, kind, weight)
             SELECT ?1, v.column1, v.column2, CAST(v.column3 AS DOUBLE PRECISION)
             FROM (VALUES {}) AS v
             WHERE EXISTS (SELECT 1 FROM memory_nodes n WHERE n.id = v.column1) RETURNING 1",
            rows.join(", ")
        ),
        params,
    )
}

/// Resolves an id, or else a subject, to a current node the scope sees.
pub(super) fn resolve(tx: &dyn Sql, scope: &Scope, target: &str) -> Result<Option<String>> {
    let by_id: Option<String> = tx.value(
        "SELECT id FROM memory_nodes WHERE id = ?1 AND tenant = ?2 AND (project_id IS NULL OR project_id IS ?3)",
        args![target, scope.tenant, scope.project],
    )?;
    if by_id.is_some() {
        return Ok(by_id);
    }
    Ok(tx.value(
        "SELECT id FROM memory_nodes WHERE subject_key = ?1 AND tenant = ?2
         AND (project_id IS NULL OR project_id IS ?3) AND superseded_by IS NULL
         ORDER BY seq DESC LIMIT 1",
        args![target.trim().to_lowercase(), scope.tenant, scope.project],
    )?)
}

/// The requested id (made unique), or `<prefix>-<seq>`. `index` knows every id taken,
/// the group's planned ones included.
fn fresh_id(index: &Index, entry: &NewEntry, seq: i64) -> String {
    let base = match &entry.id {
        Some(id) if !id.trim().is_empty() => id.trim().to_string(),
        Some(_) | None => format!("{}-{seq}", entry.kind.id_prefix()),
    };
    let taken = |candidate: &str| index.by_id(candidate).is_some();
    if !taken(&base) {
        return base;
    }
    let mut n = 2;
    loop {
        let candidate = format!("{base}-{n}");
        if !taken(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// The number the next node takes: past every node the index holds and, on SQLite, past
/// every number ever used (a deleted entry's id is never given again).
pub(super) fn next_seq(tx: &dyn Sql, index: &Index) -> Result<i64> {
    let used = match tx.dialect() {
        Dialect::Sqlite => tx
            .value::<i64>(
                "SELECT ifnull((SELECT seq FROM sqlite_sequence WHERE name = 'memory_nodes'), 0)",
                &[],
            )?
            .unwrap_or(0),
        Dialect::Postgres => 0,
    };
    Ok(used.max(index.max_seq()) + 1)
}

/// Current entries (facts, knowledge, procedural) a scope sees.
pub(super) fn count_entries(index: &Index, scope: &Scope) -> usize {
    [
        Kind::Pattern,
        Kind::Constraint,
        Kind::Knowledge,
        Kind::Procedural,
    ]
    .into_iter()
    .map(|kind| index.current_count(scope, kind))
    .sum()
}
