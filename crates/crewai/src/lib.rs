//! # crewai
//!
//! CrewAI's multi-agent model in Rust. `use crewai::prelude::*` brings in everything a crew needs.

pub use crewai_core as core;
pub use crewai_flow as flow;
pub use crewai_llm as llm;
pub use crewai_project as project;
pub use crewai_tools as tools;

pub use crewai_core::AgentError;
pub use crewai_core::agent::{Agent, AgentBuilder, AgentOutput, KickoffInput};
pub use crewai_core::crew::{Crew, CrewBuilder, CrewError, CrewStream, Process, StreamChunk};
pub use crewai_core::events::{Event, EventBus, EventKind};
pub use crewai_core::guardrail::{Guardrail, GuardrailPass};
pub use crewai_core::hooks::{HookDecision, Hooks, HooksLayer};
pub use crewai_core::output::{CrewOutput, OutputFormat, TaskOutput};
pub use crewai_core::reasoning::{PlanningConfig, ReasoningEffort};
pub use crewai_core::store::{
    InMemoryRunJournal, RunJournal, RunStatus, StoredRun, TaskOutputStore,
};
pub use crewai_core::task::{Task, TaskBuilder};
pub use crewai_llm::{LayeredLlm, LlmConfig, LlmLayer, build_llm};

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

/// The names most programs need: agents, tasks and crews and how to kick them off, tools
/// (`#[tool]` functions, [`TypedTool`](crewai_tools::TypedTool), or the [`Tool`](crewai_tools::Tool)
/// trait), models (and [`ScriptedLlm`](crewai_llm::ScriptedLlm) to test without one; [`LlmCall`](crewai_tools::LlmCall)
/// for one call that runs the functions it asks for, CrewAI's `LLM.call`), flows, and
/// loading a CrewAI project's YAML files.
///
/// ```
/// use std::sync::Arc;
/// use crewai::prelude::*;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// struct Adder;
///
/// #[async_trait]
/// impl TypedTool for Adder {
///     type Args = Add;
///     type Output = i64;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Adds two integers." }
///     async fn call(&self, args: Add, _ctx: &ToolContext) -> Result<i64, ToolError> {
///         Ok(args.a + args.b)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let llm = Arc::new(ScriptedLlm::new("scripted").then_text("The {topic} notes."));
/// let writer = Agent::builder().role("Writer").goal("Write").backstory("Brief.")
///     .llm(llm).tools(vec![ToolHandle::from_tool(Adder)]).build()?;
/// let notes = Task::builder().description("Notes on {topic}").expected_output("Notes")
///     .agent(writer.clone()).build()?;
/// let crew = Crew::builder().agents(vec![writer]).tasks(vec![notes]).build()?;
/// let inputs: Inputs = [("topic".to_string(), "bees".into())].into();
/// let output = crew.kickoff_with(inputs, KickoffOptions::new().run_id("first")).await?;
/// assert_eq!(output.run_id.as_deref(), Some("first"));
///
/// // A CrewAI project's YAML, checked with file and line (here from text; `Project::load(dir)`
/// // reads a folder).
/// let agents = "writer:\n  role: Writer\n  goal: Write\n  backstory: Brief.\n";
/// let tasks = "notes:\n  description: Notes\n  expected_output: Notes\n  agent: writer\n";
/// let project = Project::from_yaml_sources("my-crew", agents, Some(tasks), None)?;
/// assert_eq!(project.tasks.len(), 1);
/// # Ok(()) }
/// ```
pub mod prelude {
    pub use crate::tool;
    pub use crewai_core::AgentError;
    pub use crewai_core::KickoffOptions;
    pub use crewai_core::agent::{Agent, AgentOutput};
    pub use crewai_core::crew::{Crew, CrewError, Process};
    pub use crewai_core::events::{Event, EventBus, EventKind};
    pub use crewai_core::guardrail::{Guardrail, GuardrailPass};
    pub use crewai_core::hooks::{HookDecision, Hooks};
    pub use crewai_core::interpolate::Inputs;
    pub use crewai_core::output::{CrewOutput, TaskOutput};
    pub use crewai_core::reasoning::{PlanningConfig, ReasoningEffort};
    pub use crewai_core::store::{RunJournal, RunStatus};
    pub use crewai_core::task::Task;
    pub use crewai_flow::{Flow, FlowContext};
    pub use crewai_llm::{
        Llm, LlmConfig, LlmError, LlmRequest, LlmResponse, Message, ScriptedLlm, Usage, build_llm,
    };
    pub use crewai_project::{BuildOptions, Project, ProjectError, ToolRegistry};
    pub use crewai_tools::{
        CallOutcome, LlmCall, Tool, ToolContext, ToolError, ToolHandle, ToolOutput, TypedTool,
        async_trait,
    };
}

/// The README's Rust example, compiled as a doc test so it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
