//! Projects given as values (not files), built through the caller's hooks: the model factory,
//! the rate limiters, the event bus and hooks of agents built on their own.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crewai_core::events::EventBus;
use crewai_core::hooks::{HookDecision, Hooks};
use crewai_llm::{Llm, LlmConfig, RateLimiter, ScriptedLlm};
use crewai_project::{
    BuildOptions, Format, Project, ProjectValues, RateLimitOwner, SourceFile, ToolRegistry,
};

mod common;
use common::task_names;
use serde_json::{Value, json};

/// One document holding agents, tasks and the crew, as a caller might receive it.
const DOCUMENT: &str = "\
agents:
  writer:
    role: '{topic} Writer'
    goal: Write
    backstory: Writes.
    max_rpm: 10
  editor:
    role: Editor
    goal: Edit
    backstory: Edits.
    llm: {model: openai/gpt-4o}
tasks:
  - name: draft
    description: Draft a note on {topic}
    expected_output: A note
    agent: writer
  - name: edit
    description: Edit the note
    expected_output: A better note
    agent: editor
    context: [draft]
crew:
  max_rpm: 20
";

fn values(document: &str) -> ProjectValues {
    let doc: Value = yaml_serde::from_str(document).unwrap();
    ProjectValues {
        agents: doc["agents"].as_object().cloned().unwrap_or_default(),
        tasks: doc["tasks"].as_array().cloned().unwrap_or_default(),
        crew: doc.get("crew").cloned(),
    }
}

fn source(document: &str) -> SourceFile {
    SourceFile::from_text(
        Path::new("request.yaml"),
        Path::new(""),
        Format::Yaml,
        document.to_string(),
    )
}

/// Options whose models are scripted and whose factories record what they were asked for.
struct Recorded {
    options: BuildOptions,
    models: Arc<Mutex<Vec<String>>>,
    limiters: Arc<Mutex<Vec<String>>>,
}

fn recorded() -> Recorded {
    let models = Arc::new(Mutex::new(Vec::new()));
    let limiters = Arc::new(Mutex::new(Vec::new()));
    let (seen_models, seen_limiters) = (models.clone(), limiters.clone());
    let options = BuildOptions::new(ToolRegistry::new())
        .with_default_llm(LlmConfig::new("scripted/default"))
        .with_llm_factory(move |config: &LlmConfig| {
            seen_models.lock().unwrap().push(config.model.clone());
            Ok(Arc::new(ScriptedLlm::new(config.model.clone())) as Arc<dyn Llm>)
        })
        .with_rate_limiters(move |owner, max_rpm| {
            let who = match owner {
                RateLimitOwner::Agent { key, role } => format!("{key} ({role})"),
                RateLimitOwner::Crew => "crew".to_string(),
            };
            seen_limiters
                .lock()
                .unwrap()
                .push(format!("{who}: {max_rpm}"));
            RateLimiter::new(Some(max_rpm), None)
        });
    Recorded {
        options,
        models,
        limiters,
    }
}

#[test]
fn a_crew_is_built_from_values_through_the_callers_hooks() {
    let project = Project::from_values(".", source(DOCUMENT), values(DOCUMENT)).unwrap();
    let hooks = recorded();
    let crew = project.build_crew(&hooks.options).unwrap();
    assert_eq!(crew.name(), "crew", "CrewAI's default name");
    assert_eq!(task_names(&crew), ["draft", "edit"]);
    assert_eq!(
        *hooks.models.lock().unwrap(),
        ["scripted/default", "openai/gpt-4o"],
        "the default model for the agent naming none; every model through the factory"
    );
    assert_eq!(
        *hooks.limiters.lock().unwrap(),
        ["writer ({topic} Writer): 10", "crew: 20"]
    );
    assert!(crew.agents()[0].rate_limiter().is_some());
    // A crew's agents report through the crew, not on their own.
    assert!(crew.agents()[0].event_bus().is_none());

    // `build_crew` leaves the inputs to each kickoff; `build` checks them first.
    let err = project
        .build(&Default::default(), &hooks.options)
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "request.yaml:3: agent 'writer' field 'role' uses {topic}, which no input provides"
        ),
        "{err}"
    );
}

#[test]
fn agents_and_tasks_built_on_their_own_carry_the_bus_and_hooks() {
    let project = Project::from_values(".", source(DOCUMENT), values(DOCUMENT)).unwrap();
    let bus = EventBus::new();
    let hooks = Hooks::new().before_tool_call(|_| HookDecision::Continue);
    let options = recorded().options.with_event_bus(bus).with_hooks(hooks);
    let agent = project.build_agent("editor", &options).unwrap();
    assert_eq!(agent.role(), "Editor");
    assert!(agent.event_bus().is_some());
    assert!(!agent.hooks().is_empty());

    let parts = project.build_parts(&options).unwrap();
    assert_eq!(
        parts
            .agents
            .iter()
            .map(|(key, _)| key.as_str())
            .collect::<Vec<_>>(),
        ["writer", "editor"]
    );
    let (key, edit) = &parts.tasks[1];
    assert_eq!(key, "edit");
    assert_eq!(edit.agent().map(|a| a.role()), Some("Editor"));
    assert!(edit.agent().is_some_and(|a| a.event_bus().is_some()));

    let err = project.build_agent("ghost", &options).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent 'ghost': is not defined (defined agents: writer, editor)"
    );
}

#[test]
fn problems_in_values_name_the_field_and_its_line_in_the_document() {
    let document = DOCUMENT
        .replacen("agent: editor", "agent: editr", 1)
        .replacen("max_rpm: 10", "max_rpm: lots", 1);
    let err = Project::from_values(".", source(&document), values(&document)).unwrap_err();
    let messages: Vec<String> = err.diagnostics().iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "request.yaml:6: agent 'writer' field 'max_rpm': invalid type: string \"lots\", expected a whole number",
            "request.yaml:20: task 'edit' names agent 'editr', which is not defined; did you mean 'editor'?",
        ]
    );

    // Without the text, messages still name the document, the owner and the field.
    let err = Project::from_values(".", SourceFile::without_text("request"), values(&document))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("request: agent 'writer' field 'max_rpm'"),
        "{err}"
    );

    let mut bad = values(DOCUMENT);
    bad.tasks.push(json!("review"));
    bad.crew = Some(json!(["sequential"]));
    let err = Project::from_values(".", SourceFile::without_text("request"), bad).unwrap_err();
    assert_eq!(
        err.diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "request: each task is a mapping with name, description, expected_output, agent; found text",
            "request: the crew is a mapping of its fields (process, manager_llm, ...), not a list",
        ]
    );
}
