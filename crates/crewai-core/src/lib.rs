//! # crewai-core
//!
//! The crewai engine: agents, tasks, crews, the executor loops, prompts, guardrails, delegation,
//! events and hooks.
//!
//! - [`agent`]: [`Agent`] and its builder; [`Agent::kickoff`] runs one agent alone (CrewAI's
//!   LiteAgent); [`Agent::run_task`] is the entry the task and crew layer uses.
//!   An agent works in one of three loops (native tool calling, ReAct text, direct answer) with
//!   `max_iter`, deadlines, retries, context-window summarisation and parallel tool calls.
//! - [`kickoff`]: [`KickoffOptions`], how a crew's or an agent's kickoff fits into a larger run.
//! - [`task`], [`crew`], [`delegation`]: tasks, crews (sequential, or hierarchical under a
//!   manager) and the delegation tools.
//! - [`events`], [`hooks`], [`guardrail`], [`usage`]: what a run reports and who may intervene.
//! - [`llm_stack`]: the layers every model call of a run goes through (hooks, the user's own
//!   layers, budget, rate limit, events and usage), in one place.
//! - [`preview`]: the text an agent is sent, rendered without running it (every fragment lives
//!   in one private module, so nothing else builds prompt text); [`react`]: the ReAct reply
//!   format.
//!
//! An agent with a `#[tool]` function:
//!
//! ```no_run
//! use crewai_core::Agent;
//! use crewai_llm::{LlmConfig, build_llm};
//! use crewai_tools::tool;
//!
//! /// Multiplies two integers.
//! ///
//! /// # Arguments
//! /// * `a` - The first factor.
//! /// * `b` - The second factor.
//! #[tool]
//! fn multiply(a: i64, b: i64) -> i64 {
//!     a * b
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder()
//!     .role("Calculator")
//!     .goal("Answer arithmetic questions exactly")
//!     .backstory("You never guess: you compute.")
//!     .llm(build_llm(&LlmConfig::new("openai/gpt-4o-mini"))?)
//!     .tools(vec![multiply_tool()])
//!     .build()?;
//! let output = agent.kickoff("What is 7 times 6?").await?;
//! println!("{} ({} tokens)", output.raw, output.usage.total_tokens);
//! # Ok(()) }
//! ```

#[macro_use]
extern crate crewai_llm;

mod setters;

pub mod a2a;
pub mod agent;
mod agent_knowledge;
mod agent_memory;
mod agent_task;
pub mod consensus;
pub mod converter;
pub mod crew;
pub mod delegation;
mod embedder_stack;
pub mod error;
pub mod evaluate;
pub mod events;
pub(crate) mod executor;
pub mod guardrail;
pub mod hooks;
pub mod interpolate;
pub mod kickoff;
mod kickoff_slots;
pub mod llm_stack;
pub mod mcp;
pub mod output;
pub mod preview;
pub(crate) mod process;
pub(crate) mod prompts;
pub mod react;
pub mod reasoning;
pub mod skills;
pub mod store;
mod structured_task;
pub mod task;
pub mod training;
pub mod usage;

pub use agent::{
    Agent, AgentBuilder, AgentOutput, AgentStep, AgentTaskRequest, AgentTaskResult,
    DelegationChain, KickoffInput, StepCallback,
};
pub use agent_memory::MemoryAccounting;
pub use error::AgentError;
pub use events::{ConsoleListener, Event, EventBus, EventKind, EventRecorder, ListenerId};
pub use guardrail::{Guardrail, GuardrailContext, GuardrailError, GuardrailPass, GuardrailVerdict};
pub use hooks::{CallOrigin, HookDecision, Hooks, HooksLayer, LlmCallContext, ToolCallContext};
pub use kickoff::KickoffOptions;
pub use llm_stack::{CallPurpose, CallScope};
pub use output::{CrewOutput, OutputFormat, TaskOutput};
pub use reasoning::{PlanningConfig, ReasoningEffort};
pub use usage::{Budget, BudgetExceeded, BudgetLimit, UsageSummary, UsageTracker};
