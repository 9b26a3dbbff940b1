//! # crewai-project
//!
//! Loads CrewAI projects as CrewAI users write them, checks them, and turns them into crews.
//!
//! Two layouts are read: the classic `config/agents.yaml` + `config/tasks.yaml` (+ an optional
//! `config/crew.yaml` for what CrewAI keeps in `crew.py`, including `agents:`/`tasks:` overlays),
//! and CrewAI's newer JSON layout, `crew.jsonc` + `agents/<name>.jsonc`. Every problem is
//! reported with its file and line, the field, and a suggestion when one is likely:
//!
//! ```text
//! config/tasks.yaml:12: task 'report' names agent 'writter', which is not defined; did you mean 'writer'?
//! ```
//!
//! This crate is the one mapping of CrewAI's agent, task and crew fields onto the engine's
//! builders: adding a field means its spec ([`AgentSpec`], [`TaskSpec`], [`CrewSpec`]), the
//! builder, the engine, nothing else. Callers whose specs are not files (a test case, a request)
//! give them as values ([`Project::from_values`]) and build through the same code. What a
//! caller supplies comes in through [`BuildOptions`]: the tool registry, the model factory, the
//! rate limiters, the event bus and hooks, and a [`CodeResolver`] for the guardrails,
//! conditions and callbacks a spec can only name.
//!
//! ```no_run
//! use crewai_project::{Project, ToolRegistry};
//! let project = Project::load("examples/research-and-report")?;
//! let tools = ToolRegistry::with_builtins(&project.root);
//! let plan = project.plan(&Default::default(), &tools)?;
//! println!("{plan}");
//! # Ok::<(), crewai_project::ProjectError>(())
//! ```

mod a2a;
mod build;
mod check;
mod code_execution;
mod consensus;
mod error;
pub mod flow_v1;
pub mod flow_yaml;
mod knowledge;
mod load;
mod mcp;
mod memory;
mod options;
mod plan;
mod planning;
mod python;
mod registry;
mod resolve;
mod skills;
mod source;
mod spec;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crewai_core::interpolate::{Inputs, placeholders};
use crewai_core::skills::SkillSource;
use crewai_llm::error_chain;
use crewai_tools::ToolHandle;

pub use build::Parts;
pub use check::{OutputKind, OutputSchema, ProjectSkills};
pub use error::{Diagnostic, ProjectError, closest, did_you_mean};
pub use load::{AgentEntry, Entry, Layout, ProjectFiles, TaskEntry};
pub use memory::EmbedderChoice;
pub use options::{BuildOptions, LlmFactory, RateLimitOwner, RateLimiterFactory};
pub use plan::{ContextPlan, Plan, PlannedAgent, PlannedConsensus, PlannedTask};
pub use python::PythonToolUse;
pub use registry::{
    BUILTIN_TOOLS, FactoryError, SearchToolBase, ToolFactory, ToolLookupError, ToolRegistry,
};
pub use resolve::CodeResolver;
pub use source::{DocPath, Format, Seg, SourceFile, strip_jsonc};
pub use spec::{
    AgentSpec, CrewSpec, GuardrailSpec, LogFileSpec, OneOrMany, Origin, ProcessSpec, SchemaRef,
    Seconds, TaskSpec, ToolFailurePolicySpec, ToolRef,
};
pub use values::ProjectValues;

/// A loaded and checked project.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project folder.
    pub root: PathBuf,
    pub layout: Layout,
    /// The folder holding the YAML files (`config/`), or the root for the JSON layout.
    pub config_dir: PathBuf,
    /// Agents in file order.
    pub agents: Vec<AgentEntry>,
    /// Tasks in the order they run.
    pub tasks: Vec<TaskEntry>,
    pub crew: CrewSpec,
    pub files: ProjectFiles,
    /// Things that do not stop a run but deserve a look (fields with no effect here).
    pub warnings: Vec<Diagnostic>,
    /// The tools of the project's Python that crew.py names (and crewai-tools classes
    /// crewai-rs does not provide): each `tools:` entry naming one of these keys is run by the
    /// project's Python worker, which the caller registers under the key.
    pub python_tools: Vec<PythonToolUse>,
    schemas: BTreeMap<String, OutputSchema>,
    skills: ProjectSkills,
}

/// One `{placeholder}` use: the name, and the field it is written in.
#[derive(Debug, Clone)]
pub struct PlaceholderUse {
    pub name: String,
    /// `agent 'researcher'` or `task 'report'`.
    pub owner: String,
    pub field: &'static str,
    pub origin: Origin,
}

impl Project {
    /// Reads the project in `root` and checks everything that needs no inputs and no tools.
    /// All problems found are returned together.
    pub fn load(root: impl AsRef<Path>) -> Result<Project, ProjectError> {
        let root = root.as_ref().to_path_buf();
        let loaded = load::load(&root)?;
        Self::from_loaded(root, loaded)
    }

    /// Checks a classic-layout project whose files are already in memory, as if they were
    /// `config/agents.yaml`, `config/tasks.yaml` and (when given) `config/crew.yaml` under
    /// `root`. Messages name those paths; schema files named by tasks are still read from `root`.
    ///
    /// ```
    /// use crewai_project::Project;
    /// let agents = "writer:\n  role: Writer\n  goal: Write\n  backstory: Writes.\n";
    /// let tasks = "draft:\n  description: Draft a note\n  expected_output: A note\n  agent: writer\n";
    /// let project = Project::from_yaml_sources("my-crew", agents, Some(tasks), None)?;
    /// assert_eq!(project.tasks[0].key, "draft");
    ///
    /// let error = Project::from_yaml_sources("my-crew", agents, Some("draft: [oops"), None).unwrap_err();
    /// assert!(error.to_string().contains("config/tasks.yaml"));
    /// # Ok::<(), crewai_project::ProjectError>(())
    /// ```
    pub fn from_yaml_sources(
        root: impl AsRef<Path>,
        agents_yaml: &str,
        tasks_yaml: Option<&str>,
        crew_yaml: Option<&str>,
    ) -> Result<Project, ProjectError> {
        let root = root.as_ref().to_path_buf();
        let config_dir = root.join("config");
        let source = |stem: &str, text: &str| {
            SourceFile::from_text(
                &config_dir.join(format!("{stem}.yaml")),
                &root,
                Format::Yaml,
                text.to_string(),
            )
        };
        let loaded = load::load_classic_sources(
            &root,
            config_dir.clone(),
            source("agents", agents_yaml),
            tasks_yaml.map(|text| source("tasks", text)),
            crew_yaml.map(|text| source("crew", text)),
        );
        Self::from_loaded(root, loaded)
    }

    /// Checks agents, tasks and a crew given as values (see [`ProjectValues`]) exactly as project
    /// files are checked; `source` names the document in messages (with lines when it holds the
    /// text the values were read from), and relative paths (`output_file`, schema files) are
    /// taken from `root`. The crew is named by its `name`, else `crew` as in CrewAI.
    pub fn from_values(
        root: impl AsRef<Path>,
        source: SourceFile,
        values: ProjectValues,
    ) -> Result<Project, ProjectError> {
        let root = root.as_ref().to_path_buf();
        let loaded = values::load_values(&root, source, values);
        Self::from_loaded(root, loaded)
    }

    /// [`Project::from_values`] for values placed inside `source` (an inline crew or agent of a
    /// flow file), so messages carry that file's lines.
    pub(crate) fn from_values_at(
        root: impl AsRef<Path>,
        source: std::sync::Arc<SourceFile>,
        placement: &values::Placement,
        values: ProjectValues,
    ) -> Result<Project, ProjectError> {
        let root = root.as_ref().to_path_buf();
        let loaded = values::load_values_at(&root, source, placement, values);
        Self::from_loaded(root, loaded)
    }

    /// Runs the whole-project checks on what was read; every problem found is returned together.
    fn from_loaded(root: PathBuf, mut loaded: load::Loaded) -> Result<Project, ProjectError> {
        let checked = check::check(&root, &mut loaded);
        if !loaded.diagnostics.is_empty() {
            return Err(ProjectError::Invalid(loaded.diagnostics));
        }
        Ok(Project {
            root,
            layout: loaded.layout,
            config_dir: loaded.config_dir,
            agents: loaded.agents,
            tasks: loaded.tasks,
            crew: loaded.crew,
            files: loaded.files,
            warnings: loaded.warnings,
            python_tools: loaded.python_tools,
            schemas: checked.schemas,
            skills: checked.skills,
        })
    }

    /// The crew's name: `name:` in the crew file, else the folder's name (`crew`, CrewAI's
    /// default, for a project given as values).
    pub fn name(&self) -> String {
        if self.layout == Layout::Values && self.crew.name.is_none() {
            return "crew".to_string();
        }
        self.crew.name.clone().unwrap_or_else(|| {
            self.root
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "crew".to_string())
        })
    }

    pub fn agent(&self, key: &str) -> Option<&AgentEntry> {
        self.agents.iter().find(|a| a.key == key)
    }

    pub fn task(&self, key_or_name: &str) -> Option<&TaskEntry> {
        self.tasks
            .iter()
            .find(|t| t.key == key_or_name || t.name() == key_or_name)
    }

    /// The key of the agent that manages a hierarchical crew, if one is named.
    pub fn manager_key(&self) -> Option<&str> {
        match self.crew.process.unwrap_or_default() {
            ProcessSpec::Hierarchical => self.crew.manager_agent.as_deref(),
            ProcessSpec::Sequential | ProcessSpec::Consensual => None,
        }
    }

    /// The crew's members: every agent except the manager.
    pub fn members(&self) -> impl Iterator<Item = &AgentEntry> {
        let manager = self.manager_key();
        self.agents
            .iter()
            .filter(move |a| Some(a.key.as_str()) != manager)
    }

    /// The structured-output schema of a task, read from its file when it names one.
    pub fn output_schema(&self, task_key: &str) -> Option<&OutputSchema> {
        self.schemas.get(task_key)
    }

    /// The skills an agent's `skills:` names (its own; the crew's come after them at run time).
    pub fn agent_skills(&self, agent_key: &str) -> &[SkillSource] {
        self.skills.agents.get(agent_key).map_or(&[], Vec::as_slice)
    }

    /// The skills the crew's `skills:` names, which every agent of the crew gets.
    pub fn crew_skills(&self) -> &[SkillSource] {
        &self.skills.crew
    }

    /// `inputs:` of the crew file (defaults the caller's inputs override).
    pub fn default_inputs(&self) -> Inputs {
        self.crew
            .inputs
            .clone()
            .map(|m| m.into_iter().collect())
            .unwrap_or_default()
    }

    /// The defaults with `given` laid over them.
    pub fn effective_inputs(&self, given: &Inputs) -> Inputs {
        let mut inputs = self.default_inputs();
        inputs.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
        inputs
    }

    /// Every `{placeholder}` the agents and tasks use, where CrewAI interpolates them.
    pub fn placeholders(&self) -> Vec<PlaceholderUse> {
        let mut uses = Vec::new();
        let mut scan =
            |owner: String, field: &'static str, text: Option<&String>, origin: Option<&Origin>| {
                if let (Some(text), Some(origin)) = (text, origin) {
                    for name in placeholders(text) {
                        uses.push(PlaceholderUse {
                            name,
                            owner: owner.clone(),
                            field,
                            origin: origin.clone(),
                        });
                    }
                }
            };
        for agent in &self.agents {
            let owner = format!("agent '{}'", agent.key);
            let s = &agent.spec;
            scan(owner.clone(), "role", s.role.as_ref(), s.origin("role"));
            scan(owner.clone(), "goal", s.goal.as_ref(), s.origin("goal"));
            scan(
                owner,
                "backstory",
                s.backstory.as_ref(),
                s.origin("backstory"),
            );
        }
        for task in &self.tasks {
            let owner = format!("task '{}'", task.key);
            let s = &task.spec;
            scan(
                owner.clone(),
                "description",
                s.description.as_ref(),
                s.origin("description"),
            );
            scan(
                owner.clone(),
                "expected_output",
                s.expected_output.as_ref(),
                s.origin("expected_output"),
            );
            scan(
                owner,
                "output_file",
                s.output_file.as_ref(),
                s.origin("output_file"),
            );
        }
        uses
    }

    /// The input names the project needs, in order of first use (what `crewai chat` asks for).
    pub fn required_inputs(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for used in self.placeholders() {
            if !names.contains(&used.name) {
                names.push(used.name);
            }
        }
        names
    }

    /// Problems with `inputs` (after defaults): each placeholder no input provides, at its line.
    pub fn check_inputs(&self, inputs: &Inputs) -> Vec<Diagnostic> {
        let given: Vec<&str> = inputs.keys().map(String::as_str).collect();
        self.placeholders()
            .into_iter()
            .filter(|used| !inputs.contains_key(&used.name))
            .map(|used| {
                let hint = did_you_mean(&used.name, given.iter().copied())
                    .map(|s| format!("{s} (inputs given: {})", given.join(", ")))
                    .unwrap_or_else(|| {
                        format!(
                            "pass `--inputs {}=...` or add it under `inputs:` in the crew file",
                            used.name
                        )
                    });
                used.origin
                    .diagnostic(format!(
                        "{} field '{}' uses {{{}}}, which no input provides",
                        used.owner, used.field, used.name
                    ))
                    .with_hint(Some(hint))
            })
            .collect()
    }

    /// Creates the tools each agent and task names, reporting unknown names at their line.
    pub fn resolve_tools(&self, registry: &ToolRegistry) -> Result<ResolvedTools, ProjectError> {
        self.resolve_tools_with(registry, false)
    }

    /// The Python tool a `tools:` entry names, when the registry has nothing under its key yet.
    pub(crate) fn pending_python_tool(
        &self,
        tool_ref: &ToolRef,
        registry: &ToolRegistry,
    ) -> Option<&PythonToolUse> {
        self.python_tools
            .iter()
            .find(|p| p.key == tool_ref.name)
            .filter(|_| !registry.contains(&tool_ref.name))
    }

    /// [`Project::resolve_tools`]; with `python_pending`, Python tools nothing has registered
    /// yet are left out instead of reported (the plan shows them from the project's Python).
    pub(crate) fn resolve_tools_with(
        &self,
        registry: &ToolRegistry,
        python_pending: bool,
    ) -> Result<ResolvedTools, ProjectError> {
        let mut diagnostics = Vec::new();
        let mut code_problems = Vec::new();
        let mut resolved = ResolvedTools::default();
        let mut resolve = |owner: &str,
                           list: &Option<Vec<ToolRef>>,
                           origin: Option<&Origin>|
         -> Vec<ToolHandle> {
            let (Some(list), Some(origin)) = (list, origin) else {
                return Vec::new();
            };
            let mut tools = Vec::new();
            for (i, tool_ref) in list.iter().enumerate() {
                let python = self.pending_python_tool(tool_ref, registry);
                if let Some(python) = python {
                    if !python_pending {
                        diagnostics.push(
                            origin
                                .child(i)
                                .diagnostic(format!(
                                    "{owner} uses the Python tool {} ({}), which runs in the project's Python worker; none is registered",
                                    python.attr, python.module
                                ))
                                .with_hint(Some(format!(
                                    "start the Python worker and register its tools under their keys ('{}')",
                                    python.key
                                ))),
                        );
                    }
                    continue;
                }
                match registry.resolve(tool_ref) {
                    Ok(tool) => tools.push(tool),
                    Err(ToolLookupError::Unknown { name, nearest }) => {
                        let hint = match nearest.as_slice() {
                            _ if name == code_execution::CODE_TOOL => {
                                code_execution::missing_code_tool_hint()
                            }
                            _ if ToolRegistry::is_crewai_tool_not_yet_available(&name) => format!(
                                "{name} is a crewai-tools tool that crewai-rs does not provide yet; available: {}",
                                registry.names().join(", ")
                            ),
                            [only] => format!("did you mean '{only}'?"),
                            [first, rest @ ..] => {
                                format!("did you mean '{first}'? (also near: {})", rest.join(", "))
                            }
                            [] => format!("known tools: {}", registry.names().join(", ")),
                        };
                        diagnostics.push(
                            origin
                                .child(i)
                                .diagnostic(format!(
                                    "{owner} names tool '{name}', which no one provides"
                                ))
                                .with_hint(Some(hint)),
                        );
                    }
                    Err(error @ ToolLookupError::NeedsKnowledge(_)) => {
                        diagnostics.push(origin.child(i).diagnostic(format!(
                            "{owner} names tool '{}': {error}",
                            tool_ref.name
                        )));
                    }
                    Err(error @ ToolLookupError::Construction { .. }) => {
                        diagnostics.push(
                            origin
                                .child(i)
                                .diagnostic(format!("{owner}: {}", error_chain(&error))),
                        );
                    }
                }
            }
            tools
        };
        for agent in &self.agents {
            let mut tools = resolve(
                &format!("agent '{}'", agent.key),
                &agent.spec.tools,
                agent.spec.origin("tools"),
            );
            match code_execution::code_tool(agent, registry) {
                Ok(Some(tool)) => tools.push(tool),
                Ok(None) => {}
                Err(problem) => code_problems.push(problem),
            }
            resolved.agents.insert(agent.key.clone(), tools);
        }
        for task in &self.tasks {
            let tools = resolve(
                &format!("task '{}'", task.key),
                &task.spec.tools,
                task.spec.origin("tools"),
            );
            resolved.tasks.insert(task.key.clone(), tools);
        }
        diagnostics.extend(code_problems);
        if diagnostics.is_empty() {
            Ok(resolved)
        } else {
            Err(ProjectError::Invalid(diagnostics))
        }
    }
}

impl Project {
    /// The environment variables the resolved tools need and do not have (`SERPER_API_KEY`),
    /// each reported where the tool is named, so a run fails before the crew starts.
    pub fn check_tool_env(&self, resolved: &ResolvedTools) -> Vec<Diagnostic> {
        let mut diagnostics = Vec::new();
        let entries = self
            .agents
            .iter()
            .map(|a| {
                (
                    format!("agent '{}'", a.key),
                    resolved.agents.get(&a.key),
                    a.spec.origin("tools"),
                )
            })
            .chain(self.tasks.iter().map(|t| {
                (
                    format!("task '{}'", t.key),
                    resolved.tasks.get(&t.key),
                    t.spec.origin("tools"),
                )
            }));
        for (owner, tools, origin) in entries {
            let (Some(tools), Some(origin)) = (tools, origin) else {
                continue;
            };
            for (i, tool) in tools.iter().enumerate() {
                if let Err(error) = crewai_tools::check_env_vars(std::slice::from_ref(tool)) {
                    diagnostics.push(
                        origin
                            .child(i)
                            .diagnostic(format!("{owner}: {error}"))
                            .with_hint(Some(
                                "set it in the environment or in the project's .env file".into(),
                            )),
                    );
                }
            }
        }
        diagnostics
    }
}

/// The tools created for each agent and task, by key.
#[derive(Clone, Default)]
pub struct ResolvedTools {
    pub agents: BTreeMap<String, Vec<ToolHandle>>,
    pub tasks: BTreeMap<String, Vec<ToolHandle>>,
}

impl std::fmt::Debug for ResolvedTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |map: &BTreeMap<String, Vec<ToolHandle>>| -> BTreeMap<String, Vec<String>> {
            map.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.iter().map(|t| t.original_name().to_string()).collect(),
                    )
                })
                .collect()
        };
        f.debug_struct("ResolvedTools")
            .field("agents", &names(&self.agents))
            .field("tasks", &names(&self.tasks))
            .finish()
    }
}
