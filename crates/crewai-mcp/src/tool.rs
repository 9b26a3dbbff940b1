//! [`McpTool`]: one tool of an MCP server as a crewai [`Tool`].

use std::sync::Arc;

use async_trait::async_trait;
use crewai_tools::tool::CauseOfToolError;
use crewai_tools::{Tool, ToolContext, ToolError, ToolOutput};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value};

use crate::connection::{CallError, Inner};

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    /// The name `tools/call` takes.
    pub name: String,
    /// The human-readable title, when the server gives one.
    pub title: Option<String>,
    pub description: String,
    /// The JSON schema of the arguments (`inputSchema`).
    pub input_schema: Value,
    /// The server's `_meta` for the tool (extensions such as a worker's hints).
    pub meta: Map<String, Value>,
}

impl McpToolInfo {
    pub(crate) fn from_listed(tool: &rmcp::model::Tool) -> Self {
        McpToolInfo {
            name: tool.name.to_string(),
            title: tool.title.clone(),
            description: tool.description.as_deref().unwrap_or_default().to_string(),
            input_schema: Value::Object(tool.input_schema.as_ref().clone()),
            meta: tool
                .meta
                .as_ref()
                .and_then(|meta| serde_json::to_value(meta).ok())
                .and_then(|meta| match meta {
                    Value::Object(map) => Some(map),
                    _ => None,
                })
                .unwrap_or_default(),
        }
    }
}

/// One tool of an [`crate::McpConnection`]. Its `run` makes a `tools/call` under the connection's
/// call timeout and the context's cancellation. A result the server marks `isError` is a
/// [`ToolError::Failed`] with the server's text; a timeout, a dead server or a refused call is a
/// [`ToolError::Service`] whose source is the [`crate::McpError`].
#[derive(Clone)]
pub struct McpTool {
    connection: Arc<Inner>,
    info: McpToolInfo,
    /// The name the model sees; the server's name unless renamed.
    name: String,
}

impl McpTool {
    pub(crate) fn new(connection: Arc<Inner>, info: McpToolInfo) -> Self {
        McpTool {
            name: info.name.clone(),
            connection,
            info,
        }
    }

    /// Shows the tool to models under `name` (calls still use the server's name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The tool as the server listed it.
    pub fn info(&self) -> &McpToolInfo {
        &self.info
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.info.description
    }

    fn parameters(&self) -> Value {
        self.info.input_schema.clone()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the tool '{}' takes an object of arguments, not {other}",
                    self.name
                )));
            }
        };
        match self
            .connection
            .call(&self.info.name, arguments, &ctx.cancellation)
            .await
        {
            Ok(CallOutcome::Output(output)) => Ok(output),
            Ok(CallOutcome::ToolFailed(text)) => Err(ToolError::Failed(text)),
            Err(CallError::Cancelled) => Err(ToolError::Cancelled),
            Err(CallError::Mcp(error)) => {
                Err(error.into_tool_error(format!("the tool '{}' could not run", self.name)))
            }
        }
    }
}

/// A `tools/call` result as crewai sees it.
pub(crate) enum CallOutcome {
    Output(ToolOutput),
    /// The server ran the tool and it failed (`isError: true`); the text says why.
    ToolFailed(String),
}

/// The longest tool result given to the model by default, in bytes (64 KiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 64 * 1024;

/// Turns a result into text: the text blocks joined by newlines, embedded text resources as
/// their text, other blocks described; the structured content as JSON when there is no text.
/// A result longer than `max_bytes` is cut there, with a note saying how much was left out.
pub(crate) fn call_outcome(result: CallToolResult, max_bytes: usize) -> CallOutcome {
    let failed = result.is_error == Some(true);
    let structured = result.structured_content.clone();
    let blocks = serde_json::to_value(&result.content).unwrap_or(Value::Null);
    let parts: Vec<String> = blocks
        .as_array()
        .map(|blocks| blocks.iter().map(describe_block).collect())
        .unwrap_or_default();
    if failed {
        let text = parts.join("\n");
        return CallOutcome::ToolFailed(if text.is_empty() {
            "the tool reported an error and gave no text".to_string()
        } else {
            capped(text, max_bytes)
        });
    }
    match (parts.is_empty(), structured) {
        (true, Some(value)) => {
            let text = value.to_string();
            if text.len() > max_bytes {
                CallOutcome::Output(ToolOutput::Text(capped(text, max_bytes)))
            } else {
                CallOutcome::Output(ToolOutput::Json(value))
            }
        }
        _ => CallOutcome::Output(ToolOutput::Text(capped(parts.join("\n"), max_bytes))),
    }
}

/// `text` cut to at most `max_bytes` (on a character boundary) with a note, when it is longer.
fn capped(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let total = text.len();
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[the tool's result was truncated: {cut} of {total} bytes shown; ask for less]"
    ));
    text
}

fn describe_block(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => format!("[{} content: {}]", field("type"), field("mimeType")),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => format!(
                    "[binary resource: {}]",
                    resource
                        .get("uri")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
            }
        }
        "resource_link" => format!("[resource: {}]", field("uri")),
        other => format!("[{other} content]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn text_of(outcome: CallOutcome) -> Result<String, String> {
        match outcome {
            CallOutcome::Output(output) => Ok(output.to_text()),
            CallOutcome::ToolFailed(text) => Err(text),
        }
    }

    #[test]
    fn text_blocks_are_joined_and_errors_keep_their_text() {
        let ok = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(
            text_of(call_outcome(ok, DEFAULT_MAX_RESULT_BYTES)),
            Ok("a\nb".to_string())
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("Traceback: boom")]);
        assert_eq!(
            text_of(call_outcome(failed, DEFAULT_MAX_RESULT_BYTES)),
            Err("Traceback: boom".to_string())
        );
    }

    #[test]
    fn an_oversized_result_is_cut_with_a_note() {
        let long = "é".repeat(100);
        let result = CallToolResult::success(vec![ContentBlock::text(long)]);
        let text = text_of(call_outcome(result, 51)).unwrap();
        assert!(text.starts_with(&"é".repeat(25)), "{text}");
        assert!(
            text.ends_with(
                "[the tool's result was truncated: 50 of 200 bytes shown; ask for less]"
            ),
            "{text}"
        );
    }

    #[test]
    fn images_and_resources_are_described() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(serde_json::json!([
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AA=="}},
        ]))
        .unwrap();
        let result = CallToolResult::success(blocks);
        assert_eq!(
            text_of(call_outcome(result, DEFAULT_MAX_RESULT_BYTES)).unwrap(),
            "[image content: image/png]\ninside\n[binary resource: file:///b.bin]"
        );
    }

    #[test]
    fn structured_content_is_the_output_when_there_is_no_text() {
        let result = CallToolResult::structured(serde_json::json!({"sum": 3}));
        let mut result = result;
        result.content.clear();
        match call_outcome(result, DEFAULT_MAX_RESULT_BYTES) {
            CallOutcome::Output(ToolOutput::Json(value)) => assert_eq!(value["sum"], 3),
            _ => panic!("expected the structured content as JSON"),
        }
    }
}
