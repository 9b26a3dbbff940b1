//! Builds what a case describes and runs it: a crew kickoff, an agent kickoff, tasks run by an
//! agent, a bare LLM call, or a crew replay.
//!
//! Agents, tasks and crews are built by crewai-project, the path `crewai run` takes: the case's
//! `agents`, `tasks` and `crew` keep CrewAI's field names, so they go over as spec values as
//! written ([`ProjectValues`]), and what only a case has comes in through crewai-project's hooks:
//! the catalog's test tools as the tool registry, its guardrails and conditions as the code the
//! specs name ([`CatalogCode`]), every model pointed at the replay server by the LLM factory, and
//! `max_rpm` limiters on virtual clocks. No field is mapped onto a builder here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crewai_core::agent::{Agent, KickoffInput};
use crewai_core::crew::{Crew, Process};
use crewai_core::hooks::{Hooks, HooksLayer};
use crewai_core::output::TaskOutput;
use crewai_core::store::{InMemoryTaskOutputStore, StoredTaskOutput, TaskOutputStore};
use crewai_llm::{
    BuildOptions as LlmBuildOptions, DEFAULT_MODEL, Llm, LlmConfig, LlmError, LlmRequest, Message,
    OpenAiApi, ProviderRegistry, ResponseFormat, StreamEvent, build_llm_with, error_chain,
};
use crewai_project::{
    BuildOptions, Project, ProjectError, ProjectValues, RateLimitOwner, SourceFile, ToolRef,
    ToolRegistry,
};
use crewai_tools::ToolHandle;
use futures::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::case::{AgentSpec, Case, CrewSpec, MessageSpec, Mode, Provider, TaskSpec};
use crate::catalog::{CatalogCode, build_tool};
use crate::outcome::{Output, RateLimitScope, ToolInfo};
use crate::returned::{LlmReply, Returned, consume};
use crate::runner::RunEnv;

/// Why a case could not be run to a result (render it with `crewai_llm::error_chain`).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The case needs something the engine does not have yet.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The case cannot be built as written.
    #[error("invalid case: {0}")]
    Invalid(String),
    /// Building failed in the engine (a builder rejected the configuration).
    #[error(transparent)]
    Build(ProjectError),
    /// The case's model client could not be made.
    #[error("building LLM `{model}`")]
    Llm {
        model: String,
        #[source]
        source: LlmError,
    },
    /// Something else stopped the run (the engine's task panicked, a store refused a row).
    #[error("{0}")]
    Failed(String),
    #[error("timed out after {} s (the run's overall deadline)", .0.as_secs())]
    Timeout(Duration),
}

impl From<ProjectError> for RunError {
    fn from(error: ProjectError) -> Self {
        match error {
            // The spec values break a rule of CrewAI's (each problem with its field).
            ProjectError::Invalid(_) => RunError::Invalid(error.to_string()),
            other => RunError::Build(other),
        }
    }
}

/// A run's results.
#[derive(Debug, Clone)]
pub struct Execution {
    /// The outputs, or the error the run ended with (checked against `expect.error`).
    pub outputs: Result<Vec<Output>, String>,
    pub manager_tools: Option<Vec<ToolInfo>>,
}

impl Execution {
    pub(crate) fn of(result: Result<Vec<Output>, String>) -> Execution {
        Execution {
            outputs: result,
            manager_tools: None,
        }
    }
}

/// CrewAI's LLM flags that mean nothing to a Rust client: `is_litellm` picks CrewAI's LiteLLM
/// backend over its native one; the HTTP traffic is the same provider API either way.
const PYTHON_ONLY_LLM_KEYS: &[&str] = &["is_litellm"];

/// The LLM config of `fields` (CrewAI names), as written.
fn parse_llm_fields(fields: &Map<String, Value>) -> Result<LlmConfig, RunError> {
    let mut fields = fields.clone();
    for key in PYTHON_ONLY_LLM_KEYS {
        fields.remove(*key);
    }
    serde_json::from_value(Value::Object(fields.clone()))
        .map_err(|e| RunError::Invalid(format!("llm {}: {e}", Value::Object(fields))))
}

/// `config` pointed at the replay server at `server_url`, as the provider the case recorded.
fn point_at_replay(
    mut config: LlmConfig,
    provider: Provider,
    server_url: &str,
) -> Result<LlmConfig, String> {
    if config.model.is_empty() {
        config.model = DEFAULT_MODEL.to_string();
    }
    // The case names the API its cassette recorded (the Responses API is OpenAI's); the
    // provider registry says where that provider's API lives, here on the replay server.
    let name = match provider {
        Provider::Openai | Provider::OpenaiResponses => "openai",
        Provider::Anthropic => "anthropic",
        Provider::Gemini => "gemini",
        Provider::Azure => "azure",
    };
    if provider == Provider::OpenaiResponses {
        config.api = Some(OpenAiApi::Responses);
    }
    let descriptor = ProviderRegistry::builtin()
        .get(name)
        .cloned()
        .ok_or_else(|| format!("no provider '{name}' is registered"))?;
    if config.provider.is_none() && !config.model.contains('/') {
        config.provider = Some(descriptor.name.clone());
    }
    config.base_url = Some(descriptor.base_url_at(server_url));
    config.api_key = Some("test".into());
    if provider == Provider::Azure && config.api_version.is_none() {
        config.api_version = Some("2024-06-01".into());
    }
    Ok(config)
}

/// Builds a client the way a user's code would, with no process environment leaking in (no
/// `OPENAI_BASE_URL`, no `MODEL`).
fn build_isolated(config: &LlmConfig) -> Result<Arc<dyn Llm>, LlmError> {
    build_llm_with(config, &LlmBuildOptions::new().with_env(|_| None))
}

/// The LLM config for `fields` (CrewAI names), pointed at the replay server.
pub fn llm_config(
    case: &Case,
    fields: Option<&Map<String, Value>>,
    env: &RunEnv,
) -> Result<LlmConfig, RunError> {
    let config = match fields {
        Some(fields) => parse_llm_fields(fields)?,
        None => LlmConfig::default(),
    };
    point_at_replay(config, case.provider, &env.server_url).map_err(RunError::Invalid)
}

/// Builds the client for `fields` (mode llm: a bare model call, no agent).
pub fn build_case_llm(
    case: &Case,
    fields: Option<&Map<String, Value>>,
    env: &RunEnv,
) -> Result<(LlmConfig, Arc<dyn Llm>), RunError> {
    let config = llm_config(case, fields, env)?;
    let llm = build_isolated(&config).map_err(|source| RunError::Llm {
        model: config.model.clone(),
        source,
    })?;
    Ok((config, llm))
}

/// A case's agent, task or crew as a mapping of its fields, unset ones left out.
fn spec_fields(spec: &impl Serialize, what: &str) -> Result<Map<String, Value>, RunError> {
    match serde_json::to_value(spec) {
        Ok(Value::Object(mut fields)) => {
            fields.retain(|_, value| !value.is_null());
            Ok(fields)
        }
        Ok(other) => Err(RunError::Invalid(format!(
            "{what} is not a mapping of fields: {other}"
        ))),
        Err(e) => Err(RunError::Invalid(format!("{what}: {e}"))),
    }
}

/// Drops the Python-only flags from the LLM mappings among `keys`.
fn strip_python_only(fields: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        if let Some(Value::Object(llm)) = fields.get_mut(*key) {
            for flag in PYTHON_ONLY_LLM_KEYS {
                llm.remove(*flag);
            }
        }
    }
}

/// A catalog guardrail as a spec writes it: `llm {description}` is CrewAI's guardrail in
/// words, which a spec gives as the text itself (checked by the agent's model); every other kind
/// stays a mapping, the code [`CatalogCode`] supplies.
fn guardrail_value(value: &mut Value) {
    if value.get("kind").and_then(Value::as_str) == Some("llm")
        && let Some(description) = value.get("description").cloned()
    {
        *value = description;
    }
}

fn agent_value(name: &str, spec: &AgentSpec) -> Result<Value, RunError> {
    let mut fields = spec_fields(spec, &format!("agent `{name}`"))?;
    strip_python_only(&mut fields, &["llm", "function_calling_llm"]);
    if let Some(guardrail) = fields.get_mut("guardrail") {
        guardrail_value(guardrail);
    }
    Ok(Value::Object(fields))
}

/// How a task is handed over: with its tools, or without them (mode task passes them to the
/// execution instead); with an agent for a task that names none (mode task: the case's agent).
struct TaskShape<'a> {
    tools: bool,
    agent: Option<&'a str>,
}

fn task_value(spec: &TaskSpec, shape: &TaskShape<'_>) -> Result<Value, RunError> {
    if spec.human_input {
        return Err(RunError::Unsupported(format!(
            "task `{}` asks for human input, which a replay cannot give",
            spec.name
        )));
    }
    let mut fields = spec_fields(spec, &format!("task `{}`", spec.name))?;
    // The argument of agent.execute_task in mode task, not a Task field.
    fields.remove("context_text");
    if !shape.tools {
        fields.remove("tools");
    }
    if let Some(guardrail) = fields.get_mut("guardrail") {
        guardrail_value(guardrail);
    }
    match fields.get_mut("guardrails") {
        Some(Value::Array(list)) if list.is_empty() => {
            fields.remove("guardrails");
        }
        Some(Value::Array(list)) => list.iter_mut().for_each(guardrail_value),
        _ => {}
    }
    if let (None, Some(agent)) = (&spec.agent, shape.agent) {
        fields.insert("agent".into(), Value::String(agent.to_string()));
    }
    Ok(Value::Object(fields))
}

fn crew_value(spec: &CrewSpec) -> Result<Value, RunError> {
    let mut fields = spec_fields(spec, "crew")?;
    // A flow method's crew lists its members; the project is made of them instead.
    fields.remove("agents");
    fields.remove("tasks");
    strip_python_only(&mut fields, &["manager_llm", "function_calling_llm"]);
    Ok(Value::Object(fields))
}

/// Everything one case's builds share: its test tools (each built once and shared, as one
/// Python tool object is), its hooks, and the crewai-project options that wire them in.
pub(crate) struct World<'a> {
    case: &'a Case,
    pub(crate) env: &'a RunEnv,
    tools: BTreeMap<String, ToolHandle>,
    hooks: Hooks,
    options: BuildOptions,
}

impl<'a> World<'a> {
    fn new(case: &'a Case, env: &'a RunEnv) -> Result<World<'a>, RunError> {
        let tools: BTreeMap<String, ToolHandle> = case
            .tools
            .iter()
            .map(|(name, spec)| (name.clone(), build_tool(name, spec, &env.tool_runs)))
            .collect();
        let hooks =
            crate::catalog::build_hooks(&case.hooks, &env.hook_log).map_err(RunError::Invalid)?;
        let mut registry = ToolRegistry::new();
        for handle in tools.values() {
            registry.register_handle(handle.clone());
        }
        // The registry finds a tool by its name with case, separators and a `Tool` suffix
        // ignored: two test tools it cannot tell apart would silently become one.
        for name in tools.keys() {
            let found = registry.resolve(&ToolRef {
                name: name.clone(),
                args: Map::new(),
            });
            if !found.is_ok_and(|handle| handle.original_name() == name) {
                return Err(RunError::Invalid(format!(
                    "test tool `{name}` cannot be told apart by name from another of the case's tools"
                )));
            }
        }
        let (provider, server_url) = (case.provider, env.server_url.clone());
        let rate_limits = env.rate_limits.clone();
        let mut options = BuildOptions::new(registry)
            .with_event_bus(env.bus.clone())
            .with_hooks(hooks.clone())
            // `verbose` only prints the run to stdout, which would interleave with the PASS/FAIL
            // report of cases running in parallel.
            .with_verbose(false)
            .with_llm_factory(move |config| {
                let config = point_at_replay(config.clone(), provider, &server_url)
                    .map_err(LlmError::Config)?;
                build_isolated(&config)
            })
            .with_rate_limiters(move |owner, max_rpm| {
                let scope = match owner {
                    RateLimitOwner::Agent { role, .. } => RateLimitScope::Agent(role.to_string()),
                    RateLimitOwner::Crew => RateLimitScope::Crew,
                };
                rate_limits.limiter(scope, max_rpm)
            })
            .with_code_resolver(Arc::new(CatalogCode));
        // The case's `llm` is the model of every agent that names none.
        if let Some(fields) = &case.llm {
            options = options.with_default_llm(parse_llm_fields(fields)?);
        }
        Ok(World {
            case,
            env,
            tools,
            hooks,
            options,
        })
    }

    fn tools(&self, names: &[String]) -> Result<Vec<ToolHandle>, RunError> {
        names
            .iter()
            .map(|n| {
                self.tools
                    .get(n)
                    .cloned()
                    .ok_or_else(|| RunError::Invalid(format!("unknown tool `{n}`")))
            })
            .collect()
    }

    /// The project of the named agents, the given task values and the crew's fields.
    fn project(
        &self,
        agents: &[&String],
        tasks: Vec<Value>,
        crew: Option<&CrewSpec>,
    ) -> Result<Project, RunError> {
        let mut values = ProjectValues {
            tasks,
            crew: crew.map(crew_value).transpose()?,
            ..ProjectValues::default()
        };
        for name in agents {
            let spec = self
                .case
                .agents
                .get(name)
                .ok_or_else(|| RunError::Invalid(format!("unknown agent `{name}`")))?;
            values
                .agents
                .insert(name.to_string(), agent_value(name, spec)?);
        }
        // Relative paths (`output_file`) are the run's working directory's, as in the Python
        // test (the process never changes directory).
        Ok(Project::from_values(
            &self.env.workdir,
            SourceFile::without_text("case.yaml"),
            values,
        )?)
    }

    /// Agent `name` on its own, for Agent.kickoff.
    pub(crate) fn agent(&self, name: &str) -> Result<Agent, RunError> {
        let agents: Vec<&String> = self.case.agents.keys().collect();
        Ok(self
            .project(&agents, Vec::new(), None)?
            .build_agent(name, &self.options)?)
    }

    /// A crew of `spec`'s fields over the named agents (the manager too) and tasks.
    fn crew(
        &self,
        spec: &CrewSpec,
        agent_names: &[String],
        tasks: &[&TaskSpec],
        store: Option<Arc<dyn TaskOutputStore>>,
    ) -> Result<Crew, RunError> {
        let mut agents: Vec<&String> = agent_names.iter().collect();
        if let Some(manager) = &spec.manager_agent
            && !agents.contains(&manager)
        {
            agents.push(manager);
        }
        let shape = TaskShape {
            tools: true,
            agent: None,
        };
        let tasks = tasks
            .iter()
            .map(|t| task_value(t, &shape))
            .collect::<Result<Vec<_>, _>>()?;
        let project = self.project(&agents, tasks, Some(spec))?;
        let options = match store {
            Some(store) => self.options.clone().with_task_output_store(store),
            None => self.options.clone(),
        };
        Ok(project.build_crew(&options)?)
    }

    /// A flow method's crew: its `agents` and `tasks`, by name, with its other fields.
    pub(crate) fn flow_crew(&self, spec: &CrewSpec, method: &str) -> Result<Crew, RunError> {
        let agents = spec.agents.clone().unwrap_or_default();
        let tasks = spec
            .tasks
            .iter()
            .flatten()
            .map(|n| {
                self.case
                    .tasks
                    .iter()
                    .find(|t| &t.name == n)
                    .ok_or_else(|| {
                        RunError::Invalid(format!("flow method `{method}`: unknown task `{n}`"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.crew(spec, &agents, &tasks, None)
    }

    /// The crew of `mode: crew` / `mode: replay`: every agent (the manager apart), every task.
    fn case_crew(&self, store: Option<Arc<dyn TaskOutputStore>>) -> Result<Crew, RunError> {
        let spec = self.case.crew.clone().unwrap_or_default();
        let names: Vec<String> = self.case.agents.keys().cloned().collect();
        let tasks: Vec<&TaskSpec> = self.case.tasks.iter().collect();
        self.crew(&spec, &names, &tasks, store)
    }
}

/// The inputs of a kickoff (absent: none, so nothing is interpolated).
fn inputs(map: Option<&Map<String, Value>>) -> BTreeMap<String, Value> {
    map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

fn messages(spec: &MessageSpec) -> Result<Vec<Message>, RunError> {
    match spec {
        MessageSpec::Text(text) => Ok(vec![Message::user(text)]),
        MessageSpec::Messages(items) => items
            .iter()
            .map(|m| match m.role.as_str() {
                "user" => Ok(Message::user(&m.content)),
                "system" => Ok(Message::system(&m.content)),
                "assistant" => Ok(Message::assistant(&m.content)),
                other => Err(RunError::Invalid(format!(
                    "message role `{other}` (use user, system or assistant)"
                ))),
            })
            .collect(),
    }
}

pub(crate) fn kickoff_input(spec: &MessageSpec) -> Result<KickoffInput, RunError> {
    Ok(match spec {
        MessageSpec::Text(text) => KickoffInput::Text(text.clone()),
        MessageSpec::Messages(_) => KickoffInput::Messages(messages(spec)?),
    })
}

/// The schema's name as OpenAI wants it (`[a-zA-Z0-9_-]`), from its title.
fn response_format(schema: &Value) -> ResponseFormat {
    let title = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("response");
    let name: String = title
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    ResponseFormat {
        name: if name.is_empty() {
            "response".into()
        } else {
            name
        },
        schema: schema.clone(),
        strict: true,
    }
}

/// The agent a mode-agent or mode-task case runs: the named one, else the only/first one.
fn default_agent_name(case: &Case) -> Result<String, RunError> {
    case.agents
        .keys()
        .next()
        .cloned()
        .ok_or_else(|| RunError::Invalid("the case has no agent".into()))
}

async fn run_llm(case: &Case, env: &RunEnv, world: &World<'_>) -> Result<Execution, RunError> {
    let (config, llm) = build_case_llm(case, case.llm.as_ref(), env)?;
    let llm: Arc<dyn Llm> = if case.hooks.is_empty() {
        llm
    } else {
        Arc::new(
            crewai_llm::LayeredLlm::builder(llm)
                .layer(HooksLayer::new(world.hooks.clone()))
                .build(),
        )
    };
    let message = case
        .message
        .as_ref()
        .ok_or_else(|| RunError::Invalid("mode llm needs `message`".into()))?;
    let request = LlmRequest::new(messages(message)?);
    let result = if config.stream {
        match llm.stream(request).await {
            Ok(mut stream) => {
                let mut chunks = 0;
                let mut done = None;
                let mut failure = None;
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(StreamEvent::TextDelta(text)) if !text.is_empty() => chunks += 1,
                        Ok(StreamEvent::Done(response)) => done = Some(response),
                        Ok(_) => {}
                        Err(e) => {
                            failure = Some(error_chain(&e));
                            break;
                        }
                    }
                }
                match (failure, done) {
                    (Some(e), _) => Err(e),
                    (None, Some(response)) => Ok((response, Some(chunks))),
                    (None, None) => Err("the stream ended without a final response".to_string()),
                }
            }
            Err(e) => Err(error_chain(&e)),
        }
    } else {
        llm.call(request)
            .await
            .map(|r| (r, None))
            .map_err(|e| error_chain(&e))
    };
    Ok(Execution::of(result.map(|(response, text_deltas)| {
        vec![
            LlmReply {
                response,
                text_deltas,
            }
            .to_output(),
        ]
    })))
}

async fn run_agent(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let name = default_agent_name(case)?;
    let agent = world.agent(&name)?;
    let message = case
        .message
        .as_ref()
        .ok_or_else(|| RunError::Invalid("mode agent needs `message`".into()))?;
    let input = kickoff_input(message)?;
    let result = match &case.response_format {
        Some(schema) => {
            agent
                .kickoff_with_format(input, response_format(schema))
                .await
        }
        None => agent.kickoff(input).await,
    };
    Ok(Execution::of(
        result
            .map_err(|e| error_chain(&e))
            .map(|out| vec![out.to_output()]),
    ))
}

/// Mode task: each task in order, by its agent (or the case's only agent), with no crew.
/// Mode task: each task in order, by its agent (or the case's first agent), with no crew.
async fn run_tasks(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let fallback = default_agent_name(case)?;
    // A guarded task runs with Task.execute_sync (its tools its own); the others as
    // agent.execute_task(task, context, tools), so their tools are the call's.
    let tasks = case
        .tasks
        .iter()
        .map(|spec| {
            let shape = TaskShape {
                tools: !spec.all_guardrails().is_empty(),
                agent: Some(&fallback),
            };
            task_value(spec, &shape)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let agents: Vec<&String> = case.agents.keys().collect();
    let parts = world
        .project(&agents, tasks, None)?
        .build_parts(&world.options)?;
    let mut outputs = Vec::new();
    for (spec, (_, task)) in case.tasks.iter().zip(&parts.tasks) {
        let agent_name = spec.agent.as_deref().unwrap_or(&fallback);
        let agent = parts
            .agents
            .iter()
            .find(|(key, _)| key == agent_name)
            .map(|(_, agent)| agent)
            .ok_or_else(|| RunError::Invalid(format!("unknown agent `{agent_name}`")))?;
        let result = if spec.all_guardrails().is_empty() {
            let tools = spec
                .tools
                .as_ref()
                .map(|names| world.tools(names))
                .transpose()?;
            // CrewAI's agent.execute_task(task, context, tools): the engine spells it
            // Task::execute_with.
            task.execute_with(Some(agent), spec.context_text.as_deref(), tools)
                .await
                .map_err(|e| error_chain(&e))
        } else {
            task.execute(Some(agent)).await.map_err(|e| error_chain(&e))
        };
        match result {
            Ok(output) => outputs.push(output),
            Err(e) => return Ok(Execution::of(Err(e))),
        }
    }
    if outputs.is_empty() {
        return Err(RunError::Invalid(
            "mode task needs at least one task".into(),
        ));
    }
    Ok(Execution::of(Ok(vec![outputs.as_slice().to_output()])))
}

fn manager_tools(crew: &Crew) -> Option<Vec<ToolInfo>> {
    (crew.process() == Process::Hierarchical).then(|| {
        crew.manager_tools()
            .iter()
            .map(|t| ToolInfo {
                name: t.name().to_string(),
                description: t.description().to_string(),
            })
            .collect()
    })
}

async fn run_crew(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let crew = world.case_crew(None)?;
    let streaming = case.crew.as_ref().and_then(|c| c.stream).unwrap_or(false);
    let runs: Vec<BTreeMap<String, Value>> = match &case.inputs_for_each {
        Some(each) => each.iter().map(|m| inputs(Some(m))).collect(),
        None => vec![inputs(case.inputs.as_ref())],
    };
    let mut outputs = Vec::new();
    if streaming {
        // CrewAI's kickoff_for_each on a streaming crew hands back one streaming output per input,
        // each running its own crew copy when iterated: the same, one after the other, here.
        let for_each = case.inputs_for_each.is_some();
        for run in runs {
            let stream = if for_each {
                crew.copy().kickoff_stream(run)
            } else {
                crew.kickoff_stream(run)
            };
            match consume(stream).await {
                Ok(streamed) => outputs.push(streamed.to_output()),
                Err(e) => {
                    return Ok(Execution {
                        outputs: Err(error_chain(&e)),
                        manager_tools: manager_tools(&crew),
                    });
                }
            }
        }
    } else if case.inputs_for_each.is_some() {
        match crew.kickoff_for_each(runs).await {
            Ok(all) => outputs.extend(all.iter().map(Returned::to_output)),
            Err(e) => {
                return Ok(Execution {
                    outputs: Err(error_chain(&e)),
                    manager_tools: manager_tools(&crew),
                });
            }
        }
    } else {
        let only = runs.into_iter().next().unwrap_or_default();
        match crew.kickoff(only).await {
            Ok(out) => outputs.push(out.to_output()),
            Err(e) => {
                return Ok(Execution {
                    outputs: Err(error_chain(&e)),
                    manager_tools: manager_tools(&crew),
                });
            }
        }
    }
    Ok(Execution {
        outputs: Ok(outputs),
        manager_tools: manager_tools(&crew),
    })
}

/// Mode replay: the store holds an earlier kickoff's outputs; replay from `replay.task`.
async fn run_replay(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let replay = case
        .replay
        .as_ref()
        .ok_or_else(|| RunError::Invalid("mode replay needs `replay`".into()))?;
    let store = InMemoryTaskOutputStore::new();
    let crew = world.case_crew(Some(Arc::new(store.clone())))?;
    for (index, row) in replay.stored.iter().enumerate() {
        let mut fields = row.output.clone();
        fields
            .entry("name")
            .or_insert_with(|| Value::String(row.task.clone()));
        let output: TaskOutput = serde_json::from_value(Value::Object(fields)).map_err(|e| {
            RunError::Invalid(format!(
                "replay.stored[{index}].output is not a TaskOutput: {e}"
            ))
        })?;
        let task_id = crew
            .tasks()
            .iter()
            .find(|t| t.name() == Some(row.task.as_str()))
            .map(|t| t.id().to_string())
            .ok_or_else(|| {
                RunError::Invalid(format!("replay.stored[{index}]: no task `{}`", row.task))
            })?;
        store
            .save(StoredTaskOutput {
                task_id,
                task_name: Some(row.task.clone()),
                task_index: index,
                output,
                inputs: inputs(Some(&row.inputs)),
                was_replayed: false,
                timestamp: Default::default(),
            })
            .await
            .map_err(|e| RunError::Failed(error_chain(&e)))?;
    }
    let result = crew.replay(&replay.task, None).await;
    Ok(Execution {
        outputs: result
            .map(|out| vec![out.to_output()])
            .map_err(|e| error_chain(&e)),
        manager_tools: manager_tools(&crew),
    })
}

/// Builds and runs `case`.
pub async fn execute(case: &Case, env: &RunEnv) -> Result<Execution, RunError> {
    let world = World::new(case, env)?;
    match case.mode {
        Mode::Llm => run_llm(case, env, &world).await,
        Mode::Agent => run_agent(case, &world).await,
        Mode::Task => run_tasks(case, &world).await,
        Mode::Crew => run_crew(case, &world).await,
        Mode::Replay => run_replay(case, &world).await,
        Mode::Flow => crate::flow_mode::run_flow(case, &world).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{HookLog, RateLimits, ToolRuns};
    use serde_json::json;

    fn env() -> RunEnv {
        RunEnv {
            server_url: "http://127.0.0.1:9".into(),
            bus: Default::default(),
            tool_runs: ToolRuns::default(),
            rate_limits: RateLimits::default(),
            hook_log: HookLog::default(),
            workdir: std::env::temp_dir(),
        }
    }

    fn case(yaml: &str) -> Case {
        Case::parse(yaml, std::path::Path::new("case.yaml")).unwrap()
    }

    fn fields(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn llm_config_points_at_the_replay_server() {
        let c = case("name: x\n");
        let config = llm_config(&c, None, &env()).unwrap();
        assert_eq!(config.model, DEFAULT_MODEL);
        assert_eq!(config.provider.as_deref(), Some("openai"));
        assert_eq!(config.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(config.api_key.as_deref(), Some("test"));
        let config = llm_config(&c, Some(&fields(json!({"model": "gpt-4o-mini", "is_litellm": true, "stream": true, "temperature": 0.7}))), &env()).unwrap();
        assert!(config.stream);
        assert_eq!(config.temperature, Some(0.7));
        let anthropic = case("name: x\nprovider: anthropic\n");
        assert_eq!(
            llm_config(&anthropic, None, &env())
                .unwrap()
                .base_url
                .as_deref(),
            Some("http://127.0.0.1:9")
        );
        let responses =
            llm_config(&case("name: x\nprovider: openai_responses\n"), None, &env()).unwrap();
        assert_eq!(responses.api, Some(OpenAiApi::Responses));
        let error = llm_config(
            &c,
            Some(&fields(json!({"model": "m", "temprature": 1}))),
            &env(),
        )
        .unwrap_err();
        assert!(matches!(error, RunError::Invalid(_)), "{error}");
    }

    #[test]
    fn case_specs_go_over_as_written_with_the_case_only_parts_rewritten() {
        let c = case(
            r#"
name: x
tools:
  t: {behaviour: {kind: counter}}
agents:
  a:
    role: R
    llm: {model: gpt-4o, is_litellm: true}
    guardrail: {kind: llm, description: Be brief}
    max_execution_time: 1.5
tasks:
  - {name: one, description: d, expected_output: e, tools: [t], context_text: earlier, guardrails: [{kind: always_pass}]}
  - {name: two, description: d, expected_output: e, agent: a, condition: {kind: always, value: true}}
crew: {process: sequential, agents: [a], tasks: [one], manager_llm: {model: gpt-4o, is_litellm: true}}
"#,
        );
        let agent = agent_value("a", c.agents.get("a").unwrap()).unwrap();
        assert_eq!(
            agent,
            json!({"role": "R", "goal": "", "backstory": "", "llm": {"model": "gpt-4o"}, "tools": [], "guardrail": "Be brief", "max_execution_time": 1.5})
        );
        let shape = TaskShape {
            tools: false,
            agent: Some("a"),
        };
        let one = task_value(&c.tasks[0], &shape).unwrap();
        assert_eq!(
            one,
            json!({"name": "one", "description": "d", "expected_output": "e", "agent": "a", "async_execution": false, "markdown": false, "human_input": false, "guardrails": [{"kind": "always_pass"}]})
        );
        let two = task_value(&c.tasks[1], &shape).unwrap();
        assert_eq!(two["condition"], json!({"kind": "always", "value": true}));
        assert!(two.get("guardrails").is_none());
        let crew = crew_value(c.crew.as_ref().unwrap()).unwrap();
        assert_eq!(
            crew,
            json!({"process": "sequential", "manager_llm": {"model": "gpt-4o"}})
        );
        let mut human = c.tasks[0].clone();
        human.human_input = true;
        assert!(matches!(
            task_value(&human, &shape),
            Err(RunError::Unsupported(_))
        ));
    }

    #[test]
    fn crews_are_built_by_crewai_project_with_the_catalog_wired_in() {
        let c = case(
            r#"
name: x
tools:
  multiplier: {description: Multiplies., args: {a: integer, b: integer}, behaviour: {kind: multiply}}
agents:
  math: {role: Math, goal: g, backstory: b, tools: [multiplier], max_rpm: 10, max_execution_time: 2}
tasks:
  - {name: one, description: d, expected_output: e, agent: math, guardrail: {kind: max_words, n: 3}}
  - {name: two, description: d, expected_output: e, agent: math, condition: {kind: previous_contains, text: x}}
crew: {max_rpm: 5}
"#,
        );
        let env = env();
        let world = World::new(&c, &env).unwrap();
        let crew = world.case_crew(None).unwrap();
        assert_eq!(crew.name(), "crew");
        let agent = &crew.agents()[0];
        assert_eq!(agent.tools()[0].name(), "multiplier");
        assert_eq!(agent.max_execution_time(), Some(Duration::from_secs(2)));
        assert!(agent.rate_limiter().is_some());
        assert_eq!(crew.tasks()[0].guardrails().len(), 1);
        assert!(crew.tasks()[1].is_conditional());
        let scopes: Vec<RateLimitScope> = env
            .rate_limits
            .snapshot()
            .into_iter()
            .map(|made| made.scope)
            .collect();
        assert_eq!(
            scopes,
            [RateLimitScope::Agent("Math".into()), RateLimitScope::Crew]
        );

        // CrewAI's own rules are crewai-project's checks, with the field named.
        let wrong = case(
            "name: x\nagents: {a: {role: R}}\ntasks: [{name: t, description: d, expected_output: e}]\n",
        );
        let error = World::new(&wrong, &env)
            .unwrap()
            .case_crew(None)
            .unwrap_err();
        assert!(
            matches!(&error, RunError::Invalid(text) if text.contains("case.yaml: task 't' has no agent")),
            "{error}"
        );
    }

    #[test]
    fn tools_the_registry_cannot_tell_apart_are_refused() {
        let c = case(
            "name: x\ntools:\n  lookup: {behaviour: {kind: counter}}\n  LookupTool: {behaviour: {kind: counter}}\n",
        );
        let error = World::new(&c, &env()).err().unwrap();
        assert!(
            error.to_string().contains("cannot be told apart"),
            "{error}"
        );
    }

    #[test]
    fn response_format_names_come_from_titles() {
        assert_eq!(
            response_format(&json!({"title": "Simple Output!", "type": "object"})).name,
            "SimpleOutput"
        );
        assert_eq!(response_format(&json!({"type": "object"})).name, "response");
    }
}
