//! Turning a file's references into the files they name, against the set of files that exist
//! now. Pure and deterministic: the same files and references always give the same edges (each
//! reference tries its candidates in a fixed order and takes the first that exists).

use std::collections::{BTreeMap, HashSet};

use super::parse::{Lang, Ref, RefKind};

/// Where a Rust file sits in its crate: the directory module paths start from, the crate root
/// file, and the file's own module path.
struct RustPlace {
    base: String,
    root: String,
    module: Vec<String>,
}

/// The files of the project and what resolution needs to know about them.
pub struct Resolver {
    files: HashSet<String>,
    /// Package directory → its non-test `.go` files, sorted.
    go_packages: BTreeMap<String, Vec<String>>,
    /// (module path, directory of its go.mod), longest module path first.
    go_modules: Vec<(String, String)>,
}

/// The directory part of a key ("" at the root).
pub fn dir_of(key: &str) -> &str {
    key.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `dir` joined with a relative path, `.` and `..` folded; None when it climbs above the root.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

fn child(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl Resolver {
    /// `files`: every file key of the project; `go_modules`: (module path, go.mod key) pairs.
    pub fn new(files: HashSet<String>, go_modules: Vec<(String, String)>) -> Resolver {
        let mut go_packages: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for key in &files {
            if key.ends_with(".go") && !key.ends_with("_test.go") {
                go_packages
                    .entry(dir_of(key).to_string())
                    .or_default()
                    .push(key.clone());
            }
        }
        for package in go_packages.values_mut() {
            package.sort();
        }
        let mut go_modules: Vec<(String, String)> = go_modules
            .into_iter()
            .map(|(module, go_mod)| (module, dir_of(&go_mod).to_string()))
            .collect();
        go_modules.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
        Resolver {
            files,
            go_packages,
            go_modules,
        }
    }

    fn exists(&self, key: &str) -> bool {
        self.files.contains(key)
    }

    fn first(&self, candidates: impl IntoIterator<Item = String>) -> Option<String> {
        candidates.into_iter().find(|c| self.exists(c))
    }

    /// The files the references of the file `from` (of language `lang`) name, each with the
    /// reference's kind; never `from` itself.
    pub fn resolve_file(&self, from: &str, lang: Lang, refs: &[Ref]) -> Vec<(String, RefKind)> {
        let mut place = None;
        let mut targets = Vec::new();
        for reference in refs {
            let spec = reference.spec.as_str();
            let found = match (lang, reference.kind) {
                (Lang::Rust, RefKind::Mod) => {
                    let place = place.get_or_insert_with(|| self.rust_place(from));
                    self.rust_mod(from, place, spec).into_iter().collect()
                }
                (Lang::Rust, RefKind::Uses) => {
                    let place = place.get_or_insert_with(|| self.rust_place(from));
                    self.rust_use(place, spec).into_iter().collect()
                }
                (Lang::Python, RefKind::Imports) => self.python(from, spec).into_iter().collect(),
                (Lang::JavaScript | Lang::TypeScript, RefKind::Imports) => {
                    self.javascript(from, spec).into_iter().collect()
                }
                (Lang::Go, RefKind::Imports) => self.go(spec),
                (Lang::C | Lang::Cpp, RefKind::Includes) => {
                    self.include(from, spec).into_iter().collect()
                }
                _ => Vec::new(),
            };
            targets.extend(
                found
                    .into_iter()
                    .filter(|target| target != from)
                    .map(|target| (target, reference.kind)),
            );
        }
        targets
    }

    /// Where a Rust file sits in its crate. Files under `<crate>/src` (but not `src/bin`)
    /// belong to the library/main crate; any other `.rs` file is treated as a crate root.
    fn rust_place(&self, from: &str) -> RustPlace {
        let mut dir = dir_of(from);
        let crate_dir = loop {
            if self.exists(&child(dir, "Cargo.toml")) {
                break Some(dir);
            }
            if dir.is_empty() {
                break None;
            }
            dir = dir_of(dir);
        };
        if let Some(crate_dir) = crate_dir {
            let src = child(crate_dir, "src");
            if let Some(inside) = from.strip_prefix(&format!("{src}/")) {
                if !inside.starts_with("bin/") {
                    let root = self
                        .first([child(&src, "lib.rs"), child(&src, "main.rs")])
                        .unwrap_or_else(|| from.to_string());
                    let mut path: Vec<String> = inside
                        .trim_end_matches(".rs")
                        .split('/')
                        .map(str::to_string)
                        .collect();
                    if path.last().is_some_and(|last| last == "mod")
                        || path == ["lib"]
                        || path == ["main"]
                    {
                        path.pop();
                    }
                    return RustPlace {
                        base: src,
                        root,
                        module: path,
                    };
                }
            }
        }
        RustPlace {
            base: dir_of(from).to_string(),
            root: from.to_string(),
            module: Vec::new(),
        }
    }

    /// The file of a module path under `base` (the crate root file for the empty path).
    fn module_file(&self, base: &str, root: &str, path: &[String]) -> Option<String> {
        if path.is_empty() {
            return Some(root.to_string());
        }
        let stem = child(base, &path.join("/"));
        self.first([format!("{stem}.rs"), format!("{stem}/mod.rs")])
    }

    fn rust_mod(&self, from: &str, place: &RustPlace, spec: &str) -> Option<String> {
        let (name, path_attr) = match spec.split_once('=') {
            Some((name, path)) => (name, Some(path)),
            None => (spec, None),
        };
        let dir = dir_of(from);
        if let Some(path) = path_attr {
            return join(dir, path).filter(|p| self.exists(p));
        }
        let file_name = from.rsplit('/').next().unwrap_or(from);
        let module_dir = if place.root == from || file_name == "mod.rs" {
            dir.to_string()
        } else {
            child(dir, file_name.trim_end_matches(".rs"))
        };
        self.first([
            child(&module_dir, &format!("{name}.rs")),
            child(&module_dir, &format!("{name}/mod.rs")),
        ])
    }

    fn rust_use(&self, place: &RustPlace, spec: &str) -> Option<String> {
        let segments: Vec<String> = spec.split("::").map(str::to_string).collect();
        let RustPlace {
            base: base_dir,
            root,
            module,
        } = place;
        // The longest prefix of base+rest that is a module file; at least `min` segments of rest.
        let longest = |base: &[String], rest: &[String], min: usize| {
            (min..=rest.len()).rev().find_map(|j| {
                let path: Vec<String> = base.iter().chain(&rest[..j]).cloned().collect();
                self.module_file(base_dir, root, &path)
            })
        };
        match segments[0].as_str() {
            "crate" => longest(&[], &segments[1..], 0),
            "self" => longest(module, &segments[1..], 0),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = &module[..module.len().checked_sub(ups)?];
                longest(base, &segments[ups..], 0)
            }
            // A path from the current module (2018) or from the crate root (2015); a first
            // segment that is no local module names an external crate.
            _ => longest(module, &segments, 1).or_else(|| longest(&[], &segments, 1)),
        }
    }

    fn python(&self, from: &str, spec: &str) -> Option<String> {
        let module = spec.trim_start_matches('.');
        let dots = spec.len() - module.len();
        let module_path = module.replace('.', "/");
        let in_root = |root: &str| {
            if module_path.is_empty() {
                return self.first([child(root, "__init__.py")]);
            }
            let stem = child(root, &module_path);
            self.first([format!("{stem}.py"), format!("{stem}/__init__.py")])
        };
        if dots > 0 {
            let mut base = dir_of(from).to_string();
            for _ in 1..dots {
                base = join(&base, "..")?;
            }
            return in_root(&base);
        }
        // The directory above the file's top-level package, the file's own directory (a
        // script's sys.path[0]), the project root, then `src/`.
        let mut top = dir_of(from);
        while !top.is_empty() && self.exists(&child(top, "__init__.py")) {
            top = dir_of(top);
        }
        let mut roots = vec![top, dir_of(from), "", "src"];
        roots.dedup();
        roots.into_iter().find_map(in_root)
    }

    fn javascript(&self, from: &str, spec: &str) -> Option<String> {
        const EXTENSIONS: [&str; 10] = [
            ".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".json",
        ];
        let path = join(dir_of(from), spec)?;
        let mut candidates = vec![path.clone()];
        candidates.extend(EXTENSIONS.iter().map(|ext| format!("{path}{ext}")));
        // TypeScript's ESM convention: `./x.js` names the source `x.ts`.
        for (js, ts) in [
            (".js", ".ts"),
            (".js", ".tsx"),
            (".jsx", ".tsx"),
            (".mjs", ".mts"),
            (".cjs", ".cts"),
        ] {
            if let Some(stem) = path.strip_suffix(js) {
                candidates.push(format!("{stem}{ts}"));
            }
        }
        candidates.extend(
            EXTENSIONS
                .iter()
                .map(|ext| child(&path, &format!("index{ext}"))),
        );
        self.first(candidates)
    }

    fn go(&self, spec: &str) -> Vec<String> {
        let found = self.go_modules.iter().find_map(|(module, dir)| {
            let rest = if spec == module {
                ""
            } else {
                spec.strip_prefix(module.as_str())?.strip_prefix('/')?
            };
            join(dir, rest)
        });
        found
            .and_then(|dir| self.go_packages.get(&dir).cloned())
            .unwrap_or_default()
    }

    fn include(&self, from: &str, spec: &str) -> Option<String> {
        let candidates = [
            join(dir_of(from), spec),
            join("", spec),
            join("include", spec),
        ];
        self.first(candidates.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(files: &[&str], go_modules: &[(&str, &str)]) -> Resolver {
        Resolver::new(
            files.iter().map(|f| f.to_string()).collect(),
            go_modules
                .iter()
                .map(|(m, k)| (m.to_string(), k.to_string()))
                .collect(),
        )
    }

    fn one(r: &Resolver, from: &str, lang: Lang, kind: RefKind, spec: &str) -> Vec<String> {
        let refs = [Ref {
            kind,
            spec: spec.to_string(),
        }];
        r.resolve_file(from, lang, &refs)
            .into_iter()
            .map(|(target, _)| target)
            .collect()
    }

    #[test]
    fn rust_mod_and_use_follow_the_module_tree() {
        let r = resolver(
            &[
                "c/Cargo.toml",
                "c/src/lib.rs",
                "c/src/a.rs",
                "c/src/a/b.rs",
                "c/src/d/mod.rs",
                "c/src/bin/t.rs",
                "c/src/bin/u.rs",
                "c/gen/x.rs",
            ],
            &[],
        );
        let rust = |from, kind, spec| one(&r, from, Lang::Rust, kind, spec);
        assert_eq!(rust("c/src/lib.rs", RefKind::Mod, "a"), ["c/src/a.rs"]);
        assert_eq!(rust("c/src/lib.rs", RefKind::Mod, "d"), ["c/src/d/mod.rs"]);
        assert_eq!(rust("c/src/a.rs", RefKind::Mod, "b"), ["c/src/a/b.rs"]);
        assert_eq!(
            rust("c/src/lib.rs", RefKind::Mod, "g=../gen/x.rs"),
            ["c/gen/x.rs"]
        );
        assert_eq!(
            rust("c/src/bin/t.rs", RefKind::Mod, "u"),
            ["c/src/bin/u.rs"]
        );
        assert_eq!(
            rust("c/src/d/mod.rs", RefKind::Uses, "crate::a::b::Item"),
            ["c/src/a/b.rs"]
        );
        assert_eq!(
            rust("c/src/d/mod.rs", RefKind::Uses, "crate::Top"),
            ["c/src/lib.rs"]
        );
        assert_eq!(
            rust("c/src/a/b.rs", RefKind::Uses, "super::Thing"),
            ["c/src/a.rs"]
        );
        assert_eq!(
            rust("c/src/a/b.rs", RefKind::Uses, "super::super::d::X"),
            ["c/src/d/mod.rs"]
        );
        assert_eq!(
            rust("c/src/a.rs", RefKind::Uses, "self::b::Y"),
            ["c/src/a/b.rs"]
        );
        assert_eq!(
            rust("c/src/lib.rs", RefKind::Uses, "a::b"),
            ["c/src/a/b.rs"]
        );
        assert!(rust("c/src/lib.rs", RefKind::Uses, "std::fmt").is_empty());
        assert!(
            rust("c/src/lib.rs", RefKind::Uses, "crate").is_empty(),
            "no self-edge"
        );
    }

    #[test]
    fn python_relative_absolute_and_package_imports() {
        let r = resolver(
            &[
                "app/__init__.py",
                "app/main.py",
                "app/util.py",
                "app/core/__init__.py",
                "app/core/db.py",
                "scripts/run.py",
                "scripts/helper.py",
                "src/lib2/__init__.py",
            ],
            &[],
        );
        let py = |from, spec| one(&r, from, Lang::Python, RefKind::Imports, spec);
        assert_eq!(py("app/core/db.py", "..util"), ["app/util.py"]);
        assert_eq!(py("app/core/db.py", "."), ["app/core/__init__.py"]);
        assert_eq!(py("app/main.py", "app.core.db"), ["app/core/db.py"]);
        assert_eq!(py("app/main.py", "app.core"), ["app/core/__init__.py"]);
        assert!(py("app/main.py", "app.core.db.connect").is_empty());
        assert_eq!(py("scripts/run.py", "helper"), ["scripts/helper.py"]);
        assert_eq!(py("scripts/run.py", "lib2"), ["src/lib2/__init__.py"]);
        assert!(py("scripts/run.py", "os").is_empty());
        assert!(py("app/main.py", "....too.far").is_empty());
    }

    #[test]
    fn javascript_extensions_index_files_and_ts_esm_names() {
        let r = resolver(
            &[
                "web/a.ts",
                "web/b/index.tsx",
                "web/c.js",
                "web/d.mts",
                "lib/e.json",
            ],
            &[],
        );
        let js = |from, spec| one(&r, from, Lang::TypeScript, RefKind::Imports, spec);
        assert_eq!(js("web/c.js", "./a"), ["web/a.ts"]);
        assert_eq!(js("web/a.ts", "./a.js").len(), 0, "no self-edge");
        assert_eq!(js("web/c.js", "./a.js"), ["web/a.ts"]);
        assert_eq!(js("web/a.ts", "./b"), ["web/b/index.tsx"]);
        assert_eq!(js("web/a.ts", "./c.js"), ["web/c.js"]);
        assert_eq!(js("web/a.ts", "./d.mjs"), ["web/d.mts"]);
        assert_eq!(js("web/a.ts", "../lib/e.json"), ["lib/e.json"]);
        assert!(js("web/a.ts", "../../outside").is_empty());
    }

    #[test]
    fn go_imports_resolve_through_the_longest_module_path() {
        let r = resolver(
            &[
                "go.mod",
                "main.go",
                "pkg/a.go",
                "pkg/b.go",
                "pkg/a_test.go",
                "tools/go.mod",
                "tools/x/x.go",
            ],
            &[
                ("example.com/m", "go.mod"),
                ("example.com/m/tools", "tools/go.mod"),
            ],
        );
        let go = |spec| one(&r, "main.go", Lang::Go, RefKind::Imports, spec);
        assert_eq!(go("example.com/m/pkg"), ["pkg/a.go", "pkg/b.go"]);
        assert_eq!(go("example.com/m/tools/x"), ["tools/x/x.go"]);
        assert!(go("fmt").is_empty());
        assert!(go("example.com/mother/pkg").is_empty());
    }

    #[test]
    fn c_includes_relative_then_root_then_include_dir() {
        let r = resolver(&["src/a.c", "src/a.h", "include/lib.h", "common.h"], &[]);
        let inc = |spec| one(&r, "src/a.c", Lang::C, RefKind::Includes, spec);
        assert_eq!(inc("a.h"), ["src/a.h"]);
        assert_eq!(inc("common.h"), ["common.h"]);
        assert_eq!(inc("lib.h"), ["include/lib.h"]);
    }
}
