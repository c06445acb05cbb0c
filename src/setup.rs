//! `car setup <host>`: writes an agent host's configuration for CAR — its MCP server
//! (`car-mcp`), the policy gate (`car policy-check-hook`) and the memory hooks — into the host's
//! own files, for the user or for one project. It edits those files in place: the user's other
//! settings, their order and their comments stay (JSON with comments through a concrete syntax
//! tree, TOML through `toml_edit`). Run twice, it leaves one entry of each. The first run keeps
//! each file as it was in `<CAR_HOME>/setup/`, so `--undo` puts it back exactly when nothing
//! else changed it since, and otherwise removes CAR's entries and keeps the rest.
//!
//! | host        | files (user: under `~`, project: under the project)                 |
//! |-------------|---------------------------------------------------------------------|
//! | Claude Code | `.claude/settings.json` (hooks); `~/.claude.json` or `.mcp.json` (MCP) |
//! | Codex       | `.codex/config.toml` (`[mcp_servers.car]`, `[[hooks.*]]`)            |
//! | Gemini CLI  | `.gemini/settings.json` (`mcpServers`, `hooks`)                      |
//! | Cursor      | `.cursor/mcp.json`, `.cursor/hooks.json`                             |

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::hooks::hosts::Host;

/// Where the configuration goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's home: every project.
    User,
    /// One project.
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// What setup can get wrong.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{path}: {message}; fix or move the file, then run car setup again")]
    Unreadable { path: PathBuf, message: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("there is no home directory to set the user's configuration up in (set HOME)")]
    NoHome,
}

/// One file setup writes, as it is and as it would be (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl FileChange {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change, with the path in the headers.
    pub fn diff(&self) -> String {
        let before = self.before.as_deref().unwrap_or("");
        let after = self.after.as_deref().unwrap_or("");
        let name = self.path.display().to_string();
        let diff = similar::TextDiff::from_lines(before, after);
        diff.unified_diff()
            .context_radius(3)
            .header(
                if self.before.is_some() {
                    &name
                } else {
                    "/dev/null"
                },
                if self.after.is_some() {
                    &name
                } else {
                    "/dev/null"
                },
            )
            .to_string()
    }
}

/// What the configuration points at: the `car`, `car-gate` and `car-mcp` executables.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub car: String,
    /// The policy gate (`car-gate`), or `None` when it is not installed beside `car`: the gate
    /// is then `car policy-check-hook`, which answers the same, only slower to start.
    pub car_gate: Option<String>,
    pub car_mcp: String,
}

impl Binaries {
    /// The executables beside the running `car` (what was installed together), by absolute
    /// path, so the host finds them whatever its PATH.
    pub fn beside_current() -> Binaries {
        let dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.canonicalize().ok())
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        let at = |name: &str| match &dir {
            Some(dir) if dir.join(name).exists() => dir.join(name).to_string_lossy().into_owned(),
            _ => name.to_string(),
        };
        let gate = dir
            .as_ref()
            .map(|dir| dir.join(format!("car-gate{}", std::env::consts::EXE_SUFFIX)))
            .filter(|gate| gate.exists())
            .map(|gate| gate.to_string_lossy().into_owned());
        Binaries {
            car: at("car"),
            car_gate: gate,
            car_mcp: at("car-mcp"),
        }
    }

    fn quoted_car(&self) -> String {
        shell_word(&self.car)
    }

    /// The gate's command, without the host flag.
    fn gate(&self) -> String {
        match &self.car_gate {
            Some(gate) => shell_word(gate),
            None => format!("{} policy-check-hook", self.quoted_car()),
        }
    }
}

/// `path` as one word of a shell command line.
fn shell_word(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

/// The files of `host` for `scope`: (path, kind).
fn files(host: Host, scope: Scope, user: &Path, project: &Path) -> Vec<(PathBuf, Part)> {
    let base = match scope {
        Scope::User => user,
        Scope::Project => project,
    };
    match host {
        Host::ClaudeCode => vec![
            (base.join(".claude/settings.json"), Part::ClaudeHooks),
            (
                match scope {
                    Scope::User => user.join(".claude.json"),
                    Scope::Project => project.join(".mcp.json"),
                },
                Part::McpServers,
            ),
        ],
        Host::Codex => vec![(base.join(".codex/config.toml"), Part::CodexToml)],
        Host::Gemini => vec![(base.join(".gemini/settings.json"), Part::GeminiSettings)],
        Host::Cursor => vec![
            (base.join(".cursor/mcp.json"), Part::McpServers),
            (base.join(".cursor/hooks.json"), Part::CursorHooks),
        ],
    }
}

/// Which of CAR's entries a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    ClaudeHooks,
    McpServers,
    CodexToml,
    GeminiSettings,
    CursorHooks,
}

/// Whether a hook command is one of CAR's: it runs `car` (by any path) with one of CAR's hook
/// subcommands.
pub fn is_car_command(command: &str) -> bool {
    let command = command.trim_start();
    let first = match command.strip_prefix('\'') {
        Some(quoted) => quoted.split('\'').next().unwrap_or(""),
        None => command.split(' ').next().unwrap_or(""),
    };
    // The program's file name, by any path (`/opt/car/bin/car`, `C:\car\car.exe`).
    let program = first.rsplit(['/', '\\']).next().unwrap_or(first);
    let program = program.strip_suffix(".exe").unwrap_or(program);
    if program == "car-gate" {
        return true;
    }
    program == "car"
        && (command.contains("policy-check-hook")
            || command.contains(" hook session-start")
            || command.contains(" hook prompt"))
}

/// The hook entries CAR adds for `host`: (event, entry in the host's format).
fn hook_entries(host: Host, bins: &Binaries) -> Vec<(&'static str, Value)> {
    let car = bins.quoted_car();
    // A matcher group of one command handler (Claude Code, Codex and Gemini CLI share the
    // shape; Gemini names its handlers and counts milliseconds).
    let group = |matcher: Option<&str>, name: &str, command: String, seconds: u64| {
        let mut handler = json!({"type": "command", "command": command});
        if host == Host::Gemini {
            handler["name"] = json!(name);
            handler["timeout"] = json!(seconds * 1000);
        } else {
            handler["timeout"] = json!(seconds);
        }
        if host == Host::Codex && name == "car-policy" {
            handler["statusMessage"] = json!("CAR policy");
        }
        let mut group = json!({"hooks": [handler]});
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        group
    };
    // (the gate's event, its matcher, the prompt's event, the gate's --host, a suffix): Claude
    // Code's plugin form ends each command with `; exit 0`.
    let (gate, matcher, prompt, flag, tail) = match host {
        Host::ClaudeCode => ("PreToolUse", "*", "UserPromptSubmit", "", "; exit 0"),
        Host::Codex => ("PreToolUse", "*", "UserPromptSubmit", " --host codex", ""),
        Host::Gemini => ("BeforeTool", ".*", "BeforeAgent", " --host gemini", ""),
        Host::Cursor => ("", "", "", "", ""),
    };
    match host {
        Host::ClaudeCode | Host::Codex | Host::Gemini => vec![
            (
                gate,
                group(
                    Some(matcher),
                    "car-policy",
                    format!("{}{flag}{tail}", bins.gate()),
                    10,
                ),
            ),
            (
                "SessionStart",
                group(
                    None,
                    "car-briefing",
                    format!("{car} hook session-start{tail}"),
                    10,
                ),
            ),
            (
                prompt,
                group(None, "car-reminders", format!("{car} hook prompt{tail}"), 5),
            ),
        ],
        Host::Cursor => {
            let gate = json!({"command": format!("{} --host cursor", bins.gate()),
                "timeout": 10, "failClosed": true});
            vec![
                ("preToolUse", gate.clone()),
                ("beforeReadFile", gate.clone()),
                ("beforeMCPExecution", gate),
                (
                    "sessionStart",
                    json!({"command": format!("{car} hook session-start"), "timeout": 10}),
                ),
            ]
        }
    }
}

fn mcp_entry(host: Host, bins: &Binaries) -> Value {
    json!({"command": bins.car_mcp, "args": [], "env": {"CAR_INVOKED_BY": host.as_str()}})
}

/// Whether a hook entry (a host's matcher group, or Cursor's flat entry) runs CAR.
fn entry_is_car(entry: &Value) -> bool {
    let command = |v: &Value| v["command"].as_str().is_some_and(is_car_command);
    command(entry)
        || entry["hooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().any(command))
}

/// The files `car setup` would write for `host` (`undo`: what `--undo` would write), as
/// changes; nothing is written.
pub fn plan(
    host: Host,
    scope: Scope,
    project: &Path,
    car_home: &Path,
    bins: &Binaries,
    undo: bool,
) -> Result<Vec<FileChange>, SetupError> {
    let user = crate::home::user_home().ok_or(SetupError::NoHome)?;
    let mut out = Vec::new();
    for (path, part) in files(host, scope, &user, project) {
        let before = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(SetupError::Unreadable {
                    path,
                    message: e.to_string(),
                })
            }
        };
        let after = if undo {
            match Backup::read(car_home, &path) {
                // Nothing touched the file since setup wrote it: put it back as it was.
                Some(backup) if before.as_deref() == Some(backup.written.as_str()) => {
                    backup.original
                }
                _ => match &before {
                    Some(text) => edit(part, host, bins, text, &path, false)?,
                    None => None,
                },
            }
        } else {
            edit(
                part,
                host,
                bins,
                before.as_deref().unwrap_or(""),
                &path,
                true,
            )?
        };
        out.push(FileChange {
            path,
            before,
            after,
        });
    }
    Ok(out)
}

/// Writes the changes (each file atomically, creating its directory), keeping each file's
/// original in `<car_home>/setup/` on the first setup and forgetting it on undo.
pub fn apply(changes: &[FileChange], car_home: &Path, undo: bool) -> Result<(), SetupError> {
    for change in changes.iter().filter(|c| c.changes()) {
        let write_err = |source| SetupError::Write {
            path: change.path.clone(),
            source,
        };
        if !undo && Backup::read(car_home, &change.path).is_none() {
            Backup {
                path: change.path.to_string_lossy().into_owned(),
                original: change.before.clone(),
                written: change.after.clone().unwrap_or_default(),
            }
            .write(car_home)
            .map_err(write_err)?;
        }
        match &change.after {
            Some(text) => {
                if let Some(dir) = change.path.parent() {
                    std::fs::create_dir_all(dir).map_err(write_err)?;
                }
                let tmp = change.path.with_extension("car-setup.tmp");
                std::fs::write(&tmp, text).map_err(write_err)?;
                std::fs::rename(&tmp, &change.path).map_err(write_err)?;
            }
            None => match std::fs::remove_file(&change.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(write_err(e)),
            },
        }
        if undo {
            Backup::forget(car_home, &change.path);
        } else if let Some(mut backup) = Backup::read(car_home, &change.path) {
            // A second setup over the first: the original stays, what setup wrote moves on.
            backup.written = change.after.clone().unwrap_or_default();
            backup.write(car_home).map_err(write_err)?;
        }
    }
    Ok(())
}

/// A file as it was before CAR's first setup, and what setup last wrote to it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Backup {
    path: String,
    original: Option<String>,
    written: String,
}

impl Backup {
    fn location(car_home: &Path, path: &Path) -> PathBuf {
        let digest = Sha256::digest(path.to_string_lossy().as_bytes());
        let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        car_home.join("setup").join(format!("{name}.json"))
    }

    fn read(car_home: &Path, path: &Path) -> Option<Backup> {
        let text = std::fs::read_to_string(Backup::location(car_home, path)).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn write(&self, car_home: &Path) -> std::io::Result<()> {
        let at = Backup::location(car_home, Path::new(&self.path));
        std::fs::create_dir_all(at.parent().unwrap_or(car_home))?;
        std::fs::write(at, serde_json::to_vec_pretty(self).unwrap_or_default())
    }

    fn forget(car_home: &Path, path: &Path) {
        let _ = std::fs::remove_file(Backup::location(car_home, path));
    }
}

/// `text` with CAR's entries set (`add`) or removed; `None` when removing leaves a file setup
/// created with nothing in it.
fn edit(
    part: Part,
    host: Host,
    bins: &Binaries,
    text: &str,
    path: &Path,
    add: bool,
) -> Result<Option<String>, SetupError> {
    let unreadable = |message: String| SetupError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    if part == Part::CodexToml {
        return edit_toml(host, bins, text, add).map_err(unreadable);
    }
    let root = CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| unreadable(format!("not JSON ({e})")))?;
    if root.value().is_some() && root.object_value().is_none() {
        return Err(unreadable("not a JSON object".into()));
    }
    let object = root.object_value_or_set();
    match part {
        Part::McpServers => {
            set_mcp(&object, host, bins, add);
        }
        Part::ClaudeHooks | Part::GeminiSettings | Part::CursorHooks => {
            if part == Part::CursorHooks && object.get("version").is_none() && add {
                object.insert(0, "version", CstInputValue::Number("1".into()));
            }
            if part == Part::GeminiSettings {
                set_mcp(&object, host, bins, add);
            }
            let hooks = object.object_value_or_set("hooks");
            let entries = hook_entries(host, bins);
            let events: Vec<&str> = entries.iter().map(|(e, _)| *e).collect();
            for event in &events {
                if let Some(list) = hooks.array_value(event) {
                    for element in list.elements() {
                        let is_car = element.to_serde_value().is_some_and(|v| entry_is_car(&v));
                        if is_car {
                            element.remove();
                        }
                    }
                }
            }
            if add {
                for (event, entry) in &entries {
                    hooks.array_value_or_set(event).append(input(entry));
                }
            } else {
                drop_empty(&hooks, &events);
                if hooks.properties().is_empty() {
                    if let Some(prop) = object.get("hooks") {
                        prop.remove();
                    }
                }
            }
        }
        Part::CodexToml => {}
    }
    let out = root.to_string();
    if !add && is_empty_document(&out) {
        return Ok(None);
    }
    Ok(Some(with_newline(out)))
}

/// `mcpServers.car` of a JSON settings object set (`add`) or removed, and `mcpServers` itself
/// removed when that leaves it empty.
fn set_mcp(object: &CstObject, host: Host, bins: &Binaries, add: bool) {
    let servers = object.object_value_or_set("mcpServers");
    if let Some(old) = servers.get("car") {
        old.remove();
    }
    if add {
        servers.append("car", input(&mcp_entry(host, bins)));
    } else if servers.properties().is_empty() {
        if let Some(prop) = object.get("mcpServers") {
            prop.remove();
        }
    }
}

fn drop_empty(hooks: &CstObject, events: &[&str]) {
    for event in events {
        if let Some(prop) = hooks.get(event) {
            if prop
                .value()
                .and_then(|v| v.as_array())
                .is_some_and(|a| a.elements().is_empty())
            {
                prop.remove();
            }
        }
    }
}

fn is_empty_document(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v == json!({}))
        && !text.contains("//")
        && !text.contains("/*")
}

fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// A JSON value as the CST's input.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// Codex's `config.toml` with `[mcp_servers.car]` and CAR's `[[hooks.<event>]]` groups set or
/// removed.
fn edit_toml(host: Host, bins: &Binaries, text: &str, add: bool) -> Result<Option<String>, String> {
    use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("not TOML ({})", e.message()))?;
    // The MCP server.
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or("mcp_servers is not a table")?;
    servers.remove("car");
    if add {
        let mut car = Table::new();
        car["command"] = value(bins.car_mcp.clone());
        car["args"] = value(Array::new());
        let mut env = InlineTable::new();
        env.insert("CAR_INVOKED_BY", host.as_str().into());
        car["env"] = value(env);
        servers.insert("car", Item::Table(car));
    }
    if servers.is_empty() {
        doc.remove("mcp_servers");
    }
    // The hooks.
    let entries = hook_entries(host, bins);
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or("hooks is not a table")?;
    for (event, entry) in &entries {
        if let Some(groups) = hooks.get_mut(event).and_then(Item::as_array_of_tables_mut) {
            groups.retain(|group| {
                let handlers = group.get("hooks").and_then(Item::as_array_of_tables);
                !handlers.is_some_and(|hs| {
                    hs.iter().any(|h| {
                        h.get("command")
                            .and_then(Item::as_str)
                            .is_some_and(is_car_command)
                    })
                })
            });
        }
        if add {
            let mut group = Table::new();
            if let Some(matcher) = entry["matcher"].as_str() {
                group["matcher"] = value(matcher);
            }
            let mut handlers = ArrayOfTables::new();
            for h in entry["hooks"].as_array().into_iter().flatten() {
                let mut handler = Table::new();
                for (k, v) in h.as_object().into_iter().flatten() {
                    handler[k] = match v {
                        Value::String(s) => value(s.clone()),
                        Value::Number(n) => value(n.as_i64().unwrap_or(10)),
                        Value::Bool(b) => value(*b),
                        _ => continue,
                    };
                }
                handlers.push(handler);
            }
            group.insert("hooks", Item::ArrayOfTables(handlers));
            match hooks.get_mut(event).and_then(Item::as_array_of_tables_mut) {
                Some(groups) => groups.push(group),
                None => {
                    let mut groups = ArrayOfTables::new();
                    groups.push(group);
                    hooks.insert(event, Item::ArrayOfTables(groups));
                }
            }
        } else if hooks
            .get(event)
            .and_then(Item::as_array_of_tables)
            .is_some_and(|g| g.is_empty())
        {
            hooks.remove(event);
        }
    }
    if hooks.is_empty() {
        doc.remove("hooks");
    }
    let out = doc.to_string();
    if !add && out.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(out))
}

/// Whether `host` is wired for the user or for the project: its files hold CAR's gate.
pub fn wired(host: Host, project: &Path) -> Vec<Scope> {
    let Some(user) = crate::home::user_home() else {
        return Vec::new();
    };
    [Scope::User, Scope::Project]
        .into_iter()
        .filter(|&scope| {
            files(host, scope, &user, project).iter().any(|(path, _)| {
                std::fs::read_to_string(path).is_ok_and(|text| {
                    text.lines().any(|line| {
                        (line.contains("policy-check-hook") || line.contains("car-gate"))
                            && line.split('"').any(|field| is_car_command(field.trim()))
                    })
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins() -> Binaries {
        Binaries {
            car: "/opt/car/bin/car".into(),
            car_gate: Some("/opt/car/bin/car-gate".into()),
            car_mcp: "/opt/car/bin/car-mcp".into(),
        }
    }

    #[test]
    fn car_commands_are_told_apart_from_the_users() {
        assert!(is_car_command("car policy-check-hook; exit 0"));
        assert!(is_car_command("/opt/car/bin/car hook session-start"));
        assert!(is_car_command(
            "'/opt/my car/car' policy-check-hook --host gemini"
        ));
        assert!(!is_car_command("my-linter --hook session-start"));
        assert!(!is_car_command("scar policy-check-hook"));
        assert!(!is_car_command("car memory query x"));
        assert!(is_car_command("car-gate"));
        assert!(is_car_command("/opt/car/bin/car-gate --host codex"));
        assert!(!is_car_command("scar-gate --host codex"));
        assert!(is_car_command("C:\\CAR\\bin\\car-gate.exe --host cursor"));
        assert!(is_car_command(
            "'C:\\Program Files\\car\\car.exe' hook prompt"
        ));
    }

    /// A configuration `car setup` wrote before `car-gate` existed (`car policy-check-hook`)
    /// ends up with the one new gate entry, not two.
    #[test]
    fn an_earlier_gate_entry_is_replaced_by_car_gate() {
        let old = Binaries {
            car_gate: None,
            ..bins()
        };
        let path = Path::new("/h/.gemini/settings.json");
        let before = edit(Part::GeminiSettings, Host::Gemini, &old, "{}\n", path, true)
            .unwrap()
            .unwrap();
        assert!(
            before.contains("/opt/car/bin/car policy-check-hook --host gemini"),
            "{before}"
        );
        let after = edit(
            Part::GeminiSettings,
            Host::Gemini,
            &bins(),
            &before,
            path,
            true,
        )
        .unwrap()
        .unwrap();
        assert!(!after.contains("policy-check-hook"), "{after}");
        assert_eq!(
            after.matches("/opt/car/bin/car-gate --host gemini").count(),
            1,
            "{after}"
        );
    }

    #[test]
    fn json_with_comments_keeps_them_and_is_idempotent() {
        let text = "{\n  // my theme\n  \"theme\": \"dark\",\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\"matcher\": \"x\", \"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}\n    ]\n  }\n}\n";
        let path = Path::new("/h/.gemini/settings.json");
        let once = edit(
            Part::GeminiSettings,
            Host::Gemini,
            &bins(),
            text,
            path,
            true,
        )
        .unwrap()
        .unwrap();
        let twice = edit(
            Part::GeminiSettings,
            Host::Gemini,
            &bins(),
            &once,
            path,
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(once, twice);
        assert!(once.contains("// my theme"), "{once}");
        assert!(once.contains("\"mine\""), "{once}");
        assert_eq!(once.matches("car-gate").count(), 1, "{once}");
        let removed = edit(
            Part::GeminiSettings,
            Host::Gemini,
            &bins(),
            &once,
            path,
            false,
        )
        .unwrap()
        .unwrap();
        assert!(!removed.contains("car"), "{removed}");
        assert!(
            removed.contains("// my theme") && removed.contains("\"mine\""),
            "{removed}"
        );
    }

    #[test]
    fn codex_toml_keeps_comments_and_is_idempotent() {
        let text = "# my model\nmodel = \"gpt-5.5\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\" # keep\n";
        let once = edit_toml(Host::Codex, &bins(), text, true)
            .unwrap()
            .unwrap();
        let twice = edit_toml(Host::Codex, &bins(), &once, true)
            .unwrap()
            .unwrap();
        assert_eq!(once, twice);
        assert!(
            once.starts_with("# my model\nmodel = \"gpt-5.5\""),
            "{once}"
        );
        assert!(once.contains("command = \"docs-mcp\" # keep"), "{once}");
        let parsed: toml::Value = toml::from_str(&once).unwrap();
        assert_eq!(
            parsed["mcp_servers"]["car"]["command"].as_str(),
            Some("/opt/car/bin/car-mcp")
        );
        let pre = parsed["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1);
        assert_eq!(
            pre[0]["hooks"][0]["command"].as_str(),
            Some("/opt/car/bin/car-gate --host codex")
        );
        let removed = edit_toml(Host::Codex, &bins(), &once, false)
            .unwrap()
            .unwrap();
        assert_eq!(removed.trim_end(), text.trim_end());
    }
}
