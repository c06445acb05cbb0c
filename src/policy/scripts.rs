//! Inline scripts read with real grammars (tree-sitter's Python, JavaScript, Ruby and Perl),
//! so `python3 -c "import shutil; shutil.rmtree('/home')"` is judged like `rm -rf /home`.
//!
//! A script is reduced to what it does to the machine, in the shell's vocabulary
//! ([`Effect`]): the files it removes (Python `shutil.rmtree`, `os.remove|unlink|rmdir|
//! removedirs`, `pathlib` `unlink|rmdir`; Node `fs.rm|rmSync|rmdir|rmdirSync|unlink|unlinkSync`
//! and `fs.promises`; Ruby `FileUtils.rm_rf|rm_r|rm|…`, `File.delete`, `Dir.rmdir`; Perl
//! `rmtree|remove_tree|unlink|rmdir`), writes, reads, moves and copies, and the commands it
//! runs (`os.system`, `subprocess.*` with a string or a list, `child_process.exec*|spawn*`,
//! Ruby `system|exec|spawn|%x|backticks`, Perl `system|exec|qx|backticks`). [`super::commands`]
//! turns each into the command the rules already judge (`rm -r PATH`, a `>` write, a `<` read,
//! `mv`, `cp`, or the shell string itself), so the place rules of `rm` apply unchanged.
//!
//! Paths are evaluated as far as a reader can without running anything: string literals and
//! their concatenation, `os.path.join`/`path.join`/`File.join`/`Path(a) / b`, the home
//! (`os.path.expanduser('~')`, `Path.home()`, `os.homedir()`, `Dir.home`, `HOME` from the
//! environment → `~`), the working directory (`os.getcwd()`, `process.cwd()`, `Dir.pwd` → `.`)
//! and names assigned earlier in the script. Anything else — a path built at run time — is
//! unknown, and an unknown place is judged as `rm` of an unknown path is (denied by the place
//! rules). A script that does not parse is read for what parses.

use tree_sitter::{Language, Node, Parser};

use super::shell::UNKNOWN;

/// A language CAR reads inline scripts of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    JavaScript,
    Ruby,
    Perl,
}

impl Lang {
    /// The language of an interpreter program, by its file name (`python3.12`, `nodejs`).
    pub fn of_program(program: &str) -> Option<Lang> {
        let stem = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        match stem {
            "python" | "pypy" | "ipython" => Some(Lang::Python),
            "node" | "nodejs" | "bun" | "deno" | "tsx" | "ts-node" => Some(Lang::JavaScript),
            "ruby" => Some(Lang::Ruby),
            "perl" => Some(Lang::Perl),
            _ => None,
        }
    }

    fn grammar(self) -> Language {
        match self {
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::Ruby => tree_sitter_ruby::LANGUAGE.into(),
            Lang::Perl => tree_sitter_perl::LANGUAGE.into(),
        }
    }
}

/// What a script does, as the shell rules see it. A path or word CAR cannot know holds
/// [`UNKNOWN`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Removes a path (and what is under it, when recursive).
    Remove { path: String, recursive: bool },
    /// Creates, replaces or alters a file.
    Write(String),
    /// Reads a file into the script.
    Read(String),
    /// Moves `from` to `to`.
    Move(String, String),
    /// Copies `from` to `to`.
    Copy(String, String),
    /// Runs a shell string.
    Shell(String),
    /// Runs a program with these words (no shell).
    Argv(Vec<String>),
    /// Changes the working directory of what follows (`os.chdir`, `process.chdir`).
    Chdir(String),
    /// Runs code CAR cannot read before it runs: `eval`/`exec`/`new Function`/`send` of a
    /// string built at run time, `getattr` of a computed name.
    Opaque,
}

/// The longest script read; a longer one is judged by what a reader of its first part sees.
const MAX_SCRIPT: usize = 256 * 1024;

/// What `code` does, in document order.
pub fn effects(lang: Lang, code: &str) -> Vec<Effect> {
    let code = &code[..floor_char_boundary(code, MAX_SCRIPT)];
    let mut parser = Parser::new();
    if parser.set_language(&lang.grammar()).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(code, None) else {
        return Vec::new();
    };
    let mut reader = Reader {
        lang,
        src: code.as_bytes(),
        names: Vec::new(),
        out: Vec::new(),
    };
    reader.walk(tree.root_node(), 0);
    reader.out
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0)
}

fn unknown() -> String {
    UNKNOWN.to_string()
}

/// How deep the reader follows nested nodes (a deeper script is read to this depth).
const MAX_DEPTH: usize = 200;

struct Reader<'a> {
    lang: Lang,
    src: &'a [u8],
    /// Names bound earlier: a variable to its value (`Val`), or an import alias to the
    /// qualified name it stands for (`Alias`).
    names: Vec<(String, Bound)>,
    out: Vec<Effect>,
}

#[derive(Debug, Clone)]
enum Bound {
    Val(String),
    Alias(String),
}

impl<'a> Reader<'a> {
    fn text(&self, node: Node) -> &'a str {
        node.utf8_text(self.src).unwrap_or_default()
    }

    fn lookup(&self, name: &str) -> Option<&Bound> {
        self.names
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
    }

    fn bind(&mut self, name: &str, bound: Bound) {
        self.names.push((name.to_string(), bound));
    }

    fn walk(&mut self, node: Node, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match (self.lang, node.kind()) {
            (Lang::Python, "import_statement" | "import_from_statement") => self.py_import(node),
            (Lang::Python, "assignment") | (Lang::Ruby, "assignment") => self.assign(node),
            (Lang::JavaScript, "variable_declarator") => self.js_declare(node),
            (Lang::JavaScript, "import_statement") => self.js_import(node),
            // `new Function("…")` compiles a string.
            (Lang::JavaScript, "new_expression")
                if node
                    .child_by_field_name("constructor")
                    .is_some_and(|c| self.text(c) == "Function") =>
            {
                self.out.push(Effect::Opaque);
            }
            (Lang::Python | Lang::Ruby, "call") | (Lang::JavaScript, "call_expression") => {
                self.call(node)
            }
            (Lang::Ruby, "subshell") => {
                let command = self.string_text(node);
                self.out.push(Effect::Shell(command));
            }
            (
                Lang::Perl,
                "call_expression_with_args_with_brackets" | "call_expression_with_spaced_args",
            ) => self.perl_call(node),
            (Lang::Perl, "backtick_quoted" | "command_qx_quoted") => {
                let command = self.perl_quoted(node);
                self.out.push(Effect::Shell(command));
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.walk(child, depth + 1);
        }
    }

    /// `import shutil as sh`, `from os import remove as rm`, `from shutil import *`.
    fn py_import(&mut self, node: Node) {
        let module = node
            .child_by_field_name("module_name")
            .map(|m| self.text(m).to_string());
        let mut cursor = node.walk();
        for name in node.children_by_field_name("name", &mut cursor) {
            let (full, alias) = match name.kind() {
                "aliased_import" => (
                    name.child_by_field_name("name").map(|n| self.text(n)),
                    name.child_by_field_name("alias").map(|n| self.text(n)),
                ),
                _ => (Some(self.text(name)), None),
            };
            let Some(full) = full else { continue };
            let qualified = match &module {
                Some(module) => format!("{module}.{full}"),
                None => full.to_string(),
            };
            let local = alias.unwrap_or_else(|| full.split('.').next().unwrap_or(full));
            let target = if module.is_none() && alias.is_none() {
                // `import os.path` binds `os`.
                local.to_string()
            } else {
                qualified
            };
            self.bind(local, Bound::Alias(target));
        }
    }

    fn assign(&mut self, node: Node) {
        let (Some(left), Some(right)) = (
            node.child_by_field_name("left"),
            node.child_by_field_name("right"),
        ) else {
            return;
        };
        if left.kind() == "identifier" {
            let name = self.text(left).to_string();
            if let Some(module) = self.module_of(right) {
                self.bind(&name, Bound::Alias(module));
            } else {
                let value = self.eval(right);
                self.bind(&name, Bound::Val(value));
            }
        }
    }

    /// `const fs = require('fs')`, `const {rmSync, execSync: run} = require('…')`, `let p = …`.
    fn js_declare(&mut self, node: Node) {
        let (Some(name), Some(value)) = (
            node.child_by_field_name("name"),
            node.child_by_field_name("value"),
        ) else {
            return;
        };
        match name.kind() {
            "identifier" => {
                let local = self.text(name).to_string();
                match self.module_of(value) {
                    Some(module) => self.bind(&local, Bound::Alias(module)),
                    None => {
                        let value = self.eval(value);
                        self.bind(&local, Bound::Val(value));
                    }
                }
            }
            "object_pattern" => {
                let Some(module) = self.module_of(value) else {
                    return;
                };
                let mut cursor = name.walk();
                for part in name.named_children(&mut cursor) {
                    let (key, local) = match part.kind() {
                        "shorthand_property_identifier_pattern" => {
                            (self.text(part), self.text(part))
                        }
                        "pair_pattern" => match (
                            part.child_by_field_name("key"),
                            part.child_by_field_name("value"),
                        ) {
                            (Some(k), Some(v)) => (self.text(k), self.text(v)),
                            _ => continue,
                        },
                        _ => continue,
                    };
                    self.bind(local, Bound::Alias(format!("{module}.{key}")));
                }
            }
            _ => {}
        }
    }

    /// `import fs from 'fs'`, `import * as fs from 'node:fs'`, `import {rmSync as r} from 'fs'`.
    fn js_import(&mut self, node: Node) {
        let Some(source) = node.child_by_field_name("source") else {
            return;
        };
        let module = normalize_module(&self.eval(source));
        let mut cursor = node.walk();
        let Some(clause) = node
            .named_children(&mut cursor)
            .find(|n| n.kind() == "import_clause")
        else {
            return;
        };
        let mut cursor = clause.walk();
        for part in clause.named_children(&mut cursor) {
            match part.kind() {
                "identifier" => {
                    let local = self.text(part).to_string();
                    self.bind(&local, Bound::Alias(module.clone()));
                }
                "namespace_import" => {
                    if let Some(name) = part.named_child(0) {
                        let local = self.text(name).to_string();
                        self.bind(&local, Bound::Alias(module.clone()));
                    }
                }
                "named_imports" => {
                    let mut inner = part.walk();
                    for spec in part.named_children(&mut inner) {
                        let Some(name) = spec.child_by_field_name("name") else {
                            continue;
                        };
                        let name = self.text(name).to_string();
                        let local = spec
                            .child_by_field_name("alias")
                            .map_or_else(|| name.clone(), |a| self.text(a).to_string());
                        self.bind(&local, Bound::Alias(format!("{module}.{name}")));
                    }
                }
                _ => {}
            }
        }
    }

    /// The module an expression names: `require('fs')`, `__import__('os')`, an alias, or a
    /// dotted name (`os.path`, `fs.promises`); `None` when it is not a module.
    fn module_of(&self, node: Node) -> Option<String> {
        self.qualified(node).filter(|q| is_module(q))
    }

    /// The dotted name a callee or receiver stands for, through import aliases.
    fn qualified(&self, node: Node) -> Option<String> {
        match node.kind() {
            "identifier" | "constant" => {
                let name = self.text(node);
                Some(match self.lookup(name) {
                    Some(Bound::Alias(target)) => target.clone(),
                    Some(Bound::Val(_)) => return None,
                    None => name.to_string(),
                })
            }
            "attribute" => {
                let object = self.qualified(node.child_by_field_name("object")?)?;
                let attribute = self.text(node.child_by_field_name("attribute")?);
                Some(format!("{object}.{attribute}"))
            }
            "member_expression" => {
                let object = self.qualified(node.child_by_field_name("object")?)?;
                let property = self.text(node.child_by_field_name("property")?);
                Some(format!("{object}.{property}"))
            }
            "scope_resolution" => Some(self.text(node).replace("::", ".")),
            "subscript_expression" => {
                // `fs["rmSync"]`.
                let object = self.qualified(node.child_by_field_name("object")?)?;
                let index = self.eval(node.child_by_field_name("index")?);
                (!index.contains(UNKNOWN)).then(|| format!("{object}.{index}"))
            }
            "call" | "call_expression" => {
                // `require('fs')`, `import('fs')`, `__import__('os')`,
                // `importlib.import_module('shutil')`, `getattr(shutil, 'rmtree')`.
                let callee = node.child_by_field_name("function")?;
                let name = self.text(callee);
                let args = self.args(node);
                if name == "getattr" && args.len() >= 2 {
                    let object = self.qualified(args[0])?;
                    let attribute = self.eval(args[1]);
                    return (!attribute.contains(UNKNOWN)).then(|| format!("{object}.{attribute}"));
                }
                if !(matches!(
                    name,
                    "require" | "import" | "__import__" | "importlib.import_module"
                ) || name.ends_with(".require"))
                {
                    return None;
                }
                let module = self.eval(*args.first()?);
                (!module.contains(UNKNOWN)).then(|| normalize_module(&module))
            }
            "parenthesized_expression" => self.qualified(node.named_child(0)?),
            _ => None,
        }
    }

    /// The positional arguments of a call (keyword arguments left out).
    fn args<'t>(&self, call: Node<'t>) -> Vec<Node<'t>> {
        let Some(list) = call.child_by_field_name("arguments") else {
            return Vec::new();
        };
        let mut cursor = list.walk();
        list.named_children(&mut cursor)
            .filter(|n| {
                !matches!(
                    n.kind(),
                    "keyword_argument" | "pair" | "comment" | "block_argument"
                )
            })
            .collect()
    }

    /// A keyword argument (`shell=True`) or an option of an object argument (`{recursive:
    /// true}`, Ruby `mode: "w"`), as written.
    fn option<'t>(&self, call: Node<'t>, key: &str) -> Option<Node<'t>> {
        let list = call.child_by_field_name("arguments")?;
        let mut stack = vec![list];
        while let Some(node) = stack.pop() {
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                match child.kind() {
                    "keyword_argument" | "pair" => {
                        let name = child
                            .child_by_field_name("name")
                            .or_else(|| child.child_by_field_name("key"))
                            .map(|n| {
                                self.text(n)
                                    .trim_matches(|c| c == '"' || c == '\'' || c == ':')
                            });
                        if name == Some(key) {
                            return child.child_by_field_name("value");
                        }
                    }
                    "object" | "hash" => stack.push(child),
                    _ => {}
                }
            }
        }
        None
    }

    fn truthy(&self, node: Option<Node>) -> bool {
        node.is_some_and(|n| matches!(self.text(n), "True" | "true" | "1"))
    }

    fn call(&mut self, node: Node) {
        let callee = match self.lang {
            Lang::Ruby => {
                let method = node.child_by_field_name("method").map(|m| self.text(m));
                let receiver = node.child_by_field_name("receiver").map(|r| {
                    self.qualified(r)
                        .unwrap_or_else(|| self.text(r).to_string())
                });
                match (receiver, method) {
                    (Some(r), Some(m)) => format!("{r}.{m}"),
                    (None, Some(m)) => m.to_string(),
                    (_, None) => return,
                }
            }
            Lang::Python | Lang::JavaScript | Lang::Perl => {
                let Some(function) = node.child_by_field_name("function") else {
                    return;
                };
                match self.qualified(function) {
                    Some(q) => q,
                    None => {
                        self.method_on_path(node, function);
                        return;
                    }
                }
            }
        };
        let args = self.args(node);
        let arg = |i: usize| args.get(i).copied();
        let effect = match (self.lang, callee.as_str()) {
            (Lang::Python, "shutil.rmtree") => remove(self.eval_opt(arg(0)), true),
            (
                Lang::Python,
                "os.remove" | "os.unlink" | "os.rmdir" | "os.removedirs" | "pathlib.Path.unlink",
            ) => remove(self.eval_opt(arg(0)), false),
            (
                Lang::Python,
                "os.system" | "os.popen" | "subprocess.getoutput" | "subprocess.getstatusoutput",
            ) => Some(Effect::Shell(self.eval_opt(arg(0)))),
            (
                Lang::Python,
                "subprocess.run"
                | "subprocess.call"
                | "subprocess.check_call"
                | "subprocess.check_output"
                | "subprocess.Popen",
            ) => arg(0).map(|a| self.command(a)),
            (
                Lang::Python,
                "os.execv" | "os.execvp" | "os.execve" | "os.execvpe" | "os.posix_spawn"
                | "os.posix_spawnp",
            ) => arg(1).map(|a| self.command(a)),
            (Lang::Python, "os.execl" | "os.execlp" | "os.execle" | "os.execlpe") => Some(
                Effect::Argv(args.iter().skip(1).map(|a| self.eval(*a)).collect()),
            ),
            (Lang::Python, "os.spawnl" | "os.spawnlp" | "os.spawnle" | "os.spawnlpe") => Some(
                Effect::Argv(args.iter().skip(2).map(|a| self.eval(*a)).collect()),
            ),
            (Lang::Python, "os.spawnv" | "os.spawnvp" | "os.spawnve" | "os.spawnvpe") => {
                arg(2).map(|a| self.command(a))
            }
            (Lang::Python, "pty.spawn") => arg(0).map(|a| self.command(a)),
            (Lang::Python, "os.chdir") => Some(Effect::Chdir(self.eval_opt(arg(0)))),
            (Lang::Python, "os.link" | "os.symlink") => {
                // A second name for the source, written at the destination.
                self.out.push(Effect::Write(self.eval_opt(arg(0))));
                Some(Effect::Write(self.eval_opt(arg(1))))
            }
            (Lang::Python, "os.open") => {
                let flags = arg(1).map(|f| self.text(f)).unwrap_or_default();
                let path = self.eval_opt(arg(0));
                Some(
                    if flags.contains("WRONLY")
                        || flags.contains("RDWR")
                        || flags.contains("TRUNC")
                        || flags.contains("CREAT")
                        || flags.contains("APPEND")
                    {
                        Effect::Write(path)
                    } else {
                        Effect::Read(path)
                    },
                )
            }
            (Lang::Python, "exec" | "eval" | "compile" | "builtins.exec" | "builtins.eval") => {
                self.inline(arg(0))
            }
            (Lang::Python, "os.rename" | "os.replace" | "os.renames" | "shutil.move") => {
                Some(Effect::Move(self.eval_opt(arg(0)), self.eval_opt(arg(1))))
            }
            (
                Lang::Python,
                "shutil.copy" | "shutil.copy2" | "shutil.copyfile" | "shutil.copytree",
            ) => Some(Effect::Copy(self.eval_opt(arg(0)), self.eval_opt(arg(1)))),
            (
                Lang::Python,
                "os.truncate" | "os.chmod" | "os.chown" | "os.mkdir" | "os.makedirs",
            ) => Some(Effect::Write(self.eval_opt(arg(0)))),
            (Lang::Python, "open" | "io.open" | "builtins.open" | "codecs.open") => {
                let mode = arg(1)
                    .or_else(|| self.option(node, "mode"))
                    .map(|m| self.eval(m))
                    .unwrap_or_default();
                let path = self.eval_opt(arg(0).or_else(|| self.option(node, "file")));
                Some(if mode.contains(['w', 'a', 'x', '+']) {
                    Effect::Write(path)
                } else {
                    Effect::Read(path)
                })
            }
            (Lang::JavaScript, "eval") => self.inline(arg(0)),
            (Lang::JavaScript, "process.chdir") => Some(Effect::Chdir(self.eval_opt(arg(0)))),
            (Lang::JavaScript, name) => self.js_effect(node, name, &args),
            (
                Lang::Ruby,
                "eval" | "instance_eval" | "class_eval" | "module_eval" | "Kernel.eval",
            ) => self.inline(arg(0)),
            (Lang::Ruby, "send" | "public_send" | "__send__") => Some(Effect::Opaque),
            (Lang::Ruby, "Dir.chdir") => Some(Effect::Chdir(self.eval_opt(arg(0)))),
            (Lang::Ruby, name) => self.ruby_effect(node, name, &args),
            (Lang::Python | Lang::Perl, _) => None,
        };
        self.out.extend(effect);
        if self.lang == Lang::Python {
            // `Path('x').unlink()` on a name the import table does not know.
            if let Some(function) = node.child_by_field_name("function") {
                if !is_module_call(&callee) {
                    self.method_on_path(node, function);
                }
            }
        }
    }

    /// Python `pathlib` methods: `Path(p).unlink()`, `p.rmdir()`, `p.write_text(…)`,
    /// `p.read_text()`; JavaScript has no path objects.
    fn method_on_path(&mut self, call: Node, function: Node) {
        if self.lang != Lang::Python || function.kind() != "attribute" {
            return;
        }
        let (Some(object), Some(attribute)) = (
            function.child_by_field_name("object"),
            function.child_by_field_name("attribute"),
        ) else {
            return;
        };
        if self.module_of(object).is_some() {
            return;
        }
        let path = || self.eval(object);
        let effect = match self.text(attribute) {
            "unlink" | "rmdir" => remove(path(), false),
            "write_text" | "write_bytes" | "touch" | "chmod" | "mkdir" => {
                Some(Effect::Write(path()))
            }
            "read_text" | "read_bytes" => Some(Effect::Read(path())),
            "open" => {
                let mode = self
                    .args(call)
                    .first()
                    .map(|m| self.eval(*m))
                    .or_else(|| self.option(call, "mode").map(|m| self.eval(m)))
                    .unwrap_or_default();
                Some(if mode.contains(['w', 'a', 'x', '+']) {
                    Effect::Write(path())
                } else {
                    Effect::Read(path())
                })
            }
            "rename" | "replace" => {
                let to = self.args(call).first().map(|a| self.eval(*a));
                Some(Effect::Move(path(), to.unwrap_or_else(unknown)))
            }
            _ => None,
        };
        self.out.extend(effect);
    }

    /// `exec("…")`/`eval("…")` of a literal is read as more of the script; of anything else,
    /// it is opaque.
    fn inline(&mut self, code: Option<Node>) -> Option<Effect> {
        let code = self.eval_opt(code);
        if code.contains(UNKNOWN) {
            return Some(Effect::Opaque);
        }
        // Each literal inside is shorter than the one around it, so this ends.
        self.out.extend(effects(self.lang, &code));
        None
    }

    /// A command given as a string (run by a shell) or a list of words.
    fn command(&self, node: Node) -> Effect {
        match node.kind() {
            "list" | "array" => {
                let mut cursor = node.walk();
                let words: Vec<String> = node
                    .named_children(&mut cursor)
                    .filter(|n| n.kind() != "comment")
                    .map(|n| self.eval(n))
                    .collect();
                Effect::Argv(words)
            }
            _ => Effect::Shell(self.eval(node)),
        }
    }

    fn js_effect(&self, call: Node, name: &str, args: &[Node]) -> Option<Effect> {
        let arg = |i: usize| self.eval_opt(args.get(i).copied());
        let (module, function) = name.rsplit_once('.')?;
        let module = module.trim_end_matches(".promises");
        match (module, function.trim_end_matches("Sync")) {
            ("fs", "rm" | "rmdir") => remove(arg(0), self.truthy(self.option(call, "recursive"))),
            ("fs", "unlink") => remove(arg(0), false),
            (
                "fs",
                "writeFile" | "appendFile" | "truncate" | "chmod" | "chown" | "mkdir" | "open"
                | "createWriteStream" | "utimes",
            ) => Some(Effect::Write(arg(0))),
            ("fs", "symlink" | "link") => Some(Effect::Write(arg(1))),
            ("fs", "readFile" | "createReadStream") => Some(Effect::Read(arg(0))),
            ("fs", "rename") => Some(Effect::Move(arg(0), arg(1))),
            ("fs", "copyFile" | "cp") => Some(Effect::Copy(arg(0), arg(1))),
            ("child_process", "exec") => Some(Effect::Shell(arg(0))),
            ("child_process", "execFile" | "spawn") => {
                let mut words = vec![arg(0)];
                if let Some(list) = args.get(1).filter(|a| a.kind() == "array") {
                    if let Effect::Argv(rest) = self.command(*list) {
                        words.extend(rest);
                    }
                }
                if self.truthy(self.option(call, "shell")) {
                    Some(Effect::Shell(words.join(" ")))
                } else {
                    Some(Effect::Argv(words))
                }
            }
            _ => None,
        }
    }

    fn ruby_effect(&self, call: Node, name: &str, args: &[Node]) -> Option<Effect> {
        let arg = |i: usize| self.eval_opt(args.get(i).copied());
        // `Pathname.new(p).rmtree`, `.delete`, `.unlink`, `.rmdir`, `.write`, `.read`.
        if let Some(receiver) = call
            .child_by_field_name("receiver")
            .filter(|r| r.kind() == "call" && self.text(*r).starts_with("Pathname"))
        {
            let path = self.eval_opt(self.args(receiver).first().copied());
            let method = name.rsplit('.').next().unwrap_or(name);
            return match method {
                "rmtree" => remove(path, true),
                "delete" | "unlink" | "rmdir" => remove(path, false),
                "write" | "binwrite" | "truncate" => Some(Effect::Write(path)),
                "read" | "binread" | "readlines" => Some(Effect::Read(path)),
                _ => None,
            };
        }
        let run = || match args {
            [] => None,
            [one] => Some(self.command(*one)),
            many => Some(Effect::Argv(many.iter().map(|a| self.eval(*a)).collect())),
        };
        match name {
            "FileUtils.rm_rf"
            | "FileUtils.rm_r"
            | "FileUtils.remove_dir"
            | "FileUtils.remove_entry"
            | "FileUtils.remove_entry_secure"
            | "FileUtils.rmtree" => remove(arg(0), true),
            "FileUtils.rm" | "FileUtils.rm_f" | "FileUtils.remove" | "FileUtils.rmdir"
            | "File.delete" | "File.unlink" | "Dir.rmdir" | "Dir.delete" | "Dir.unlink" => {
                remove(arg(0), false)
            }
            "system" | "exec" | "spawn" | "Kernel.system" | "Kernel.exec" | "Kernel.spawn"
            | "Process.spawn" | "IO.popen" | "Open3.capture2" | "Open3.capture2e"
            | "Open3.capture3" | "Open3.popen3" => run(),
            "File.write" | "IO.write" | "FileUtils.touch" | "File.truncate" | "FileUtils.chmod"
            | "FileUtils.mkdir_p" | "File.symlink" | "File.link" => Some(Effect::Write(arg(0))),
            "File.open" | "File.new" | "IO.open" => {
                let mode = args.get(1).map(|m| self.eval(*m)).unwrap_or_default();
                Some(if mode.contains(['w', 'a', '+']) {
                    Effect::Write(arg(0))
                } else {
                    Effect::Read(arg(0))
                })
            }
            "File.read" | "IO.read" | "File.readlines" | "IO.readlines" | "File.binread" => {
                Some(Effect::Read(arg(0)))
            }
            "FileUtils.mv" | "FileUtils.move" | "File.rename" => Some(Effect::Move(arg(0), arg(1))),
            "FileUtils.cp" | "FileUtils.cp_r" | "FileUtils.copy" | "FileUtils.copy_file" => {
                Some(Effect::Copy(arg(0), arg(1)))
            }
            _ => None,
        }
    }

    fn perl_call(&mut self, node: Node) {
        let Some(function) = node.named_child(0) else {
            return;
        };
        let Some(name) = function.child_by_field_name("function_name") else {
            return;
        };
        let name = self.text(name);
        let Some(list) = node.child_by_field_name("args") else {
            return;
        };
        let mut cursor = list.walk();
        let args: Vec<Node> = list
            .named_children(&mut cursor)
            .filter(|n| !matches!(n.kind(), "normal_comma" | "fat_comma" | "comment"))
            .collect();
        let mut values: Vec<String> = Vec::new();
        for arg in &args {
            if arg.kind() == "word_list_qw" {
                let mut inner = arg.walk();
                values.extend(
                    arg.named_children(&mut inner)
                        .filter(|n| n.kind() == "list_item")
                        .map(|n| self.text(n).to_string()),
                );
            } else {
                values.push(self.eval(*arg));
            }
        }
        match name {
            "rename" if values.len() >= 2 => self
                .out
                .push(Effect::Move(values[0].clone(), values[1].clone())),
            "truncate" | "chmod" | "symlink" | "link" => {
                if let Some(path) = values
                    .last()
                    .filter(|_| name != "truncate")
                    .or(values.first())
                {
                    self.out.push(Effect::Write(path.clone()));
                }
            }
            "chdir" => self.out.push(Effect::Chdir(
                values.first().cloned().unwrap_or_else(unknown),
            )),
            "eval" => self.out.push(Effect::Opaque),
            "open" if values.len() == 2 => {
                let spec = values[1].trim();
                let path = spec
                    .trim_start_matches(['<', '>', '+', '|', ' '])
                    .trim()
                    .to_string();
                self.out
                    .push(if spec.starts_with('>') || spec.starts_with("+<") {
                        Effect::Write(path)
                    } else if spec.ends_with('|') || spec.starts_with('|') {
                        Effect::Shell(path.trim_end_matches('|').to_string())
                    } else {
                        Effect::Read(path)
                    });
            }
            "rmtree" | "remove_tree" => self
                .out
                .extend(values.iter().filter_map(|v| remove(v.clone(), true))),
            "unlink" | "rmdir" => self
                .out
                .extend(values.iter().filter_map(|v| remove(v.clone(), false))),
            "system" | "exec" => match values.as_slice() {
                [] => {}
                [one] => self.out.push(Effect::Shell(one.clone())),
                many => self.out.push(Effect::Argv(many.to_vec())),
            },
            "open" if values.len() >= 3 => {
                let mode = values[1].trim();
                let path = values[2].clone();
                self.out.push(if mode.starts_with('<') {
                    Effect::Read(path)
                } else {
                    Effect::Write(path)
                });
            }
            _ => {}
        }
    }

    /// A Perl backtick or `qx` string: its text between the delimiters, unknown when it
    /// interpolates.
    fn perl_quoted(&self, node: Node) -> String {
        let text = self.text(node);
        let text = text.strip_prefix("qx").unwrap_or(text);
        let inner = text
            .get(1..text.len().saturating_sub(1))
            .unwrap_or_default();
        if inner.contains(['$', '@']) {
            unknown()
        } else {
            inner.to_string()
        }
    }

    /// A string literal's text (Python and Ruby `string_content`, JavaScript
    /// `string_fragment`, escapes decoded; quotes and delimiters skipped), [`UNKNOWN`] where
    /// it interpolates (`{x}`, `${x}`, `#{x}`).
    fn string_text(&self, node: Node) -> String {
        let mut out = String::new();
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                "string_start" | "string_end" => {}
                "string_content" | "string_fragment" => out.push_str(self.text(child)),
                "escape_sequence" => out.push_str(&unescape(self.text(child))),
                _ => out.push(UNKNOWN),
            }
        }
        out
    }

    fn eval_opt(&self, node: Option<Node>) -> String {
        node.map(|n| self.eval(n)).unwrap_or_else(unknown)
    }

    /// The value of an expression as a string, [`UNKNOWN`] where it cannot be known.
    fn eval(&self, node: Node) -> String {
        let kind = node.kind();
        match kind {
            "string" | "template_string" if self.lang != Lang::Perl => self.string_text(node),
            "string_single_quoted" | "string_double_quoted" => {
                let text = self.text(node);
                let inner = text
                    .get(1..text.len().saturating_sub(1))
                    .unwrap_or_default();
                if kind == "string_double_quoted" && inner.contains(['$', '@']) {
                    unknown()
                } else {
                    inner.to_string()
                }
            }
            "concatenated_string" => {
                let mut cursor = node.walk();
                node.named_children(&mut cursor)
                    .map(|c| self.eval(c))
                    .collect()
            }
            "parenthesized_expression" => node
                .named_child(0)
                .map(|c| self.eval(c))
                .unwrap_or_else(unknown),
            "binary_operator" | "binary_expression" => {
                let (Some(left), Some(right)) = (
                    node.child_by_field_name("left")
                        .or_else(|| node.named_child(0)),
                    node.child_by_field_name("right")
                        .or_else(|| node.named_child(1)),
                ) else {
                    return unknown();
                };
                let operator = node
                    .child_by_field_name("operator")
                    .map(|o| self.text(o))
                    .unwrap_or_else(|| {
                        // Perl's operator is an anonymous child between the operands.
                        let between = self
                            .src
                            .get(left.end_byte()..right.start_byte())
                            .unwrap_or_default();
                        std::str::from_utf8(between).unwrap_or_default().trim()
                    });
                match operator {
                    "+" | "." => format!("{}{}", self.eval(left), self.eval(right)),
                    "/" if self.lang == Lang::Python => join(&self.eval(left), &self.eval(right)),
                    _ => unknown(),
                }
            }
            "identifier" | "constant" => match self.lookup(self.text(node)) {
                Some(Bound::Val(value)) => value.clone(),
                Some(Bound::Alias(_)) | None => match self.text(node) {
                    "__dirname" if self.lang == Lang::JavaScript => ".".into(),
                    _ => unknown(),
                },
            },
            "call" | "call_expression" => self.eval_call(node),
            "subscript" | "subscript_expression" | "element_reference" => {
                // `os.environ['HOME']`, `process.env['HOME']`, `ENV['HOME']`.
                let object = node
                    .child_by_field_name("value")
                    .or_else(|| node.child_by_field_name("object"))
                    .and_then(|o| self.qualified(o));
                let key = node
                    .child_by_field_name("subscript")
                    .or_else(|| node.child_by_field_name("index"))
                    .or_else(|| node.named_child(1))
                    .map(|k| self.eval(k));
                match (object.as_deref(), key.as_deref()) {
                    (Some("os.environ" | "process.env" | "ENV"), Some("HOME")) => "~".into(),
                    _ => unknown(),
                }
            }
            "member_expression" | "attribute" => match self.qualified(node).as_deref() {
                Some("process.env.HOME") => "~".into(),
                Some("os.curdir") => ".".into(),
                _ => unknown(),
            },
            "hash_access_variable_simple" => {
                let key = node.child_by_field_name("key").map(|k| self.text(k));
                let hash = node
                    .child_by_field_name("hash_variable")
                    .map(|h| self.text(h));
                if hash == Some("$ENV") && key == Some("HOME") {
                    "~".into()
                } else {
                    unknown()
                }
            }
            _ => unknown(),
        }
    }

    /// The value of a call a path is built with (`os.path.join(…)`, `Path.home()`, …).
    fn eval_call(&self, node: Node) -> String {
        let callee = match self.lang {
            Lang::Ruby => {
                let method = node.child_by_field_name("method").map(|m| self.text(m));
                let receiver = node
                    .child_by_field_name("receiver")
                    .and_then(|r| self.qualified(r));
                match (receiver, method) {
                    (Some(r), Some(m)) => format!("{r}.{m}"),
                    _ => return unknown(),
                }
            }
            Lang::Python | Lang::JavaScript | Lang::Perl => {
                match node
                    .child_by_field_name("function")
                    .and_then(|f| self.qualified(f))
                {
                    Some(q) => q,
                    None => return unknown(),
                }
            }
        };
        let args = self.args(node);
        let values = || args.iter().map(|a| self.eval(*a)).collect::<Vec<_>>();
        let first = || args.first().map(|a| self.eval(*a)).unwrap_or_else(unknown);
        match callee.as_str() {
            "os.path.join" | "posixpath.join" | "path.join" | "path.resolve"
            | "path.posix.join" | "File.join" | "pathlib.Path" | "pathlib.PurePath"
            | "pathlib.PosixPath" | "Path" | "PurePath" | "PosixPath" => {
                let values = values();
                if values.is_empty() {
                    return ".".into();
                }
                values
                    .iter()
                    .skip(1)
                    .fold(values[0].clone(), |a, b| join(&a, b))
            }
            "os.path.expanduser" | "os.path.abspath" | "os.path.realpath" | "os.path.normpath"
            | "os.fspath" | "str" | "String" | "File.expand_path" | "File.absolute_path"
            | "path.normalize" => first(),
            "os.path.dirname" | "path.dirname" | "File.dirname" => {
                let value = first();
                match value.rsplit_once('/') {
                    Some(("", _)) => "/".into(),
                    Some((parent, _)) => parent.to_string(),
                    None => ".".into(),
                }
            }
            "pathlib.Path.home" | "Path.home" | "os.homedir" | "Dir.home" => "~".into(),
            "os.getcwd" | "pathlib.Path.cwd" | "Path.cwd" | "process.cwd" | "Dir.pwd" => ".".into(),
            "os.getenv" | "os.environ.get" | "ENV.fetch" if first() == "HOME" => "~".into(),
            _ => unknown(),
        }
    }
}

fn remove(path: String, recursive: bool) -> Option<Effect> {
    Some(Effect::Remove { path, recursive })
}

/// `a/b`, or `b` when it is absolute (as `os.path.join` does).
fn join(a: &str, b: &str) -> String {
    if b.starts_with('/') || b.starts_with('~') {
        b.to_string()
    } else if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

fn unescape(escape: &str) -> String {
    match escape {
        "\\n" => "\n".into(),
        "\\t" => "\t".into(),
        "\\\\" => "\\".into(),
        "\\'" => "'".into(),
        "\\\"" => "\"".into(),
        "\\/" => "/".into(),
        _ => UNKNOWN.to_string(),
    }
}

/// `node:fs/promises` → `fs`, `fs/promises` → `fs`.
fn normalize_module(module: &str) -> String {
    let module = module.strip_prefix("node:").unwrap_or(module);
    module.split('/').next().unwrap_or(module).to_string()
}

/// A name that is a module (or a member of one) the reader knows effects of.
fn is_module(qualified: &str) -> bool {
    let root = qualified.split('.').next().unwrap_or(qualified);
    matches!(
        root,
        "os" | "shutil"
            | "subprocess"
            | "pathlib"
            | "io"
            | "builtins"
            | "codecs"
            | "posixpath"
            | "fs"
            | "child_process"
            | "path"
    )
}

fn is_module_call(callee: &str) -> bool {
    is_module(callee) || matches!(callee, "open" | "Path" | "PurePath")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rm(path: &str, recursive: bool) -> Effect {
        Effect::Remove {
            path: path.into(),
            recursive,
        }
    }

    fn u(text: &str) -> String {
        text.replace('?', &UNKNOWN.to_string())
    }

    #[test]
    fn python_deletions_reads_and_commands() {
        let cases: &[(&str, Vec<Effect>)] = &[
            (
                "import shutil; shutil.rmtree('/home')",
                vec![rm("/home", true)],
            ),
            (
                "import shutil as sh\nsh.rmtree('build')",
                vec![rm("build", true)],
            ),
            (
                "from shutil import rmtree\nrmtree('/')",
                vec![rm("/", true)],
            ),
            ("__import__('shutil').rmtree('/x')", vec![rm("/x", true)]),
            (
                "import os; os.remove(os.path.join(os.path.expanduser('~'), 'a'))",
                vec![rm("~/a", false)],
            ),
            (
                "import os; os.unlink(os.environ['HOME'])",
                vec![rm("~", false)],
            ),
            (
                "from pathlib import Path; Path.home().rmdir()",
                vec![rm("~", false)],
            ),
            (
                "from pathlib import Path; (Path('a') / 'b').unlink()",
                vec![rm("a/b", false)],
            ),
            (
                "import shutil, sys; shutil.rmtree(sys.argv[1])",
                vec![rm(&u("?"), true)],
            ),
            (
                "d = '/srv'\nimport shutil\nshutil.rmtree(d + '/x')",
                vec![rm("/srv/x", true)],
            ),
            (
                "import os; os.system('rm -rf /')",
                vec![Effect::Shell("rm -rf /".into())],
            ),
            (
                "import subprocess; subprocess.run(['rm', '-rf', '/'], check=True)",
                vec![Effect::Argv(vec!["rm".into(), "-rf".into(), "/".into()])],
            ),
            (
                "print(open('.env').read())",
                vec![Effect::Read(".env".into())],
            ),
            (
                "open('x.txt', 'w').write('1')",
                vec![Effect::Write("x.txt".into())],
            ),
            ("print(1)", vec![]),
            ("items = [1]; items.remove(1)", vec![]),
            (
                "import shutil; shutil.rmtree(f'/tmp/{x}')",
                vec![rm(&u("/tmp/?"), true)],
            ),
        ];
        for (code, expected) in cases {
            assert_eq!(&effects(Lang::Python, code), expected, "{code}");
        }
    }

    #[test]
    fn javascript_deletions_and_commands() {
        let cases: &[(&str, Vec<Effect>)] = &[
            (
                "require('fs').rmSync(process.env.HOME,{recursive:true})",
                vec![rm("~", true)],
            ),
            ("const fs = require('node:fs'); fs.unlinkSync('a.txt')", vec![rm("a.txt", false)]),
            (
                "const {rmSync} = require('fs'); rmSync(require('path').join(require('os').homedir(), 'x'), {recursive: true, force: true})",
                vec![rm("~/x", true)],
            ),
            ("require('fs').promises.rm('/', {recursive: true})", vec![rm("/", true)]),
            (
                "require('child_process').execSync('rm -rf ~')",
                vec![Effect::Shell("rm -rf ~".into())],
            ),
            (
                "const cp = require('child_process'); cp.spawnSync('rm', ['-rf', '/'])",
                vec![Effect::Argv(vec!["rm".into(), "-rf".into(), "/".into()])],
            ),
            ("console.log(require('fs').readFileSync('.env','utf8'))", vec![Effect::Read(".env".into())]),
            ("console.log(1)", vec![]),
            ("[1].map(x => x)", vec![]),
        ];
        for (code, expected) in cases {
            assert_eq!(&effects(Lang::JavaScript, code), expected, "{code}");
        }
    }

    #[test]
    fn ruby_and_perl_deletions_and_commands() {
        assert_eq!(
            effects(Lang::Ruby, "require 'fileutils'; FileUtils.rm_rf(Dir.home)"),
            [rm("~", true)]
        );
        assert_eq!(
            effects(Lang::Ruby, "FileUtils.rm_rf(File.join(Dir.pwd, 'tmp'))"),
            [rm("./tmp", true)]
        );
        assert_eq!(
            effects(Lang::Ruby, "system('rm -rf /')"),
            [Effect::Shell("rm -rf /".into())]
        );
        assert_eq!(effects(Lang::Ruby, "puts 1"), []);
        assert_eq!(
            effects(Lang::Perl, "use File::Path qw(rmtree); rmtree('/home')"),
            [rm("/home", true)]
        );
        assert_eq!(
            effects(Lang::Perl, "unlink \"a.txt\", \"b.txt\""),
            [rm("a.txt", false), rm("b.txt", false)]
        );
        assert_eq!(
            effects(Lang::Perl, "File::Path::remove_tree($ENV{HOME})"),
            [rm("~", true)]
        );
        assert_eq!(
            effects(Lang::Perl, "system(\"rm -rf /\")"),
            [Effect::Shell("rm -rf /".into())]
        );
        assert_eq!(effects(Lang::Perl, "print 1"), []);
    }

    #[test]
    fn indirection_is_followed_or_refused() {
        assert_eq!(
            effects(
                Lang::Python,
                "import shutil; getattr(shutil, 'rmtree')('/x')"
            ),
            [rm("/x", true)]
        );
        assert_eq!(
            effects(Lang::Python, "exec('import shutil; shutil.rmtree(\"/y\")')"),
            [rm("/y", true)]
        );
        assert_eq!(
            effects(Lang::Python, "import os; exec(os.environ['CODE'])"),
            [Effect::Opaque]
        );
        assert_eq!(
            effects(
                Lang::Python,
                "import os, shutil; os.chdir('/a'); shutil.rmtree('b')"
            ),
            [Effect::Chdir("/a".into()), rm("b", true)]
        );
        assert_eq!(
            effects(
                Lang::JavaScript,
                "import {rmSync as r} from 'node:fs'; r('/z', {recursive: true})"
            ),
            [rm("/z", true)]
        );
        assert_eq!(
            effects(
                Lang::JavaScript,
                "const fs = require('fs'); fs['unlinkSync']('a')"
            ),
            [rm("a", false)]
        );
        assert_eq!(
            effects(Lang::JavaScript, "new Function(process.argv[1])()"),
            [Effect::Opaque]
        );
        assert_eq!(
            effects(Lang::Ruby, "require 'pathname'; Pathname.new('/w').rmtree"),
            [rm("/w", true)]
        );
        assert_eq!(
            effects(Lang::Perl, "system qw(rm -rf /v)"),
            [Effect::Argv(vec!["rm".into(), "-rf".into(), "/v".into()])]
        );
        assert_eq!(
            effects(Lang::Perl, "open(F, \">out.txt\"); rename \"a\", \"b\""),
            [
                Effect::Write("out.txt".into()),
                Effect::Move("a".into(), "b".into())
            ]
        );
    }

    #[test]
    fn interpreters_are_known_by_their_file_names() {
        assert_eq!(Lang::of_program("python3.12"), Some(Lang::Python));
        assert_eq!(Lang::of_program("nodejs"), Some(Lang::JavaScript));
        assert_eq!(Lang::of_program("perl5.36"), Some(Lang::Perl));
        assert_eq!(Lang::of_program("rustc"), None);
    }
}
