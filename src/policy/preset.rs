//! Built-in rule presets and `car policy init`: each preset is a commented TOML rule file
//! embedded in the binary and written out for the user to read and edit. Writing is atomic (a
//! temporary file in the same directory, then a link or rename) and never replaces an
//! existing file unless asked to.

use std::path::{Path, PathBuf};

/// Every preset by name: the file text, which [`super::rules::parse`] accepts.
pub const PRESETS: &[(&str, &str)] = &[("recommended", include_str!("presets/recommended.toml"))];

/// Why a preset could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("unknown preset {name:?}; the presets are: {}", known())]
    Unknown { name: String },
    #[error("{} already exists; it was left unchanged (pass --force to replace it)", .0.display())]
    Exists(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn known() -> String {
    PRESETS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether an existing file may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    Refuse,
    Replace,
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    pub rules: usize,
    pub replaced: bool,
}

/// Writes preset `name` as `<dir>/<name>.toml`.
pub fn write(name: &str, dir: &Path, overwrite: Overwrite) -> Result<Written, PresetError> {
    let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
        return Err(PresetError::Unknown {
            name: name.to_string(),
        });
    };
    let path = dir.join(format!("{name}.toml"));
    let rules = super::rules::parse(&path, text)
        .map(|(rules, _)| rules.len())
        .unwrap_or_default();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PresetError::Io { path, source }
    };
    let existed = path.exists();
    if existed && overwrite == Overwrite::Refuse {
        return Err(PresetError::Exists(path));
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let temp = dir.join(format!(".{name}.toml.{}.tmp", std::process::id()));
    std::fs::write(&temp, text).map_err(io(&temp))?;
    let placed = match overwrite {
        // A link fails if the file appeared meanwhile, so nothing is ever clobbered.
        Overwrite::Refuse => std::fs::hard_link(&temp, &path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                PresetError::Exists(path.clone())
            } else {
                PresetError::Io {
                    path: path.clone(),
                    source: e,
                }
            }
        }),
        Overwrite::Replace => std::fs::rename(&temp, &path).map_err(io(&path)),
    };
    let _ = std::fs::remove_file(&temp);
    placed?;
    Ok(Written {
        path,
        rules,
        replaced: existed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses() {
        for (name, text) in PRESETS {
            let (rules, _) = super::super::rules::parse(Path::new(name), text).unwrap();
            assert!(!rules.is_empty(), "{name}");
        }
    }

    #[test]
    fn an_existing_file_is_kept_unless_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let first = write("recommended", dir.path(), Overwrite::Refuse).unwrap();
        assert!(!first.replaced);
        std::fs::write(&first.path, "# mine\n").unwrap();
        assert!(matches!(
            write("recommended", dir.path(), Overwrite::Refuse),
            Err(PresetError::Exists(_))
        ));
        assert_eq!(std::fs::read_to_string(&first.path).unwrap(), "# mine\n");
        assert!(
            write("recommended", dir.path(), Overwrite::Replace)
                .unwrap()
                .replaced
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }
}
