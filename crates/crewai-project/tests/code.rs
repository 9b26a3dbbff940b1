//! Fields that name code (guardrails written as mappings, a ConditionalTask's `condition`,
//! callbacks): supplied by a `CodeResolver`, refused at their place without one.

use std::sync::{Arc, Mutex};

use crewai_core::agent::StepCallback;
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::output::TaskOutput;
use crewai_core::task::{Condition, TaskCallback};
use crewai_project::{BuildOptions, CodeResolver, Project, ToolRegistry};
use serde_json::{Map, Value};

mod common;
use common::write;

const AGENTS: &str = "\
writer:
  role: Writer
  goal: Write
  backstory: Writes.
  llm: {model: openai/gpt-4o-mini, api_key: k, base_url: 'http://127.0.0.1:9/v1'}
  step_callback: count_steps
  guardrail: {rust: non_empty}
";

const TASKS: &str = "\
draft:
  description: Draft a note
  expected_output: A note
  agent: writer
  callback: record
polish:
  type: ConditionalTask
  description: Polish the note
  expected_output: A better note
  agent: writer
  condition: previous_said_yes
  guardrails: [{rust: non_empty}, Keep it short]
";

const CREW: &str = "task_callback: record\n";

/// Code a compiled project would register: names in the files, functions here.
#[derive(Default)]
struct MyCode {
    recorded: Arc<Mutex<Vec<String>>>,
}

impl CodeResolver for MyCode {
    fn guardrail(&self, reference: &Map<String, Value>) -> Option<Result<Guardrail, String>> {
        match reference.get("rust")?.as_str()? {
            "non_empty" => Some(Ok(Guardrail::named("non_empty", |out: &TaskOutput| {
                if out.raw.trim().is_empty() {
                    Err("say something".to_string())
                } else {
                    Ok(GuardrailPass::Keep)
                }
            }))),
            other => Some(Err(format!("no guardrail is named `{other}`"))),
        }
    }

    fn condition(&self, condition: &Value) -> Option<Result<Condition, String>> {
        (condition.as_str()? == "previous_said_yes").then(|| {
            Ok(Arc::new(|previous: &TaskOutput| previous.raw.contains("yes")) as Condition)
        })
    }

    fn task_callback(&self, callback: &Value) -> Option<Result<TaskCallback, String>> {
        let recorded = self.recorded.clone();
        (callback.as_str()? == "record").then(|| {
            Ok(
                Arc::new(move |out: &TaskOutput| recorded.lock().unwrap().push(out.raw.clone()))
                    as TaskCallback,
            )
        })
    }

    fn step_callback(&self, callback: &Value) -> Option<Result<StepCallback, String>> {
        (callback.as_str()? == "count_steps").then(|| Ok(Arc::new(|_: &_| {}) as StepCallback))
    }
}

fn project(tasks: &str) -> (tempfile::TempDir, Project) {
    common::load(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", tasks),
        ("config/crew.yaml", CREW),
    ])
}

#[test]
fn a_resolver_supplies_guardrails_conditions_and_callbacks() {
    let (_dir, project) = project(TASKS);
    let code = Arc::new(MyCode::default());
    let recorded = code.recorded.clone();
    let options = BuildOptions::new(ToolRegistry::new()).with_code_resolver(code);
    let crew = project.build(&Default::default(), &options).unwrap();

    let agent = &crew.agents()[0];
    assert!(agent.step_callback().is_some());
    let guardrail = agent.guardrail().unwrap();
    let empty = TaskOutput::new("d", "e", " ", "Writer");
    assert_eq!(
        guardrail.check_fn(&empty).unwrap(),
        Err("say something".into())
    );

    let [draft, polish] = crew.tasks() else {
        panic!("two tasks")
    };
    let callback = draft.callback().unwrap();
    callback(&TaskOutput::new("d", "e", "first draft", "Writer"));
    assert_eq!(*recorded.lock().unwrap(), ["first draft"]);
    assert!(!draft.is_conditional());

    assert!(polish.is_conditional());
    let condition = polish.condition().unwrap();
    assert!(condition(&TaskOutput::new(
        "d",
        "e",
        "yes, go on",
        "Writer"
    )));
    assert!(!condition(&TaskOutput::new("d", "e", "stop", "Writer")));
    // `guardrails` in order: the resolved one, then the rule in words.
    assert_eq!(polish.guardrails().len(), 2);
    assert!(polish.guardrails()[0].check_fn(&empty).is_some());
    assert!(polish.guardrails()[1].check_fn(&empty).is_none());

    // The dry run checks with the same resolver.
    assert!(project.plan_with(&Default::default(), &options).is_ok());
}

#[test]
fn without_a_resolver_every_code_field_is_refused_at_its_line() {
    let (_dir, project) = project(TASKS);
    let options = BuildOptions::new(ToolRegistry::new());
    let err = project.build(&Default::default(), &options).unwrap_err();
    let messages: Vec<String> = err.diagnostics().iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "config/agents.yaml:7: agent 'writer' field 'guardrail' refers to code ({\"rust\":\"non_empty\"}), which a project file cannot run; write the guardrail as a rule in words (checked by the agent's model), or attach a function from Rust (BuildOptions::with_code_resolver)",
            "config/agents.yaml:6: agent 'writer' field 'step_callback' is not supported yet: Python callbacks cannot run here; register a step callback from Rust (crewai::Agent::builder().step_callback, or BuildOptions::with_code_resolver); remove `step_callback` to run without it",
            "config/tasks.yaml:5: task 'draft' field 'callback' is not supported yet: Python callbacks cannot run here; register a task callback from Rust (crewai::Task::builder().callback, or BuildOptions::with_code_resolver); remove `callback` to run without it",
            "config/tasks.yaml:12: task 'polish' field 'guardrails' refers to code ({\"rust\":\"non_empty\"}), which a project file cannot run; write the guardrail as a rule in words (checked by the agent's model), or attach a function from Rust (BuildOptions::with_code_resolver)",
            "config/tasks.yaml:11: task 'polish' field 'condition' is not supported yet: conditional tasks need a Rust condition (crewai::Task::builder().condition, or BuildOptions::with_code_resolver); remove `condition` to run without it",
            "config/crew.yaml:1: crew field 'task_callback' is not supported yet: Python callbacks cannot run here; register a task callback from Rust (crewai::Task::builder().callback, or BuildOptions::with_code_resolver); remove `task_callback` to run without it",
        ]
    );
    // `crewai run --dry-run` refuses them the same way.
    let plan = project
        .plan(&Default::default(), &ToolRegistry::new())
        .unwrap_err();
    assert_eq!(plan.diagnostics().len(), messages.len(), "{plan}");
}

#[test]
fn a_resolver_refusing_a_value_is_reported_at_the_field() {
    let (_dir, project) = project(&TASKS.replacen(
        "guardrails: [{rust: non_empty}",
        "guardrails: [{rust: missing}",
        1,
    ));
    let options =
        BuildOptions::new(ToolRegistry::new()).with_code_resolver(Arc::new(MyCode::default()));
    let err = project.build(&Default::default(), &options).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/tasks.yaml:12: task 'polish' field 'guardrails': no guardrail is named `missing`"
    );
}

#[test]
fn a_conditional_task_needs_its_condition() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = TASKS.replace("  condition: previous_said_yes\n", "");
    write(
        dir.path(),
        &[
            ("config/agents.yaml", AGENTS),
            ("config/tasks.yaml", &tasks),
        ],
    );
    let err = Project::load(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains(
            "config/tasks.yaml:7: task 'polish' is a ConditionalTask but has no `condition`"
        ),
        "{err}"
    );
}
