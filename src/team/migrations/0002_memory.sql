-- 0002: a project's memory on the team database, in the tables SQLite has (src/store/migrations
-- 0001, 0002, 0003, 0007, 0008), so the same statements run on both (src/store/sql.rs).
--
-- What differs, and holds for every table of a project's data from here on:
-- - `team_project` names the project a row belongs to. It is filled in from the transaction's
--   `car.project` (set by the server per transaction, never by a statement of a capability),
--   and every unique key starts with it: ids are per project, as in a project's own car.db.
-- - Row-level security, forced, shows and admits only rows of the transaction's project, so a
--   statement that forgot its filter still sees nothing of another project.
-- - `car_app`, the role every project transaction runs as, reads and writes these tables and
--   nothing else.
-- - Sequences are shared by all projects: a project's numbers are increasing, not dense.
CREATE FUNCTION car_project() RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('car.project', true), '')::bigint $$;

CREATE TABLE meta (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    key          text NOT NULL,
    value        text NOT NULL,
    PRIMARY KEY (team_project, key)
);

CREATE TABLE memory_nodes (
    team_project     bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    seq              bigserial NOT NULL UNIQUE,
    id               text NOT NULL,
    project_id       bigint,
    tenant           text NOT NULL DEFAULT '',
    kind             text NOT NULL,
    subject          text NOT NULL,
    subject_key      text NOT NULL,
    body             text NOT NULL,
    tags             text NOT NULL DEFAULT '[]',
    confidence       text,
    source           text,
    created_at       text NOT NULL,
    superseded_by    text,
    invalidated_by   text,
    injections       bigint NOT NULL DEFAULT 0,
    invalidated_note text,
    PRIMARY KEY (team_project, id)
);
CREATE INDEX memory_nodes_subject ON memory_nodes(team_project, project_id, tenant, subject_key)
    WHERE superseded_by IS NULL;
CREATE INDEX memory_nodes_seq ON memory_nodes(team_project, seq);
CREATE INDEX memory_nodes_superseded_by ON memory_nodes(team_project, superseded_by)
    WHERE superseded_by IS NOT NULL;
CREATE INDEX memory_nodes_invalidated_by ON memory_nodes(team_project, invalidated_by)
    WHERE invalidated_by IS NOT NULL;

CREATE TABLE memory_edges (
    team_project bigint NOT NULL DEFAULT car_project(),
    src          text NOT NULL,
    dst          text NOT NULL,
    kind         text NOT NULL,
    weight       double precision NOT NULL,
    PRIMARY KEY (team_project, src, dst, kind),
    FOREIGN KEY (team_project, src) REFERENCES memory_nodes(team_project, id) ON DELETE CASCADE,
    FOREIGN KEY (team_project, dst) REFERENCES memory_nodes(team_project, id) ON DELETE CASCADE
);
CREATE INDEX memory_edges_dst ON memory_edges(team_project, dst);

CREATE TABLE memory_changes (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    seq          bigserial PRIMARY KEY,
    node_id      text NOT NULL
);
CREATE INDEX memory_changes_project ON memory_changes(team_project, seq);

CREATE TABLE memory_status (
    team_project bigint NOT NULL DEFAULT car_project() REFERENCES car_projects(id) ON DELETE CASCADE,
    project_id   bigint,
    tenant       text NOT NULL DEFAULT '',
    body         text NOT NULL,
    updated_at   text NOT NULL
);
CREATE UNIQUE INDEX memory_status_slot ON memory_status(team_project, coalesce(project_id, 0), tenant);

CREATE TABLE memory_vectors (
    team_project bigint NOT NULL DEFAULT car_project(),
    node_id      text NOT NULL,
    model        text NOT NULL,
    vector       bytea NOT NULL,
    PRIMARY KEY (team_project, node_id),
    FOREIGN KEY (team_project, node_id) REFERENCES memory_nodes(team_project, id) ON DELETE CASCADE
);

-- A committed memory write tells every listening instance `<project>:<seq>` (notifications are
-- delivered at commit, in commit order), so their indexes follow without polling.
CREATE FUNCTION car_memory_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('car_memory', NEW.team_project || ':' || NEW.seq);
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_changes_notify AFTER INSERT ON memory_changes
    FOR EACH ROW EXECUTE FUNCTION car_memory_changed();

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['meta', 'memory_nodes', 'memory_edges', 'memory_changes',
                             'memory_status', 'memory_vectors'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON %I USING (team_project = car_project())
                            WITH CHECK (team_project = car_project())', t || '_project', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO car_app', t);
    END LOOP;
END
$$;
GRANT USAGE ON SEQUENCE memory_nodes_seq_seq, memory_changes_seq_seq TO car_app;
