//! A shell command parser for the `deny_command` rule kind: it turns a `Bash` command string into
//! the simple commands it runs, in order, the way a POSIX shell would split them, without
//! expanding anything. It is not a shell: it exists so a rule can see `rm -rf ~` inside
//! `bash -c "cd / && rm -rf ~"` and not see it inside `echo "rm -rf ~"` or a heredoc's text.
//!
//! What it honours: single and double quotes, `$'…'`, backslash escapes and line continuations;
//! the separators `;`, `&`, `&&`, `||`, `|`, `|&` and newlines; `( … )` subshells and `{ …; }`
//! groups (their commands are listed in place); `$( … )`, backticks and `<( … )`/`>( … )`
//! (their commands are parsed too and attached to the word they appear in, whose text gets the
//! marker [`UNKNOWN`] instead); `${…}` and `$((…))` kept as text; redirections (`<`, `>`, `>>`,
//! `>|`, `&>`, `2>&1`, `<<<`, heredocs) with their targets; `#` comments; leading `NAME=value`
//! assignments, kept apart from the words.
//!
//! Bad input never panics. An unterminated quote or substitution takes the rest of the input
//! (a shell would refuse to run that part at all), an unmatched `)` is skipped: the command is
//! judged on that best-effort reading. Only input a rule could not see at all is an error
//! ([`Uninspectable`]): longer than [`MAX_LEN`] bytes or nested deeper than [`MAX_DEPTH`]
//! substitutions; `deny_command` rules then deny rather than pass it unchecked.

/// The longest command text the parser reads (bytes).
pub const MAX_LEN: usize = 256 * 1024;
/// How deep substitutions and `bash -c` strings may nest.
pub const MAX_DEPTH: usize = 16;
/// Stands in a word's text for what a substitution or xargs would produce at run time.
pub const UNKNOWN: char = '\u{1}';

/// Why a command cannot be inspected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Uninspectable {
    #[error("the command is longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("the command nests substitutions or shell strings deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("the command runs code it builds at run time (an inline script's `eval`, `exec` or `getattr`, or a command string or program it computes)")]
    BuiltAtRunTime,
}

/// One word as the shell would pass it (quotes removed), with the commands of any substitution
/// inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub substitutions: Vec<Script>,
}

/// Which way a redirection moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`: the target is read.
    Read,
    /// `>`, `>>`, `>|`, `&>`, `<>`: the target is written.
    Write,
    /// `<<`, `<<<`: the target is the text fed on stdin, not a path.
    Here,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub kind: RedirectKind,
    pub target: Word,
}

/// One simple command: `NAME=value … program args… redirections…`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Simple {
    pub assignments: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Its stdin is the previous simple command's stdout (`a | b`).
    pub piped: bool,
}

/// Every simple command of a command string, in the order they appear.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<Simple>,
}

/// Parses a command string.
pub fn parse(text: &str) -> Result<Script, Uninspectable> {
    parse_nested(text, 0)
}

/// Parses a command string found `depth` levels inside another one (`bash -c`, `eval`).
pub fn parse_nested(text: &str, depth: usize) -> Result<Script, Uninspectable> {
    if text.len() > MAX_LEN {
        return Err(Uninspectable::TooLong);
    }
    if depth > MAX_DEPTH {
        return Err(Uninspectable::TooDeep);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut parser = Parser {
        chars: &chars,
        pos: 0,
        in_backticks: 0,
    };
    parser.script(depth, None)
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    /// Inside a backtick substitution an unescaped backtick always closes it.
    in_backticks: usize,
}

/// What ends the script being read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    Paren,
    Backtick,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn eat(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        if self.chars.len() >= self.pos + n
            && s.chars().zip(&self.chars[self.pos..]).all(|(a, b)| a == *b)
        {
            self.pos += n;
            return true;
        }
        false
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    /// Reads commands until `close` (consumed) or the end of input.
    fn script(&mut self, depth: usize, close: Option<Close>) -> Result<Script, Uninspectable> {
        let mut script = Script::default();
        let mut current = Simple::default();
        let mut heredocs: Vec<(String, bool)> = Vec::new();
        let mut piped = false;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            match c {
                ')' if close == Some(Close::Paren) => {
                    self.pos += 1;
                    break;
                }
                '`' if close == Some(Close::Backtick) => {
                    self.pos += 1;
                    break;
                }
                ')' => {
                    // An unmatched `)` ends a `case` pattern (`*) rm -rf x;;`): the words
                    // before it are the pattern, not a command.
                    self.pos += 1;
                    current = Simple::default();
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '\n' | ';' | '&' | '|' => {
                    let was_pipe = if c == '|' && self.peek_at(1) != Some('|') {
                        self.pos += 1;
                        self.eat("&");
                        true
                    } else if c == '&' && self.peek_at(1) == Some('>') {
                        // `&>file` is a redirection, not a separator.
                        self.redirect(&mut current, &mut heredocs, depth)?;
                        continue;
                    } else {
                        self.pos += 1;
                        if c != '\n' && self.peek() == Some(c) {
                            self.pos += 1;
                        }
                        false
                    };
                    finish(&mut script, &mut current, &mut piped);
                    piped = was_pipe;
                    if c == '\n' {
                        self.skip_heredocs(&mut heredocs, &mut script);
                    }
                }
                '(' if current.words.is_empty() => {
                    self.pos += 1;
                    let inner = self.nested(depth, Close::Paren)?;
                    finish(&mut script, &mut current, &mut piped);
                    let mut inner = inner.commands.into_iter();
                    if let Some(mut first) = inner.next() {
                        first.piped |= piped;
                        script.commands.push(first);
                    }
                    script.commands.extend(inner);
                    piped = false;
                }
                '(' if self.peek_at(1) == Some(')') => {
                    // `name() { …; }` defines a function: the name runs nothing, the body is
                    // read as the commands it will run.
                    self.pos += 2;
                    current = Simple::default();
                }
                '(' => self.pos += 1,
                '<' | '>' if self.peek_at(1) != Some('(') => {
                    self.redirect(&mut current, &mut heredocs, depth)?;
                }
                '0'..='9' if self.is_fd_redirect() => {
                    while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        self.pos += 1;
                    }
                    self.redirect(&mut current, &mut heredocs, depth)?;
                }
                _ => {
                    let start = self.pos;
                    let word = self.word(depth)?;
                    if self.pos == start {
                        // A backtick closing an enclosing substitution: let it close.
                        break;
                    }
                    match assignment(&word) {
                        Some(pair) if current.words.is_empty() => current.assignments.push(pair),
                        Some(_) | None => current.words.push(word),
                    }
                }
            }
        }
        finish(&mut script, &mut current, &mut piped);
        Ok(script)
    }

    fn nested(&mut self, depth: usize, close: Close) -> Result<Script, Uninspectable> {
        if depth + 1 > MAX_DEPTH {
            return Err(Uninspectable::TooDeep);
        }
        let backtick = usize::from(close == Close::Backtick);
        self.in_backticks += backtick;
        let script = self.script(depth + 1, Some(close));
        self.in_backticks -= backtick;
        script
    }

    fn is_fd_redirect(&self) -> bool {
        let mut i = self.pos;
        while self.chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        matches!(self.chars.get(i), Some('<' | '>')) && self.chars.get(i + 1) != Some(&'(')
    }

    /// Reads a redirection operator and its target.
    fn redirect(
        &mut self,
        current: &mut Simple,
        heredocs: &mut Vec<(String, bool)>,
        depth: usize,
    ) -> Result<(), Uninspectable> {
        let kind = if self.eat("<<<") {
            RedirectKind::Here
        } else if self.eat("<<-") || self.eat("<<") {
            let strip_tabs = self.chars.get(self.pos.wrapping_sub(1)) == Some(&'-');
            self.skip_blanks();
            let delimiter = self.word(depth)?;
            heredocs.push((delimiter.text, strip_tabs));
            current.redirects.push(Redirect {
                kind: RedirectKind::Here,
                target: Word::default(),
            });
            return Ok(());
        } else if self.eat("<&") || self.eat(">&") {
            self.skip_blanks();
            // `2>&1`, `>&-`: a descriptor, not a file.
            if self.peek().is_some_and(|c| c.is_ascii_digit() || c == '-') {
                let _ = self.word(depth)?;
                return Ok(());
            }
            RedirectKind::Write
        } else if self.eat("<>") {
            // Opened for reading and writing: `1<> file` rewrites it in place.
            RedirectKind::Write
        } else if self.eat("<") {
            RedirectKind::Read
        } else if self.eat("&>>")
            || self.eat("&>")
            || self.eat(">>")
            || self.eat(">|")
            || self.eat(">")
        {
            RedirectKind::Write
        } else {
            self.pos += 1;
            return Ok(());
        };
        self.skip_blanks();
        let target = self.word(depth)?;
        current.redirects.push(Redirect { kind, target });
        Ok(())
    }

    /// After a newline: the bodies of pending heredocs, attached to the last command that
    /// declared them (a shell reading one on stdin runs it).
    fn skip_heredocs(&mut self, heredocs: &mut Vec<(String, bool)>, script: &mut Script) {
        for (delimiter, strip_tabs) in heredocs.drain(..) {
            let mut body = String::new();
            loop {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                let at_end = self.peek().is_none();
                self.pos += usize::from(!at_end);
                let candidate = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if candidate == delimiter || at_end {
                    if at_end && candidate != delimiter {
                        body.push_str(&line);
                    }
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            let target = script
                .commands
                .iter_mut()
                .rev()
                .flat_map(|c| c.redirects.iter_mut())
                .find(|r| r.kind == RedirectKind::Here && r.target.text.is_empty());
            if let Some(redirect) = target {
                redirect.target.text = body;
            }
        }
    }

    /// Reads one word, removing quotes and parsing the substitutions in it.
    fn word(&mut self, depth: usize) -> Result<Word, Uninspectable> {
        let mut word = Word::default();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | ')' => break,
                '`' if self.in_backticks > 0 => break,
                '(' if word.text.is_empty() => break,
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    word.substitutions.push(self.nested(depth, Close::Paren)?);
                    word.text.push(UNKNOWN);
                }
                '<' | '>' => break,
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(next) => {
                            word.text.push(next);
                            self.pos += 1;
                        }
                        None => {}
                    }
                }
                '\'' => {
                    self.pos += 1;
                    while let Some(c) = self.peek() {
                        self.pos += 1;
                        if c == '\'' {
                            break;
                        }
                        word.text.push(c);
                    }
                }
                '"' => {
                    self.pos += 1;
                    self.double_quoted(&mut word, depth)?;
                }
                '`' => {
                    self.pos += 1;
                    word.substitutions
                        .push(self.nested(depth, Close::Backtick)?);
                    word.text.push(UNKNOWN);
                }
                '$' => self.dollar(&mut word, depth)?,
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(word)
    }

    fn double_quoted(&mut self, word: &mut Word, depth: usize) -> Result<(), Uninspectable> {
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    return Ok(());
                }
                '`' if self.in_backticks > 0 => return Ok(()),
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(next @ ('$' | '`' | '"' | '\\')) => {
                            word.text.push(next);
                            self.pos += 1;
                        }
                        Some(_) | None => word.text.push('\\'),
                    }
                }
                '`' => {
                    self.pos += 1;
                    word.substitutions
                        .push(self.nested(depth, Close::Backtick)?);
                    word.text.push(UNKNOWN);
                }
                '$' => self.dollar(word, depth)?,
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(())
    }

    /// `$(…)`, `$((…))`, `${…}`, `$'…'` or a plain `$NAME`, kept as text.
    fn dollar(&mut self, word: &mut Word, depth: usize) -> Result<(), Uninspectable> {
        if self.eat("$((") {
            word.text.push_str("$((");
            self.balanced(word, '(', ')', 2);
        } else if self.eat("$(") {
            word.substitutions.push(self.nested(depth, Close::Paren)?);
            word.text.push(UNKNOWN);
        } else if self.eat("${") {
            word.text.push_str("${");
            self.balanced(word, '{', '}', 1);
        } else if self.eat("$'") {
            while let Some(c) = self.peek() {
                self.pos += 1;
                match c {
                    '\'' => break,
                    '\\' => {
                        let escaped = self.peek().unwrap_or('\\');
                        self.pos += 1;
                        word.text.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                    }
                    other => word.text.push(other),
                }
            }
        } else {
            word.text.push('$');
            self.pos += 1;
        }
        Ok(())
    }

    /// Copies text up to the `open_count`-th unmatched `close`.
    fn balanced(&mut self, word: &mut Word, open: char, close: char, open_count: usize) {
        let mut level = open_count;
        while let Some(c) = self.peek() {
            self.pos += 1;
            word.text.push(c);
            if c == open {
                level += 1;
            } else if c == close {
                level -= 1;
                if level == 0 {
                    return;
                }
            }
        }
    }
}

/// Closes the command being read, if it has anything.
fn finish(script: &mut Script, current: &mut Simple, piped: &mut bool) {
    let done = std::mem::take(current);
    if !(done.words.is_empty() && done.assignments.is_empty() && done.redirects.is_empty()) {
        script.commands.push(Simple {
            piped: *piped,
            ..done
        });
    }
    *piped = false;
}

/// Whether `name` is a shell variable's name.
pub fn is_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=value` (the name unquoted) as a pair.
fn assignment(word: &Word) -> Option<(String, Word)> {
    let (name, value) = word.text.split_once('=')?;
    is_name(name).then(|| {
        (
            name.to_string(),
            Word {
                text: value.to_string(),
                substitutions: word.substitutions.clone(),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each command's words as text.
    fn words(text: &str) -> Vec<Vec<String>> {
        parse(text)
            .unwrap()
            .commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
            .collect()
    }

    #[test]
    fn separators_split_commands() {
        assert_eq!(
            words("a 1 && b 2 || c; d & e\nf | g |& h"),
            [
                vec!["a", "1"],
                vec!["b", "2"],
                vec!["c"],
                vec!["d"],
                vec!["e"],
                vec!["f"],
                vec!["g"],
                vec!["h"]
            ]
        );
        let script = parse("f | g; h").unwrap();
        let piped: Vec<bool> = script.commands.iter().map(|c| c.piped).collect();
        assert_eq!(piped, [false, true, false]);
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        assert_eq!(
            words(r#"r\m -rf 'a b' "c $X \"d\"" e\ f $'g\th'"#),
            [vec!["rm", "-rf", "a b", "c $X \"d\"", "e f", "g\th"]]
        );
        assert_eq!(words("echo 'rm -rf /; x'"), [vec!["echo", "rm -rf /; x"]]);
        assert_eq!(words("a \\\n b"), [vec!["a", "b"]]);
    }

    #[test]
    fn subshells_and_groups_list_their_commands_in_place() {
        assert_eq!(
            words("(cd / && rm -rf .) ; { git status; }"),
            [
                vec!["cd", "/"],
                vec!["rm", "-rf", "."],
                vec!["{", "git", "status"],
                vec!["}"]
            ]
        );
    }

    #[test]
    fn substitutions_are_parsed_and_marked() {
        let script = parse("echo \"$(rm -rf ~)\" `git reset --hard` <(curl x)").unwrap();
        let echo = &script.commands[0];
        assert_eq!(echo.words[1].text, UNKNOWN.to_string());
        assert_eq!(
            echo.words[1].substitutions[0].commands[0].words[0].text,
            "rm"
        );
        assert_eq!(
            echo.words[2].substitutions[0].commands[0].words[1].text,
            "reset"
        );
        assert_eq!(
            echo.words[3].substitutions[0].commands[0].words[0].text,
            "curl"
        );
        assert_eq!(
            words("echo ${HOME} $((1 + (2))) x"),
            [vec!["echo", "${HOME}", "$((1 + (2)))", "x"]]
        );
    }

    #[test]
    fn redirections_keep_their_targets() {
        let script = parse("cat x > /dev/sda 2>&1 < ~/.ssh/id_rsa; b &>log 3> c").unwrap();
        let targets: Vec<(RedirectKind, String)> = script
            .commands
            .iter()
            .flat_map(|c| c.redirects.iter())
            .map(|r| (r.kind, r.target.text.clone()))
            .collect();
        assert_eq!(
            targets,
            [
                (RedirectKind::Write, "/dev/sda".to_string()),
                (RedirectKind::Read, "~/.ssh/id_rsa".to_string()),
                (RedirectKind::Write, "log".to_string()),
                (RedirectKind::Write, "c".to_string()),
            ]
        );
        assert_eq!(words("cat x > /dev/sda 2>&1"), [vec!["cat", "x"]]);
    }

    #[test]
    fn heredoc_bodies_are_text_not_commands() {
        let script = parse("cat <<'EOF' > notes.md\nrm -rf /\nEOF\ngit status").unwrap();
        assert_eq!(script.commands.len(), 2, "{script:?}");
        assert_eq!(script.commands[0].redirects[0].target.text, "rm -rf /\n");
        assert_eq!(script.commands[1].words[0].text, "git");
    }

    #[test]
    fn assignments_are_kept_apart() {
        let script = parse("FOO=1 BAR='x y' git clean -fdx; D=/").unwrap();
        assert_eq!(
            script.commands[0].assignments[1],
            (
                "BAR".to_string(),
                Word {
                    text: "x y".into(),
                    substitutions: vec![]
                }
            )
        );
        assert_eq!(script.commands[0].words[0].text, "git");
        assert_eq!(script.commands[1].assignments[0].0, "D");
        assert_eq!(
            words("git commit -m a=b"),
            [vec!["git", "commit", "-m", "a=b"]]
        );
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(words("ls # rm -rf /\nx#y"), [vec!["ls"], vec!["x#y"]]);
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "'unterminated",
            "\"unterminated $(",
            "$(((",
            ")))",
            "`",
            "<<",
            "<<EOF",
            "2>",
            "&>",
            "${",
            "$'\\",
            "\\",
            "a |",
            "| a",
            "((",
            "\u{0}\u{1}\u{ffff}",
            "<(<(<(",
            "`$(`",
            "`a $(b ` c` d",
            "\"`\"`",
        ] {
            let _ = parse(text);
        }
        assert_eq!(words("echo 'a; rm -rf /"), [vec!["echo", "a; rm -rf /"]]);
    }

    #[test]
    fn limits_are_errors_not_crashes() {
        let deep = "$(".repeat(MAX_DEPTH + 2);
        assert_eq!(parse(&deep), Err(Uninspectable::TooDeep));
        let long = "a ".repeat(MAX_LEN);
        assert_eq!(parse(&long), Err(Uninspectable::TooLong));
        assert_eq!(
            parse_nested("ls", MAX_DEPTH + 1),
            Err(Uninspectable::TooDeep)
        );
    }
}
