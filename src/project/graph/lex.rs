//! The small lexers the parsers read through: they drop comments (and, in Rust and Python,
//! string contents) so that a reference inside a comment or a string is not read as one. Only
//! what the parsers need is told apart: strings, raw strings, char literals versus Rust
//! lifetimes, nested block comments, Python's triple quotes and logical lines.

/// How `clean` treats a language's literals.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    /// Nested block comments; string contents dropped (but `#[path = "…"]` kept); raw strings;
    /// char literals told apart from lifetimes.
    Rust,
    /// Strings kept (imports are strings); `'` `"` and `` ` `` strings skipped whole.
    JavaScript,
    /// Strings kept; runes like `'"'` skipped.
    Go,
}

/// Drops comments (and in Rust string contents) so that only code is matched.
pub(super) fn clean(src: &str, syntax: Syntax) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && next == Some(b'*') {
            let mut depth = 1;
            i += 2;
            while i < b.len() && depth > 0 {
                if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                } else if syntax == Syntax::Rust && b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
            out.push(b' ');
        } else if syntax == Syntax::Rust
            && c == b'r'
            && (i == 0 || !ident(b[i - 1]) || b[i - 1] == b'b')
            && matches!(next, Some(b'"' | b'#'))
        {
            // A raw string r"…" or r#"…"#: its end is a quote followed by as many hashes.
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            j += 1;
            while j < b.len() {
                if b[j] == b'"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.extend_from_slice(b"\"\"");
            i = j;
        } else if c == b'"' || (syntax == Syntax::JavaScript && (c == b'\'' || c == b'`')) {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            if syntax == Syntax::Rust && !after_path_attribute(&out) {
                out.extend_from_slice(b"\"\"");
            } else {
                out.extend_from_slice(&b[start..i]);
            }
        } else if c == b'\'' && syntax != Syntax::JavaScript {
            // A char literal ('a', '\n', 'é') is skipped; a Rust lifetime ('a) is kept.
            let len = match next {
                Some(b'\\') => b[i + 2..].iter().position(|&x| x == b'\'').map(|p| p + 3),
                Some(n) => {
                    let width = utf8_width(n);
                    (b.get(i + 1 + width) == Some(&b'\'')).then_some(width + 2)
                }
                None => None,
            };
            match len {
                Some(len) => {
                    out.extend_from_slice(b"' '");
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn utf8_width(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Whether the code so far ends in `#[path =`, whose string a Rust scan needs.
fn after_path_attribute(out: &[u8]) -> bool {
    let tail = &out[out.len().saturating_sub(64)..];
    let text = String::from_utf8_lossy(tail);
    let Some(rest) = text.trim_end().strip_suffix('=') else {
        return false;
    };
    let Some(rest) = rest.trim_end().strip_suffix("path") else {
        return false;
    };
    rest.trim_end().ends_with("#[")
}

/// The logical lines of Python code (bracketed and backslash-continued lines joined, `;`
/// statements split) that start with `import` or `from`, comments and string contents dropped.
pub(super) fn python_import_statements(text: &str) -> Vec<String> {
    fn keep(statements: &mut Vec<String>, line: &[u8]) {
        let trimmed = line.trim_ascii();
        if trimmed.starts_with(b"import") || trimmed.starts_with(b"from") {
            statements.push(String::from_utf8_lossy(trimmed).into_owned());
        }
    }
    let b = text.as_bytes();
    let mut statements = Vec::new();
    let mut line = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if b[i] == c
                        && (!triple || (b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c)))
                    {
                        i += if triple { 3 } else { 1 };
                        break;
                    }
                    if b[i] == b'\n' && !triple {
                        break;
                    }
                    i += 1;
                }
                line.extend_from_slice(b"''");
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                i += 2;
                line.push(b' ');
                continue;
            }
            b'\n' | b';' if depth == 0 || c == b';' => {
                keep(&mut statements, &line);
                line.clear();
                i += 1;
                continue;
            }
            b'\n' => {
                line.push(b' ');
                i += 1;
                continue;
            }
            _ => {}
        }
        line.push(c);
        i += 1;
    }
    keep(&mut statements, &line);
    statements
}
