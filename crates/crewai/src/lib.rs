//! # crewai
//!
//! CrewAI's multi-agent model in Rust. `use crewai::prelude::*` brings in everything a crew needs.

pub use crewai_core as core;
pub use crewai_flow as flow;
pub use crewai_llm as llm;
pub use crewai_tools as tools;

pub use crewai_core::AgentError;
pub use crewai_core::agent::{Agent, AgentBuilder, AgentOutput, KickoffInput};
pub use crewai_core::crew::{Crew, CrewBuilder, CrewError, CrewStream, Process, StreamChunk};
pub use crewai_core::events::{Event, EventBus, EventKind};
pub use crewai_core::guardrail::{Guardrail, GuardrailPass};
pub use crewai_core::hooks::{HookDecision, HookedLlm, Hooks};
pub use crewai_core::output::{CrewOutput, OutputFormat, TaskOutput};
pub use crewai_core::store::{
    InMemoryRunJournal, RunJournal, RunStatus, StoredRun, TaskOutputStore,
};
pub use crewai_core::task::{Task, TaskBuilder};
pub use crewai_llm::{LlmConfig, build_llm};

/// Turns a documented function into a tool; the generated code refers to `crewai::tools`, so a
/// dependency on `crewai` alone is enough. Rules and options: [`crewai_macros::tool`].
///
/// ```
/// use crewai::tool;
///
/// /// Counts the words in a text.
/// ///
/// /// # Arguments
/// /// * `text` - The text to count.
/// #[tool]
/// fn word_counter(text: String) -> usize {
///     text.split_whitespace().count()
/// }
///
/// assert_eq!(word_counter_tool().name(), "word_counter");
/// ```
pub use crewai_macros::crewai_tool as tool;

/// The names most programs need.
pub mod prelude {
    pub use crate::tool;
    pub use crewai_core::AgentError;
    pub use crewai_core::agent::{Agent, AgentOutput};
    pub use crewai_core::crew::{Crew, CrewError, Process};
    pub use crewai_core::events::{Event, EventBus, EventKind};
    pub use crewai_core::guardrail::{Guardrail, GuardrailPass};
    pub use crewai_core::hooks::{HookDecision, Hooks};
    pub use crewai_core::output::{CrewOutput, TaskOutput};
    pub use crewai_core::store::{RunJournal, RunStatus};
    pub use crewai_core::task::Task;
    pub use crewai_flow::Flow;
    pub use crewai_llm::{
        Llm, LlmConfig, LlmError, LlmRequest, LlmResponse, Message, Usage, build_llm,
    };
    pub use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput};
}

/// The README's Rust example, compiled as a doc test so it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
