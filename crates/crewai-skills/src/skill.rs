//! [`Skill`]: one validated skill, where it lives, what it lists, and how much of it an agent's
//! system prompt discloses.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::SkillError;
use crate::frontmatter::{self, Frontmatter};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// The folders whose files a skill lists as its resources, in listing order.
pub const RESOURCE_FOLDERS: [&str; 3] = ["scripts", "references", "assets"];

/// At most this many resource files are listed per skill (a skill folder holding a whole
/// dataset must not flood a prompt); the rest are counted in [`Resources::unlisted`].
pub const MAX_LISTED_RESOURCES: usize = 200;

/// How much of a skill the agent's system prompt carries (CrewAI's three levels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DisclosureLevel {
    /// Name and description in the catalog; the instructions come from the `load_skill` tool
    /// when the model asks for them.
    #[default]
    Metadata = 1,
    /// The full instructions in the system prompt.
    Instructions = 2,
    /// The full instructions and the resource listing in the system prompt.
    Resources = 3,
}

impl DisclosureLevel {
    /// The level's number (1, 2, 3), as CrewAI's events carry it.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The level a spec names (`metadata`, `instructions`, `resources`).
    pub fn from_name(name: &str) -> Option<DisclosureLevel> {
        match name {
            "metadata" => Some(DisclosureLevel::Metadata),
            "instructions" => Some(DisclosureLevel::Instructions),
            "resources" => Some(DisclosureLevel::Resources),
            _ => None,
        }
    }
}

/// The files under a skill's `scripts/`, `references/` and `assets/`, by folder, as paths
/// relative to that folder (`/`-separated, sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub by_folder: BTreeMap<String, Vec<String>>,
    /// Files left out of the listing beyond [`MAX_LISTED_RESOURCES`].
    pub unlisted: usize,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        self.by_folder.values().all(Vec::is_empty) && self.unlisted == 0
    }

    /// Every listed file as a path relative to the skill folder (`scripts/run.py`).
    pub fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.by_folder
            .iter()
            .flat_map(|(folder, files)| files.iter().map(move |f| format!("{folder}/{f}")))
    }
}

/// A validated skill: its frontmatter, its instructions (the `SKILL.md` body), its folder (none
/// for an inline skill) with the resources listed there, and its disclosure level.
///
/// The file is read once, when the skill is loaded; a changed `SKILL.md` is seen by the next
/// load (a crew's next kickoff).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    frontmatter: Frontmatter,
    instructions: String,
    folder: Option<PathBuf>,
    resources: Resources,
    level: DisclosureLevel,
}

impl Skill {
    /// Loads the skill in `folder` (which holds `SKILL.md`); its name must match the folder's.
    /// Reads files: call it off async worker threads (`spawn_blocking`).
    pub fn load(folder: impl AsRef<Path>) -> Result<Skill, SkillError> {
        let given = folder.as_ref();
        let folder = fs::canonicalize(given).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SkillError::NotFound {
                path: given.to_path_buf(),
            },
            _ => SkillError::Io {
                path: given.to_path_buf(),
                source,
            },
        })?;
        if !folder.is_dir() {
            return Err(SkillError::NotAFolder {
                path: given.to_path_buf(),
            });
        }
        let file = given.join(SKILL_FILE);
        let bytes = fs::read(folder.join(SKILL_FILE)).map_err(|source| SkillError::Io {
            path: file.clone(),
            source,
        })?;
        let text =
            String::from_utf8(bytes).map_err(|_| SkillError::NotText { path: file.clone() })?;
        let origin = file.display().to_string();
        let parsed = frontmatter::parse(&text, &origin)?;
        let folder_name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if folder_name != parsed.frontmatter.name {
            return Err(SkillError::Invalid {
                origin,
                line: parsed.name_line,
                field: "name".into(),
                message: format!(
                    "'{}' does not match its folder '{folder_name}': a skill's name must be its folder's name (rename one of them)",
                    parsed.frontmatter.name
                ),
            });
        }
        let resources = list_resources(&folder)?;
        Ok(Skill {
            frontmatter: parsed.frontmatter,
            instructions: parsed.body,
            folder: Some(folder),
            resources,
            level: DisclosureLevel::Metadata,
        })
    }

    /// A skill given as the text of a `SKILL.md` (CrewAI's inline skills): no folder, so no
    /// resources. `origin` names it in errors (`agents.yaml:12`, `inline skill`).
    pub fn from_markdown(text: &str, origin: &str) -> Result<Skill, SkillError> {
        let parsed = frontmatter::parse(text, origin)?;
        Ok(Skill {
            frontmatter: parsed.frontmatter,
            instructions: parsed.body,
            folder: None,
            resources: Resources::default(),
            level: DisclosureLevel::Metadata,
        })
    }

    /// A skill built from its parts (Rust callers' inline skills); the name and description are
    /// checked like a frontmatter's.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Result<Skill, SkillError> {
        let (name, description) = (name.into(), description.into());
        let invalid = |field: &str, message: String| SkillError::Invalid {
            origin: format!("skill '{name}'"),
            line: 1,
            field: field.into(),
            message,
        };
        frontmatter::check_name(&name).map_err(|m| invalid("name", m))?;
        let length = description.chars().count();
        if description.trim().is_empty() || length > frontmatter::MAX_DESCRIPTION_LENGTH {
            return Err(invalid(
                "description",
                format!(
                    "must be 1 to {} characters (it is {length})",
                    frontmatter::MAX_DESCRIPTION_LENGTH
                ),
            ));
        }
        Ok(Skill {
            frontmatter: Frontmatter {
                name,
                description,
                license: None,
                compatibility: None,
                metadata: BTreeMap::new(),
                allowed_tools: Vec::new(),
            },
            instructions: instructions.into().trim().to_string(),
            folder: None,
            resources: Resources::default(),
            level: DisclosureLevel::Metadata,
        })
    }

    /// The same skill disclosed at `level` in the system prompt.
    pub fn with_level(mut self, level: DisclosureLevel) -> Skill {
        self.level = level;
        self
    }

    pub fn name(&self) -> &str {
        &self.frontmatter.name
    }
    pub fn description(&self) -> &str {
        &self.frontmatter.description
    }
    pub fn frontmatter(&self) -> &Frontmatter {
        &self.frontmatter
    }
    /// The full instructions (the `SKILL.md` body).
    pub fn instructions(&self) -> &str {
        &self.instructions
    }
    /// The skill's folder, canonical (none for an inline skill).
    pub fn folder(&self) -> Option<&Path> {
        self.folder.as_deref()
    }
    pub fn resources(&self) -> &Resources {
        &self.resources
    }
    pub fn level(&self) -> DisclosureLevel {
        self.level
    }
}

/// Lists the files under the resource folders. Symbolic links are listed only when they lead
/// to a file inside the skill folder, so a listing never names what a read would refuse.
fn list_resources(folder: &Path) -> Result<Resources, SkillError> {
    let mut resources = Resources::default();
    let mut listed = 0;
    for name in RESOURCE_FOLDERS {
        let root = folder.join(name);
        if !root.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            let entries = fs::read_dir(&dir).map_err(|source| SkillError::Io {
                path: dir.clone(),
                source,
            })?;
            for entry in entries {
                let entry = entry.map_err(|source| SkillError::Io {
                    path: dir.clone(),
                    source,
                })?;
                let path = entry.path();
                let Ok(real) = fs::canonicalize(&path) else {
                    continue; // a dangling link lists nothing
                };
                if !real.starts_with(folder) {
                    continue;
                }
                if real.is_dir() {
                    // A link to a folder inside the skill is not followed: that folder is
                    // listed under its own name, and a loop of links cannot form.
                    if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                        pending.push(path);
                    }
                } else if real.is_file() {
                    if listed >= MAX_LISTED_RESOURCES {
                        resources.unlisted += 1;
                        continue;
                    }
                    listed += 1;
                    if let Ok(relative) = path.strip_prefix(&root) {
                        let parts: Vec<String> = relative
                            .components()
                            .map(|c| c.as_os_str().to_string_lossy().into_owned())
                            .collect();
                        files.push(parts.join("/"));
                    }
                }
            }
        }
        files.sort();
        if !files.is_empty() {
            resources.by_folder.insert(name.to_string(), files);
        }
    }
    Ok(resources)
}
