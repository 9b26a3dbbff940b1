//! `pyproject.toml`: whether a folder is a CrewAI project (`[tool.crewai] type`), and which
//! folder under `src/` holds its package.

use std::path::{Path, PathBuf};

use crate::error::PySourceError;

/// What `[tool.crewai] type` says the project is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectKind {
    Crew,
    Flow,
    /// Another value (CrewAI knows `tool` too), as written.
    Other(String),
}

/// A CrewAI project's package, as `crewai run` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewaiPackage {
    pub pyproject: PathBuf,
    /// `[tool.crewai] type`; `None` when the table has no `type`.
    pub kind: Option<ProjectKind>,
    /// The package's import name (`my_crew`).
    pub name: String,
    /// `src/<name>/`.
    pub dir: PathBuf,
}

impl CrewaiPackage {
    /// `crew.py` of the package, if there is one.
    pub fn crew_py(&self) -> Option<PathBuf> {
        Some(self.dir.join("crew.py")).filter(|p| p.is_file())
    }
    /// `main.py` of the package, if there is one.
    pub fn main_py(&self) -> Option<PathBuf> {
        Some(self.dir.join("main.py")).filter(|p| p.is_file())
    }
}

/// The CrewAI package of the project in `root`: `Ok(None)` when `root` has no
/// `pyproject.toml` or it has no `[tool.crewai]` table. The package folder is the one the
/// project's scripts import (`run_crew = "my_crew.main:run"`), else `src/<project name>` (with
/// `-` and spaces as `_`, lowercased), else the only folder of `src/` with a crew.py or main.py.
pub fn find_crewai_package(root: &Path) -> Result<Option<CrewaiPackage>, PySourceError> {
    let pyproject = root.join("pyproject.toml");
    if !pyproject.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&pyproject).map_err(|source| PySourceError::Io {
        path: pyproject.clone(),
        source,
    })?;
    let table: toml::Table = text.parse().map_err(|source| PySourceError::Toml {
        path: pyproject.clone(),
        source,
    })?;
    let Some(crewai) = table
        .get("tool")
        .and_then(|t| t.get("crewai"))
        .and_then(|c| c.as_table())
    else {
        return Ok(None);
    };
    let kind = crewai
        .get("type")
        .and_then(|t| t.as_str())
        .map(|t| match t {
            "crew" => ProjectKind::Crew,
            "flow" => ProjectKind::Flow,
            other => ProjectKind::Other(other.to_string()),
        });
    let project = table.get("project").and_then(|p| p.as_table());
    let mut candidates: Vec<String> = Vec::new();
    if let Some(scripts) = project
        .and_then(|p| p.get("scripts"))
        .and_then(|s| s.as_table())
    {
        for target in scripts.values().filter_map(|v| v.as_str()) {
            if let Some(package) = target.split([':', '.']).next() {
                candidates.push(package.trim().to_string());
            }
        }
    }
    if let Some(name) = project.and_then(|p| p.get("name")).and_then(|n| n.as_str()) {
        candidates.push(name.trim().to_lowercase().replace(['-', ' ', '.'], "_"));
    }
    let src = root.join("src");
    for candidate in &candidates {
        let dir = src.join(candidate);
        if !candidate.is_empty() && dir.is_dir() {
            return Ok(Some(CrewaiPackage {
                pyproject,
                kind,
                name: candidate.clone(),
                dir,
            }));
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(&src)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("crew.py").is_file() || p.join("main.py").is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.as_slice() {
        [only] => Ok(Some(CrewaiPackage {
            pyproject,
            kind,
            name: only
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: only.clone(),
        })),
        _ => {
            let mut looked_for: Vec<String> =
                candidates.iter().map(|c| format!("src/{c}/")).collect();
            looked_for.dedup();
            if looked_for.is_empty() {
                looked_for.push("src/<name>/ with crew.py or main.py".into());
            }
            Err(PySourceError::PackageNotFound {
                pyproject,
                looked_for,
            })
        }
    }
}
