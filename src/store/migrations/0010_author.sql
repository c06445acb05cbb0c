-- 0010: who made a call. On a team server, the user whose token the call came with; the audit
-- log then answers "who changed this fact, closed this task, and when, through which tool".
-- Null where CAR serves one person (the CLI, car-mcp, a loopback car-server).
ALTER TABLE executions ADD COLUMN author TEXT;
