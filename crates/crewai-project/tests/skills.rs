//! `skills:` in a YAML project: checked at load with file:line errors, and end to end against
//! the scripted model server (the catalog in the system prompt, `load_skill`, crew skills).

use std::path::Path;

use crewai_project::{BuildOptions, Project, ProjectError, ToolRegistry};
use crewai_testkit::scripted::ScriptedServer;
use serde_json::json;

mod common;
use common::write;

const TASKS: &str =
    "notes:\n  description: Write the release notes\n  expected_output: Notes\n  agent: writer\n";

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crewai-skills/tests/fixtures")
}

/// Copies a fixture skill folder into the project (`skills/<name>`).
fn copy_skill(project: &Path, group: &str, name: &str) {
    let from = fixtures().join(group).join(name);
    copy_dir(&from, &project.join("skills").join(name));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn errors(result: Result<Project, ProjectError>) -> Vec<String> {
    match result {
        Ok(_) => panic!("expected the project to be rejected"),
        Err(error) => error
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

fn agents(skills: &str) -> String {
    format!(
        "writer:\n  role: Writer\n  goal: Write notes\n  backstory: Careful.\n  skills:{skills}"
    )
}

#[test]
fn a_missing_skill_path_is_an_error_at_its_yaml_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents("\n    - skills/nowhere\n")),
            ("config/tasks.yaml", TASKS),
        ],
    );
    let found = errors(Project::load(dir.path()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("config/agents.yaml:6: agent 'writer' field 'skills': ")
            && found[0].contains("skills/nowhere: no such skill folder"),
        "{found:?}"
    );
}

#[test]
fn a_broken_skill_md_names_its_own_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents(" [skills/bad-skill]\n")),
            ("config/tasks.yaml", TASKS),
            (
                "skills/bad-skill/SKILL.md",
                "---\nname: bad-skill\ndescription: Bad.\nauthor: me\n---\nBody.",
            ),
        ],
    );
    let found = errors(Project::load(dir.path()));
    assert!(
        found[0].contains("SKILL.md:4: author: unknown frontmatter field"),
        "{found:?}"
    );
    assert!(found[0].starts_with("config/agents.yaml:5:"), "{found:?}");
}

#[test]
fn registry_references_and_bad_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "config/agents.yaml",
                &agents(
                    "\n    - \"@crewai/research\"\n    - {path: skills/x, disclosure: all}\n    - 5\n",
                ),
            ),
            ("config/tasks.yaml", TASKS),
        ],
    );
    let found = errors(Project::load(dir.path()));
    assert!(
        found.iter().any(|e| e.starts_with("config/agents.yaml:7:")
            && e.contains("disclosure 'all' is not one of metadata, instructions, resources")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|e| e.starts_with("config/agents.yaml:8:")
            && e.contains("each entry must be a skill path")),
        "{found:?}"
    );
    // The entries are all checked before any is loaded, so the reference is refused once the
    // others are fixed.
    write(
        dir.path(),
        &[(
            "config/agents.yaml",
            &agents("\n    - \"@crewai/research\"\n"),
        )],
    );
    let found = errors(Project::load(dir.path()));
    assert!(
        found[0].contains("registry references (@org/name) are not supported"),
        "{found:?}"
    );
}

#[test]
fn a_broken_skill_in_a_skills_folder_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents(" [skills]\n")),
            ("config/tasks.yaml", TASKS),
        ],
    );
    copy_skill(dir.path(), "mixed", "good-skill");
    copy_skill(dir.path(), "mixed", "wrong-folder");
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(project.agent_skills("writer").len(), 1);
    assert!(
        project.warnings.iter().any(|w| w
            .to_string()
            .contains("a skill is left out because it does not load")),
        "{:?}",
        project.warnings
    );
}

#[tokio::test]
async fn skills_from_yaml_reach_the_system_prompt_and_load_skill() {
    let server = ScriptedServer::start().await;
    server.push_tool_call("load_skill", json!({"skill_name": "release-notes"}));
    server.push_text("Added: skills.");
    let dir = tempfile::tempdir().unwrap();
    let llm = format!(
        "  llm:\n    model: openai/gpt-4o-mini\n    base_url: {}\n    api_key: sk-test\n",
        server.base_url()
    );
    let agents = format!("{}{llm}", agents("\n    - skills/release-notes\n"));
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents),
            ("config/tasks.yaml", TASKS),
            (
                "config/crew.yaml",
                "skills:\n  - path: skills/haiku-writer\n    disclosure: instructions\n",
            ),
        ],
    );
    copy_skill(dir.path(), "skills", "release-notes");
    copy_skill(dir.path(), "skills", "haiku-writer");
    let project = Project::load(dir.path()).unwrap();
    let crew = project
        .build(&Default::default(), &BuildOptions::new(ToolRegistry::new()))
        .unwrap();
    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Added: skills.");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("<skill name=\"haiku-writer\">\nAnswer in exactly three lines"),
        "{system}"
    );
    assert!(system.contains("<name>release-notes</name>"), "{system}");
    assert_eq!(
        requests[1].messages()[0]["content"].as_str().unwrap(),
        system
    );
    let tool_message = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(
        tool_message.starts_with("## Skill: release-notes"),
        "{tool_message}"
    );
}

#[test]
fn crew_py_skills_lists_flow_through_the_same_field() {
    let dir = tempfile::tempdir().unwrap();
    let crew_py = r#"from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class Notes:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def writer(self) -> Agent:
        return Agent(config=self.agents_config["writer"], skills=["skills/haiku-writer"])

    @task
    def notes(self) -> Task:
        return Task(config=self.tasks_config["notes"])

    @crew
    def crew(self) -> Crew:
        return Crew(
            agents=self.agents,
            tasks=self.tasks,
            process=Process.sequential,
            skills=["skills/nowhere"],
        )
"#;
    write(
        dir.path(),
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"notes\"\nversion = \"0.1.0\"\n",
            ),
            (
                "src/notes/config/agents.yaml",
                "writer:\n  role: Writer\n  goal: Write notes\n  backstory: Careful.\n",
            ),
            ("src/notes/config/tasks.yaml", TASKS),
            ("src/notes/crew.py", crew_py),
        ],
    );
    copy_skill(dir.path(), "skills", "haiku-writer");
    let found = errors(Project::load(dir.path()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/notes/crew.py:24: crew field 'skills': ")
            && found[0].contains("skills/nowhere: no such skill folder"),
        "{found:?}"
    );
    copy_skill(dir.path(), "skills", "release-notes");
    std::fs::write(
        dir.path().join("src/notes/crew.py"),
        crew_py.replace("skills/nowhere", "skills/release-notes"),
    )
    .unwrap();
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(project.agent_skills("writer").len(), 1);
    assert_eq!(project.crew_skills().len(), 1);
}

#[test]
fn allowed_tools_that_are_not_enforced_are_said_at_load() {
    let dir = tempfile::tempdir().unwrap();
    copy_skill(dir.path(), "skills", "release-notes");
    write(
        dir.path(),
        &[
            (
                "config/agents.yaml",
                &agents("\n    - skills/release-notes\n"),
            ),
            ("config/tasks.yaml", TASKS),
        ],
    );
    let project = Project::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let warnings: Vec<String> = project.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings.iter().any(|w| w.starts_with("config/agents.yaml:6: agent 'writer' field 'skills': skill 'release-notes' lists allowed-tools (read_skill_resource), which crewai-rs does not enforce yet")),
        "{warnings:?}"
    );
}
