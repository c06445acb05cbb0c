-- 0001: a team's people and projects, and the team's audit log.
-- Projects are what a team server serves (`/mcp/<project>`); users hold a token (stored as its
-- SHA-256, never itself), a role of their own (`admin` manages the team) and a role per project
-- they are granted (`member` reads and writes, `reader` reads).
CREATE TABLE car_projects (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE car_users (
    id               bigserial PRIMARY KEY,
    name             text NOT NULL UNIQUE,
    role             text NOT NULL CHECK (role IN ('admin', 'member', 'reader')),
    token_hash       bytea NOT NULL UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    token_rotated_at timestamptz
);

CREATE TABLE car_grants (
    user_id    bigint NOT NULL REFERENCES car_users(id) ON DELETE CASCADE,
    project_id bigint NOT NULL REFERENCES car_projects(id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('admin', 'member', 'reader')),
    PRIMARY KEY (user_id, project_id)
);
CREATE INDEX car_grants_project ON car_grants(project_id);

-- The team's execution log: every call, stamped with its author. Row-level security keeps each
-- project's rows to sessions that set `car.project` to it (per transaction, by the server), so a
-- query that forgot its filter still sees nothing of another project.
CREATE TABLE car_executions (
    id          text PRIMARY KEY,
    project_id  bigint NOT NULL REFERENCES car_projects(id) ON DELETE CASCADE,
    author      text,
    tool        text NOT NULL,
    status      text NOT NULL,
    face        text,
    session     text,
    host        text,
    subject     text,
    started_at  timestamptz NOT NULL,
    duration_ms bigint,
    error       text
);
CREATE INDEX car_executions_started ON car_executions(project_id, started_at);
ALTER TABLE car_executions ENABLE ROW LEVEL SECURITY;
ALTER TABLE car_executions FORCE ROW LEVEL SECURITY;
CREATE POLICY car_executions_project ON car_executions
    USING (project_id = nullif(current_setting('car.project', true), '')::bigint)
    WITH CHECK (project_id = nullif(current_setting('car.project', true), '')::bigint);

-- The application's role: what every transaction of a project's data runs as (`SET LOCAL ROLE`),
-- so row-level security holds even when CAR connects as a superuser or as the tables' owner.
DO $$
BEGIN
    CREATE ROLE car_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
EXCEPTION WHEN duplicate_object THEN
    NULL; -- another database of this cluster made it
END
$$;
GRANT car_app TO CURRENT_USER;
GRANT USAGE ON SCHEMA public TO car_app;
-- The audit log is appended to and read, never rewritten.
GRANT SELECT, INSERT ON car_executions TO car_app;
