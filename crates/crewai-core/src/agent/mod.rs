//! [`Agent`]: a role-playing worker with a model and tools (CrewAI's `Agent`).
//!
//! Build one with [`Agent::builder`]; run it alone with [`Agent::kickoff`] (CrewAI's LiteAgent), or
//! let a crew run it on tasks through [`Agent::run_task`].
//!
//! ```no_run
//! use crewai_core::agent::Agent;
//! use crewai_llm::{LlmConfig, build_llm};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder()
//!     .role("Researcher")
//!     .goal("Find accurate facts")
//!     .backstory("You check every claim twice.")
//!     .llm(build_llm(&LlmConfig::new("gpt-4o-mini"))?)
//!     .max_iter(10)
//!     .build()?;
//! let answer = agent.kickoff("What is the capital of Australia?").await?;
//! println!("{}", answer.raw);
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::{Llm, LlmConfig, LlmError, LlmLayer, Message, RateLimiter, Usage};
use crewai_tools::{ToolFailurePolicy, ToolHandle};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::a2a::A2aClientConfig;
use crate::error::AgentError;
use crate::events::EventBus;
use crate::guardrail::Guardrail;
use crate::hooks::Hooks;
use crate::mcp::McpServer;
use crate::reasoning::PlanningConfig;
use crate::setters::required;
use crate::skills::SkillSource;

mod standalone;
mod task;

/// One step of an agent's work, as `step_callback` sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentStep {
    /// A tool ran (or was refused: then `result` says why).
    ToolCall {
        tool: String,
        input: Value,
        result: String,
        thought: Option<String>,
    },
    /// The agent gave its final answer.
    FinalAnswer {
        output: String,
        thought: Option<String>,
    },
}

/// Called after every step of an agent (CrewAI's `step_callback`).
pub type StepCallback = Arc<dyn Fn(&AgentStep) + Send + Sync>;

pub(crate) use crate::agent_task::RunServices;
pub use crate::agent_task::{AgentTaskRequest, AgentTaskResult, DelegationChain};

/// What `Agent::kickoff` takes: a request text or a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum KickoffInput {
    Text(String),
    Messages(Vec<Message>),
}

impl From<&str> for KickoffInput {
    fn from(text: &str) -> Self {
        KickoffInput::Text(text.to_string())
    }
}

impl From<String> for KickoffInput {
    fn from(text: String) -> Self {
        KickoffInput::Text(text)
    }
}

impl From<Vec<Message>> for KickoffInput {
    fn from(messages: Vec<Message>) -> Self {
        KickoffInput::Messages(messages)
    }
}

/// What `Agent::kickoff` returns (CrewAI's `LiteAgentOutput`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentOutput {
    pub raw: String,
    /// The structured value (CrewAI's `pydantic`): from the response format or a guardrail.
    pub typed: Option<Value>,
    pub agent_role: String,
    pub messages: Vec<Message>,
    /// This kickoff's usage (CrewAI's `usage_metrics`).
    pub usage: Usage,
}

impl AgentOutput {
    /// The structured value deserialised into `T`.
    pub fn typed_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        let value = self
            .typed
            .as_ref()
            .ok_or_else(|| "the output has no structured value".to_string())?;
        serde_json::from_value(value.clone()).map_err(|e| e.to_string())
    }
}

impl fmt::Display for AgentOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[derive(Clone)]
pub(crate) struct AgentConfig {
    pub(crate) id: Uuid,
    pub(crate) role: String,
    pub(crate) goal: String,
    pub(crate) backstory: String,
    /// `Err` keeps why no model could be made, reported when the agent first needs one (in an
    /// `Arc`: the config is cloned, and each clone reports the same cause).
    pub(crate) llm: Result<Arc<dyn Llm>, Arc<LlmError>>,
    pub(crate) function_calling_llm: Option<Arc<dyn Llm>>,
    pub(crate) tools: Vec<ToolHandle>,
    /// MCP servers whose tools the agent gets in each run (`mcps:`).
    pub(crate) mcps: Vec<McpServer>,
    /// Remote A2A agents the agent may delegate to (`a2a:`), each a tool.
    pub(crate) a2a: Vec<A2aClientConfig>,
    pub(crate) max_iter: u32,
    pub(crate) max_rpm: Option<u32>,
    pub(crate) rate_limiter: Option<Arc<RateLimiter>>,
    pub(crate) max_execution_time: Option<Duration>,
    pub(crate) max_retry_limit: u32,
    pub(crate) allow_delegation: bool,
    pub(crate) use_system_prompt: bool,
    pub(crate) system_template: Option<String>,
    pub(crate) prompt_template: Option<String>,
    pub(crate) response_template: Option<String>,
    pub(crate) respect_context_window: bool,
    pub(crate) inject_date: bool,
    pub(crate) date_format: String,
    /// What training taught the agent (`crewai train`): followed in every task prompt.
    pub(crate) trained_suggestions: Vec<String>,
    pub(crate) step_callback: Option<StepCallback>,
    pub(crate) guardrail: Option<Guardrail>,
    pub(crate) guardrail_max_retries: u32,
    pub(crate) tool_failure_policy: Option<ToolFailurePolicy>,
    pub(crate) cache: bool,
    pub(crate) verbose: bool,
    pub(crate) hooks: Hooks,
    pub(crate) event_bus: Option<EventBus>,
    pub(crate) skills: Vec<SkillSource>,
    pub(crate) memory: Option<crewai_memory::Memory>,
    pub(crate) knowledge: Option<crewai_knowledge::Knowledge>,
    pub(crate) knowledge_config: crewai_knowledge::KnowledgeConfig,
    /// Plan before acting ([`crate::reasoning`]).
    pub(crate) planning: Option<Arc<PlanningConfig>>,
}

/// An agent (cheap to clone: the configuration is shared).
#[derive(Clone)]
pub struct Agent {
    pub(crate) config: Arc<AgentConfig>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("Agent")
            .field("role", &c.role)
            .field("goal", &c.goal)
            .field("llm", &c.llm.as_ref().map(|l| l.model().to_string()).ok())
            .field(
                "tools",
                &c.tools
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("max_iter", &c.max_iter)
            .field("allow_delegation", &c.allow_delegation)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent; `role`, `goal` and `backstory` are required.
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    /// Its id (a fresh UUID per built agent; copies made with `with_*` keep it).
    pub fn id(&self) -> Uuid {
        self.config.id
    }
    pub fn role(&self) -> &str {
        &self.config.role
    }
    pub fn goal(&self) -> &str {
        &self.config.goal
    }
    pub fn backstory(&self) -> &str {
        &self.config.backstory
    }
    /// Its model, or why it has none.
    pub fn llm(&self) -> Result<Arc<dyn Llm>, AgentError> {
        self.config.llm.clone().map_err(|source| AgentError::NoLlm {
            role: self.config.role.clone(),
            source,
        })
    }
    pub fn function_calling_llm(&self) -> Option<&Arc<dyn Llm>> {
        self.config.function_calling_llm.as_ref()
    }
    pub fn tools(&self) -> &[ToolHandle] {
        &self.config.tools
    }
    /// The MCP servers whose tools the agent gets in each run, besides [`Agent::tools`].
    pub fn mcps(&self) -> &[McpServer] {
        &self.config.mcps
    }
    /// The remote A2A agents the agent may delegate to, each a tool in its runs.
    pub fn a2a(&self) -> &[A2aClientConfig] {
        &self.config.a2a
    }
    pub fn max_iter(&self) -> u32 {
        self.config.max_iter
    }
    pub fn max_rpm(&self) -> Option<u32> {
        self.config.max_rpm
    }
    /// The agent's own rate limiter (from `max_rpm` or given to the builder).
    pub fn rate_limiter(&self) -> Option<&Arc<RateLimiter>> {
        self.config.rate_limiter.as_ref()
    }
    pub fn max_execution_time(&self) -> Option<Duration> {
        self.config.max_execution_time
    }
    pub fn max_retry_limit(&self) -> u32 {
        self.config.max_retry_limit
    }
    pub fn allow_delegation(&self) -> bool {
        self.config.allow_delegation
    }
    pub fn use_system_prompt(&self) -> bool {
        self.config.use_system_prompt
    }
    pub fn respect_context_window(&self) -> bool {
        self.config.respect_context_window
    }
    pub fn step_callback(&self) -> Option<&StepCallback> {
        self.config.step_callback.as_ref()
    }
    pub fn guardrail(&self) -> Option<&Guardrail> {
        self.config.guardrail.as_ref()
    }
    pub fn guardrail_max_retries(&self) -> u32 {
        self.config.guardrail_max_retries
    }
    pub fn tool_failure_policy(&self) -> Option<ToolFailurePolicy> {
        self.config.tool_failure_policy
    }
    /// Whether the agent joins the crew's tool cache (CrewAI's `cache`, default true).
    pub fn cache(&self) -> bool {
        self.config.cache
    }
    pub fn verbose(&self) -> bool {
        self.config.verbose
    }
    pub fn hooks(&self) -> &Hooks {
        &self.config.hooks
    }
    /// The bus `kickoff` reports to (a fresh one per kickoff when none was given).
    pub fn event_bus(&self) -> Option<&EventBus> {
        self.config.event_bus.as_ref()
    }
    /// Where its skills come from (its own, then its crew's; resolved when an execution starts).
    pub fn skills(&self) -> &[SkillSource] {
        &self.config.skills
    }

    fn modified(&self, change: impl FnOnce(&mut AgentConfig)) -> Agent {
        let mut config = (*self.config).clone();
        change(&mut config);
        Agent {
            config: Arc::new(config),
        }
    }

    /// A copy with other role, goal and backstory (what `{placeholder}` interpolation produces).
    pub fn with_identity(
        &self,
        role: impl Into<String>,
        goal: impl Into<String>,
        backstory: impl Into<String>,
    ) -> Agent {
        let (role, goal, backstory) = (role.into(), goal.into(), backstory.into());
        self.modified(|c| {
            c.role = role;
            c.goal = goal;
            c.backstory = backstory;
        })
    }

    /// What training taught the agent (see [`AgentBuilder::trained_suggestions`]).
    pub fn trained_suggestions(&self) -> &[String] {
        &self.config.trained_suggestions
    }

    /// A copy with `suggestions` from training (they replace any it had).
    pub fn with_trained_suggestions(&self, suggestions: Vec<String>) -> Agent {
        self.modified(|c| c.trained_suggestions = suggestions)
    }

    /// A copy that may or may not delegate (training turns delegation off).
    pub fn with_allow_delegation(&self, allow: bool) -> Agent {
        self.modified(|c| c.allow_delegation = allow)
    }

    /// A copy with other tools.
    pub fn with_tools(&self, tools: Vec<ToolHandle>) -> Agent {
        self.modified(|c| c.tools = tools)
    }

    /// Its own memory (CrewAI's agent `memory`), which wins over its crew's.
    pub fn memory(&self) -> Option<&crewai_memory::Memory> {
        self.config.memory.as_ref()
    }
    /// Its own knowledge (CrewAI's agent `knowledge_sources`), searched before each task
    /// together with its crew's.
    pub fn knowledge(&self) -> Option<&crewai_knowledge::Knowledge> {
        self.config.knowledge.as_ref()
    }
    /// How many knowledge snippets a task gets and how close they must be (its own and its
    /// crew's knowledge alike).
    /// How the agent plans, when it does ([`crate::reasoning`]).
    pub fn planning_config(&self) -> Option<&Arc<PlanningConfig>> {
        self.config.planning.as_ref()
    }

    pub fn knowledge_config(&self) -> crewai_knowledge::KnowledgeConfig {
        self.config.knowledge_config
    }

    /// A copy with `skills` after its own (a crew's skills, which apply to every agent).
    pub fn with_more_skills(&self, skills: &[SkillSource]) -> Agent {
        self.modified(|c| c.skills.extend(skills.iter().cloned()))
    }

    /// A copy with another model (a crew's `manager_llm`, a project override).
    pub fn with_llm(&self, llm: Arc<dyn Llm>) -> Agent {
        self.modified(|c| c.llm = Ok(llm))
    }

    /// A copy with a function-calling model set (inherited from the crew when the agent has none).
    pub fn with_function_calling_llm(&self, llm: Arc<dyn Llm>) -> Agent {
        self.modified(|c| c.function_calling_llm = Some(llm))
    }
}

/// Builds an [`Agent`]; defaults are CrewAI's.
#[derive(Default)]
pub struct AgentBuilder {
    role: Option<String>,
    goal: Option<String>,
    backstory: Option<String>,
    llm: Option<Result<Arc<dyn Llm>, LlmError>>,
    function_calling_llm: Option<Arc<dyn Llm>>,
    tools: Vec<ToolHandle>,
    mcps: Vec<McpServer>,
    a2a: Vec<A2aClientConfig>,
    max_iter: Option<u32>,
    max_rpm: Option<u32>,
    rate_limiter: Option<Arc<RateLimiter>>,
    max_execution_time: Option<Duration>,
    max_retry_limit: Option<u32>,
    allow_delegation: bool,
    use_system_prompt: Option<bool>,
    system_template: Option<String>,
    prompt_template: Option<String>,
    response_template: Option<String>,
    respect_context_window: Option<bool>,
    inject_date: bool,
    date_format: Option<String>,
    trained_suggestions: Vec<String>,
    step_callback: Option<StepCallback>,
    guardrail: Option<Guardrail>,
    guardrail_max_retries: Option<u32>,
    tool_failure_policy: Option<ToolFailurePolicy>,
    cache: Option<bool>,
    verbose: bool,
    hooks: Hooks,
    event_bus: Option<EventBus>,
    skills: Vec<SkillSource>,
    memory: Option<crewai_memory::Memory>,
    knowledge: Option<crewai_knowledge::Knowledge>,
    knowledge_config: Option<crewai_knowledge::KnowledgeConfig>,
    planning_config: Option<PlanningConfig>,
    planning: bool,
    reasoning: bool,
    max_reasoning_attempts: Option<u32>,
}

impl AgentBuilder {
    setters! {
        pub fn role(role: impl Into<String>) => role = Some(role.into());
        pub fn goal(goal: impl Into<String>) => goal = Some(goal.into());
        pub fn backstory(backstory: impl Into<String>) => backstory = Some(backstory.into());
        /// The model (default: `MODEL` from the environment, else `gpt-4.1-mini`).
        pub fn llm(llm: Arc<dyn Llm>) => llm = Some(Ok(llm));
        /// The model, from a configuration (`openai/gpt-4o-mini`, or a mapping); built when the
        /// agent is.
        pub fn llm_config(config: &LlmConfig) => llm = Some(crewai_llm::build_llm(config));
        /// CrewAI's `function_calling_llm` (deprecated there): kept for compatibility; the native
        /// loop calls tools with the agent's own model, as current CrewAI does.
        pub fn function_calling_llm(llm: Arc<dyn Llm>) => function_calling_llm = Some(llm);
        pub fn tools(tools: Vec<ToolHandle>) => tools = tools;
        pub fn tool(tool: ToolHandle) => |b| b.tools.push(tool);
        /// Gives the agent the tools of an MCP server (CrewAI's `mcps`), named
        /// `{server_name}_{tool}`; the session is opened when a run first needs it and closed
        /// at the end of the kickoff.
        pub fn mcp(server: McpServer) => |b| b.mcps.push(server);
        pub fn mcps(servers: Vec<McpServer>) => mcps = servers;
        /// Lets the agent delegate to a remote A2A agent (CrewAI's `a2a`): a tool named and
        /// described from the remote agent's card, fetched when a run first needs it.
        pub fn a2a(remote: A2aClientConfig) => |b| b.a2a.push(remote);
        pub fn a2a_agents(remotes: Vec<A2aClientConfig>) => a2a = remotes;
        /// Tool rounds before the agent must answer (default 25).
        pub fn max_iter(max_iter: u32) => max_iter = Some(max_iter);
        /// The agent's own requests-per-minute limit (wins over the crew's).
        pub fn max_rpm(max_rpm: u32) => max_rpm = Some(max_rpm);
        /// A rate limiter of the caller's (shared with other agents, or on a
        /// [`crewai_llm::VirtualClock`] in tests); it replaces the one `max_rpm` would make and
        /// wins over the crew's.
        pub fn rate_limiter(limiter: Arc<RateLimiter>) => rate_limiter = Some(limiter);
        /// A deadline on each whole execution (default none).
        pub fn max_execution_time(limit: Duration) => max_execution_time = Some(limit);
        /// Re-runs after an error (default 2; not after a timeout).
        pub fn max_retry_limit(retries: u32) => max_retry_limit = Some(retries);
        pub fn allow_delegation(allow: bool) => allow_delegation = allow;
        /// `false` sends everything as one user message (models without system prompts).
        pub fn use_system_prompt(use_it: bool) => use_system_prompt = Some(use_it);
        /// A template with `{{ .System }}`; used together with `prompt_template`.
        pub fn system_template(template: impl Into<String>)
            => system_template = Some(template.into());
        /// A template with `{{ .Prompt }}`; used together with `system_template`.
        pub fn prompt_template(template: impl Into<String>)
            => prompt_template = Some(template.into());
        /// A template with `{{ .Response }}`; the part before it ends the prompt.
        pub fn response_template(template: impl Into<String>)
            => response_template = Some(template.into());
        /// Summarise the history when it outgrows the model's window (default true).
        pub fn respect_context_window(respect: bool) => respect_context_window = Some(respect);
        /// Append today's date to the system prompt.
        pub fn inject_date(inject: bool) => inject_date = inject;
        /// The date's strftime format (default `%Y-%m-%d`).
        pub fn date_format(format: impl Into<String>) => date_format = Some(format.into());
        /// What training taught the agent (the suggestions `crewai train` saved under its
        /// role): appended to each of its task prompts as instructions to follow, as CrewAI
        /// does with a trained agent.
        pub fn trained_suggestions(suggestions: Vec<String>) => trained_suggestions = suggestions;
        pub fn step_callback(callback: impl Fn(&AgentStep) + Send + Sync + 'static)
            => step_callback = Some(Arc::new(callback));
        /// Checks `kickoff`'s answer (tasks have their own guardrails).
        pub fn guardrail(guardrail: Guardrail) => guardrail = Some(guardrail);
        /// Retries after a guardrail failure (default 3).
        pub fn guardrail_max_retries(retries: u32) => guardrail_max_retries = Some(retries);
        pub fn tool_failure_policy(policy: ToolFailurePolicy) => tool_failure_policy = Some(policy);
        /// Whether the agent uses the crew's tool cache when the crew has one (default true).
        pub fn cache(cache: bool) => cache = Some(cache);
        pub fn verbose(verbose: bool) => verbose = verbose;
        /// Where `kickoff` reports its events.
        pub fn event_bus(bus: EventBus) => event_bus = Some(bus);
        /// Its skills (CrewAI's `skills`): folders holding `SKILL.md`, folders of them, or skill
        /// values ([`crate::skills`]).
        pub fn skills(skills: Vec<SkillSource>) => skills = skills;
        pub fn skill(skill: impl Into<SkillSource>) => |b| b.skills.push(skill.into());
        /// Its own memory, which wins over its crew's: recalled into each task's prompt,
        /// searched and written by its memory tools, and given each task's result, saved at the
        /// memory's root (a crew's memory keeps them under `agent/<role>`; see
        /// [`crate::crew::CrewBuilder::memory`]). Root it where the agent's memories belong, as
        /// a project does at `/agent/<role>`.
        pub fn memory(memory: crewai_memory::Memory) => memory = Some(memory);
        /// Its own knowledge (built with [`crewai_knowledge::KnowledgeOwner::Agent`]): ingested
        /// when a crew kicks off, searched before each of its tasks.
        pub fn knowledge(knowledge: crewai_knowledge::Knowledge) => knowledge = Some(knowledge);
        /// CrewAI's `knowledge_config` (default 5 results, similarity 0.6).
        pub fn knowledge_config(config: crewai_knowledge::KnowledgeConfig) => knowledge_config = Some(config);
        /// Plan each task before acting and carry the plan out step by step (CrewAI's
        /// `planning_config`; see [`crate::reasoning`]). Wins over `planning` and `reasoning`.
        pub fn planning_config(config: PlanningConfig) => planning_config = Some(config);
        /// CrewAI's agent-level `planning: true`: [`PlanningConfig::quick`].
        pub fn planning(plan: bool) => planning = plan;
        /// CrewAI's deprecated `reasoning: true`: [`PlanningConfig::from_reasoning`] with
        /// `max_reasoning_attempts`.
        pub fn reasoning(reason: bool) => reasoning = reason;
        pub fn max_reasoning_attempts(attempts: u32) => max_reasoning_attempts = Some(attempts);
        /// The agent's own hooks (they run after the crew's). Layers added with
        /// [`AgentBuilder::llm_layer`] are kept.
        pub fn hooks(hooks: Hooks) => |b| b.hooks = hooks.replacing(std::mem::take(&mut b.hooks));
        /// A layer every model call of this agent goes through: its own turns, its summaries, and
        /// the guardrail judges and converters of its tasks, after the crew's layers (where it sits
        /// and an example: [`crate::llm_stack`]).
        pub fn llm_layer(layer: impl LlmLayer + 'static)
            => |b| b.hooks = std::mem::take(&mut b.hooks).llm_layer(layer);
    }

    /// Checks the configuration and builds the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let role = self.role.filter(|r| !r.trim().is_empty());
        let config_error = |message: &str| AgentError::Config {
            role: role.clone(),
            message: message.to_string(),
        };
        let need = |value, field| required(value, field).map_err(|m| config_error(&m));
        let role_text = need(role.clone(), "role")?;
        let goal = need(self.goal, "goal")?;
        let backstory = need(self.backstory, "backstory")?;
        if self.max_rpm == Some(0) {
            return Err(config_error(
                "`max_rpm` must be at least 1 (leave it unset for no limit)",
            ));
        }
        if self.max_execution_time.is_some_and(|t| t.is_zero()) {
            return Err(config_error(
                "`max_execution_time` must be longer than zero (leave it unset for no deadline)",
            ));
        }
        let date_format = self.date_format.unwrap_or_else(|| "%Y-%m-%d".to_string());
        if chrono::format::StrftimeItems::new(&date_format)
            .any(|item| matches!(item, chrono::format::Item::Error))
        {
            return Err(config_error(&format!(
                "`date_format` '{date_format}' is not a valid strftime format (for example %Y-%m-%d)"
            )));
        }
        let planning = match (self.planning_config, self.planning, self.reasoning) {
            (Some(config), _, _) => Some(config),
            (None, true, _) => Some(PlanningConfig::quick()),
            (None, false, true) => {
                Some(PlanningConfig::from_reasoning(self.max_reasoning_attempts))
            }
            (None, false, false) => None,
        };
        if let Some(problem) = planning.as_ref().and_then(PlanningConfig::problem) {
            return Err(config_error(problem));
        }
        let llm = self
            .llm
            .unwrap_or_else(crewai_llm::default_llm)
            .map_err(Arc::new);
        Ok(Agent {
            config: Arc::new(AgentConfig {
                id: Uuid::new_v4(),
                role: role_text,
                goal,
                backstory,
                llm,
                function_calling_llm: self.function_calling_llm,
                tools: self.tools,
                mcps: self.mcps,
                a2a: self.a2a,
                max_iter: self.max_iter.unwrap_or(25),
                max_rpm: self
                    .max_rpm
                    .or_else(|| self.rate_limiter.as_ref().and_then(|l| l.max_rpm())),
                rate_limiter: self
                    .rate_limiter
                    .or_else(|| self.max_rpm.map(RateLimiter::per_minute)),
                max_execution_time: self.max_execution_time,
                max_retry_limit: self.max_retry_limit.unwrap_or(2),
                allow_delegation: self.allow_delegation,
                use_system_prompt: self.use_system_prompt.unwrap_or(true),
                system_template: self.system_template,
                prompt_template: self.prompt_template,
                response_template: self.response_template,
                respect_context_window: self.respect_context_window.unwrap_or(true),
                inject_date: self.inject_date,
                date_format,
                trained_suggestions: self.trained_suggestions,
                step_callback: self.step_callback,
                guardrail: self.guardrail,
                guardrail_max_retries: self.guardrail_max_retries.unwrap_or(3),
                tool_failure_policy: self.tool_failure_policy,
                cache: self.cache.unwrap_or(true),
                verbose: self.verbose,
                hooks: self.hooks,
                event_bus: self.event_bus,
                skills: self.skills,
                memory: self.memory,
                knowledge: self.knowledge,
                knowledge_config: self.knowledge_config.unwrap_or_default(),
                planning: planning.map(Arc::new),
            }),
        })
    }
}
