//! The daemon's log file, rotated while it runs: a line that would take the file past its limit
//! first moves it to `<name>.1` (the one generation kept) and starts a new one, so the log never
//! grows without bound and no line is split or lost. Each write is one whole line or event.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The default limit of one generation.
pub const DEFAULT_LIMIT: u64 = 5 * 1024 * 1024;

/// A log file that rotates past `limit` bytes.
#[derive(Debug)]
pub struct RotatingLog {
    path: PathBuf,
    limit: u64,
    open: Mutex<(File, u64)>,
}

impl RotatingLog {
    /// Opens `path` for appending (rotating it first if it is already at the limit).
    pub fn open(path: &Path, limit: u64) -> std::io::Result<Arc<RotatingLog>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = append(path)?;
        let len = file.metadata()?.len();
        let log = RotatingLog {
            path: path.to_path_buf(),
            limit: limit.max(1),
            open: Mutex::new((file, len)),
        };
        if len >= log.limit {
            log.rotate(&mut log.lock())?;
        }
        Ok(Arc::new(log))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the previous generation.
    pub fn previous(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (File, u64)> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The old generation becomes `.1` (a hard link, else a copy) and a fresh file replaces the
    /// log in one rename, so a reader never finds the log missing.
    fn rotate(&self, open: &mut (File, u64)) -> std::io::Result<()> {
        open.0.flush()?;
        let previous = self.previous();
        let _ = std::fs::remove_file(&previous);
        if std::fs::hard_link(&self.path, &previous).is_err() {
            std::fs::copy(&self.path, &previous)?;
        }
        let mut fresh = self.path.as_os_str().to_owned();
        fresh.push(".new");
        let fresh = PathBuf::from(fresh);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&fresh)?;
        std::fs::rename(&fresh, &self.path)?;
        *open = (file, 0);
        Ok(())
    }

    /// Appends one record (a line or a formatted event), rotating first when it would not fit.
    pub fn record(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut open = self.lock();
        if open.1 > 0 && open.1 + bytes.len() as u64 > self.limit {
            self.rotate(&mut open)?;
        }
        open.0.write_all(bytes)?;
        open.1 += bytes.len() as u64;
        Ok(())
    }
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// A `tracing` writer over a [`RotatingLog`].
#[derive(Debug, Clone)]
pub struct LogWriter(pub Arc<RotatingLog>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.record(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_that_would_pass_the_limit_moves_the_file_aside_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("car-server.log");
        let log = RotatingLog::open(&path, 100).unwrap();
        for n in 0..30 {
            log.record(format!("line {n:02} of the log\n").as_bytes())
                .unwrap();
        }
        let now = std::fs::read_to_string(&path).unwrap();
        let before = std::fs::read_to_string(log.previous()).unwrap();
        assert!(
            now.len() <= 100 && before.len() <= 100,
            "{now:?} {before:?}"
        );
        assert!(now.ends_with("line 29 of the log\n"), "{now:?}");
        let joined = before + &now;
        let numbers: Vec<&str> = joined.lines().collect();
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "whole lines, in order, none lost across the rotation: {numbers:?}"
        );
        // Reopening a full log rotates it at once.
        drop(log);
        std::fs::write(&path, "x".repeat(200)).unwrap();
        let log = RotatingLog::open(&path, 100).unwrap();
        assert_eq!(std::fs::metadata(log.path()).unwrap().len(), 0);
    }
}
