//! One task for an agent: the request the task and crew layer prepares for
//! [`Agent::run_task`](crate::agent::Agent::run_task) (with what the run shares with the crew
//! around it) and what the agent produced.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::{Message, RateLimiter, ResponseFormat, Usage};
use crewai_tools::{ToolCache, ToolFailurePolicy, ToolSet};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::StepCallback;
use crate::events::EventBus;
use crate::hooks::Hooks;
use crate::mcp::McpSessions;
use crate::usage::UsageTracker;

/// The delegation chain of a run: the roles that handed this work down, outermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationChain {
    pub chain: Vec<String>,
    /// How many hand-offs a request may go through (default 3).
    pub max_depth: usize,
}

impl Default for DelegationChain {
    fn default() -> Self {
        DelegationChain {
            chain: Vec::new(),
            max_depth: 3,
        }
    }
}

impl DelegationChain {
    /// The chain one level down, after `role` delegated.
    pub fn extended(&self, role: &str) -> Self {
        let mut next = self.clone();
        next.chain.push(role.to_string());
        next
    }

    pub fn depth(&self) -> usize {
        self.chain.len()
    }
}

/// What a run shares with the crew around it (or what a standalone run gets by default): where events
/// go, the hooks, the tool cache, the crew's rate limit, cancellation and delegation state.
/// Internal plumbing: callers set the parts they may choose through the setters of
/// [`AgentTaskRequest`] and [`KickoffOptions`](crate::KickoffOptions).
#[derive(Clone, Default)]
pub(crate) struct RunServices {
    pub events: EventBus,
    /// Crew-level hooks; the agent's own hooks run after them.
    pub hooks: Hooks,
    /// The crew's tool-result cache (`None`: no caching, CrewAI's default).
    pub tool_cache: Option<ToolCache>,
    /// The crew's `max_rpm` limiter; an agent's own `max_rpm` wins.
    pub rate_limiter: Option<Arc<RateLimiter>>,
    pub crew_name: Option<String>,
    pub crew_id: Option<String>,
    /// Cancelling it stops the run promptly (in-flight calls are dropped).
    pub cancellation: CancellationToken,
    pub delegation: DelegationChain,
    /// Every LLM call's usage is recorded here (per agent role and task).
    pub usage: UsageTracker,
    /// The crew's step callback, used when the agent has none.
    pub step_callback: Option<StepCallback>,
    /// The crew's tool failure policy, used when the agent has none (default warn).
    pub tool_failure_policy: Option<ToolFailurePolicy>,
    /// Stream model replies and emit `llm_stream_chunk` events (crew `stream: true`).
    pub stream: bool,
    /// A deadline for agents without `max_execution_time` (a crew-wide default).
    pub default_timeout: Option<Duration>,
    /// The crew's skills, which every agent of the run gets after its own.
    pub skills: Vec<crate::skills::SkillSource>,
    /// The kickoff's sessions with its agents' MCP servers.
    pub mcp: McpSessions,
    /// The kickoff's conversations with its agents' remote A2A agents.
    pub a2a: crate::a2a::A2aSessions,
    /// The crew's memory (rooted at the crew's scope), for agents without their own.
    pub memory: Option<crewai_memory::Memory>,
    /// The crew's knowledge, searched after each agent's own before every task.
    pub knowledge: Option<crewai_knowledge::Knowledge>,
}

impl fmt::Debug for RunServices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunServices")
            .field("crew_name", &self.crew_name)
            .field("crew_id", &self.crew_id)
            .field("hooks", &self.hooks)
            .field("tool_cache", &self.tool_cache.is_some())
            .field("rate_limiter", &self.rate_limiter.is_some())
            .field("delegation", &self.delegation)
            .field("stream", &self.stream)
            .finish()
    }
}

/// One task for an agent, prepared by the task/crew layer (or by a caller running one agent on
/// one task with [`Agent::run_task`](crate::agent::Agent::run_task)).
#[derive(Debug, Clone, Default)]
pub struct AgentTaskRequest {
    /// The task prompt without the user-message wrapper: description, expected output, and any
    /// format instructions (what [`Task::prompt`](crate::task::Task::prompt) renders).
    pub task_prompt: String,
    /// Earlier outputs this task works from; added after the prompt.
    pub context: Option<String>,
    /// The tools for this task (the task's, or else the agent's, plus delegation tools).
    pub tools: ToolSet,
    /// Ask the provider for this JSON schema (only honoured when there are no tools, as CrewAI).
    pub response_format: Option<ResponseFormat>,
    pub task_name: Option<String>,
    pub task_id: Option<String>,
    /// The event the agent's events hang under (the `task_started` event).
    pub parent_event_id: Option<Uuid>,
    /// The task's tool failure policy: wins over the agent's and the crew's.
    pub tool_failure_policy: Option<ToolFailurePolicy>,
    /// What the run shares with the crew around it; set through the `with_*` methods.
    pub(crate) services: RunServices,
}

impl AgentTaskRequest {
    pub fn new(task_prompt: impl Into<String>) -> Self {
        AgentTaskRequest {
            task_prompt: task_prompt.into(),
            ..Default::default()
        }
    }
    setters! {
        pub fn with_context(context: impl Into<String>) => context = Some(context.into());
        pub fn with_tools(tools: impl Into<ToolSet>) => tools = tools.into();
        pub fn with_response_format(format: ResponseFormat) => response_format = Some(format);
        pub fn with_task_name(name: impl Into<String>) => task_name = Some(name.into());
        pub fn with_parent_event(parent: Uuid) => parent_event_id = Some(parent);
        /// The task's tool failure policy (wins over the agent's and the crew's).
        pub fn with_tool_failure_policy(policy: ToolFailurePolicy)
            => tool_failure_policy = Some(policy);
        pub(crate) fn with_services(services: RunServices) => services = services;
        /// Report the run's events to `bus` (default: a fresh bus nobody listens to).
        pub fn with_event_bus(bus: EventBus) => services.events = bus;
        /// Hooks of the enclosing run (a crew's); the agent's own hooks run after them.
        pub fn with_hooks(hooks: Hooks) => services.hooks = hooks;
        /// Share tool results through `cache` (a crew's `cache: true`); agents with `cache: false`
        /// stay out of it.
        pub fn with_tool_cache(cache: ToolCache) => services.tool_cache = Some(cache);
        /// Cancelling `token` stops the run promptly (in-flight calls are dropped).
        pub fn with_cancellation(token: CancellationToken) => services.cancellation = token;
        /// Record every call's usage in `ledger` and hold the run to its budget.
        pub fn with_usage(ledger: UsageTracker) => services.usage = ledger;
        /// Stream the model's replies, emitting `llm_stream_chunk` events (a crew's `stream:
        /// true`).
        pub fn with_streaming(stream: bool) => services.stream = stream;
    }
}

/// What an agent produced for a task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTaskResult {
    /// The final answer text.
    pub raw: String,
    /// The reply parsed as JSON when a response format was sent and honoured.
    pub typed: Option<Value>,
    /// The whole conversation of the successful attempt.
    pub messages: Vec<Message>,
    /// Usage of every LLM call of this execution (retries included).
    pub usage: Usage,
    /// The answer is a `result_as_answer` tool's output.
    pub result_as_answer: bool,
    /// Tool calls that failed (CrewAI's `task.tools_errors`).
    pub tool_errors: u32,
}
