//! Projects given as values instead of files: agents, tasks and a crew that a caller parsed
//! itself (a test case, a request body) or made up, checked and built exactly as project files
//! are, so every caller shares one mapping of CrewAI's fields onto the engine's builders.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::load::{AgentEntry, Layout, Loaded, Loader, ProjectFiles};
use crate::source::{DocPath, SourceFile};
use crate::spec::{AgentSpec, CrewSpec, Origin, describe};

/// A project as one document: `agents` maps each agent's key to its fields (in crew order),
/// `tasks` lists the tasks' fields in run order (each keyed by its `name`, else `task_<n>`), and
/// `crew` holds the crew's fields. Field names, aliases and meanings are those of
/// `config/agents.yaml`, `config/tasks.yaml` and `config/crew.yaml`; a `null` field is unset.
///
/// ```
/// use crewai_project::{Project, ProjectValues, SourceFile};
/// use serde_json::json;
/// let values = ProjectValues {
///     agents: json!({"writer": {"role": "Writer", "goal": "Write", "backstory": "Writes."}})
///         .as_object().cloned().unwrap(),
///     tasks: vec![json!({"name": "draft", "description": "Draft a note", "expected_output": "A note", "agent": "writer"})],
///     crew: None,
/// };
/// let project = Project::from_values(".", SourceFile::without_text("request"), values.clone())?;
/// assert_eq!(project.tasks[0].key, "draft");
///
/// let mut wrong = values;
/// wrong.tasks[0]["agent"] = json!("writter");
/// let error = Project::from_values(".", SourceFile::without_text("request"), wrong).unwrap_err();
/// assert!(error.to_string().contains("did you mean 'writer'?"), "{error}");
/// # Ok::<(), crewai_project::ProjectError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProjectValues {
    pub agents: Map<String, Value>,
    pub tasks: Vec<Value>,
    pub crew: Option<Value>,
}

/// Reads `values` as the document `source` names: an agent's fields sit at `agents.<key>`, a
/// task's at `tasks[<i>]`, the crew's at `crew`, which is where messages find their lines when
/// `source` holds the document's text.
pub(crate) fn load_values(root: &Path, source: SourceFile, values: ProjectValues) -> Loaded {
    load_values_at(root, Arc::new(source), &Placement::Document, values)
}

/// Where a project given as values sits in the document its messages name.
#[derive(Debug, Clone)]
pub(crate) enum Placement {
    /// The values are the whole document: `agents.<key>`, `tasks[<i>]`, `crew`.
    Document,
    /// A crew written inline at this path: `<path>.agents.<key>`, `<path>.tasks[<i>]`, and the
    /// crew's own fields beside them (a flow's `call: crew` `with:`).
    InlineCrew(DocPath),
    /// One agent whose fields sit at this path (a flow's `call: agent` `with:`).
    InlineAgent(DocPath),
}

/// [`load_values`] for values placed inside a larger document (see [`Placement`]), so messages
/// find their lines there.
pub(crate) fn load_values_at(
    root: &Path,
    source: Arc<SourceFile>,
    placement: &Placement,
    values: ProjectValues,
) -> Loaded {
    let mut loader = Loader {
        diagnostics: Vec::new(),
    };
    let (base, crew_origin) = match placement {
        Placement::Document => {
            let base = Origin::new(&source, Vec::new());
            let crew = base.child("crew");
            (base, crew)
        }
        Placement::InlineCrew(path) | Placement::InlineAgent(path) => {
            let base = Origin::new(&source, path.clone());
            (base.clone(), base)
        }
    };
    let agent_origin = |key: &str| match placement {
        Placement::InlineAgent(_) => base.clone(),
        _ => base.child("agents").child(key),
    };

    let mut agents = Vec::new();
    for (key, fields) in &values.agents {
        let origin = agent_origin(key);
        match fields {
            Value::Object(fields) => agents.push(loader.agent_entry(key.clone(), fields, origin)),
            other => {
                loader.diagnostics.push(origin.diagnostic(format!(
                    "agent '{key}' must be a mapping of its fields, not {}",
                    describe(other)
                )));
                agents.push(AgentEntry {
                    key: key.clone(),
                    spec: AgentSpec::default(),
                    origin,
                });
            }
        }
    }

    let tasks = loader.listed_tasks(&values.tasks, &base, "a mapping");

    let mut crew = CrewSpec::default();
    match &values.crew {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            loader.apply(&mut crew, fields, &crew_origin, "crew", &[]);
        }
        Some(other) => loader.diagnostics.push(crew_origin.diagnostic(format!(
            "the crew is a mapping of its fields (process, manager_llm, ...), not {}",
            describe(other)
        ))),
    }

    Loaded {
        layout: Layout::Values,
        config_dir: root.to_path_buf(),
        agents,
        tasks,
        crew,
        files: ProjectFiles {
            agents: Some(Arc::clone(&source)),
            tasks: Some(Arc::clone(&source)),
            crew: Some(source),
            python: Vec::new(),
        },
        diagnostics: loader.diagnostics,
        warnings: Vec::new(),
        python_tools: Vec::new(),
    }
}
