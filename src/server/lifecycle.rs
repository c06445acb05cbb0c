//! One `car-server` per `CAR_HOME`: an exclusive lock on `daemon/lock` held for the server's
//! life (the OS drops it when the process ends, however it ends), and `daemon/state.json`
//! saying where it runs, written once it listens and removed when it stops.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the daemon keeps its files under `CAR_HOME`.
#[derive(Debug, Clone)]
pub struct DaemonDir(PathBuf);

impl DaemonDir {
    pub fn new(car_home: &Path) -> DaemonDir {
        DaemonDir(car_home.join("daemon"))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn lock(&self) -> PathBuf {
        self.0.join("lock")
    }
    pub fn state(&self) -> PathBuf {
        self.0.join("state.json")
    }
    /// What the daemon logged (rotated to `car-server.log.1` past 5 MiB while it runs).
    pub fn log(&self) -> PathBuf {
        self.0.join("car-server.log")
    }
    pub fn token(&self) -> PathBuf {
        self.0.join("token")
    }
}

/// Where a running daemon is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonState {
    pub pid: u32,
    /// `http://127.0.0.1:9102/mcp`.
    pub mcp_url: String,
    /// `ws://127.0.0.1:9100/`.
    #[serde(default)]
    pub ws_url: String,
    pub started_at: String,
    pub version: String,
}

/// Why the daemon cannot start here.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("a car-server already runs for this CAR_HOME{}", match .0 { Some(s) => format!(" (pid {}, MCP at {})", s.pid, s.mcp_url), None => String::new() })]
    Held(Option<DaemonState>),
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The held lock; dropping it (or the process ending) frees it and removes the state file.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
    dir: DaemonDir,
}

impl DaemonLock {
    /// Takes the lock, or says where the daemon that holds it runs.
    pub fn acquire(dir: &DaemonDir) -> Result<DaemonLock, LockError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LockError::Io { path, source }
        };
        std::fs::create_dir_all(dir.path()).map_err(io(dir.path()))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.lock())
            .map_err(io(&dir.lock()))?;
        match file.try_lock() {
            Ok(()) => Ok(DaemonLock {
                _file: file,
                dir: dir.clone(),
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held(read_state(dir))),
            Err(std::fs::TryLockError::Error(source)) => Err(LockError::Io {
                path: dir.lock(),
                source,
            }),
        }
    }

    /// Says where this daemon runs (atomically: a reader never sees half a file).
    pub fn publish(&self, state: &DaemonState) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
        crate::home::write_atomic(&self.dir.state(), &text)
    }
}

impl Drop for DaemonLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.state());
    }
}

/// Whether a daemon holds the lock now (the state file alone may be left by a crash).
pub fn running(dir: &DaemonDir) -> Option<DaemonState> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.lock())
        .ok()?;
    match file.try_lock() {
        Ok(()) => None,
        Err(_) => read_state(dir).or(Some(DaemonState {
            pid: 0,
            mcp_url: String::new(),
            ws_url: String::new(),
            started_at: String::new(),
            version: String::new(),
        })),
    }
}

fn read_state(dir: &DaemonDir) -> Option<DaemonState> {
    let text = std::fs::read_to_string(dir.state()).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_daemon_per_home_and_the_state_goes_with_the_lock() {
        let home = tempfile::tempdir().unwrap();
        let dir = DaemonDir::new(home.path());
        let lock = DaemonLock::acquire(&dir).unwrap();
        let state = DaemonState {
            pid: 42,
            mcp_url: "http://127.0.0.1:9102/mcp".into(),
            ws_url: "ws://127.0.0.1:9100/".into(),
            started_at: "now".into(),
            version: "0".into(),
        };
        lock.publish(&state).unwrap();
        match DaemonLock::acquire(&dir) {
            Err(LockError::Held(Some(held))) => assert_eq!(held, state),
            other => panic!("a second lock was taken: {other:?}"),
        }
        assert_eq!(running(&dir), Some(state));
        drop(lock);
        assert!(!dir.state().exists());
        assert_eq!(running(&dir), None);
        DaemonLock::acquire(&dir).unwrap();
    }
}
