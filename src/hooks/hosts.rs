//! The agent hosts' session-start and prompt hooks: each host's payload in, its way of adding
//! context for the model out. `car hook session-start` and `car hook prompt` serve every host;
//! the host is told by `--host` or read from the payload (see [`detect`]). Sources are cited in
//! `docs/hooks.md`.
//!
//! | host        | session event                      | prompt event        | context goes out as                                         |
//! |-------------|------------------------------------|---------------------|-------------------------------------------------------------|
//! | Claude Code | `SessionStart` (`source`)          | `UserPromptSubmit`  | `hookSpecificOutput.additionalContext`                      |
//! | Codex       | `SessionStart` (`source`)          | `UserPromptSubmit`  | `hookSpecificOutput.additionalContext`                      |
//! | Gemini CLI  | `SessionStart` (`source`)          | `BeforeAgent`       | `hookSpecificOutput.additionalContext`                      |
//! | Cursor      | `sessionStart`                     | `beforeSubmitPrompt`| `additional_context` (sessionStart); a prompt takes none    |

use std::path::PathBuf;

use serde_json::{json, Value};

/// An agent host whose hooks CAR answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
}

impl Host {
    pub const ALL: [Host; 4] = [Host::ClaudeCode, Host::Codex, Host::Gemini, Host::Cursor];

    pub fn as_str(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
            Host::Cursor => "cursor",
        }
    }

    pub fn parse(text: &str) -> Option<Host> {
        Host::ALL.into_iter().find(|h| h.as_str() == text)
    }

    /// The name of this host's event for `event` (what its `hook_event_name` says).
    pub fn event_name(self, event: Event) -> &'static str {
        match (self, event) {
            (Host::Cursor, Event::SessionStart) => "sessionStart",
            (Host::Cursor, Event::Prompt) => "beforeSubmitPrompt",
            (Host::Gemini, Event::Prompt) => "BeforeAgent",
            (_, Event::SessionStart) => "SessionStart",
            (_, Event::Prompt) => "UserPromptSubmit",
        }
    }

    /// The most context this host takes inline, in characters: Claude Code keeps 10,000 and
    /// files the rest away behind a 2,000-character preview, Codex about 2,500 tokens, Cursor
    /// 10,000 characters; Gemini CLI states no limit, and gets the same.
    pub fn max_context_chars(self) -> usize {
        10_000
    }

    /// Whether this host adds a hook's context to the model's input for `event`.
    pub fn takes_context(self, event: Event) -> bool {
        !matches!((self, event), (Host::Cursor, Event::Prompt))
    }
}

/// Which hook is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    Prompt,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::SessionStart => "session_start",
            Event::Prompt => "prompt",
        }
    }
}

/// Why a session started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Startup,
    Resume,
    Clear,
    Compact,
    /// Claude Code: a new session forked from an existing conversation.
    Fork,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Startup => "startup",
            Source::Resume => "resume",
            Source::Clear => "clear",
            Source::Compact => "compact",
            Source::Fork => "fork",
        }
    }

    fn parse(text: &str) -> Source {
        match text {
            "resume" => Source::Resume,
            "clear" => Source::Clear,
            "compact" => Source::Compact,
            "fork" => Source::Fork,
            _ => Source::Startup,
        }
    }

    /// A session that goes on (its model already saw a briefing): lead with what changed.
    pub fn continues(self) -> bool {
        matches!(self, Source::Resume | Source::Compact | Source::Fork)
    }
}

/// What CAR needs of a hook payload, whatever the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub host: Host,
    pub event: Event,
    /// The host's session (Cursor: its conversation); empty when the payload has none.
    pub session_id: String,
    /// The directory the session works in: `cwd` (Cursor: the first workspace root).
    pub cwd: Option<PathBuf>,
    pub source: Source,
    /// The prompt the user just sent (prompt events).
    pub prompt: String,
}

/// Why a payload was not answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the hook payload is not a JSON object: {0}")]
    NotJson(String),
    #[error("the hook payload is for {found:?}, not {expected} ({hint})")]
    WrongEvent {
        found: String,
        expected: &'static str,
        hint: &'static str,
    },
}

/// The host a payload comes from: Cursor's events are camelCase and carry `conversation_id`
/// and `workspace_roots`; Gemini CLI's prompt event is `BeforeAgent`, and its payloads carry a
/// `timestamp`; Codex's prompt payloads carry a `turn_id`. Anything else is read as Claude
/// Code's — Codex's session-start payload has no field Claude Code's lacks, and both take the
/// same answer, so only the recorded host differs; a host's own wiring passes `--host`.
pub fn detect(payload: &Value) -> Host {
    let event = payload["hook_event_name"].as_str().unwrap_or("");
    let has = |key: &str| payload.get(key).is_some();
    if event.starts_with(|c: char| c.is_ascii_lowercase())
        || has("conversation_id")
        || has("workspace_roots")
        || has("cursor_version")
    {
        Host::Cursor
    } else if matches!(event, "BeforeAgent" | "BeforeTool")
        || (has("timestamp") && !has("permission_mode"))
    {
        Host::Gemini
    } else if has("turn_id") {
        Host::Codex
    } else {
        Host::ClaudeCode
    }
}

/// Reads a payload for `event`; `host` forces the host instead of [`detect`].
pub fn parse(event: Event, bytes: &[u8], host: Option<Host>) -> Result<Payload, PayloadError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| PayloadError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(PayloadError::NotJson("not an object".into()));
    }
    let host = host.unwrap_or_else(|| detect(&value));
    if let Some(found) = value["hook_event_name"].as_str() {
        // A host may name an event in another case; any other event is refused.
        let named = |event: Event| {
            Host::ALL
                .iter()
                .any(|h| h.event_name(event).eq_ignore_ascii_case(found))
        };
        if !named(event) {
            return Err(PayloadError::WrongEvent {
                found: found.to_string(),
                expected: host.event_name(event),
                hint: if named(other_event(event)) {
                    match other_event(event) {
                        Event::SessionStart => {
                            "run `car hook session-start` from that event's hook"
                        }
                        Event::Prompt => "run `car hook prompt` from that event's hook",
                    }
                } else {
                    "car hook answers only session-start and prompt events"
                },
            });
        }
    }
    let text = |key: &str| value[key].as_str().unwrap_or("").to_string();
    let session_id = match host {
        Host::Cursor => [text("conversation_id"), text("session_id")]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or_default(),
        _ => text("session_id"),
    };
    let cwd = match value["cwd"].as_str() {
        Some(cwd) => Some(PathBuf::from(cwd)),
        None => value["workspace_roots"][0].as_str().map(PathBuf::from),
    }
    .filter(|p| p.is_absolute());
    Ok(Payload {
        host,
        event,
        session_id,
        cwd,
        source: Source::parse(value["source"].as_str().unwrap_or("startup")),
        prompt: text("prompt"),
    })
}

fn other_event(event: Event) -> Event {
    match event {
        Event::SessionStart => Event::Prompt,
        Event::Prompt => Event::SessionStart,
    }
}

/// What to print on stdout so that `host` adds `context` to the model's input (None: print
/// nothing). Every host reads one JSON object.
pub fn answer(host: Host, event: Event, context: &str) -> Option<String> {
    if context.is_empty() || !host.takes_context(event) {
        return None;
    }
    let value = match host {
        Host::Cursor => json!({ "additional_context": context }),
        _ => json!({
            "hookSpecificOutput": {
                "hookEventName": host.event_name(event),
                "additionalContext": context,
            }
        }),
    };
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_is_told_from_its_payload_and_read_the_same_way() {
        let claude = br#"{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/work/app","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"who approves schema changes?"}"#;
        let gemini = br#"{"session_id":"s2","transcript_path":"/t.json","cwd":"/work/app","hook_event_name":"BeforeAgent","timestamp":"2026-12-03T09:00:00Z","prompt":"who approves schema changes?"}"#;
        let cursor = br#"{"conversation_id":"c3","generation_id":"g","hook_event_name":"beforeSubmitPrompt","workspace_roots":["/work/app"],"prompt":"who approves schema changes?"}"#;
        let codex = br#"{"session_id":"s4","turn_id":"t1","cwd":"/work/app","hook_event_name":"UserPromptSubmit","model":"gpt-5","prompt":"who approves schema changes?"}"#;
        for (bytes, host, session) in [
            (&claude[..], Host::ClaudeCode, "s1"),
            (&gemini[..], Host::Gemini, "s2"),
            (&cursor[..], Host::Cursor, "c3"),
            (&codex[..], Host::Codex, "s4"),
        ] {
            let payload = parse(Event::Prompt, bytes, None).unwrap();
            assert_eq!(payload.host, host);
            assert_eq!(payload.session_id, session);
            assert_eq!(
                payload.cwd.as_deref(),
                Some(std::path::Path::new("/work/app"))
            );
            assert_eq!(payload.prompt, "who approves schema changes?");
        }
        let start = br#"{"session_id":"s1","cwd":"/w","hook_event_name":"SessionStart","source":"compact"}"#;
        let payload = parse(Event::SessionStart, start, None).unwrap();
        assert_eq!(payload.source, Source::Compact);
        assert!(payload.source.continues());
        // Claude Code's full SessionStart (model and permission mode too) stays Claude Code's.
        let full = br#"{"session_id":"s5","transcript_path":"/t.jsonl","cwd":"/w","permission_mode":"default","hook_event_name":"SessionStart","source":"fork","model":"claude-sonnet-4-5","agent_type":"main"}"#;
        let payload = parse(Event::SessionStart, full, None).unwrap();
        assert_eq!(payload.host, Host::ClaudeCode);
        assert_eq!(payload.source, Source::Fork);
        // Another hook's well-formed payload is refused by both commands.
        let tool = br#"{"session_id":"s1","cwd":"/w","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#;
        for event in [Event::SessionStart, Event::Prompt] {
            let refused = parse(event, tool, None).unwrap_err();
            assert!(
                refused
                    .to_string()
                    .contains("only session-start and prompt"),
                "{refused}"
            );
        }
        // The wrong command for the event, garbage, and a relative cwd.
        assert!(matches!(
            parse(Event::SessionStart, claude, None),
            Err(PayloadError::WrongEvent { .. })
        ));
        assert!(parse(Event::Prompt, b"not json", None).is_err());
        assert!(parse(Event::Prompt, b"[1]", None).is_err());
        let relative = parse(Event::Prompt, br#"{"cwd":"app","prompt":"x"}"#, None).unwrap();
        assert_eq!(relative.cwd, None);
        assert_eq!(
            parse(Event::Prompt, cursor, Some(Host::ClaudeCode))
                .unwrap()
                .host,
            Host::ClaudeCode
        );
    }

    #[test]
    fn each_host_gets_context_its_own_way() {
        let claude: Value =
            serde_json::from_str(&answer(Host::ClaudeCode, Event::Prompt, "x").unwrap()).unwrap();
        assert_eq!(
            claude["hookSpecificOutput"]["hookEventName"],
            "UserPromptSubmit"
        );
        assert_eq!(claude["hookSpecificOutput"]["additionalContext"], "x");
        let gemini: Value =
            serde_json::from_str(&answer(Host::Gemini, Event::Prompt, "x").unwrap()).unwrap();
        assert_eq!(gemini["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
        let cursor: Value =
            serde_json::from_str(&answer(Host::Cursor, Event::SessionStart, "x").unwrap()).unwrap();
        assert_eq!(cursor["additional_context"], "x");
        assert_eq!(answer(Host::Cursor, Event::Prompt, "x"), None);
        assert_eq!(answer(Host::ClaudeCode, Event::SessionStart, ""), None);
    }
}
