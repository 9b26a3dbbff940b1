//! The checks that need the whole project: names that point at agents and tasks, the rules
//! CrewAI's validators apply to a crew, output schemas and files, and unsupported fields.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crewai_core::skills::SkillSource;

use crate::error::{Diagnostic, did_you_mean};
use crate::load::{AgentEntry, Loaded, TaskEntry};
use crate::skills::skill_sources;
use crate::spec::{
    AGENT_UNSUPPORTED, CREW_UNSUPPORTED, Origin, ProcessSpec, SchemaRef, TASK_UNSUPPORTED,
    is_requested,
};

/// Whether a task's final answer is JSON checked against a schema, and in which of CrewAI's forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// `output_json`: the answer is kept as `json_dict`.
    Json,
    /// `output_pydantic` (and `response_model`): the answer is kept as a typed value.
    Pydantic,
}

/// A task's structured-output schema, read from the file or taken inline.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    pub kind: OutputKind,
    pub schema: Value,
}

pub(crate) struct Checked {
    pub schemas: BTreeMap<String, OutputSchema>,
    pub skills: ProjectSkills,
}

/// The skills of the project's agents (by key) and of its crew, checked.
#[derive(Debug, Clone, Default)]
pub struct ProjectSkills {
    pub agents: BTreeMap<String, Vec<SkillSource>>,
    pub crew: Vec<SkillSource>,
}

pub(crate) fn check(root: &Path, loaded: &mut Loaded) -> Checked {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut skills = ProjectSkills::default();
    for agent in &loaded.agents {
        check_agent(agent, &mut errors, &mut warnings);
        check_agent_memory(
            agent,
            loaded.crew.memory == Some(true),
            &mut errors,
            &mut warnings,
        );
        if let (Some(value), Some(origin)) = (&agent.spec.skills, agent.spec.origin("skills")) {
            let owner = format!("agent '{}'", agent.key);
            if let Some(sources) =
                skill_sources(root, &owner, value, origin, &mut errors, &mut warnings)
            {
                skills.agents.insert(agent.key.clone(), sources);
            }
        }
    }
    if let (Some(value), Some(origin)) = (&loaded.crew.skills, loaded.crew.origin("skills"))
        && let Some(sources) =
            skill_sources(root, "crew", value, origin, &mut errors, &mut warnings)
    {
        skills.crew = sources;
    }
    let agent_keys: Vec<&str> = loaded.agents.iter().map(|a| a.key.as_str()).collect();
    let manager = loaded.crew.manager_agent.clone();
    let process = loaded.crew.process.unwrap_or_default();
    let mut schemas = BTreeMap::new();
    for (index, task) in loaded.tasks.iter().enumerate() {
        check_task(task, &agent_keys, process, &mut errors, &mut warnings);
        check_context(index, &loaded.tasks, &mut errors);
        if let Some(schema) = output_schema(root, &loaded.config_dir, task, &mut errors) {
            schemas.insert(task.key.clone(), schema);
        }
    }
    check_duplicate_names(&loaded.tasks, &mut errors);
    check_async(&loaded.tasks, &mut errors);
    check_crew(
        loaded,
        manager.as_deref(),
        process,
        &mut errors,
        &mut warnings,
    );
    loaded.diagnostics.extend(errors);
    loaded.warnings.extend(warnings);
    Checked { schemas, skills }
}

fn unsupported<'a>(
    owner: &str,
    table: &[(&str, bool, &str)],
    value_of: impl Fn(&str) -> Option<(Value, &'a Origin)>,
    errors: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    for (field, changes_behaviour, why) in table {
        let Some((value, origin)) = value_of(field) else {
            continue;
        };
        if !is_requested(&value) {
            continue;
        }
        let diagnostic = not_supported(owner, field, why, origin, *changes_behaviour);
        if *changes_behaviour {
            errors.push(diagnostic);
        } else {
            warnings.push(diagnostic);
        }
    }
}

/// `field` of `owner` asks for something not available here; an error (with how to go on
/// without it) when ignoring it would change the run, else a warning.
pub(crate) fn not_supported(
    owner: &str,
    field: &str,
    why: &str,
    origin: &Origin,
    changes_behaviour: bool,
) -> Diagnostic {
    let diagnostic = origin.diagnostic(format!(
        "{owner} field '{field}' is not supported yet: {why}"
    ));
    if changes_behaviour {
        diagnostic.with_hint(Some(format!("remove `{field}` to run without it")))
    } else {
        diagnostic
    }
}

fn check_agent(agent: &AgentEntry, errors: &mut Vec<Diagnostic>, warnings: &mut Vec<Diagnostic>) {
    let owner = format!("agent '{}'", agent.key);
    let spec = &agent.spec;
    for (field, value) in [
        ("role", &spec.role),
        ("goal", &spec.goal),
        ("backstory", &spec.backstory),
    ] {
        if value.is_none() {
            errors.push(agent.origin.diagnostic(format!(
                "{owner} has no `{field}`; every agent needs role, goal and backstory"
            )));
        }
    }
    if let Some(origin) = spec.origin("id") {
        errors.push(
            origin
                .diagnostic(format!(
                    "{owner} field 'id' may not be set; ids are generated"
                ))
                .with_hint(Some("remove `id`".into())),
        );
    }
    if let Some(sources) = &spec.knowledge_sources
        && let Err(problems) = crate::knowledge::read_sources(
            sources,
            spec.origin("knowledge_sources"),
            "config/agents.yaml",
            &owner,
        )
    {
        errors.extend(problems);
    }
    if let (Some(mcps), Some(origin)) = (&spec.mcps, spec.origin("mcps"))
        && let Err(problems) = crate::mcp::read_mcps(mcps, origin, std::path::Path::new("."))
    {
        errors.extend(problems);
    }
    if let (Some(a2a), Some(origin)) = (&spec.a2a, spec.origin("a2a"))
        && let Err(problems) = crate::a2a::read_a2a(a2a, origin)
    {
        errors.extend(problems);
    }
    if let (Some(value), Some(origin)) = (&spec.planning_config, spec.origin("planning_config"))
        && let Err(problem) = crate::planning::PlanningConfigSpec::read(value, origin)
    {
        errors.push(problem);
    }
    warnings.extend(crate::planning::planning_warnings(spec, &owner));
    // A guardrail written as a mapping and `step_callback` name code: they are resolved (or
    // refused) when the crew is built, by `Project::resolve_code`.
    let values = agent_values(spec);
    unsupported(
        &owner,
        AGENT_UNSUPPORTED,
        |f| values.get(f).cloned(),
        errors,
        warnings,
    );
}

/// An agent's `memory:` (true or false: a memory object cannot come from configuration) and
/// `embedder:` (CrewAI's `{provider, config}`, which needs memory on the agent or its crew).
fn check_agent_memory(
    agent: &AgentEntry,
    crew_memory: bool,
    errors: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    let spec = &agent.spec;
    if let (Some(memory), Some(origin)) = (&spec.memory, spec.origin("memory"))
        && !memory.is_boolean()
    {
        errors.push(
            origin
                .diagnostic(format!(
                    "agent '{}' `memory` must be true or false here; a Memory, MemoryScope or \
                     MemorySlice object cannot be built from configuration",
                    agent.key
                ))
                .with_hint(Some(
                    "write `memory: true` (the agent's memory under /agent/<role>) and, for \
                     another embedder, `embedder: {provider: ..., config: {...}}`"
                        .into(),
                )),
        );
    }
    if let (Some(embedder), Some(origin)) = (&spec.embedder, spec.origin("embedder")) {
        let own_memory = spec.memory == Some(Value::Bool(true));
        match crate::memory::configured_embedder(embedder) {
            Err(error) => errors.push(origin.diagnostic(crate::memory::embedder_message(&error))),
            Ok(_) if !own_memory && !crew_memory => warnings.push(origin.diagnostic(format!(
                "agent '{}' `embedder` has no effect without `memory: true` on the agent or \
                 its crew (knowledge is not supported yet)",
                agent.key
            ))),
            Ok(_) => {}
        }
    }
}

/// The raw values of the agent fields that take arbitrary values (for the unsupported table).
fn agent_values(spec: &crate::spec::AgentSpec) -> BTreeMap<&'static str, (Value, &Origin)> {
    let mut values = BTreeMap::new();
    let mut put = |field: &'static str, value: Option<Value>| {
        if let (Some(value), Some(origin)) = (value, spec.origin(field)) {
            values.insert(field, (value, origin));
        }
    };
    put("cache_handler", spec.cache_handler.clone());
    put("callbacks", spec.callbacks.clone());
    put("multimodal", spec.multimodal.map(Value::Bool));
    put("knowledge_storage", spec.knowledge_storage.clone());
    put("apps", spec.apps.clone());
    put("checkpoint", spec.checkpoint.clone());
    put("from_repository", spec.from_repository.clone());
    put("security_config", spec.security_config.clone());
    put("executor_class", spec.executor_class.clone());
    values
}

fn check_task(
    task: &TaskEntry,
    agent_keys: &[&str],
    process: ProcessSpec,
    errors: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    let owner = format!("task '{}'", task.key);
    let spec = &task.spec;
    for (field, value) in [
        ("description", &spec.description),
        ("expected_output", &spec.expected_output),
    ] {
        if value.is_none() {
            errors.push(task.origin.diagnostic(format!(
                "{owner} has no `{field}`; every task needs description and expected_output"
            )));
        }
    }
    match (&spec.agent, spec.origin("agent")) {
        (Some(agent), Some(origin)) if !agent_keys.contains(&agent.as_str()) => {
            let hint = did_you_mean(agent, agent_keys.iter().copied())
                .or_else(|| Some(format!("defined agents: {}", agent_keys.join(", "))));
            errors.push(
                origin
                    .diagnostic(format!(
                        "{owner} names agent '{agent}', which is not defined"
                    ))
                    .with_hint(hint),
            );
        }
        (None, _) if process == ProcessSpec::Sequential => errors.push(
            task.origin
                .diagnostic(format!(
                    "{owner} has no agent; in a sequential crew every task needs `agent:`"
                ))
                .with_hint(Some(match agent_keys.is_empty() {
                    true => "define an agent and name it with `agent:`".to_string(),
                    false => format!("add `agent: <name>` (one of: {})", agent_keys.join(", ")),
                })),
        ),
        _ => {}
    }
    let formats: Vec<&str> = [
        ("output_json", spec.output_json.is_some()),
        ("output_pydantic", spec.output_pydantic.is_some()),
        ("response_model", spec.response_model.is_some()),
    ]
    .iter()
    .filter(|(_, set)| *set)
    .map(|(name, _)| *name)
    .collect();
    if formats.len() > 1 {
        let origin = spec.origin(formats[1]).unwrap_or(&task.origin);
        errors.push(origin.diagnostic(format!(
            "{owner} sets {}; only one output type can be set",
            formats.join(" and ")
        )));
    }
    if let (Some(path), Some(origin)) = (&spec.output_file, spec.origin("output_file"))
        && let Some(problem) = output_file_problem(path)
    {
        errors.push(origin.diagnostic(format!("{owner} field 'output_file' ({path}) {problem}")));
    }
    // Guardrails written as mappings, `condition` and `callback` name code: they are resolved
    // (or refused) when the crew is built, by `Project::resolve_code`.
    if let Some(origin) = spec.origin("guardrails")
        && spec.guardrail.is_some()
    {
        warnings.push(origin.diagnostic(format!(
            "{owner} sets both `guardrail` and `guardrails`; as in CrewAI, `guardrail` is ignored"
        )));
    }
    let mut values: BTreeMap<&str, (Value, &Origin)> = BTreeMap::new();
    for (field, value) in [
        ("callbacks", spec.callbacks.clone()),
        ("converter_cls", spec.converter_cls.clone()),
        (
            "allow_crewai_trigger_context",
            spec.allow_crewai_trigger_context.map(Value::Bool),
        ),
        ("input_files", spec.input_files.clone()),
        ("security_config", spec.security_config.clone()),
    ] {
        if let (Some(value), Some(origin)) = (value, spec.origin(field)) {
            values.insert(field, (value, origin));
        }
    }
    unsupported(
        &owner,
        TASK_UNSUPPORTED,
        |f| values.get(f).cloned(),
        errors,
        warnings,
    );
}

/// CrewAI's rules for `output_file`: no `..`, no `~` or `$` at the start, no shell characters.
pub(crate) fn output_file_problem(path: &str) -> Option<&'static str> {
    if path.contains("..") {
        Some("may not contain '..'")
    } else if path.starts_with('~') || path.starts_with('$') {
        Some("may not start with '~' or '$'; write a path relative to the project")
    } else if path
        .chars()
        .any(|c| matches!(c, '|' | '>' | '<' | '&' | ';'))
    {
        Some("may not contain the characters | > < & ;")
    } else {
        None
    }
}

fn check_context(index: usize, tasks: &[TaskEntry], errors: &mut Vec<Diagnostic>) {
    let task = &tasks[index];
    let (Some(context), Some(origin)) = (&task.spec.context, task.spec.origin("context")) else {
        return;
    };
    for (i, name) in context.iter().enumerate() {
        let at = origin.child(i);
        let position = tasks
            .iter()
            .position(|t| t.key == *name || t.name() == name);
        match position {
            None => {
                let hint = did_you_mean(name, tasks.iter().map(|t| t.key.as_str()));
                errors.push(
                    at.diagnostic(format!(
                        "task '{}' lists '{name}' in its context, which is not a task",
                        task.key
                    ))
                    .with_hint(hint),
                );
            }
            Some(p) if p == index => errors
                .push(at.diagnostic(format!("task '{}' lists itself in its context", task.key))),
            Some(p) if p > index => errors.push(
                at.diagnostic(format!(
                    "task '{}' lists '{name}' in its context, which runs after it",
                    task.key
                ))
                .with_hint(Some(
                    "context may only name earlier tasks; move it later in the file".into(),
                )),
            ),
            Some(_) => {}
        }
    }
}

fn check_duplicate_names(tasks: &[TaskEntry], errors: &mut Vec<Diagnostic>) {
    for (i, task) in tasks.iter().enumerate() {
        if tasks[..i].iter().any(|t| t.name() == task.name()) {
            errors.push(task.origin.diagnostic(format!(
                "a second task is named '{}'; task names must be unique",
                task.name()
            )));
        }
    }
}

/// CrewAI's two rules for asynchronous tasks.
fn check_async(tasks: &[TaskEntry], errors: &mut Vec<Diagnostic>) {
    let is_async = |t: &TaskEntry| t.spec.async_execution.unwrap_or(false);
    let trailing = tasks.iter().rev().take_while(|t| is_async(t)).count();
    if trailing > 1 {
        let last = &tasks[tasks.len() - 1];
        let origin = last.spec.origin("async_execution").unwrap_or(&last.origin);
        errors.push(
            origin
                .diagnostic(format!(
                    "the crew ends with {trailing} asynchronous tasks; at most one may come last"
                ))
                .with_hint(Some(
                    "add a synchronous task after them that takes them as context".into(),
                )),
        );
    }
    for (index, task) in tasks.iter().enumerate() {
        if !is_async(task) {
            continue;
        }
        let (Some(context), Some(origin)) = (&task.spec.context, task.spec.origin("context"))
        else {
            continue;
        };
        // The run of asynchronous tasks right before this one still runs alongside it.
        let concurrent = tasks[..index].iter().rev().take_while(|t| is_async(t));
        for earlier in concurrent {
            if let Some(i) = context
                .iter()
                .position(|c| *c == earlier.key || c == earlier.name())
            {
                errors.push(origin.child(i).diagnostic(format!(
                    "asynchronous task '{}' cannot take '{}' as context: that task is asynchronous too and still running",
                    task.key, earlier.key
                )));
            }
        }
    }
}

fn check_crew(
    loaded: &Loaded,
    manager: Option<&str>,
    process: ProcessSpec,
    errors: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) {
    let crew = &loaded.crew;
    let has_sources = |value: &Option<Value>| value.as_ref().is_some_and(crate::spec::is_requested);
    let has_knowledge = has_sources(&crew.knowledge_sources)
        || loaded
            .agents
            .iter()
            .any(|a| has_sources(&a.spec.knowledge_sources))
        || loaded
            .agents
            .iter()
            .any(|a| crate::knowledge::names_search_tool(&a.spec.tools))
        || loaded
            .tasks
            .iter()
            .any(|t| crate::knowledge::names_search_tool(&t.spec.tools));
    if let (Some(embedder), Some(origin)) = (&crew.embedder, crew.origin("embedder")) {
        match crate::memory::configured_embedder(embedder) {
            Err(error) => errors.push(origin.diagnostic(crate::memory::embedder_message(&error))),
            Ok(_) if crew.memory != Some(true) && !has_knowledge => {
                warnings.push(origin.diagnostic(
                    "`embedder` has no effect without `memory: true`, `knowledge_sources` or a knowledge search tool",
                ))
            }
            Ok(_) => {}
        }
    }
    if crew.planning != Some(true)
        && let Some(origin) = crew.origin("planning_llm")
    {
        warnings.push(origin.diagnostic("`planning_llm` has no effect without `planning: true`"));
    }
    if let Some(sources) = &crew.knowledge_sources
        && let Err(problems) = crate::knowledge::read_sources(
            sources,
            crew.origin("knowledge_sources"),
            "config/crew.yaml",
            "crew",
        )
    {
        errors.extend(problems);
    }
    crate::consensus::check(loaded, process, errors);
    if process == ProcessSpec::Hierarchical && crew.manager_llm.is_none() && manager.is_none() {
        let origin = crew.origin("process");
        let diagnostic = match origin {
            Some(origin) => {
                origin.diagnostic("a hierarchical crew needs `manager_llm` or `manager_agent`")
            }
            None => Diagnostic::in_file(
                "config/crew.yaml",
                "a hierarchical crew needs `manager_llm` or `manager_agent`",
            ),
        };
        errors.push(diagnostic.with_hint(Some("add `manager_llm: openai/gpt-4o` (or the key of a manager in agents.yaml as `manager_agent:`)".into())));
    }
    if let (Some(manager), Some(origin)) = (manager, crew.origin("manager_agent")) {
        match loaded.agents.iter().find(|a| a.key == manager) {
            None => {
                let hint = did_you_mean(manager, loaded.agents.iter().map(|a| a.key.as_str()));
                errors.push(
                    origin
                        .diagnostic(format!("manager_agent '{manager}' is not defined"))
                        .with_hint(hint),
                );
            }
            Some(agent) => {
                if agent.spec.tools.as_ref().is_some_and(|t| !t.is_empty()) {
                    let at = agent.spec.origin("tools").unwrap_or(&agent.origin);
                    errors.push(
                        at.diagnostic(format!(
                            "agent '{manager}' manages the crew and may not have tools"
                        ))
                        .with_hint(Some(
                            "a manager only delegates; give the tools to its coworkers".into(),
                        )),
                    );
                }
                if let Some(task) = loaded
                    .tasks
                    .iter()
                    .find(|t| t.spec.agent.as_deref() == Some(manager))
                {
                    let at = task.spec.origin("agent").unwrap_or(&task.origin);
                    errors.push(at.diagnostic(format!("task '{}' is assigned to the manager '{manager}'; a manager delegates and does no task itself", task.key)));
                }
                if process == ProcessSpec::Sequential {
                    warnings.push(origin.diagnostic("manager_agent has no effect in a sequential crew (set `process: hierarchical`)"));
                }
            }
        }
    }
    let mut values: BTreeMap<&str, (Value, &Origin)> = BTreeMap::new();
    for (field, value) in [
        ("prompt_file", crew.prompt_file.clone()),
        (
            "before_kickoff_callbacks",
            crew.before_kickoff_callbacks.clone(),
        ),
        (
            "after_kickoff_callbacks",
            crew.after_kickoff_callbacks.clone(),
        ),
        ("checkpoint", crew.checkpoint.clone()),
        ("tracing", crew.tracing.map(Value::Bool)),
        ("share_crew", crew.share_crew.map(Value::Bool)),
        ("security_config", crew.security_config.clone()),
    ] {
        if let (Some(value), Some(origin)) = (value, crew.origin(field)) {
            values.insert(field, (value, origin));
        }
    }
    unsupported(
        "crew",
        CREW_UNSUPPORTED,
        |f| values.get(f).cloned(),
        errors,
        warnings,
    );
}

fn output_schema(
    root: &Path,
    config_dir: &Path,
    task: &TaskEntry,
    errors: &mut Vec<Diagnostic>,
) -> Option<OutputSchema> {
    let spec = &task.spec;
    let (field, kind, schema) = [
        ("output_json", OutputKind::Json, &spec.output_json),
        (
            "output_pydantic",
            OutputKind::Pydantic,
            &spec.output_pydantic,
        ),
        ("response_model", OutputKind::Pydantic, &spec.response_model),
    ]
    .into_iter()
    .find_map(|(field, kind, schema)| schema.as_ref().map(|s| (field, kind, s)))?;
    let origin = spec.origin(field).unwrap_or(&task.origin);
    let owner = format!("task '{}' field '{field}'", task.key);
    match schema {
        SchemaRef::Inline(map) => Some(OutputSchema {
            kind,
            schema: Value::Object(map.clone()),
        }),
        SchemaRef::File(path) => {
            let Some(file) = [root.join(path), config_dir.join(path)]
                .into_iter()
                .find(|p| p.is_file())
            else {
                let hint = if path.contains('/') || path.contains('.') {
                    "the path is relative to the project folder"
                } else {
                    "a Python class name cannot be read from a project file; give an inline JSON schema or the path of a .json schema file"
                };
                errors.push(
                    origin
                        .diagnostic(format!("{owner}: no schema file '{path}'"))
                        .with_hint(Some(hint.into())),
                );
                return None;
            };
            let text = match std::fs::read_to_string(&file) {
                Ok(text) => text,
                Err(err) => {
                    errors.push(
                        origin
                            .diagnostic(format!("{owner}: cannot read {}: {err}", file.display())),
                    );
                    return None;
                }
            };
            let is_yaml = matches!(
                file.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            );
            let parsed: Result<Value, String> = if is_yaml {
                yaml_serde::from_str(&text).map_err(|e| e.to_string())
            } else {
                serde_json::from_str(&crate::source::strip_jsonc(&text)).map_err(|e| e.to_string())
            };
            match parsed {
                Ok(schema @ Value::Object(_)) => Some(OutputSchema { kind, schema }),
                Ok(_) => {
                    errors.push(
                        origin
                            .diagnostic(format!("{owner}: {path} must hold a JSON schema object")),
                    );
                    None
                }
                Err(err) => {
                    errors.push(origin.diagnostic(format!("{owner}: {path} is not valid: {err}")));
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_file_rules_follow_crewai() {
        assert_eq!(output_file_problem("report.md"), None);
        assert_eq!(output_file_problem("out/{topic}.md"), None);
        assert!(output_file_problem("../x").is_some());
        assert!(output_file_problem("~/x").is_some());
        assert!(output_file_problem("a;rm").is_some());
    }
}
