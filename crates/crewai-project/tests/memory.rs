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

fn project_of(agents: &str, crew: &str) -> (tempfile::TempDir, Result<Project, ProjectError>) {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", agents),
            ("config/tasks.yaml", TASKS),
            ("config/crew.yaml", crew),
        ],
    );
    let project = Project::load(dir.path());
    (dir, project)
}

const WITH_WRITER: &str = "writer:\n  role: Writer\n  goal: Write\n  backstory: Brief.\n";

#[tokio::test]
async fn an_agent_with_memory_has_its_own_even_when_its_crew_has_none() {
    let agents = format!(
        "planner:\n  role: Lead Planner\n  goal: Plan\n  backstory: Careful.\n  memory: true\n  embedder:\n    provider: hash\n    config: {{dimensions: 64}}\n{WITH_WRITER}"
    );
    let (_dir, project) = project_of(&agents, "name: launch\n");
    let project = project.unwrap();
    let crew = project
        .build(&Default::default(), &options(&[("OPENAI_API_KEY", "sk-x")]))
        .unwrap();
    let planner = crew.agents()[0].memory().expect("the planner's own memory");
    assert_eq!(planner.root_scope().to_string(), "/agent/lead_planner");
    assert_eq!(planner.embedder().model(), "feature-hash");
    assert!(crew.agents()[1].memory().is_none(), "the writer has none");
    planner
        .remember("Plans go out on Mondays", Default::default())
        .await
        .unwrap();
    let info = planner.info().await.unwrap();
    assert_eq!(info.collection.map(|c| c.dimensions), Some(64));
}

#[tokio::test]
async fn an_agents_embedder_overrides_its_crews_in_a_collection_of_its_own() {
    let agents = format!(
        "planner:\n  role: Planner\n  goal: Plan\n  backstory: Careful.\n  embedder:\n    provider: hash\n    config: {{dimensions: 64}}\n{WITH_WRITER}"
    );
    let (_dir, project) = project_of(
        &agents,
        "name: launch\nmemory: true\nembedder:\n  provider: hash\n  config: {dimensions: 256}\n",
    );
    let crew = project
        .unwrap()
        .build(&Default::default(), &options(&[("OPENAI_API_KEY", "sk-x")]))
        .unwrap();
    let planner = crew.agents()[0].memory().expect("the planner's own memory");
    assert_eq!(
        planner.root_scope().to_string(),
        "/crew/launch/agent/planner"
    );
    planner
        .remember("Plans go out on Mondays", Default::default())
        .await
        .unwrap();
    let collection = planner.info().await.unwrap().collection.unwrap();
    assert_eq!(
        (collection.name.as_str(), collection.dimensions),
        ("memory-agent-planner", 64)
    );
    assert!(
        crew.agents()[1].memory().is_none(),
        "the writer uses the crew's memory"
    );
}

#[test]
fn an_agent_memory_that_is_not_a_flag_is_refused_and_a_lone_embedder_warned() {
    let agents = "planner:\n  role: Planner\n  goal: Plan\n  backstory: Careful.\n  memory: lots\n";
    let (_dir, project) = project_of(agents, "name: launch\n");
    let Err(error) = project else {
        panic!("the project is refused")
    };
    let found: Vec<String> = error
        .diagnostics()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        found.len() == 1
            && found[0].starts_with("config/agents.yaml:5:")
            && found[0].contains("`memory` must be true or false"),
        "{found:?}"
    );

    let agents = "planner:\n  role: Planner\n  goal: Plan\n  backstory: Careful.\n  embedder:\n    provider: hash\n";
    let (_dir, project) = project_of(agents, "name: launch\n");
    let warnings = project.unwrap().warnings;
    assert!(
        warnings.iter().any(|w| w
            .to_string()
            .contains("agent 'planner' `embedder` has no effect")),
        "{warnings:?}"
    );
}
