//! `$CAR_HOME/connectors.json`: what each connector is and which of its tools are enabled. It
//! holds names, never secret values (header and environment values live in the keychain, see
//! [`crate::secrets`]). Every change is a read-modify-write under an exclusive lock on
//! `connectors.json.lock`, written atomically, so concurrent `car` processes never lose one
//! another's changes and readers never see a torn file.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConnectorError;

/// The file's format version; a newer one is refused rather than rewritten.
pub const FORMAT_VERSION: u32 = 1;

/// The default time bound of a remote call, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConnectorsFile {
    pub version: u32,
    #[serde(default)]
    pub connectors: Vec<Connector>,
}

impl Default for ConnectorsFile {
    fn default() -> Self {
        ConnectorsFile {
            version: FORMAT_VERSION,
            connectors: Vec::new(),
        }
    }
}

/// How CAR reaches a connector's server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Endpoint {
    /// Streamable HTTP at `url`; `headers` are the names of headers whose values are secrets.
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<String>,
    },
    /// A child process speaking MCP on stdin/stdout; `env` are the names of variables whose
    /// values are secrets.
    Stdio {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
}

impl Endpoint {
    /// The URL, or the command line, for listings.
    pub fn target(&self) -> String {
        match self {
            Endpoint::Http { url, .. } => url.clone(),
            Endpoint::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// A tool the server offers, as last discovered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
    /// The server's annotations (`readOnlyHint`, `destructiveHint`, …) as it sent them.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub annotations: Value,
}

/// The OAuth client CAR registered (or was given) for a connector: public metadata only. The
/// tokens and any client secret are in the keychain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OAuthClient {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `dynamic` (RFC 7591) or `preregistered`.
    #[serde(default)]
    pub registration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

/// One connector.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Connector {
    pub slug: String,
    pub name: String,
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// Seconds a call may run before it is cancelled (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Names of the enabled tools (the server's names, not the `mcp_…` ones).
    #[serde(default)]
    pub enabled: BTreeSet<String>,
    /// The tools as last discovered.
    #[serde(default)]
    pub tools: Vec<RemoteTool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthClient>,
    pub added_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl Connector {
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS))
    }

    /// The registry name of one of its tools.
    pub fn canonical(&self, tool: &str) -> String {
        canonical(&self.slug, tool)
    }
}

/// `mcp_<slug>_<tool>`, with every character outside `A-Z a-z 0-9 _ -` of the server's tool
/// name turned into `_` (hosts such as Claude Code accept only those in tool names; a server may
/// use dots or slashes).
pub fn canonical(slug: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("mcp_{slug}_{tool}")
}

/// A connector's slug from its name: lowercase ASCII letters and digits, other runs become `-`.
pub fn slugify(name: &str) -> Result<String, ConnectorError> {
    let mut slug = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        return Err(ConnectorError::Invalid(format!(
            "connector name '{name}' has no letters or digits; pick a name like 'github' or 'linear'"
        )));
    }
    if slug.len() > 40 {
        return Err(ConnectorError::Invalid(format!(
            "connector name '{name}' is too long (its slug '{slug}' has {} characters; at most 40)",
            slug.len()
        )));
    }
    Ok(slug)
}

/// Where the file is.
pub fn path(car_home: &Path) -> PathBuf {
    car_home.join("connectors.json")
}

/// Reads the file (a missing one is empty).
pub fn load(car_home: &Path) -> Result<ConnectorsFile, ConnectorError> {
    let path = path(car_home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConnectorsFile::default()),
        Err(e) => {
            return Err(ConnectorError::Io(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    parse(&path, &text)
}

fn parse(path: &Path, text: &str) -> Result<ConnectorsFile, ConnectorError> {
    let file: ConnectorsFile = serde_json::from_str(text).map_err(|e| {
        ConnectorError::Config(format!(
            "{} is not valid ({e}); fix or remove it (it holds no secrets)",
            path.display()
        ))
    })?;
    if file.version > FORMAT_VERSION {
        return Err(ConnectorError::Config(format!(
            "{} has format version {}, newer than this car understands ({FORMAT_VERSION}); upgrade car",
            path.display(),
            file.version
        )));
    }
    Ok(file)
}

/// Applies `change` to the file under an exclusive lock and writes the result atomically. When
/// `change` fails nothing is written.
pub fn update<T>(
    car_home: &Path,
    change: impl FnOnce(&mut ConnectorsFile) -> Result<T, ConnectorError>,
) -> Result<T, ConnectorError> {
    let _lock = lock(car_home)?;
    let mut file = load(car_home)?;
    let before = file.clone();
    let out = change(&mut file)?;
    if file != before {
        let mut text = serde_json::to_string_pretty(&file)
            .map_err(|e| ConnectorError::Io(format!("cannot encode connectors.json: {e}")))?;
        text.push('\n');
        let path = path(car_home);
        crate::home::write_atomic(&path, text.as_bytes())
            .map_err(|e| ConnectorError::Io(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(out)
}

/// Holds the exclusive lock on `connectors.json.lock` until dropped.
pub(crate) fn lock(car_home: &Path) -> Result<File, ConnectorError> {
    std::fs::create_dir_all(car_home)
        .map_err(|e| ConnectorError::Io(format!("cannot create {}: {e}", car_home.display())))?;
    let path = car_home.join("connectors.json.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| ConnectorError::Io(format!("cannot open {}: {e}", path.display())))?;
    file.lock()
        .map_err(|e| ConnectorError::Io(format!("cannot lock {}: {e}", path.display())))?;
    Ok(file)
}

impl ConnectorsFile {
    pub fn get(&self, slug: &str) -> Option<&Connector> {
        self.connectors.iter().find(|c| c.slug == slug)
    }

    pub fn get_mut(&mut self, slug: &str) -> Result<&mut Connector, ConnectorError> {
        let known = self.slugs();
        self.connectors
            .iter_mut()
            .find(|c| c.slug == slug)
            .ok_or_else(|| ConnectorError::unknown(slug, &known))
    }

    pub fn slugs(&self) -> Vec<String> {
        self.connectors.iter().map(|c| c.slug.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lowercase_words_joined_by_dashes() {
        assert_eq!(slugify("GitHub").unwrap(), "github");
        assert_eq!(slugify("  My Linear (work) ").unwrap(), "my-linear-work");
        assert_eq!(slugify("a__b").unwrap(), "a-b");
        assert!(slugify("!!!").is_err());
        assert!(slugify(&"x".repeat(41)).is_err());
    }

    #[test]
    fn canonical_names_use_only_characters_hosts_accept() {
        assert_eq!(canonical("gh", "search_issues"), "mcp_gh_search_issues");
        assert_eq!(canonical("gh", "get-sum"), "mcp_gh_get-sum");
        assert_eq!(
            canonical("docs", "files.read/all é"),
            "mcp_docs_files_read_all__"
        );
    }

    #[test]
    fn a_newer_format_is_refused_and_a_broken_file_named() {
        let err = parse(Path::new("c.json"), r#"{"version": 9}"#).unwrap_err();
        assert!(err.to_string().contains("upgrade car"), "{err}");
        let err = parse(Path::new("c.json"), "{").unwrap_err();
        assert!(err.to_string().contains("c.json is not valid"), "{err}");
    }

    #[test]
    fn a_failed_change_writes_nothing() {
        let home = tempfile::tempdir().unwrap();
        let err = update(home.path(), |file| {
            file.connectors.clear();
            Err::<(), _>(ConnectorError::Invalid("no".into()))
        });
        assert!(err.is_err());
        assert!(!path(home.path()).exists());
    }

    #[test]
    fn the_endpoint_is_flattened_into_the_entry() {
        let c = Connector {
            slug: "e".into(),
            name: "e".into(),
            endpoint: Endpoint::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "srv".into()],
                env: vec!["API_KEY".into()],
            },
            timeout_secs: None,
            enabled: BTreeSet::new(),
            tools: vec![],
            oauth: None,
            added_at: "t".into(),
            refreshed_at: None,
            last_error: None,
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["transport"], "stdio");
        assert_eq!(v["env"], serde_json::json!(["API_KEY"]));
        assert_eq!(c.endpoint.target(), "npx -y srv");
        let back: Connector = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
