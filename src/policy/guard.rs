//! Self-protection: the rules guard themselves. Whenever any rule is loaded, the engine denies
//! a call that would create, change, delete, move or truncate a rule file or directory
//! (`<CAR_HOME>/policies`, every `.car/policies`, an enclosing `.car` or CAR_HOME itself), or
//! unhook CAR from its host (Claude Code's settings files' `hooks`, `disableAllHooks` and
//! `enabledPlugins` for CAR, the plugin's directory, the `car` executable the hook runs,
//! `claude plugin uninstall|disable car…`), or run the `car` command that replaces rules
//! (`car policy init --force`). It is built into the engine, not a preset line a user could
//! forget to keep.
//!
//! It reads what the shell analysis resolves ([`super::commands`]: wrappers, `cd`, variables,
//! redirections, inline scripts) and judges each command by what it changes: the operands of
//! `rm`/`rmdir`/`unlink`/`shred`, both ends of `mv`, the destination of `cp`/`install`/`ln`/
//! `rsync`/`scp`, `tee`'s files, `truncate`/`touch`/`mkdir`/`chmod`/`chown`, `sed -i`/`perl -i`,
//! `dd of=`, `git rm|mv|checkout|restore`, `find … -delete`, and every `>` target. Claude
//! Code's `Write`, `Edit`, `MultiEdit` and `NotebookEdit` are judged by the file they write; a
//! write of a Claude settings file passes when it leaves the hook keys as they are. Reading the
//! rules stays allowed. A path CAR cannot know is left to the rules (`rm -rf "$X"` is the
//! preset's). The deny reason tells the agent to ask the user, who changes rules outside the
//! agent.

use std::path::Path;

use serde_json::Value;

use super::claude_tools::{self, FieldKind};
use super::commands::{Command, Place};
use super::deny_command::Places;

/// What the deny reason asks the agent to do.
const ASK: &str = "ask the user to make this change themselves, outside the agent (or with `car policy …` in their own shell)";

/// The keys of a Claude Code settings file that keep CAR's hook running.
const HOOK_KEYS: &[&str] = &["hooks", "disableAllHooks", "allowManagedHooksOnly"];

/// The places the guard protects, resolved once per engine.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// `<CAR_HOME>/policies` and each enclosing `.car/policies`, normalized.
    rule_dirs: Vec<String>,
    /// Directories that hold rules: CAR_HOME and each enclosing `.car`.
    holders: Vec<String>,
    /// What keeps CAR hooked into its host: the plugin directory, the `car` executable.
    hooks: Vec<String>,
    /// Existing files and directories whose deletion (or a parent's) takes rules or the hook
    /// with them.
    existing: Vec<String>,
}

/// What a command does to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Removes it (or moves it away).
    Delete,
    /// Creates, replaces or alters it.
    Write,
}

impl Protected {
    /// The protected places of a working directory's rule set: `home_policies`, the `.car` of
    /// each `anchor`, CAR's home, and what keeps the hook running (`hooks`: the plugin root,
    /// the executable), plus the Claude settings files around them.
    pub fn new(
        home_policies: &Path,
        anchors: &[&Path],
        hooks: &[&Path],
        user_home: Option<&Path>,
    ) -> Protected {
        let car_home = home_policies.parent();
        let text = |p: &Path| normalize(&p.to_string_lossy());
        let mut protected = Protected::default();
        protected.rule_dirs.push(text(home_policies));
        if let Some(car_home) = car_home {
            protected.holders.push(text(car_home));
        }
        for anchor in anchors {
            let car = anchor.join(".car");
            protected.rule_dirs.push(text(&car.join("policies")));
            protected.holders.push(text(&car));
        }
        protected.hooks = hooks.iter().map(|p| text(p)).collect();
        protected.settings_dirs(anchors, user_home);
        protected
    }

    /// Adds what runs CAR's hook (the plugin root, the executable), protected like the rules.
    pub fn add_hooks(&mut self, hooks: &[&Path]) {
        for hook in hooks {
            let hook = normalize(&hook.to_string_lossy());
            if Path::new(&hook).exists() {
                self.existing.push(hook.clone());
            }
            self.hooks.push(hook);
        }
    }

    fn settings_dirs(&mut self, anchors: &[&Path], user_home: Option<&Path>) {
        let text = |p: &Path| normalize(&p.to_string_lossy());
        let mut settings = Vec::new();
        for dir in anchors.iter().copied().chain(user_home) {
            for name in ["settings.json", "settings.local.json"] {
                settings.push(dir.join(".claude").join(name));
            }
        }
        self.existing = self
            .rule_dirs
            .iter()
            .chain(&self.holders)
            .chain(&self.hooks)
            .cloned()
            .chain(settings.iter().map(|p| text(p)))
            .filter(|p| Path::new(p).exists())
            .collect();
    }

    /// Why the call would loosen or unhook the rules, or `None`.
    pub fn violation(
        &self,
        tool: &str,
        params: &Value,
        commands: Option<&[Command]>,
        places: &Places,
    ) -> Option<String> {
        if let Some(commands) = commands {
            return commands.iter().find_map(|c| self.command(c, places));
        }
        let spec = claude_tools::find(tool)?;
        for (field, kind) in spec.fields {
            if *kind != FieldKind::WritePath {
                continue;
            }
            let Some(Value::String(text)) = params.get(*field) else {
                continue;
            };
            let Place::Known(path) =
                super::commands::resolve(text, Some(&places.cwd), places.home.as_deref(), &[])
            else {
                continue;
            };
            if is_settings(&path) {
                if let Some(reason) = settings_edit(tool, params, &path) {
                    return Some(reason);
                }
                continue;
            }
            if let Some(what) = self.touches(&path, Change::Write) {
                return Some(deny(what));
            }
        }
        None
    }

    /// Why one shell command would loosen or unhook the rules, or `None`.
    fn command(&self, command: &Command, places: &Places) -> Option<String> {
        if let Some(reason) = unhooking_command(command) {
            return Some(reason);
        }
        for (change, text) in changes(command) {
            let Place::Known(path) = command.place(text, places.home.as_deref()) else {
                continue;
            };
            if is_settings(&path) {
                return Some(deny("Claude Code's settings, which hook CAR's gate in"));
            }
            if let Some(what) = self.touches(&path, change) {
                return Some(deny(what));
            }
        }
        None
    }

    /// What protected thing a change of `path` would touch.
    fn touches(&self, path: &str, change: Change) -> Option<&'static str> {
        if is_rule_path(path) || self.rule_dirs.iter().any(|dir| inside(path, dir)) {
            return Some("a policy file");
        }
        if self.holders.iter().any(|dir| dir == path)
            || (change == Change::Delete && last_component(path) == ".car")
        {
            return Some("the directory that holds CAR's policies");
        }
        if self.hooks.iter().any(|hook| inside(path, hook)) {
            return Some("what runs CAR's hook (the plugin or the car executable)");
        }
        if change == Change::Delete && self.existing.iter().any(|p| inside(p, path)) {
            return Some("a directory holding CAR's policies or its hook");
        }
        None
    }
}

fn deny(what: &str) -> String {
    format!("this would change or remove {what}, which the agent may not do; {ASK}")
}

/// `path` is `dir` or inside it.
fn inside(path: &str, dir: &str) -> bool {
    Path::new(path).starts_with(dir)
}

fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A path inside (or naming) any `.car/policies`, whoever's.
fn is_rule_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    parts.windows(2).any(|w| w == [".car", "policies"])
}

/// Claude Code's settings files: a project's or the user's `.claude/settings.json` and
/// `settings.local.json`, and the managed settings.
fn is_settings(path: &str) -> bool {
    path.ends_with("/.claude/settings.json")
        || path.ends_with("/.claude/settings.local.json")
        || path.ends_with("/managed-settings.json")
}

/// Lexically normalized (`.`/`..` applied, no trailing slash).
fn normalize(path: &str) -> String {
    match super::commands::resolve(path, Some("/"), None, &[]) {
        Place::Known(path) => path,
        Place::Unknown => path.to_string(),
    }
}

/// The paths a command changes, and how (see the module docs).
fn changes(command: &Command) -> Vec<(Change, &str)> {
    let mut out: Vec<(Change, &str)> = command
        .writes
        .iter()
        .map(|w| (Change::Write, w.as_str()))
        .collect();
    let args = &command.args;
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let flag = |names: &[&str]| {
        args[..end].iter().any(|a| {
            names.iter().any(|n| {
                a == n
                    || (n.len() == 2
                        && !a.starts_with("--")
                        && a.starts_with('-')
                        && a[1..].contains(&n[1..]))
                    || a.starts_with(&format!("{n}="))
            })
        })
    };
    let positionals: Vec<&str> = args[..end]
        .iter()
        .filter(|a| !(a.starts_with('-') && a.len() > 1))
        .chain(args.get(end + 1..).unwrap_or_default())
        .map(String::as_str)
        .collect();
    let target_dir = args[..end].iter().enumerate().find_map(|(i, a)| {
        if a == "-t" || a == "--target-directory" {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("--target-directory=")
        }
    });
    let all = |change: Change| -> Vec<(Change, &str)> {
        positionals.iter().map(|p| (change, *p)).collect()
    };
    match command.program.as_str() {
        "rm" | "rmdir" | "unlink" | "shred" | "srm" | "trash" | "trash-put" => {
            out.extend(all(Change::Delete))
        }
        "mv" => match target_dir {
            Some(dir) => {
                out.push((Change::Write, dir));
                out.extend(all(Change::Delete));
            }
            None => {
                if let Some((last, sources)) = positionals.split_last() {
                    out.extend(sources.iter().map(|p| (Change::Delete, *p)));
                    out.push((Change::Write, last));
                }
            }
        },
        "cp" | "install" | "ln" | "rsync" | "scp" | "rclone" => match target_dir {
            Some(dir) => out.push((Change::Write, dir)),
            None => {
                if positionals.len() >= 2 || command.program == "ln" {
                    if let Some(last) = positionals.last() {
                        out.push((Change::Write, last));
                    }
                }
            }
        },
        "tee" | "truncate" | "touch" | "mkdir" | "chmod" | "chown" | "chgrp" | "chattr"
        | "setfacl" | "mkfifo" => out.extend(all(Change::Write)),
        "sed" | "gsed" | "perl" | "ruby" if flag(&["-i", "--in-place"]) => {
            out.extend(all(Change::Write))
        }
        "dd" => out.extend(
            positionals
                .iter()
                .filter_map(|a| a.strip_prefix("of="))
                .map(|p| (Change::Write, p)),
        ),
        "find" if flag(&["-delete"]) => {
            if let Some(start) = args.first().filter(|a| !a.starts_with('-')) {
                out.push((Change::Delete, start.as_str()));
            }
        }
        "git" => match positionals.split_first() {
            Some((&("rm" | "mv"), rest)) => out.extend(rest.iter().map(|p| (Change::Delete, *p))),
            Some((&("checkout" | "restore"), rest)) => {
                out.extend(rest.iter().map(|p| (Change::Write, *p)))
            }
            Some(_) | None => {}
        },
        _ => {}
    }
    out
}

/// `claude plugin uninstall|disable|remove car…` and `car policy init --force`.
fn unhooking_command(command: &Command) -> Option<String> {
    let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
    match command.program.as_str() {
        "claude" => {
            let words: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !a.starts_with('-'))
                .collect();
            let unhooks = matches!(
                words.as_slice(),
                ["plugin" | "plugins", "uninstall" | "disable" | "remove" | "rm", target, ..]
                    if target.starts_with("car")
            ) || matches!(
                words.as_slice(),
                ["plugin" | "plugins", "marketplace", "remove" | "rm", ..]
            ) || (words.first() == Some(&"config")
                && args.iter().any(|a| HOOK_KEYS.contains(a)));
            unhooks.then(|| deny("CAR's plugin or hooks in Claude Code"))
        }
        "car" => {
            let words: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !a.starts_with('-'))
                .collect();
            (words.starts_with(&["policy", "init"]) && args.contains(&"--force"))
                .then(|| deny("the policy files (`car policy init --force` replaces them)"))
        }
        _ => None,
    }
}

/// Whether a `Write`/`Edit`/`MultiEdit` of a Claude settings file changes the keys that keep
/// CAR's hook running: the file as it is and as it would be are compared, key by key.
fn settings_edit(tool: &str, params: &Value, path: &str) -> Option<String> {
    let refused = || Some(deny("Claude Code's settings that hook CAR's gate in"));
    let current = std::fs::read_to_string(path).ok();
    let after = match tool {
        "Write" => params
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string),
        "Edit" => current.clone().and_then(|text| apply_edit(text, params)),
        "MultiEdit" => {
            let edits = params.get("edits").and_then(Value::as_array)?;
            edits
                .iter()
                .try_fold(current.clone().unwrap_or_default(), |text, edit| {
                    apply_edit(text, edit)
                })
        }
        _ => None,
    };
    let Some(after) = after else {
        return refused();
    };
    let before: Value = current
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let Ok(after) = serde_json::from_str::<Value>(&after) else {
        return refused();
    };
    if hook_keys(&before) != hook_keys(&after) {
        return refused();
    }
    None
}

/// One edit (`old_string` → `new_string`, once or `replace_all`) applied to `text`.
fn apply_edit(text: String, edit: &Value) -> Option<String> {
    let old = edit.get("old_string").and_then(Value::as_str)?;
    let new = edit.get("new_string").and_then(Value::as_str)?;
    if old.is_empty() {
        return Some(format!("{new}{text}"));
    }
    if edit.get("replace_all").and_then(Value::as_bool) == Some(true) {
        Some(text.replace(old, new))
    } else {
        Some(text.replacen(old, new, 1))
    }
}

/// The parts of a settings document that keep CAR's hook running.
fn hook_keys(settings: &Value) -> Vec<Value> {
    let mut keys: Vec<Value> = HOOK_KEYS
        .iter()
        .map(|k| settings.get(*k).cloned().unwrap_or(Value::Null))
        .collect();
    let car_plugins: Vec<(String, Value)> = settings
        .get("enabledPlugins")
        .and_then(Value::as_object)
        .map(|plugins| {
            plugins
                .iter()
                .filter(|(name, _)| name.starts_with("car@") || name.as_str() == "car")
                .map(|(name, on)| (name.clone(), on.clone()))
                .collect()
        })
        .unwrap_or_default();
    keys.push(serde_json::json!(car_plugins));
    keys
}
