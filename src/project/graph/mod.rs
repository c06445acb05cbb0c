//! The context graph of a project: its files and the nodes added by hand (decisions, concepts,
//! anything with a kind), joined by typed edges, so an agent can ask what a file depends on and
//! what depends on it without reading the tree.
//!
//! A scan (`scan`) walks the project with ripgrep's walker (the `ignore` crate: `.gitignore`,
//! `.ignore` and `.git/info/exclude` are honoured even outside a git repository; hidden files and
//! directories, `.git` among them, are skipped; the user's global gitignore is not read, so a
//! scan means the same on every machine; symbolic links are not followed, and files whose path
//! is not UTF-8 are skipped). Every file becomes a node keyed by its path relative to
//! the project root with `/` separators; files in a language below are read for references,
//! which are stored as written (`graph_refs`) and then resolved against the files that exist, so
//! an unchanged file gains its edge when the file it imports appears. A rescan reads only files
//! whose size or mtime changed. Edge kinds and what each language's reading covers and misses:
//!
//! - **Rust** (`mod`, `uses`): `mod x;` (→ `x.rs` or `x/mod.rs` beside a crate root or `mod.rs`,
//!   else in the directory named after the file; `#[path]` directly before it); every path of a
//!   `use` tree starting with `crate::`, `self::`, `super::`, or naming a local module (2018 and
//!   2015 style), resolved to the longest module path that is a file under the nearest
//!   `Cargo.toml`'s `src/` (an item of a module → that module's file; `crate::Item` → `lib.rs`).
//!   `use super::…` inside inline `mod tests { … }` is read from the file's own module. Misses:
//!   paths used without `use` (`crate::a::f()`), macros (`include!`, macro-generated modules),
//!   `#[path]` on inline modules, files declared from inside an inline module, re-exports (an
//!   edge goes to the module that re-exports, not the one that defines), a crate's own name
//!   used from `src/bin` or `tests/`, and other crates of a workspace (external crates).
//! - **Python** (`imports`): `import a.b`, `from a.b import c` (edges to `a/b` and, when `c` is
//!   a submodule, to it), relative `from . import x` / `from ..pkg import y`, including indented
//!   and parenthesised forms. Modules are `x.py` or `x/__init__.py`, looked up from the directory
//!   above the file's top-level package, the file's own directory, the project root, then
//!   `src/`. Misses: `importlib`/`__import__`, namespace packages, `sys.path` changes, stubs.
//! - **JavaScript/TypeScript** (`imports`): `import … from`, `export … from`, side-effect
//!   `import './x'`, `require('./x')`, dynamic `import('./x')`, with relative specifiers only,
//!   resolved by exact name, then `.ts .tsx .d.ts .js .jsx .mjs .cjs .mts .cts .json`, then
//!   `./x.js` as `x.ts` (TypeScript ESM), then `x/index.*`. Bare specifiers (packages) are not
//!   files here and are skipped. Misses: tsconfig `paths`/`baseUrl` aliases, package.json
//!   `exports`/workspaces, computed specifiers, and regex literals that contain a quote can
//!   confuse the comment stripper.
//! - **Go** (`imports`): `import "p"` and import blocks; a path under the module path of a
//!   go.mod in the tree (the longest one matches) names the package directory, and the edge goes
//!   to each non-test `.go` file of that directory. Standard library and third-party modules are
//!   skipped. Misses: build tags and `_os.go` constraints (all files count), `replace`
//!   directives, vendoring, `go.work`.
//! - **C/C++** (`includes`): `#include "x"` relative to the file, then the project root, then
//!   `include/`. `<x>` includes and include paths from build files are not followed.
//!
//! Files larger than 8 MiB become nodes but are not read. A file that disappears loses its node
//! and all its edges, unless a manual edge touches it: then the node stays (size unknown, no
//! scan edges) so the link is not lost silently; `graph edges` still shows it.
//!
//! Manual nodes (`add_node`) and edges (`link`, origin `manual`) survive every rescan; a scan
//! never deletes or downgrades a manual edge.

mod export;
mod lex;
mod parse;
mod resolve;
mod scan;

pub use export::{Content, ExportFormat, Exported, GraphDump};
pub use scan::{scan, Progress, ScanReport};

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::Path;

use super::{Project, ProjectError, Result};
use crate::store;

/// The SQL condition "`key` is the scanned path or under it" for a key prefix in `?2`.
pub(crate) const UNDER_PREFIX: &str =
    "(?2 = '' OR key = ?2 OR substr(key, 1, length(?2) + 1) = ?2 || '/')";

/// One node as shown to users.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Node {
    /// A path relative to the project root, or the name of a node that is not a file.
    pub key: String,
    /// `file`, or the kind given to add-node.
    pub kind: String,
    /// A file's language when it is one CAR reads.
    pub lang: Option<String>,
    pub label: Option<String>,
}

/// An edge seen from one node: the node at its other end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Neighbour {
    pub key: String,
    /// The edge kind: what a scan found (`imports`, …) or the one given to link.
    pub kind: String,
    pub origin: EdgeOrigin,
}

/// Who made an edge: a scan (which the next scan may remove) or a person (`link`; kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EdgeOrigin {
    Scan,
    Manual,
}

impl EdgeOrigin {
    /// The stored text (`scan`, `manual`).
    pub fn parse(text: &str) -> Result<EdgeOrigin> {
        match text {
            "scan" => Ok(EdgeOrigin::Scan),
            "manual" => Ok(EdgeOrigin::Manual),
            other => Err(crate::project::ProjectError::Invalid(format!(
                "an edge's origin is scan or manual, not {other:?}"
            ))),
        }
    }
}

/// Which edges of a node to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
    Both,
}

/// A node and its edges.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeEdges {
    pub node: Node,
    /// What the node points at (absent when only incoming edges were asked for).
    #[serde(rename = "out", default, skip_serializing_if = "Option::is_none")]
    pub outgoing: Option<Vec<Neighbour>>,
    /// What points at the node (absent when only outgoing edges were asked for).
    #[serde(rename = "in", default, skip_serializing_if = "Option::is_none")]
    pub incoming: Option<Vec<Neighbour>>,
}

/// What `link` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Linked {
    pub src: String,
    pub dst: String,
    pub kind: String,
    /// False when the edge existed (a scan edge with this kind becomes manual).
    pub created: bool,
}

/// What `add_node` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Added {
    pub node: Node,
    /// False when a node with this key existed.
    pub created: bool,
}

/// A key as given by a user: a path relative to the project root (`./` and `..` folded) or an
/// absolute path inside it, or any other name for a node that is not a file.
pub fn node_key(root: &Path, text: &str) -> Result<String> {
    let path = Path::new(text);
    if path.is_absolute() {
        let canonical_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let relative = canonical
            .strip_prefix(&canonical_root)
            .or_else(|_| path.strip_prefix(root))
            .map_err(|_| {
                ProjectError::Invalid(format!("{text} is outside the project {}", root.display()))
            })?;
        let key = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        return if key.is_empty() {
            Err(ProjectError::Invalid(format!(
                "{text} is the project root, not a node"
            )))
        } else {
            Ok(key)
        };
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(|| {
                    ProjectError::Invalid(format!("{text} climbs out of the project"))
                })?;
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(ProjectError::Invalid("a node key cannot be empty".into()));
    }
    Ok(parts.join("/"))
}

/// A node or edge kind: 1–64 letters, digits, `_`, `-` or `.`.
fn check_kind(kind: &str) -> Result<()> {
    let ok = !kind.is_empty()
        && kind.len() <= 64
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ProjectError::Invalid(format!(
            "bad kind {kind:?}: use 1–64 letters, digits, '_', '-' or '.'"
        )))
    }
}

fn not_found(key: &str) -> ProjectError {
    ProjectError::NotFound(format!(
        "no node {key:?} in the context graph: run `car graph scan` to add the project's files, or `car graph add-node {key} --kind KIND` for anything else"
    ))
}

fn node_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Node)> {
    Ok((
        row.get(0)?,
        Node {
            key: row.get(1)?,
            kind: row.get(2)?,
            lang: row.get(3)?,
            label: row.get(4)?,
        },
    ))
}

fn find_node(conn: &rusqlite::Connection, project: i64, key: &str) -> Result<Option<(i64, Node)>> {
    Ok(conn
        .query_row(
            "SELECT id, key, kind, lang, label FROM graph_nodes WHERE project_id = ?1 AND key = ?2",
            params![project, key],
            node_row,
        )
        .optional()?)
}

impl Project {
    /// The edges of the node `key`, sorted by the other end's key, then kind.
    pub fn graph_edges(&self, key: &str, direction: Direction) -> Result<NodeEdges> {
        let conn = self.store.conn();
        let (id, node) = find_node(&conn, self.id, key)?.ok_or_else(|| not_found(key))?;
        let list = |sql: &str| -> Result<Vec<Neighbour>> {
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map([id], |row| {
                Ok(Neighbour {
                    key: row.get(0)?,
                    kind: row.get(1)?,
                    origin: crate::project::stored_sqlite(row, "origin", EdgeOrigin::parse)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        };
        let out_sql = "SELECT n.key, e.kind, e.origin FROM graph_edges e JOIN graph_nodes n ON n.id = e.dst WHERE e.src = ?1 ORDER BY n.key, e.kind";
        let in_sql = "SELECT n.key, e.kind, e.origin FROM graph_edges e JOIN graph_nodes n ON n.id = e.src WHERE e.dst = ?1 ORDER BY n.key, e.kind";
        let (outgoing, incoming) = match direction {
            Direction::Out => (Some(list(out_sql)?), None),
            Direction::In => (None, Some(list(in_sql)?)),
            Direction::Both => (Some(list(out_sql)?), Some(list(in_sql)?)),
        };
        Ok(NodeEdges {
            node,
            outgoing,
            incoming,
        })
    }

    /// A manual edge `src → dst` of `kind`; both nodes must exist.
    pub fn graph_link(&self, src: &str, dst: &str, kind: &str) -> Result<Linked> {
        check_kind(kind)?;
        self.store.write(|tx| {
            let (src_id, _) = find_node(tx, self.id, src)?.ok_or_else(|| not_found(src))?;
            let (dst_id, _) = find_node(tx, self.id, dst)?.ok_or_else(|| not_found(dst))?;
            let created = tx.execute(
                "INSERT OR IGNORE INTO graph_edges (src, dst, kind, origin, created_at) VALUES (?1, ?2, ?3, 'manual', ?4)",
                params![src_id, dst_id, kind, store::now()],
            )? == 1;
            if !created {
                tx.execute(
                    "UPDATE graph_edges SET origin = 'manual' WHERE src = ?1 AND dst = ?2 AND kind = ?3",
                    params![src_id, dst_id, kind],
                )?;
            }
            Ok(Linked {
                src: src.to_string(),
                dst: dst.to_string(),
                kind: kind.to_string(),
                created,
            })
        })
    }

    /// A node added by hand. Adding it again with the same kind updates its label; another kind
    /// is a conflict.
    pub fn graph_add_node(&self, key: &str, kind: &str, label: Option<&str>) -> Result<Added> {
        check_kind(kind)?;
        self.store.write(|tx| {
            if let Some((id, node)) = find_node(tx, self.id, key)? {
                if node.kind != kind {
                    return Err(ProjectError::Conflict(format!(
                        "node {key:?} exists with kind {:?}",
                        node.kind
                    )));
                }
                if let Some(label) = label {
                    tx.execute(
                        "UPDATE graph_nodes SET label = ?1 WHERE id = ?2",
                        params![label, id],
                    )?;
                }
                let (_, node) = find_node(tx, self.id, key)?.ok_or_else(|| not_found(key))?;
                return Ok(Added {
                    node,
                    created: false,
                });
            }
            tx.execute(
                "INSERT INTO graph_nodes (project_id, key, kind, label, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![self.id, key, kind, label, store::now()],
            )?;
            Ok(Added {
                node: Node {
                    key: key.to_string(),
                    kind: kind.to_string(),
                    lang: None,
                    label: label.map(str::to_string),
                },
                created: true,
            })
        })
    }

    /// Every node and edge of the project, sorted.
    pub fn graph_dump(&self) -> Result<GraphDump> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare(
            "SELECT id, key, kind, lang, label FROM graph_nodes WHERE project_id = ?1 ORDER BY key",
        )?;
        let nodes = stmt
            .query_map([self.id], node_row)?
            .map(|row| row.map(|(_, node)| node))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut stmt = conn.prepare(
            "SELECT s.key, d.key, e.kind, e.origin FROM graph_edges e
             JOIN graph_nodes s ON s.id = e.src JOIN graph_nodes d ON d.id = e.dst
             WHERE s.project_id = ?1 ORDER BY s.key, d.key, e.kind",
        )?;
        let edges = stmt
            .query_map([self.id], |row| {
                Ok(export::Edge {
                    src: row.get(0)?,
                    dst: row.get(1)?,
                    kind: row.get(2)?,
                    origin: crate::project::stored_sqlite(row, "origin", EdgeOrigin::parse)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(GraphDump { nodes, edges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_keys_fold_dots_and_refuse_to_leave_the_project() {
        let root = Path::new("/p/root");
        assert_eq!(node_key(root, "./src//a.rs").unwrap(), "src/a.rs");
        assert_eq!(node_key(root, "src/x/../a.rs").unwrap(), "src/a.rs");
        assert_eq!(node_key(root, "/p/root/src/a.rs").unwrap(), "src/a.rs");
        assert_eq!(node_key(root, "ADR-0001").unwrap(), "ADR-0001");
        assert!(node_key(root, "../other").is_err());
        assert!(node_key(root, "/elsewhere/a.rs").is_err());
        assert!(node_key(root, ".").is_err());
    }
}
