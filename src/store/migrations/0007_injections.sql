-- 0007: what CAR put in front of a model on its own (the session-start briefing, a prompt's
-- reminders): one row per hook call, beside the execution log row that records the call. It
-- answers "what did this session see, and why", tells a resumed or compacted session what
-- changed since its last briefing (`state`), keeps a session from being reminded twice of one
-- entry, and gives `memory_evaluate` real prompts to be judged on.
CREATE TABLE injections (
    execution_id TEXT PRIMARY KEY REFERENCES executions(id) ON DELETE CASCADE,
    project_id   INTEGER REFERENCES projects(id) ON DELETE CASCADE,
    host         TEXT NOT NULL,                   -- claude-code | codex | gemini | cursor
    session_id   TEXT NOT NULL,
    event        TEXT NOT NULL,                   -- session_start | prompt
    source       TEXT,                            -- startup | resume | clear | compact (session_start)
    prompt       TEXT,                            -- the prompt, secrets redacted, at most 4,000 characters (prompt)
    entries      TEXT NOT NULL,                   -- JSON array of the ids shown (tasks, decisions, memory entries)
    withheld     TEXT NOT NULL DEFAULT '[]',      -- JSON array of the memory ids left out as secrets
    text         TEXT NOT NULL,                   -- exactly what was injected ('' when nothing)
    tokens       INTEGER NOT NULL,                -- its estimated size (4 characters a token)
    state        TEXT,                            -- the project's state the briefing was made at (session_start)
    created_at   TEXT NOT NULL
);
CREATE INDEX injections_session ON injections(session_id, created_at);
CREATE INDEX injections_project ON injections(project_id, created_at);

-- This database's identity, random and fixed: a file derived from the database (the memory
-- index snapshot beside it) names the database it was made from, so a database deleted and
-- rebuilt under the same path is never read through another one's snapshot.
INSERT OR IGNORE INTO meta(key, value) VALUES ('database_id', lower(hex(randomblob(16))));
