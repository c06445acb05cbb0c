-- 0009: what the audit view asks of the execution log. `session` is the connection a call came
-- through (an MCP session), `host` the agent that made it (the MCP client's name, or the host a
-- hook decision came from), `subject` what it wrote (the memory entry a write created), so an
-- entry's page can say who wrote it. The policy hook's denies and warnings join the log from
-- its decision file (face `hook`); `gate_log` in `meta` holds how far that file was read.
ALTER TABLE executions ADD COLUMN session TEXT;
ALTER TABLE executions ADD COLUMN host TEXT;
ALTER TABLE executions ADD COLUMN subject TEXT;
CREATE INDEX executions_subject ON executions(subject) WHERE subject IS NOT NULL;
CREATE INDEX executions_session ON executions(session) WHERE session IS NOT NULL;
