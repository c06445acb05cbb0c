//! `graph scan`: walk a directory of the project in parallel, read the new and changed files,
//! store their nodes and references in batches (one short transaction per batch, so a huge tree
//! never holds the write lock for long), then resolve the references of every file under the
//! scanned path against the files that exist now and apply the difference to the scan edges.
//!
//! Scanning a subdirectory touches only nodes under it: its files are added, updated and
//! removed, and the edges out of them are recomputed (their targets may lie anywhere in the
//! project). Edges from files outside it are recomputed by the next scan that covers them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::parse::{self, Lang, Ref, RefKind};
use super::resolve::Resolver;
use super::UNDER_PREFIX;
use crate::project::{Project, ProjectError, Result};
use crate::store;

/// Files larger than this are recorded but not read (generated code, data).
const MAX_READ: u64 = 8 << 20;
/// Files (or edges) written per transaction.
const BATCH: usize = 2_000;

/// What a scan is doing, for a progress line on a terminal.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Files walked so far.
    Walked(usize),
    /// Files written so far, of the total to write.
    Writing(usize, usize),
    Resolving,
}

/// What a scan did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScanReport {
    /// The scanned directory (absolute).
    pub root: String,
    /// The scanned directory relative to the project root ("" for the root itself).
    pub path: String,
    pub files_seen: usize,
    /// New or changed files (read for references when their language is known).
    pub parsed: usize,
    /// Files whose size and mtime matched: not read.
    pub unchanged: usize,
    /// Files gone since the last scan whose nodes were deleted.
    pub removed: usize,
    /// Files gone whose nodes stay because a manual edge touches them.
    pub kept_for_links: usize,
    /// Scan edges out of files under the path after the scan.
    pub edges: usize,
    pub edges_added: usize,
    pub edges_removed: usize,
    /// Files seen per language (`other` for files not read).
    pub by_language: BTreeMap<String, usize>,
    pub duration_ms: u64,
}

/// A file the walk found.
struct Seen {
    key: String,
    lang: Option<Lang>,
    size: i64,
    mtime_ns: i64,
    /// Some(references) when the file is new or changed.
    refs: Option<Vec<Ref>>,
}

/// Scans `path` (absolute, or relative to the project root) and updates the graph.
pub fn scan(
    project: &Project,
    path: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<ScanReport> {
    let started = Instant::now();
    let io = |path: &Path, e: std::io::Error| ProjectError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = project
        .root
        .canonicalize()
        .map_err(|e| io(&project.root, e))?;
    let target = root.join(path);
    let target = target
        .canonicalize()
        .map_err(|e| ProjectError::Invalid(format!("cannot scan {}: {e}", path.display())))?;
    let prefix = match target.strip_prefix(&root) {
        Ok(rel) => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => {
            return Err(ProjectError::Invalid(format!(
                "{} is outside the project {}; scan a directory inside it, or pass --project",
                target.display(),
                root.display()
            )))
        }
    };

    let known = known_files(project, &prefix)?;
    let seen = walk(&root, &target, &known, progress);
    tracing::debug!(elapsed = ?started.elapsed(), files = seen.len(), "graph scan: walked");

    let mut by_language = BTreeMap::new();
    for file in &seen {
        *by_language
            .entry(file.lang.map_or("other", Lang::name).to_string())
            .or_insert(0) += 1;
    }
    let seen_keys: HashSet<&str> = seen.iter().map(|f| f.key.as_str()).collect();
    let gone: Vec<i64> = known
        .iter()
        .filter(|(key, _)| !seen_keys.contains(key.as_str()))
        .map(|(_, (id, _, _))| *id)
        .collect();
    let changed: Vec<&Seen> = seen.iter().filter(|f| f.refs.is_some()).collect();

    let now = store::now();
    for (done, batch) in changed.chunks(BATCH).enumerate() {
        progress(Progress::Writing(done * BATCH, changed.len()));
        project
            .store
            .write(|tx| write_files(tx, project.id, batch, &now))?;
    }
    let mut removed = 0;
    let mut kept_for_links = 0;
    for batch in gone.chunks(BATCH) {
        project.store.write(|tx| -> Result<()> {
            for id in batch {
                let linked: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM graph_edges WHERE (src = ?1 OR dst = ?1) AND origin = 'manual')",
                    [id],
                    |r| r.get(0),
                )?;
                if linked {
                    tx.execute("UPDATE graph_nodes SET size = NULL, mtime_ns = NULL WHERE id = ?1", [id])?;
                    tx.execute("DELETE FROM graph_refs WHERE node_id = ?1", [id])?;
                    kept_for_links += 1;
                } else {
                    tx.execute("DELETE FROM graph_nodes WHERE id = ?1", [id])?;
                    removed += 1;
                }
            }
            Ok(())
        })?;
    }

    tracing::debug!(elapsed = ?started.elapsed(), "graph scan: walked and wrote files");

    // Resolution depends only on the project's files and references: when this scan changed
    // nothing and no scan has changed anything since this path was last resolved, the edges
    // stand as they are.
    let changed_any = !changed.is_empty() || !gone.is_empty();
    let generation = project.store.write(|tx| -> Result<i64> {
        if changed_any {
            tx.execute(
                "INSERT INTO graph_generation (project_id, generation) VALUES (?1, 1)
                 ON CONFLICT (project_id) DO UPDATE SET generation = generation + 1",
                [project.id],
            )?;
        }
        Ok(tx
            .query_row(
                "SELECT generation FROM graph_generation WHERE project_id = ?1",
                [project.id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    })?;
    let resolved: Option<(i64, i64)> = project
        .store
        .conn()
        .query_row(
            "SELECT generation, edges FROM graph_resolved WHERE project_id = ?1 AND path = ?2",
            params![project.id, prefix],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (edges, edges_added, edges_removed) = match resolved {
        Some((at, edges)) if at == generation && !changed_any => (edges as usize, 0, 0),
        Some(_) | None => {
            progress(Progress::Resolving);
            let counts = resolve_edges(project, &prefix, &now)?;
            project.store.write(|tx| {
                tx.execute(
                    "INSERT INTO graph_resolved (project_id, path, generation, edges) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (project_id, path) DO UPDATE SET generation = excluded.generation, edges = excluded.edges",
                    params![project.id, prefix, generation, counts.0 as i64],
                )
            })?;
            counts
        }
    };
    tracing::debug!(elapsed = ?started.elapsed(), "graph scan: resolved references");
    Ok(ScanReport {
        root: target.display().to_string(),
        path: prefix,
        files_seen: seen.len(),
        parsed: changed.len(),
        unchanged: seen.len() - changed.len(),
        removed,
        kept_for_links,
        edges,
        edges_added,
        edges_removed,
        by_language,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// The file nodes under `prefix` that exist on disk as of the last scan: key → (id, size, mtime).
fn known_files(project: &Project, prefix: &str) -> Result<HashMap<String, (i64, i64, i64)>> {
    let conn = project.store.conn();
    let mut stmt = conn.prepare(&format!(
        "SELECT key, id, size, mtime_ns FROM graph_nodes
         WHERE project_id = ?1 AND kind = 'file' AND size IS NOT NULL AND {UNDER_PREFIX}"
    ))?;
    let rows = stmt.query_map(params![project.id, prefix], |row| {
        Ok((
            row.get(0)?,
            (
                row.get(1)?,
                row.get(2)?,
                row.get::<_, Option<i64>>(3)?.unwrap_or(-1),
            ),
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Walks `target` with ripgrep's parallel walker; reads and parses new and changed files on the
/// walker's threads. Sorted by key.
fn walk(
    root: &Path,
    target: &Path,
    known: &HashMap<String, (i64, i64, i64)>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Vec<Seen> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let walker = ignore::WalkBuilder::new(target)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .threads(threads)
        .build_parallel();
    let (tx, rx) = mpsc::channel();
    let count = AtomicUsize::new(0);
    let progress = Mutex::new(progress);
    walker.run(|| {
        let tx = tx.clone();
        let count = &count;
        let progress = &progress;
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            if let Some(file) = look_at(root, entry.path(), known) {
                let _ = tx.send(file);
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(1000) {
                    if let Ok(report) = progress.lock() {
                        report(Progress::Walked(n));
                    }
                }
            }
            ignore::WalkState::Continue
        })
    });
    drop(tx);
    let mut seen: Vec<Seen> = rx.into_iter().collect();
    seen.sort_by(|a, b| a.key.cmp(&b.key));
    seen
}

/// Stats a file and, when it is new or changed, reads its references.
fn look_at(root: &Path, path: &Path, known: &HashMap<String, (i64, i64, i64)>) -> Option<Seen> {
    let rel = path.strip_prefix(root).ok()?;
    let mut key = String::new();
    for part in rel.components() {
        if !key.is_empty() {
            key.push('/');
        }
        key.push_str(part.as_os_str().to_str()?);
    }
    let meta = std::fs::metadata(path).ok()?;
    let size = meta.len() as i64;
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    let lang = Lang::of(&key);
    let unchanged = known
        .get(&key)
        .is_some_and(|&(_, s, m)| s == size && m == mtime_ns);
    let refs = if unchanged {
        None
    } else {
        Some(match lang {
            Some(lang) if meta.len() <= MAX_READ => std::fs::read(path)
                .map(|bytes| parse::parse(lang, &String::from_utf8_lossy(&bytes)))
                .unwrap_or_default(),
            Some(_) | None => Vec::new(),
        })
    };
    Some(Seen {
        key,
        lang,
        size,
        mtime_ns,
        refs,
    })
}

fn write_files(
    tx: &rusqlite::Transaction<'_>,
    project: i64,
    files: &[&Seen],
    now: &str,
) -> Result<()> {
    let mut upsert = tx.prepare_cached(
        "INSERT INTO graph_nodes (project_id, key, kind, lang, size, mtime_ns, scanned_at, created_at)
         VALUES (?1, ?2, 'file', ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (project_id, key) DO UPDATE SET kind = 'file', lang = excluded.lang,
             size = excluded.size, mtime_ns = excluded.mtime_ns, scanned_at = excluded.scanned_at
         RETURNING id",
    )?;
    let mut clear = tx.prepare_cached("DELETE FROM graph_refs WHERE node_id = ?1")?;
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO graph_refs (node_id, kind, spec) VALUES (?1, ?2, ?3)",
    )?;
    for file in files {
        let id: i64 = upsert.query_row(
            params![
                project,
                file.key,
                file.lang.map(Lang::name),
                file.size,
                file.mtime_ns,
                now
            ],
            |r| r.get(0),
        )?;
        clear.execute([id])?;
        for reference in file.refs.iter().flatten() {
            insert.execute(params![id, reference.kind.as_str(), reference.spec])?;
        }
    }
    Ok(())
}

/// Recomputes the scan edges out of every file under `prefix`; returns (edges, added, removed).
fn resolve_edges(project: &Project, prefix: &str, now: &str) -> Result<(usize, usize, usize)> {
    let (resolver, refs, current, ids) = {
        let conn = project.store.conn();
        let files: HashSet<String> = conn
            .prepare("SELECT key FROM graph_nodes WHERE project_id = ?1 AND kind = 'file' AND size IS NOT NULL")?
            .query_map([project.id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let go_modules: Vec<(String, String)> = conn
            .prepare(
                "SELECT r.spec, n.key FROM graph_refs r JOIN graph_nodes n ON n.id = r.node_id
                 WHERE n.project_id = ?1 AND r.kind = 'gomodule'",
            )?
            .query_map([project.id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let refs: Vec<(String, Option<String>, String, String)> = conn
            .prepare(&format!(
                "SELECT n.key, n.lang, r.kind, r.spec FROM graph_refs r JOIN graph_nodes n ON n.id = r.node_id
                 WHERE n.project_id = ?1 AND r.kind != 'gomodule' AND {}",
                UNDER_PREFIX.replace("key", "n.key")
            ))?
            .query_map(params![project.id, prefix], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let current: BTreeSet<(String, String, String)> = conn
            .prepare(&format!(
                "SELECT s.key, d.key, e.kind FROM graph_edges e
                 JOIN graph_nodes s ON s.id = e.src JOIN graph_nodes d ON d.id = e.dst
                 WHERE e.origin = 'scan' AND s.project_id = ?1 AND {}",
                UNDER_PREFIX.replace("key", "s.key")
            ))?
            .query_map(params![project.id, prefix], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let ids: HashMap<String, i64> = conn
            .prepare("SELECT key, id FROM graph_nodes WHERE project_id = ?1")?
            .query_map([project.id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        (Resolver::new(files, go_modules), refs, current, ids)
    };

    let lang_by_name: HashMap<&str, Lang> = [
        Lang::Rust,
        Lang::Python,
        Lang::JavaScript,
        Lang::TypeScript,
        Lang::Go,
        Lang::GoMod,
        Lang::C,
        Lang::Cpp,
    ]
    .into_iter()
    .map(|lang| (lang.name(), lang))
    .collect();
    // Group each file's references (rows come sorted by file) and resolve them together.
    let mut by_file: BTreeMap<String, (Option<Lang>, Vec<Ref>)> = BTreeMap::new();
    for (from, lang, kind, spec) in refs {
        let Some(kind) = RefKind::parse(&kind) else {
            continue;
        };
        let entry = by_file.entry(from).or_insert_with(|| {
            let lang = lang.as_deref().and_then(|l| lang_by_name.get(l).copied());
            (lang, Vec::new())
        });
        entry.1.push(Ref { kind, spec });
    }
    let mut wanted: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (from, (lang, refs)) in by_file {
        let Some(lang) = lang else { continue };
        for (target, kind) in resolver.resolve_file(&from, lang, &refs) {
            wanted.insert((from.clone(), target, kind.as_str().to_string()));
        }
    }
    let add: Vec<_> = wanted.difference(&current).collect();
    let remove: Vec<_> = current.difference(&wanted).collect();
    let id = |key: &str| ids.get(key).copied();
    let mut added = 0;
    for batch in add.chunks(BATCH) {
        added += project.store.write(|tx| -> Result<usize> {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO graph_edges (src, dst, kind, origin, created_at) VALUES (?1, ?2, ?3, 'scan', ?4)",
            )?;
            let mut n = 0;
            for (src, dst, kind) in batch {
                if let (Some(src), Some(dst)) = (id(src), id(dst)) {
                    n += insert.execute(params![src, dst, kind, now])?;
                }
            }
            Ok(n)
        })?;
    }
    let mut removed = 0;
    for batch in remove.chunks(BATCH) {
        removed += project.store.write(|tx| -> Result<usize> {
            let mut delete = tx.prepare_cached(
                "DELETE FROM graph_edges WHERE src = ?1 AND dst = ?2 AND kind = ?3 AND origin = 'scan'",
            )?;
            let mut n = 0;
            for (src, dst, kind) in batch {
                if let (Some(src), Some(dst)) = (id(src), id(dst)) {
                    n += delete.execute(params![src, dst, kind])?;
                }
            }
            Ok(n)
        })?;
    }
    Ok((wanted.len(), added, removed))
}
