//! The in-memory view of the graph that retrieval walks. Each process builds it once from the
//! database and then replays `memory_changes` past the last sequence it saw, so a query costs
//! one indexed lookup to stay current with every other writer, never a reload of the graph.

use std::collections::BTreeSet;
use std::path::Path;

// A fast non-cryptographic hash: the keys are our own terms and ids, not attacker-chosen.
use foldhash::HashMap;

use serde::{Deserialize, Serialize};

use super::embed::{self, Vector};
use super::model::{EdgeKind, Kind, Node};
use super::text;
use crate::store::{
    self,
    sql::{self, Row, Sql},
};

/// A link as seen from one end.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Link {
    pub other: u32,
    pub kind: EdgeKind,
    pub weight: f64,
}

/// What retrieval's filter needs of a slot, packed so a check never touches the full node.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SlotMeta {
    pub kind: Kind,
    pub current: bool,
    pub project: Option<i64>,
    /// The tenant, interned (see [`Index::tenant_id`]).
    pub tenant: u32,
    /// How many distinct terms it has (its length, for BM25's norm).
    pub terms: u32,
    /// Derived from a premise that was superseded ([`Node::needs_review`]).
    pub stale: bool,
}

/// Nodes, postings and adjacency, addressed by dense slot numbers.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Index {
    meta: Vec<Option<SlotMeta>>,
    /// Per slot, the sorted hashes of the term pairs it writes side by side ([`pair_hash`]):
    /// a phrase check reads these few bytes instead of the entry's text.
    pairs: Vec<Box<[u64]>>,
    tenants: HashMap<String, u32>,
    /// Each distinct term's stem, computed once.
    stems: HashMap<String, String>,
    /// Indexed terms with a letter in them, sorted: what substring seeds scan (numbers and ids
    /// like `81819` would only slow the scan down and never make a useful fragment match).
    words: std::collections::BTreeSet<String>,
    last_change: i64,
    loaded: bool,
    /// The change the snapshot on disk was taken at (0: none), so a process knows when writing
    /// a fresh one is worth it.
    #[serde(skip)]
    snapshot_at: i64,
    slots: Vec<Option<Node>>,
    by_id: HashMap<String, u32>,
    postings: HashMap<String, Postings>,
    stem_postings: HashMap<String, Postings>,
    out: Vec<Vec<Link>>,
    inc: Vec<Vec<Link>>,
    live: usize,
    /// Terms posted over all live nodes (for the average entry length).
    posted_terms: usize,
    /// Current nodes per (project, tenant, kind), so counts never scan the graph.
    current: HashMap<(Option<i64>, String, Kind), usize>,
    /// The facts with each subject, per (project, tenant, lowercased subject): what a new fact
    /// replaces, found without a query.
    subjects: HashMap<(Option<i64>, String, String), Vec<u32>>,
    /// The highest node sequence number held.
    max_seq: i64,
    /// Each slot's meaning ([`Vector`]), flat so a scan reads one array: `embed::dims()` values
    /// from `slot × dims`, and its scale (0: the slot has none).
    vector_values: Vec<i8>,
    vector_scales: Vec<f32>,
}

/// How many changed nodes one refresh statement reads.
const REFRESH_CHUNK: usize = 500;

/// `?first, ?first+1, …` for `n` parameters.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A node's columns and its stored vector's (model, vector), from `NODES`.
const NODE_COLUMNS: &str = "seq, id, project_id, tenant, kind, subject, body, tags, confidence,
    source, created_at, superseded_by, invalidated_by, injections, invalidated_note, v.model, v.vector";
const NODES: &str = "memory_nodes LEFT JOIN memory_vectors v ON v.node_id = memory_nodes.id";

/// A node and its stored vector, when that is of this build's model.
fn read_row(row: &Row) -> store::Result<(Node, Option<Vector>)> {
    let model: Option<String> = row.get(15)?;
    let vector = match model {
        Some(model) if model == embed::model_id() => {
            let bytes: Vec<u8> = row.get(16)?;
            Vector::from_bytes(&bytes)
        }
        _ => None,
    };
    Ok((read_node(row)?, vector))
}

fn read_node(row: &Row) -> store::Result<Node> {
    let subject: String = row.get(5)?;
    let body: String = row.get(6)?;
    let kind: String = row.get(4)?;
    let tags: String = row.get(7)?;
    Ok(Node {
        seq: row.get(0)?,
        id: row.get(1)?,
        project: row.get(2)?,
        tenant: row.get(3)?,
        kind: Kind::parse(&kind).unwrap_or(Kind::Pattern),
        subject,
        body,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        confidence: row.get(8)?,
        source: row.get(9)?,
        created_at: row.get(10)?,
        superseded_by: row.get(11)?,
        invalidated_by: row.get(12)?,
        invalidated_note: row.get(14)?,
        injections: row.get(13)?,
    })
}

impl Index {
    /// Brings the index up to date with the database.
    /// The newest change any writer has made.
    pub fn head(conn: &dyn Sql) -> store::Result<i64> {
        store::memory_head(conn)
    }

    /// Built from the database (or a snapshot of it) at least once.
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Loaded and caught up with `head`: nothing to refresh.
    pub fn is_current(&self, head: i64) -> bool {
        self.loaded && head <= self.last_change
    }

    pub fn refresh(&mut self, conn: &dyn Sql) -> store::Result<()> {
        if !self.loaded {
            return self.load_all(conn);
        }
        // Every change past the last one replayed, in one statement (a consistent snapshot of
        // the log: writers of a project commit their changes in the order they number them).
        let mut changed = BTreeSet::new();
        let mut head = self.last_change;
        conn.for_each(
            "SELECT seq, node_id FROM memory_changes WHERE seq > ?1 ORDER BY seq",
            sql::args![self.last_change],
            &mut |row| {
                head = head.max(row.get(0)?);
                changed.insert(row.get::<String>(1)?);
                Ok(())
            },
        )?;
        if changed.is_empty() {
            return Ok(());
        }
        self.reload(conn, changed.into_iter().collect())?;
        self.last_change = head;
        Ok(())
    }

    /// The last change the index took in.
    pub fn last_change(&self) -> i64 {
        self.last_change
    }

    /// Reads the nodes `changed` (and their links) again as the database has them: a node it
    /// no longer has leaves the index. Also what undoes a write planned into the index that
    /// the database never took.
    pub fn reload(&mut self, conn: &dyn Sql, changed: Vec<String>) -> store::Result<()> {
        for ids in changed.chunks(REFRESH_CHUNK) {
            // Nodes first, so edges between two changed nodes find both ends.
            let list = placeholders(1, ids.len());
            let params: Vec<&dyn sql::Param> = ids.iter().map(|id| id as &dyn sql::Param).collect();
            let mut found: HashMap<String, (Node, Option<Vector>)> = HashMap::default();
            conn.for_each_planned(
                &format!("SELECT {NODE_COLUMNS} FROM {NODES} WHERE memory_nodes.id IN ({list})"),
                &params,
                &mut |row| {
                    let (node, vector) = read_row(&row)?;
                    found.insert(node.id.clone(), (node, vector));
                    Ok(())
                },
            )?;
            for id in ids {
                match found.remove(id) {
                    Some((node, vector)) => self.upsert(node, vector),
                    None => self.remove(id),
                }
            }
        }
        for ids in changed.chunks(REFRESH_CHUNK) {
            let present: Vec<&String> = ids
                .iter()
                .filter(|id| self.by_id.contains_key(*id))
                .collect();
            if present.is_empty() {
                continue;
            }
            for id in &present {
                if let Some(&slot) = self.by_id.get(*id) {
                    self.unlink(slot);
                }
            }
            let list = placeholders(1, present.len());
            let params: Vec<&dyn sql::Param> =
                present.iter().map(|id| *id as &dyn sql::Param).collect();
            let mut edges = Vec::new();
            conn.for_each_planned(
                &format!(
                    "SELECT src, dst, kind, weight FROM memory_edges WHERE src IN ({list})
                     UNION ALL SELECT src, dst, kind, weight FROM memory_edges
                     WHERE dst IN ({list}) AND src NOT IN ({list})"
                ),
                &params,
                &mut |r| {
                    edges.push((
                        r.get::<String>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.get::<f64>(3)?,
                    ));
                    Ok(())
                },
            )?;
            for (src, dst, kind, weight) in edges {
                self.link(&src, &dst, &kind, weight);
            }
        }
        Ok(())
    }

    /// Loads the snapshot at `path` if it is of this build's format and of this database (the
    /// change it was taken at is still in the log, under the same node): a fresh process then
    /// replays only the changes since instead of reading and tokenizing every entry. Anything
    /// else (no file, another format, another or a rebuilt database) is `None`, and the caller
    /// loads from the database.
    pub fn load_snapshot(path: &Path, conn: &dyn Sql) -> Option<Index> {
        let bytes = std::fs::read(path).ok()?;
        let snapshot: Snapshot = postcard::from_bytes(&bytes).ok()?;
        if snapshot.format != SNAPSHOT_FORMAT
            || snapshot.version != env!("CARGO_PKG_VERSION")
            || snapshot.tokenizer != tokenizer_fingerprint()
        {
            return None;
        }
        if Some(snapshot.database) != database_id(conn) {
            return None;
        }
        let mut index = snapshot.index;
        let n = index.slots.len();
        let consistent = index.loaded
            && [
                index.meta.len(),
                index.pairs.len(),
                index.out.len(),
                index.inc.len(),
                index.vector_scales.len(),
            ]
            .iter()
            .all(|&len| len == n)
            && index.vector_values.len() == n * embed::dims();
        let at = node_at(conn, index.last_change).ok()?;
        if !consistent || at != snapshot.last_node {
            return None;
        }
        index.snapshot_at = index.last_change;
        Some(index)
    }

    /// Whether enough changed since the snapshot on disk (or there is none) that writing one
    /// pays: the index is loaded, large enough that rebuilding it is slow
    /// ([`SNAPSHOT_MIN_LIVE`]), and an eighth of it (at least 256 changes) is new.
    pub fn wants_snapshot(&self) -> bool {
        self.loaded
            && self.live >= SNAPSHOT_MIN_LIVE
            && (self.snapshot_at == 0
                || self.last_change - self.snapshot_at >= (self.live as i64 / 8).max(256))
    }

    /// Writes the snapshot (atomically: a reader sees the old file or the new one).
    pub fn save_snapshot(&mut self, path: &Path, conn: &dyn Sql) -> std::io::Result<()> {
        let last_node = node_at(conn, self.last_change).map_err(std::io::Error::other)?;
        let database = database_id(conn)
            .ok_or_else(|| std::io::Error::other("the database has no database_id"))?;
        let bytes = postcard::to_stdvec(&SnapshotRef {
            format: SNAPSHOT_FORMAT,
            version: env!("CARGO_PKG_VERSION"),
            tokenizer: tokenizer_fingerprint(),
            database: &database,
            last_node,
            index: self,
        })
        .map_err(std::io::Error::other)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        remove_stale_temporaries(dir);
        let mut file = tempfile::Builder::new()
            .prefix(SNAPSHOT_TEMP_PREFIX)
            .tempfile_in(dir)?;
        std::io::Write::write_all(&mut file, &bytes)?;
        file.persist(path).map_err(|e| e.error)?;
        self.snapshot_at = self.last_change;
        Ok(())
    }

    /// Builds the index from every row; `conn` must read one snapshot of the data (a
    /// transaction), or the head could be older than the rows.
    fn load_all(&mut self, conn: &dyn Sql) -> store::Result<()> {
        let head = store::memory_head(conn)?;
        conn.for_each(
            &format!("SELECT {NODE_COLUMNS} FROM {NODES} ORDER BY seq"),
            &[],
            &mut |row| {
                let (node, vector) = read_row(&row)?;
                self.upsert(node, vector);
                Ok(())
            },
        )?;
        conn.for_each(
            "SELECT src, dst, kind, weight FROM memory_edges",
            &[],
            &mut |r| {
                let (src, dst, kind): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                self.link(&src, &dst, &kind, r.get(3)?);
                Ok(())
            },
        )?;
        self.last_change = head;
        self.loaded = true;
        Ok(())
    }

    fn link(&mut self, src: &str, dst: &str, kind: &str, weight: f64) {
        let (Some(&a), Some(&b), Some(kind)) = (
            self.by_id.get(src),
            self.by_id.get(dst),
            EdgeKind::parse(kind),
        ) else {
            return;
        };
        self.out[a as usize].push(Link {
            other: b,
            kind,
            weight,
        });
        self.inc[b as usize].push(Link {
            other: a,
            kind,
            weight,
        });
    }

    fn unlink(&mut self, slot: u32) {
        let out = std::mem::take(&mut self.out[slot as usize]);
        for link in out {
            self.inc[link.other as usize].retain(|l| l.other != slot);
        }
        let inc = std::mem::take(&mut self.inc[slot as usize]);
        for link in inc {
            self.out[link.other as usize].retain(|l| l.other != slot);
        }
    }

    fn tally(&mut self, node: &Node, delta: isize) {
        if node.is_current() {
            let key = (node.project, node.tenant.clone(), node.kind);
            let count = self.current.entry(key).or_insert(0);
            *count = count.saturating_add_signed(delta);
        }
    }

    fn slot_meta(&mut self, node: &Node, terms: usize) -> SlotMeta {
        let next = self.tenants.len() as u32;
        let tenant = *self.tenants.entry(node.tenant.clone()).or_insert(next);
        SlotMeta {
            kind: node.kind,
            current: node.is_current(),
            project: node.project,
            tenant,
            terms: terms as u32,
            stale: node.needs_review(),
        }
    }

    fn stem_of(&mut self, term: &str) -> String {
        if let Some(stem) = self.stems.get(term) {
            return stem.clone();
        }
        let stem = text::stem(term);
        self.stems.insert(term.to_string(), stem.clone());
        stem
    }

    /// Adds or replaces a node with its stored vector, if it has one yet.
    fn upsert(&mut self, node: Node, vector: Option<Vector>) {
        self.tally(&node, 1);
        self.max_seq = self.max_seq.max(node.seq);
        let terms = node.terms();
        let meta = self.slot_meta(&node, terms.len());
        if let Some(&slot) = self.by_id.get(&node.id) {
            if let Some(old) = self.slots[slot as usize].take() {
                self.tally(&old, -1);
                self.slots[slot as usize] = Some(old);
            }
            let same_text = self.slots[slot as usize]
                .as_ref()
                .is_some_and(|old| old.terms() == terms);
            if !same_text {
                self.unpost(slot);
                self.post(slot, &terms);
            }
            // A vector comes with the row once the embedder has stored it; until then the
            // entry is found by its words alone (a changed text's old meaning is dropped).
            if !same_text || vector.is_some() {
                self.set_vector(slot, vector);
            }
            self.pairs[slot as usize] = pairs_of(&node);
            self.slots[slot as usize] = Some(node);
            self.meta[slot as usize] = Some(meta);
            return;
        }
        let slot = self.slots.len() as u32;
        self.post(slot, &terms);
        self.by_id.insert(node.id.clone(), slot);
        if matches!(node.kind, Kind::Pattern | Kind::Constraint) {
            self.subjects
                .entry(subject_key(&node))
                .or_default()
                .push(slot);
        }
        self.pairs.push(pairs_of(&node));
        self.slots.push(Some(node));
        self.meta.push(Some(meta));
        self.out.push(Vec::new());
        self.inc.push(Vec::new());
        self.vector_scales.push(0.0);
        self.vector_values
            .resize(self.vector_scales.len() * embed::dims(), 0);
        self.set_vector(slot, vector);
        self.live += 1;
    }

    /// Takes in an entry a writer is about to store, before it is stored: the node (with the
    /// sequence number it is planned under), its meaning, its edges, the entries it replaces
    /// and those it flags for review (id, note). The refresh at the end of the write brings
    /// in what the database made of it (its sequence number), and a failed write rebuilds
    /// the index.
    pub fn apply_write(
        &mut self,
        node: Node,
        vector: Option<Vector>,
        edges: &[(String, EdgeKind, f64)],
        superseded: &[String],
        invalidated: &[(String, String)],
    ) {
        let id = node.id.clone();
        self.upsert(node, vector);
        for (dst, kind, weight) in edges {
            self.link(&id, dst, kind.as_str(), *weight);
        }
        for old in superseded {
            if let Some(mut node) = self.by_id(old).cloned() {
                node.superseded_by = Some(id.clone());
                self.upsert(node, None);
            }
        }
        for (dependent, note) in invalidated {
            if let Some(mut node) = self.by_id(dependent).cloned() {
                node.invalidated_by = Some(id.clone());
                node.invalidated_note = Some(note.clone());
                self.upsert(node, None);
            }
        }
    }

    /// The current facts (pattern, constraint) of exactly this project (None: global) and
    /// tenant whose subject is `subject_key` (trimmed, lowercased), oldest first.
    pub fn same_subject(
        &self,
        project: Option<i64>,
        tenant: &str,
        subject_key: &str,
    ) -> Vec<String> {
        let key = (project, tenant.to_string(), subject_key.to_string());
        let mut found: Vec<&Node> = self
            .subjects
            .get(&key)
            .into_iter()
            .flatten()
            .filter_map(|&slot| self.node(slot))
            .filter(|n| n.is_current())
            .collect();
        found.sort_by_key(|n| n.seq);
        found.into_iter().map(|n| n.id.clone()).collect()
    }

    /// The current entries derived from `id` (a `depends_on` link to it) not yet flagged for
    /// review.
    pub fn dependents(&self, id: &str) -> Vec<String> {
        let Some(slot) = self.slot_of(id) else {
            return Vec::new();
        };
        self.incoming(slot)
            .iter()
            .filter(|l| l.kind == EdgeKind::DependsOn)
            .filter_map(|l| self.node(l.other))
            .filter(|n| n.is_current() && n.invalidated_note.is_none())
            .map(|n| n.id.clone())
            .collect()
    }

    /// The highest node sequence number the index holds.
    pub fn max_seq(&self) -> i64 {
        self.max_seq
    }

    /// Takes the highest sequence number back to `seq`, what it was before a write planned
    /// into the index that the database did not take (its nodes already removed), so the next
    /// plan gives the ids that one would have had.
    pub fn rewind_max_seq(&mut self, seq: i64) {
        self.max_seq = self.max_seq.min(seq);
    }

    /// Gives a node written under a planned number the one the database gave it.
    pub fn set_seq(&mut self, id: &str, seq: i64) {
        if let Some(&slot) = self.by_id.get(id) {
            if let Some(node) = self.slots[slot as usize].as_mut() {
                node.seq = seq;
            }
        }
        self.max_seq = self.max_seq.max(seq);
    }

    /// Records that every change up to `head` is in the index: a writer's own, taken in as it
    /// wrote them (no other writer of the project commits in between).
    pub fn caught_up_to(&mut self, head: i64) {
        self.last_change = self.last_change.max(head);
    }

    /// Whether a slot has a vector (tests).
    #[cfg(test)]
    pub fn has_vector(&self, slot: u32) -> bool {
        self.vector_scales
            .get(slot as usize)
            .is_some_and(|&scale| scale != 0.0)
    }

    /// Takes in the vector stored for `id` from `text` (its subject, a space and its body),
    /// if the index holds that node with that text.
    pub fn take_vector(&mut self, id: &str, text: &str, vector: Option<Vector>) {
        let Some(&slot) = self.by_id.get(id) else {
            return;
        };
        let same = self.slots[slot as usize].as_ref().is_some_and(|node| {
            text.strip_prefix(node.subject.as_str())
                .and_then(|rest| rest.strip_prefix(' '))
                == Some(node.body.as_str())
        });
        if same {
            self.set_vector(slot, vector);
        }
    }

    fn set_vector(&mut self, slot: u32, vector: Option<Vector>) {
        let dims = embed::dims();
        let at = slot as usize * dims;
        match vector {
            Some(v) if v.values.len() == dims => {
                self.vector_values[at..at + dims].copy_from_slice(&v.values);
                self.vector_scales[slot as usize] = v.scale;
            }
            _ => {
                self.vector_values[at..at + dims].fill(0);
                self.vector_scales[slot as usize] = 0.0;
            }
        }
    }

    /// The cosine similarity of a slot's meaning to `query`'s; `None` while it has no vector.
    pub fn similarity(&self, query: &Vector, slot: u32) -> Option<f32> {
        let dims = embed::dims();
        let scale = *self.vector_scales.get(slot as usize)?;
        if scale == 0.0 || query.values.len() != dims {
            return None;
        }
        let values = &self.vector_values[slot as usize * dims..(slot as usize + 1) * dims];
        Some(embed::dot(&query.values, values) as f32 * scale * query.scale)
    }

    /// The `n` slots whose meaning is nearest `query`'s among those `admit` lets through, as
    /// (slot, cosine similarity), nearest first. Brute force over the flat vectors: a few
    /// hundred thousand integer multiply-adds per thousand entries.
    pub fn nearest(
        &self,
        query: &Vector,
        n: usize,
        admit: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let dims = embed::dims();
        if n == 0 || query.values.len() != dims {
            return Vec::new();
        }
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(n + 1);
        let mut floor = f32::MIN;
        let mut dots = Vec::new();
        embed::dots(&query.values, &self.vector_values, &mut dots);
        for (slot, (&scale, &dot)) in self.vector_scales.iter().zip(&dots).enumerate() {
            if scale == 0.0 {
                continue;
            }
            let similarity = dot as f32 * scale * query.scale;
            if best.len() == n && similarity <= floor {
                continue;
            }
            let slot = slot as u32;
            if !admit(slot) {
                continue;
            }
            let at = best
                .partition_point(|&(s, sim)| sim > similarity || (sim == similarity && s > slot));
            best.insert(at, (slot, similarity));
            best.truncate(n);
            if best.len() == n {
                floor = best[n - 1].1;
            }
        }
        best
    }

    fn remove(&mut self, id: &str) {
        let Some(slot) = self.by_id.remove(id) else {
            return;
        };
        self.unlink(slot);
        self.unpost(slot);
        if let Some(old) = self.slots[slot as usize].take() {
            self.tally(&old, -1);
            let key = subject_key(&old);
            if let Some(slots) = self.subjects.get_mut(&key) {
                slots.retain(|&s| s != slot);
                if slots.is_empty() {
                    self.subjects.remove(&key);
                }
            }
        }
        self.meta[slot as usize] = None;
        self.pairs[slot as usize] = Box::default();
        self.set_vector(slot, None);
        self.live -= 1;
    }

    fn post(&mut self, slot: u32, terms: &[String]) {
        self.posted_terms += terms.len();
        let slots = self.slots.len().max(slot as usize + 1);
        for term in terms {
            // Look up before inserting: a term seen before costs no allocation.
            match self.postings.get_mut(term.as_str()) {
                Some(list) => list.push(slot, slots),
                None => {
                    if term.chars().any(char::is_alphabetic) {
                        self.words.insert(term.clone());
                    }
                    self.postings.insert(term.clone(), Postings::one(slot));
                }
            }
            if !self.stems.contains_key(term.as_str()) {
                self.stems.insert(term.clone(), text::stem(term));
            }
            let stem = &self.stems[term.as_str()];
            match self.stem_postings.get_mut(stem.as_str()) {
                Some(list) if list.slots.last() == Some(&slot) => {}
                Some(list) => list.push(slot, slots),
                None => {
                    self.stem_postings.insert(stem.clone(), Postings::one(slot));
                }
            }
        }
    }

    fn unpost(&mut self, slot: u32) {
        let Some(Some(node)) = self.slots.get(slot as usize) else {
            return;
        };
        let terms = node.terms();
        self.posted_terms = self.posted_terms.saturating_sub(terms.len());
        for term in terms {
            if let Some(list) = self.postings.get_mut(&term) {
                list.remove(slot);
                if list.slots.is_empty() {
                    self.postings.remove(&term);
                    self.words.remove(&term);
                }
            }
            let stem = self.stem_of(&term);
            if let Some(list) = self.stem_postings.get_mut(&stem) {
                list.remove(slot);
                if list.slots.is_empty() {
                    self.stem_postings.remove(&stem);
                }
            }
        }
    }

    /// How many slots exist (live or freed); slot numbers are below this.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn meta(&self, slot: u32) -> Option<SlotMeta> {
        self.meta.get(slot as usize).copied().flatten()
    }

    /// Whether the entry in `slot` writes the pair whose [`pair_hash`] this is side by side.
    pub fn writes_pair(&self, slot: u32, pair: u64) -> bool {
        self.pairs
            .get(slot as usize)
            .is_some_and(|pairs| pairs.binary_search(&pair).is_ok())
    }

    /// The interned id of a tenant, if any node has it.
    pub fn tenant_id(&self, tenant: &str) -> Option<u32> {
        self.tenants.get(tenant).copied()
    }

    /// The stem of an indexed term (computed once), or computed now for any other.
    pub fn stem<'a>(&'a self, term: &str) -> std::borrow::Cow<'a, str> {
        match self.stems.get(term) {
            Some(stem) => std::borrow::Cow::Borrowed(stem.as_str()),
            None => std::borrow::Cow::Owned(text::stem(term)),
        }
    }

    pub fn node(&self, slot: u32) -> Option<&Node> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    pub fn slot_of(&self, id: &str) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    pub fn by_id(&self, id: &str) -> Option<&Node> {
        self.slot_of(id).and_then(|slot| self.node(slot))
    }

    /// Live nodes in slot (creation) order.
    pub fn nodes(&self) -> impl Iterator<Item = (u32, &Node)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i as u32, n)))
    }

    pub fn postings(&self, term: &str) -> &[u32] {
        self.postings.get(term).map_or(&[], |p| p.slots.as_slice())
    }

    pub fn stem_postings(&self, stem: &str) -> &[u32] {
        self.stem_postings
            .get(stem)
            .map_or(&[], |p| p.slots.as_slice())
    }

    /// A common term's postings as a bit per slot, when it has them (see [`Postings`]).
    pub fn posting_bits(&self, term: &str) -> Option<&Bits> {
        self.postings.get(term)?.bits.as_ref()
    }

    /// A common stem's postings as a bit per slot, when it has them.
    pub fn stem_posting_bits(&self, stem: &str) -> Option<&Bits> {
        self.stem_postings.get(stem)?.bits.as_ref()
    }

    /// Indexed terms that contain `fragment` (for substring seeds), at most `limit`, sorted.
    pub fn terms_containing(&self, fragment: &str, limit: usize) -> Vec<&str> {
        self.words
            .iter()
            .filter(|t| t.len() > fragment.len() && t.contains(fragment))
            .take(limit)
            .map(String::as_str)
            .collect()
    }

    /// Inverse document frequency of a term over live nodes: `max(0.1, ln(N / (1 + df)))`.
    pub fn idf(&self, df: usize) -> f64 {
        (self.live.max(1) as f64 / (1.0 + df as f64)).ln().max(0.1)
    }

    /// Current nodes of a kind that a scope sees (its project's plus global ones).
    pub fn current_count(&self, scope: &super::model::Scope, kind: Kind) -> usize {
        let count = |project: Option<i64>| {
            self.current
                .get(&(project, scope.tenant.clone(), kind))
                .copied()
                .unwrap_or(0)
        };
        match scope.project {
            Some(project) => count(Some(project)) + count(None),
            None => count(None),
        }
    }

    /// The average number of distinct terms of a live node (at least 1).
    pub fn average_terms(&self) -> f64 {
        (self.posted_terms as f64 / self.live.max(1) as f64).max(1.0)
    }

    pub fn live(&self) -> usize {
        self.live
    }

    pub fn outgoing(&self, slot: u32) -> &[Link] {
        &self.out[slot as usize]
    }

    pub fn incoming(&self, slot: u32) -> &[Link] {
        &self.inc[slot as usize]
    }
}

/// A fact's key among those with its subject: (project, tenant, lowercased subject).
fn subject_key(node: &Node) -> (Option<i64>, String, String) {
    (
        node.project,
        node.tenant.clone(),
        node.subject.trim().to_lowercase(),
    )
}

/// A hash of two terms written side by side (FNV-1a over both, a separator between): what
/// [`Index::writes_pair`] looks for. 64 bits, so two different pairs of one entry never collide
/// in practice.
pub fn pair_hash(first: &str, second: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in first.bytes().chain([0x1f]).chain(second.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The pairs a node writes side by side: its subject's terms then its body's, as one sequence.
fn pairs_of(node: &Node) -> Box<[u64]> {
    let mut previous = String::new();
    let mut pairs = Vec::new();
    let mut step = |term: &str| {
        if !previous.is_empty() {
            pairs.push(pair_hash(&previous, term));
        }
        previous.clear();
        previous.push_str(term);
    };
    text::each_term(&node.subject, &mut step);
    text::each_term(&node.body, &mut step);
    pairs.sort_unstable();
    pairs.dedup();
    pairs.into_boxed_slice()
}

/// The snapshot's layout version: bump it whenever a field of [`Index`] or of what it holds
/// changes (postcard is not self-describing, so an old file must not be read as a new layout).
const SNAPSHOT_FORMAT: u32 = 5;

/// The name a snapshot being written has until it is complete.
const SNAPSHOT_TEMP_PREFIX: &str = ".car.memory-index.";

/// Removes what a process that ended mid-write left (a hook past its deadline exits without
/// unwinding): snapshot temporaries older than ten minutes.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(SNAPSHOT_TEMP_PREFIX))
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age.as_secs() > 600);
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Below this many entries, building the index from the database is faster than reading a
/// snapshot would save.
pub const SNAPSHOT_MIN_LIVE: usize = 1_000;

/// The node the change `seq` of the log was made to.
fn node_at(conn: &dyn Sql, seq: i64) -> store::Result<Option<String>> {
    conn.value(
        "SELECT node_id FROM memory_changes WHERE seq = ?1",
        sql::args![seq],
    )
}

/// The database's random identity (`meta.database_id`, written by migration 0007).
fn database_id(conn: &dyn Sql) -> Option<String> {
    store::meta_value(conn, "database_id").ok().flatten()
}

/// What the tokenizer and stemmer make of a fixed text, hashed: a snapshot holds terms and
/// pair hashes computed by them, so a build that splits or stems differently (a new stop word,
/// another stemmer version) must not read one written by another, even at the same version.
fn tokenizer_fingerprint() -> u64 {
    const PROBE: &str = "The Deploy-pipeline's migrations aren't running: re-run `cargo test` \
        on PostgreSQL_15 (schema v2.3), then approve ÜBER-naïve caching of user_ids & URLs \
        like https://example.com/a?b=c; sign-offs by the DBA team were given yesterday.";
    let mut hash: u64 = 0;
    let mut previous = String::new();
    text::each_term(PROBE, |term| {
        hash = hash.rotate_left(7) ^ pair_hash(&previous, term);
        previous.clear();
        previous.push_str(term);
    });
    hash ^ pair_hash(&text::terms(PROBE).join(" "), &text::stem("approvals"))
        ^ pair_hash(embed::model_id(), "embedding model")
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    format: u32,
    version: &'a str,
    tokenizer: u64,
    database: &'a str,
    /// The node id of the change at `index.last_change`: a rebuilt database with as many
    /// changes has another node there.
    last_node: Option<String>,
    index: &'a Index,
}

#[derive(Deserialize)]
struct Snapshot {
    format: u32,
    version: String,
    tokenizer: u64,
    database: String,
    last_node: Option<String>,
    index: Index,
}

/// The slots that have a term, newest last; a term in many entries also keeps them as bits, so
/// a query that has already found its candidates checks each of them in one read instead of
/// walking the whole list.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Postings {
    slots: Vec<u32>,
    bits: Option<Bits>,
}

/// A list this long, and at least a sixteenth of all slots, gets bits (which then take at most
/// half the list's memory).
const DENSE_MIN: usize = 1_024;

impl Postings {
    fn one(slot: u32) -> Postings {
        Postings {
            slots: vec![slot],
            bits: None,
        }
    }

    fn push(&mut self, slot: u32, slots: usize) {
        self.slots.push(slot);
        match &mut self.bits {
            Some(bits) => bits.set(slot, true),
            None if self.slots.len() >= DENSE_MIN.max(slots / 16) => {
                let mut bits = Bits::default();
                for &s in &self.slots {
                    bits.set(s, true);
                }
                self.bits = Some(bits);
            }
            None => {}
        }
    }

    fn remove(&mut self, slot: u32) {
        self.slots.retain(|&s| s != slot);
        if let Some(bits) = &mut self.bits {
            bits.set(slot, false);
        }
    }
}

/// A set of slots, a bit each.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Bits(Vec<u64>);

impl Bits {
    fn set(&mut self, slot: u32, on: bool) {
        let (word, bit) = (slot as usize / 64, slot % 64);
        if word >= self.0.len() {
            if !on {
                return;
            }
            self.0.resize(word + 1, 0);
        }
        if on {
            self.0[word] |= 1 << bit;
        } else {
            self.0[word] &= !(1 << bit);
        }
    }

    pub fn has(&self, slot: u32) -> bool {
        self.0
            .get(slot as usize / 64)
            .is_some_and(|word| word & (1 << (slot % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_bits_agree_with_the_list_through_pushes_and_removals() {
        let mut postings = Postings::one(0);
        for slot in 1..3_000u32 {
            if slot % 3 != 0 {
                postings.push(slot, slot as usize + 1);
            }
        }
        for slot in (0..3_000u32).step_by(7) {
            postings.remove(slot);
        }
        postings.push(5_000, 5_001);
        let bits = postings.bits.as_ref().expect("a long list has bits");
        for slot in 0..6_000u32 {
            assert_eq!(
                bits.has(slot),
                postings.slots.contains(&slot),
                "slot {slot}"
            );
        }
    }

    #[test]
    fn a_pair_hash_tells_order_and_words_apart() {
        assert_ne!(
            pair_hash("invoice", "rendering"),
            pair_hash("rendering", "invoice")
        );
        assert_ne!(pair_hash("ab", "c"), pair_hash("a", "bc"));
        assert_eq!(
            pair_hash("invoice", "rendering"),
            pair_hash("invoice", "rendering")
        );
    }
}
