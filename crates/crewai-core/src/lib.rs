//! # crewai-core
//!
//! The crewai engine: agents, tasks, crews, the executor loops, prompts, guardrails, delegation,
//! events and hooks.
//!
//! - [`agent`]: [`Agent`] and its builder; [`Agent::kickoff`] runs one agent alone (CrewAI's
//!   LiteAgent); [`Agent::run_task`] is the entry the task and crew layer uses.
//! - [`executor`]: the three loops (native tool calling, ReAct text, direct answer) with
//!   `max_iter`, deadlines, retries, context-window summarisation and parallel tool calls.
//! - [`task`], [`crew`], [`process`], [`delegation`]: tasks, crews and their processes.
//! - [`events`], [`hooks`], [`guardrail`], [`usage`]: what a run reports and who may intervene.
//! - [`prompts`]: every piece of text sent to a model.
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

pub mod agent;
pub mod converter;
pub mod crew;
pub mod delegation;
pub mod error;
pub mod events;
pub mod executor;
pub mod guardrail;
pub mod hooks;
pub mod interpolate;
pub mod output;
pub mod process;
pub mod prompts;
pub mod store;
pub mod task;
pub mod usage;

pub use agent::{
    Agent, AgentBuilder, AgentOutput, AgentStep, AgentTaskRequest, AgentTaskResult,
    DelegationChain, KickoffInput, KickoffOptions, RunServices, StepCallback,
};
pub use error::AgentError;
pub use events::{ConsoleListener, Event, EventBus, EventKind, EventRecorder, ListenerId};
pub use guardrail::{Guardrail, GuardrailContext, GuardrailError, GuardrailPass, GuardrailVerdict};
pub use hooks::{HookDecision, HookedLlm, Hooks, LlmCallContext, ToolCallContext};
pub use output::{CrewOutput, OutputFormat, TaskOutput};
pub use usage::{Budget, BudgetExceeded, BudgetLimit, UsageSummary, UsageTracker};
