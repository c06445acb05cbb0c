//! `car keys`: the model API keys `car do` uses, kept in the OS keychain (the secrets layer of
//! the connectors) under `model/<provider>`. The environment (`ANTHROPIC_API_KEY`,
//! `OPENAI_API_KEY`) wins over the keychain.

use std::io::BufRead;
use std::process::ExitCode;

use clap::Subcommand;
use serde::Serialize;

use super::{finish_typed, Env, Failure};
use crate::agent::model::Provider;
use crate::secrets::Secrets;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Store a provider's API key, read from stdin (so it stays out of the shell's history).
    #[command(after_help = "Example:\n  printf %s \"$KEY\" | car keys set anthropic")]
    Set {
        /// Whose key: anthropic or openai.
        #[arg(value_enum)]
        provider: Provider,
    },
    /// Which providers have a stored key (never the keys).
    List,
    /// Remove a provider's stored key.
    Delete {
        /// Whose key: anthropic or openai.
        #[arg(value_enum)]
        provider: Provider,
    },
}

use crate::app::launch::key_account as account;

#[derive(Debug, Serialize)]
struct Stored {
    provider: &'static str,
    stored: bool,
    backend: &'static str,
}

#[derive(Debug, Serialize)]
struct Listing {
    keys: Vec<Stored>,
}

pub fn run(env: &Env, command: KeysCommand) -> ExitCode {
    let secrets = match Secrets::open(env.home.root()) {
        Ok(secrets) => secrets,
        Err(e) => {
            return finish_typed(
                env.json,
                "keys",
                Err::<Listing, _>(Failure::new("keychain", e.to_string())),
                |_| String::new(),
            )
        }
    };
    match command {
        KeysCommand::Set { provider } => {
            let mut line = String::new();
            let read = std::io::stdin().lock().read_line(&mut line);
            let key = line.trim().to_string();
            let result = match read {
                Ok(_) if !key.is_empty() => secrets
                    .set(&account(provider), &key)
                    .map(|()| Stored {
                        provider: provider.as_str(),
                        stored: true,
                        backend: secrets.backend(),
                    })
                    .map_err(|e| Failure::new("keychain", e.to_string())),
                _ => Err(Failure::usage(format!(
                    "no key on stdin; pipe it in: printf %s \"$KEY\" | car keys set {}",
                    provider.as_str()
                ))),
            };
            finish_typed(env.json, "keys.set", result, |s| {
                format!("stored the {} key in {}\n", s.provider, s.backend)
            })
        }
        KeysCommand::List => {
            let keys = [Provider::Anthropic, Provider::Openai]
                .into_iter()
                .map(|p| Stored {
                    provider: p.as_str(),
                    stored: matches!(secrets.get(&account(p)), Ok(Some(_))),
                    backend: secrets.backend(),
                })
                .collect();
            finish_typed(env.json, "keys.list", Ok(Listing { keys }), |l| {
                l.keys
                    .iter()
                    .map(|k| {
                        format!(
                            "{}: {}\n",
                            k.provider,
                            if k.stored { "stored" } else { "none" }
                        )
                    })
                    .collect()
            })
        }
        KeysCommand::Delete { provider } => {
            let result = secrets
                .delete(&account(provider))
                .map(|deleted| Stored {
                    provider: provider.as_str(),
                    stored: !deleted,
                    backend: secrets.backend(),
                })
                .map_err(|e| Failure::new("keychain", e.to_string()));
            finish_typed(env.json, "keys.delete", result, |s| {
                format!("removed the {} key\n", s.provider)
            })
        }
    }
}
