-- 0005: a project's lifecycle — tasks with dependencies, progress notes and blockers, decisions
-- (ADRs) with full-text search, the context graph of files and their links, checkpoints and
-- per-project settings. Every row carries its project. `ready` is not stored as a status: a task
-- is ready when it is open and `open_deps` (the count of its dependencies not yet done or
-- cancelled, kept in the same transaction as every change) is zero, so the ready queue is one
-- partial-index scan however large the graph.
CREATE TABLE tasks (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id     INTEGER NOT NULL REFERENCES projects(id),
    number         INTEGER NOT NULL,                  -- shown as <prefix>-0001
    title          TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL CHECK (status IN ('open', 'claimed', 'done', 'blocked', 'cancelled')),
    priority       INTEGER NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
    labels         TEXT NOT NULL DEFAULT '[]',        -- JSON array, sorted
    parent_id      INTEGER REFERENCES tasks(id),
    claimed_by     TEXT,
    claimed_at     TEXT,
    blocked_reason TEXT,
    open_deps      INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    closed_at      TEXT,
    UNIQUE (project_id, number)
);
CREATE INDEX tasks_ready ON tasks(project_id, priority, number)
    WHERE status = 'open' AND open_deps = 0;
CREATE INDEX tasks_active ON tasks(project_id, priority, number)
    WHERE status IN ('open', 'claimed', 'blocked');
CREATE INDEX tasks_status ON tasks(project_id, status, priority, number);
CREATE INDEX tasks_parent ON tasks(parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_deps (
    task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    depends_on INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, depends_on)
) WITHOUT ROWID;
CREATE INDEX task_deps_reverse ON task_deps(depends_on, task_id);

-- What happened to a task and who did it: the history `task show` prints.
CREATE TABLE task_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    at      TEXT NOT NULL,
    actor   TEXT,
    event   TEXT NOT NULL,
    detail  TEXT
);
CREATE INDEX task_events_task ON task_events(task_id, id);

CREATE TABLE progress (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id  INTEGER NOT NULL REFERENCES projects(id),
    task_id     INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('note', 'blocker')),
    body        TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
    resolution  TEXT,
    author      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    resolved_at TEXT
);
CREATE INDEX progress_project ON progress(project_id, status, id);
CREATE INDEX progress_task ON progress(task_id) WHERE task_id IS NOT NULL;

CREATE TABLE decisions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id   INTEGER NOT NULL REFERENCES projects(id),
    number       INTEGER NOT NULL,                    -- shown as ADR-0001
    title        TEXT NOT NULL,
    context      TEXT NOT NULL DEFAULT '',
    decision     TEXT NOT NULL,
    consequences TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL CHECK (status IN ('proposed', 'accepted', 'rejected', 'deprecated', 'superseded')),
    supersedes   INTEGER REFERENCES decisions(id),
    resolution   TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (project_id, number)
);
CREATE VIRTUAL TABLE decisions_fts USING fts5(
    title, context, decision, consequences,
    content = 'decisions', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER decisions_fts_insert AFTER INSERT ON decisions BEGIN
    INSERT INTO decisions_fts(rowid, title, context, decision, consequences)
    VALUES (new.id, new.title, new.context, new.decision, new.consequences);
END;
CREATE TRIGGER decisions_fts_delete AFTER DELETE ON decisions BEGIN
    INSERT INTO decisions_fts(decisions_fts, rowid, title, context, decision, consequences)
    VALUES ('delete', old.id, old.title, old.context, old.decision, old.consequences);
END;
CREATE TRIGGER decisions_fts_update AFTER UPDATE ON decisions BEGIN
    INSERT INTO decisions_fts(decisions_fts, rowid, title, context, decision, consequences)
    VALUES ('delete', old.id, old.title, old.context, old.decision, old.consequences);
    INSERT INTO decisions_fts(rowid, title, context, decision, consequences)
    VALUES (new.id, new.title, new.context, new.decision, new.consequences);
END;

-- The context graph: files (key = path relative to the project root, '/'-separated) and nodes
-- added by hand (any kind), with typed edges. A rescan re-parses a file only when its size or
-- mtime changed, and replaces only the edges that file's scan made (origin 'scan'); links made
-- by hand (origin 'manual') survive every rescan.
CREATE TABLE graph_nodes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id),
    key        TEXT NOT NULL,
    kind       TEXT NOT NULL,                         -- file, or what `graph add-node --kind` said
    lang       TEXT,                                  -- rust, python, javascript, typescript, go
    label      TEXT,
    size       INTEGER,
    mtime_ns   INTEGER,
    scanned_at TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (project_id, key)
);
CREATE TABLE graph_edges (
    src        INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
    dst        INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,                         -- imports, uses, includes, mod, or any link kind
    origin     TEXT NOT NULL CHECK (origin IN ('scan', 'manual')),
    created_at TEXT NOT NULL,
    PRIMARY KEY (src, dst, kind)
) WITHOUT ROWID;
CREATE INDEX graph_edges_dst ON graph_edges(dst, src);

-- A named snapshot of where a project stood (its briefing as JSON), for `resume`.
CREATE TABLE checkpoints (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id),
    name       TEXT NOT NULL,
    note       TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (project_id, name)
);

CREATE TABLE project_config (
    project_id INTEGER NOT NULL REFERENCES projects(id),
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (project_id, key)
) WITHOUT ROWID;
