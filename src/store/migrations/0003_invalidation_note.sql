-- 0003: why an entry needs review. `invalidated_by` names the entry whose arrival invalidated
-- this one (deleting that entry lifts the invalidation); `invalidated_note` says why, and is
-- also set alone when an agent retracts a conclusion outright ("was based on wrong data").
ALTER TABLE memory_nodes ADD COLUMN invalidated_note TEXT;
UPDATE memory_nodes SET invalidated_note = 'its premise ' || invalidated_by || ' was superseded'
    WHERE invalidated_by IS NOT NULL;
