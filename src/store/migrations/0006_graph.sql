-- 0006: the references each scanned file makes (import specifiers, `mod`/`use` paths, includes,
-- a go.mod's module path), as written in the file. A rescan resolves every file's references
-- against the files that exist now, so an unchanged file gains its edge to a file that appeared
-- since (or to a new file of a Go package it imports) without being read again.
CREATE TABLE graph_refs (
    node_id INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
    kind    TEXT NOT NULL,                            -- the edge kind it makes: imports, uses, mod, includes; or gomodule
    spec    TEXT NOT NULL,
    PRIMARY KEY (node_id, kind, spec)
) WITHOUT ROWID;

-- A counter each scan that changes a file node bumps, and per scanned path the counter and edge
-- count its last resolution saw: a rescan that changed nothing, with no change anywhere since,
-- skips resolution (a warm rescan of a large tree then costs little more than the walk).
CREATE TABLE graph_generation (
    project_id INTEGER PRIMARY KEY REFERENCES projects(id),
    generation INTEGER NOT NULL
);
CREATE TABLE graph_resolved (
    project_id INTEGER NOT NULL REFERENCES projects(id),
    path       TEXT NOT NULL,                         -- the scanned path's key prefix, '' for the root
    generation INTEGER NOT NULL,
    edges      INTEGER NOT NULL,
    PRIMARY KEY (project_id, path)
) WITHOUT ROWID;
