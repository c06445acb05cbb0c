//! CAR's integration tests: one binary that drives the real `car`, `car-mcp` and
//! `car-memgine-eval` binaries (and the embedding example) with a fresh CAR_HOME per test, and the
//! real Claude Code CLI loading, installing and running the plugin in `plugins/car`, the secrets
//! layer against a real gnome-keyring on a private D-Bus session, and connectors against real
//! MCP servers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

mod admin;
mod agent;
mod bad_input;
mod claude;
mod claude_secrets;
mod cli;
mod concurrency;
mod conformance;
mod connectors;
mod dashboard;
mod eval;
mod gate;
mod graph;
mod hooks;
mod hosts;
mod inproc_mcp;
mod install;
mod interop;
mod keychain;
mod many_clients;
mod mcp;
mod meaning;
mod oauth;
mod plan;
mod plugin;
mod policy;
mod preset;
mod project;
mod real_hosts;
mod server;
mod setup;
mod skills;
mod support;
mod team;
