//! Logging for every CAR process: `tracing` to stderr (or a rotating file for car-server),
//! filtered by `RUST_LOG`, default warnings only. stdout stays the protocol's.

use crate::home;

/// Sets up stderr logging (`RUST_LOG`, default warnings only). stdout stays the protocol's.
pub fn init_logging() {
    init_logging_to(None);
}

/// Sets up logging to `log` (a rotating file) instead of stderr when given.
pub fn init_logging_to(log: Option<crate::server::logfile::LogWriter>) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(home::env::RUST_LOG)
        // rmcp logs transport failures at error level that CAR reports itself, better worded.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"));
    // rmcp's OAuth module logs the authorization code and token-endpoint details at debug:
    // never below info, whatever RUST_LOG says.
    let filter = match "rmcp::transport::auth=info".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let writer = match log {
        Some(log) => tracing_subscriber::fmt::writer::BoxMakeWriter::new(log),
        None => tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter)
        .with_ansi(false)
        .try_init();
}
