//! Reading a declared method's `do:` (expression, crew, agent) into an [`Action`]; the actions
//! that need Python are refused here.

use std::path::{Component, Path};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::load::Reader;
use super::{Action, Expression, Template};
use crate::Project;
use crate::error::{Diagnostic, ProjectError, did_you_mean};
use crate::spec::{Origin, describe};
use crate::values::{Placement, ProjectValues};

const CALLS: &[&str] = &[
    "expression",
    "crew",
    "agent",
    "script",
    "code",
    "tool",
    "each",
];

pub(super) fn read_action(
    reader: &mut Reader,
    action: &Map<String, Value>,
    at: &Origin,
    owner: &str,
) -> Option<Action> {
    let call = match action.get("call") {
        Some(Value::String(call)) => call.as_str(),
        _ => {
            reader.error(
                at,
                format!("{owner}: `do` needs `call:` (expression, crew or agent)"),
            );
            return None;
        }
    };
    let call_at = at.child("call");
    match call {
        "expression" => {
            reader.unknown_keys(
                action,
                at,
                &["call", "expr"],
                &format!("the expression action of {owner}"),
            );
            let Some(Value::String(source)) = action.get("expr") else {
                reader.error(
                    at,
                    format!("{owner}: `call: expression` needs `expr:` (CEL text)"),
                );
                return None;
            };
            Expression::compile(source)
                .map_err(|err| reader.error(&at.child("expr"), format!("{owner}: {err}")))
                .ok()
                .map(Action::Expression)
        }
        "crew" => read_crew(reader, action, at, owner),
        "agent" => read_agent(reader, action, at, owner),
        "script" => {
            reader.error(&call_at, format!("{owner}: `call: script` runs trusted inline Python, which this runtime does not execute; write it as `call: expression` (CEL) or as a crew/agent step"));
            None
        }
        "code" | "tool" => {
            reader.error(&call_at, format!("{owner}: `call: {call}` imports Python (`ref: module:qualname`), which this runtime cannot; use `call: expression`, `crew` or `agent` (agents can use tools)"));
            None
        }
        "each" => {
            reader.error(&call_at, format!("{owner}: `call: each` (a loop over a list) is not supported yet; run a crew whose task handles the whole list"));
            None
        }
        other => {
            let hint = did_you_mean(other, CALLS.iter().copied())
                .unwrap_or_else(|| format!("calls: {}", CALLS.join(", ")));
            reader.diagnostics.push(
                call_at
                    .diagnostic(format!("{owner}: unknown call '{other}'"))
                    .with_hint(Some(hint)),
            );
            None
        }
    }
}

fn template(reader: &mut Reader, value: &Value, at: &Origin, owner: &str) -> Option<Template> {
    Template::parse(value)
        .map_err(|err| reader.error(at, format!("{owner}: {err}")))
        .ok()
}

fn read_crew(
    reader: &mut Reader,
    action: &Map<String, Value>,
    at: &Origin,
    owner: &str,
) -> Option<Action> {
    reader.unknown_keys(
        action,
        at,
        &["call", "with", "from_declaration", "inputs"],
        &format!("the crew action of {owner}"),
    );
    let mut inputs = Map::new();
    let project = match (action.get("with"), action.get("from_declaration")) {
        (Some(Value::Object(crew)), None) => {
            let mut crew = crew.clone();
            if let Some(value) = crew.remove("inputs") {
                match value {
                    Value::Object(map) => inputs.extend(map),
                    Value::Null => {}
                    other => reader.error(
                        &at.child("with").child("inputs"),
                        format!(
                            "{owner}: the crew's `inputs` must be a mapping, not {}",
                            describe(&other)
                        ),
                    ),
                }
            }
            inline_crew(reader, crew, &at.child("with"), owner)?
        }
        (None, Some(Value::String(relative))) => {
            crew_folder(reader, relative, &at.child("from_declaration"), owner)?
        }
        (Some(_), Some(_)) | (None, None) => {
            reader.error(at, format!("{owner}: `call: crew` needs exactly one of `with:` (an inline crew) or `from_declaration:` (a crew folder)"));
            return None;
        }
        (Some(other), None) | (None, Some(other)) => {
            reader.error(
                at,
                format!(
                    "{owner}: `with` is a crew mapping and `from_declaration` a path, not {}",
                    describe(other)
                ),
            );
            return None;
        }
    };
    match action.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => inputs.extend(map.clone()),
        Some(other) => reader.error(
            &at.child("inputs"),
            format!(
                "{owner}: `inputs` must be a mapping, not {}",
                describe(other)
            ),
        ),
    }
    let inputs = template(reader, &Value::Object(inputs), &at.child("inputs"), owner)?;
    Some(Action::Crew {
        project: Box::new(project),
        inputs,
    })
}

/// An inline crew: CrewAI's crew fields, with agents as a mapping or a list.
fn inline_crew(
    reader: &mut Reader,
    mut crew: Map<String, Value>,
    at: &Origin,
    owner: &str,
) -> Option<Project> {
    let agents = match crew.remove("agents") {
        Some(Value::Object(agents)) => agents,
        Some(Value::Array(items)) => {
            let mut agents = Map::new();
            for (i, item) in items.into_iter().enumerate() {
                match item {
                    Value::Object(mut fields) if fields.contains_key("name") => {
                        match fields.remove("name") {
                            Some(Value::String(name)) if !name.is_empty() => {
                                agents.insert(name, Value::Object(fields));
                            }
                            _ => reader.error(&at.child("agents").child(i).child("name"), format!("{owner}: a listed agent's `name` must be non-empty text")),
                        }
                    }
                    Value::Object(fields) if fields.len() == 1 => agents.extend(fields),
                    _ => reader.error(&at.child("agents").child(i), format!("{owner}: each listed agent is a mapping with `name:` or a one-key mapping of name to fields")),
                }
            }
            agents
        }
        _ => {
            reader.error(
                at,
                format!("{owner}: an inline crew needs `agents:` (name to role, goal, backstory)"),
            );
            return None;
        }
    };
    let tasks = match crew.remove("tasks") {
        Some(Value::Array(tasks)) if !tasks.is_empty() => tasks,
        _ => {
            reader.error(
                at,
                format!("{owner}: an inline crew needs a non-empty `tasks:` list"),
            );
            return None;
        }
    };
    if let Some(Value::Object(_)) = crew.get("manager_agent") {
        reader.error(&at.child("manager_agent"), format!("{owner}: a manager given as a Python reference cannot be imported; name one of the crew's agents"));
        return None;
    }
    let mut agent_fields = Map::new();
    for (key, fields) in agents {
        let agent_at = at.child("agents").child(key.as_str());
        match fields {
            Value::Object(fields) => {
                agent_fields.insert(
                    key.clone(),
                    Value::Object(agent_settings(reader, fields, &agent_at, owner)),
                );
            }
            other => {
                agent_fields.insert(key, other);
            }
        }
    }
    let values = ProjectValues {
        agents: agent_fields,
        tasks,
        crew: Some(Value::Object(crew)),
    };
    from_values(
        reader,
        values,
        at,
        &Placement::InlineCrew(at.path.clone()),
        owner,
    )
}

/// An agent's fields as `agents.yaml` has them: `settings` laid over the others; the keys
/// that need Python or CrewAI's platform are refused.
fn agent_settings(
    reader: &mut Reader,
    mut fields: Map<String, Value>,
    at: &Origin,
    owner: &str,
) -> Map<String, Value> {
    match fields.remove("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t == "agent" => {}
        Some(_) => reader.error(&at.child("type"), format!("{owner}: an agent `type` other than `agent` names Python code, which cannot be imported")),
    }
    for (key, why) in [
        ("apps", "platform apps are not available"),
        ("mcps", "give MCP servers as tools of the project instead"),
    ] {
        if fields.remove(key).is_some_and(|v| !v.is_null()) {
            reader.error(
                &at.child(key),
                format!("{owner}: an agent's `{key}` is not supported: {why}"),
            );
        }
    }
    match fields.remove("settings") {
        None | Some(Value::Null) => {}
        Some(Value::Object(settings)) => fields.extend(settings),
        Some(other) => reader.error(
            &at.child("settings"),
            format!(
                "{owner}: an agent's `settings` must be a mapping, not {}",
                describe(&other)
            ),
        ),
    }
    fields
}

fn from_values(
    reader: &mut Reader,
    values: ProjectValues,
    at: &Origin,
    placement: &Placement,
    owner: &str,
) -> Option<Project> {
    match Project::from_values_at(&reader.root, Arc::clone(&at.source), placement, values) {
        Ok(project) => {
            reader
                .warnings
                .extend(project.warnings.iter().map(|w| format!("{owner}: {w}")));
            Some(project)
        }
        Err(ProjectError::Invalid(list)) => {
            reader
                .diagnostics
                .extend(list.into_iter().map(|d| Diagnostic {
                    message: format!("{owner}: {}", d.message),
                    ..d
                }));
            None
        }
        Err(other) => {
            reader.error(at, format!("{owner}: {other}"));
            None
        }
    }
}

/// `from_declaration:`: a crew project folder (either layout) inside the flow's folder.
fn crew_folder(reader: &mut Reader, relative: &str, at: &Origin, owner: &str) -> Option<Project> {
    let mut path = reader.root.join(relative);
    if path.is_file() {
        path = path.parent().map(Path::to_path_buf).unwrap_or_default();
    }
    let inside = match (path.canonicalize(), reader.root.canonicalize()) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        // A missing folder is reported by the load below, unless its path already leaves the
        // flow's folder.
        _ => {
            let written = Path::new(relative);
            !written.is_absolute() && !written.components().any(|c| c == Component::ParentDir)
        }
    };
    if !inside {
        reader.error(at, format!("{owner}: crew '{relative}' is outside the flow's folder; keep crews beside flow.yaml"));
        return None;
    }
    match Project::load(&path) {
        Ok(project) => Some(project),
        Err(error) => {
            let message = match &error {
                ProjectError::Invalid(list) => list
                    .iter()
                    .map(|d| format!("{relative}/{d}"))
                    .collect::<Vec<_>>()
                    .join("; "),
                other => other.to_string(),
            };
            reader.error(
                at,
                format!("{owner}: crew '{relative}' cannot be loaded: {message}"),
            );
            None
        }
    }
}

fn read_agent(
    reader: &mut Reader,
    action: &Map<String, Value>,
    at: &Origin,
    owner: &str,
) -> Option<Action> {
    reader.unknown_keys(
        action,
        at,
        &["call", "with"],
        &format!("the agent action of {owner}"),
    );
    let with_at = at.child("with");
    let Some(Value::Object(with)) = action.get("with") else {
        reader.error(
            at,
            format!("{owner}: `call: agent` needs `with:` (role, goal, backstory, input)"),
        );
        return None;
    };
    let mut fields = with.clone();
    let input = match fields.remove("input") {
        Some(Value::String(input)) => template(
            reader,
            &Value::String(input),
            &with_at.child("input"),
            owner,
        ),
        _ => {
            reader.error(
                &with_at,
                format!("{owner}: the agent needs `input:` (text, may use ${{state.x}})"),
            );
            None
        }
    };
    if fields
        .remove("response_format")
        .is_some_and(|v| !v.is_null())
    {
        reader.error(&with_at.child("response_format"), format!("{owner}: `response_format` names a Python model, which cannot be imported; ask for JSON in the input instead"));
    }
    let fields = agent_settings(reader, fields, &with_at, owner);
    let key = "agent".to_string();
    let mut agents = Map::new();
    agents.insert(key.clone(), Value::Object(fields));
    let values = ProjectValues {
        agents,
        tasks: Vec::new(),
        crew: None,
    };
    let project = from_values(
        reader,
        values,
        &with_at,
        &Placement::InlineAgent(with_at.path.clone()),
        owner,
    )?;
    Some(Action::Agent {
        project: Box::new(project),
        key,
        input: input?,
    })
}
