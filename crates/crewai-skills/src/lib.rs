//! Agent Skills for crewai: finding, validating and disclosing skills.
//!
//! A skill is a folder holding a `SKILL.md`: YAML frontmatter (`name`, `description`, and
//! optionally `license`, `compatibility`, `metadata`, `allowed-tools`) and a Markdown body, the
//! full instructions. Optional `scripts/`, `references/` and `assets/` folders hold its
//! resources. This crate parses and validates that format (errors name `file:line`, the field,
//! and what to do), discovers the skills in a folder of skill folders, lists resources, and
//! reads a resource without ever leaving the skill's folder. The engine (crewai-core) decides
//! what the model sees: the catalog, the instructions, the `load_skill` tool.
//!
//! ```
//! use crewai_skills::{DisclosureLevel, Skill, SkillSource, resolve};
//!
//! let inline = Skill::from_markdown(
//!     "---\nname: haiku\ndescription: Write answers as haiku.\n---\nThree lines: 5, 7, 5 syllables.",
//!     "inline skill",
//! )?;
//! assert_eq!(inline.name(), "haiku");
//! let resolution = resolve(&[SkillSource::from(inline.with_level(DisclosureLevel::Instructions))])?;
//! assert_eq!(resolution.skills[0].instructions(), "Three lines: 5, 7, 5 syllables.");
//! # Ok::<(), crewai_skills::SkillError>(())
//! ```

mod discover;
mod error;
mod frontmatter;
mod resource;
mod skill;

pub use discover::{Resolution, ResolveStep, SkillSource, resolve};
pub use error::SkillError;
pub use frontmatter::{
    ALLOWED_FIELDS, Frontmatter, MAX_COMPATIBILITY_LENGTH, MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH,
    check_name,
};
pub use resource::ResourceText;
pub use skill::{
    DisclosureLevel, MAX_LISTED_RESOURCES, RESOURCE_FOLDERS, Resources, SKILL_FILE, Skill,
};
