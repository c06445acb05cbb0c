-- 0004: a project's skills on the team database: SQLite's `skills` (src/store/migrations/0004)
-- under 0002's rules. On a team server, skills are the project's (shared by its people), not
-- one person's across projects.
CREATE TABLE skills (
    team_project  bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    id            bigserial PRIMARY KEY,
    name          text NOT NULL,
    version       bigint NOT NULL,
    status        text NOT NULL CHECK (status IN ('active', 'deprecated')),
    code          text NOT NULL,
    platform      text NOT NULL,
    description   text NOT NULL DEFAULT '',
    persona       text NOT NULL DEFAULT '',
    url_pattern   text NOT NULL DEFAULT '',
    task_keywords text NOT NULL DEFAULT '[]',
    domain        text,
    success_count bigint NOT NULL DEFAULT 0,
    fail_count    bigint NOT NULL DEFAULT 0,
    last_used_at  text,
    superseded_by text,
    source        text,
    created_at    text NOT NULL,
    UNIQUE (team_project, name, version)
);
CREATE UNIQUE INDEX skills_active_name ON skills(team_project, name) WHERE status = 'active';

ALTER TABLE skills ENABLE ROW LEVEL SECURITY;
ALTER TABLE skills FORCE ROW LEVEL SECURITY;
CREATE POLICY skills_project ON skills
    USING (team_project = car_project()) WITH CHECK (team_project = car_project());
GRANT SELECT, INSERT, UPDATE, DELETE ON skills TO car_app;
GRANT USAGE ON SEQUENCE skills_id_seq TO car_app;
