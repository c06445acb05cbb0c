//! CAR's integration tests: one binary that drives the real `car`, `car-mcp` and
//! `car-memgine-eval` binaries (and the embedding example) with a fresh CAR_HOME per test.

mod bad_input;
mod cli;
mod concurrency;
mod eval;
mod graph;
mod interop;
mod mcp;
mod plan;
mod policy;
mod skills;
mod support;
