//! Reading a project folder: CrewAI's classic `config/*.yaml` layout or its JSON layout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Diagnostic, ProjectError, did_you_mean};
use crate::python::{PythonToolUse, PythonWiring};
use crate::source::{Format, Seg, SourceFile};
use crate::spec::{AgentSpec, CrewSpec, Fields, Origin, TaskSpec, describe};

/// Which of CrewAI's project layouts a folder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `config/agents.yaml`, `config/tasks.yaml`, optional `config/crew.yaml`.
    Classic,
    /// `crew.jsonc` with `agents/<name>.jsonc`.
    Json,
    /// Values a caller gave ([`crate::Project::from_values`]), not read from the folder.
    Values,
}

/// An agent or a task of the project under its key, with the fields its files set.
#[derive(Debug, Clone)]
pub struct Entry<S> {
    pub key: String,
    pub spec: S,
    /// Where the entry starts.
    pub origin: Origin,
}

/// An agent of the project, under the key it has in `agents.yaml` (or its file name).
pub type AgentEntry = Entry<AgentSpec>;

/// A task of the project, in file order, under its key in `tasks.yaml` (or its `name`).
pub type TaskEntry = Entry<TaskSpec>;

/// What the files call an entry of a spec type: `agent` or `task`.
pub(crate) trait EntryKind {
    const KIND: &'static str;
}

impl EntryKind for AgentSpec {
    const KIND: &'static str = "agent";
}

impl EntryKind for TaskSpec {
    const KIND: &'static str = "task";
}

impl TaskEntry {
    /// The task's name: its `name:` field, else its key (as `@CrewBase` names it after the method).
    pub fn name(&self) -> &str {
        self.spec.name.as_deref().unwrap_or(&self.key)
    }
}

/// The files of a loaded project, for messages that name a whole file.
#[derive(Debug, Clone)]
pub struct ProjectFiles {
    pub agents: Option<Arc<SourceFile>>,
    pub tasks: Option<Arc<SourceFile>>,
    pub crew: Option<Arc<SourceFile>>,
    /// `crew.py` and `main.py` when the project's wiring was read from them.
    pub python: Vec<Arc<SourceFile>>,
}

/// Reads and merges the project's files; the result still needs [`crate::Project`]'s checks.
pub(crate) struct Loaded {
    pub layout: Layout,
    pub config_dir: PathBuf,
    pub agents: Vec<AgentEntry>,
    pub tasks: Vec<TaskEntry>,
    pub crew: CrewSpec,
    pub files: ProjectFiles,
    pub diagnostics: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// The Python tools crew.py names (see [`PythonToolUse`]).
    pub python_tools: Vec<PythonToolUse>,
}

/// Finds the folder holding `agents.yaml`: `config/`, or `src/<name>/config/` as
/// `crewai create crew --classic` lays it out.
fn classic_config_dir(root: &Path) -> Option<PathBuf> {
    let direct = root.join("config");
    if yaml_file(&direct, "agents").is_some() {
        return Some(direct);
    }
    let mut nested: Vec<PathBuf> = std::fs::read_dir(root.join("src"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("config")))
        .filter(|dir| yaml_file(dir, "agents").is_some())
        .collect();
    nested.sort();
    nested.into_iter().next()
}

fn yaml_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["yaml", "yml"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
}

pub(crate) fn load(root: &Path) -> Result<Loaded, ProjectError> {
    if let Some(config_dir) = classic_config_dir(root) {
        return load_classic(root, config_dir);
    }
    let crew_json = ["crew.jsonc", "crew.json"]
        .iter()
        .map(|n| root.join(n))
        .find(|p| p.is_file());
    if let Some(crew_json) = crew_json {
        return load_json(root, &crew_json);
    }
    Err(ProjectError::NotAProject(root.to_path_buf()))
}

pub(crate) struct Loader {
    pub diagnostics: Vec<Diagnostic>,
}

impl Loader {
    /// The agent `key`, its `fields` read onto its spec.
    pub(crate) fn agent_entry(
        &mut self,
        key: String,
        fields: &Map<String, Value>,
        origin: Origin,
    ) -> AgentEntry {
        let mut spec = AgentSpec::default();
        self.apply(&mut spec, fields, &origin, &format!("agent '{key}'"), &[]);
        AgentEntry { key, spec, origin }
    }

    /// The tasks of a task list (at `tasks` below `base`), each keyed by its `name`, else
    /// `task_<n>`; an item that is not `kind` (a mapping of fields) is reported.
    pub(crate) fn listed_tasks(
        &mut self,
        items: &[Value],
        base: &Origin,
        kind: &str,
    ) -> Vec<TaskEntry> {
        let mut tasks = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let origin = base.child("tasks").child(i);
            let Value::Object(fields) = item else {
                self.diagnostics.push(origin.diagnostic(format!(
                    "each task is {kind} with name, description, expected_output, agent; found {}",
                    describe(item)
                )));
                continue;
            };
            let key = match fields.get("name") {
                Some(Value::String(name)) => name.clone(),
                _ => format!("task_{}", i + 1),
            };
            tasks.push(self.task_entry(key, fields, origin));
        }
        tasks
    }

    /// The task `key`, its `fields` read onto its spec and its `type` checked.
    pub(crate) fn task_entry(
        &mut self,
        key: String,
        fields: &Map<String, Value>,
        origin: Origin,
    ) -> TaskEntry {
        let mut spec = TaskSpec::default();
        self.apply(
            &mut spec,
            fields,
            &origin,
            &format!("task '{key}'"),
            &["type"],
        );
        check_task_type(self, fields, &origin, &key);
        TaskEntry { key, spec, origin }
    }
}

impl Loader {
    fn parse(&mut self, source: &SourceFile) -> Value {
        source.parse().unwrap_or_else(|d| {
            self.diagnostics.push(d);
            Value::Null
        })
    }

    /// Sets each field of `map` on `spec`, reporting unknown keys and wrong types at their line.
    /// Keys in `handled` belong to the caller.
    pub(crate) fn apply<S: Fields>(
        &mut self,
        spec: &mut S,
        map: &Map<String, Value>,
        base: &Origin,
        owner: &str,
        handled: &[&str],
    ) {
        for (key, value) in map {
            if handled.contains(&key.as_str()) {
                continue;
            }
            let origin = base.child(key.as_str());
            let Some(field) = S::canonical_field(key) else {
                let hint = did_you_mean(
                    key,
                    S::fields().iter().copied().chain(handled.iter().copied()),
                )
                .or_else(|| Some(format!("known fields: {}", S::fields().join(", "))));
                self.diagnostics.push(
                    origin
                        .diagnostic(format!("{owner} has an unknown field '{key}'"))
                        .with_hint(hint),
                );
                continue;
            };
            let value = match value {
                // `context:` left empty means "no context", as `[]` does.
                Value::Null if field == "context" => Value::Array(Vec::new()),
                Value::Null => continue,
                other => other.clone(),
            };
            if let Err(problem) = spec.set_field(field, value, origin.clone()) {
                self.diagnostics
                    .push(origin.diagnostic(format!("{owner} field '{key}': {problem}")));
            }
        }
    }

    /// The entries of a top-level mapping of names to field mappings (`agents.yaml`, `tasks.yaml`).
    fn entries<'v>(
        &mut self,
        source: &Arc<SourceFile>,
        value: &'v Value,
        kind: &str,
    ) -> Vec<(&'v String, &'v Map<String, Value>)> {
        match value {
            Value::Object(map) => map
                .iter()
                .filter_map(|(key, fields)| match fields {
                    Value::Object(fields) => Some((key, fields)),
                    other => {
                        let origin = Origin::new(source, vec![Seg::Key(key.clone())]);
                        self.diagnostics.push(origin.diagnostic(format!(
                            "{kind} '{key}' must be a mapping of its fields, not {}",
                            describe(other)
                        )));
                        None
                    }
                })
                .collect(),
            Value::Null => Vec::new(),
            other => {
                self.diagnostics.push(Diagnostic::new(
                    source,
                    Some(1),
                    format!(
                        "expected a mapping of {kind} names to their fields, found {}",
                        describe(other)
                    ),
                ));
                Vec::new()
            }
        }
    }
}

fn load_classic(root: &Path, config_dir: PathBuf) -> Result<Loaded, ProjectError> {
    let python = crate::python::read_beside(&config_dir).transpose();
    // crew.py may name other YAML files than the ones beside it (`agents_config = ...`).
    let configured = |pick: fn(&PythonWiring) -> &String| -> Option<PathBuf> {
        let wiring = python.as_ref()?.as_ref().ok()?;
        let package_dir = config_dir.parent()?;
        Some(package_dir.join(pick(wiring))).filter(|p| p.is_file())
    };
    let agents_path = configured(|w| &w.crew.agents_config.value)
        .or_else(|| yaml_file(&config_dir, "agents"))
        .ok_or_else(|| ProjectError::NotAProject(root.to_path_buf()))?;
    let agents_src = SourceFile::read(&agents_path, root, Format::Yaml)?;
    let tasks_src = configured(|w| &w.crew.tasks_config.value)
        .or_else(|| yaml_file(&config_dir, "tasks"))
        .map(|path| SourceFile::read(&path, root, Format::Yaml))
        .transpose()?;
    let crew_src = yaml_file(&config_dir, "crew")
        .map(|path| SourceFile::read(&path, root, Format::Yaml))
        .transpose()?;
    let mut loaded = load_classic_sources(root, config_dir, agents_src, tasks_src, None);
    match python {
        None => {}
        Some(Err(diagnostic)) => loaded.diagnostics.push(diagnostic),
        Some(Ok(wiring)) => {
            let mut loader = Loader {
                diagnostics: std::mem::take(&mut loaded.diagnostics),
            };
            let registry = crate::registry::ToolRegistry::with_builtins(root);
            let applied = crate::python::apply(
                &mut loader,
                root,
                &wiring,
                &mut loaded.agents,
                &mut loaded.tasks,
                &mut loaded.crew,
                &registry,
            );
            loaded.diagnostics = loader.diagnostics;
            loaded.warnings.extend(applied.warnings);
            loaded.python_tools = applied.python_tools;
            loaded.files.python = applied.sources;
        }
    }
    if let Some(crew_src) = crew_src {
        apply_crew_file(&mut loaded, crew_src);
    }
    Ok(loaded)
}

/// Merges the classic layout's files, already read: `agents.yaml`, `tasks.yaml` (a missing one
/// is reported) and the optional `crew.yaml`.
pub(crate) fn load_classic_sources(
    root: &Path,
    config_dir: PathBuf,
    agents_src: SourceFile,
    tasks_src: Option<SourceFile>,
    crew_src: Option<SourceFile>,
) -> Loaded {
    let mut loader = Loader {
        diagnostics: Vec::new(),
    };
    let agents_src = Arc::new(agents_src);
    let agents_value = loader.parse(&agents_src);
    let mut agents = Vec::new();
    for (key, fields) in loader.entries(&agents_src, &agents_value, "agent") {
        let origin = Origin::new(&agents_src, vec![Seg::Key(key.clone())]);
        agents.push(loader.agent_entry(key.clone(), fields, origin));
    }
    if agents.is_empty() && agents_value.is_null() {
        loader.diagnostics.push(Diagnostic::new(
            &agents_src,
            None,
            "defines no agents; add at least one (role, goal, backstory)",
        ));
    }

    let tasks_src = match tasks_src {
        Some(source) => Some(Arc::new(source)),
        None => {
            let display = config_dir.join("tasks.yaml");
            let display = display
                .strip_prefix(root)
                .unwrap_or(&display)
                .to_string_lossy()
                .replace('\\', "/");
            loader.diagnostics.push(Diagnostic::in_file(
                display,
                "is missing; a crew needs at least one task",
            ));
            None
        }
    };
    let mut tasks = Vec::new();
    if let Some(tasks_src) = &tasks_src {
        let tasks_value = loader.parse(tasks_src);
        for (key, fields) in loader.entries(tasks_src, &tasks_value, "task") {
            let origin = Origin::new(tasks_src, vec![Seg::Key(key.clone())]);
            tasks.push(loader.task_entry(key.clone(), fields, origin));
        }
        if tasks.is_empty() && tasks_value.is_null() {
            loader.diagnostics.push(Diagnostic::new(
                tasks_src,
                None,
                "defines no tasks; add at least one (description, expected_output, agent)",
            ));
        }
    }

    let mut loaded = Loaded {
        layout: Layout::Classic,
        config_dir,
        agents,
        tasks,
        crew: CrewSpec::default(),
        files: ProjectFiles {
            agents: Some(agents_src),
            tasks: tasks_src,
            crew: None,
            python: Vec::new(),
        },
        diagnostics: loader.diagnostics,
        warnings: Vec::new(),
        python_tools: Vec::new(),
    };
    if let Some(crew_src) = crew_src {
        apply_crew_file(&mut loaded, crew_src);
    }
    loaded
}

/// `config/crew.yaml`: the crew's fields and the `agents:` / `tasks:` overlays, applied last
/// so that they win over the YAML entries and over crew.py.
fn apply_crew_file(loaded: &mut Loaded, crew_src: SourceFile) {
    let mut loader = Loader {
        diagnostics: std::mem::take(&mut loaded.diagnostics),
    };
    let crew_src = Arc::new(crew_src);
    match loader.parse(&crew_src) {
        Value::Object(map) => {
            let base = Origin::new(&crew_src, Vec::new());
            loader.apply(&mut loaded.crew, &map, &base, "crew", &["agents", "tasks"]);
            apply_overlays(
                &mut loader,
                &map,
                &base,
                &mut loaded.agents,
                &mut loaded.tasks,
            );
        }
        Value::Null => {}
        other => loader.diagnostics.push(Diagnostic::new(
            &crew_src,
            Some(1),
            format!(
                "expected a mapping of crew fields (process, manager_llm, ...), found {}",
                describe(&other)
            ),
        )),
    }
    loaded.files.crew = Some(crew_src);
    loaded.diagnostics = loader.diagnostics;
}

/// `agents:` and `tasks:` in `config/crew.yaml`: fields merged onto the entries of the same
/// name, the overlay winning (what a `crew.py` would have wired).
fn apply_overlays(
    loader: &mut Loader,
    crew: &Map<String, Value>,
    base: &Origin,
    agents: &mut [AgentEntry],
    tasks: &mut [TaskEntry],
) {
    apply_overlay(loader, crew, base, agents);
    apply_overlay(loader, crew, base, tasks);
}

/// The crew file's `agents:` or `tasks:` overlay (by `S::KIND`) merged onto `entries`.
fn apply_overlay<S: Fields + EntryKind>(
    loader: &mut Loader,
    crew: &Map<String, Value>,
    base: &Origin,
    entries: &mut [Entry<S>],
) {
    let kind = S::KIND;
    let list = format!("{kind}s");
    let Some(overlay) = crew.get(&list) else {
        return;
    };
    let origin = base.child(list.as_str());
    for (key, fields) in overlay_entries(loader, overlay, &origin, &list) {
        let at = origin.child(key.as_str());
        match entries.iter_mut().find(|entry| entry.key == *key) {
            Some(entry) => loader.apply(
                &mut entry.spec,
                fields,
                &at,
                &format!("{kind} '{key}'"),
                &[],
            ),
            None => {
                let hint = did_you_mean(key, entries.iter().map(|entry| entry.key.as_str()));
                loader.diagnostics.push(
                    at.diagnostic(format!(
                        "`{list}:` names {kind} '{key}', which {list}.yaml does not define"
                    ))
                    .with_hint(hint),
                );
            }
        }
    }
}

fn overlay_entries<'v>(
    loader: &mut Loader,
    overlay: &'v Value,
    origin: &Origin,
    what: &str,
) -> Vec<(&'v String, &'v Map<String, Value>)> {
    match overlay {
        Value::Object(map) => map
            .iter()
            .filter_map(|(key, fields)| match fields {
                Value::Object(fields) => Some((key, fields)),
                Value::Null => None,
                other => {
                    loader
                        .diagnostics
                        .push(origin.child(key.as_str()).diagnostic(format!(
                            "`{what}:` entry '{key}' must be a mapping of fields to set, not {}",
                            describe(other)
                        )));
                    None
                }
            })
            .collect(),
        Value::Null => Vec::new(),
        other => {
            loader.diagnostics.push(origin.diagnostic(format!(
                "`{what}:` must be a mapping of names to the fields to set on them, not {}",
                describe(other)
            )));
            Vec::new()
        }
    }
}

/// The list `crew.jsonc` holds under `key` (`agents`, `tasks`); a missing list, or another value
/// there, is reported (`what` says what the list holds) and reads as empty.
fn crew_list<'v>(
    loader: &mut Loader,
    map: &'v Map<String, Value>,
    key: &str,
    what: &str,
    crew_src: &SourceFile,
    base: &Origin,
) -> &'v [Value] {
    match map.get(key) {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => {
            let message = format!("has no `{key}` list");
            loader
                .diagnostics
                .push(Diagnostic::new(crew_src, None, message));
            &[]
        }
        Some(other) => {
            let message = format!("`{key}` must be a list of {what}, not {}", describe(other));
            loader.diagnostics.push(base.child(key).diagnostic(message));
            &[]
        }
    }
}

/// `type: ConditionalTask` needs `condition:` (which names code, resolved when the crew is
/// built); `condition:` alone makes a task conditional too.
pub(crate) fn check_task_type(
    loader: &mut Loader,
    fields: &Map<String, Value>,
    origin: &Origin,
    key: &str,
) {
    match fields.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "Task" => {}
        Some(Value::String(kind)) if kind == "ConditionalTask" => {
            if fields.get("condition").is_none_or(Value::is_null) {
                loader.diagnostics.push(
                    origin
                        .child("type")
                        .diagnostic(format!(
                            "task '{key}' is a ConditionalTask but has no `condition`"
                        ))
                        .with_hint(Some(
                            "name its condition with `condition:` (supplied from Rust), or build it with crewai::Task::builder().condition(..)".into(),
                        )),
                )
            }
        }
        Some(other) => loader.diagnostics.push(
            origin
                .child("type")
                .diagnostic(format!(
                    "task '{key}' field 'type': unknown task type {other}"
                ))
                .with_hint(Some("use `Task` or `ConditionalTask`".into())),
        ),
    }
}

fn load_json(root: &Path, crew_path: &Path) -> Result<Loaded, ProjectError> {
    let mut loader = Loader {
        diagnostics: Vec::new(),
    };
    let crew_src = Arc::new(SourceFile::read(crew_path, root, Format::Jsonc)?);
    let crew_value = loader.parse(&crew_src);
    let mut crew = CrewSpec::default();
    let mut agents = Vec::new();
    let mut tasks = Vec::new();
    let base = Origin::new(&crew_src, Vec::new());
    let empty = Map::new();
    let map = match &crew_value {
        Value::Object(map) => map,
        Value::Null => &empty,
        other => {
            loader.diagnostics.push(Diagnostic::new(
                &crew_src,
                Some(1),
                format!("expected a JSON object, found {}", describe(other)),
            ));
            &empty
        }
    };
    loader.apply(&mut crew, map, &base, "crew", &["agents", "tasks"]);

    let agents_dir = root.join("agents");
    let mut agent_names: Vec<(String, Origin)> = Vec::new();
    let names = crew_list(&mut loader, map, "agents", "agent names", &crew_src, &base);
    for (i, name) in names.iter().enumerate() {
        let at = base.child("agents").child(i);
        match name {
            Value::String(name) => agent_names.push((name.clone(), at)),
            other => loader.diagnostics.push(at.diagnostic(format!(
                "`agents` lists agent names (files in agents/), not {}",
                describe(other)
            ))),
        }
    }
    if let Some(Value::String(manager)) = map.get("manager_agent")
        && !agent_names.iter().any(|(n, _)| n == manager)
    {
        agent_names.push((manager.clone(), base.child("manager_agent")));
    }
    let available: Vec<String> = std::fs::read_dir(&agents_dir)
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".jsonc").or_else(|| n.strip_suffix(".json")))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    for (name, listed_at) in agent_names {
        let Some(path) = ["jsonc", "json"]
            .iter()
            .map(|ext| agents_dir.join(format!("{name}.{ext}")))
            .find(|p| p.is_file())
        else {
            let hint = did_you_mean(&name, available.iter().map(String::as_str));
            loader.diagnostics.push(
                listed_at
                    .diagnostic(format!("agent '{name}' has no file agents/{name}.jsonc"))
                    .with_hint(hint),
            );
            continue;
        };
        let src = Arc::new(SourceFile::read(&path, root, Format::Jsonc)?);
        let origin = Origin::new(&src, Vec::new());
        let mut spec = AgentSpec::default();
        match loader.parse(&src) {
            Value::Object(fields) => {
                let owner = format!("agent '{name}'");
                loader.apply(&mut spec, &fields, &origin, &owner, &["settings", "type"]);
                match fields.get("settings") {
                    Some(Value::Object(settings)) => {
                        loader.apply(&mut spec, settings, &origin.child("settings"), &owner, &[])
                    }
                    None | Some(Value::Null) => {}
                    Some(other) => {
                        loader
                            .diagnostics
                            .push(origin.child("settings").diagnostic(format!(
                                "{owner}: `settings` must be an object, not {}",
                                describe(other)
                            )))
                    }
                }
                if let Some(kind) = fields.get("type").filter(|v| !v.is_null()) {
                    loader
                        .diagnostics
                        .push(origin.child("type").diagnostic(format!(
                            "{owner}: custom agent classes ({kind}) are not supported"
                        )));
                }
            }
            Value::Null => {}
            other => loader.diagnostics.push(Diagnostic::new(
                &src,
                Some(1),
                format!("expected a JSON object, found {}", describe(&other)),
            )),
        }
        agents.push(AgentEntry {
            key: name,
            spec,
            origin: Origin::new(&src, vec![Seg::Key("role".into())]),
        });
    }

    let items = crew_list(&mut loader, map, "tasks", "task objects", &crew_src, &base);
    tasks.extend(loader.listed_tasks(items, &base, "an object"));

    Ok(Loaded {
        layout: Layout::Json,
        config_dir: root.to_path_buf(),
        agents,
        tasks,
        crew,
        files: ProjectFiles {
            agents: None,
            tasks: None,
            crew: Some(crew_src),
            python: Vec::new(),
        },
        diagnostics: loader.diagnostics,
        warnings: Vec::new(),
        python_tools: Vec::new(),
    })
}
