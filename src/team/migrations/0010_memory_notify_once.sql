-- 0010: a committed memory write notifies once a statement, not once a row. A write group logs
-- its changes in multi-row inserts, and each used to send a notification per row to every
-- listening instance, which only keeps the newest (`<project>:<seq>`). The statement's newest
-- change per project says the same.
DROP TRIGGER memory_changes_notify ON memory_changes;
DROP FUNCTION car_memory_changed();
CREATE FUNCTION car_memory_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('car_memory', team_project || ':' || max(seq))
        FROM new_changes GROUP BY team_project;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_changes_notify AFTER INSERT ON memory_changes
    REFERENCING NEW TABLE AS new_changes
    FOR EACH STATEMENT EXECUTE FUNCTION car_memory_changed();
