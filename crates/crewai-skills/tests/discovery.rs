//! Loading skills from folders, discovering a folder of skills, and reading resources safely.

use std::path::{Path, PathBuf};

use crewai_skills::{DisclosureLevel, ResolveStep, Skill, SkillError, SkillSource, resolve};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn a_skill_folder_loads_with_its_resources() {
    let skill = Skill::load(fixtures().join("skills/release-notes")).unwrap();
    assert_eq!(skill.name(), "release-notes");
    assert!(skill.instructions().starts_with("# Release notes"));
    assert_eq!(skill.frontmatter().license.as_deref(), Some("MIT"));
    assert_eq!(skill.frontmatter().metadata["version"], "1.0");
    assert_eq!(skill.frontmatter().allowed_tools, ["read_skill_resource"]);
    assert_eq!(skill.level(), DisclosureLevel::Metadata);
    let paths: Vec<String> = skill.resources().paths().collect();
    assert_eq!(
        paths,
        [
            "assets/templates/notes.md",
            "references/style.md",
            "scripts/group.py"
        ]
    );
}

#[test]
fn a_folder_of_skills_is_discovered_in_name_order() {
    let resolution = resolve(&[SkillSource::path(fixtures().join("skills"))]).unwrap();
    let names: Vec<&str> = resolution.skills.iter().map(Skill::name).collect();
    assert_eq!(names, ["haiku-writer", "release-notes"]);
    assert!(matches!(
        resolution.steps.first(),
        Some(ResolveStep::DiscoveryStarted { .. })
    ));
    let Some(ResolveStep::DiscoveryCompleted { skill_names, .. }) = resolution.steps.last() else {
        panic!("{:?}", resolution.steps);
    };
    assert_eq!(skill_names, &["haiku-writer", "release-notes"]);
}

#[test]
fn a_broken_skill_in_a_searched_folder_is_reported_and_skipped() {
    let resolution = resolve(&[SkillSource::path(fixtures().join("mixed"))]).unwrap();
    let names: Vec<&str> = resolution.skills.iter().map(Skill::name).collect();
    assert_eq!(names, ["good-skill"]);
    let failure = resolution
        .steps
        .iter()
        .find_map(|step| match step {
            ResolveStep::LoadFailed {
                skill_name, error, ..
            } => Some((skill_name.clone(), error.to_string())),
            _ => None,
        })
        .unwrap();
    assert_eq!(failure.0, "wrong-folder");
    assert!(
        failure.1.ends_with(
            "SKILL.md:2: name: 'other-name' does not match its folder 'wrong-folder': a skill's name must be its folder's name (rename one of them)"
        ),
        "{}",
        failure.1
    );
}

#[test]
fn a_broken_skill_given_directly_is_an_error() {
    let error = resolve(&[SkillSource::path(fixtures().join("mixed/wrong-folder"))]).unwrap_err();
    assert!(matches!(error, SkillError::Invalid { ref field, line: 2, .. } if field == "name"));
}

#[test]
fn missing_paths_files_and_registry_references_are_refused() {
    let missing = resolve(&[SkillSource::path(fixtures().join("nope"))]).unwrap_err();
    assert!(missing.to_string().ends_with(
        "nope: no such skill folder (give a folder holding SKILL.md, or a folder of such folders)"
    ));
    let file = resolve(&[SkillSource::path(
        fixtures().join("skills/haiku-writer/SKILL.md"),
    )])
    .unwrap_err();
    assert!(matches!(file, SkillError::NotAFolder { .. }));
    let registry = SkillSource::from_text("@crewai/web-research", "agents.yaml:3").unwrap();
    assert_eq!(
        resolve(&[registry]).unwrap_err().to_string(),
        "skill '@crewai/web-research': registry references (@org/name) are not supported; download the skill and give the path of its folder instead"
    );
}

#[test]
fn the_same_folder_twice_is_kept_once_but_two_skills_of_one_name_are_refused() {
    let folder = fixtures().join("skills/haiku-writer");
    let once = resolve(&[SkillSource::path(&folder), SkillSource::path(&folder)]).unwrap();
    assert_eq!(once.skills.len(), 1);
    let inline = Skill::new("haiku-writer", "Another one.", "Other text.").unwrap();
    let error = resolve(&[SkillSource::path(&folder), inline.into()]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("two skills are named 'haiku-writer'")
    );
}

#[test]
fn inline_text_sources_parse_as_skill_md() {
    let source = SkillSource::from_text(
        "---\nname: inline-one\ndescription: Given inline.\n---\nBody.",
        "crew.yaml:4",
    )
    .unwrap();
    let SkillSource::Skill(skill) = source else {
        panic!("{source:?}");
    };
    assert_eq!(skill.instructions(), "Body.");
    assert!(skill.folder().is_none());
    let bad = SkillSource::from_text("---\nname: x\n---\n", "crew.yaml:4").unwrap_err();
    assert_eq!(
        bad.to_string(),
        "crew.yaml:4:1: description: missing: add 'description: <what the skill does and when to use it>'"
    );
    assert!(matches!(
        SkillSource::from_text("skills/x", "o").unwrap(),
        SkillSource::Path { .. }
    ));
}

#[test]
fn resources_are_read_inside_the_folder_and_cut_to_size() {
    let skill = Skill::load(fixtures().join("skills/release-notes")).unwrap();
    let style = skill.read_resource("references/style.md", 1_000).unwrap();
    assert_eq!(
        style.text,
        "# Style guide\n\nKeep every line under 80 characters.\n"
    );
    assert!(!style.truncated);
    let cut = skill.read_resource("./references/style.md", 7).unwrap();
    assert_eq!(cut.text, "# Style");
    assert!(cut.truncated);
    assert_eq!(cut.total_bytes, style.total_bytes);
    let missing = skill.read_resource("references/none.md", 100).unwrap_err();
    assert!(missing.to_string().contains("does not exist; the skill's files are: assets/templates/notes.md, references/style.md, scripts/group.py"));
}

#[test]
fn dot_dot_and_absolute_resource_paths_are_refused() {
    let skill = Skill::load(fixtures().join("skills/release-notes")).unwrap();
    for (path, reason) in [
        ("../haiku-writer/SKILL.md", "'..' may not appear"),
        (
            "references/../../haiku-writer/SKILL.md",
            "'..' may not appear",
        ),
        ("/etc/passwd", "absolute paths are not allowed"),
    ] {
        let error = skill.read_resource(path, 100).unwrap_err().to_string();
        assert!(error.contains(reason), "{path}: {error}");
        assert!(error.starts_with(&format!(
            "skill 'release-notes': resource '{path}' is refused"
        )));
    }
    let inline = Skill::new("x", "d", "i").unwrap();
    assert!(
        inline
            .read_resource("a.md", 10)
            .unwrap_err()
            .to_string()
            .contains("has no folder")
    );
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_folder_are_neither_listed_nor_read() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("linky");
    std::fs::create_dir_all(folder.join("references")).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: linky\ndescription: Has links.\n---\nBody.",
    )
    .unwrap();
    std::fs::write(folder.join("references/inside.md"), "inside").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        folder.join("references/secret.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), folder.join("assets")).unwrap();
    std::os::unix::fs::symlink(
        folder.join("references/inside.md"),
        folder.join("references/alias.md"),
    )
    .unwrap();

    let skill = Skill::load(&folder).unwrap();
    let paths: Vec<String> = skill.resources().paths().collect();
    assert_eq!(paths, ["references/alias.md", "references/inside.md"]);
    for path in ["references/secret.md", "assets/secret.txt"] {
        let error = skill.read_resource(path, 100).unwrap_err().to_string();
        assert!(error.contains("leads outside the skill folder"), "{error}");
    }
    assert_eq!(
        skill
            .read_resource("references/alias.md", 100)
            .unwrap()
            .text,
        "inside"
    );
}

#[test]
fn binary_resources_are_refused_as_text() {
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("bin-skill");
    std::fs::create_dir_all(folder.join("assets")).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: bin-skill\ndescription: Has a binary.\n---\nBody.",
    )
    .unwrap();
    std::fs::write(
        folder.join("assets/logo.png"),
        [0x89, 0x50, 0xff, 0xfe, 0x00],
    )
    .unwrap();
    let skill = Skill::load(&folder).unwrap();
    let error = skill
        .read_resource("assets/logo.png", 100)
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not text"), "{error}");
}
