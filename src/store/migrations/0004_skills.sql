-- 0004: the skill store. A skill is code an agent saved for reuse, with the triggers that say
-- when it applies (persona, URL pattern, task keywords). Skills are user-wide: reuse across
-- projects is their point. Re-ingesting a name, or naming a skill in `supersedes`, deprecates the
-- old row (kept for audit, pointing at its successor) and starts a new version with fresh
-- outcome counts. Outcomes are counted in place with one UPDATE each, so concurrent reports
-- never lose a count. `domain` NULL means Global.
CREATE TABLE skills (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('active', 'deprecated')),
    code          TEXT NOT NULL,
    platform      TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    persona       TEXT NOT NULL DEFAULT '',
    url_pattern   TEXT NOT NULL DEFAULT '',
    task_keywords TEXT NOT NULL DEFAULT '[]',          -- JSON array of strings
    domain        TEXT,
    success_count INTEGER NOT NULL DEFAULT 0,
    fail_count    INTEGER NOT NULL DEFAULT 0,
    last_used_at  TEXT,
    superseded_by TEXT,                                -- name of the skill that replaced it
    source        TEXT,                                -- which face ingested it (mcp, cli, import)
    created_at    TEXT NOT NULL,
    UNIQUE (name, version)
);
CREATE UNIQUE INDEX skills_active_name ON skills(name) WHERE status = 'active';
