//! Building engine values from project files (no model is called).

use crewai_core::crew::Process;
use crewai_project::{BuildOptions, Project, ProjectError, ToolRegistry};

mod common;
use common::{load, task_names, write};

/// A model that needs no environment: key and endpoint are in the file.
const LLM: &str =
    "  llm: {model: openai/gpt-4o-mini, api_key: k, base_url: 'http://127.0.0.1:9/v1'}\n";

fn agents() -> String {
    format!(
        "lead:\n  role: Lead\n  goal: Lead\n  backstory: Leads.\n{LLM}researcher:\n  role: '{{topic}} Researcher'\n  goal: Find\n  backstory: Finds.\n  max_iter: 4\n  tools: [file_read]\n{LLM}writer:\n  role: Writer\n  goal: Write\n  backstory: Writes.\n{LLM}"
    )
}

const TASKS: &str = "\
research:
  description: Research {topic}
  expected_output: Notes
  agent: researcher
write:
  description: Write
  expected_output: Text
  agent: writer
  context: [research]
  output_json: {type: object, properties: {title: {type: string}}}
";

#[test]
fn builds_a_sequential_crew_with_every_agent_and_task() {
    let (dir, project) = load(&[
        ("config/agents.yaml", &agents()),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", "name: demo\ninputs: {topic: AI}\n"),
    ]);
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap();
    assert_eq!(crew.name(), "demo");
    assert_eq!(crew.process(), Process::Sequential);
    assert_eq!(crew.agents().len(), 3);
    assert_eq!(task_names(&crew), ["research", "write"]);
    assert_eq!(
        crew.tasks()[0].agent().map(|a| a.role().to_string()),
        Some("{topic} Researcher".to_string()),
        "interpolation waits for kickoff"
    );
    assert!(crew.tasks()[1].output_schema().is_some());
    assert!(crew.fetch_inputs().contains("topic"));
}

#[test]
fn builds_a_hierarchical_crew_with_its_manager_outside_the_members() {
    let tasks = TASKS
        .replace("  agent: researcher\n", "")
        .replace("  agent: writer\n", "");
    let (dir, project) = load(&[
        ("config/agents.yaml", &agents()),
        ("config/tasks.yaml", &tasks),
        (
            "config/crew.yaml",
            "process: hierarchical\nmanager_agent: lead\ninputs: {topic: AI}\n",
        ),
    ]);
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap();
    assert_eq!(crew.process(), Process::Hierarchical);
    assert_eq!(crew.agents().len(), 2);
    assert_eq!(
        crew.manager().map(|m| m.role().to_string()),
        Some("Lead".to_string())
    );
}

#[test]
fn build_reports_missing_inputs_and_model_problems_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents()),
            ("config/tasks.yaml", TASKS),
        ],
    );
    let project = Project::load(dir.path()).unwrap();
    let options = BuildOptions::new(ToolRegistry::with_builtins(dir.path()));
    let err = project.build(&Default::default(), &options).unwrap_err();
    assert!(
        err.to_string()
            .contains("config/agents.yaml:7: agent 'researcher' field 'role' uses {topic}"),
        "{err}"
    );

    let broken = agents().replacen("model: openai/gpt-4o-mini", "model: x, provider: nosuch", 1);
    write(dir.path(), &[("config/agents.yaml", &broken)]);
    let project = Project::load(dir.path()).unwrap();
    let inputs = [("topic".to_string(), serde_json::json!("AI"))]
        .into_iter()
        .collect();
    match project.build(&inputs, &options) {
        Err(err @ ProjectError::Llm { .. }) => {
            let text = crewai_llm::error_chain(&err);
            assert!(text.starts_with("agent 'lead' (config/agents.yaml:5): the model client cannot be created: invalid LLM configuration: unknown provider 'nosuch'"), "{text}");
        }
        other => panic!("expected an LLM error, got {other:?}"),
    }
}

#[test]
fn agents_without_a_model_get_the_default_and_named_models_are_kept() {
    use std::sync::{Arc, Mutex};
    let (_dir, project) = load(&[
        (
            "config/agents.yaml",
            &format!(
                "plain:\n  role: Plain\n  goal: G\n  backstory: B.\nnamed:\n  role: Named\n  goal: G\n  backstory: B.\n{LLM}"
            ),
        ),
        (
            "config/tasks.yaml",
            "one:\n  description: D\n  expected_output: E\n  agent: plain\ntwo:\n  description: D\n  expected_output: E\n  agent: named\n",
        ),
    ]);
    let built = Arc::new(Mutex::new(Vec::new()));
    let record = built.clone();
    let llm_build = crewai_llm::BuildOptions::new().with_provider(
        "local",
        Arc::new(move |config: &crewai_llm::LlmConfig| {
            record.lock().unwrap().push(config.model.clone());
            Ok(Arc::new(crewai_llm::ScriptedLlm::new("tiny")) as Arc<dyn crewai_llm::Llm>)
        }),
    );
    let options = BuildOptions::new(ToolRegistry::new())
        .with_llm_build(llm_build)
        .with_default_llm(crewai_llm::LlmConfig::new("local/tiny"));
    let crew = project.build(&Default::default(), &options).unwrap();
    assert_eq!(crew.agents().len(), 2);
    // Only the agent without an `llm:` went to the default provider.
    assert_eq!(*built.lock().unwrap(), vec!["local/tiny".to_string()]);
}

#[test]
fn max_execution_time_takes_whole_or_fractional_seconds() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let agents = format!(
        "whole:\n  role: W\n  goal: G\n  backstory: B.\n  max_execution_time: 30\n{LLM}half:\n  role: H\n  goal: G\n  backstory: B.\n  max_execution_time: 1.5\n{LLM}"
    );
    let tasks = "one:\n  description: D\n  expected_output: E\n  agent: whole\ntwo:\n  description: D\n  expected_output: E\n  agent: half\n";
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents),
            ("config/tasks.yaml", tasks),
        ],
    );
    let project = Project::load(dir.path()).unwrap();
    let read: Vec<Option<f64>> = project
        .agents
        .iter()
        .map(|a| a.spec.max_execution_time.map(|t| t.as_secs_f64()))
        .collect();
    assert_eq!(read, [Some(30.0), Some(1.5)]);
    let crew = project
        .build(&Default::default(), &BuildOptions::new(ToolRegistry::new()))
        .unwrap();
    let limits: Vec<Option<Duration>> = crew
        .agents()
        .iter()
        .map(|a| a.max_execution_time())
        .collect();
    assert_eq!(
        limits,
        [
            Some(Duration::from_secs(30)),
            Some(Duration::from_millis(1500))
        ]
    );

    for (written, problem) in [
        ("-1", "expected a number of seconds, 0 or more, found -1"),
        ("'30s'", "expected a number of seconds, found text"),
    ] {
        let broken = agents.replacen("1.5", written, 1);
        write(dir.path(), &[("config/agents.yaml", &broken)]);
        let err = Project::load(dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("config/agents.yaml:11: agent 'half' field 'max_execution_time': {problem}")
        );
    }
}

#[test]
fn tool_failure_policies_reach_the_crew_its_agents_and_its_tasks() {
    use crewai_tools::ToolFailurePolicy;
    let agents = agents().replacen(
        "  max_iter: 4\n",
        "  max_iter: 4\n  tool_failure_policy: ignore\n",
        1,
    );
    let tasks = TASKS.replacen(
        "  agent: writer\n",
        "  agent: writer\n  tool_failure_policy: raise\n",
        1,
    );
    let (dir, project) = load(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", &tasks),
        (
            "config/crew.yaml",
            "name: demo\ninputs: {topic: AI}\ntool_failure_policy: warn\n",
        ),
    ]);
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap();
    assert_eq!(crew.tool_failure_policy(), Some(ToolFailurePolicy::Warn));
    let by_role: Vec<(String, Option<ToolFailurePolicy>)> = crew
        .agents()
        .iter()
        .map(|a| (a.role().to_string(), a.tool_failure_policy()))
        .collect();
    assert_eq!(
        by_role,
        [
            ("Lead".to_string(), None),
            (
                "{topic} Researcher".to_string(),
                Some(ToolFailurePolicy::Ignore)
            ),
            ("Writer".to_string(), None),
        ]
    );
    let by_task: Vec<Option<ToolFailurePolicy>> = crew
        .tasks()
        .iter()
        .map(|t| t.tool_failure_policy())
        .collect();
    assert_eq!(by_task, [None, Some(ToolFailurePolicy::Raise)]);
}

#[test]
fn planning_gets_its_planning_llm_or_else_the_default_model() {
    let crew_yaml = |extra: &str| format!("name: planned\nplanning: true\n{extra}");
    for (extra, model) in [
        (
            "planning_llm: {model: openai/gpt-4o, api_key: k}\n",
            "openai/gpt-4o",
        ),
        ("", "openai/gpt-4.1-nano"),
    ] {
        let (dir, project) = load(&[
            ("config/agents.yaml", &agents()),
            ("config/tasks.yaml", TASKS),
            ("config/crew.yaml", &crew_yaml(extra)),
        ]);
        let options = BuildOptions::new(ToolRegistry::with_builtins(dir.path()))
            .with_default_llm(crewai_llm::LlmConfig::new("openai/gpt-4.1-nano").with_api_key("k"));
        let crew = project
            .build(&[("topic".to_string(), "AI".into())].into(), &options)
            .unwrap();
        let planner = crew.planner().expect("planning: true makes a planner");
        assert_eq!(planner.role(), "Task Execution Planner");
        assert_eq!(
            planner.llm().unwrap().model(),
            model.trim_start_matches("openai/")
        );
        let plan = project
            .plan_with(&[("topic".to_string(), "AI".into())].into(), &options)
            .unwrap();
        let shown = plan.to_string();
        let expected = match extra.is_empty() {
            true => "Planning: first, one call to the planner [llm: default]".to_string(),
            false => format!("Planning: first, one call to the planner [llm: {model}]"),
        };
        assert!(shown.contains(&expected), "{shown}");
    }
}

#[test]
fn planning_llm_without_planning_is_a_warning() {
    let (dir, project) = load(&[
        ("config/agents.yaml", &agents()),
        ("config/tasks.yaml", TASKS),
        (
            "config/crew.yaml",
            "planning_llm: openai/gpt-4o\ninputs: {topic: AI}\n",
        ),
    ]);
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap();
    assert!(crew.planner().is_none());
    assert!(
        project
            .warnings
            .iter()
            .any(|w| w.to_string().contains("config/crew.yaml:1")
                && w.to_string().contains("`planning_llm` has no effect")),
        "{:?}",
        project.warnings
    );
}
