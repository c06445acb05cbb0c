-- 0002: memgine, the graph memory. Nodes are facts (pattern, constraint), knowledge,
-- procedural entries, conversation turns, identity and environment entries; edges are typed and
-- weighted. `memory_changes` is an append-only log of touched node ids: every process keeps an
-- in-memory index of the graph and replays this log to stay current with other writers, so a
-- query never reloads the whole graph. Status slots are not nodes: they never reach retrieval.
CREATE TABLE memory_nodes (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    project_id    INTEGER REFERENCES projects(id),  -- NULL: global, seen from every project
    tenant        TEXT NOT NULL DEFAULT '',          -- '': no tenant; tenants never mix
    kind          TEXT NOT NULL,
    subject       TEXT NOT NULL,
    subject_key   TEXT NOT NULL,                     -- lowercased, trimmed subject
    body          TEXT NOT NULL,
    tags          TEXT NOT NULL DEFAULT '[]',
    confidence    TEXT,
    source        TEXT,
    created_at    TEXT NOT NULL,
    superseded_by TEXT,                              -- id of the node that replaced this one
    invalidated_by TEXT,                             -- id of a superseded node this one depended on
    injections    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memory_nodes_subject ON memory_nodes(project_id, tenant, subject_key)
    WHERE superseded_by IS NULL;

CREATE TABLE memory_edges (
    src    TEXT NOT NULL REFERENCES memory_nodes(id) ON DELETE CASCADE,
    dst    TEXT NOT NULL REFERENCES memory_nodes(id) ON DELETE CASCADE,
    kind   TEXT NOT NULL,
    weight REAL NOT NULL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX memory_edges_dst ON memory_edges(dst);

CREATE TABLE memory_changes (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id TEXT NOT NULL
);

CREATE TABLE memory_status (
    project_id INTEGER,
    tenant     TEXT NOT NULL DEFAULT '',
    body       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX memory_status_slot ON memory_status(ifnull(project_id, 0), tenant);
