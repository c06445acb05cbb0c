//! Per-project settings (`project_config`): a fixed set of known keys, each with a default and a
//! validation, so a typo is refused instead of silently stored. Other modules read a value with
//! [`get`] (the stored value, else the default) or a typed helper such as [`older_than_days`].

use crate::store::sql::args;
use serde::Serialize;

use super::{Project, ProjectError, Result};

/// A setting CAR knows: its key, its default and what it governs.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub key: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    check: fn(&str) -> std::result::Result<(), String>,
}

fn task_prefix(value: &str) -> std::result::Result<(), String> {
    let ok = (1..=10).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err("1 to 10 uppercase letters or digits, e.g. CTX".into())
    }
}

fn whole_number(
    range: std::ops::RangeInclusive<u32>,
) -> impl Fn(&str) -> std::result::Result<(), String> {
    move |value| match value.parse::<u32>() {
        Ok(n) if range.contains(&n) => Ok(()),
        _ => Err(format!(
            "a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

fn days(value: &str) -> std::result::Result<(), String> {
    whole_number(1..=36_500)(value)
}

fn max_ready(value: &str) -> std::result::Result<(), String> {
    whole_number(1..=100)(value)
}

fn on_off(value: &str) -> std::result::Result<(), String> {
    match value {
        "on" | "off" => Ok(()),
        _ => Err("on or off".into()),
    }
}

fn briefing_tokens(value: &str) -> std::result::Result<(), String> {
    whole_number(200..=20_000)(value)
}

fn max_reminders(value: &str) -> std::result::Result<(), String> {
    whole_number(1..=5)(value)
}

/// Every known setting, in the order `config list` shows them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "task.prefix",
        default: "CTX",
        help: "what task numbers are shown with (CTX-0001)",
        check: task_prefix,
    },
    Setting {
        key: "prune.older_than_days",
        default: "30",
        help: "how old (in days) a closed task or resolved progress note is before `car prune` archives it",
        check: days,
    },
    Setting {
        key: "context.max_ready",
        default: "10",
        help: "how many ready tasks a project briefing lists",
        check: max_ready,
    },
    Setting {
        key: "hooks.session_start",
        default: "on",
        help: "on: the agent host's session-start hook (`car hook session-start`) injects the project briefing; off: it injects nothing",
        check: on_off,
    },
    Setting {
        key: "hooks.briefing_tokens",
        default: "1500",
        help: "the session-start briefing's budget in tokens (estimated at 4 characters a token; at most what the host takes inline, about 2,350 in Claude Code); the least relevant items are left out first",
        check: briefing_tokens,
    },
    Setting {
        key: "hooks.prompt",
        default: "on",
        help: "on: the prompt hook (`car hook prompt`) injects memory entries a prompt is about; off: it injects nothing",
        check: on_off,
    },
    Setting {
        key: "hooks.max_reminders",
        default: "2",
        help: "the most memory entries one prompt's reminders show",
        check: max_reminders,
    },
];

/// The setting named `key`, or an error that lists the known keys.
pub fn setting(key: &str) -> Result<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key).ok_or_else(|| {
        let known: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
        ProjectError::Invalid(format!(
            "unknown setting {key:?}; known settings: {}",
            known.join(", ")
        ))
    })
}

/// One setting's current value and whether it was set for this project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Value {
    pub key: &'static str,
    pub value: String,
    pub default: &'static str,
    /// Whether the value was set for this project (false: the default applies).
    pub set: bool,
    pub help: &'static str,
}

fn stored(project: &Project, key: &str) -> Result<Option<String>> {
    project.store.read(|sql| {
        Ok(sql.value(
            "SELECT value FROM project_config WHERE project_id = ?1 AND key = ?2",
            args![project.id, key],
        )?)
    })
}

/// The value of `key` for this project: the stored one, else the default.
pub fn get(project: &Project, key: &str) -> Result<String> {
    Ok(describe(project, key)?.value)
}

/// The value of `key` with its default and whether it was set.
pub fn describe(project: &Project, key: &str) -> Result<Value> {
    let setting = setting(key)?;
    let stored = stored(project, key)?;
    Ok(Value {
        key: setting.key,
        set: stored.is_some(),
        value: stored.unwrap_or_else(|| setting.default.to_string()),
        default: setting.default,
        help: setting.help,
    })
}

/// Every known setting of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Settings {
    /// In the order of [`SETTINGS`].
    pub settings: Vec<Value>,
}

/// A setting after `unset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Unset {
    /// The setting as it is now: its default.
    #[serde(flatten)]
    pub setting: Value,
    /// Whether a value was stored (and is now removed).
    pub removed: bool,
}

/// Every known setting of this project.
pub fn list(project: &Project) -> Result<Settings> {
    Ok(Settings {
        settings: SETTINGS
            .iter()
            .map(|s| describe(project, s.key))
            .collect::<Result<_>>()?,
    })
}

/// Validates and stores a value; an invalid one writes nothing.
pub fn set(project: &Project, key: &str, value: &str) -> Result<Value> {
    let setting = setting(key)?;
    (setting.check)(value).map_err(|expected| {
        ProjectError::Invalid(format!(
            "bad value {value:?} for {key}: expected {expected}"
        ))
    })?;
    project.store.transaction(|tx| {
        tx.execute(
            "INSERT INTO project_config(project_id, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT(project_id, key) DO UPDATE SET value = excluded.value",
            args![project.id, key, value],
        )
    })?;
    describe(project, key)
}

/// Removes a stored value (the default applies again); says whether one was stored.
pub fn unset(project: &Project, key: &str) -> Result<Unset> {
    setting(key)?;
    let removed = project.store.transaction(|tx| {
        tx.execute(
            "DELETE FROM project_config WHERE project_id = ?1 AND key = ?2",
            args![project.id, key],
        )
    })?;
    Ok(Unset {
        setting: describe(project, key)?,
        removed: removed > 0,
    })
}

/// A whole-number setting as a number (its check guarantees the stored value is one).
pub fn number(project: &Project, key: &str) -> Result<u32> {
    let value = get(project, key)?;
    value.parse().map_err(|_| {
        ProjectError::Invalid(format!(
            "stored {key} {value:?} is not a number; fix it with `car config set`"
        ))
    })
}

/// An on/off setting: true for `on`.
pub fn is_on(project: &Project, key: &str) -> Result<bool> {
    Ok(get(project, key)? != "off")
}

/// `prune.older_than_days` as a number.
pub fn older_than_days(project: &Project) -> Result<u32> {
    let value = get(project, "prune.older_than_days")?;
    value.parse().map_err(|_| {
        ProjectError::Invalid(format!(
            "stored prune.older_than_days {value:?} is not a number; fix it with `car config set`"
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::Store;

    fn project() -> Project {
        let store = Arc::new(Store::open_in_memory().unwrap());
        Project::open(store, std::path::Path::new("/tmp/p")).unwrap()
    }

    #[test]
    fn defaults_until_set_and_after_unset() {
        let p = project();
        assert_eq!(get(&p, "task.prefix").unwrap(), "CTX");
        assert!(set(&p, "task.prefix", "WEB").unwrap().set);
        assert_eq!(get(&p, "task.prefix").unwrap(), "WEB");
        assert!(unset(&p, "task.prefix").unwrap().removed);
        let again = unset(&p, "task.prefix").unwrap();
        assert!(!again.removed && !again.setting.set);
        assert_eq!(get(&p, "task.prefix").unwrap(), "CTX");
        assert_eq!(older_than_days(&p).unwrap(), 30);
    }

    #[test]
    fn bad_keys_and_values_write_nothing() {
        let p = project();
        for (key, value) in [
            ("task.prefix", "ctx"),
            ("task.prefix", "TOOLONGPREFIX"),
            ("task.prefix", ""),
            ("prune.older_than_days", "0"),
            ("prune.older_than_days", "ten"),
            ("context.max_ready", "101"),
            ("nope", "1"),
        ] {
            let err = set(&p, key, value).unwrap_err();
            assert!(matches!(err, ProjectError::Invalid(_)), "{key}={value}");
        }
        let rows: i64 = p
            .store
            .conn()
            .query_row("SELECT count(*) FROM project_config", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
        let err = get(&p, "nope").unwrap_err().to_string();
        assert!(err.contains("task.prefix, prune.older_than_days, context.max_ready"));
    }
}
