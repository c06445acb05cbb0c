-- 0008: each memory entry's meaning, as a vector of the embedding model compiled into CAR
-- (src/memory/embed.rs). Written in the same transaction as the entry; a database from before
-- this migration is backfilled on first open (resumably: whatever lacks a vector of the current
-- model gets one), and a vector of another model is recomputed, never compared.
CREATE TABLE memory_vectors (
    node_id TEXT PRIMARY KEY REFERENCES memory_nodes(id) ON DELETE CASCADE,
    model   TEXT NOT NULL,            -- embed::model_id(): the table's dimensions and digest
    vector  BLOB NOT NULL             -- f32 scale (little-endian), then one int8 per dimension
);
