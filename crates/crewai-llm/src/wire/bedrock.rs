//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse` and `/converse-stream`):
//! content blocks keyed by their kind (`text`, `image`, `document`, `toolUse`, `toolResult`), the
//! tool configuration, the reply with its stop reason and usage, and the payloads of
//! ConverseStream's events (each the JSON of one event-stream frame, named by the frame's
//! `:event-type` header). Errors carry their type in the `x-amzn-errortype` header and a
//! `message` in the body; a stream's errors come as frames of their own.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Malformed, lenient_text};
use crate::types::{FinishReason, Usage};

/// A Converse request body (fields in the order they have always been sent).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseRequest<'a> {
    pub messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemText<'a>>,
    #[serde(skip_serializing_if = "InferenceConfig::is_empty")]
    pub inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig<'a>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Turn<'a> {
    pub role: &'static str,
    pub content: Vec<Block<'a>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemText<'a> {
    pub text: Cow<'a, str>,
}

/// A request content block, keyed by its kind.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Block<'a> {
    Text(Cow<'a, str>),
    Image(Image<'a>),
    Document(Document<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
}

#[derive(Debug, Clone, Serialize)]
pub struct Image<'a> {
    pub format: String,
    pub source: Bytes<'a>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Document<'a> {
    pub format: &'a str,
    pub name: String,
    pub source: Bytes<'a>,
}

/// Base64 bytes.
#[derive(Debug, Clone, Serialize)]
pub struct Bytes<'a> {
    pub bytes: &'a str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse<'a> {
    pub tool_use_id: &'a str,
    pub name: &'a str,
    /// The call's arguments object (free-form).
    pub input: Cow<'a, Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult<'a> {
    pub tool_use_id: &'a str,
    pub content: Vec<ResultText<'a>>,
    pub status: ToolResultStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResultText<'a> {
    pub text: Cow<'a, str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolResultStatus {
    Success,
}

/// `inferenceConfig`; left out of the body when nothing is set.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<&'a str>,
}

impl InferenceConfig<'_> {
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.stop_sequences.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig<'a> {
    pub tools: Vec<Tool<'a>>,
    pub tool_choice: ToolChoice<'a>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Tool<'a> {
    ToolSpec(ToolSpec<'a>),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub input_schema: InputSchema<'a>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InputSchema<'a> {
    /// The tool's JSON schema (free-form).
    pub json: &'a Value,
}

/// `{"auto": {}}`, `{"any": {}}` or `{"tool": {"name": ...}}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice<'a> {
    Auto(Empty),
    Any(Empty),
    Tool(ToolName<'a>),
}

/// `{}`
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Empty {}

#[derive(Debug, Clone, Serialize)]
pub struct ToolName<'a> {
    pub name: &'a str,
}

/// A Converse reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseReply {
    pub output: Option<Output>,
    pub stop_reason: Option<String>,
    pub usage: Option<ConverseUsage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Output {
    pub message: Option<OutputMessage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OutputMessage {
    pub content: Option<Vec<ReplyBlock>>,
}

/// A reply block; kinds not read here (reasoning, citations) have neither field.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyBlock {
    #[serde(default, deserialize_with = "lenient_text")]
    pub text: Option<String>,
    pub tool_use: Option<ReplyToolUse>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyToolUse {
    #[serde(default)]
    pub tool_use_id: String,
    pub name: Option<String>,
    /// The call's arguments (free-form JSON).
    pub input: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_write_input_tokens: Option<u64>,
}

impl From<ConverseUsage> for Usage {
    fn from(usage: ConverseUsage) -> Self {
        let prompt = usage.input_tokens.unwrap_or(0);
        let completion = usage.output_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage.total_tokens.unwrap_or(prompt + completion),
            cached_prompt_tokens: usage.cache_read_input_tokens.unwrap_or(0),
            cache_creation_tokens: usage.cache_write_input_tokens.unwrap_or(0),
            successful_requests: 1,
            ..Default::default()
        }
    }
}

impl ConverseReply {
    /// The message's blocks.
    pub fn into_blocks(self) -> Result<Vec<ReplyBlock>, Malformed> {
        self.output
            .and_then(|o| o.message)
            .and_then(|m| m.content)
            .ok_or_else(|| Malformed::new("no `output.message.content` in the reply"))
    }
}

/// The payload of a ConverseStream event; which one the frame's `:event-type` header says.
/// `messageStart` and `contentBlockStop` carry nothing read here.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    pub content_block_index: usize,
    pub start: Option<BlockStartKind>,
}

/// What a `contentBlockStart` opens: a tool call (text blocks open with their first delta).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStartKind {
    pub tool_use: Option<ToolUseStart>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseStart {
    pub tool_use_id: String,
    pub name: String,
}

/// A `contentBlockDelta`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    pub content_block_index: usize,
    pub delta: Option<DeltaKind>,
}

/// A delta's content: more text, or more of a tool call's input JSON (as text). Reasoning and
/// citation deltas have neither field.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaKind {
    #[serde(default, deserialize_with = "lenient_text")]
    pub text: Option<String>,
    pub tool_use: Option<ToolUseDelta>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolUseDelta {
    #[serde(default)]
    pub input: String,
}

/// A `messageStop`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStop {
    pub stop_reason: Option<String>,
}

/// The `metadata` event that ends a stream: the usage of the call.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamMetadata {
    pub usage: Option<ConverseUsage>,
}

/// Maps Converse's `stopReason` (a `tool_use` stop without calls is an ordinary stop: the
/// structured-output tool was answered).
pub fn finish_reason(reason: Option<&str>, made_calls: bool) -> FinishReason {
    match reason {
        Some("tool_use") if made_calls => FinishReason::ToolCalls,
        Some("max_tokens") => FinishReason::Length,
        Some("stop_sequence") => FinishReason::StopSequence,
        Some("content_filtered" | "guardrail_intervened") => FinishReason::ContentFilter,
        Some("end_turn" | "tool_use") | None => FinishReason::Stop,
        Some(other) => FinishReason::Other(other.to_string()),
    }
}

/// An error body: `{"message": ...}` (`Message` from some services).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(default, alias = "Message", deserialize_with = "lenient_text")]
    pub message: Option<String>,
    #[serde(default, rename = "__type", deserialize_with = "lenient_text")]
    pub kind: Option<String>,
}

/// The error type of a reply: the `x-amzn-errortype` header (`ValidationException:http://...`)
/// or the body's `__type`, without the part after `:` or before `#`.
pub fn error_type(headers: &[(String, String)], body: &ErrorBody) -> Option<String> {
    let raw = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("x-amzn-errortype"))
        .map(|(_, value)| value.as_str())
        .or(body.kind.as_deref())?;
    let raw = raw.split(':').next().unwrap_or(raw);
    Some(raw.rsplit('#').next().unwrap_or(raw).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_and_choices_write_their_kind_as_the_key() {
        let block = Block::ToolResult(ToolResult {
            tool_use_id: "t1",
            content: vec![ResultText { text: "r".into() }],
            status: ToolResultStatus::Success,
        });
        assert_eq!(
            serde_json::to_value(&block).unwrap(),
            json!({"toolResult": {"toolUseId": "t1", "content": [{"text": "r"}], "status": "success"}})
        );
        assert_eq!(
            serde_json::to_value(ToolChoice::Auto(Empty {})).unwrap(),
            json!({"auto": {}})
        );
    }

    #[test]
    fn error_types_come_from_the_header_or_the_body() {
        let body: ErrorBody =
            serde_json::from_value(json!({"Message": "This model doesn't support tool use."}))
                .unwrap();
        let headers = vec![(
            "x-amzn-errortype".to_string(),
            "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/".to_string(),
        )];
        assert_eq!(
            error_type(&headers, &body).as_deref(),
            Some("ValidationException")
        );
        let typed: ErrorBody = serde_json::from_value(
            json!({"__type": "com.amazon.coral.service#ThrottlingException", "message": "slow"}),
        )
        .unwrap();
        assert_eq!(
            error_type(&[], &typed).as_deref(),
            Some("ThrottlingException")
        );
        assert_eq!(
            body.message.as_deref(),
            Some("This model doesn't support tool use.")
        );
    }
}
