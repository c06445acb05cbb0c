-- 0008: a team project's memory is its project's.
--
-- A team server used to write memory without a project (as one person's global entries), so a
-- fact said "global" and a new fact did not replace an older one with its subject once servers
-- wrote the project. Those rows take their team project, and each is logged as changed so
-- every instance's index takes the change in. The owner lifts the forced row-level security
-- for the statements (it sees every project's rows), and forces it again.
ALTER TABLE memory_nodes NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_changes NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_status NO FORCE ROW LEVEL SECURITY;
INSERT INTO memory_changes(team_project, node_id)
    SELECT team_project, id FROM memory_nodes WHERE project_id IS NULL ORDER BY seq;
UPDATE memory_nodes SET project_id = team_project WHERE project_id IS NULL;
UPDATE memory_status s SET project_id = s.team_project
    WHERE s.project_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM memory_status t
                      WHERE t.team_project = s.team_project AND t.project_id = s.team_project
                        AND t.tenant = s.tenant);
ALTER TABLE memory_nodes FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_changes FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_status FORCE ROW LEVEL SECURITY;
