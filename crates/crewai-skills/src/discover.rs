//! Where an agent's skills come from ([`SkillSource`]) and turning a list of sources into skills
//! ([`resolve`]), recording each step so the engine can report it as events.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::SkillError;
use crate::skill::{DisclosureLevel, SKILL_FILE, Skill};

/// One entry of an agent's or crew's `skills`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillSource {
    /// A folder holding `SKILL.md`, or a folder of such folders (each discovered).
    Path {
        path: PathBuf,
        /// The level every skill found there is disclosed at.
        level: DisclosureLevel,
    },
    /// A skill value (inline, or loaded by the caller).
    Skill(Box<Skill>),
    /// A CrewAI registry reference (`@org/name`): refused by [`resolve`].
    Registry(String),
}

impl SkillSource {
    /// A path source disclosed at the default level (metadata: the catalog and `load_skill`).
    pub fn path(path: impl Into<PathBuf>) -> SkillSource {
        SkillSource::Path {
            path: path.into(),
            level: DisclosureLevel::default(),
        }
    }

    /// A text as CrewAI reads one: `@org/name` is a registry reference, a text starting with a
    /// `---` line is an inline `SKILL.md`, anything else is a path.
    pub fn from_text(text: &str, origin: &str) -> Result<SkillSource, SkillError> {
        if text.starts_with('@') {
            Ok(SkillSource::Registry(text.to_string()))
        } else if text.trim_start_matches('\u{feff}').starts_with("---") {
            Skill::from_markdown(text, origin).map(SkillSource::from)
        } else {
            Ok(SkillSource::path(text))
        }
    }
}

impl From<Skill> for SkillSource {
    fn from(skill: Skill) -> Self {
        SkillSource::Skill(Box::new(skill))
    }
}

impl From<PathBuf> for SkillSource {
    fn from(path: PathBuf) -> Self {
        SkillSource::path(path)
    }
}

impl From<&Path> for SkillSource {
    fn from(path: &Path) -> Self {
        SkillSource::path(path)
    }
}

/// What resolving did, in order, for the engine's events.
#[derive(Debug, Clone)]
pub enum ResolveStep {
    /// A folder of skills is searched.
    DiscoveryStarted { search_path: PathBuf },
    /// The search ended; `skill_names` are the skills it found, in folder order.
    DiscoveryCompleted {
        search_path: PathBuf,
        skill_names: Vec<String>,
    },
    /// A skill was loaded (from a folder or given as a value).
    Loaded {
        skill_name: String,
        skill_path: Option<PathBuf>,
        level: DisclosureLevel,
    },
    /// A folder inside a searched folder holds a `SKILL.md` that does not load; it is left out
    /// and the search goes on (as CrewAI's discovery does).
    LoadFailed {
        skill_name: String,
        skill_path: PathBuf,
        /// Why (shared: the step is cloned with the resolution).
        error: Arc<SkillError>,
    },
}

/// The skills of one agent, and what it took to find them.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    pub skills: Vec<Skill>,
    pub steps: Vec<ResolveStep>,
}

/// Turns sources into skills, in order. A path to a skill folder that does not load, a path
/// that does not exist and a registry reference are errors; inside a searched folder, a skill
/// that does not load is recorded as [`ResolveStep::LoadFailed`] and skipped. Two skills of the
/// same name are an error unless they are the same folder (an agent and its crew naming one
/// skill), which is kept once. Reads files: call it off async worker threads.
pub fn resolve(sources: &[SkillSource]) -> Result<Resolution, SkillError> {
    let mut resolution = Resolution::default();
    for source in sources {
        match source {
            SkillSource::Registry(reference) => {
                return Err(SkillError::RegistryReference {
                    reference: reference.clone(),
                });
            }
            SkillSource::Skill(skill) => add(&mut resolution, (**skill).clone())?,
            SkillSource::Path { path, level } => {
                if !path.exists() {
                    return Err(SkillError::NotFound { path: path.clone() });
                }
                if !path.is_dir() {
                    return Err(SkillError::NotAFolder { path: path.clone() });
                }
                if path.join(SKILL_FILE).is_file() {
                    add(&mut resolution, Skill::load(path)?.with_level(*level))?;
                } else {
                    discover(&mut resolution, path, *level)?;
                }
            }
        }
    }
    Ok(resolution)
}

/// Loads every child folder of `search_path` that holds a `SKILL.md`, in name order.
fn discover(
    resolution: &mut Resolution,
    search_path: &Path,
    level: DisclosureLevel,
) -> Result<(), SkillError> {
    resolution.steps.push(ResolveStep::DiscoveryStarted {
        search_path: search_path.to_path_buf(),
    });
    let io_error = |source| SkillError::Io {
        path: search_path.to_path_buf(),
        source,
    };
    let mut children: Vec<PathBuf> = fs::read_dir(search_path)
        .map_err(io_error)?
        .map(|entry| entry.map(|e| e.path()).map_err(io_error))
        .collect::<Result<_, _>>()?;
    children.sort();
    let mut found = Vec::new();
    for child in children {
        if !child.is_dir() || !child.join(SKILL_FILE).is_file() {
            continue;
        }
        match Skill::load(&child) {
            Ok(skill) => {
                found.push(skill.name().to_string());
                add(resolution, skill.with_level(level))?;
            }
            Err(error) => resolution.steps.push(ResolveStep::LoadFailed {
                skill_name: child
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                skill_path: child.clone(),
                error: Arc::new(error),
            }),
        }
    }
    resolution.steps.push(ResolveStep::DiscoveryCompleted {
        search_path: search_path.to_path_buf(),
        skill_names: found,
    });
    Ok(())
}

fn add(resolution: &mut Resolution, skill: Skill) -> Result<(), SkillError> {
    if let Some(existing) = resolution.skills.iter().find(|s| s.name() == skill.name()) {
        if existing.folder().is_some() && existing.folder() == skill.folder() {
            return Ok(());
        }
        let place = |s: &Skill| {
            s.folder().map_or_else(
                || "an inline skill".to_string(),
                |f| f.display().to_string(),
            )
        };
        return Err(SkillError::DuplicateName {
            name: skill.name().to_string(),
            first: place(existing),
            second: place(&skill),
        });
    }
    resolution.steps.push(ResolveStep::Loaded {
        skill_name: skill.name().to_string(),
        skill_path: skill.folder().map(Path::to_path_buf),
        level: skill.level(),
    });
    resolution.skills.push(skill);
    Ok(())
}
