//! Turning a checked project into engine values through the public builders.

use std::sync::Arc;
use std::time::Duration;

use crewai_core::agent::Agent;
use crewai_core::crew::{Crew, Process};
use crewai_core::events::EventBus;
use crewai_core::guardrail::Guardrail;
use crewai_core::interpolate::Inputs;
use crewai_core::store::TaskOutputStore;
use crewai_core::task::Task;
use crewai_llm::{Llm, LlmConfig};
use crewai_tools::ToolFailurePolicy;

use crate::check::OutputKind;
use crate::error::ProjectError;
use crate::registry::ToolRegistry;
use crate::spec::{GuardrailSpec, LogFileSpec, Origin, ProcessSpec, ToolFailurePolicySpec};
use crate::{Project, ResolvedTools};

/// What a build needs besides the project files.
///
/// ```
/// use crewai_project::{BuildOptions, ToolRegistry};
/// let options = BuildOptions::new(ToolRegistry::new()).with_llm(crewai_llm::LlmConfig::new("openai/gpt-4o-mini")).with_verbose(true);
/// assert!(options.llm_override.is_some());
/// ```
#[derive(Clone)]
pub struct BuildOptions {
    /// Where tool names are looked up.
    pub tools: ToolRegistry,
    /// A model for every agent and the manager, replacing the files' choices (`--llm`).
    pub llm_override: Option<LlmConfig>,
    /// The bus the crew emits its events on (progress display, logs).
    pub event_bus: Option<EventBus>,
    /// Where kickoff outputs are kept for replay.
    pub task_output_store: Option<Arc<dyn TaskOutputStore>>,
    /// Overrides the crew file's `verbose`.
    pub verbose: Option<bool>,
    /// How model clients are built: extra providers (the embedded `local` model), environment,
    /// retry timing.
    pub llm_build: crewai_llm::BuildOptions,
    /// The model of agents (and the manager) whose files name none; `MODEL` or CrewAI's default
    /// when unset. Unlike `llm_override`, a model named in the files wins.
    pub default_llm: Option<LlmConfig>,
}

impl BuildOptions {
    pub fn new(tools: ToolRegistry) -> Self {
        BuildOptions {
            tools,
            llm_override: None,
            event_bus: None,
            task_output_store: None,
            verbose: None,
            llm_build: crewai_llm::BuildOptions::default(),
            default_llm: None,
        }
    }
    /// Builds model clients with these options (register extra providers on them).
    pub fn with_llm_build(mut self, llm_build: crewai_llm::BuildOptions) -> Self {
        self.llm_build = llm_build;
        self
    }
    /// The model for agents whose files name none (see [`BuildOptions::default_llm`]).
    pub fn with_default_llm(mut self, llm: LlmConfig) -> Self {
        self.default_llm = Some(llm);
        self
    }
    pub fn with_llm(mut self, llm: LlmConfig) -> Self {
        self.llm_override = Some(llm);
        self
    }
    pub fn with_event_bus(mut self, bus: EventBus) -> Self {
        self.event_bus = Some(bus);
        self
    }
    pub fn with_task_output_store(mut self, store: Arc<dyn TaskOutputStore>) -> Self {
        self.task_output_store = Some(store);
        self
    }
    pub fn with_verbose(mut self, verbose: bool) -> Self {
        self.verbose = Some(verbose);
        self
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("tools", &self.tools)
            .field("llm_override", &self.llm_override)
            .field("event_bus", &self.event_bus.is_some())
            .field("task_output_store", &self.task_output_store.is_some())
            .field("verbose", &self.verbose)
            .field("llm_build", &self.llm_build)
            .field("default_llm", &self.default_llm)
            .finish()
    }
}

/// `file:line` of a field, for the context of build errors.
fn place(origin: Option<&Origin>) -> String {
    match origin {
        Some(origin) => match origin.line() {
            Some(line) => format!(" ({}:{line})", origin.source.display),
            None => format!(" ({})", origin.source.display),
        },
        None => String::new(),
    }
}

/// Creates a model client, naming who needs it and where it was configured.
pub(crate) fn make_llm(
    config: Option<&LlmConfig>,
    who: &str,
    origin: Option<&Origin>,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, ProjectError> {
    // An empty model means the default (the options' default model, else `MODEL`, else
    // CrewAI's), with the other settings kept.
    let default = options.default_llm.clone().unwrap_or_default();
    let config = match config {
        Some(config) if config.model.trim().is_empty() && config.provider.is_none() => LlmConfig {
            model: default.model.clone(),
            provider: default.provider.clone(),
            ..config.clone()
        },
        Some(config) => config.clone(),
        None => default,
    };
    let result = crewai_llm::build_llm_with(&config, &options.llm_build);
    result.map_err(|source| ProjectError::Llm {
        context: format!("{who}{}", place(origin)),
        source,
    })
}

fn policy(spec: ToolFailurePolicySpec) -> ToolFailurePolicy {
    match spec {
        ToolFailurePolicySpec::Ignore => ToolFailurePolicy::Ignore,
        ToolFailurePolicySpec::Warn => ToolFailurePolicy::Warn,
        ToolFailurePolicySpec::Raise => ToolFailurePolicy::Raise,
    }
}

fn guardrail_of(spec: &GuardrailSpec) -> Option<Guardrail> {
    match spec {
        GuardrailSpec::Rule(rule) => Some(Guardrail::llm(rule.trim().to_string())),
        // Rejected by the checks when the project loaded.
        GuardrailSpec::Reference(_) => None,
    }
}

/// The agents and tasks of a project, built; the crew is assembled from them.
pub(crate) struct Parts {
    /// `(key, agent)` in file order, the manager included.
    pub agents: Vec<(String, Agent)>,
    pub tasks: Vec<Task>,
}

impl Project {
    /// Builds the crew: checks `inputs` (laid over the crew file's `inputs:`) and tools, creates
    /// every model client (a missing API key is reported here, naming the variable), then builds
    /// agents, tasks and the crew through the engine's builders. Kick it off with the same inputs
    /// ([`Project::effective_inputs`]) so `{placeholders}` are filled.
    pub fn build(&self, inputs: &Inputs, options: &BuildOptions) -> Result<Crew, ProjectError> {
        let (parts, _) = self.build_parts(inputs, options)?;
        let manager_key = self.manager_key();
        let mut builder = Crew::builder().name(self.name());
        let mut manager = None;
        let mut members = Vec::new();
        for (key, agent) in parts.agents {
            if Some(key.as_str()) == manager_key {
                manager = Some(agent);
            } else {
                members.push(agent);
            }
        }
        builder = builder.agents(members).tasks(parts.tasks);
        let crew = &self.crew;
        let process = crew.process.unwrap_or_default();
        builder = builder.process(match process {
            ProcessSpec::Sequential => Process::Sequential,
            ProcessSpec::Hierarchical => Process::Hierarchical,
        });
        if process == ProcessSpec::Hierarchical {
            match manager {
                Some(agent) => builder = builder.manager_agent(agent),
                None => {
                    let config = options.llm_override.as_ref().or(crew.manager_llm.as_ref());
                    builder = builder.manager_llm(make_llm(
                        config,
                        "the crew's manager_llm",
                        crew.origin("manager_llm"),
                        options,
                    )?);
                }
            }
        }
        if let Some(config) = &crew.function_calling_llm {
            builder = builder.function_calling_llm(make_llm(
                Some(config),
                "the crew's function_calling_llm",
                crew.origin("function_calling_llm"),
                options,
            )?);
        }
        if let Some(v) = crew.max_rpm {
            builder = builder.max_rpm(v);
        }
        if let Some(v) = crew.max_cost_usd {
            builder = builder.max_cost_usd(v);
        }
        if let Some(v) = crew.max_tokens {
            builder = builder.max_tokens(v);
        }
        if let Some(prices) = &crew.pricing {
            let overrides = crewai_llm::PriceTable::from_prices(prices.clone()).map_err(|err| {
                ProjectError::Build {
                    context: format!("crew '{}' pricing", self.name()),
                    message: err.to_string(),
                }
            })?;
            builder = builder.prices(crewai_llm::PriceTable::builtin().with_overrides(&overrides));
        }
        if let Some(v) = crew.cache {
            builder = builder.cache(v);
        }
        if let Some(v) = crew.stream {
            builder = builder.stream(v);
        }
        if let Some(v) = options.verbose.or(crew.verbose) {
            builder = builder.verbose(v);
        }
        match &crew.output_log_file {
            Some(LogFileSpec::Enabled(true)) => {
                builder = builder.output_log_file(self.root.join("logs.txt"))
            }
            Some(LogFileSpec::Path(path)) => {
                builder = builder.output_log_file(self.root.join(path))
            }
            Some(LogFileSpec::Enabled(false)) | None => {}
        }
        if let Some(bus) = &options.event_bus {
            builder = builder.event_bus(bus.clone());
        }
        if let Some(store) = &options.task_output_store {
            builder = builder.task_output_store(Arc::clone(store));
        }
        let file = self
            .files
            .crew
            .as_ref()
            .or(self.files.tasks.as_ref())
            .map(|f| f.display.clone())
            .unwrap_or_default();
        builder.build().map_err(|err| ProjectError::Build {
            context: format!("crew '{}' ({file})", self.name()),
            message: err.to_string(),
        })
    }

    /// Checks `inputs` and tools, then builds every agent and task.
    pub(crate) fn build_parts(
        &self,
        inputs: &Inputs,
        options: &BuildOptions,
    ) -> Result<(Parts, Inputs), ProjectError> {
        let inputs = self.effective_inputs(inputs);
        let mut diagnostics = self.check_inputs(&inputs);
        let resolved = match self.resolve_tools(&options.tools) {
            Ok(resolved) => {
                diagnostics.extend(self.check_tool_env(&resolved));
                resolved
            }
            Err(ProjectError::Invalid(list)) => {
                diagnostics.extend(list);
                ResolvedTools::default()
            }
            Err(other) => return Err(other),
        };
        if !diagnostics.is_empty() {
            return Err(ProjectError::Invalid(diagnostics));
        }
        let mut agents = Vec::new();
        for entry in &self.agents {
            agents.push((
                entry.key.clone(),
                self.build_agent(entry, &resolved, options)?,
            ));
        }
        let mut tasks = Vec::new();
        for entry in &self.tasks {
            let agent = entry
                .spec
                .agent
                .as_ref()
                .and_then(|key| agents.iter().find(|(k, _)| k == key))
                .map(|(_, a)| a.clone());
            tasks.push(self.build_task(entry, agent, resolved.tasks.get(&entry.key).cloned())?);
        }
        Ok((Parts { agents, tasks }, inputs))
    }

    /// Builds one task (without interpolating it) through the engine's builder.
    pub(crate) fn build_task(
        &self,
        entry: &crate::TaskEntry,
        agent: Option<Agent>,
        tools: Option<Vec<crewai_tools::ToolHandle>>,
    ) -> Result<Task, ProjectError> {
        let owner = format!("task '{}'", entry.key);
        let s = &entry.spec;
        let mut builder = Task::builder()
            .name(entry.name())
            .description(s.description.clone().unwrap_or_default())
            .expected_output(s.expected_output.clone().unwrap_or_default());
        if let Some(agent) = agent {
            builder = builder.agent(agent);
        }
        match &s.context {
            None => {}
            Some(list) if list.is_empty() => builder = builder.context_none(),
            Some(list) => {
                let names: Vec<String> = list
                    .iter()
                    .map(|c| {
                        self.task(c)
                            .map(|t| t.name().to_string())
                            .unwrap_or_else(|| c.clone())
                    })
                    .collect();
                builder = builder.context(names);
            }
        }
        if let Some(tools) = tools.filter(|t| !t.is_empty()) {
            builder = builder.tools(tools);
        }
        if let Some(flag) = s.async_execution {
            builder = builder.async_execution(flag);
        }
        if let Some(schema) = self.output_schema(&entry.key) {
            builder = match schema.kind {
                OutputKind::Json => builder.output_json(schema.schema.clone()),
                OutputKind::Pydantic => builder.output_pydantic(schema.schema.clone()),
            };
        }
        if let Some(file) = &s.output_file {
            // CrewAI strips a leading '/'; the rest is relative to the project, wherever the
            // command runs from.
            let root = self
                .root
                .canonicalize()
                .unwrap_or_else(|_| self.root.clone());
            builder = builder.output_file(
                root.join(file.trim_start_matches('/'))
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        if let Some(flag) = s.create_directory {
            builder = builder.create_directory(flag);
        }
        if let Some(flag) = s.markdown {
            builder = builder.markdown(flag);
        }
        if let Some(flag) = s.human_input {
            builder = builder.human_input(flag);
        }
        match (&s.guardrails, &s.guardrail) {
            (Some(list), _) => {
                builder =
                    builder.guardrails(list.to_vec().iter().filter_map(guardrail_of).collect())
            }
            (None, Some(one)) => {
                if let Some(guardrail) = guardrail_of(one) {
                    builder = builder.guardrail(guardrail);
                }
            }
            (None, None) => {}
        }
        if let Some(retries) = s.guardrail_max_retries {
            builder = builder.guardrail_max_retries(retries);
        }
        builder.build().map_err(|err| ProjectError::Build {
            context: format!("{owner}{}", place(Some(&entry.origin))),
            message: err.to_string(),
        })
    }

    fn build_agent(
        &self,
        entry: &crate::AgentEntry,
        resolved: &ResolvedTools,
        options: &BuildOptions,
    ) -> Result<Agent, ProjectError> {
        let owner = format!("agent '{}'", entry.key);
        let s = &entry.spec;
        let (config, origin) = match &options.llm_override {
            Some(config) => (Some(config.clone()), None),
            None => (s.llm.clone(), s.origin("llm")),
        };
        let config = match (config, s.max_tokens) {
            (Some(mut config), Some(max)) => {
                config.max_tokens.get_or_insert(max);
                Some(config)
            }
            (None, Some(max)) => Some(LlmConfig {
                max_tokens: Some(max),
                ..LlmConfig::default()
            }),
            (config, None) => config,
        };
        let llm = make_llm(
            config.as_ref(),
            &owner,
            origin.or(Some(&entry.origin)),
            options,
        )?;
        let mut builder = Agent::builder()
            .role(s.role.clone().unwrap_or_default())
            .goal(s.goal.clone().unwrap_or_default())
            .backstory(s.backstory.clone().unwrap_or_default())
            .llm(llm);
        if let Some(config) = &s.function_calling_llm {
            builder = builder.function_calling_llm(make_llm(
                Some(config),
                &format!("{owner} function_calling_llm"),
                s.origin("function_calling_llm"),
                options,
            )?);
        }
        if let Some(tools) = resolved.agents.get(&entry.key) {
            builder = builder.tools(tools.clone());
        }
        if let Some(v) = s.max_iter {
            builder = builder.max_iter(v);
        }
        if let Some(v) = s.max_rpm {
            builder = builder.max_rpm(v);
        }
        if let Some(v) = s.max_execution_time {
            builder = builder.max_execution_time(Duration::from_secs(v));
        }
        if let Some(v) = s.max_retry_limit {
            builder = builder.max_retry_limit(v);
        }
        if let Some(v) = s.allow_delegation {
            builder = builder.allow_delegation(v);
        }
        if let Some(v) = options.verbose.or(s.verbose) {
            builder = builder.verbose(v);
        }
        if let Some(v) = s.cache {
            builder = builder.cache(v);
        }
        if let Some(v) = s.use_system_prompt {
            builder = builder.use_system_prompt(v);
        }
        if let Some(v) = &s.system_template {
            builder = builder.system_template(v.clone());
        }
        if let Some(v) = &s.prompt_template {
            builder = builder.prompt_template(v.clone());
        }
        if let Some(v) = &s.response_template {
            builder = builder.response_template(v.clone());
        }
        if let Some(v) = s.respect_context_window {
            builder = builder.respect_context_window(v);
        }
        if let Some(v) = s.inject_date {
            builder = builder.inject_date(v);
        }
        if let Some(v) = &s.date_format {
            builder = builder.date_format(v.clone());
        }
        if let Some(guardrail) = s.guardrail.as_ref().and_then(guardrail_of) {
            builder = builder.guardrail(guardrail);
        }
        if let Some(v) = s.guardrail_max_retries {
            builder = builder.guardrail_max_retries(v);
        }
        if let Some(v) = s.tool_failure_policy {
            builder = builder.tool_failure_policy(policy(v));
        }
        builder.build().map_err(|err| ProjectError::Build {
            context: format!("{owner}{}", place(Some(&entry.origin))),
            message: err.to_string(),
        })
    }
}
