//! `memory: true` and `embedder:` on the crew: the embedder is chosen by the rule
//! (configured, else OpenAI's with OPENAI_API_KEY, else the offline model), a malformed
//! `embedder:` is an error at its line, and the built crew writes the project's memory store.

use crewai_project::{BuildOptions, EmbedderChoice, Project, ProjectError, ToolRegistry};

mod common;
use common::write;

const AGENTS: &str = "planner:\n  role: Planner\n  goal: Plan\n  backstory: Careful.\n";
const TASKS: &str = "plan:\n  description: Plan it\n  expected_output: A plan\n  agent: planner\n";

fn project_with(crew: &str) -> (tempfile::TempDir, Result<Project, ProjectError>) {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", AGENTS),
            ("config/tasks.yaml", TASKS),
            ("config/crew.yaml", crew),
        ],
    );
    let project = Project::load(dir.path());
    (dir, project)
}

fn options(env: &[(&str, &str)]) -> BuildOptions {
    let vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    BuildOptions::new(ToolRegistry::default())
        .with_llm_build(crewai_llm::BuildOptions::new().with_env_vars(vars))
}

#[test]
fn the_embedder_is_configured_else_openai_with_a_key_else_offline() {
    let (_dir, project) = project_with("memory: true\n");
    let project = project.unwrap();
    let (config, why) = project.memory_embedder(&options(&[])).unwrap().unwrap();
    assert_eq!(
        (config.provider.as_str(), why),
        ("local", EmbedderChoice::Offline)
    );
    let (config, why) = project
        .memory_embedder(&options(&[("OPENAI_API_KEY", "sk-x")]))
        .unwrap()
        .unwrap();
    assert_eq!(
        (config.provider.as_str(), why),
        ("openai", EmbedderChoice::OpenAiKey)
    );

    let (_dir, project) = project_with(
        "memory: true\nembedder:\n  provider: ollama\n  config:\n    model: nomic-embed-text\n",
    );
    let (config, why) = project
        .unwrap()
        .memory_embedder(&options(&[("OPENAI_API_KEY", "sk-x")]))
        .unwrap()
        .unwrap();
    assert_eq!(why, EmbedderChoice::Configured);
    assert_eq!(config.provider, "ollama");
    assert_eq!(config.config.model.as_deref(), Some("nomic-embed-text"));

    let (_dir, project) = project_with("cache: true\n");
    assert!(
        project
            .unwrap()
            .memory_embedder(&options(&[]))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_malformed_embedder_is_an_error_at_its_line() {
    let (_dir, project) =
        project_with("memory: true\nembedder:\n  provider: hash\n  colour: blue\n");
    let Err(error) = project else {
        panic!("the project is refused")
    };
    let found: Vec<String> = error
        .diagnostics()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("config/crew.yaml:2:") && found[0].contains("`embedder` must be"),
        "{found:?}"
    );
}

#[test]
fn an_embedder_without_memory_is_a_warning() {
    let (_dir, project) = project_with("embedder:\n  provider: hash\n");
    let project = project.unwrap();
    assert!(
        project
            .warnings
            .iter()
            .any(|w| w.to_string().contains("no effect without `memory: true`")),
        "{:?}",
        project.warnings
    );
}

#[tokio::test]
async fn the_built_crew_uses_the_projects_memory_store() {
    let (dir, project) = project_with("name: launch\nmemory: true\nembedder:\n  provider: hash\n");
    let project = project.unwrap();
    let options = options(&[("OPENAI_API_KEY", "sk-x")]);
    project.build(&Default::default(), &options).unwrap();
    assert!(dir.path().join(".crewai/memory.db").is_file());
}
