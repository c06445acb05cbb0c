//! Writing entries: ids, supersession (explicit, or the same subject within a tenant), the
//! links the engine adds as an entry arrives, and the change log other processes replay.

use crate::store::sql::{args, values, Dialect, Param, Sql, Value};

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

/// What writing one entry takes (sent later with the rest of its group's, in one round trip
/// on a team store; see `Pending` in the module above) and what it will report. The index
/// already holds the entry when this is returned, so the group's next entries link to it,
/// replace it or take the next id as they would after a refresh.
pub(super) struct Planned {
    pub written: Written,
    /// The node's row, in [`NODE_COLUMNS`]' order.
    pub node: Vec<Value>,
    /// Its edges: (target, kind, weight). Each is added after every node of the group, and
    /// only if its target still exists (another process may have deleted it).
    pub edges: Vec<(String, EdgeKind, f64)>,
    /// What it changes in other nodes (supersessions, invalidations), in order, after every
    /// node and edge of the group.
    pub updates: Vec<(String, Vec<Value>)>,
    /// The nodes whose change to log: its own, then each it changed.
    pub changed: Vec<String>,
}

/// The columns of a node's row that a write inserts.
pub(super) const NODE_COLUMNS: &str =
    "id, project_id, tenant, kind, subject, subject_key, body, tags, confidence, source, created_at";

/// Inserts `rows` nodes (their values in [`NODE_COLUMNS`]' order, row after row); each
/// returns its id and sequence number.
pub(super) fn insert_nodes(rows: usize) -> String {
    format!(
        "INSERT INTO memory_nodes({NODE_COLUMNS}) VALUES {} RETURNING id, seq",
        values(rows, 11)
    )
}

/// Logs `rows` changed nodes (their ids) for every index to replay; each returns its number.
pub(super) fn log_changes(rows: usize) -> String {
    format!(
        "INSERT INTO memory_changes(node_id) VALUES {} RETURNING seq",
        values(rows, 1)
    )
}

/// Adds `rows` edges (source, target, kind, weight, row after row), each only if its target
/// still exists; one already there is left as it is. Each made returns its source and kind.
pub(super) fn insert_edges(rows: usize) -> String {
    format!(
        "INSERT OR IGNORE INTO memory_edges(src, dst, kind, weight)
         SELECT v.column1, v.column2, v.column3, CAST(v.column4 AS DOUBLE PRECISION)
         FROM (VALUES {}) AS v
         WHERE EXISTS (SELECT 1 FROM memory_nodes n WHERE n.id = v.column2) RETURNING src, kind",
        values(rows, 4)
    )
}

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
    let mut edges: Vec<(String, EdgeKind, f64)> = links
        .into_iter()
        .filter(|(target, _)| !superseded.contains(target))
        .map(|(target, weight)| (target, EdgeKind::RelatedTo, weight))
        .collect();
    edges.extend(
        superseded
            .iter()
            .map(|old| (old.clone(), EdgeKind::Supersedes, 1.0)),
    );
    edges.extend(
        depends_on
            .iter()
            .map(|dep| (dep.clone(), EdgeKind::DependsOn, 1.0)),
    );
    let node = vec![
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
    ];
    // The entry's meaning is embedded off the write path (`Memory`'s embedder), which logs a
    // change of its own so every index takes the vector in.
    let mut changed = vec![id.clone()];
    let mut updates = Vec::new();
    let mut invalidated = Vec::new();
    for old in &superseded {
        updates.push((
            "UPDATE memory_nodes SET superseded_by = ?1 WHERE id = ?2".into(),
            vec![id.value(), old.value()],
        ));
        changed.push(old.clone());
        for dependent in index.dependents(old) {
            // One this entry also replaces is not current any more: nothing to flag.
            if superseded.contains(&dependent) || invalidated.iter().any(|(d, _)| *d == dependent) {
                continue;
            }
            let note = format!("its premise {old} was superseded by {id}");
            updates.push((
                "UPDATE memory_nodes SET invalidated_by = ?1, invalidated_note = ?2
                 WHERE id = ?3 AND invalidated_note IS NULL AND superseded_by IS NULL"
                    .into(),
                vec![id.value(), note.value(), dependent.value()],
            ));
            changed.push(dependent.clone());
            invalidated.push((dependent, note));
        }
    }
    let node_row = Node {
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
    index.apply_write(node_row, None, &edges, &superseded, &invalidated);
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
        node,
        edges,
        updates,
        changed,
    }
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
