//! Self-protection: the rules guard themselves. Whenever any rule is loaded, the engine denies
//! a call that would create, change, delete, move or truncate a rule file or directory
//! (`<CAR_HOME>/policies`, every `.car/policies`, an enclosing `.car` or CAR_HOME itself), or
//! unhook CAR from its host (the hook keys of Claude Code's settings, of Codex's `hooks.json`
//! and `config.toml`, of Gemini CLI's `settings.json` and Cursor's `hooks.json`;
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
use super::deny_command::{wild, Places};
use super::shell::UNKNOWN;

/// What the deny reason asks the agent to do.
const ASK: &str = "ask the user to make this change themselves, outside the agent (or with `car policy …` in their own shell)";

/// The keys of a Claude Code settings file that keep CAR's hook running.
const HOOK_KEYS: &[&str] = &[
    "hooks",
    "disableAllHooks",
    "allowManagedHooksOnly",
    // Gemini CLI's switch and list of disabled hooks.
    "hooksConfig",
];

/// The variables of a settings file's `env` that decide which rules and which `car` the hook
/// runs with.
fn hook_env(name: &str) -> bool {
    matches!(
        name,
        "PATH"
            | "HOME"
            | "BASH_ENV"
            | "ENV"
            | "SHELL"
            | "NODE_OPTIONS"
            | "PERL5OPT"
            | "RUBYOPT"
            | "PYTHONSTARTUP"
            | "PYTHONPATH"
    ) || ["CAR_", "CLAUDE_", "LD_", "DYLD_", "GIT_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// The places the guard protects, resolved once per engine.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// `<CAR_HOME>/policies` and each enclosing `.car/policies`, normalized.
    rule_dirs: Vec<String>,
    /// Directories that hold rules: CAR_HOME and each enclosing `.car`.
    holders: Vec<String>,
    /// What keeps CAR hooked into its host: the plugin directory, the `car` executable.
    hooks: Vec<String>,
    /// Files and directories whose deletion (or a parent's) takes rules or the hook with them,
    /// when they exist: asked only of a path a command deletes, so that the hook does not look
    /// up dozens of files (every PATH directory's `car`) before every tool call.
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
        // A directory and, when a symlink leads elsewhere, where it really is: the rules of a
        // `.car/policies` that links to `/srv/rules` are changed through either name.
        let both = |p: &Path| -> Vec<String> {
            let named = text(p);
            let real = std::fs::canonicalize(p)
                .ok()
                .map(|real| text(&real))
                .filter(|real| *real != named);
            std::iter::once(named).chain(real).collect()
        };
        let mut protected = Protected::default();
        protected.rule_dirs.extend(both(home_policies));
        if let Some(car_home) = car_home {
            protected.holders.extend(both(car_home));
        }
        for anchor in anchors {
            let car = anchor.join(".car");
            protected.rule_dirs.extend(both(&car.join("policies")));
            // A `.car` with memory or skills only holds no rules.
            if car.join("policies").is_dir() {
                protected.holders.extend(both(&car));
            }
        }
        protected.hooks = hooks.iter().map(|p| text(p)).collect();
        protected.settings_dirs(anchors, user_home);
        protected
    }

    /// Adds what runs CAR's hook (the plugin root, the executable), protected like the rules.
    pub fn add_hooks(&mut self, hooks: &[&Path]) {
        for hook in hooks {
            let hook = normalize(&hook.to_string_lossy());
            self.existing.push(hook.clone());
            self.hooks.push(hook);
        }
    }

    fn settings_dirs(&mut self, anchors: &[&Path], user_home: Option<&Path>) {
        let text = |p: &Path| normalize(&p.to_string_lossy());
        let mut settings = Vec::new();
        for dir in anchors.iter().copied().chain(user_home) {
            for name in HOST_SETTINGS.iter().filter(|n| n.matches('/').count() == 2) {
                settings.push(dir.join(&name[1..]));
            }
        }
        self.existing = self
            .rule_dirs
            .iter()
            .chain(&self.holders)
            .chain(&self.hooks)
            .cloned()
            .chain(settings.iter().map(|p| text(p)))
            .collect();
    }

    /// Why the call would loosen or unhook the rules, or `None`. With no rule loaded
    /// (`loaded` false) only existing rules are guarded: an agent may set rules up where there
    /// are none, but never delete or rewrite rules that exist, wherever it stands.
    pub fn violation(
        &self,
        tool: &str,
        params: &Value,
        commands: Option<&[Command]>,
        places: &Places,
        loaded: bool,
    ) -> Option<String> {
        if let Some(commands) = commands {
            // A string that names the rules anywhere (`ls .car/policies/* | while read f`)
            // may not change a path CAR cannot resolve.
            let names_rules = commands.iter().any(|c| self.names_rules(c, places, loaded));
            return commands
                .iter()
                .find_map(|c| self.command(c, places, loaded, names_rules));
        }
        let spec = claude_tools::find(tool)?;
        for (field, kind) in spec.fields {
            if *kind != FieldKind::WritePath {
                continue;
            }
            let Some(Value::String(text)) = params.get(*field) else {
                continue;
            };
            let place =
                super::commands::resolve(text, Some(&places.cwd), places.home.as_deref(), &[]);
            if let Place::Known(path) = &place {
                if is_settings(path) || is_settings(&canonical(path)) {
                    if let Some(reason) = settings_edit(tool, params, path) {
                        return Some(reason);
                    }
                    continue;
                }
            }
            if let Some(what) = self.judge(text, &place, Change::Write, loaded) {
                return Some(deny(what));
            }
            if let Place::Known(path) = &place {
                if loaded && path.contains("/.git/hooks/") {
                    return Some(deny_git_hook());
                }
            }
        }
        None
    }

    /// Whether a command mentions a rule directory or the `.car` holding one, in an argument
    /// or a redirection (as a path or a glob).
    fn names_rules(&self, command: &Command, places: &Places, loaded: bool) -> bool {
        command
            .args
            .iter()
            .chain(&command.reads)
            .chain(&command.writes)
            .any(|arg| match command.place(arg, places.home.as_deref()) {
                Place::Known(path) => {
                    let path = without_classes(&path);
                    rule_dir_of(&path).is_some_and(|dir| loaded || Path::new(&dir).is_dir())
                        || self.rule_dirs.iter().chain(&self.holders).any(|dir| {
                            matches!(relation(&path, dir), Relation::Same | Relation::Inside)
                        })
                }
                Place::Unknown => false,
            })
    }

    /// `find START … -delete` or `-exec …` over a directory holding rules, where a rule file
    /// (or its directory) meets the find's `-name`/`-path` tests (none: every file does).
    fn find_reaches_rules(&self, command: &Command, places: &Places) -> bool {
        if command.program != "find" {
            return false;
        }
        let args = &command.args;
        let acts = args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-delete" | "-exec" | "-execdir" | "-ok" | "-okdir" | "-fprint"
            )
        });
        if !acts {
            return false;
        }
        let starts: Vec<&String> = args
            .iter()
            .take_while(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!"))
            .collect();
        let starts: Vec<String> = if starts.is_empty() {
            vec![".".to_string()]
        } else {
            starts.into_iter().cloned().collect()
        };
        let tests: Vec<(&str, &str)> = args
            .windows(2)
            .filter(|w| {
                matches!(
                    w[0].as_str(),
                    "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-regex" | "-iregex"
                )
            })
            .map(|w| (w[0].as_str(), w[1].as_str()))
            .collect();
        let reached = |file: &Path| {
            tests.is_empty()
                || tests.iter().any(|(test, pattern)| {
                    let name = file
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let whole = file.to_string_lossy();
                    match *test {
                        "-name" => wild(pattern, &name),
                        "-iname" => wild(&pattern.to_lowercase(), &name.to_lowercase()),
                        "-path" | "-wholename" => wild(pattern, &whole) || pattern.contains(".car"),
                        "-ipath" => wild(&pattern.to_lowercase(), &whole.to_lowercase()),
                        // A regular expression is not read: it may match anything.
                        _ => true,
                    }
                })
        };
        starts.iter().any(|start| {
            let Place::Known(start) = command.place(start, places.home.as_deref()) else {
                return false;
            };
            self.rule_dirs
                .iter()
                .filter(|dir| Path::new(dir).is_dir())
                .filter(|dir| matches!(relation(&start, dir), Relation::Same | Relation::Contains))
                .any(|dir| {
                    let dir = Path::new(dir);
                    let files = std::fs::read_dir(dir)
                        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
                        .unwrap_or_else(|_| Vec::new());
                    std::iter::once(dir.to_path_buf())
                        .chain(dir.parent().map(Path::to_path_buf))
                        .chain(files)
                        .any(|file| reached(&file))
                })
        })
    }

    /// Why one shell command would loosen or unhook the rules, or `None`.
    fn command(
        &self,
        command: &Command,
        places: &Places,
        loaded: bool,
        names_rules: bool,
    ) -> Option<String> {
        // With no rule loaded only existing rules are guarded (see `violation`).
        if loaded {
            if let Some(reason) = unhooking_command(command) {
                return Some(reason);
            }
            if let Some(reason) = deferred_execution(command) {
                return Some(reason);
            }
        }
        if self.find_reaches_rules(command, places) {
            return Some(deny("policy files, which this find would change or remove"));
        }
        if loaded && rewrites_worktree(command).is_some_and(|takes| self.uncommitted_rules(takes)) {
            return Some(format!(
                "this git command would discard policy files that are not committed, which the agent may not do; commit .car/policies first, or {ASK}"
            ));
        }
        let unknown_program = command.program.contains(UNKNOWN) || command.program.contains('$');
        for (change, text) in changes(command, places.home.as_deref()) {
            let text = text.as_str();
            let place = command.place(text, places.home.as_deref());
            if let Place::Known(path) = &place {
                if is_settings(path) || is_settings(&canonical(path)) {
                    return Some(deny(
                        "the agent host's settings, which hook CAR's gate in (an edit tool may change their other keys: it checks that the hook keys stay as they are)",
                    ));
                }
            }
            if let Some(what) = self.judge(text, &place, change, loaded) {
                return Some(deny(what));
            }
            if let Place::Known(path) = &place {
                if loaded && (path.contains("/.git/hooks/") || path.ends_with("/.git/hooks")) {
                    return Some(deny_git_hook());
                }
            }
            if place == Place::Unknown && names_rules {
                return Some(deny(
                    "a path built at run time in a command that names CAR's policies",
                ));
            }
        }
        if unknown_program
            && command
                .args
                .iter()
                .any(|a| names_car(a) || a.contains("CAR_HOME"))
        {
            return Some(deny(
                "what a command built at run time does to CAR's policies",
            ));
        }
        None
    }

    /// What protected thing a change of the path `raw` (resolved to `place`) would touch. A
    /// path CAR cannot resolve counts when its text names a `.car` or CAR's home; a glob
    /// (`.car/*`, `.c*`) counts when it could match a protected path; braces are expanded;
    /// links are followed as far as the path exists.
    fn judge(
        &self,
        raw: &str,
        place: &Place,
        change: Change,
        loaded: bool,
    ) -> Option<&'static str> {
        let Place::Known(path) = place else {
            return (names_car(raw) || raw.contains("CAR_HOME"))
                .then_some("a path built at run time that names CAR's policies or home");
        };
        for path in expand_braces(path) {
            let real = canonical(&path);
            for candidate in [&path, &real] {
                if let Some(what) = self.touches(candidate, change, loaded) {
                    return Some(what);
                }
            }
        }
        None
    }

    /// What protected thing a change of `path` (absolute, perhaps a shell glob) would touch.
    fn touches(&self, path: &str, change: Change, loaded: bool) -> Option<&'static str> {
        // A bracket class (`.[!.]*`) stands for one character, as `?` does.
        let classless = without_classes(path);
        let path = classless.as_str();
        let within =
            |target: &str| matches!(relation(path, target), Relation::Same | Relation::Inside);
        let rule_dir = rule_dir_of(path);
        let rules = if loaded {
            rule_dir.is_some() || self.rule_dirs.iter().any(|dir| within(dir))
        } else {
            rule_dir.is_some_and(|dir| Path::new(&dir).is_dir())
                || self
                    .rule_dirs
                    .iter()
                    .any(|dir| Path::new(dir).is_dir() && within(dir))
        };
        if rules {
            return Some("a policy file");
        }
        let holds_rules = |dir: &str| Path::new(dir).join("policies").is_dir();
        if self
            .holders
            .iter()
            .any(|dir| (loaded || holds_rules(dir)) && relation(path, dir) == Relation::Same)
            || (change == Change::Delete && names_car(last_component(path)) && holds_rules(path))
        {
            return Some("the directory that holds CAR's policies");
        }
        if self.hooks.iter().any(|hook| within(hook)) {
            return Some("what runs CAR's hook (the plugin or the car executable)");
        }
        if change == Change::Delete
            && (self.existing.iter().any(|existing| {
                matches!(
                    relation(path, existing),
                    Relation::Same | Relation::Contains
                ) && Path::new(existing).exists()
            }) || Path::new(path).join(".car").join("policies").is_dir())
        {
            return Some("a directory holding CAR's policies or its hook");
        }
        None
    }

    /// Whether a `.car/policies` of this scope holds files that a command taking `takes` away
    /// would discard, by `git status`.
    fn uncommitted_rules(&self, takes: Takes) -> bool {
        self.rule_dirs
            .iter()
            .filter(|dir| Path::new(dir).is_dir())
            .any(|dir| {
                // The repository's own config must not run anything here (an fsmonitor
                // command), and an answer must come quickly: no answer counts as "would".
                let Some(stdout) = git_status(dir) else {
                    return true;
                };
                String::from_utf8_lossy(&stdout)
                    .lines()
                    .any(|line| match line.get(..2) {
                        Some("??") => takes.untracked,
                        Some("!!") => takes.ignored,
                        Some(_) => takes.modified,
                        None => false,
                    })
            })
    }
}

fn deny_git_hook() -> String {
    format!("this would change a git hook, which runs commands outside the gate; {ASK}")
}

/// Commands that set up code to run later, outside the gate: `git config` of
/// `core.fsmonitor`, `core.hooksPath`, `core.sshCommand` or a `!` alias.
fn deferred_execution(command: &Command) -> Option<String> {
    if command.program != "git" || command.args.first().map(String::as_str) != Some("config") {
        return None;
    }
    let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
    let sets = args.iter().enumerate().any(|(i, a)| {
        let key = a.to_ascii_lowercase();
        let value = args.get(i + 1).copied().unwrap_or_default();
        match key.as_str() {
            "core.fsmonitor" | "core.hookspath" | "core.sshcommand" => true,
            // `git -c core.editor=true rebase --continue` is ordinary; a command line is not.
            "core.pager" | "core.editor" | "sequence.editor" => !value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.' | ':')),
            _ => key.starts_with("alias.") && value.starts_with('!'),
        }
    });
    sets.then(|| {
        format!(
            "this git setting runs commands later, outside the gate, which the agent may not set; {ASK}"
        )
    })
}

fn deny(what: &str) -> String {
    format!("this would change or remove {what}, which the agent may not do; {ASK}")
}

/// How a path (perhaps a shell glob: `*`, `?`, no `**`) stands to a target path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    /// It is (or can match) the target.
    Same,
    /// It is (or can match) something inside the target.
    Inside,
    /// It is (or can match) a directory holding the target.
    Contains,
    Apart,
}

fn relation(path: &str, target: &str) -> Relation {
    let parts = |p: &'_ str| -> Vec<String> {
        p.split('/')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (path, target) = (parts(path), parts(target));
    for (pattern, name) in path.iter().zip(&target) {
        // As the shell globs: a wildcard does not match a leading dot (`*` is not `.car`).
        let dotted = name.starts_with('.') && !pattern.starts_with('.');
        let wildcard = pattern.contains(['*', '?']);
        if (wildcard && (dotted || !wild(pattern, name))) || (!wildcard && pattern != name) {
            return Relation::Apart;
        }
    }
    match path.len().cmp(&target.len()) {
        std::cmp::Ordering::Equal => Relation::Same,
        std::cmp::Ordering::Greater => Relation::Inside,
        std::cmp::Ordering::Less => Relation::Contains,
    }
}

fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The `…/.car/policies` directory a path is in (or names), whoever's; components are
/// compared without case (a case-insensitive disk opens `.CAR/Policies` too).
fn rule_dir_of(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').collect();
    let at = parts
        .windows(2)
        .position(|w| w[0].eq_ignore_ascii_case(".car") && w[1].eq_ignore_ascii_case("policies"))?;
    Some(parts[..at + 2].join("/"))
}

/// A `.car` component (without case).
fn names_car(text: &str) -> bool {
    text.split('/').any(|c| c.eq_ignore_ascii_case(".car"))
}

/// A glob with each `[…]` class made `?` (one character, whichever).
fn without_classes(path: &str) -> String {
    let mut out = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        if c == '[' {
            let class: String = chars.by_ref().take_while(|c| *c != ']').collect();
            if class.is_empty() {
                out.push('[');
            } else {
                out.push('?');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `a{b,c}d` → `abd`, `acd` (one level, as the shell expands a word before it runs).
fn expand_braces(text: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (text.find('{'), text.find('}')) else {
        return vec![text.to_string()];
    };
    if close < open || !text[open..close].contains(',') {
        return vec![text.to_string()];
    }
    text[open + 1..close]
        .split(',')
        .map(|alt| format!("{}{alt}{}", &text[..open], &text[close + 1..]))
        .collect()
}

/// The path with links resolved as far as it exists (`p/recommended.toml` where `p` links to
/// `.car/policies`), or the path itself.
fn canonical(path: &str) -> String {
    let mut existing = Path::new(path);
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut real = real;
            for part in rest.iter().rev() {
                real.push(part);
            }
            return real.to_string_lossy().into_owned();
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_string(),
        }
    }
}

/// Whether `path` is one of the agent hosts' settings files ([`HOST_SETTINGS`]): a project's
/// or the user's `.claude/settings.json`, `.codex/hooks.json`, `.gemini/settings.json`, ….
fn is_settings(path: &str) -> bool {
    // Compared without case: on macOS's and Windows's disks `~/.Codex/Config.toml` is the file.
    let path = path.to_ascii_lowercase();
    HOST_SETTINGS.iter().any(|name| path.ends_with(name))
}

/// The agent hosts' files that hook CAR's gate in (see docs/hosts.md): an edit that keeps
/// their hook keys as they are is allowed, anything else is not.
const HOST_SETTINGS: &[&str] = &[
    "/.claude/settings.json",
    "/.claude/settings.local.json",
    "/managed-settings.json",
    "/.codex/hooks.json",
    "/.codex/config.toml",
    "/.gemini/settings.json",
    "/.cursor/hooks.json",
];

/// Lexically normalized (`.`/`..` applied, no trailing slash).
fn normalize(path: &str) -> String {
    match super::commands::resolve(path, Some("/"), None, &[]) {
        Place::Known(path) => path,
        Place::Unknown => path.to_string(),
    }
}

/// The paths a command changes, and how (see the module docs).
fn changes(command: &Command, home: Option<&str>) -> Vec<(Change, String)> {
    let mut out: Vec<(Change, String)> = command
        .writes
        .iter()
        .map(|w| (Change::Write, w.clone()))
        .collect();
    for (change, path) in changes_of_args(command, home) {
        out.push((change, path.to_string()));
    }
    // Any program's output file: `-o FILE`, `--output FILE`, `--output=FILE`, `-out FILE`,
    // `-O FILE` (sort, curl, wget, openssl, gcc, …).
    let args = &command.args;
    for (i, arg) in args.iter().enumerate() {
        let value = match arg.as_str() {
            "-o" | "--output" | "-out" | "-O" | "--output-document" => args.get(i + 1).cloned(),
            _ => arg
                .strip_prefix("--output=")
                .or_else(|| arg.strip_prefix("--output-document="))
                .map(str::to_string),
        };
        if let Some(value) = value.filter(|v| !v.starts_with('-') && v != "-") {
            out.push((Change::Write, value));
        }
    }
    out
}

/// The base name of a path (`a/b/` → `b`).
fn base_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

/// The members of an archive a command unpacks, when the archive exists and lists.
fn archive_members(command: &Command, home: Option<&str>) -> Option<Vec<String>> {
    let args = &command.args;
    let file = match command.program.as_str() {
        "unzip" => args.iter().find(|a| !a.starts_with('-')).cloned(),
        _ => args.iter().enumerate().find_map(|(i, a)| {
            if let Some(f) = a.strip_prefix("--file=") {
                return Some(f.to_string());
            }
            let cluster = !a.starts_with("--") && (a.starts_with('-') || i == 0);
            (cluster && a.trim_start_matches('-').ends_with('f'))
                .then(|| args.get(i + 1).cloned())
                .flatten()
        }),
    }?;
    let Place::Known(path) = command.place(&file, home) else {
        return None;
    };
    if !Path::new(&path).is_file() {
        return None;
    }
    let list: &[&str] = match command.program.as_str() {
        "unzip" => &["-Z1"],
        _ => &["-tf"],
    };
    let mut child = std::process::Command::new(&command.program)
        .args(list)
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    // An archive built to list slowly must not run the hook past the host's timeout (Codex and
    // Gemini CLI then let the whole command run): one that does not list within the deadline
    // counts as unpacking over `.car`.
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < ARCHIVE_DEADLINE => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Some(vec![".car".to_string()]);
            }
        }
    }
    let out = reader.join().ok()?;
    Some(
        String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// How long an archive may take to list its members.
const ARCHIVE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

fn changes_of_args<'c>(
    command: &'c Command,
    home: Option<&str>,
) -> Vec<(Change, std::borrow::Cow<'c, str>)> {
    use std::borrow::Cow;
    let mut out: Vec<(Change, Cow<'c, str>)> = Vec::new();
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
    let all = |change: Change| -> Vec<(Change, Cow<'c, str>)> {
        positionals
            .iter()
            .map(|p| (change, Cow::Borrowed(*p)))
            .collect()
    };
    match command.program.as_str() {
        "rm" | "rmdir" | "unlink" | "shred" | "srm" | "trash" | "trash-put" => {
            out.extend(all(Change::Delete))
        }
        "mv" => match target_dir {
            Some(dir) => {
                out.push((Change::Write, Cow::Borrowed(dir)));
                out.extend(all(Change::Delete));
            }
            None => {
                if let Some((last, sources)) = positionals.split_last() {
                    out.extend(sources.iter().map(|p| (Change::Delete, Cow::Borrowed(*p))));
                    out.push((Change::Write, Cow::Borrowed(last)));
                }
            }
        },
        "cp" | "install" | "ln" | "link" | "rsync" | "scp" | "rclone" => {
            // A recursive copy (or rsync) replaces what is under what it writes: a source's
            // copy `DEST/NAME`, or DEST itself for `SRC/.` (and rsync's `SRC/`); a link (`ln`,
            // `link`, `cp -l`) is a second name to change the source by.
            let tree = command.program == "rsync"
                || command.program == "rclone"
                || flag(&["-r", "-R", "-a", "--recursive", "--archive"]);
            let links = matches!(command.program.as_str(), "ln" | "link")
                || (command.program == "cp" && flag(&["-l", "--link"]));
            let (sources, dest): (Vec<&str>, Option<&str>) = match target_dir {
                Some(dir) => (positionals.clone(), Some(dir)),
                None => match positionals.split_last() {
                    Some((last, rest)) if !rest.is_empty() => (rest.to_vec(), Some(*last)),
                    Some((last, _)) if command.program == "ln" => (vec![*last], Some(".")),
                    _ => (Vec::new(), None),
                },
            };
            if let Some(dest) = dest {
                if tree {
                    for source in &sources {
                        let spills = source.ends_with("/.")
                            || (command.program == "rsync" && source.ends_with('/'));
                        let dest_is_dir = matches!(
                            command.place(dest, home),
                            Place::Known(d) if Path::new(&d).is_dir()
                        );
                        let target = if spills || !dest_is_dir {
                            dest.to_string()
                        } else {
                            format!("{}/{}", dest.trim_end_matches('/'), base_name(source))
                        };
                        out.push((Change::Delete, Cow::Owned(target)));
                    }
                } else {
                    out.push((Change::Write, Cow::Borrowed(dest)));
                }
            }
            if links {
                out.extend(sources.iter().map(|p| (Change::Write, Cow::Borrowed(*p))));
            }
        }
        "tar" | "bsdtar" | "unzip" | "cpio" | "pax" => {
            // An archive unpacked over a directory replaces what it holds: judged by its
            // members, when it can be listed; `--remove-files` deletes what it packs.
            if flag(&["--remove-files"]) {
                out.extend(all(Change::Delete));
            }
            let extracts = command.program == "unzip"
                || args.first().is_some_and(|a| {
                    !a.starts_with("--") && a.trim_start_matches('-').contains('x')
                })
                || flag(&["-x", "--extract", "--get"]);
            if extracts {
                let dir = args.iter().enumerate().find_map(|(i, a)| match a.as_str() {
                    "-C" | "--directory" | "-d" => args.get(i + 1).map(String::as_str),
                    _ => a.strip_prefix("--directory="),
                });
                let touches_car = archive_members(command, home).is_some_and(|members| {
                    members.iter().any(|m| {
                        m.split('/').any(|c| {
                            c.eq_ignore_ascii_case(".car") || c.eq_ignore_ascii_case(".claude")
                        })
                    })
                });
                if touches_car {
                    out.push((Change::Delete, Cow::Borrowed(dir.unwrap_or("."))));
                }
            }
        }
        "gzip" | "gunzip" | "xz" | "unxz" | "bzip2" | "bunzip2" | "zstd" | "lz4" | "lzma"
            if !flag(&["-k", "--keep", "-c", "--stdout"]) =>
        {
            out.extend(all(Change::Delete))
        }
        "zip" if flag(&["-m", "--move"]) => out.extend(all(Change::Delete)),
        "uniq" if positionals.len() >= 2 => {
            out.push((Change::Write, Cow::Borrowed(positionals[1])))
        }
        "split" | "csplit" => out.extend(
            positionals
                .last()
                .map(|p| (Change::Write, Cow::Borrowed(*p))),
        ),
        "wipe" | "mmv" => out.extend(all(Change::Delete)),
        "ex" | "vi" | "vim" | "nvim" | "ed" | "sponge" | "emacs" | "nano" => {
            out.extend(all(Change::Write))
        }
        "awk" | "gawk" if args.iter().any(|a| a == "inplace" || a == "-i") => {
            out.extend(all(Change::Write))
        }
        "tee" | "truncate" | "touch" | "mkdir" | "chmod" | "chown" | "chgrp" | "chattr"
        | "setfacl" | "mkfifo" => out.extend(all(Change::Write)),
        "sed" | "gsed" | "perl" | "ruby" if flag(&["-i", "--in-place"]) => {
            out.extend(all(Change::Write))
        }
        "dd" => out.extend(
            positionals
                .iter()
                .filter_map(|a| a.strip_prefix("of="))
                .map(|p| (Change::Write, Cow::Borrowed(p))),
        ),
        "find" if flag(&["-delete"]) => {
            if let Some(start) = args.first().filter(|a| !a.starts_with('-')) {
                out.push((Change::Delete, Cow::Borrowed(start.as_str())));
            }
        }
        "git" => match positionals.split_first() {
            Some((&"rm", _)) if flag(&["--cached"]) => {}
            Some((&("rm" | "mv"), rest)) => {
                out.extend(rest.iter().map(|p| (Change::Delete, Cow::Borrowed(*p))))
            }
            Some((&"restore", _)) if flag(&["--staged", "-S"]) && !flag(&["--worktree", "-W"]) => {}
            Some((&("checkout" | "restore"), rest)) => {
                out.extend(rest.iter().map(|p| (Change::Write, Cow::Borrowed(*p))))
            }
            Some(_) | None => {}
        },
        _ => {}
    }
    out
}

/// `claude plugin uninstall|disable|remove car…` (also through `npx`), `claude config` of a
/// hook key, and `car policy init --force`.
fn unhooking_command(command: &Command) -> Option<String> {
    let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
    let plugin_off = args.windows(2).position(|w| {
        matches!(w[0], "plugin" | "plugins")
            && matches!(w[1], "uninstall" | "disable" | "remove" | "rm")
    });
    if let Some(at) = plugin_off {
        let named_car = args[at + 2..]
            .iter()
            .any(|a| !a.starts_with('-') && (a.starts_with("car@") || *a == "car"));
        if named_car {
            return Some(deny("CAR's plugin in its agent host"));
        }
    }
    let marketplace_off = args.windows(3).any(|w| {
        matches!(w[0], "plugin" | "plugins")
            && w[1] == "marketplace"
            && matches!(w[2], "remove" | "rm")
    });
    let configures_hooks = args.first() == Some(&"config")
        && args.iter().any(|a| {
            HOOK_KEYS.iter().any(|k| a.contains(k))
                || a.contains("enabledPlugins")
                || a.starts_with("env")
        });
    let is_claude = command.program == "claude" || args.iter().any(|a| a.contains("claude-code"));
    let unhooked_session = args.iter().any(|a| {
        matches!(
            *a,
            "--settings" | "--setting-sources" | "--dangerously-skip-permissions" | "--bare"
        ) || a.starts_with("--settings=")
            || a.starts_with("--setting-sources=")
    }) || args
        .windows(2)
        .any(|w| w[0] == "--permission-mode" && w[1] == "bypassPermissions");
    if is_claude && (marketplace_off || configures_hooks || unhooked_session) {
        return Some(deny("CAR's plugin or hooks in Claude Code"));
    }
    if let Some(what) = other_host_unhooked(command, &args) {
        return Some(deny(what));
    }
    if command.program == "car" {
        let words: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !a.starts_with('-'))
            .collect();
        if words.starts_with(&["policy", "init"]) && args.contains(&"--force") {
            return Some(deny(
                "the policy files (`car policy init --force` replaces them)",
            ));
        }
    }
    None
}

/// A Codex or Gemini CLI command that would run a session without CAR's hooks or take CAR's
/// package out: Codex's `--disable hooks`, `-c features.hooks=false` (or any `-c hooks…`),
/// `codex features disable hooks`; Gemini CLI's `extensions uninstall|disable car` and
/// `--extensions`/`-e` lists that leave CAR out.
fn other_host_unhooked(command: &Command, args: &[&str]) -> Option<&'static str> {
    let runs = |program: &str, package: &str| {
        command.program == program || args.iter().any(|a| a.contains(package))
    };
    // A host session with another home or config directory loads none of CAR's wiring.
    let elsewhere = command.vars.iter().any(|(name, _)| {
        matches!(
            name.as_str(),
            "HOME" | "CODEX_HOME" | "GEMINI_CLI_HOME" | "XDG_CONFIG_HOME" | "CURSOR_CONFIG_DIR"
        )
    });
    let a_host = ["codex", "gemini", "cursor-agent", "claude"].contains(&command.program.as_str())
        || args
            .iter()
            .any(|a| a.contains("@openai/codex") || a.contains("@google/gemini-cli"));
    if elsewhere && a_host {
        return Some("CAR's hooks (an agent host started with another home or config directory)");
    }
    if runs("codex", "@openai/codex") {
        let hooks_feature = |v: &str| {
            let v = v.trim_start_matches("--config=").trim_start_matches("-c=");
            v.starts_with("features.hooks")
                || v.starts_with("features.codex_hooks")
                || v.starts_with("hooks.")
                || v.starts_with("hooks=")
                || (v.starts_with("features=") && v.contains("hooks"))
        };
        let off = args.windows(2).any(|w| {
            (matches!(w[0], "--disable" | "--disable-feature")
                && matches!(w[1], "hooks" | "codex_hooks"))
                || (matches!(w[0], "-c" | "--config") && hooks_feature(w[1]))
                || (w[0] == "disable" && matches!(w[1], "hooks" | "codex_hooks"))
        }) || args.iter().any(|a| {
            a.starts_with("--config=") && hooks_feature(a)
                || matches!(*a, "--disable=hooks" | "--disable=codex_hooks")
        });
        if off {
            return Some("CAR's hooks in Codex (a session or setting that turns hooks off)");
        }
    }
    if runs("gemini", "@google/gemini-cli") {
        let named_car = |rest: &[&str]| {
            rest.iter()
                .any(|a| !a.starts_with('-') && (*a == "car" || a.starts_with("car@")))
        };
        let extension_off = args.windows(2).position(|w| {
            matches!(w[0], "extensions" | "extension")
                && matches!(w[1], "uninstall" | "disable" | "remove" | "rm")
        });
        if extension_off.is_some_and(|at| named_car(&args[at + 2..])) {
            return Some("CAR's extension in Gemini CLI");
        }
        let limited = args.windows(2).any(|w| {
            matches!(w[0], "-e" | "--extensions") && !w[1].split(',').any(|e| e.trim() == "car")
        }) || args.iter().any(|a| {
            a.strip_prefix("--extensions=")
                .is_some_and(|list| !list.split(',').any(|e| e.trim() == "car"))
        });
        if limited {
            return Some("CAR's extension in Gemini CLI (an --extensions list without car)");
        }
    }
    None
}

/// `git status --porcelain` of a rule directory with the repository's command-running
/// settings off, or `None` when it does not answer within 2 s.
fn git_status(dir: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut child = std::process::Command::new("git")
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--ignored",
            "--",
        ])
        .arg(dir)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = Vec::new();
                child.stdout.take()?.read_to_end(&mut out).ok()?;
                // Not a repository: nothing git could discard.
                return Some(if status.success() { out } else { Vec::new() });
            }
            Ok(None) if started.elapsed() < std::time::Duration::from_secs(2) => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// What a git command that rewrites the work tree takes away: changes to tracked files,
/// untracked files, ignored files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Takes {
    modified: bool,
    untracked: bool,
    ignored: bool,
}

/// What a git command that rewrites the work tree would discard: `stash` (modified files; with
/// `-u` untracked, with `-a` ignored too; not `list`, `show`, `apply`, `pop`, `drop`, `clear`,
/// `branch`), `clean` (untracked; with `-x`/`-X` ignored; not `-n`), `checkout`/`switch` with
/// `-f`/`--discard-changes`, `reset --hard|--merge|--keep`, `read-tree -u`, and `restore` of
/// the work tree (modified files).
fn rewrites_worktree(command: &Command) -> Option<Takes> {
    if command.program != "git" {
        return None;
    }
    let (sub, rest) = command.args.split_first()?;
    let has = |names: &[&str]| rest.iter().any(|a| names.contains(&a.as_str()));
    // A short flag, also inside a cluster (`-nd`, `-fdx`).
    let short = |letter: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letter))
    };
    let modified = Takes {
        modified: true,
        untracked: false,
        ignored: false,
    };
    match sub.as_str() {
        "stash" => {
            if matches!(
                rest.first().map(String::as_str),
                Some("list" | "show" | "apply" | "pop" | "drop" | "clear" | "branch" | "create")
            ) {
                return None;
            }
            let all = short('a') || has(&["--all"]);
            Some(Takes {
                modified: true,
                untracked: all || short('u') || has(&["--include-untracked"]),
                ignored: all,
            })
        }
        "clean" => (!(short('n') || has(&["--dry-run"]))).then(|| Takes {
            modified: false,
            untracked: true,
            ignored: short('x') || short('X'),
        }),
        "checkout" | "switch" => {
            (short('f') || has(&["--force", "--discard-changes"])).then_some(modified)
        }
        "reset" => has(&["--hard", "--merge", "--keep"]).then_some(modified),
        "read-tree" => (short('u') || has(&["--reset"])).then_some(modified),
        "restore" => (!(short('S') || has(&["--staged"])) || short('W') || has(&["--worktree"]))
            .then_some(modified),
        _ => None,
    }
}

/// Whether a `Write`/`Edit`/`MultiEdit` of a Claude settings file changes the keys that keep
/// CAR's hook running: the file as it is and as it would be are compared, key by key.
fn settings_edit(tool: &str, params: &Value, path: &str) -> Option<String> {
    let refused = || Some(deny("the agent host's settings that hook CAR's gate in"));
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
    let parse = |text: &str| -> Option<Value> {
        if path.ends_with(".toml") {
            toml::from_str::<Value>(text).ok()
        } else {
            // The hosts read their settings with comments and trailing commas allowed.
            if text.trim().is_empty() {
                return Some(Value::Null);
            }
            jsonc_parser::parse_to_serde_value::<Value>(
                text,
                &jsonc_parser::ParseOptions::default(),
            )
            .ok()
        }
    };
    let before: Value = match current {
        Some(text) => match parse(&text) {
            Some(value) => value,
            // A file CAR cannot read may hold hooks: it is not the agent's to replace.
            None => return refused(),
        },
        None => Value::Null,
    };
    let Some(after) = parse(&after) else {
        return refused();
    };
    // Codex drops a whole hooks.json that has a key it does not know.
    if path.ends_with("/.codex/hooks.json")
        && after
            .as_object()
            .is_some_and(|o| o.keys().any(|k| k != "hooks" && k != "description"))
    {
        return refused();
    }
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
    // An edit whose text is not there exactly is not a no-op: the hosts match leniently
    // (trimmed lines, regular expressions), so what it would do cannot be known.
    if !text.contains(old) {
        return None;
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
    // Codex turns hooks off with `[features] hooks = false` (`codex_hooks` before 0.124), for
    // every session or for a profile's (`[profiles.X.features]`, then `codex -p X`).
    for key in ["/features/hooks", "/features/codex_hooks"] {
        keys.push(settings.pointer(key).cloned().unwrap_or(Value::Null));
    }
    let profiles: Vec<(String, &str, Value)> = settings
        .get("profiles")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .flat_map(|(name, profile)| {
            ["/features/hooks", "/features/codex_hooks", "/hooks"]
                .into_iter()
                .filter_map(move |key| Some((name.clone(), key, profile.pointer(key)?.clone())))
        })
        .collect();
    keys.push(serde_json::json!(profiles));
    let env: Vec<(String, Value)> = settings
        .get("env")
        .and_then(Value::as_object)
        .map(|env| {
            env.iter()
                .filter(|(name, _)| hook_env(name))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect()
        })
        .unwrap_or_default();
    keys.push(serde_json::json!(env));
    // A project's hooks load only while its folder is trusted: Codex keeps the trust in
    // `[projects."<path>"] trust_level`, Gemini CLI turns folder trust on in
    // `security.folderTrust`.
    let trust: Vec<(String, Value)> = settings
        .get("projects")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(path, project)| Some((path.clone(), project.get("trust_level")?.clone())))
        .collect();
    keys.push(serde_json::json!(trust));
    keys.push(
        settings
            .pointer("/security/folderTrust")
            .cloned()
            .unwrap_or(Value::Null),
    );
    keys
}
