//! [`SkillError`]: why a skill could not be found, read, validated or opened.

use std::path::PathBuf;

/// What went wrong with a skill. Every variant names the file (and, for a `SKILL.md`, the line
/// and field) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// A skill path that does not exist.
    #[error(
        "{path}: no such skill folder (give a folder holding SKILL.md, or a folder of such folders)"
    )]
    NotFound { path: PathBuf },
    /// A path that is a file, not a folder.
    #[error(
        "{path}: a skill path must be a folder (the folder that holds SKILL.md, or a folder of skill folders), not a file"
    )]
    NotAFolder { path: PathBuf },
    /// A file or folder that cannot be read.
    #[error("{path}: cannot be read")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `SKILL.md` is not UTF-8 text.
    #[error("{path}: SKILL.md is not UTF-8 text; save it as UTF-8")]
    NotText { path: PathBuf },
    /// The frontmatter's YAML does not parse.
    #[error("{origin}:{line}: the frontmatter is not valid YAML")]
    Yaml {
        origin: String,
        line: usize,
        #[source]
        source: yaml_serde::Error,
    },
    /// The frontmatter breaks a rule of the Agent Skills format (a missing or malformed field, an
    /// unknown key, a name that does not match its folder).
    #[error("{origin}:{line}: {field}: {message}")]
    Invalid {
        origin: String,
        line: usize,
        /// The frontmatter field at fault (`name`, `description`, ..., or `frontmatter`).
        field: String,
        message: String,
    },
    /// `@org/name` references need CrewAI's skill registry, which crewai-rs does not reach.
    #[error(
        "skill '{reference}': registry references (@org/name) are not supported; download the skill and give the path of its folder instead"
    )]
    RegistryReference { reference: String },
    /// Two skills of one agent share a name.
    #[error(
        "two skills are named '{name}' ({first} and {second}); rename one (the name must match its folder)"
    )]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
    /// A resource path that would leave the skill's folder, or names nothing readable in it.
    #[error("skill '{skill}': resource '{requested}' {reason}")]
    Resource {
        skill: String,
        requested: String,
        reason: String,
    },
    /// A resource that cannot be read.
    #[error("skill '{skill}': resource '{requested}' cannot be read")]
    ResourceIo {
        skill: String,
        requested: String,
        #[source]
        source: std::io::Error,
    },
}
