//! A small driver for `car::secrets`, so the integration tests can exercise the real keychains
//! from separate processes before any `car` command stores secrets.
//!
//! `secrets set ACCOUNT` (the value on stdin), `get ACCOUNT`, `delete ACCOUNT`,
//! `delete-prefix PREFIX`, `accounts`. Prints one JSON object on stdout; errors go to stderr
//! with exit code 1 (2 for bad usage). The store is chosen by `CAR_SECRET_STORE`; the home by
//! `CAR_HOME`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)] // test, bench and example code may unwrap and print

use std::io::Read;
use std::process::ExitCode;

use car::secrets::Secrets;
use car::Home;
use serde_json::{json, Value};

fn run(command: &str, arg: Option<&str>) -> anyhow::Result<Value> {
    let home = Home::from_env()?;
    let secrets = Secrets::open(home.root())?;
    let backend = secrets.backend();
    let account = || arg.ok_or_else(|| anyhow::anyhow!("{command} needs an account"));
    Ok(match command {
        "set" => {
            let mut value = String::new();
            std::io::stdin().read_to_string(&mut value)?;
            secrets.set(account()?, &value)?;
            json!({"backend": backend, "account": account()?, "stored": true})
        }
        "get" => {
            json!({"backend": backend, "account": account()?, "value": secrets.get(account()?)?})
        }
        "delete" => {
            json!({"backend": backend, "account": account()?, "deleted": secrets.delete(account()?)?})
        }
        "delete-prefix" => {
            json!({"backend": backend, "prefix": account()?, "deleted": secrets.delete_prefix(account()?)?})
        }
        "accounts" => json!({"backend": backend, "accounts": secrets.accounts()?}),
        other => anyhow::bail!("unknown command {other:?}"),
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprintln!("usage: secrets set|get|delete|delete-prefix ACCOUNT | accounts");
        return ExitCode::from(2);
    };
    match run(command, args.get(1).map(String::as_str)) {
        Ok(doc) => {
            println!("{doc}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
