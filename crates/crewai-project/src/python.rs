//! A classic project's Python wiring laid over its YAML: what `crew.py` declares (read by
//! crewai-pysource) decides which agents and tasks make the crew and adds their wiring, and
//! `main.py`'s literal inputs become the crew's default inputs. `config/crew.yaml` is applied
//! after this, so it still wins.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_pysource::{ArgValue, CrewPy, MainPy, MethodDef, PyDiagnostic, Severity, ToolUse};
use serde_json::{Map, Value, json};

use crate::error::{Diagnostic, did_you_mean};
use crate::load::{Entry, EntryKind, Loader};
use crate::registry::ToolRegistry;
use crate::source::{DocPath, Seg, SourceFile};
use crate::spec::{AgentSpec, CrewSpec, Fields, Origin, TaskSpec};

/// A tool of the project's Python (or a crewai-tools class crewai-rs does not provide): the
/// `tools:` entry that uses it names it by `key`, which the caller registers once the Python
/// worker reports the tool.
#[derive(Debug, Clone)]
pub struct PythonToolUse {
    /// The tool name the agent's or task's `ToolRef` carries (`python:MarketDataTool`).
    pub key: String,
    /// The module's file when it is part of the project; `None` for an installed package.
    pub module_file: Option<PathBuf>,
    /// The dotted module (`crewai_tools`, `<pkg>.tools.custom_tool`).
    pub module: String,
    /// The class to instantiate with `kwargs`, or the tool object itself (`is_function`).
    pub attr: String,
    pub kwargs: Map<String, Value>,
    /// `attr` is a `@tool` function or a module-level tool instance, not a class.
    pub is_function: bool,
    /// Where crew.py names it.
    pub origin: Origin,
}

/// The Python files read beside a project's `config/` folder.
pub(crate) struct PythonWiring {
    pub crew: CrewPy,
    pub main: Option<MainPy>,
}

/// Spec fields whose values are objects rather than plain values (code, knowledge sources,
/// memory and the like): a Python object there is passed on as `{python: "<reference>"}`, so
/// the check or the code resolver that owns the field refuses it, or resolves it, in its own
/// words. Any other field given a Python object is reported here.
const OBJECT_FIELDS: &[&str] = &[
    "guardrail",
    "guardrails",
    "step_callback",
    "callback",
    "callbacks",
    "task_callback",
    "cache_handler",
    "knowledge_sources",
    "knowledge_storage",
    "knowledge_config",
    "embedder",
    "memory",
    "apps",
    "mcps",
    "skills",
    "a2a",
    "checkpoint",
    "planning_config",
    "security_config",
    "executor_class",
    "converter_cls",
    "condition",
    "input_files",
    "prompt_file",
    "before_kickoff_callbacks",
    "after_kickoff_callbacks",
];

/// Reads `crew.py` (and `main.py`) of the package folder holding `config_dir`, if it has one.
pub(crate) fn read_beside(config_dir: &Path) -> Result<Option<PythonWiring>, Diagnostic> {
    let Some(package_dir) = config_dir.parent() else {
        return Ok(None);
    };
    let crew_py = package_dir.join("crew.py");
    if !crew_py.is_file() {
        return Ok(None);
    }
    let source_root = package_dir.parent().unwrap_or(package_dir);
    let crew = crewai_pysource::read_crew_py(&crew_py, source_root).map_err(pysource_error)?;
    let main_py = package_dir.join("main.py");
    let main = match main_py.is_file() {
        true => Some(crewai_pysource::read_main_py(&main_py).map_err(pysource_error)?),
        false => None,
    };
    Ok(Some(PythonWiring { crew, main }))
}

fn pysource_error(error: crewai_pysource::PySourceError) -> Diagnostic {
    Diagnostic::in_file("crew.py", crewai_llm::error_chain(&error))
}

/// A path relative to the project, as messages show it.
fn display(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn to_diagnostic(d: &PyDiagnostic, root: &Path) -> Diagnostic {
    Diagnostic {
        file: display(&d.path, root),
        line: Some(d.line),
        message: d.message.clone(),
        hint: d.hint.clone(),
    }
}

/// What the overlay produced beside the specs it changed.
pub(crate) struct Applied {
    pub python_tools: Vec<PythonToolUse>,
    pub warnings: Vec<Diagnostic>,
    /// crew.py and main.py, for messages that name them.
    pub sources: Vec<Arc<SourceFile>>,
}

/// Lays `wiring` over the YAML entries: the crew's agents and tasks become crew.py's methods
/// (each taking its fields from the YAML entry its `config=` reads), their keyword arguments
/// are set as fields, and the `Crew(...)` arguments set the crew's.
pub(crate) fn apply(
    loader: &mut Loader,
    root: &Path,
    wiring: &PythonWiring,
    agents: &mut Vec<Entry<AgentSpec>>,
    tasks: &mut Vec<Entry<TaskSpec>>,
    crew: &mut CrewSpec,
    registry: &ToolRegistry,
) -> Applied {
    let crew_py = &wiring.crew;
    let mut applied = Applied {
        python_tools: Vec::new(),
        warnings: Vec::new(),
        sources: Vec::new(),
    };
    for d in &crew_py.diagnostics {
        match d.severity {
            Severity::Error => loader.diagnostics.push(to_diagnostic(d, root)),
            Severity::Warning => applied.warnings.push(to_diagnostic(d, root)),
        }
    }
    let mut source = SourceFile::python(&crew_py.path, root, Vec::new());
    let mut overlay = Overlay {
        loader,
        warnings: Vec::new(),
        registry,
        python_tools: Vec::new(),
    };
    // Lines first: every origin made below shares the one file.
    let methods: Vec<(&str, &MethodDef)> = crew_py
        .agents
        .iter()
        .chain(crew_py.manager_agent.iter())
        .map(|m| ("agents", m))
        .chain(crew_py.tasks.iter().map(|m| ("tasks", m)))
        .chain(crew_py.crew.iter().map(|m| ("crew", m)))
        .collect();
    for (list, method) in &methods {
        let base = method_path(list, &method.name);
        source.record_line(base.clone(), method.line);
        for arg in &method.args {
            let mut path = base.clone();
            path.push(Seg::Key(arg.name.clone()));
            source.record_line(path.clone(), arg.line);
            let item_lines: Vec<usize> = match &arg.value {
                ArgValue::Tools(tools) => tools.iter().map(|tool| tool.line).collect(),
                ArgValue::Mcps(servers) => servers.iter().map(|server| server.line).collect(),
                _ => Vec::new(),
            };
            for (i, line) in item_lines.into_iter().enumerate() {
                let mut at = path.clone();
                at.push(Seg::Index(i));
                source.record_line(at, line);
            }
        }
    }
    for (i, hook) in crew_py.before_kickoff.iter().enumerate() {
        source.record_line(kickoff_path("before_kickoff_callbacks", i), hook.line);
    }
    for (i, hook) in crew_py.after_kickoff.iter().enumerate() {
        source.record_line(kickoff_path("after_kickoff_callbacks", i), hook.line);
    }
    let source = Arc::new(source);

    let agent_methods: Vec<&MethodDef> = crew_py
        .agents
        .iter()
        .chain(crew_py.manager_agent.iter())
        .collect();
    let new_agents = overlay.entries(&source, "agents", &agent_methods, std::mem::take(agents));
    let task_methods: Vec<&MethodDef> = crew_py.tasks.iter().collect();
    let mut new_tasks = overlay.entries(&source, "tasks", &task_methods, std::mem::take(tasks));
    *agents = crewai_order(new_agents, &new_tasks);

    if let Some(method) = &crew_py.crew {
        let base = Origin::new(&source, method_path("crew", &method.name));
        for arg in &method.args {
            match (arg.name.as_str(), &arg.value) {
                ("agents", ArgValue::Json(Value::Array(names))) => {
                    overlay.keep_listed(agents, names, &base.child("agents"), "agent")
                }
                ("tasks", ArgValue::Json(Value::Array(names))) => {
                    overlay.keep_listed(&mut new_tasks, names, &base.child("tasks"), "task")
                }
                _ => overlay.set(crew, "crew", &method.name, arg, &base),
            }
        }
    }
    *tasks = new_tasks;
    let kickoff_hooks = [
        ("before_kickoff_callbacks", &crew_py.before_kickoff),
        ("after_kickoff_callbacks", &crew_py.after_kickoff),
    ];
    for (field, hooks) in kickoff_hooks {
        if hooks.is_empty() {
            continue;
        }
        let refs: Vec<Value> = hooks
            .iter()
            .map(|h| json!({"python": format!("{}.{}.{}", crew_py.module, crew_py.class_name, h.value)}))
            .collect();
        let origin = Origin::new(&source, kickoff_path(field, 0));
        if let Err(problem) = crew.set_field(field, Value::Array(refs), origin.clone()) {
            overlay.loader.diagnostics.push(origin.diagnostic(problem));
        }
    }
    applied.python_tools = overlay.python_tools;
    applied.warnings.extend(overlay.warnings);
    applied.sources.push(source);
    if let Some(main) = &wiring.main {
        main_inputs(overlay.loader, root, main, crew, &mut applied);
    }
    applied
}

fn method_path(list: &str, method: &str) -> DocPath {
    vec![Seg::Key(list.to_string()), Seg::Key(method.to_string())]
}

fn kickoff_path(field: &str, index: usize) -> DocPath {
    vec![
        Seg::Key("crew".into()),
        Seg::Key(field.into()),
        Seg::Index(index),
    ]
}

/// CrewAI's `self.agents` order: each task's agent in task order, then the other agents in
/// method order.
fn crewai_order(agents: Vec<Entry<AgentSpec>>, tasks: &[Entry<TaskSpec>]) -> Vec<Entry<AgentSpec>> {
    let mut ordered: Vec<Entry<AgentSpec>> = Vec::new();
    let mut rest = agents;
    for task in tasks {
        if let Some(agent) = &task.spec.agent
            && let Some(i) = rest.iter().position(|a| a.key == *agent)
        {
            ordered.push(rest.remove(i));
        }
    }
    ordered.extend(rest);
    ordered
}

/// `main.py`'s `inputs = {...}` as the crew's default inputs; computed entries are named.
fn main_inputs(
    loader: &mut Loader,
    root: &Path,
    main: &MainPy,
    crew: &mut CrewSpec,
    applied: &mut Applied,
) {
    let Some(inputs) = main.run_inputs() else {
        return;
    };
    let mut source = SourceFile::python(
        &main.path,
        root,
        vec![(vec![Seg::Key("inputs".into())], inputs.line)],
    );
    for (name, line) in &inputs.non_literal {
        source.record_line(
            vec![Seg::Key("inputs".into()), Seg::Key(name.clone())],
            *line,
        );
    }
    let source = Arc::new(source);
    let origin = Origin::new(&source, vec![Seg::Key("inputs".into())]);
    if !inputs.values.is_empty()
        && let Err(problem) = crew.set_field(
            "inputs",
            Value::Object(inputs.values.clone()),
            origin.clone(),
        )
    {
        loader.diagnostics.push(origin.diagnostic(problem));
    }
    for (name, _) in &inputs.non_literal {
        applied.warnings.push(
            origin
                .child(name.as_str())
                .diagnostic(format!(
                    "input '{name}' is computed in {}() when CrewAI runs it, so it has no default here",
                    inputs.function
                ))
                .with_hint(Some(format!("pass `--inputs {name}=...`"))),
        );
    }
    applied.sources.push(source);
}

struct Overlay<'a> {
    loader: &'a mut Loader,
    warnings: Vec<Diagnostic>,
    registry: &'a ToolRegistry,
    python_tools: Vec<PythonToolUse>,
}

impl Overlay<'_> {
    /// The entries of the crew: one per method, with the fields of the YAML entry its
    /// `config=` reads; YAML entries no method reads are left out, with a warning.
    fn entries<S: Fields + EntryKind + Default>(
        &mut self,
        source: &Arc<SourceFile>,
        list: &str,
        methods: &[&MethodDef],
        yaml: Vec<Entry<S>>,
    ) -> Vec<Entry<S>> {
        let kind = S::KIND;
        let mut unused = yaml;
        let mut entries = Vec::new();
        for method in methods {
            let at = Origin::new(source, method_path(list, &method.name));
            let mut entry = match &method.config_key {
                Some(key) => match unused.iter().position(|e| e.key == key.value) {
                    Some(i) => unused.remove(i),
                    None => {
                        let hint = did_you_mean(&key.value, unused.iter().map(|e| e.key.as_str()));
                        self.loader.diagnostics.push(
                            at.diagnostic(format!(
                                "@{kind} method '{}' reads {list}_config['{}'], which {list}.yaml does not define",
                                method.name, key.value
                            ))
                            .with_hint(hint),
                        );
                        continue;
                    }
                },
                None => Entry {
                    key: method.name.clone(),
                    spec: S::default(),
                    origin: at.clone(),
                },
            };
            entry.key = method.name.clone();
            for arg in &method.args {
                self.set(&mut entry.spec, kind, &method.name, arg, &at);
            }
            entries.push(entry);
        }
        for left in unused {
            let warning = left
                .origin
                .diagnostic(format!(
                    "{kind} '{}' has no @{kind} method in crew.py, so it is not part of the crew (as in CrewAI)",
                    left.key
                ))
                .with_hint(Some(format!("add an @{kind} method for it to crew.py, or remove it")));
            self.warnings.push(warning);
        }
        entries
    }

    /// `Crew(agents=[...])` / `tasks=[...]`: only the listed entries, in the listed order.
    fn keep_listed<S>(
        &mut self,
        entries: &mut Vec<Entry<S>>,
        names: &[Value],
        origin: &Origin,
        kind: &str,
    ) {
        let mut kept = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let Some(name) = name.as_str() else { continue };
            match entries.iter().position(|e| e.key == name) {
                Some(found) => kept.push(entries.remove(found)),
                None => self
                    .loader
                    .diagnostics
                    .push(origin.child(i).diagnostic(format!(
                        "the crew lists {kind} '{name}', which has no @{kind} method"
                    ))),
            }
        }
        *entries = kept;
    }

    /// One keyword argument set as the field of the same name.
    fn set<S: Fields>(
        &mut self,
        spec: &mut S,
        kind: &str,
        method: &str,
        arg: &crewai_pysource::Arg,
        base: &Origin,
    ) {
        let owner = format!("{kind} '{method}'");
        let value = match &arg.value {
            ArgValue::Json(value) => value.clone(),
            ArgValue::Schema(schema) => schema.schema.clone(),
            ArgValue::Mcps(servers) => {
                Value::Array(servers.iter().map(|server| server.value.clone()).collect())
            }
            ArgValue::Tools(tools) => {
                let origin = base.child(arg.name.as_str());
                Value::Array(
                    tools
                        .iter()
                        .map(|t| self.tool_ref(t, &origin, tools))
                        .collect(),
                )
            }
            ArgValue::Python(reference) => {
                if !OBJECT_FIELDS.contains(&arg.name.as_str()) {
                    let where_to = match kind {
                        "crew" => format!("`{}:` in config/crew.yaml", arg.name),
                        _ => format!("config/crew.yaml under `{kind}s: {method}: {}:`", arg.name),
                    };
                    self.loader.diagnostics.push(
                        base.child(arg.name.as_str())
                            .diagnostic(format!(
                                "{owner} argument `{}=` is Python this reader cannot follow (`{reference}`)",
                                arg.name
                            ))
                            .with_hint(Some(format!(
                                "write the value in {where_to} (crew.yaml overrides crew.py)"
                            ))),
                    );
                    return;
                }
                json!({"python": reference})
            }
        };
        let mut fields = Map::new();
        fields.insert(arg.name.clone(), value);
        self.loader.apply(spec, &fields, base, &owner, &[]);
    }

    /// A crewai-rs tool when crewai-rs has it, else a Python tool under a key of its own.
    /// `CodeInterpreterTool` is always crewai-rs's (the runner registers it, so the built-ins
    /// here do not list it): crewai_tools' own would run the model's code through Docker in
    /// the Python worker, and a missing sandbox is a clear error when the crew is built.
    fn tool_ref(&mut self, tool: &ToolUse, origin: &Origin, all: &[ToolUse]) -> Value {
        let from_crewai_tools =
            tool.module == "crewai_tools" || tool.module.starts_with("crewai_tools.");
        let provided_here =
            self.registry.contains(&tool.attr) || tool.attr == crate::code_execution::CODE_TOOL;
        if from_crewai_tools
            && !tool.is_function
            && provided_here
            && !tool.kwargs.contains_key("name")
        {
            let mut entry = tool.kwargs.clone();
            entry.insert("name".into(), Value::String(tool.attr.clone()));
            return Value::Object(entry);
        }
        let existing = self.python_tools.iter().find(|p| {
            p.module == tool.module
                && p.attr == tool.attr
                && p.kwargs == tool.kwargs
                && p.is_function == tool.is_function
        });
        let key = match existing {
            Some(found) => found.key.clone(),
            None => {
                let same_attr = self
                    .python_tools
                    .iter()
                    .filter(|p| p.attr == tool.attr)
                    .count();
                let key = match same_attr {
                    0 => format!("python:{}", tool.attr),
                    n => format!("python:{}_{}", tool.attr, n + 1),
                };
                let index = all.iter().position(|t| t == tool).unwrap_or(0);
                self.python_tools.push(PythonToolUse {
                    key: key.clone(),
                    module_file: tool.module_file.clone(),
                    module: tool.module.clone(),
                    attr: tool.attr.clone(),
                    kwargs: tool.kwargs.clone(),
                    is_function: tool.is_function,
                    origin: origin.child(index),
                });
                key
            }
        };
        json!({"name": key})
    }
}
