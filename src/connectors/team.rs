//! The team file `.car/connectors.toml`: connectors a team shares, without secrets. It is found
//! by walking up from the project directory; `car connector sync` adds the ones this CAR home
//! lacks (each user authorizes their own: `car connector login`).
//!
//! ```toml
//! [[connector]]
//! name = "docs"
//! url = "https://mcp.example.com/mcp"
//!
//! [[connector]]
//! name = "everything"
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything"]
//! timeout_secs = 60
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::config::Endpoint;
use super::{ConnectorError, NewConnector};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamFile {
    #[serde(default)]
    connector: Vec<TeamEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamEntry {
    name: String,
    url: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    timeout_secs: Option<u64>,
}

/// The nearest `.car/connectors.toml` at or above `start`.
pub fn find(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(".car").join("connectors.toml"))
        .find(|path| path.is_file())
}

/// Reads a team file into connectors to add (no secrets: none can be in the file).
pub fn read(path: &Path) -> Result<Vec<NewConnector>, ConnectorError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConnectorError::Io(format!("cannot read {}: {e}", path.display())))?;
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Vec<NewConnector>, ConnectorError> {
    let file: TeamFile = toml::from_str(text)
        .map_err(|e| ConnectorError::Config(format!("{}: {e}", path.display())))?;
    file.connector
        .into_iter()
        .map(|entry| {
            let endpoint = match (entry.url, entry.command) {
                (Some(url), None) if entry.args.is_empty() => Endpoint::Http {
                    url,
                    headers: Vec::new(),
                },
                (None, Some(command)) => Endpoint::Stdio {
                    command,
                    args: entry.args,
                    env: Vec::new(),
                },
                _ => {
                    return Err(ConnectorError::Config(format!(
                        "{}: connector '{}' needs either `url` or `command` (with optional `args`), not both",
                        path.display(),
                        entry.name
                    )))
                }
            };
            Ok(NewConnector {
                name: entry.name,
                endpoint,
                secrets: Vec::new(),
                timeout_secs: entry.timeout_secs,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_need_a_url_or_a_command_and_nothing_secret() {
        let ok = parse(
            Path::new("t.toml"),
            "[[connector]]\nname = \"a\"\nurl = \"http://x/mcp\"\n[[connector]]\nname = \"b\"\ncommand = \"srv\"\nargs = [\"--stdio\"]\n",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert!(matches!(ok[1].endpoint, Endpoint::Stdio { ref args, .. } if args == &["--stdio"]));
        let both = parse(
            Path::new("t.toml"),
            "[[connector]]\nname = \"a\"\nurl = \"u\"\ncommand = \"c\"\n",
        );
        assert!(both.unwrap_err().to_string().contains("not both"));
        let secret = parse(
            Path::new("t.toml"),
            "[[connector]]\nname = \"a\"\nurl = \"u\"\ntoken = \"s3cret\"\n",
        );
        assert!(secret.unwrap_err().to_string().contains("unknown field"));
    }

    #[test]
    fn the_file_is_found_by_walking_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".car")).unwrap();
        std::fs::write(dir.path().join(".car/connectors.toml"), "").unwrap();
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            find(&deep).unwrap(),
            dir.path().join(".car/connectors.toml")
        );
    }
}
