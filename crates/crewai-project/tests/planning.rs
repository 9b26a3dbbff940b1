//! An agent's planning fields in a project: `planning_config` (every PlanningConfig field, its
//! own model), `planning: true`, `reasoning: true` with `max_reasoning_attempts`, the errors
//! of a bad `planning_config` at its line, and the warnings of settings that do nothing.

use std::time::Duration;

use crewai_core::reasoning::ReasoningEffort;
use crewai_project::{BuildOptions, Project, ToolRegistry};

mod common;
use common::write;

const TASKS: &str = "t:\n  description: d\n  expected_output: e\n  agent: planner\n";

fn agent(extra: &str) -> String {
    format!(
        "planner:\n  role: Planner\n  goal: G\n  backstory: B\n  llm: {{model: openai/gpt-4o-mini, api_key: sk-test}}\n{extra}"
    )
}

fn load(
    extra: &str,
) -> (
    tempfile::TempDir,
    Result<Project, crewai_project::ProjectError>,
) {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agent(extra)),
            ("config/tasks.yaml", TASKS),
        ],
    );
    let project = Project::load(dir.path());
    (dir, project)
}

fn built(extra: &str) -> crewai_core::Agent {
    let (dir, project) = load(extra);
    let project = project.unwrap_or_else(|e| panic!("{e}"));
    let options = BuildOptions::new(ToolRegistry::with_builtins(dir.path()));
    project.build_agent("planner", &options).unwrap()
}

#[test]
fn planning_config_sets_every_field_and_its_own_model() {
    let agent = built(
        "  planning_config:
    reasoning_effort: high
    observe_steps: false
    max_attempts: 2
    max_steps: 6
    max_replans: 1
    max_step_iterations: 4
    step_timeout: 1.5
    system_prompt: Plan like an engineer.
    plan_prompt: 'Plan {task} with {tools} in {max_steps} steps'
    refine_prompt: 'Better than {plan}'
    llm: {model: openai/gpt-4.1-mini, api_key: sk-test}
",
    );
    let config = agent.planning_config().unwrap();
    assert_eq!(config.reasoning_effort, ReasoningEffort::High);
    assert!(!config.observes());
    assert_eq!(config.plan_attempts(), 2);
    assert_eq!((config.max_steps, config.max_replans), (6, 1));
    assert_eq!(config.max_step_iterations, 4);
    assert_eq!(config.step_timeout, Some(Duration::from_millis(1500)));
    assert_eq!(
        config.system_prompt.as_deref(),
        Some("Plan like an engineer.")
    );
    assert!(
        config
            .plan_prompt
            .as_deref()
            .unwrap()
            .contains("{max_steps}")
    );
    assert_eq!(config.llm.as_ref().unwrap().model(), "gpt-4.1-mini");
}

#[test]
fn planning_and_reasoning_flags_map_onto_planning_configs() {
    let quick = built("  planning: true\n");
    let config = quick.planning_config().unwrap();
    assert_eq!(config.reasoning_effort, ReasoningEffort::Low);
    assert_eq!(config.plan_attempts(), 1);
    let reasoning = built("  reasoning: true\n  max_reasoning_attempts: 5\n");
    let config = reasoning.planning_config().unwrap();
    assert_eq!(config.reasoning_effort, ReasoningEffort::Medium);
    assert_eq!(config.plan_attempts(), 5);
    assert!(built("").planning_config().is_none());
}

#[test]
fn a_bad_planning_config_is_an_error_at_its_line() {
    for (extra, expected) in [
        (
            "  planning_config:\n    reasoning_effort: extreme\n",
            "reasoning_effort 'extreme' is not one of low, medium, high",
        ),
        (
            "  planning_config:\n    max_replan: 1\n",
            "unknown field `max_replan`",
        ),
        (
            "  planning_config:\n    max_steps: 0\n",
            "`planning_config.max_steps` must be at least 1",
        ),
        (
            "  planning_config: high\n",
            "`planning_config` must be a mapping of PlanningConfig fields, found text",
        ),
    ] {
        let (_dir, project) = load(extra);
        let error = project.expect_err(extra).to_string();
        assert!(
            error.contains("config/agents.yaml:6:") && error.contains(expected),
            "{extra}: {error}"
        );
    }
}

fn warnings_of(project: Result<Project, crewai_project::ProjectError>) -> Vec<String> {
    let project = project.unwrap_or_else(|e| panic!("{e}"));
    project.warnings.iter().map(|w| w.to_string()).collect()
}

#[test]
fn settings_that_do_nothing_are_warnings() {
    let (_dir, project) = load("  max_reasoning_attempts: 3\n");
    let warnings = warnings_of(project);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`max_reasoning_attempts` has no effect without `reasoning: true`")
    );
    let (_dir, project) = load("  reasoning: true\n  planning_config:\n    max_steps: 3\n");
    let warnings = warnings_of(project);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("`reasoning` has no effect: its `planning_config` decides")),
        "{warnings:?}"
    );
}
