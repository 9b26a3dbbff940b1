//! Turning a checked project into engine values through the public builders. This is the one
//! place where CrewAI's agent, task and crew fields meet the engine's builders: `crewai run`,
//! compiled projects and the conformance runner all build through it.

use crewai_core::agent::Agent;
use crewai_core::crew::{Crew, Process};
use crewai_core::interpolate::Inputs;
use crewai_core::task::Task;
use crewai_llm::LlmConfig;
use crewai_tools::{ToolFailurePolicy, ToolHandle};

use crate::check::OutputKind;
use crate::error::{Diagnostic, ProjectError};
use crate::options::{BuildOptions, RateLimitOwner, make_llm, place};
use crate::resolve::{ResolvedCode, TaskCode};
use crate::spec::{LogFileSpec, ProcessSpec, ToolFailurePolicySpec};
use crate::{AgentEntry, Project, ResolvedTools, TaskEntry};

/// For each of `fields` that `spec` sets, `builder = builder.field(value)`: the fields whose
/// name and value carry over to the engine's builder unchanged. Adding such a field to a spec
/// and its builder is adding its name here.
macro_rules! carry_over {
    ($builder:ident, $spec:expr, [$($field:ident),+ $(,)?]) => {
        $(
            if let Some(value) = $spec.$field.clone() {
                $builder = $builder.$field(value);
            }
        )+
    };
}

/// The agents and tasks of a project, built on their own (see [`Project::build_parts`]).
#[derive(Debug, Clone)]
pub struct Parts {
    /// `(key, agent)` in file order, the manager included.
    pub agents: Vec<(String, Agent)>,
    /// `(key, task)` in run order, each bound to its agent.
    pub tasks: Vec<(String, Task)>,
}

/// Where an agent reports: to the crew it joins, or to the options' bus and hooks itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Crew,
    Standalone,
}

/// What a build resolved before it creates anything.
struct Prepared {
    tools: ResolvedTools,
    code: ResolvedCode,
    /// The store and embedder of the crew's and agents' knowledge, when there is any.
    knowledge: Option<crate::knowledge::KnowledgeBase>,
}

fn policy(spec: ToolFailurePolicySpec) -> ToolFailurePolicy {
    match spec {
        ToolFailurePolicySpec::Ignore => ToolFailurePolicy::Ignore,
        ToolFailurePolicySpec::Warn => ToolFailurePolicy::Warn,
        ToolFailurePolicySpec::Raise => ToolFailurePolicy::Raise,
    }
}

impl Project {
    /// Builds the crew: checks `inputs` (laid over the crew file's `inputs:`), tools and the code
    /// the files name, creates every model client (a missing API key is reported here, naming
    /// the variable), then builds agents, tasks and the crew through the engine's builders. Kick
    /// it off with the same inputs ([`Project::effective_inputs`]) so `{placeholders}` are filled.
    pub fn build(&self, inputs: &Inputs, options: &BuildOptions) -> Result<Crew, ProjectError> {
        let prepared = self.prepare(Some(inputs), options)?;
        self.assemble_crew(&prepared, options)
    }

    /// [`Project::build`] without the inputs check, for a caller that kicks the crew off with
    /// inputs of its own choosing (several runs, or the stored inputs of a replay): each kickoff
    /// checks its inputs itself.
    pub fn build_crew(&self, options: &BuildOptions) -> Result<Crew, ProjectError> {
        let prepared = self.prepare(None, options)?;
        self.assemble_crew(&prepared, options)
    }

    /// Builds one agent on its own, for `Agent::kickoff`: it carries the options' event bus and
    /// hooks itself, as there is no crew to carry them.
    pub fn build_agent(&self, key: &str, options: &BuildOptions) -> Result<Agent, ProjectError> {
        let entry = self.agent(key).ok_or_else(|| ProjectError::UnknownAgent {
            key: key.to_string(),
            defined: self.agents.iter().map(|a| a.key.clone()).collect(),
        })?;
        let prepared = self.prepare(None, options)?;
        self.agent_from(entry, &prepared, options, Scope::Standalone)
    }

    /// Builds every agent on its own (as [`Project::build_agent`] does) and every task bound to
    /// its agent, for running tasks without a crew (`Task::execute`).
    pub fn build_parts(&self, options: &BuildOptions) -> Result<Parts, ProjectError> {
        let prepared = self.prepare(None, options)?;
        self.parts(&prepared, options, Scope::Standalone)
    }

    /// Checks inputs (when given), tools and code, every problem together.
    fn prepare(
        &self,
        inputs: Option<&Inputs>,
        options: &BuildOptions,
    ) -> Result<Prepared, ProjectError> {
        let mut diagnostics: Vec<Diagnostic> = match inputs {
            Some(inputs) => self.check_inputs(&self.effective_inputs(inputs)),
            None => Vec::new(),
        };
        // The search tools are made over knowledge's store and embedder, so those come first
        // when `tools:` names one.
        let search_base = if self.names_search_tools() {
            self.knowledge_base(options)?
        } else {
            None
        };
        let registry = self.registry_with_search(&options.tools, search_base.as_ref());
        let tools = match self.resolve_tools(&registry) {
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
        let code = self
            .resolve_code(options.code_resolver.as_deref())
            .unwrap_or_else(|list| {
                diagnostics.extend(list);
                ResolvedCode::default()
            });
        if diagnostics.is_empty() {
            let knowledge = match search_base {
                Some(base) => Some(base),
                None => self.knowledge_base(options)?,
            };
            Ok(Prepared {
                tools,
                code,
                knowledge,
            })
        } else {
            Err(ProjectError::Invalid(diagnostics))
        }
    }

    fn parts(
        &self,
        prepared: &Prepared,
        options: &BuildOptions,
        scope: Scope,
    ) -> Result<Parts, ProjectError> {
        let mut agents = Vec::new();
        for entry in &self.agents {
            agents.push((
                entry.key.clone(),
                self.agent_from(entry, prepared, options, scope)?,
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
            let task = self.task_from(
                entry,
                agent,
                prepared.tools.tasks.get(&entry.key).cloned(),
                prepared.code.tasks.get(&entry.key),
            )?;
            tasks.push((entry.key.clone(), task));
        }
        Ok(Parts { agents, tasks })
    }

    fn assemble_crew(
        &self,
        prepared: &Prepared,
        options: &BuildOptions,
    ) -> Result<Crew, ProjectError> {
        let parts = self.parts(prepared, options, Scope::Crew)?;
        let manager_key = self.manager_key();
        let mut builder = Crew::builder()
            .name(self.name())
            .skills(self.crew_skills().to_vec());
        let mut manager = None;
        let mut members = Vec::new();
        let mut roles_by_key = std::collections::BTreeMap::new();
        for (key, agent) in parts.agents {
            if Some(key.as_str()) == manager_key {
                manager = Some(agent);
            } else {
                roles_by_key.insert(key, agent.role().to_string());
                members.push(agent);
            }
        }
        builder = builder
            .agents(members)
            .tasks(parts.tasks.into_iter().map(|(_, task)| task).collect());
        let crew = &self.crew;
        let process = crew.process.unwrap_or_default();
        builder = builder.process(match process {
            ProcessSpec::Sequential => Process::Sequential,
            ProcessSpec::Hierarchical => Process::Hierarchical,
            ProcessSpec::Consensual => Process::Consensual,
        });
        if process == ProcessSpec::Consensual {
            builder = builder.consensus(self.consensus_config(&roles_by_key, options)?);
        }
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
        if crew.planning == Some(true) {
            // The planner's model: `planning_llm`, else the default model (CrewAI's rule for
            // a planner without one); `--llm` overrides it as it does every model.
            let config = options.llm_override.as_ref().or(crew.planning_llm.as_ref());
            builder = builder.planning(true).planning_llm(make_llm(
                config,
                "the crew's planning_llm",
                crew.origin("planning_llm"),
                options,
            )?);
        }
        if let Some(config) = &crew.function_calling_llm {
            builder = builder.function_calling_llm(make_llm(
                Some(config),
                "the crew's function_calling_llm",
                crew.origin("function_calling_llm"),
                options,
            )?);
        }
        if let Some(v) = crew.tool_failure_policy {
            builder = builder.tool_failure_policy(policy(v));
        }
        if let Some(v) = crew.max_rpm {
            builder = builder.max_rpm(v);
            if let Some(limiter) = options.rate_limiter(RateLimitOwner::Crew, v) {
                builder = builder.rate_limiter(limiter);
            }
        }
        carry_over!(builder, crew, [max_cost_usd, max_tokens, cache, stream]);
        builder = builder.allow_unpriced(options.allow_unpriced);
        if let Some(prices) = &crew.pricing {
            let overrides = crewai_llm::PriceTable::from_prices(prices.clone()).map_err(|err| {
                ProjectError::build(format!("crew '{}' pricing", self.name()), err)
            })?;
            builder = builder.prices(crewai_llm::PriceTable::builtin().with_overrides(&overrides));
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
        if let Some(callback) = prepared.code.crew.step_callback.clone() {
            builder = builder.step_callback(move |step| callback(step));
        }
        if let Some(callback) = prepared.code.crew.task_callback.clone() {
            builder = builder.task_callback(move |output| callback(output));
        }
        if let Some(bus) = &options.event_bus {
            builder = builder.event_bus(bus.clone());
        }
        if let Some(memory) = self.crew_memory(options)? {
            builder = builder.memory(memory);
        }
        if let Some(knowledge) = self.crew_knowledge(prepared.knowledge.as_ref())? {
            builder = builder.knowledge(knowledge);
        }
        if let Some(hooks) = &options.hooks {
            builder = builder.hooks(hooks.clone());
        }
        if let Some(trained) = &options.trained_agents {
            builder = builder.trained_agents(trained.clone());
        }
        if let Some(store) = &options.task_output_store {
            builder = builder.task_output_store(std::sync::Arc::clone(store));
        }
        let file = self
            .files
            .crew
            .as_ref()
            .or(self.files.tasks.as_ref())
            .map(|f| f.display.clone())
            .unwrap_or_default();
        builder
            .build()
            .map_err(|err| ProjectError::build(format!("crew '{}' ({file})", self.name()), err))
    }

    /// Builds one task (without interpolating it) through the engine's builder. `code` is what
    /// [`Project::resolve_code`] made of its guardrails, condition and callback (`None` for the
    /// dry run's prompt, which needs none of them).
    pub(crate) fn task_from(
        &self,
        entry: &TaskEntry,
        agent: Option<Agent>,
        tools: Option<Vec<ToolHandle>>,
        code: Option<&TaskCode>,
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
        carry_over!(
            builder,
            s,
            [
                async_execution,
                create_directory,
                markdown,
                human_input,
                guardrail_max_retries,
            ]
        );
        if let Some(v) = s.tool_failure_policy {
            builder = builder.tool_failure_policy(policy(v));
        }
        if let Some(code) = code {
            if !code.guardrails.is_empty() {
                builder = builder.guardrails(code.guardrails.clone());
            }
            if let Some(condition) = code.condition.clone() {
                builder = builder.condition(move |previous| condition(previous));
            }
            if let Some(callback) = code.callback.clone() {
                builder = builder.callback(move |output| callback(output));
            }
        }
        builder.build().map_err(|err| {
            ProjectError::build(format!("{owner}{}", place(Some(&entry.origin))), err)
        })
    }

    fn agent_from(
        &self,
        entry: &AgentEntry,
        prepared: &Prepared,
        options: &BuildOptions,
        scope: Scope,
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
        let role = s.role.clone().unwrap_or_default();
        let mut builder = Agent::builder()
            .role(role.clone())
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
        if let Some(tools) = prepared.tools.agents.get(&entry.key) {
            builder = builder.tools(tools.clone());
        }
        builder = builder.skills(self.agent_skills(&entry.key).to_vec());
        if let (Some(mcps), Some(origin)) = (&s.mcps, s.origin("mcps")) {
            let servers =
                crate::mcp::read_mcps(mcps, origin, &self.root).map_err(ProjectError::Invalid)?;
            builder = builder.mcps(servers);
        }
        if let (Some(a2a), Some(origin)) = (&s.a2a, s.origin("a2a")) {
            let remotes = crate::a2a::read_a2a(a2a, origin).map_err(ProjectError::Invalid)?;
            builder = builder.a2a_agents(remotes);
        }
        if let Some(v) = s.max_rpm {
            builder = builder.max_rpm(v);
            let owner = RateLimitOwner::Agent {
                key: &entry.key,
                role: &role,
            };
            if let Some(limiter) = options.rate_limiter(owner, v) {
                builder = builder.rate_limiter(limiter);
            }
        }
        if let Some(v) = s.max_execution_time {
            builder = builder.max_execution_time(v.as_duration());
        }
        if let Some(v) = options.verbose.or(s.verbose) {
            builder = builder.verbose(v);
        }
        carry_over!(
            builder,
            s,
            [
                max_iter,
                max_retry_limit,
                allow_delegation,
                cache,
                use_system_prompt,
                system_template,
                prompt_template,
                response_template,
                respect_context_window,
                inject_date,
                date_format,
                guardrail_max_retries,
            ]
        );
        if let Some(code) = prepared.code.agents.get(&entry.key) {
            if let Some(guardrail) = code.guardrail.clone() {
                builder = builder.guardrail(guardrail);
            }
            if let Some(callback) = code.step_callback.clone() {
                builder = builder.step_callback(move |step| callback(step));
            }
        }
        if let Some(v) = s.tool_failure_policy {
            builder = builder.tool_failure_policy(policy(v));
        }
        builder = self.agent_planning(builder, s, &owner, options)?;
        if let Some(memory) = self.agent_memory(&entry.key, s, options)? {
            builder = builder.memory(memory);
        }
        if let Some(config) = s.knowledge_config.or(self.crew.knowledge_config) {
            builder = builder.knowledge_config(config);
        }
        match self.agent_knowledge(entry, prepared.knowledge.as_ref())? {
            Some(knowledge) if scope == Scope::Crew => builder = builder.knowledge(knowledge),
            Some(_) => {
                let at = s.origin("knowledge_sources").unwrap_or(&entry.origin);
                return Err(ProjectError::Invalid(vec![at.diagnostic(format!(
                    "{owner} has knowledge_sources, which are ingested and searched when it runs in its crew, not on its own"
                )).with_hint(Some("run the crew (`crewai run`), or remove `knowledge_sources` for a standalone run".into()))]));
            }
            None => {}
        }
        if scope == Scope::Standalone {
            if let Some(bus) = &options.event_bus {
                builder = builder.event_bus(bus.clone());
            }
            if let Some(hooks) = &options.hooks {
                builder = builder.hooks(hooks.clone());
            }
        }
        builder.build().map_err(|err| {
            ProjectError::build(format!("{owner}{}", place(Some(&entry.origin))), err)
        })
    }
}
