//! The files the secrets layer keeps under `CAR_HOME`: the lock that serialises every change
//! across processes, the index of account names, and the opt-in plaintext store.
//!
//! Every file is replaced atomically (a temporary file in the same directory, created with mode
//! 0600 on Unix, synced, then renamed over the old one), so a reader never sees half a file and
//! a crash leaves either the old or the new version.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{SecretError, SERVICE};

/// An exclusive, cross-process lock on `$CAR_HOME/secrets.lock`, held while a change to the
/// index (and to the store behind it) is made. Released on drop.
pub(super) struct ChangeLock {
    _file: File,
}

impl ChangeLock {
    pub(super) fn acquire(path: &Path) -> Result<ChangeLock, SecretError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| SecretError::Io {
                action: "create the directory",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|source| SecretError::Io {
                action: "open the lock file",
                path: path.to_path_buf(),
                source,
            })?;
        file.lock().map_err(|source| SecretError::Io {
            action: "lock",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(ChangeLock { _file: file })
    }
}

/// Reads a JSON file, or `None` when it does not exist yet.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, SecretError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SecretError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    // Only the position: serde_json's messages can quote the value they rejected.
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| SecretError::Corrupt {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
        })
}

/// Replaces `path` with `value` as JSON, atomically, readable by the owner only.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), SecretError> {
    let io = |action: &'static str| {
        let path = path.to_path_buf();
        move |source| SecretError::Io {
            action,
            path,
            source,
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
    // tempfile creates the file with mode 0600 on Unix.
    let mut tmp = tempfile::Builder::new()
        .prefix(".secrets-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io("create a temporary file beside"))?;
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| SecretError::Io {
        action: "serialise",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    tmp.write_all(&bytes).map_err(io("write"))?;
    tmp.write_all(b"\n").map_err(io("write"))?;
    tmp.as_file().sync_all().map_err(io("sync"))?;
    tmp.persist(path)
        .map_err(|e| SecretError::Io {
            action: "replace",
            path: path.to_path_buf(),
            source: e.error,
        })
        .map(drop)
}

/// `$CAR_HOME/secret-index.json`: the names of the accounts CAR has stored, never a value.
/// Keychains cannot always enumerate their items, so this is how `delete_prefix` finds them.
#[derive(Debug, Default, Serialize, Deserialize)]
struct IndexFile {
    service: String,
    accounts: BTreeSet<String>,
}

pub(super) struct Index {
    path: PathBuf,
}

impl Index {
    pub(super) fn new(path: PathBuf) -> Index {
        Index { path }
    }

    /// The account names recorded, sorted.
    pub(super) fn accounts(&self) -> Result<BTreeSet<String>, SecretError> {
        Ok(read_json::<IndexFile>(&self.path)?
            .map(|file| file.accounts)
            .unwrap_or_default())
    }

    /// Records `account`; call with the [`ChangeLock`] held.
    pub(super) fn insert(&self, account: &str) -> Result<(), SecretError> {
        let mut accounts = self.accounts()?;
        if accounts.insert(account.to_string()) {
            self.write(accounts)?;
        }
        Ok(())
    }

    /// Forgets `accounts`; call with the [`ChangeLock`] held.
    pub(super) fn remove<'a>(
        &self,
        gone: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), SecretError> {
        let mut accounts = self.accounts()?;
        let before = accounts.len();
        for account in gone {
            accounts.remove(account);
        }
        if accounts.len() != before {
            self.write(accounts)?;
        }
        Ok(())
    }

    fn write(&self, accounts: BTreeSet<String>) -> Result<(), SecretError> {
        write_json(
            &self.path,
            &IndexFile {
                service: SERVICE.to_string(),
                accounts,
            },
        )
    }
}

/// `$CAR_HOME/secrets.json`: the plaintext store chosen with `CAR_SECRET_STORE=file`.
/// `{"service": "car", "secrets": {"<account>": "<value>"}}`, mode 0600.
#[derive(Default, Serialize, Deserialize)]
struct SecretsFile {
    service: String,
    secrets: BTreeMap<String, String>,
}

pub(super) struct FileStore {
    path: PathBuf,
}

impl FileStore {
    pub(super) fn new(path: PathBuf) -> FileStore {
        FileStore { path }
    }

    fn load(&self) -> Result<SecretsFile, SecretError> {
        Ok(read_json(&self.path)?.unwrap_or_else(|| SecretsFile {
            service: SERVICE.to_string(),
            secrets: BTreeMap::new(),
        }))
    }

    pub(super) fn get(&self, account: &str) -> Result<Option<String>, SecretError> {
        Ok(self.load()?.secrets.remove(account))
    }

    /// Call with the [`ChangeLock`] held.
    pub(super) fn set(&self, account: &str, value: &str) -> Result<(), SecretError> {
        let mut file = self.load()?;
        file.secrets.insert(account.to_string(), value.to_string());
        write_json(&self.path, &file)
    }

    /// Call with the [`ChangeLock`] held.
    pub(super) fn delete(&self, account: &str) -> Result<bool, SecretError> {
        let mut file = self.load()?;
        let removed = file.secrets.remove(account).is_some();
        if removed {
            write_json(&self.path, &file)?;
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keeps_names_sorted_and_forgets_removed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::new(dir.path().join("secret-index.json"));
        assert!(index.accounts().unwrap().is_empty());
        index.insert("connector/b/oauth").unwrap();
        index.insert("connector/a/header/X-Key").unwrap();
        index.insert("connector/a/header/X-Key").unwrap();
        assert_eq!(
            index.accounts().unwrap().into_iter().collect::<Vec<_>>(),
            ["connector/a/header/X-Key", "connector/b/oauth"]
        );
        index
            .remove(["connector/a/header/X-Key", "never/there"])
            .unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("secret-index.json")).unwrap())
                .unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"service": "car", "accounts": ["connector/b/oauth"]})
        );
    }

    #[test]
    fn file_store_round_trips_and_is_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home").join("secrets.json");
        let store = FileStore::new(path.clone());
        assert_eq!(store.get("a").unwrap(), None);
        store.set("a", "value-1").unwrap();
        store.set("b", "value-2").unwrap();
        store.set("a", "value-3").unwrap();
        assert_eq!(store.get("a").unwrap().as_deref(), Some("value-3"));
        assert!(store.delete("b").unwrap());
        assert!(!store.delete("b").unwrap());
        assert_eq!(store.get("b").unwrap(), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Only the final file is left: no temporary files beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["secrets.json"]);
    }

    #[test]
    fn corrupt_file_error_does_not_echo_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        let store = FileStore::new(path.clone());
        for text in [
            "{\"service\": \"car\", \"secrets\": {\"a\": \"hunter2-value\"",
            "{\"service\": \"car\", \"secrets\": \"hunter2-value\"}",
        ] {
            std::fs::write(&path, text).unwrap();
            let err = store.get("a").err().unwrap();
            let shown = format!("{err} {err:?}");
            assert!(matches!(err, SecretError::Corrupt { .. }), "{shown}");
            assert!(!shown.contains("hunter2"), "{shown}");
        }
    }
}
