//! Skill files: a project shares its skills as `.car/skills/*.json`, one skill a file:
//!
//! ```json
//! {"name": "deploy_staging", "code": "make deploy ENV=staging", "platform": "shell",
//!  "description": "…", "trigger": {"persona": "", "url_pattern": "", "task_keywords": ["deploy"]},
//!  "domain": null}
//! ```
//!
//! Unknown fields are ignored (files written by other CAR builds carry stats and versions);
//! outcome counts never travel in files: an imported skill starts with none. Import reads and
//! checks every file before it writes anything, then saves them all in one transaction.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Change, NewSkill, Result, Skill, SkillError, Skills, Versions};

/// One skill as a file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillFile {
    pub name: String,
    pub code: String,
    #[serde(default)]
    pub platform: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub trigger: Trigger,
    #[serde(default)]
    pub domain: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    #[serde(default)]
    pub persona: String,
    #[serde(default)]
    pub url_pattern: String,
    #[serde(default)]
    pub task_keywords: Vec<String>,
}

impl SkillFile {
    pub fn from_skill(skill: &Skill) -> SkillFile {
        SkillFile {
            name: skill.name.clone(),
            code: skill.code.clone(),
            platform: skill.platform.clone(),
            description: skill.description.clone(),
            trigger: Trigger {
                persona: skill.persona.clone(),
                url_pattern: skill.url_pattern.clone(),
                task_keywords: skill.task_keywords.clone(),
            },
            domain: skill.domain.clone(),
        }
    }

    pub fn into_new(self, source: &str) -> NewSkill {
        NewSkill {
            name: self.name,
            code: self.code,
            platform: self.platform,
            description: self.description,
            persona: self.trigger.persona,
            url_pattern: self.trigger.url_pattern,
            task_keywords: self.trigger.task_keywords,
            // Exported Global skills say `null`: keep them Global rather than re-deriving.
            domain: Some(self.domain.unwrap_or_else(|| "global".into())),
            supersedes: None,
            source: Some(source.into()),
        }
    }
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> SkillError {
    SkillError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Every `*.json` skill file of `dir`, sorted by file name, checked: a file that is not a skill
/// (or a name two files share) is an error naming the file, and nothing is returned.
pub fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, SkillFile)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        file_error(
            dir,
            format!("cannot read the skills directory ({e}); `car skill export` creates it"),
        )
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| file_error(dir, e))?.path();
        if path.extension().is_some_and(|ext| ext == "json") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut files: Vec<(PathBuf, SkillFile)> = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| file_error(&path, e))?;
        let file: SkillFile = serde_json::from_str(&text).map_err(|e| {
            file_error(
                &path,
                format!("not a skill file: {e} (expected {{name, code, platform?, description?, trigger?}})"),
            )
        })?;
        let trimmed = file.name.trim();
        if let Some((other, _)) = files.iter().find(|(_, f)| f.name.trim() == trimmed) {
            return Err(file_error(
                &path,
                format!("skill {trimmed:?} is also defined in {}", other.display()),
            ));
        }
        files.push((path, file));
    }
    Ok(files)
}

/// The file name a skill is exported to: its name, lowercased, with every run of other
/// characters than letters, digits, `_` and `-` made one `-`.
fn file_stem(name: &str) -> String {
    let mut stem = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() || c == '_' || c == '-' {
            stem.push(c);
        } else if !stem.ends_with('-') {
            stem.push('-');
        }
    }
    let stem = stem.trim_matches('-');
    if stem.is_empty() {
        "skill".into()
    } else {
        stem.into()
    }
}

/// Writes each skill to `<dir>/<name>.json` (atomically, creating `dir`), leaving other files
/// alone, and returns the paths written.
pub fn export_dir(skills: &[Skill], dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let mut written: Vec<PathBuf> = Vec::new();
    for skill in skills {
        let stem = file_stem(&skill.name);
        let mut path = dir.join(format!("{stem}.json"));
        let mut n = 2;
        while written.contains(&path) {
            path = dir.join(format!("{stem}-{n}.json"));
            n += 1;
        }
        let text = serde_json::to_string_pretty(&SkillFile::from_skill(skill))
            .map_err(|e| file_error(&path, e))?;
        crate::home::write_atomic(&path, format!("{text}\n").as_bytes())
            .map_err(|e| file_error(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

/// What `skill export` wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exported {
    /// The directory written to.
    pub dir: PathBuf,
    /// How many skills were written.
    pub exported: usize,
    /// The files written, one a skill.
    pub files: Vec<PathBuf>,
    /// The degraded skills among them (files carry no outcome record).
    pub degraded: Vec<String>,
}

/// What `skill import` saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Imported {
    /// The directory read.
    pub dir: PathBuf,
    /// Skills new to this store.
    pub created: usize,
    /// Skills saved as a new version of one with the same name.
    pub updated: usize,
    /// Skills identical to the active version: nothing changed.
    pub unchanged: usize,
    pub skills: Vec<ImportedSkill>,
}

/// One skill of an import.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImportedSkill {
    pub name: String,
    /// Its version after the import.
    pub version: i64,
    pub change: Change,
}

/// Writes every active skill to `<dir>/<name>.json` (see [`export_dir`]).
pub fn export_active(skills: &Skills, dir: &Path) -> Result<Exported> {
    let active = skills.list(None, Versions::Active)?;
    let files = export_dir(&active, dir)?;
    Ok(Exported {
        dir: dir.to_path_buf(),
        exported: files.len(),
        files,
        degraded: active
            .iter()
            .filter(|s| s.stats.degraded())
            .map(|s| s.name.clone())
            .collect(),
    })
}

/// Saves every `<dir>/*.json` skill in one transaction; a bad file saves nothing.
pub fn import_dir(skills: &Skills, dir: &Path) -> Result<Imported> {
    let batch = read_dir(dir)?
        .into_iter()
        .map(|(_, file)| file.into_new("import"))
        .collect();
    let done = skills.ingest_all(batch)?;
    let count = |change| done.iter().filter(|d| d.change == change).count();
    Ok(Imported {
        dir: dir.to_path_buf(),
        created: count(Change::Created),
        updated: count(Change::NewVersion),
        unchanged: count(Change::Unchanged),
        skills: done
            .iter()
            .map(|d| ImportedSkill {
                name: d.skill.name.clone(),
                version: d.skill.version,
                change: d.change,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_safe_names() {
        assert_eq!(file_stem("Deploy to Staging!"), "deploy-to-staging");
        assert_eq!(file_stem("../../etc/passwd"), "etc-passwd");
        assert_eq!(file_stem("///"), "skill");
    }

    #[test]
    fn a_broken_file_is_named_and_nothing_is_returned() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), r#"{"name":"a","code":"x"}"#).unwrap();
        std::fs::write(dir.path().join("b.json"), r#"{"name":"b"}"#).unwrap();
        let err = read_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("b.json") && err.contains("code"), "{err}");
        std::fs::write(dir.path().join("b.json"), r#"{"name":" a ","code":"y"}"#).unwrap();
        let err = read_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("also defined in"), "{err}");
    }
}
