//! The agent tools over a memory: `search_memory` and `save_to_memory`, as CrewAI gives an agent
//! whose crew (or itself) has memory.

use serde_json::{Value, json};

use crewai_tools::{DynamicTool, ToolError, ToolHandle, ToolOutput};

use crate::error::MemoryError;
use crate::memory::{Memory, RememberOptions};
use crate::recall::RecallQuery;

/// The name of the tool that recalls.
pub const SEARCH_MEMORY_TOOL: &str = "search_memory";
/// The name of the tool that remembers.
pub const SAVE_TO_MEMORY_TOOL: &str = "save_to_memory";

/// How many matches each query of `search_memory` returns.
const MATCHES_PER_QUERY: usize = 5;

/// Reads `field` of `args` as a list of non-empty strings (a lone string is one item: models
/// often send one where a list is asked for).
fn strings(args: &Value, field: &str) -> Result<Vec<String>, ToolError> {
    let items = match &args[field] {
        Value::String(one) => vec![one.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let items: Vec<String> = items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "`{field}` must be a list of non-empty strings"
        )));
    }
    Ok(items)
}

fn failed(action: &str, error: MemoryError) -> ToolError {
    ToolError::Service {
        action: action.to_string(),
        source: Box::new(error),
    }
}

/// `search_memory` (`queries: [string]`) and `save_to_memory` (`memories: [string]`) over
/// `memory`. Saved statements carry `source` (the agent's role), so they can be told apart and
/// recalled privately later.
pub fn memory_tools(memory: &Memory, source: Option<String>) -> Vec<ToolHandle> {
    let searcher = memory.clone();
    let search = DynamicTool::new(
        SEARCH_MEMORY_TOOL,
        "Search memory for facts, decisions and lessons saved in earlier work. Give one or \
         more short queries; each returns the closest memories with their scores.",
        json!({
            "type": "object",
            "properties": {"queries": {"type": "array", "items": {"type": "string"},
                "description": "What to look for, one query per item"}},
            "required": ["queries"]
        }),
        move |args, _ctx| {
            let memory = searcher.clone();
            async move {
                let queries = strings(&args, "queries")?;
                let mut sections = Vec::new();
                for query in queries {
                    let found = memory
                        .recall(RecallQuery::new(query.clone()).limit(MATCHES_PER_QUERY))
                        .await
                        .map_err(|e| failed("searching memory", e))?;
                    let body = if found.is_empty() {
                        "No relevant memories found.".to_string()
                    } else {
                        found
                            .iter()
                            .map(|m| m.format())
                            .collect::<Vec<_>>()
                            .join("\n")
                    };
                    sections.push(format!("Query: {query}\n{body}"));
                }
                Ok(ToolOutput::Text(sections.join("\n\n")))
            }
        },
    );
    let saver = memory.clone();
    let save = DynamicTool::new(
        SAVE_TO_MEMORY_TOOL,
        "Save facts, decisions or lessons worth keeping for later tasks. Give each as one short \
         statement that makes sense on its own.",
        json!({
            "type": "object",
            "properties": {"memories": {"type": "array", "items": {"type": "string"},
                "description": "The statements to remember"}},
            "required": ["memories"]
        }),
        move |args, _ctx| {
            let (memory, source) = (saver.clone(), source.clone());
            async move {
                let statements = strings(&args, "memories")?;
                let options = RememberOptions {
                    source,
                    ..RememberOptions::default()
                };
                let saved = memory
                    .remember_many(&statements, options)
                    .await
                    .map_err(|e| failed("saving to memory", e))?;
                Ok(ToolOutput::Text(format!(
                    "Saved {} memor{}.",
                    saved.len(),
                    if saved.len() == 1 { "y" } else { "ies" }
                )))
            }
        },
    );
    vec![search.into_handle(), save.into_handle()]
}
