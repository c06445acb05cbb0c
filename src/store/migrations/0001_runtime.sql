-- 0001: the runtime's own tables. `meta` holds one-time markers (such as the assistant.json
-- import), `projects` maps a project root to the id that project-scoped rows carry, and
-- `executions` is the log of every tool call the dispatcher ran (and the idempotency record
-- that lets a repeated `car/request_id` return the first result instead of running again).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE projects (
    id         INTEGER PRIMARY KEY,
    root       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE executions (
    id          TEXT PRIMARY KEY,
    tool        TEXT NOT NULL,
    status      TEXT NOT NULL,  -- running | ok | error | cancelled | timeout | denied
    request_id  TEXT,
    idem_key    TEXT UNIQUE,    -- tool || request_id, only for non-idempotent tools
    face        TEXT,           -- mcp | cli | embedded
    started_at  TEXT NOT NULL,
    duration_ms INTEGER,
    error       TEXT,
    result      TEXT            -- kept only when idem_key is set, to replay it
);
CREATE INDEX executions_started ON executions(started_at);
