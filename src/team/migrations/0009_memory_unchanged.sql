-- 0009: a writer that planned a memory write against its index before the transaction (one
-- round trip for the whole write) asks, under the project's write lock, that no change was
-- logged past the last one its index took in. If one was, the transaction fails with SQLSTATE
-- CAR01 before any of its statements runs, and the writer catches up and plans again; if none
-- was, it answers true.
CREATE FUNCTION car_memory_unchanged(after bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- The newest change, not "any change past `after`": a kept plan for `seq > $1` guesses a
    -- third of the log matches, and scans the whole log for a row that is not there.
    IF (SELECT max(seq) FROM memory_changes WHERE team_project = car_project()) > after THEN
        RAISE EXCEPTION 'the memory changed after change %', after USING ERRCODE = 'CAR01';
    END IF;
    RETURN true;
END
$$;
