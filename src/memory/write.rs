//! Writing entries: ids, supersession (explicit, or the same subject within a tenant), the
//! links the engine adds as an entry arrives, and the change log other processes replay.

use crate::store::sql::{args, Dialect, Param, Sql, Value};

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

/// Inserts an entry with its supersessions and links, logging every touched node. `index`
/// is current with `tx` (refreshed inside it): what the entry replaces and which ids are taken
/// are read from it, and the rows go to the database together.
pub(super) fn insert(
    tx: &dyn Sql,
    index: &Index,
    scope: &Scope,
    entry: &NewEntry,
    links: &[PlannedLink],
) -> Result<Written> {
    let id = fresh_id(tx, index, entry)?;
    let subject_key = entry.subject.trim().to_lowercase();

    let mut superseded: Vec<String> = Vec::new();
    for target in &entry.supersedes {
        if let Some(old) = resolve(tx, scope, target)? {
            if !superseded.contains(&old) {
                superseded.push(old);
            }
        }
    }
    if entry.replace_same_subject {
        // The current facts of this scope with the same subject, oldest first (by the
        // database's index on subjects: a scan of the in-memory index would cost every write
        // a pass over every entry).
        let same = tx.query(
            "SELECT id FROM memory_nodes WHERE project_id IS ?1 AND tenant = ?2 AND subject_key = ?3
             AND superseded_by IS NULL AND kind IN ('pattern', 'constraint') ORDER BY seq",
            args![scope.project, scope.tenant, subject_key],
        )?;
        for old in same {
            let old: String = old.get(0)?;
            if !superseded.contains(&old) {
                superseded.push(old);
            }
        }
    }
    let mut depends_on = Vec::new();
    for target in &entry.depends_on {
        if let Some(dep) = resolve(tx, scope, target)? {
            depends_on.push(dep);
        }
    }

    let tags = serde_json::to_string(&entry.tags).unwrap_or_else(|_| "[]".into());
    let at = store::now();
    let vector = super::embed::embed(&format!("{} {}", entry.subject, entry.body))
        .unwrap_or_else(super::embed::Vector::zero)
        .to_bytes();
    let related: Vec<(&str, EdgeKind, f64)> = links
        .iter()
        .filter(|(target, _)| !superseded.contains(target))
        .map(|(target, weight)| (target.as_str(), EdgeKind::RelatedTo, *weight))
        .collect();
    let mut other: Vec<(&str, EdgeKind, f64)> = Vec::new();
    other.extend(
        superseded
            .iter()
            .map(|old| (old.as_str(), EdgeKind::Supersedes, 1.0)),
    );
    other.extend(
        depends_on
            .iter()
            .map(|dep| (dep.as_str(), EdgeKind::DependsOn, 1.0)),
    );
    let related = Edges::new(&id, &related);
    let other = Edges::new(&id, &other);
    let model = super::embed::model_id();
    let vector_args = args![id, model, vector];
    let change_args = args![id];
    let node_args = args![
        id,
        scope.project,
        scope.tenant,
        entry.kind.as_str(),
        entry.subject,
        subject_key,
        entry.body,
        tags,
        entry.confidence,
        entry.source,
        at
    ];
    let mut statements: Vec<(&str, &[&dyn Param])> = vec![
        (
            "INSERT INTO memory_nodes(id, project_id, tenant, kind, subject, subject_key, body, tags,
                 confidence, source, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            node_args,
        ),
        (VECTOR_UPSERT, vector_args),
        (LOG_CHANGE, change_args),
    ];
    let related_params = related.params();
    let other_params = other.params();
    if !related.is_empty() {
        statements.push((&related.sql, &related_params));
    }
    if !other.is_empty() {
        statements.push((&other.sql, &other_params));
    }
    // One round trip on a team store; `made` is what the related-to statement added.
    let counts = tx.execute_all(&statements)?;
    let made = if related.is_empty() { 0 } else { counts[3] };

    let mut invalidated = Vec::new();
    for old in &superseded {
        tx.execute_all(&[
            (
                "UPDATE memory_nodes SET superseded_by = ?1 WHERE id = ?2",
                args![id, old],
            ),
            (LOG_CHANGE, args![old]),
        ])?;
        let dependents: Vec<String> = tx
            .query(
                "SELECT src FROM memory_edges WHERE dst = ?1 AND kind = 'depends_on'",
                args![old],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<_, _>>()?;
        for dependent in dependents {
            let changed = tx.execute(
                "UPDATE memory_nodes SET invalidated_by = ?1, invalidated_note = ?2
                 WHERE id = ?3 AND invalidated_note IS NULL AND superseded_by IS NULL",
                args![
                    id,
                    format!("its premise {old} was superseded by {id}"),
                    dependent
                ],
            )?;
            if changed > 0 {
                log_change(tx, &dependent)?;
                invalidated.push(dependent);
            }
        }
    }
    Ok(Written {
        id,
        kind: entry.kind,
        subject: entry.subject.clone(),
        tenant: scope.tenant.clone(),
        global: scope.project.is_none(),
        superseded,
        invalidated,
        links: made,
        total: 0,
    })
}

/// Stores a vector, replacing one of another model.
const VECTOR_UPSERT: &str = "INSERT INTO memory_vectors(node_id, model, vector) VALUES (?1, ?2, ?3)
     ON CONFLICT(node_id) DO UPDATE SET model = excluded.model, vector = excluded.vector";
/// Logs a touched node for every index to replay.
const LOG_CHANGE: &str = "INSERT INTO memory_changes(node_id) VALUES (?1)";

/// Stores the meaning of an entry's text (subject and body), in
/// the transaction that writes it (its text joined as [`super::model::Node::text`] does). Text
/// with nothing to embed stores the zero vector (no meaning), so a backfill does not retry it.
pub(super) fn store_vector(tx: &dyn Sql, id: &str, text: &str) -> Result<()> {
    let vector = super::embed::embed(text).unwrap_or_else(super::embed::Vector::zero);
    tx.execute(
        VECTOR_UPSERT,
        args![id, super::embed::model_id(), vector.to_bytes()],
    )?;
    Ok(())
}

fn log_change(tx: &dyn Sql, id: &str) -> Result<()> {
    tx.execute(LOG_CHANGE, args![id])?;
    Ok(())
}

/// Edges from one entry, as one statement: each is added only if its target still exists
/// (another process may have deleted it), and one already there is left as it is.
struct Edges<'a> {
    src: &'a str,
    values: Vec<[Value; 3]>,
    sql: String,
}

impl<'a> Edges<'a> {
    fn new(src: &'a str, edges: &[(&str, EdgeKind, f64)]) -> Edges<'a> {
        let rows: Vec<String> = (0..edges.len())
            .map(|i| format!("(?{}, ?{}, ?{})", 3 * i + 2, 3 * i + 3, 3 * i + 4))
            .collect();
        Edges {
            src,
            values: edges
                .iter()
                .map(|(dst, kind, weight)| [dst.value(), kind.as_str().value(), weight.value()])
                .collect(),
            sql: format!(
                "INSERT OR IGNORE INTO memory_edges(src, dst, kind, weight)
                 SELECT ?1, v.column1, v.column2, CAST(v.column3 AS DOUBLE PRECISION)
                 FROM (VALUES {}) AS v
                 WHERE EXISTS (SELECT 1 FROM memory_nodes n WHERE n.id = v.column1)",
                rows.join(", ")
            ),
        }
    }

    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn params(&self) -> Vec<&dyn Param> {
        let mut params: Vec<&dyn Param> = vec![&self.src];
        params.extend(self.values.iter().flatten().map(|v| v as &dyn Param));
        params
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

/// The requested id (made unique), or `<prefix>-<n>` from the node sequence. `index` is
/// current: it knows every id taken.
fn fresh_id(tx: &dyn Sql, index: &Index, entry: &NewEntry) -> Result<String> {
    let base = match &entry.id {
        Some(id) if !id.trim().is_empty() => id.trim().to_string(),
        Some(_) | None => {
            // The next number of the node sequence, never reused after a delete on SQLite; on
            // a team store, past the project's newest node (its writers take turns).
            let next = match tx.dialect() {
                Dialect::Sqlite => tx
                    .value::<i64>(
                        "SELECT ifnull((SELECT seq FROM sqlite_sequence WHERE name = 'memory_nodes'), 0) + 1",
                        &[],
                    )?
                    .unwrap_or(1),
                Dialect::Postgres => index.nodes().map(|(_, n)| n.seq).max().unwrap_or(0) + 1,
            };
            format!("{}-{next}", entry.kind.id_prefix())
        }
    };
    let taken = |candidate: &str| index.by_id(candidate).is_some();
    if !taken(&base) {
        return Ok(base);
    }
    let mut n = 2;
    loop {
        let candidate = format!("{base}-{n}");
        if !taken(&candidate) {
            return Ok(candidate);
        }
        n += 1;
    }
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
