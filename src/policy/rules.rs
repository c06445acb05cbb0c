//! Rule files: the TOML format, where the files are read from, and loading them into a
//! [`RuleSet`]. Loading never half-succeeds: a file that does not parse, or a regex that does not
//! compile, makes the whole set a [`LoadFailure`] naming the file and line, and the engine then
//! denies every call.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// One rule file as written. Unknown keys are refused so a typo cannot silently disable a rule.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    deny_tool: Vec<String>,
    #[serde(default)]
    deny_keyword: Vec<String>,
    #[serde(default)]
    deny_connector: Vec<String>,
    #[serde(default)]
    deny_tool_param: Vec<DenyToolParamRow>,
    #[serde(default)]
    allow_tool_param: Vec<AllowToolParamRow>,
    #[serde(default)]
    deny_tool_param_matching: Vec<MatchingRow>,
    #[serde(default)]
    rate_limit_tool: Vec<RateLimitRow>,
    #[serde(default)]
    require_state: Vec<RequireStateRow>,
    #[serde(default)]
    deny_command: Vec<super::deny_command::Row>,
    #[serde(default)]
    deny_path: Vec<super::deny_command::PathRow>,
    #[serde(default)]
    egress: Option<EgressRow>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyToolParamRow {
    tool: String,
    param: String,
    equals: Option<toml::Value>,
    contains: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowToolParamRow {
    tool: String,
    param: String,
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchingRow {
    tool: String,
    param: String,
    matches: toml::Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitRow {
    tool: String,
    max_calls: u32,
    interval_secs: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequireStateRow {
    key: String,
    value: toml::Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EgressRow {
    #[serde(default)]
    allow_hosts: Vec<String>,
    #[serde(default)]
    strict: bool,
}

/// What a rule checks. Every variant narrows: a rule can deny a call, never allow one.
#[derive(Debug, Clone)]
pub enum RuleKind {
    /// Denies the tool by exact name.
    DenyTool { tool: String },
    /// Denies any call one of whose string-coerced parameter values contains the keyword
    /// (case-sensitive).
    DenyKeyword { keyword: String },
    /// Denies every tool of a connector: `mcp_<slug>_*` (CAR) and `mcp__<slug>__*` (Claude Code).
    DenyConnector { slug: String },
    /// Denies when the param is present and matches `equals` (exact JSON) and/or `contains`
    /// (substring of the stringified value); neither set means "present".
    DenyToolParam {
        tool: String,
        param: String,
        equals: Option<Value>,
        contains: Option<String>,
    },
    /// The only allowlist: the param must be present and exactly one of `allow`.
    AllowToolParam {
        tool: String,
        param: String,
        allow: Vec<String>,
    },
    /// Denies when the stringified param matches the (unanchored) regex. The syntax is
    /// checked at load; the matcher is compiled the first time a call of `tool` needs it
    /// (compiling costs ~0.3 ms, paid per process by the hook). A pattern that parses but
    /// still does not compile (over the size limit) denies the tool.
    DenyToolParamMatching {
        tool: String,
        param: String,
        pattern: String,
        /// Literals one of which begins every match, when the pattern is small enough to be
        /// sure to compile (see [`required_literals`]): a value containing none of them cannot
        /// match, so the regex is not compiled for it.
        required: Option<Vec<String>>,
        regex: std::sync::OnceLock<Result<regex::Regex, String>>,
    },
    /// At most `max_calls` admitted calls of the tool in any `interval_secs` window.
    RateLimitTool {
        tool: String,
        max_calls: u32,
        interval_secs: u64,
    },
    /// Denies unless the call's state has `key` equal to `value`.
    RequireState { key: String, value: Value },
    /// Denies a shell command that runs a matching program (see [`super::deny_command`]).
    DenyCommand(Box<super::deny_command::CommandRule>),
    /// Denies a call whose path param is a protected path (see [`super::deny_command`]).
    DenyPath(Box<super::deny_command::PathRule>),
}

/// A rule and the file it came from.
#[derive(Debug, Clone)]
pub struct Rule {
    pub kind: RuleKind,
    pub file: PathBuf,
    /// The directory holding the rule's `.car/`, which "inside the project" means for it;
    /// `None` for `<CAR_HOME>/policies`, whose rules judge against the working directory's
    /// project.
    pub project: Option<PathBuf>,
    /// The name its author gave it (a policy a client registers by name), which findings then
    /// use.
    pub label: Option<String>,
}

impl Rule {
    /// The rule's name in findings: its label, or e.g. `deny_tool:deploy` (never a matched
    /// value).
    pub fn name(&self) -> String {
        if let Some(label) = &self.label {
            return label.clone();
        }
        match &self.kind {
            RuleKind::DenyTool { tool } => format!("deny_tool:{tool}"),
            RuleKind::DenyKeyword { keyword } => format!("deny_keyword:{keyword}"),
            RuleKind::DenyConnector { slug } => format!("deny_connector:{slug}"),
            RuleKind::DenyToolParam { tool, param, .. } => {
                format!("deny_tool_param:{tool}.{param}")
            }
            RuleKind::AllowToolParam { tool, param, .. } => {
                format!("allow_tool_param:{tool}.{param}")
            }
            RuleKind::DenyToolParamMatching { tool, param, .. } => {
                format!("deny_tool_param_matching:{tool}.{param}")
            }
            RuleKind::RateLimitTool { tool, .. } => format!("rate_limit_tool:{tool}"),
            RuleKind::RequireState { key, .. } => format!("require_state:{key}"),
            RuleKind::DenyCommand(rule) => format!("deny_command:{}", rule.name),
            RuleKind::DenyPath(rule) => format!("deny_path:{}", rule.name),
        }
    }
}

/// The egress guard's configuration, merged from every file's `[egress]` table.
#[derive(Debug, Clone, Default)]
pub struct EgressConfig {
    /// Hosts added to the default allowlist (a host matches itself and its subdomains).
    pub allow_hosts: Vec<String>,
    /// Warnings become denials when any file sets `strict = true`.
    pub strict: bool,
}

/// One directory rules are read from, as reported in `policy_sources`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    pub path: PathBuf,
    pub exists: bool,
    pub rules: usize,
}

/// A file that could not be loaded, with the 1-based line when one is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct LoadFailure {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// Every rule of every source, merged in order, or the first failure.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub egress: EgressConfig,
    pub sources: Vec<Source>,
    pub failure: Option<LoadFailure>,
}

/// A directory rules are read from, and the project its rules judge paths against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleDir {
    pub dir: PathBuf,
    /// The directory holding this `.car/`; `None` for `<CAR_HOME>/policies`.
    pub project: Option<PathBuf>,
}

/// The directories rules are read from, in order: `<CAR_HOME>/policies`, then every
/// `.car/policies` from the outermost enclosing one down to the working directory's
/// ([`crate::home::policy_anchors`]), merged — a nested `.car/` adds rules and never lifts
/// one. When none of them is `project`'s own, that one is listed too (missing), as the place
/// its rules would go.
pub fn rule_dirs(home_policies: &Path, cwd: &Path, project: &Path) -> Vec<RuleDir> {
    let mut dirs = vec![RuleDir {
        dir: home_policies.to_path_buf(),
        project: None,
    }];
    let mut anchors = crate::home::policy_anchors(cwd);
    if !anchors.iter().any(|a| a == project) {
        anchors.push(project.to_path_buf());
    }
    for anchor in anchors {
        let dir = anchor.join(".car").join("policies");
        if dir != home_policies {
            dirs.push(RuleDir {
                dir,
                project: Some(anchor),
            });
        }
    }
    dirs
}

/// Loads every `*.toml` of each directory, sorted by file name, merged in directory order.
pub fn load(dirs: &[RuleDir]) -> RuleSet {
    let mut set = RuleSet {
        rules: Vec::new(),
        egress: EgressConfig::default(),
        sources: Vec::new(),
        failure: None,
    };
    for RuleDir { dir, project } in dirs {
        let files = match toml_files(dir) {
            Ok(files) => files,
            Err(failure) => {
                set.sources.push(Source {
                    path: dir.clone(),
                    exists: dir.exists(),
                    rules: 0,
                });
                set.failure.get_or_insert(failure);
                continue;
            }
        };
        let before = set.rules.len();
        for file in &files {
            let parsed = std::fs::read_to_string(file)
                .map_err(|e| LoadFailure {
                    file: file.clone(),
                    line: None,
                    message: format!("cannot read: {e}"),
                })
                .and_then(|text| parse(file, &text));
            match parsed {
                Ok((rules, egress)) => {
                    set.rules.extend(rules.into_iter().map(|rule| Rule {
                        project: project.clone(),
                        ..rule
                    }));
                    if let Some(egress) = egress {
                        set.egress.allow_hosts.extend(egress.allow_hosts);
                        set.egress.strict |= egress.strict;
                    }
                }
                Err(failure) => {
                    set.failure.get_or_insert(failure);
                }
            }
        }
        set.sources.push(Source {
            path: dir.clone(),
            exists: dir.is_dir(),
            rules: set.rules.len() - before,
        });
    }
    set
}

/// The `*.toml` files of a directory, sorted by name; a missing directory has none.
pub fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, LoadFailure> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(LoadFailure {
                file: dir.to_path_buf(),
                line: None,
                message: format!("cannot list the directory: {e}"),
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml") && path.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.into_iter().map(|(k, v)| (k, to_json(v))).collect())
        }
    }
}

/// The longest pattern whose regex is skipped when its literals are absent. Within it, and with
/// no counted repetition, a pattern always compiles under the regex size limit (a test checks
/// the worst case), so skipping never hides the deny a compile failure would give.
const MAX_PREFILTERED_PATTERN: usize = 256;

/// The literals one of which begins every match of the pattern, or `None` when there is no such
/// finite set, one is empty (the pattern can match anywhere), or the pattern might not compile.
/// An empty list means the pattern matches nothing.
fn required_literals(pattern: &str, hir: &regex_syntax::hir::Hir) -> Option<Vec<String>> {
    fn counted(hir: &regex_syntax::hir::Hir) -> bool {
        use regex_syntax::hir::HirKind;
        match hir.kind() {
            HirKind::Repetition(rep) => {
                rep.min > 1 || rep.max.is_some_and(|max| max > 1) || counted(&rep.sub)
            }
            HirKind::Capture(capture) => counted(&capture.sub),
            HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(counted),
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => false,
        }
    }
    if pattern.len() > MAX_PREFILTERED_PATTERN || counted(hir) {
        return None;
    }
    let seq = regex_syntax::hir::literal::Extractor::new().extract(hir);
    seq.literals()?
        .iter()
        .map(|literal| {
            std::str::from_utf8(literal.as_bytes())
                .ok()
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        })
        .collect()
}

/// Parses a rule file's tables written as JSON (`{"deny_tool": ["deploy"], "rate_limit_tool":
/// [{"tool": …, "max_calls": 3, "interval_secs": 60}]}`) exactly as [`parse`] reads the TOML:
/// one language wherever rules come from. `origin` names where they came from in errors.
pub fn parse_json(
    origin: &Path,
    tables: &serde_json::Map<String, Value>,
) -> Result<(Vec<Rule>, Option<EgressConfig>), LoadFailure> {
    let fail = |message: String| LoadFailure {
        file: origin.to_path_buf(),
        line: None,
        message,
    };
    let table: toml::Table =
        serde_json::from_value(Value::Object(tables.clone())).map_err(|e| {
            fail(format!(
                "not a rule file's tables: {e} (null is not a value here)"
            ))
        })?;
    let text = toml::to_string(&table).map_err(|e| fail(e.to_string()))?;
    parse(origin, &text).map_err(|e| fail(e.message))
}

/// Parses one file's text into rules (and its `[egress]` table), compiling every regex.
pub fn parse(file: &Path, text: &str) -> Result<(Vec<Rule>, Option<EgressConfig>), LoadFailure> {
    let fail = |line: Option<usize>, message: String| LoadFailure {
        file: file.to_path_buf(),
        line,
        message,
    };
    let parsed: RuleFile = toml::from_str(text).map_err(|e| {
        fail(
            e.span().map(|span| line_of(text, span.start)),
            e.message().trim().to_string(),
        )
    })?;
    let mut kinds = Vec::new();
    kinds.extend(
        parsed
            .deny_tool
            .into_iter()
            .map(|tool| RuleKind::DenyTool { tool }),
    );
    kinds.extend(
        parsed
            .deny_keyword
            .into_iter()
            .map(|keyword| RuleKind::DenyKeyword { keyword }),
    );
    kinds.extend(
        parsed
            .deny_connector
            .into_iter()
            .map(|slug| RuleKind::DenyConnector { slug }),
    );
    kinds.extend(
        parsed
            .deny_tool_param
            .into_iter()
            .map(|row| RuleKind::DenyToolParam {
                tool: row.tool,
                param: row.param,
                equals: row.equals.map(to_json),
                contains: row.contains,
            }),
    );
    kinds.extend(
        parsed
            .allow_tool_param
            .into_iter()
            .map(|row| RuleKind::AllowToolParam {
                tool: row.tool,
                param: row.param,
                allow: row.allow,
            }),
    );
    for row in parsed.deny_tool_param_matching {
        let hir = regex_syntax::Parser::new()
            .parse(row.matches.get_ref())
            .map_err(|e| {
                fail(
                    Some(line_of(text, row.matches.span().start)),
                    format!(
                        "the regex of deny_tool_param_matching {}.{} does not compile: {}",
                        row.tool,
                        row.param,
                        e.to_string().lines().last().unwrap_or("invalid regex")
                    ),
                )
            })?;
        kinds.push(RuleKind::DenyToolParamMatching {
            tool: row.tool,
            param: row.param,
            required: required_literals(row.matches.get_ref(), &hir),
            pattern: row.matches.into_inner(),
            regex: std::sync::OnceLock::new(),
        });
    }
    kinds.extend(
        parsed
            .rate_limit_tool
            .into_iter()
            .map(|row| RuleKind::RateLimitTool {
                tool: row.tool,
                max_calls: row.max_calls,
                interval_secs: row.interval_secs,
            }),
    );
    kinds.extend(
        parsed
            .require_state
            .into_iter()
            .map(|row| RuleKind::RequireState {
                key: row.key,
                value: to_json(row.value),
            }),
    );
    for row in parsed.deny_command {
        // The line is counted only for an error: counting it for every row read the whole
        // file once per rule, the largest cost of loading the preset in the hook.
        let offset = row.offset();
        let rule = row
            .validate()
            .map_err(|message| fail(Some(line_of(text, offset)), message))?;
        kinds.push(RuleKind::DenyCommand(Box::new(rule)));
    }
    for row in parsed.deny_path {
        // The line is counted only for an error: counting it for every row read the whole
        // file once per rule, the largest cost of loading the preset in the hook.
        let offset = row.offset();
        let rule = row
            .validate()
            .map_err(|message| fail(Some(line_of(text, offset)), message))?;
        kinds.push(RuleKind::DenyPath(Box::new(rule)));
    }
    let rules = kinds
        .into_iter()
        .map(|kind| Rule {
            kind,
            file: file.to_path_buf(),
            project: None,
            label: None,
        })
        .collect();
    let egress = parsed.egress.map(|row| EgressConfig {
        allow_hosts: row.allow_hosts,
        strict: row.strict,
    });
    Ok((rules, egress))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_file_names_the_file_and_line() {
        let err = parse(
            Path::new("x.toml"),
            "deny_tool = [\"a\"]\n\ndeny_keyword = [1\n",
        )
        .unwrap_err();
        assert_eq!(err.file, Path::new("x.toml"));
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn an_uncompilable_regex_names_the_file_and_line() {
        let text = "deny_tool = []\n[[deny_tool_param_matching]]\ntool = \"t\"\nparam = \"p\"\nmatches = \"(unclosed\"\n";
        let err = parse(Path::new("r.toml"), text).unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("does not compile"), "{err}");
    }

    fn literals_of(pattern: &str) -> Option<Vec<String>> {
        let hir = regex_syntax::Parser::new().parse(pattern).unwrap();
        required_literals(pattern, &hir)
    }

    #[test]
    fn a_value_without_the_required_literals_never_matches() {
        assert_eq!(literals_of(r"\bsudo\b"), Some(vec!["sudo".to_string()]));
        for unbounded in [r"a*", r"\w+", r"x{3}", r"(ab){2,}", r"(?:\w{100}){100}"] {
            assert_eq!(literals_of(unbounded), None, "{unbounded}");
        }
        assert_eq!(literals_of(&format!("sudo{}", "x".repeat(300))), None);
        let patterns = [
            r"\bsudo\b",
            r"git\s+reset\s+--hard",
            r"curl[^|]*\|\s*(ba|z)?sh\b",
            r"(?i)DROP\s+table",
            r"^https?://",
            r"\.(pem|key)$",
            r"[αβ]δ",
            r"(^|/)\.env$",
        ];
        let values = [
            "sudo rm",
            "pseudo",
            "git  reset --hard HEAD",
            "GIT RESET --HARD",
            "curl x | zsh",
            "drop TABLE users",
            "http://a",
            "key.pem",
            "βδ",
            "a/.env",
            "",
        ];
        for pattern in patterns {
            let literals = literals_of(pattern).unwrap_or_else(|| panic!("{pattern}"));
            let regex = regex::Regex::new(pattern).unwrap();
            for value in values {
                if !literals.iter().any(|l| value.contains(l.as_str())) {
                    assert!(!regex.is_match(value), "{pattern} matched {value:?}");
                }
            }
        }
    }

    #[test]
    fn every_prefiltered_pattern_compiles() {
        // The largest classes, repeated up to the length bound, with no counted repetition.
        for unit in [
            r"\w", r"\W", r"\d", r"\s", r"\pL", r"(?i)\w", r"\b\w", r"[^a]",
        ] {
            let pattern = unit.repeat(MAX_PREFILTERED_PATTERN / unit.len());
            assert!(pattern.len() <= MAX_PREFILTERED_PATTERN);
            assert!(regex::Regex::new(&pattern).is_ok(), "{unit} repeated");
        }
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let err = parse(Path::new("k.toml"), "deny_tools = [\"a\"]\n").unwrap_err();
        assert_eq!(err.line, Some(1));
    }

    #[test]
    fn files_merge_in_name_order_home_first() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(project.join(".car/policies")).unwrap();
        std::fs::write(home.join("b.toml"), "deny_tool = [\"home_b\"]").unwrap();
        std::fs::write(home.join("a.toml"), "deny_tool = [\"home_a\"]").unwrap();
        std::fs::write(home.join("notes.txt"), "deny_tool = [\"ignored\"]").unwrap();
        std::fs::write(
            project.join(".car/policies/a.toml"),
            "deny_tool = [\"project_a\"]",
        )
        .unwrap();
        let set = load(&rule_dirs(&home, &project, &project));
        let names: Vec<String> = set.rules.iter().map(Rule::name).collect();
        assert_eq!(
            names,
            [
                "deny_tool:home_a",
                "deny_tool:home_b",
                "deny_tool:project_a"
            ]
        );
        assert_eq!(set.sources[0].rules, 2);
        assert_eq!(set.sources[1].rules, 1);
        assert!(set.failure.is_none());
    }

    #[test]
    fn parent_rules_apply_and_each_rule_knows_its_project() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path();
        let project = parent.join("sub");
        let cwd = project.join("deep/er");
        std::fs::create_dir_all(parent.join(".car/policies")).unwrap();
        std::fs::write(parent.join(".car/policies/p.toml"), "deny_tool = [\"x\"]").unwrap();
        std::fs::create_dir_all(project.join(".car/policies")).unwrap();
        std::fs::write(project.join(".car/policies/s.toml"), "deny_tool = [\"y\"]").unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let home = tmp.path().join("home");
        let set = load(&rule_dirs(&home, &cwd, &project));
        let names: Vec<(String, Option<PathBuf>)> = set
            .rules
            .iter()
            .map(|r| (r.name(), r.project.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("deny_tool:x".to_string(), Some(parent.to_path_buf())),
                ("deny_tool:y".to_string(), Some(project.clone())),
            ]
        );
        let dirs: Vec<PathBuf> = set.sources.iter().map(|s| s.path.clone()).collect();
        assert_eq!(
            dirs,
            [
                home,
                parent.join(".car/policies"),
                project.join(".car/policies")
            ]
        );
    }
}
