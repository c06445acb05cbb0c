//! Secrets: where CAR keeps the values it must not write into its own files — connector header
//! values (API keys, bearer tokens) and OAuth state. They live in the OS keychain, under the
//! service name `car`; CAR's own files hold only their names.
//!
//! # Stores
//!
//! `CAR_SECRET_STORE` picks the store; unset or `auto` means the OS keychain:
//!
//! | value            | store                                                                  |
//! |------------------|------------------------------------------------------------------------|
//! | `auto` (default) | Linux: `secret-service`; macOS: `macos`; Windows: `windows`            |
//! | `secret-service` | the freedesktop Secret Service on the D-Bus session bus (gnome-keyring, KeePassXC, KWallet) |
//! | `keyutils`       | the Linux kernel key retention service (the user's persistent keyring)  |
//! | `macos`          | the macOS login keychain                                               |
//! | `windows`        | the Windows Credential Manager                                         |
//! | `file`           | **plaintext** JSON at `$CAR_HOME/secrets.json`, mode 0600             |
//!
//! On Linux `auto` never falls back to `keyutils`: kernel keys vanish on reboot (and the
//! persistent keyring expires after a few idle days, `/proc/sys/kernel/keys/persistent_keyring_expiry`),
//! so a header value stored there would silently disappear. Choose it explicitly when that is
//! acceptable (a CI runner, a container). As root in a container the process may have no usable
//! session keyring and gets "access denied"; run CAR under `keyctl session - car …`.
//!
//! The `file` store is an explicit opt-in for machines without any keychain: it is never chosen
//! on its own, and CAR never falls back to memory. When no keychain is reachable, opening the
//! store fails with an error that names the options (start and unlock a Secret Service, use
//! `keyutils`, or set `CAR_SECRET_STORE=file`).
//!
//! # Account names
//!
//! Every item has the service [`SERVICE`] (`car`) and an account name (the Secret Service
//! attribute `username`, so `secret-tool search service car` lists them):
//!
//! - `connector/<slug>/header/<Header-Name>` — the value of one HTTP header a connector sends;
//! - `connector/<slug>/env/<NAME>` — the value of one environment variable a stdio connector's
//!   server is started with;
//! - `connector/<slug>/oauth` — the connector's OAuth state as JSON: access and refresh tokens,
//!   expiry, and the client registration.
//!
//! [`Secrets::delete_prefix`] with `connector/<slug>/` removes everything a connector stored.
//!
//! # Files under `CAR_HOME`
//!
//! - `secret-index.json` — the account names CAR has stored (never a value). Keychains cannot
//!   always enumerate their items; this index is how `delete_prefix` finds them.
//! - `secrets.lock` — a lock held while a secret and the index change, so concurrent `car`
//!   processes never lose an index entry.
//! - `secrets.json` — only with `CAR_SECRET_STORE=file`.
//!
//! Every call blocks (D-Bus round trips); from async code call it inside
//! `tokio::task::spawn_blocking`. Values never appear in errors, `Debug` output or logs.

mod files;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use keyring_core::{CredentialStore, Entry};

use crate::home::env;
use files::{ChangeLock, FileStore, Index};

/// The keychain service name every CAR secret is stored under.
pub const SERVICE: &str = "car";

/// The longest account name accepted (bytes); keychains limit attribute lengths.
const MAX_ACCOUNT_BYTES: usize = 512;

/// Why a secret could not be stored, read or deleted. No variant carries a secret value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// No keychain answered; the message lists what the user can do.
    #[error("no keychain is reachable for CAR's secrets ({reason}). {hint}")]
    Unreachable { reason: String, hint: String },
    /// `CAR_SECRET_STORE` holds a value CAR does not know.
    #[error("CAR_SECRET_STORE={0:?} is not a secret store CAR knows; use one of auto, secret-service, keyutils, macos, windows, file")]
    UnknownStore(String),
    /// The chosen store does not exist on this operating system.
    #[error("the {store} secret store is not available on this operating system; unset CAR_SECRET_STORE to use the OS keychain, or set CAR_SECRET_STORE=file to accept plaintext storage in $CAR_HOME/secrets.json")]
    UnsupportedStore { store: &'static str },
    /// The keychain is there but refused access (locked, or no permission).
    #[error("the {backend} keychain refused access to {account:?} ({reason}). {hint}")]
    Locked {
        backend: &'static str,
        account: String,
        reason: String,
        hint: &'static str,
    },
    /// The keychain failed for another reason.
    #[error("the {backend} keychain failed on {account:?}: {reason}")]
    Backend {
        backend: &'static str,
        account: String,
        reason: String,
    },
    /// The stored bytes are not UTF-8 text (something other than CAR wrote them).
    #[error("the {backend} keychain holds a value for {account:?} under service \"car\" that is not UTF-8 text; delete that item and set it again")]
    NotText {
        backend: &'static str,
        account: String,
    },
    /// The account name cannot be used as a keychain account.
    #[error("invalid secret account name {account:?}: {reason}")]
    InvalidAccount {
        account: String,
        reason: &'static str,
    },
    /// A file under CAR_HOME could not be read or written.
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file under CAR_HOME is not the JSON CAR wrote (its content is not shown: it may hold secrets).
    #[error("{path} is not valid (JSON error at line {line}, column {column}); fix or remove it")]
    Corrupt {
        path: PathBuf,
        line: usize,
        column: usize,
    },
}

/// Which store `CAR_SECRET_STORE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreChoice {
    /// The OS keychain (Secret Service on Linux, the login keychain on macOS, Credential
    /// Manager on Windows).
    Auto,
    SecretService,
    Keyutils,
    Macos,
    Windows,
    /// Plaintext `$CAR_HOME/secrets.json`, mode 0600: only when asked for.
    File,
}

impl FromStr for StoreChoice {
    type Err = SecretError;

    fn from_str(value: &str) -> Result<StoreChoice, SecretError> {
        match value.trim() {
            "" | "auto" => Ok(StoreChoice::Auto),
            "secret-service" => Ok(StoreChoice::SecretService),
            "keyutils" => Ok(StoreChoice::Keyutils),
            "macos" => Ok(StoreChoice::Macos),
            "windows" => Ok(StoreChoice::Windows),
            "file" => Ok(StoreChoice::File),
            other => Err(SecretError::UnknownStore(other.to_string())),
        }
    }
}

impl StoreChoice {
    /// Reads `CAR_SECRET_STORE` (unset means [`StoreChoice::Auto`]).
    pub fn from_env() -> Result<StoreChoice, SecretError> {
        match std::env::var(env::CAR_SECRET_STORE) {
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(StoreChoice::Auto),
            Err(std::env::VarError::NotUnicode(value)) => Err(SecretError::UnknownStore(
                value.to_string_lossy().into_owned(),
            )),
        }
    }
}

/// The store behind a [`Secrets`].
enum Store {
    /// An OS keychain reached through `keyring-core`.
    Keychain {
        name: &'static str,
        store: Arc<CredentialStore>,
    },
    File(FileStore),
    #[cfg(test)]
    Memory(std::sync::Mutex<std::collections::BTreeMap<String, String>>),
}

struct Inner {
    store: Store,
    index: Index,
    lock_path: PathBuf,
    #[cfg(test)]
    _temp: Option<tempfile::TempDir>,
}

impl Inner {
    fn new(store: Store, car_home: &Path) -> Inner {
        Inner {
            store,
            index: Index::new(car_home.join("secret-index.json")),
            lock_path: car_home.join("secrets.lock"),
            #[cfg(test)]
            _temp: None,
        }
    }
}

/// CAR's secrets: a keychain (or the opted-in file) plus the index of names. Cheap to clone;
/// `Send + Sync`.
#[derive(Clone)]
pub struct Secrets {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The store chosen by `CAR_SECRET_STORE` (see the module docs). Fails with
    /// [`SecretError`] when the store is not reachable; never falls back to another store.
    pub fn open(car_home: &Path) -> Result<Secrets, SecretError> {
        Secrets::open_with(car_home, StoreChoice::from_env()?)
    }

    /// Opens the given store (for callers that resolved `CAR_SECRET_STORE` themselves).
    pub fn open_with(car_home: &Path, choice: StoreChoice) -> Result<Secrets, SecretError> {
        let store = match choice {
            StoreChoice::File => Store::File(FileStore::new(car_home.join("secrets.json"))),
            StoreChoice::Auto => open_os_keychain(car_home)?,
            StoreChoice::SecretService => open_secret_service(car_home)?,
            StoreChoice::Keyutils => open_keyutils()?,
            StoreChoice::Macos => open_macos()?,
            StoreChoice::Windows => open_windows()?,
        };
        Ok(Secrets {
            inner: Arc::new(Inner::new(store, car_home)),
        })
    }

    /// An in-memory store with its index in a temporary directory, for unit tests only (not
    /// reachable through `CAR_SECRET_STORE`).
    #[cfg(test)]
    pub fn in_memory() -> Secrets {
        let temp = tempfile::tempdir().expect("a temporary directory for the secret index");
        let mut inner = Inner::new(Store::Memory(Default::default()), temp.path());
        inner._temp = Some(temp);
        Secrets {
            inner: Arc::new(inner),
        }
    }

    /// The store in use: `secret-service`, `keyutils`, `macos`, `windows` or `file`.
    pub fn backend(&self) -> &'static str {
        match &self.inner.store {
            Store::Keychain { name, .. } => name,
            Store::File(_) => "file",
            #[cfg(test)]
            Store::Memory(_) => "memory",
        }
    }

    /// Stores `value` under `account` (replacing any earlier value) and records the name.
    pub fn set(&self, account: &str, value: &str) -> Result<(), SecretError> {
        check_account(account)?;
        let _lock = ChangeLock::acquire(&self.inner.lock_path)?;
        // Index first: a name without a value is harmless, a value without a name is unreachable
        // for delete_prefix.
        self.inner.index.insert(account)?;
        match &self.inner.store {
            Store::Keychain { name, store } => {
                let entry = build_entry(name, store, account)?;
                match entry.set_password(value) {
                    Ok(()) => Ok(()),
                    Err(keyring_core::Error::Ambiguous(items)) => {
                        for item in items {
                            item.delete_credential()
                                .map_err(|e| keychain_error(name, account, e))?;
                        }
                        entry
                            .set_password(value)
                            .map_err(|e| keychain_error(name, account, e))
                    }
                    Err(e) => Err(keychain_error(name, account, e)),
                }
            }
            Store::File(file) => file.set(account, value),
            #[cfg(test)]
            Store::Memory(map) => {
                map.lock()
                    .unwrap()
                    .insert(account.to_string(), value.to_string());
                Ok(())
            }
        }?;
        tracing::debug!(account, backend = self.backend(), "secret stored");
        Ok(())
    }

    /// The value stored under `account`, or `None`.
    pub fn get(&self, account: &str) -> Result<Option<String>, SecretError> {
        check_account(account)?;
        match &self.inner.store {
            Store::Keychain { name, store } => {
                match build_entry(name, store, account)?.get_password() {
                    Ok(value) => Ok(Some(value)),
                    Err(keyring_core::Error::NoEntry) => Ok(None),
                    Err(e) => Err(keychain_error(name, account, e)),
                }
            }
            Store::File(file) => file.get(account),
            #[cfg(test)]
            Store::Memory(map) => Ok(map.lock().unwrap().get(account).cloned()),
        }
    }

    /// Deletes `account`; `true` if something was deleted, `false` if nothing was stored.
    pub fn delete(&self, account: &str) -> Result<bool, SecretError> {
        check_account(account)?;
        let _lock = ChangeLock::acquire(&self.inner.lock_path)?;
        let deleted = self.delete_locked(account)?;
        self.inner.index.remove([account])?;
        Ok(deleted)
    }

    /// Deletes every account CAR recorded whose name starts with `prefix` (e.g.
    /// `connector/<slug>/`); returns how many held a value.
    pub fn delete_prefix(&self, prefix: &str) -> Result<usize, SecretError> {
        let _lock = ChangeLock::acquire(&self.inner.lock_path)?;
        let accounts: Vec<String> = self
            .inner
            .index
            .accounts()?
            .into_iter()
            .filter(|account| account.starts_with(prefix))
            .collect();
        let mut deleted = 0;
        let mut forgotten = Vec::with_capacity(accounts.len());
        let mut failure = None;
        for account in &accounts {
            match self.delete_locked(account) {
                Ok(was_there) => {
                    deleted += usize::from(was_there);
                    forgotten.push(account.as_str());
                }
                // Keep going: forget what was deleted, report the first failure.
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        self.inner.index.remove(forgotten)?;
        match failure {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    /// The account names CAR has recorded (never values), sorted.
    pub fn accounts(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.inner.index.accounts()?.into_iter().collect())
    }

    fn delete_locked(&self, account: &str) -> Result<bool, SecretError> {
        let deleted = match &self.inner.store {
            Store::Keychain { name, store } => {
                match build_entry(name, store, account)?.delete_credential() {
                    Ok(()) => Ok(true),
                    Err(keyring_core::Error::NoEntry) => Ok(false),
                    Err(keyring_core::Error::Ambiguous(items)) => {
                        for item in items {
                            item.delete_credential()
                                .map_err(|e| keychain_error(name, account, e))?;
                        }
                        Ok(true)
                    }
                    Err(e) => Err(keychain_error(name, account, e)),
                }
            }
            Store::File(file) => file.delete(account),
            #[cfg(test)]
            Store::Memory(map) => Ok(map.lock().unwrap().remove(account).is_some()),
        }?;
        tracing::debug!(account, deleted, backend = self.backend(), "secret deleted");
        Ok(deleted)
    }
}

fn check_account(account: &str) -> Result<(), SecretError> {
    let invalid = |reason| {
        Err(SecretError::InvalidAccount {
            account: account.to_string(),
            reason,
        })
    };
    if account.is_empty() {
        return invalid("it is empty");
    }
    if account.len() > MAX_ACCOUNT_BYTES {
        return invalid("it is longer than 512 bytes");
    }
    if account.chars().any(char::is_control) {
        return invalid("it contains a control character");
    }
    Ok(())
}

/// An entry for `account` under [`SERVICE`]; on the Secret Service it carries a readable label.
fn build_entry(
    name: &'static str,
    store: &Arc<CredentialStore>,
    account: &str,
) -> Result<Entry, SecretError> {
    let label = format!("CAR secret {account}");
    let modifiers: HashMap<&str, &str> = match name {
        "secret-service" => HashMap::from([("label", label.as_str())]),
        _ => HashMap::new(),
    };
    store
        .build(SERVICE, account, Some(&modifiers))
        .map_err(|e| keychain_error(name, account, e))
}

/// Maps a keyring error without ever formatting the bytes some variants carry.
fn keychain_error(backend: &'static str, account: &str, error: keyring_core::Error) -> SecretError {
    use keyring_core::Error as K;
    let account = account.to_string();
    let reason = match error {
        K::NoStorageAccess(e) => {
            return SecretError::Locked {
                backend,
                account,
                reason: e.to_string(),
                hint: locked_hint(backend),
            }
        }
        K::BadEncoding(_) | K::BadDataFormat(..) => {
            return SecretError::NotText { backend, account }
        }
        K::PlatformFailure(e) => e.to_string(),
        K::NoEntry => "no such item".to_string(),
        K::BadStoreFormat(reason) => format!("the store is malformed: {reason}"),
        K::TooLong(what, limit) => format!("{what} is longer than the limit of {limit}"),
        K::Invalid(what, reason) => format!("{what} is invalid: {reason}"),
        K::Ambiguous(items) => format!("{} items match", items.len()),
        K::NoDefaultStore => "no store".to_string(),
        K::NotSupportedByStore(what) => format!("not supported: {what}"),
        // keyring_core::Error is non-exhaustive; its Display never shows secret bytes except in
        // the two variants handled above.
        other => other.to_string(),
    };
    SecretError::Backend {
        backend,
        account,
        reason,
    }
}

fn locked_hint(backend: &'static str) -> &'static str {
    match backend {
        "secret-service" => "Unlock the keyring (for gnome-keyring: `gnome-keyring-daemon --unlock` with the password on stdin, or log in to a desktop session) and retry",
        "keyutils" => "Without a session keyring the kernel denies access (common as root in a container): run CAR under `keyctl session - car …`",
        _ => "Unlock the keychain and retry",
    }
}

/// The message listing what the user can do when no keychain answers.
fn unreachable_hint(car_home: &Path) -> String {
    let file = car_home.join("secrets.json");
    let os = if cfg!(target_os = "linux") {
        "Start and unlock a Secret Service on your D-Bus session (gnome-keyring, or KeePassXC with Secret Service integration) and check DBUS_SESSION_BUS_ADDRESS; or set CAR_SECRET_STORE=keyutils to use the Linux kernel keyring (secrets last until reboot)"
    } else {
        "Unlock the OS keychain"
    };
    format!(
        "{os}; or set CAR_SECRET_STORE=file to accept plaintext storage in {} (mode 0600)",
        file.display()
    )
}

fn open_os_keychain(car_home: &Path) -> Result<Store, SecretError> {
    if cfg!(target_os = "linux") {
        open_secret_service(car_home)
    } else if cfg!(target_os = "macos") {
        open_macos()
    } else if cfg!(target_os = "windows") {
        open_windows()
    } else {
        Err(SecretError::Unreachable {
            reason: "CAR knows no keychain on this operating system".to_string(),
            hint: unreachable_hint(car_home),
        })
    }
}

#[cfg(target_os = "linux")]
fn open_secret_service(car_home: &Path) -> Result<Store, SecretError> {
    let unreachable = |e: keyring_core::Error| SecretError::Unreachable {
        reason: format!("Secret Service: {e}"),
        hint: unreachable_hint(car_home),
    };
    let store: Arc<CredentialStore> =
        zbus_secret_service_keyring_store::Store::new().map_err(unreachable)?;
    Ok(Store::Keychain {
        name: "secret-service",
        store,
    })
}

#[cfg(not(target_os = "linux"))]
fn open_secret_service(_car_home: &Path) -> Result<Store, SecretError> {
    Err(SecretError::UnsupportedStore {
        store: "secret-service",
    })
}

#[cfg(target_os = "linux")]
fn open_keyutils() -> Result<Store, SecretError> {
    // `service_no_divider` keeps descriptions (`keyring:<account>@car`) unambiguous.
    let config = HashMap::from([("service_no_divider", "true")]);
    let store: Arc<CredentialStore> =
        linux_keyutils_keyring_store::Store::new_with_configuration(&config)
            .map_err(|e| keychain_error("keyutils", "(probe)", e))?;
    // Building an entry reaches the session keyring: fail now, not on the first `set`.
    store
        .build(SERVICE, "probe", None)
        .map_err(|e| keychain_error("keyutils", "(probe)", e))?;
    Ok(Store::Keychain {
        name: "keyutils",
        store,
    })
}

#[cfg(not(target_os = "linux"))]
fn open_keyutils() -> Result<Store, SecretError> {
    Err(SecretError::UnsupportedStore { store: "keyutils" })
}

#[cfg(target_os = "macos")]
fn open_macos() -> Result<Store, SecretError> {
    let store: Arc<CredentialStore> = apple_native_keyring_store::keychain::Store::new()
        .map_err(|e| keychain_error("macos", "(probe)", e))?;
    Ok(Store::Keychain {
        name: "macos",
        store,
    })
}

#[cfg(not(target_os = "macos"))]
fn open_macos() -> Result<Store, SecretError> {
    Err(SecretError::UnsupportedStore { store: "macos" })
}

#[cfg(target_os = "windows")]
fn open_windows() -> Result<Store, SecretError> {
    let store: Arc<CredentialStore> = windows_native_keyring_store::Store::new()
        .map_err(|e| keychain_error("windows", "(probe)", e))?;
    Ok(Store::Keychain {
        name: "windows",
        store,
    })
}

#[cfg(not(target_os = "windows"))]
fn open_windows() -> Result<Store, SecretError> {
    Err(SecretError::UnsupportedStore { store: "windows" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn secrets_are_send_sync_and_clone() {
        assert_send_sync::<Secrets>();
    }

    #[test]
    fn in_memory_round_trip_and_index() {
        let secrets = Secrets::in_memory();
        assert_eq!(secrets.backend(), "memory");
        secrets
            .set("connector/gh/header/Authorization", "Bearer s3cr3t")
            .unwrap();
        secrets
            .set("connector/gh/oauth", "{\"access_token\":\"t\"}")
            .unwrap();
        secrets.set("connector/ghx/oauth", "other").unwrap();
        assert_eq!(
            secrets
                .get("connector/gh/header/Authorization")
                .unwrap()
                .as_deref(),
            Some("Bearer s3cr3t")
        );
        assert_eq!(secrets.get("connector/none/oauth").unwrap(), None);
        assert!(!secrets.delete("connector/none/oauth").unwrap());
        assert_eq!(secrets.delete_prefix("connector/gh/").unwrap(), 2);
        assert_eq!(secrets.get("connector/gh/oauth").unwrap(), None);
        assert_eq!(secrets.accounts().unwrap(), ["connector/ghx/oauth"]);
        assert!(secrets.delete("connector/ghx/oauth").unwrap());
        assert!(secrets.accounts().unwrap().is_empty());
    }

    #[test]
    fn debug_and_errors_never_show_values() {
        let secrets = Secrets::in_memory();
        secrets.set("a", "value-that-must-not-leak").unwrap();
        assert!(!format!("{secrets:?}").contains("value-that-must-not-leak"));
        let err = keychain_error(
            "secret-service",
            "a",
            keyring_core::Error::BadEncoding(b"value-that-must-not-leak".to_vec()),
        );
        assert!(!format!("{err} {err:?}").contains("value-that-must-not-leak"));
    }

    #[test]
    fn account_names_are_checked() {
        let secrets = Secrets::in_memory();
        for bad in ["", "a\nb", &"x".repeat(513)] {
            assert!(matches!(
                secrets.set(bad, "v"),
                Err(SecretError::InvalidAccount { .. })
            ));
        }
    }

    #[test]
    fn store_names_parse_and_unknown_ones_are_refused() {
        assert_eq!("".parse::<StoreChoice>().unwrap(), StoreChoice::Auto);
        assert_eq!("auto".parse::<StoreChoice>().unwrap(), StoreChoice::Auto);
        assert_eq!("file".parse::<StoreChoice>().unwrap(), StoreChoice::File);
        assert_eq!(
            "keyutils".parse::<StoreChoice>().unwrap(),
            StoreChoice::Keyutils
        );
        let err = "memory".parse::<StoreChoice>().unwrap_err();
        assert!(
            err.to_string().contains("secret-service, keyutils"),
            "{err}"
        );
    }

    #[test]
    fn file_store_is_opt_in_and_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = Secrets::open_with(dir.path(), StoreChoice::File).unwrap();
        assert_eq!(secrets.backend(), "file");
        secrets.set("connector/x/oauth", "tok-4f2a").unwrap();
        assert_eq!(
            secrets.get("connector/x/oauth").unwrap().as_deref(),
            Some("tok-4f2a")
        );
        let index = std::fs::read_to_string(dir.path().join("secret-index.json")).unwrap();
        assert!(!index.contains("tok-4f2a"), "{index}");
        assert_eq!(secrets.delete_prefix("connector/x/").unwrap(), 1);
    }
}
