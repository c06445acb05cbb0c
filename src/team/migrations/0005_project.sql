-- 0005: a project's lifecycle on the team database: SQLite's tasks, dependencies and their
-- history, progress notes and blockers, decisions, checkpoints and settings
-- (src/store/migrations/0005) under 0002's rules. `project_id` is the team project's id, as
-- `projects` (a view of the transaction's own project) says. Row ids come from sequences shared
-- by all projects, so they are unique on their own; display numbers (CTX-0001, ADR-0001) are
-- per project, as on SQLite. Decisions are searched with PostgreSQL's text search (English
-- stemming, as SQLite's porter tokenizer) over the fields SQLite's FTS5 table indexes.
CREATE VIEW projects AS
    SELECT id, ''::text AS root, name,
           to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at
    FROM car_projects WHERE id = car_project();

CREATE TABLE tasks (
    team_project   bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    id             bigserial PRIMARY KEY,
    project_id     bigint NOT NULL,
    number         bigint NOT NULL,
    title          text NOT NULL,
    description    text NOT NULL DEFAULT '',
    status         text NOT NULL CHECK (status IN ('open', 'claimed', 'done', 'blocked', 'cancelled')),
    priority       bigint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
    labels         text NOT NULL DEFAULT '[]',
    parent_id      bigint REFERENCES tasks(id),
    claimed_by     text,
    claimed_at     text,
    blocked_reason text,
    open_deps      bigint NOT NULL DEFAULT 0,
    created_at     text NOT NULL,
    updated_at     text NOT NULL,
    closed_at      text,
    UNIQUE (team_project, project_id, number)
);
CREATE INDEX tasks_ready ON tasks(team_project, project_id, priority, number)
    WHERE status = 'open' AND open_deps = 0;
CREATE INDEX tasks_active ON tasks(team_project, project_id, priority, number)
    WHERE status IN ('open', 'claimed', 'blocked');
CREATE INDEX tasks_status ON tasks(team_project, project_id, status, priority, number);
CREATE INDEX tasks_parent ON tasks(parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_deps (
    team_project bigint NOT NULL DEFAULT car_project(),
    task_id      bigint NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    depends_on   bigint NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, depends_on)
);
CREATE INDEX task_deps_reverse ON task_deps(depends_on, task_id);

CREATE TABLE task_events (
    team_project bigint NOT NULL DEFAULT car_project(),
    id           bigserial PRIMARY KEY,
    task_id      bigint NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    at           text NOT NULL,
    actor        text,
    event        text NOT NULL,
    detail       text
);
CREATE INDEX task_events_task ON task_events(task_id, id);

CREATE TABLE progress (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    id          bigserial PRIMARY KEY,
    project_id  bigint NOT NULL,
    task_id     bigint REFERENCES tasks(id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('note', 'blocker')),
    body        text NOT NULL,
    status      text NOT NULL CHECK (status IN ('open', 'resolved')),
    resolution  text,
    author      text,
    created_at  text NOT NULL,
    updated_at  text NOT NULL,
    resolved_at text
);
CREATE INDEX progress_project ON progress(team_project, project_id, status, id);
CREATE INDEX progress_task ON progress(task_id) WHERE task_id IS NOT NULL;

CREATE TABLE decisions (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    id           bigserial PRIMARY KEY,
    project_id   bigint NOT NULL,
    number       bigint NOT NULL,
    title        text NOT NULL,
    context      text NOT NULL DEFAULT '',
    decision     text NOT NULL,
    consequences text NOT NULL DEFAULT '',
    status       text NOT NULL CHECK (status IN ('proposed', 'accepted', 'rejected', 'deprecated', 'superseded')),
    supersedes   bigint REFERENCES decisions(id),
    resolution   text,
    created_at   text NOT NULL,
    updated_at   text NOT NULL,
    search       tsvector GENERATED ALWAYS AS (
        to_tsvector('english', title || ' ' || context || ' ' || decision || ' ' || consequences)
    ) STORED,
    UNIQUE (team_project, project_id, number)
);
CREATE INDEX decisions_search ON decisions USING gin(search);

CREATE TABLE checkpoints (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    id         bigserial PRIMARY KEY,
    project_id bigint NOT NULL,
    name       text NOT NULL,
    note       text NOT NULL DEFAULT '',
    state      text NOT NULL,
    created_at text NOT NULL,
    UNIQUE (team_project, project_id, name)
);

CREATE TABLE project_config (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    project_id   bigint NOT NULL,
    key          text NOT NULL,
    value        text NOT NULL,
    PRIMARY KEY (team_project, project_id, key)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tasks', 'task_deps', 'task_events', 'progress', 'decisions',
                             'checkpoints', 'project_config'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I USING (team_project = car_project())
                            WITH CHECK (team_project = car_project())', t || '_project', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO car_app', t);
    END LOOP;
END
$$;
GRANT SELECT ON projects TO car_app;
GRANT USAGE ON SEQUENCE tasks_id_seq, task_events_id_seq, progress_id_seq, decisions_id_seq,
    checkpoints_id_seq TO car_app;
