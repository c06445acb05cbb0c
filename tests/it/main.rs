//! CAR's integration tests: one binary that drives the real `car`, `car-mcp` and
//! `car-memgine-eval` binaries (and the embedding example) with a fresh CAR_HOME per test, and the
//! real Claude Code CLI running `car policy-check-hook` as a plugin hook, and the secrets layer
//! against a real gnome-keyring on a private D-Bus session.

mod admin;
mod bad_input;
mod claude_code;
mod cli;
mod concurrency;
mod connectors;
mod eval;
mod graph;
mod interop;
mod keychain;
mod mcp;
mod plan;
mod policy;
mod preset;
mod project;
mod skills;
mod support;
