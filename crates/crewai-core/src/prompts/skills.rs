//! What an agent sees of its skills (CrewAI's three disclosure levels).
//!
//! The skills block goes into the system prompt after the role (and the ReAct tool list) and
//! before the date, as CrewAI places it. It depends only on the agent's skills, never on the
//! step, so the system message is the same bytes on every call of an execution (a provider's
//! prompt cache keeps hitting). Skills at the instructions level are written out in full under
//! `<skills>`; skills at the metadata level are listed by name and description under
//! `<available_skills>`, and the model loads one with the `load_skill` tool.

use crewai_skills::{DisclosureLevel, Resources, Skill};

/// The block appended to the system prompt (empty when the agent has no skills).
pub fn system_block(skills: &[Skill], loader_tool: &str, resource_tool: Option<&str>) -> String {
    let mut block = String::new();
    let disclosed: Vec<&Skill> = skills
        .iter()
        .filter(|s| s.level() >= DisclosureLevel::Instructions)
        .collect();
    if !disclosed.is_empty() {
        block.push_str("\n\n<skills>");
        for skill in disclosed {
            block.push_str(&format!(
                "\n<skill name=\"{}\">\n{}",
                escape(skill.name()),
                skill.instructions()
            ));
            if skill.level() >= DisclosureLevel::Resources && !skill.resources().is_empty() {
                block.push_str("\n\n");
                block.push_str(&resources_listing(skill.resources(), resource_tool));
            }
            block.push_str("\n</skill>");
        }
        block.push_str("\n</skills>");
    }
    let catalog: Vec<&Skill> = skills
        .iter()
        .filter(|s| s.level() == DisclosureLevel::Metadata)
        .collect();
    if !catalog.is_empty() {
        block.push_str("\n\n<available_skills>");
        for skill in catalog {
            block.push_str(&format!(
                "\n<skill>\n<name>{}</name>\n<description>{}</description>\n</skill>",
                escape(skill.name()),
                escape(skill.description())
            ));
        }
        block.push_str(&format!(
            "\n</available_skills>\nWhen the task matches a skill listed above, call the `{loader_tool}` tool \
             with that skill's name to get its instructions, then follow them. A task that matches no skill needs no call."
        ));
    }
    block
}

/// What `load_skill` returns: the skill's instructions and the files it comes with.
pub fn loaded_skill(skill: &Skill, resource_tool: Option<&str>) -> String {
    let mut text = format!(
        "## Skill: {}\n{}\n\n{}",
        skill.name(),
        skill.description(),
        skill.instructions()
    );
    if !skill.resources().is_empty() {
        text.push_str("\n\n");
        text.push_str(&resources_listing(skill.resources(), resource_tool));
    }
    text
}

/// `load_skill`'s answer for a name that is not one of the agent's skills.
pub fn unknown_skill(requested: &str, available: &[&str]) -> String {
    format!(
        "There is no skill named '{requested}'. The skills you can load are: {}.",
        if available.is_empty() {
            "none".to_string()
        } else {
            available.join(", ")
        }
    )
}

/// The note after a resource that was cut to fit.
pub fn resource_truncated(shown_bytes: usize, total_bytes: u64) -> String {
    format!("\n\n[This file has {total_bytes} bytes; only the first {shown_bytes} are shown.]")
}

pub const LOAD_SKILL_DESCRIPTION: &str = "Loads the full instructions of one of the skills listed under \
available_skills in your instructions. Call it only when a skill's description matches the task at hand; most tasks need no skill.";

pub const LOAD_SKILL_ARGUMENT: &str = "The exact name of the skill whose instructions you need.";

pub const READ_RESOURCE_DESCRIPTION: &str = "Reads one file that comes with a skill: a path from the skill's \
Available Resources listing, relative to the skill's folder (such as references/guide.md).";

pub const READ_RESOURCE_SKILL_ARGUMENT: &str = "The name of the skill the file belongs to.";

pub const READ_RESOURCE_PATH_ARGUMENT: &str =
    "The file's path inside the skill's folder, as listed (such as scripts/run.py).";

fn resources_listing(resources: &Resources, resource_tool: Option<&str>) -> String {
    let mut text = String::from("### Available Resources");
    for (folder, files) in &resources.by_folder {
        text.push_str(&format!("\n- **{folder}/**: {}", files.join(", ")));
    }
    if resources.unlisted > 0 {
        text.push_str(&format!(
            "\n- ({} more files not listed)",
            resources.unlisted
        ));
    }
    if let Some(tool) = resource_tool {
        text.push_str(&format!(
            "\nRead one with the `{tool}` tool (the skill's name and the file's path)."
        ));
    }
    text
}

/// Skill names are restricted to `[a-z0-9-]`; descriptions are free text and must not close the
/// tags around them.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_lists_metadata_skills_and_the_block_carries_the_others() {
        let catalog = Skill::new("haiku", "Poems <short>.", "Write 5-7-5.").unwrap();
        let always = Skill::new("tone", "Tone rules.", "Be kind.")
            .unwrap()
            .with_level(DisclosureLevel::Instructions);
        let block = system_block(&[catalog, always], "load_skill", None);
        assert_eq!(
            block,
            "\n\n<skills>\n<skill name=\"tone\">\nBe kind.\n</skill>\n</skills>\
             \n\n<available_skills>\n<skill>\n<name>haiku</name>\n<description>Poems &lt;short&gt;.</description>\n</skill>\n</available_skills>\n\
             When the task matches a skill listed above, call the `load_skill` tool with that skill's name to get its instructions, then follow them. \
             A task that matches no skill needs no call."
        );
        assert_eq!(system_block(&[], "load_skill", None), "");
    }

    #[test]
    fn unknown_skills_name_the_available_ones() {
        assert_eq!(
            unknown_skill("x", &["a", "b"]),
            "There is no skill named 'x'. The skills you can load are: a, b."
        );
    }
}
