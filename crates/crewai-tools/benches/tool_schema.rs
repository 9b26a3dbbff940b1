//! Micro-benchmarks of tool-schema generation: what every LLM call that offers tools pays when
//! its tool definitions are built. Run: `cargo bench -p crewai-tools --bench tool_schema`.

use crewai_tools::{ToolHandle, strict_parameters};
use divan::black_box;

fn main() {
    divan::main();
}

/// Counts the words (whitespace-separated tokens) in a text and returns the count.
///
/// # Arguments
/// * `text` - The text whose words should be counted.
#[crewai_tools::tool]
async fn word_counter(text: String) -> String {
    text.split_whitespace().count().to_string()
}

/// Searches notes by keyword.
///
/// # Arguments
/// * `query` - Words to look for.
/// * `limit` - How many notes to return at most.
/// * `tags` - Only notes with one of these tags.
#[crewai_tools::tool]
async fn search_notes(query: String, limit: Option<u32>, tags: Vec<String>) -> String {
    format!("{query} {limit:?} {tags:?}")
}

/// The full OpenAI function definition of a `#[tool]` (schema + strict form), as sent per call.
#[divan::bench(args = ["word_counter", "search_notes"])]
fn definition(name: &str) -> crewai_llm::ToolDefinition {
    let handle: ToolHandle = if name == "word_counter" {
        word_counter_tool()
    } else {
        search_notes_tool()
    };
    black_box(&handle).definition()
}

/// Only the strict rewrite of an existing schema.
#[divan::bench]
fn strict_rewrite() -> serde_json::Value {
    let schema = search_notes_tool().parameters();
    strict_parameters(black_box(&schema))
}
