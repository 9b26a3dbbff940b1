//! Builds what a case describes through the public API, exactly as a user would, and runs it:
//! a crew kickoff, an agent kickoff, tasks run by an agent, a bare LLM call, or a crew replay.
//! Also the catalog's guardrails and conditions, which attach to agents and tasks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crewai_core::agent::{Agent, KickoffInput};
use crewai_core::crew::{Crew, Process};
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::hooks::{HookedLlm, Hooks};
use crewai_core::output::TaskOutput;
use crewai_core::store::{InMemoryTaskOutputStore, StoredTaskOutput, TaskOutputStore};
use crewai_core::task::Task;
use crewai_llm::{
    BuildOptions, DEFAULT_MODEL, Llm, LlmConfig, LlmRequest, Message, OpenAiApi, ProviderRegistry,
    ResponseFormat, StreamEvent, build_llm_with,
};
use crewai_tools::ToolHandle;
use futures::StreamExt;
use serde_json::{Map, Value};

use crate::case::{
    AgentSpec, Case, ConditionSpec, CrewSpec, GuardrailSpec, MessageSpec, Mode, ProcessSpec,
    Provider, TaskSpec,
};
use crate::catalog::build_tool;
use crate::outcome::{Output, RateLimitScope, ToolInfo};
use crate::returned::{LlmReply, Returned, consume};
use crate::runner::RunEnv;

/// Why a case could not be run to a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    /// The case needs something the engine does not have yet.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The case cannot be built as written.
    #[error("invalid case: {0}")]
    Invalid(String),
    /// Building failed in the engine (a builder rejected the configuration).
    #[error("{0}")]
    Failed(String),
    #[error("timed out after {} s (the run's overall deadline)", .0.as_secs())]
    Timeout(Duration),
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

/// The LLM config for `fields` (CrewAI names), pointed at the replay server.
pub fn llm_config(
    case: &Case,
    fields: Option<&Map<String, Value>>,
    env: &RunEnv,
) -> Result<LlmConfig, RunError> {
    let mut fields = fields.cloned().unwrap_or_default();
    for key in PYTHON_ONLY_LLM_KEYS {
        fields.remove(*key);
    }
    let mut config: LlmConfig = serde_json::from_value(Value::Object(fields.clone()))
        .map_err(|e| RunError::Invalid(format!("llm {}: {e}", Value::Object(fields))))?;
    if config.model.is_empty() {
        config.model = DEFAULT_MODEL.to_string();
    }
    // The case names the API its cassette recorded (the Responses API is OpenAI's); the
    // provider registry says where that provider's API lives, here on the replay server.
    let provider = match case.provider {
        Provider::Openai | Provider::OpenaiResponses => "openai",
        Provider::Anthropic => "anthropic",
        Provider::Gemini => "gemini",
        Provider::Azure => "azure",
    };
    if case.provider == Provider::OpenaiResponses {
        config.api = Some(OpenAiApi::Responses);
    }
    let descriptor = ProviderRegistry::builtin()
        .get(provider)
        .cloned()
        .ok_or_else(|| RunError::Invalid(format!("no provider '{provider}' is registered")))?;
    if config.provider.is_none() && !config.model.contains('/') {
        config.provider = Some(descriptor.name.clone());
    }
    config.base_url = Some(descriptor.base_url_at(&env.server_url));
    config.api_key = Some("test".into());
    if case.provider == Provider::Azure && config.api_version.is_none() {
        config.api_version = Some("2024-06-01".into());
    }
    Ok(config)
}

/// Builds the client for `fields` the way a user's code would, with no process environment
/// leaking in (no `OPENAI_BASE_URL`, no `MODEL`).
pub fn build_case_llm(
    case: &Case,
    fields: Option<&Map<String, Value>>,
    env: &RunEnv,
) -> Result<(LlmConfig, Arc<dyn Llm>), RunError> {
    let config = llm_config(case, fields, env)?;
    let options = BuildOptions::new().with_env(|_| None);
    let llm = build_llm_with(&config, &options)
        .map_err(|e| RunError::Failed(format!("building LLM `{}`: {e}", config.model)))?;
    Ok((config, llm))
}

/// The guardrail a catalog entry describes.
pub fn build_guardrail(spec: &GuardrailSpec) -> Guardrail {
    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }
    match spec.clone() {
        GuardrailSpec::Llm { description } => Guardrail::llm(description),
        GuardrailSpec::MaxWords { n } => Guardrail::named("max_words", move |out: &TaskOutput| {
            let count = words(&out.raw);
            if count <= n {
                Ok(GuardrailPass::Keep)
            } else {
                Err(format!(
                    "The output has {count} words; it must have at most {n}."
                ))
            }
        }),
        GuardrailSpec::Contains { text } => {
            Guardrail::named("contains", move |out: &TaskOutput| {
                if out.raw.contains(&text) {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err(format!("The output must contain \"{text}\"."))
                }
            })
        }
        GuardrailSpec::ContainsAll { texts } => {
            Guardrail::named("contains_all", move |out: &TaskOutput| {
                let missing: Vec<&String> = texts
                    .iter()
                    .filter(|t| !out.raw.contains(t.as_str()))
                    .collect();
                if missing.is_empty() {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err(format!("The output must contain each of: {missing:?}."))
                }
            })
        }
        GuardrailSpec::AlwaysFail { message } => {
            Guardrail::named("always_fail", move |_: &TaskOutput| Err(message.clone()))
        }
        GuardrailSpec::AlwaysPass => {
            Guardrail::named("always_pass", |_: &TaskOutput| Ok(GuardrailPass::Keep))
        }
        GuardrailSpec::Replace { value } => Guardrail::named("replace", move |_: &TaskOutput| {
            Ok(match &value {
                Value::String(text) => GuardrailPass::Raw(text.clone()),
                other => GuardrailPass::Typed(other.clone()),
            })
        }),
        GuardrailSpec::FailThenPass { message, failures } => {
            let calls = AtomicU32::new(0);
            Guardrail::named("fail_then_pass", move |_: &TaskOutput| {
                if calls.fetch_add(1, Ordering::SeqCst) < failures {
                    Err(message.clone())
                } else {
                    Ok(GuardrailPass::Keep)
                }
            })
        }
    }
}

/// A ConditionalTask's condition over the previous task's output.
fn condition(spec: &ConditionSpec) -> impl Fn(&TaskOutput) -> bool + Send + Sync + 'static {
    let spec = spec.clone();
    move |previous: &TaskOutput| match &spec {
        ConditionSpec::Always { value } => *value,
        ConditionSpec::PreviousContains { text } => previous.raw.contains(text.as_str()),
    }
}

/// Everything built for one case: its tools (each built once and shared, as one Python tool
/// object is), agents by name, hooks.
pub(crate) struct World<'a> {
    case: &'a Case,
    pub(crate) env: &'a RunEnv,
    tools: BTreeMap<String, ToolHandle>,
    hooks: Hooks,
}

/// Where hooks and the event bus attach: to the crew, or to each agent when there is none.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Crew,
    Standalone,
}

impl<'a> World<'a> {
    fn new(case: &'a Case, env: &'a RunEnv) -> Result<World<'a>, RunError> {
        let tools = case
            .tools
            .iter()
            .map(|(name, spec)| (name.clone(), build_tool(name, spec, &env.tool_runs)))
            .collect();
        let hooks =
            crate::catalog::build_hooks(&case.hooks, &env.hook_log).map_err(RunError::Invalid)?;
        Ok(World {
            case,
            env,
            tools,
            hooks,
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

    fn agent_spec(&self, name: &str) -> Result<&'a AgentSpec, RunError> {
        self.case
            .agents
            .get(name)
            .ok_or_else(|| RunError::Invalid(format!("unknown agent `{name}`")))
    }

    pub(crate) fn agent(&self, name: &str, scope: Scope) -> Result<Agent, RunError> {
        let spec = self.agent_spec(name)?;
        let llm_fields = spec.llm.as_ref().or(self.case.llm.as_ref());
        let (_, llm) = build_case_llm(self.case, llm_fields, self.env)?;
        let mut builder = Agent::builder()
            .role(&spec.role)
            .goal(&spec.goal)
            .backstory(&spec.backstory)
            .llm(llm)
            .tools(self.tools(&spec.tools)?);
        if let Some(fields) = &spec.function_calling_llm {
            builder =
                builder.function_calling_llm(build_case_llm(self.case, Some(fields), self.env)?.1);
        }
        if let Some(v) = spec.allow_delegation {
            builder = builder.allow_delegation(v);
        }
        if let Some(v) = spec.max_iter {
            builder = builder.max_iter(v);
        }
        if let Some(v) = spec.max_rpm {
            builder = builder.max_rpm(v).rate_limiter(
                self.env
                    .rate_limits
                    .limiter(RateLimitScope::Agent(spec.role.clone()), v),
            );
        }
        if let Some(seconds) = spec.max_execution_time {
            builder = builder.max_execution_time(Duration::from_secs_f64(seconds.max(0.0)));
        }
        if let Some(v) = spec.max_retry_limit {
            builder = builder.max_retry_limit(v);
        }
        // `verbose` is not passed on: it only prints the run to stdout, which would interleave
        // with the PASS/FAIL report of cases running in parallel.
        if let Some(v) = spec.cache {
            builder = builder.cache(v);
        }
        if let Some(v) = spec.use_system_prompt {
            builder = builder.use_system_prompt(v);
        }
        if let Some(v) = spec.respect_context_window {
            builder = builder.respect_context_window(v);
        }
        if let Some(v) = spec.inject_date {
            builder = builder.inject_date(v);
        }
        if let Some(v) = &spec.date_format {
            builder = builder.date_format(v);
        }
        if let Some(v) = &spec.system_template {
            builder = builder.system_template(v);
        }
        if let Some(v) = &spec.prompt_template {
            builder = builder.prompt_template(v);
        }
        if let Some(v) = &spec.response_template {
            builder = builder.response_template(v);
        }
        if let Some(g) = &spec.guardrail {
            builder = builder.guardrail(build_guardrail(g));
        }
        if let Some(v) = spec.guardrail_max_retries {
            builder = builder.guardrail_max_retries(v);
        }
        if scope == Scope::Standalone {
            builder = builder
                .event_bus(self.env.bus.clone())
                .hooks(self.hooks.clone());
        }
        builder
            .build()
            .map_err(|e| RunError::Failed(format!("building agent `{name}`: {e}")))
    }

    /// A task; `agents` resolves its `agent:` name. `with_tools` false leaves the task's tools
    /// out (mode task passes them to execute_task instead).
    fn task(
        &self,
        spec: &TaskSpec,
        agents: &BTreeMap<String, Agent>,
        with_tools: bool,
    ) -> Result<Task, RunError> {
        let mut builder = Task::builder()
            .name(&spec.name)
            .description(&spec.description)
            .expected_output(&spec.expected_output);
        if let Some(name) = &spec.agent {
            let agent = agents.get(name).ok_or_else(|| {
                RunError::Invalid(format!(
                    "task `{}`: agent `{name}` is not in this crew",
                    spec.name
                ))
            })?;
            builder = builder.agent(agent.clone());
        }
        match &spec.context {
            Some(names) if names.is_empty() => builder = builder.context_none(),
            Some(names) => builder = builder.context(names.clone()),
            None => {}
        }
        if with_tools && let Some(names) = &spec.tools {
            builder = builder.tools(self.tools(names)?);
        }
        if spec.async_execution {
            builder = builder.async_execution(true);
        }
        if let Some(schema) = &spec.output_json {
            builder = builder.output_json(schema.clone());
        }
        if let Some(schema) = &spec.output_pydantic {
            builder = builder.output_pydantic(schema.clone());
        }
        if let Some(file) = &spec.output_file {
            // Relative to the case's working directory (the process never changes directory).
            builder =
                builder.output_file(self.env.workdir.join(file).to_string_lossy().into_owned());
        }
        if let Some(v) = spec.create_directory {
            builder = builder.create_directory(v);
        }
        if spec.markdown {
            builder = builder.markdown(true);
        }
        if spec.human_input {
            return Err(RunError::Unsupported(format!(
                "task `{}` asks for human input, which a replay cannot give",
                spec.name
            )));
        }
        let guardrails: Vec<Guardrail> = spec
            .all_guardrails()
            .into_iter()
            .map(build_guardrail)
            .collect();
        if !guardrails.is_empty() {
            builder = builder.guardrails(guardrails);
        }
        if let Some(v) = spec.guardrail_max_retries {
            builder = builder.guardrail_max_retries(v);
        }
        if let Some(c) = &spec.condition {
            builder = builder.condition(condition(c));
        }
        builder
            .build()
            .map_err(|e| RunError::Failed(format!("building task `{}`: {e}", spec.name)))
    }

    /// A crew of the named agents and tasks with `spec`'s fields.
    pub(crate) fn crew(
        &self,
        spec: &CrewSpec,
        agent_names: &[String],
        tasks: &[&TaskSpec],
        store: Option<Arc<dyn TaskOutputStore>>,
    ) -> Result<Crew, RunError> {
        let mut agents = BTreeMap::new();
        let mut ordered = Vec::new();
        for name in agent_names {
            let agent = self.agent(name, Scope::Crew)?;
            ordered.push(agent.clone());
            agents.insert(name.clone(), agent);
        }
        let mut manager = None;
        if let Some(name) = &spec.manager_agent {
            let agent = self.agent(name, Scope::Crew)?;
            agents.insert(name.clone(), agent.clone());
            manager = Some(agent);
        }
        let tasks = tasks
            .iter()
            .map(|t| self.task(t, &agents, true))
            .collect::<Result<Vec<_>, _>>()?;
        let mut builder = Crew::builder()
            .agents(ordered)
            .tasks(tasks)
            .event_bus(self.env.bus.clone())
            .hooks(self.hooks.clone());
        if let Some(name) = &spec.name {
            builder = builder.name(name);
        }
        if spec.process == Some(ProcessSpec::Hierarchical) {
            builder = builder.process(Process::Hierarchical);
        }
        if let Some(fields) = &spec.manager_llm {
            builder = builder.manager_llm(build_case_llm(self.case, Some(fields), self.env)?.1);
        }
        if let Some(agent) = manager {
            builder = builder.manager_agent(agent);
        }
        if let Some(fields) = &spec.function_calling_llm {
            builder =
                builder.function_calling_llm(build_case_llm(self.case, Some(fields), self.env)?.1);
        }
        if let Some(v) = spec.cache {
            builder = builder.cache(v);
        }
        if let Some(v) = spec.max_rpm {
            builder = builder
                .max_rpm(v)
                .rate_limiter(self.env.rate_limits.limiter(RateLimitScope::Crew, v));
        }
        if let Some(v) = spec.memory {
            builder = builder.memory(v);
        }
        if let Some(v) = spec.planning {
            builder = builder.planning(v);
        }
        if let Some(v) = spec.stream {
            builder = builder.stream(v);
        }
        // `verbose` is not passed on (see `World::agent`).
        if let Some(store) = store {
            builder = builder.task_output_store(store);
        }
        builder
            .build()
            .map_err(|e| RunError::Failed(format!("building the crew: {e}")))
    }

    /// The crew of `mode: crew` / `mode: replay`: every agent except the manager, every task.
    fn case_crew(&self, store: Option<Arc<dyn TaskOutputStore>>) -> Result<Crew, RunError> {
        let spec = self.case.crew.clone().unwrap_or_default();
        let names: Vec<String> = self
            .case
            .agents
            .keys()
            .filter(|n| spec.manager_agent.as_deref() != Some(n.as_str()))
            .cloned()
            .collect();
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
        Arc::new(HookedLlm::new(llm, world.hooks.clone()))
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
                            failure = Some(e.to_string());
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
            Err(e) => Err(e.to_string()),
        }
    } else {
        llm.call(request)
            .await
            .map(|r| (r, None))
            .map_err(|e| e.to_string())
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
    let agent = world.agent(&name, Scope::Standalone)?;
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
            .map_err(|e| e.to_string())
            .map(|out| vec![out.to_output()]),
    ))
}

/// Mode task: each task in order, by its agent (or the case's only agent), with no crew.
async fn run_tasks(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let mut agents = BTreeMap::new();
    for name in case.agents.keys() {
        agents.insert(name.clone(), world.agent(name, Scope::Standalone)?);
    }
    let fallback = default_agent_name(case)?;
    let mut outputs = Vec::new();
    for spec in &case.tasks {
        let agent_name = spec.agent.clone().unwrap_or_else(|| fallback.clone());
        let agent = agents
            .get(&agent_name)
            .ok_or_else(|| RunError::Invalid(format!("unknown agent `{agent_name}`")))?;
        let guarded = !spec.all_guardrails().is_empty();
        let task = world.task(spec, &agents, guarded)?;
        let result = if guarded {
            task.execute(Some(agent)).await.map_err(|e| e.to_string())
        } else {
            let tools = spec
                .tools
                .as_ref()
                .map(|names| world.tools(names))
                .transpose()?;
            // CrewAI's agent.execute_task(task, context, tools): the engine spells it
            // Task::execute_with (api.md's Agent::execute_task is not there).
            task.execute_with(Some(agent), spec.context_text.as_deref(), tools)
                .await
                .map_err(|e| e.to_string())
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
                        outputs: Err(e.to_string()),
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
                    outputs: Err(e.to_string()),
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
                    outputs: Err(e.to_string()),
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
            .map_err(|e| RunError::Failed(e.to_string()))?;
    }
    let result = crew.replay(&replay.task, None).await;
    Ok(Execution {
        outputs: result
            .map(|out| vec![out.to_output()])
            .map_err(|e| e.to_string()),
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

    fn check(spec: &str, raw: &str) -> Result<GuardrailPass, String> {
        let spec: GuardrailSpec = yaml_serde::from_str(spec).unwrap();
        let guardrail = build_guardrail(&spec);
        guardrail
            .check_fn(&TaskOutput::new("d", "e", raw, "R"))
            .unwrap()
    }

    #[test]
    fn guardrails() {
        assert_eq!(
            check("{kind: max_words, n: 2}", "two words"),
            Ok(GuardrailPass::Keep)
        );
        assert!(
            check("{kind: max_words, n: 2}", "three words here")
                .unwrap_err()
                .contains("at most 2")
        );
        assert!(check("{kind: contains, text: x}", "abc").is_err());
        assert_eq!(
            check("{kind: contains_all, texts: [a, b]}", "a b"),
            Ok(GuardrailPass::Keep)
        );
        assert!(
            check("{kind: contains_all, texts: [a, z]}", "a b")
                .unwrap_err()
                .contains("\"z\"")
        );
        assert_eq!(
            check("{kind: always_fail, message: no}", "x"),
            Err("no".into())
        );
        assert_eq!(check("{kind: always_pass}", "x"), Ok(GuardrailPass::Keep));
        assert_eq!(
            check("{kind: replace, value: new}", "x"),
            Ok(GuardrailPass::Raw("new".into()))
        );
        assert_eq!(
            check("{kind: replace, value: {a: 1}}", "x"),
            Ok(GuardrailPass::Typed(json!({"a": 1})))
        );
        let twice: GuardrailSpec =
            yaml_serde::from_str("{kind: fail_then_pass, message: again, failures: 2}").unwrap();
        let guardrail = build_guardrail(&twice);
        let out = TaskOutput::new("d", "e", "x", "R");
        let verdicts: Vec<bool> = (0..3)
            .map(|_| guardrail.check_fn(&out).unwrap().is_ok())
            .collect();
        assert_eq!(verdicts, [false, false, true]);
        assert!(
            build_guardrail(&GuardrailSpec::Llm {
                description: "be nice".into()
            })
            .check_fn(&out)
            .is_none()
        );
    }

    #[test]
    fn conditions() {
        let out = TaskOutput::new("d", "e", "the answer is yes", "R");
        assert!(!condition(&ConditionSpec::Always { value: false })(&out));
        assert!(condition(&ConditionSpec::PreviousContains {
            text: "yes".into()
        })(&out));
        assert!(!condition(&ConditionSpec::PreviousContains {
            text: "no way".into()
        })(&out));
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
