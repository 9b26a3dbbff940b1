//! # crewai
//!
//! CrewAI's multi-agent model in Rust. `use crewai::prelude::*` brings in everything a crew needs.

pub use crewai_llm as llm;
pub use crewai_tools as tools;

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
    pub use crewai_llm::{Llm, LlmConfig, LlmError, LlmRequest, LlmResponse, Message, Usage};
    pub use crewai_tools::{Tool, ToolContext, ToolError, ToolOutput};
}
