//! Reading the references out of one source file, without resolving them: `mod`/`use` paths in
//! Rust, imported modules in Python, import specifiers in JavaScript/TypeScript and Go, quoted
//! `#include`s in C/C++, and a go.mod's module path. Each language is read by a small lexer that
//! drops comments (and, in Rust and Python, string contents) followed by regular expressions, so a
//! reference inside a comment or a string is not read as one. What each one misses is listed in
//! the module doc of `graph` and in docs/graph.md.

use std::sync::LazyLock;

use regex::Regex;

use super::lex::{clean, python_import_statements, Syntax};

/// The languages a scan reads, chosen by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Go,
    /// A `go.mod`: only its `module` line is read.
    GoMod,
    C,
    Cpp,
}

impl Lang {
    /// The language of a file, by its name; None for files a scan records but does not read.
    pub fn of(key: &str) -> Option<Lang> {
        let name = key.rsplit('/').next().unwrap_or(key);
        if name == "go.mod" {
            return Some(Lang::GoMod);
        }
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "ts" | "tsx" | "mts" | "cts" => Lang::TypeScript,
            "go" => Lang::Go,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            _ => return None,
        })
    }

    /// The name stored in `graph_nodes.lang` and shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Go => "go",
            Lang::GoMod => "gomod",
            Lang::C => "c",
            Lang::Cpp => "cpp",
        }
    }
}

/// What a reference is; all but `GoModule` become edges of that kind once resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefKind {
    /// Rust `mod name;` (spec: the name, or `name=path` under `#[path = "path"]`).
    Mod,
    /// Rust `use` (spec: one path of the use tree, `crate::a::b`).
    Uses,
    /// Python, JavaScript/TypeScript and Go imports (spec: the module or specifier as written).
    Imports,
    /// C/C++ `#include "file"`.
    Includes,
    /// A go.mod's module path: not an edge, the prefix Go imports resolve through.
    GoModule,
}

impl RefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Mod => "mod",
            RefKind::Uses => "uses",
            RefKind::Imports => "imports",
            RefKind::Includes => "includes",
            RefKind::GoModule => "gomodule",
        }
    }

    pub fn parse(text: &str) -> Option<RefKind> {
        Some(match text {
            "mod" => RefKind::Mod,
            "uses" => RefKind::Uses,
            "imports" => RefKind::Imports,
            "includes" => RefKind::Includes,
            "gomodule" => RefKind::GoModule,
            _ => return None,
        })
    }
}

/// One reference as written in a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ref {
    pub kind: RefKind,
    pub spec: String,
}

/// A built-in pattern. Word boundaries are ASCII (`(?-u:\b)`): a Unicode one would stop the
/// fast DFA at the first non-ASCII byte of a file.
fn re(pattern: &str) -> Regex {
    match Regex::new(pattern) {
        Ok(regex) => regex,
        Err(e) => panic!("bad built-in pattern {pattern}: {e}"),
    }
}

/// The references of a file's text, sorted and without duplicates.
pub fn parse(lang: Lang, text: &str) -> Vec<Ref> {
    let mut refs = match lang {
        Lang::Rust => rust(text),
        Lang::Python => python(text),
        Lang::JavaScript | Lang::TypeScript => javascript(text),
        Lang::Go => go(text),
        Lang::GoMod => go_mod(text),
        Lang::C | Lang::Cpp => c_includes(text),
    };
    refs.sort();
    refs.dedup();
    refs
}

fn refs(kind: RefKind, specs: impl IntoIterator<Item = String>) -> Vec<Ref> {
    specs.into_iter().map(|spec| Ref { kind, spec }).collect()
}

static RUST_MOD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?:#\[\s*path\s*=\s*"([^"]*)"\s*\]\s*(?:#\[[^\]]*\]\s*)*)?(?:(?-u:\b)pub(?:\s*\([^)]*\))?\s+)?(?-u:\b)mod\s+(?:r#)?([A-Za-z_]\w*)\s*;"#,
    )
});
static RUST_USE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)use\s+([^;{}]*(?:\{[^;]*\})?)\s*;"));

fn rust(text: &str) -> Vec<Ref> {
    let code = clean(text, Syntax::Rust);
    let mut found = Vec::new();
    for caps in RUST_MOD.captures_iter(&code) {
        let name = &caps[2];
        found.push(Ref {
            kind: RefKind::Mod,
            spec: match caps.get(1) {
                Some(path) => format!("{name}={}", path.as_str()),
                None => name.to_string(),
            },
        });
    }
    let inline = inline_modules(&code);
    for caps in RUST_USE.captures_iter(&code) {
        let mut paths = Vec::new();
        expand_use_tree(&caps[1], &mut Vec::new(), &mut paths);
        let at = caps.get(0).map_or(0, |m| m.start());
        let depth = inline.iter().filter(|(s, e)| *s < at && at < *e).count();
        found.extend(refs(
            RefKind::Uses,
            paths
                .into_iter()
                .filter_map(|p| out_of_inline_modules(&p, depth)),
        ));
    }
    found
}

static RUST_INLINE_MOD: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)mod\s+(?:r#)?\w+\s*\{"));

/// The byte spans of inline `mod name { … }` blocks.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    RUST_INLINE_MOD
        .find_iter(code)
        .map(|m| {
            let mut depth = 0usize;
            let mut end = b.len();
            for (i, &c) in b.iter().enumerate().skip(m.end() - 1) {
                match c {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            (m.end(), end)
        })
        .collect()
}

/// A use path written `depth` inline modules deep, as seen from the file's own module: the
/// first `depth` `super`s climb out of the inline modules (`mod tests { use super::*; }` is
/// `self`); a path into the file's inline modules names no other file and is dropped.
fn out_of_inline_modules(path: &str, depth: usize) -> Option<String> {
    if depth == 0 {
        return Some(path.to_string());
    }
    let segments: Vec<&str> = path.split("::").collect();
    let ups = segments.iter().take_while(|s| **s == "super").count();
    if segments[0] == "self" || (ups > 0 && ups < depth) {
        return None;
    }
    if ups == 0 {
        return Some(path.to_string());
    }
    let rest = &segments[depth..];
    Some(if ups == depth {
        std::iter::once("self")
            .chain(rest.iter().copied())
            .collect::<Vec<_>>()
            .join("::")
    } else {
        rest.join("::")
    })
}

/// Expands a use tree (`crate::a::{b, c::{d as e, self}, *}`) into its paths: `crate::a::b`,
/// `crate::a::c::d`, `crate::a::c`, `crate::a`.
fn expand_use_tree(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<String>) {
    let tree = tree.trim().trim_start_matches("::");
    let depth_before = prefix.len();
    let mut rest = tree;
    loop {
        rest = rest.trim_start();
        if let Some(inner) = rest.strip_prefix('{') {
            let inner = inner.trim_end().strip_suffix('}').unwrap_or(inner);
            for item in split_top_level(inner) {
                expand_use_tree(item, prefix, out);
            }
            break;
        }
        let end = rest.find("::").unwrap_or(rest.len());
        let segment = rest[..end].split_whitespace().next().unwrap_or("");
        match segment {
            "" => {}
            // `a::{self}` and `a::*` name `a` itself; a leading `self` is a segment.
            "*" | "self" if !prefix.is_empty() => out.push(prefix.join("::")),
            "*" => {}
            name => {
                prefix.push(name.trim_start_matches("r#").to_string());
                if end == rest.len() {
                    out.push(prefix.join("::"));
                }
            }
        }
        if end == rest.len() {
            break;
        }
        rest = &rest[end + 2..];
    }
    prefix.truncate(depth_before);
}

/// Splits `a, b::{c, d}, e` at its top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

static PY_FROM: LazyLock<Regex> = LazyLock::new(|| re(r"^from\s+(\.*[\w.]*)\s+import\s+(.+)$"));
static PY_IMPORT: LazyLock<Regex> = LazyLock::new(|| re(r"^import\s+(.+)$"));

fn python(text: &str) -> Vec<Ref> {
    let mut specs = Vec::new();
    for statement in python_import_statements(text) {
        if let Some(caps) = PY_FROM.captures(&statement) {
            let module = &caps[1];
            specs.push(module.to_string());
            for name in caps[2]
                .trim_matches(|c| c == '(' || c == ')' || c == ' ')
                .split(',')
            {
                let name = name.split_whitespace().next().unwrap_or("");
                if name.is_empty() || name == "*" {
                    continue;
                }
                specs.push(if module.ends_with('.') {
                    format!("{module}{name}")
                } else {
                    format!("{module}.{name}")
                });
            }
        } else if let Some(caps) = PY_IMPORT.captures(&statement) {
            for item in caps[1].split(',') {
                if let Some(module) = item.split_whitespace().next() {
                    specs.push(module.to_string());
                }
            }
        }
    }
    refs(RefKind::Imports, specs)
}

static JS_FROM: LazyLock<Regex> = LazyLock::new(|| re(r#"(?-u:\b)from\s*["']([^"'\n]+)["']"#));
static JS_BARE_IMPORT: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?:^|[^.\w$])import\s*["']([^"'\n]+)["']"#));
static JS_CALL: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?:^|[^.\w$])(?:require|import)\s*\(\s*["'`]([^"'`\n]+)["'`]\s*\)"#));

/// Relative specifiers only: a bare one (`react`, `@scope/pkg`) names a package, not a file here.
fn javascript(text: &str) -> Vec<Ref> {
    let code = clean(text, Syntax::JavaScript);
    let specs = [&*JS_FROM, &*JS_BARE_IMPORT, &*JS_CALL]
        .into_iter()
        .flat_map(|regex| regex.captures_iter(&code).map(|caps| caps[1].to_string()))
        .filter(|spec| {
            spec.starts_with("./") || spec.starts_with("../") || spec == "." || spec == ".."
        })
        .collect::<Vec<_>>();
    refs(RefKind::Imports, specs)
}

static GO_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)import\s*\(([^)]*)\)"));
static GO_SINGLE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?-u:\b)import\s+(?:[\w.]+\s+)?["`]([^"`]+)["`]"#));
static GO_STRING: LazyLock<Regex> = LazyLock::new(|| re(r#"["`]([^"`]+)["`]"#));

fn go(text: &str) -> Vec<Ref> {
    let code = clean(text, Syntax::Go);
    let mut specs = Vec::new();
    for caps in GO_BLOCK.captures_iter(&code) {
        specs.extend(GO_STRING.captures_iter(&caps[1]).map(|s| s[1].to_string()));
    }
    specs.extend(
        GO_SINGLE
            .captures_iter(&code)
            .map(|caps| caps[1].to_string()),
    );
    refs(RefKind::Imports, specs)
}

static GO_MODULE: LazyLock<Regex> = LazyLock::new(|| re(r#"(?m)^\s*module\s+"?([^\s"]+)"?"#));

fn go_mod(text: &str) -> Vec<Ref> {
    let code = clean(text, Syntax::Go);
    refs(
        RefKind::GoModule,
        GO_MODULE.captures(&code).map(|caps| caps[1].to_string()),
    )
}

static C_INCLUDE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?m)^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)""#));

fn c_includes(text: &str) -> Vec<Ref> {
    refs(
        RefKind::Includes,
        C_INCLUDE
            .captures_iter(text)
            .map(|caps| caps[1].to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(lang: Lang, text: &str) -> Vec<(&'static str, String)> {
        parse(lang, text)
            .into_iter()
            .map(|r| (r.kind.as_str(), r.spec))
            .collect()
    }

    fn pairs(items: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        let mut v: Vec<_> = items.iter().map(|(k, s)| (*k, s.to_string())).collect();
        v.sort();
        v
    }

    #[test]
    fn rust_mods_and_use_trees_skip_comments_and_strings() {
        let src = r##"
            //! use crate::doc::comment;
            mod a;
            pub(crate) mod b;
            #[cfg(test)]
            mod tests;
            #[path = "gen/out.rs"]
            mod generated;
            mod inline { }
            use crate::x::{y, z::{w as ww, self}, *};
            pub use super::up::Thing;
            use std::collections::HashMap;
            /* use crate::commented; /* nested */ still comment; use crate::gone; */
            const S: &str = "use crate::in_string;";
            const R: &str = r#"mod in_raw; use crate::raw;"#;
            fn f<'a>(x: &'a str) -> char { let _q = '"'; 'x' }
            use self::local::Item;
            #[cfg(test)]
            mod tests {
                use super::*;
                use super::helper::Fixture;
                use super::super::parent::P;
                mod deeper { use super::super::x::Deep; use super::Sib; }
            }
        "##;
        assert_eq!(
            specs(Lang::Rust, src),
            pairs(&[
                ("mod", "a"),
                ("mod", "b"),
                ("mod", "tests"),
                ("mod", "generated=gen/out.rs"),
                ("uses", "crate::x::y"),
                ("uses", "crate::x::z::w"),
                ("uses", "crate::x::z"),
                ("uses", "crate::x"),
                ("uses", "super::up::Thing"),
                ("uses", "std::collections::HashMap"),
                ("uses", "self::local::Item"),
                ("uses", "self"),
                ("uses", "self::helper::Fixture"),
                ("uses", "super::parent::P"),
                ("uses", "self::x::Deep"),
            ])
        );
    }

    #[test]
    fn python_imports_absolute_relative_and_parenthesized() {
        let src = "import os, pkg.util as u\n\
                   from . import sibling\n\
                   from ..base import (\n    Model,\n    helpers as h,  # comment\n)\n\
                   from .mod import *\n\
                   \"\"\"\nimport not_code\n\"\"\"\n\
                   x = 'import nope'; import late\n\
                   if True:\n    from pkg.sub import thing\n";
        assert_eq!(
            specs(Lang::Python, src),
            pairs(&[
                ("imports", "os"),
                ("imports", "pkg.util"),
                ("imports", "."),
                ("imports", ".sibling"),
                ("imports", "..base"),
                ("imports", "..base.Model"),
                ("imports", "..base.helpers"),
                ("imports", ".mod"),
                ("imports", "late"),
                ("imports", "pkg.sub"),
                ("imports", "pkg.sub.thing"),
            ])
        );
    }

    #[test]
    fn javascript_static_dynamic_require_and_reexports_but_not_packages() {
        let src = "import React from 'react';\n\
                   import { a,\n  b } from \"./a\";\n\
                   import type { T } from '../types/index.ts';\n\
                   import './side-effect.css';\n\
                   export * from './re';\n\
                   const x = require('./x.cjs');\n\
                   const lazy = () => import('./lazy');\n\
                   // import { c } from './commented';\n\
                   /* require('./block') */\n\
                   obj.import('./method');\n\
                   const s = \"// not a comment\"; import y from './y';\n";
        assert_eq!(
            specs(Lang::TypeScript, src),
            pairs(&[
                ("imports", "./a"),
                ("imports", "../types/index.ts"),
                ("imports", "./side-effect.css"),
                ("imports", "./re"),
                ("imports", "./x.cjs"),
                ("imports", "./lazy"),
                ("imports", "./y"),
            ])
        );
    }

    #[test]
    fn go_import_blocks_single_imports_and_go_mod() {
        let src = "package main\n\n// import \"commented/out\"\n\
                   import \"fmt\"\nimport alias \"example.com/m/util\"\n\
                   import (\n\t\"os\"\n\t_ \"example.com/m/db\" // driver\n\t. `example.com/m/dot`\n)\n\
                   func main() { r := '\"'; _ = r }\n";
        assert_eq!(
            specs(Lang::Go, src),
            pairs(&[
                ("imports", "fmt"),
                ("imports", "example.com/m/util"),
                ("imports", "os"),
                ("imports", "example.com/m/db"),
                ("imports", "example.com/m/dot"),
            ])
        );
        assert_eq!(
            specs(Lang::GoMod, "// comment\nmodule example.com/m\n\ngo 1.22\n"),
            pairs(&[("gomodule", "example.com/m")])
        );
    }

    #[test]
    fn c_quoted_includes_only() {
        let src = "#include <stdio.h>\n#include \"util.h\"\n  #  include \"../inc/x.hpp\"\n";
        assert_eq!(
            specs(Lang::Cpp, src),
            pairs(&[("includes", "util.h"), ("includes", "../inc/x.hpp")])
        );
    }

    #[test]
    fn languages_by_file_name() {
        assert_eq!(Lang::of("a/b.rs"), Some(Lang::Rust));
        assert_eq!(Lang::of("go.mod"), Some(Lang::GoMod));
        assert_eq!(Lang::of("x/index.tsx"), Some(Lang::TypeScript));
        assert_eq!(Lang::of("README"), None);
        assert_eq!(Lang::of("a.md"), None);
    }
}
