//! The gate's decision file: the pre-tool-call hook appends each deny and each warning to
//! `$CAR_HOME/gate.jsonl` (one JSON line, one `write` on a file opened for appending, so
//! hooks running side by side never interleave), and whoever reads the execution log next
//! (car-server's poller, `car executions`, the dashboard) moves the new lines into it
//! ([`crate::runtime::executions::ingest_gate_log`]). The hook never opens the database and
//! never waits: a file it cannot write is skipped, and the call is judged all the same.
//!
//! The file holds what the rules judged (the command, the path) as the hook saw it, secrets
//! included, like the database beside it: it is created readable by its owner only, and what
//! moves into the log is redacted there.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in `CAR_HOME`.
pub const FILE: &str = "gate.jsonl";
/// Past this size the hook starts a new file, keeping the last one as `gate.jsonl.1`.
pub const ROTATE_BYTES: u64 = 8 * 1024 * 1024;
/// The most characters of a command or path kept in a line.
const SUMMARY_CHARS: usize = 400;
/// The most characters of a reason kept in a line.
const REASON_CHARS: usize = 2000;

/// One decision of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// When, as RFC 3339 UTC with milliseconds (the execution log's form).
    pub at: String,
    /// `claude-code`, `codex`, `gemini` or `cursor`.
    pub host: String,
    /// `deny` or `warn`.
    pub decision: String,
    /// The host's tool, in the rules' vocabulary (`Bash`, `Write`, `mcp__server__tool`).
    pub tool: String,
    /// Which rules and why.
    pub reason: String,
    /// What the call was about: its command, path or URL (shortened).
    #[serde(default)]
    pub summary: String,
    /// The host's session, when the payload names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The session's working directory.
    #[serde(default)]
    pub cwd: String,
}

impl Entry {
    pub fn new(host: &str, decision: &str, tool: &str, reason: &str) -> Entry {
        Entry {
            at: crate::store::now(),
            host: host.to_string(),
            decision: decision.to_string(),
            tool: tool.to_string(),
            reason: shorten(reason, REASON_CHARS),
            summary: String::new(),
            session: None,
            cwd: String::new(),
        }
    }

    /// What the call was about, from its arguments: a command, a path, a URL, or the
    /// arguments themselves.
    pub fn about(mut self, params: &serde_json::Value) -> Entry {
        let named = [
            "command",
            "file_path",
            "path",
            "url",
            "notebook_path",
            "pattern",
        ]
        .iter()
        .find_map(|key| params.get(*key).and_then(|v| v.as_str()));
        let text = match named {
            Some(text) => text.to_string(),
            None if params.is_null() => String::new(),
            None => params.to_string(),
        };
        self.summary = shorten_at_space(&text, SUMMARY_CHARS);
        self
    }
}

/// `text` cut to at most `chars` characters, with an ellipsis when cut.
pub(crate) fn shorten(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// `text` cut to at most `chars` characters at a space, the cut word dropped whole: half a
/// token would no longer match the redaction that runs when the line is read.
fn shorten_at_space(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => {
            let kept = &text[..end];
            let kept = kept.rfind(char::is_whitespace).map_or("", |at| &kept[..at]);
            format!("{kept}…")
        }
        None => text.to_string(),
    }
}

/// The decision file of the CAR home at `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join(FILE)
}

/// The file the decision file was last rotated to.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// Appends `entry` to the decision file at `path`; an error is for the caller to note, never
/// to stop the hook. Does not create the home directory.
pub fn append(path: &Path, entry: &Entry) -> std::io::Result<()> {
    // A newline first as well: a file left without its last newline (a cut write, a stray
    // byte) cannot glue this line to the one before it.
    let mut line = vec![b'\n'];
    line.extend(serde_json::to_vec(entry).map_err(std::io::Error::other)?);
    line.push(b'\n');
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let mut file = options.open(path)?;
    let meta = file.metadata()?;
    // A regular file of its own: not a FIFO or a device, and not a hard link to another file
    // (a shell start-up file would run what a denied command carried).
    if !meta.is_file() || nlink(&meta) > 1 {
        return Err(std::io::Error::other(
            "the decision file is not a regular file of its own",
        ));
    }
    if meta.len() >= ROTATE_BYTES {
        // Whoever reads next finishes the old file first (it knows the file by its inode).
        // Only the file this hook has open is moved (another hook may have rotated it already),
        // and a rotation that fails still logs the line.
        let same = std::fs::symlink_metadata(path).is_ok_and(|now| same_file(&now, &meta));
        if same && std::fs::rename(path, rotated(path)).is_ok() {
            file = options.open(path)?;
        }
    }
    // One write: O_APPEND places it whole at the end, however many hooks write at once.
    file.write_all(&line)
}

#[cfg(unix)]
fn nlink(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
fn nlink(_meta: &std::fs::Metadata) -> u64 {
    1
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len()
}

/// The complete lines of `bytes` (a last line without its newline is still being written),
/// parsed; a line that is not an entry is skipped. Returns the entries and how many bytes
/// they took.
pub fn parse(bytes: &[u8]) -> (Vec<Entry>, usize) {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let entries = bytes[..end]
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    (entries, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_append_and_parse_back_without_the_one_being_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        let entry = Entry::new("codex", "deny", "Bash", "no force push")
            .about(&serde_json::json!({"command": "git push --force"}));
        append(&path, &entry).unwrap();
        append(&path, &entry).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"at\":\"half");
        let (entries, used) = parse(&bytes);
        assert_eq!(entries, vec![entry.clone(), entry.clone()]);
        assert_eq!(used, bytes.len() - "{\"at\":\"half".len());
        // A stray byte without its newline does not swallow the next line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        append(&path, &entry).unwrap();
        assert_eq!(parse(&std::fs::read(&path).unwrap()).0.len(), 3);
        // A hard link to another file is refused.
        let other = dir.path().join("bashrc");
        std::fs::write(&other, "").unwrap();
        let linked = dir.path().join("linked.jsonl");
        std::fs::hard_link(&other, &linked).unwrap();
        assert!(append(&linked, &entry).is_err());
        assert_eq!(std::fs::read(&other).unwrap(), b"");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn long_text_is_shortened() {
        let long = "é".repeat(500);
        assert_eq!(shorten(&long, 400).chars().count(), 401);
        // A command is cut at a space, the cut word dropped whole.
        let command = format!("curl -H 'Authorization: Bearer {}'", "t".repeat(500));
        assert_eq!(
            shorten_at_space(&command, 400),
            "curl -H 'Authorization: Bearer…"
        );
    }
}
