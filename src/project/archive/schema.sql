-- archive.db (schema 1): cold storage for `car prune`, attached to the main connection as
-- `archive`. Tables mirror car.db's rows of closed tasks, their dependency links and events,
-- and resolved progress notes, column for column, without foreign keys or checks: an archived
-- row may point at a task that stays in car.db. `car prune --restore` moves rows back with
-- their ids. Like car.db's migrations, this file is never edited once shipped; a change is a
-- new schema version.
CREATE TABLE IF NOT EXISTS archive.tasks (
    id             INTEGER PRIMARY KEY,
    project_id     INTEGER NOT NULL,
    number         INTEGER NOT NULL,
    title          TEXT NOT NULL,
    description    TEXT NOT NULL,
    status         TEXT NOT NULL,
    priority       INTEGER NOT NULL,
    labels         TEXT NOT NULL,
    parent_id      INTEGER,
    claimed_by     TEXT,
    claimed_at     TEXT,
    blocked_reason TEXT,
    open_deps      INTEGER NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    closed_at      TEXT,
    archived_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS archive.tasks_project ON tasks(project_id, number);

CREATE TABLE IF NOT EXISTS archive.task_deps (
    task_id     INTEGER NOT NULL,
    depends_on  INTEGER NOT NULL,
    archived_at TEXT NOT NULL,
    PRIMARY KEY (task_id, depends_on)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS archive.task_events (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL,
    at          TEXT NOT NULL,
    actor       TEXT,
    event       TEXT NOT NULL,
    detail      TEXT,
    archived_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS archive.task_events_task ON task_events(task_id);

CREATE TABLE IF NOT EXISTS archive.progress (
    id          INTEGER PRIMARY KEY,
    project_id  INTEGER NOT NULL,
    task_id     INTEGER,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    resolution  TEXT,
    author      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    resolved_at TEXT,
    archived_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS archive.progress_project ON progress(project_id, task_id);
