//! CAR's integration tests: one binary that drives the real `car`, `car-mcp` and
//! `car-memgine-eval` binaries (and the embedding example) with a fresh CAR_HOME per test, and the
//! real Claude Code CLI loading, installing and running the plugin in `plugins/car`.

mod admin;
mod bad_input;
mod claude;
mod cli;
mod concurrency;
mod eval;
mod graph;
mod install;
mod interop;
mod mcp;
mod plan;
mod plugin;
mod policy;
mod preset;
mod project;
mod skills;
mod support;
