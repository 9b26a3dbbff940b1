//! # crewai-tools
//!
//! Tools for crewai agents: the [`Tool`] trait, typed tools, the registry and tolerant lookup,
//! validation and repair of the arguments a model sends, the per-crew result cache, and the
//! built-in tools every project can name.
//!
//! The quickest tool is a function with `#[tool]`:
//!
//! ```
//! use crewai_tools::{tool, Tool, ToolContext};
//!
//! /// Counts the words in a text.
//! ///
//! /// # Arguments
//! /// * `text` - The text to count the words of.
//! #[tool]
//! fn word_counter(text: String) -> usize {
//!     text.split_whitespace().count()
//! }
//!
//! let handle = word_counter_tool();
//! assert_eq!(handle.name(), "word_counter");
//! assert_eq!(handle.description(), "Counts the words in a text.");
//! let definition = handle.definition();
//! assert_eq!(definition.parameters["properties"]["text"]["description"], "The text to count the words of.");
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let output = WordCounter.run(serde_json::json!({"text": "one two three"}), &ToolContext::default()).await.unwrap();
//! assert_eq!(output.to_text(), "3");
//! # });
//! ```
//!
//! An agent's executor uses the rest: [`ToolSet::find`] to resolve the name a model called,
//! [`prepare_arguments`] to turn its arguments into valid input (or an observation saying what
//! to fix), [`ToolHandle::try_claim_use`] for usage limits, [`ToolCache`] for cached results.

mod args;
pub mod builtin;
mod cache;
pub mod catalog;
mod dynamic;
mod env;
mod handle;
mod llm_call;
mod macros;
mod name;
mod repair;
pub mod report;
mod schema;
mod set;
pub mod tool;
mod typed;

pub use args::{ArgumentError, ArgumentProblem, prepare_arguments};
pub use async_trait::async_trait;
pub use cache::{ToolCache, canonical_json};
pub use crewai_macros::tool;
pub use dynamic::DynamicTool;
pub use env::check_env_vars;
pub use handle::{
    CacheFunction, ToolFailurePolicy, ToolHandle, UsageLimitReached, usage_limit_message,
};
pub use llm_call::{CallError, CallOutcome, CallReply, FunctionRun, LlmCall};
pub use name::{MAX_TOOL_NAME_LEN, field_title, sanitize_tool_name, similarity_ratio};
pub use repair::repair_json;
pub use report::{CodeExecutionEnd, CodeExecutionStart, ToolReport, ToolReporter};
pub use schema::{schema_for, strict_parameters};
pub use set::ToolSet;
pub use tool::{EmbeddingLayer, EnvVar, Tool, ToolContext, ToolError, ToolOutput};
pub use typed::{TypedTool, panic_message};

/// What `#[tool]` expands to refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use schemars;
    pub use serde;
    pub use serde_json;

    pub use crate::typed::{parse_typed_arguments, run_blocking, serialize_output};
}
