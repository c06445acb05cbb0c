-- 0003: the team's execution log is SQLite's `executions` (src/store/migrations 0001, 0009,
-- 0010) under the rules of 0002, so the runtime records calls on either store with the same
-- statements; it replaces 0001's car_executions. `rowid` stands for SQLite's implicit row id
-- (the order rows were written in, for ties of `started_at`).
DROP TABLE car_executions;

CREATE TABLE executions (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    rowid        bigserial NOT NULL,
    id           text NOT NULL,
    tool         text NOT NULL,
    status       text NOT NULL,
    request_id   text,
    idem_key     text,
    face         text,
    started_at   text NOT NULL,
    duration_ms  bigint,
    error        text,
    result       text,
    session      text,
    host         text,
    subject      text,
    author       text,
    PRIMARY KEY (team_project, id),
    UNIQUE (team_project, idem_key)
);
CREATE INDEX executions_started ON executions(team_project, started_at);
CREATE INDEX executions_subject ON executions(team_project, subject) WHERE subject IS NOT NULL;
CREATE INDEX executions_session ON executions(team_project, session) WHERE session IS NOT NULL;

ALTER TABLE executions ENABLE ROW LEVEL SECURITY;
ALTER TABLE executions FORCE ROW LEVEL SECURITY;
CREATE POLICY executions_project ON executions
    USING (team_project = car_project()) WITH CHECK (team_project = car_project());
-- Calls are recorded and finished (a keyed call's row is updated when it ends), never deleted.
GRANT SELECT, INSERT, UPDATE ON executions TO car_app;
GRANT USAGE ON SEQUENCE executions_rowid_seq TO car_app;
