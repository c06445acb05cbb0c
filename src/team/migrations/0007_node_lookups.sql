-- 0007: a node is found by its key, however small the table was when a plan was made.
--
-- The foreign keys of memory_edges and memory_vectors check `team_project = $1 AND id = $2` on
-- memory_nodes. On a young table both the primary key (team_project, id) and
-- memory_nodes_seq (team_project, seq) matched that lookup at the same estimated cost, and a
-- connection that planned it then kept the plan that walks every node of the project by seq:
-- writes slowed as the project grew (2.3 ms per check at 3,000 nodes). The unique index on
-- seq alone (from `seq bigserial UNIQUE`) already orders a project's nodes for loading.
DROP INDEX memory_nodes_seq;
