//! OpenAI chat completions (`POST /chat/completions`), as OpenAI, Azure OpenAI and the
//! OpenAI-compatible servers (Ollama, vLLM, OpenRouter, Groq, DeepSeek, ...) speak it.
//!
//! The request's fields are declared in alphabetical order: CrewAI's client writes the body's
//! keys sorted, and the conformance suite compares our bodies with its recordings.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Malformed, Text, is_false, lenient_code, lenient_text, null_default};
use crate::types::{ContentPart, FinishReason, LlmResponse, ToolCall, Usage};

/// A chat-completions request body.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Reasoning models (and configs that ask for it) take `max_completion_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    pub messages: Vec<ChatMessage<'a>>,
    /// Azure sends none: the deployment is in the URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ChatResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ChatToolChoice<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

/// `stream_options`: usage arrives in the last chunk only when asked for.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// One message of the conversation, tagged by its role.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage<'a> {
    System {
        content: ChatContent<'a>,
    },
    User {
        content: ChatContent<'a>,
    },
    /// `content` is `null` on a turn that only called tools.
    Assistant {
        content: Option<ChatContent<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        content: Cow<'a, str>,
    },
}

/// A message's content: plain text, or parts when it carries images or files.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ChatContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ChatPart<'a>>),
}

/// One content part.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatPart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
    File { file: FileData<'a> },
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageUrl<'a> {
    pub url: &'a str,
}

/// An inline file: a `data:` URL of its base64 bytes.
#[derive(Debug, Clone, Serialize)]
pub struct FileData<'a> {
    pub file_data: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<&'a str>,
}

impl<'a> From<&'a ContentPart> for ChatPart<'a> {
    fn from(part: &'a ContentPart) -> Self {
        match part {
            ContentPart::Text { text } => ChatPart::Text { text },
            ContentPart::Image { url, .. } => ChatPart::ImageUrl {
                image_url: ImageUrl { url },
            },
            ContentPart::File {
                data_base64,
                media_type,
                filename,
            } => ChatPart::File {
                file: FileData {
                    file_data: format!("data:{media_type};base64,{data_base64}"),
                    filename: filename.as_deref(),
                },
            },
        }
    }
}

/// The `"type": "function"` of tool calls, tools and forced tool choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionKind {
    #[default]
    Function,
}

/// A tool call of an earlier assistant turn (keys in the order OpenAI documents them).
#[derive(Debug, Clone, Serialize)]
pub struct ChatToolCall<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub function: FunctionCall<'a>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionCall<'a> {
    pub name: &'a str,
    /// JSON text, as the model wrote it.
    pub arguments: Cow<'a, str>,
}

/// A tool offered to the model.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatTool<'a> {
    Function { function: FunctionDefinition<'a> },
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionDefinition<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// Sent only when asked for, as CrewAI sends it.
    #[serde(skip_serializing_if = "is_false")]
    pub strict: bool,
    /// The tool's JSON schema (free-form).
    pub parameters: &'a Value,
}

/// `tool_choice`: a mode, or one function forced.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ChatToolChoice<'a> {
    Mode(ToolMode),
    Function(NamedFunction<'a>),
}

/// The tool-choice modes both OpenAI APIs share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    Auto,
    None,
    Required,
}

/// `{"type": "function", "function": {"name": ...}}`
#[derive(Debug, Clone, Serialize)]
pub struct NamedFunction<'a> {
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub function: FunctionName<'a>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionName<'a> {
    pub name: &'a str,
}

/// `response_format`: a JSON schema to answer in, or the config's own value passed as it is
/// (`{"type": "json_object"}`, a complete `json_schema` object).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ChatResponseFormat<'a> {
    Schema(SchemaFormat<'a>),
    /// Free-form: whatever the config holds, sent unchanged.
    Passthrough(&'a Value),
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SchemaFormat<'a> {
    JsonSchema { json_schema: JsonSchemaSpec<'a> },
}

/// The schema wrapper (keys in the order CrewAI sends them).
#[derive(Debug, Clone, Serialize)]
pub struct JsonSchemaSpec<'a> {
    /// The JSON schema itself (free-form).
    pub schema: &'a Value,
    pub name: &'a str,
    pub strict: bool,
}

impl<'a> ChatResponseFormat<'a> {
    /// The format for a schema: the request's, else the config's (a bare JSON schema, a
    /// `{"type": ...}` object passed as it is, or a `{name, schema, strict}` mapping).
    pub fn resolve(
        request: Option<&'a crate::types::ResponseFormat>,
        config: Option<&'a Value>,
    ) -> Option<Self> {
        if let Some(format) = request {
            return Some(Self::schema(&format.schema, &format.name, format.strict));
        }
        // The config's value is free-form YAML/JSON: its keys are looked up, not decoded.
        let config = config?;
        let kind = config.get("type").and_then(Value::as_str);
        if matches!(kind, Some("json_schema" | "json_object" | "text")) {
            return Some(ChatResponseFormat::Passthrough(config));
        }
        if let Some(schema) = config.get("schema") {
            let name = config
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("response");
            let strict = config
                .get("strict")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            return Some(Self::schema(schema, name, strict));
        }
        let name = config
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("response");
        Some(Self::schema(config, name, true))
    }

    fn schema(schema: &'a Value, name: &'a str, strict: bool) -> Self {
        ChatResponseFormat::Schema(SchemaFormat::JsonSchema {
            json_schema: JsonSchemaSpec {
                schema,
                name,
                strict,
            },
        })
    }
}

/// A complete chat completion.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatCompletion {
    pub id: Option<String>,
    pub model: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub choices: Vec<Choice>,
    pub usage: Option<ChatUsage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Choice {
    pub message: Option<ReplyMessage>,
    pub finish_reason: Option<String>,
}

/// The assistant message of a choice.
#[derive(Debug, Clone, Deserialize)]
pub struct ReplyMessage {
    /// Some compatible servers send a list of parts here; only a string is read as the text.
    #[serde(default, deserialize_with = "lenient_text")]
    pub content: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub refusal: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub tool_calls: Vec<ReplyToolCall>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReplyToolCall {
    #[serde(default)]
    pub id: String,
    pub function: Option<ReplyFunction>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReplyFunction {
    pub name: Option<String>,
    /// JSON text by the spec; some servers send the object itself, so any JSON is taken.
    pub arguments: Option<Value>,
}

/// `usage`, with the cached and reasoning token details.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct ChatUsage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: Option<u64>,
}

impl From<ChatUsage> for Usage {
    fn from(usage: ChatUsage) -> Self {
        let prompt = usage.prompt_tokens.unwrap_or(0);
        let completion = usage.completion_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage.total_tokens.unwrap_or(prompt + completion),
            cached_prompt_tokens: usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: usage
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            successful_requests: 1,
            ..Default::default()
        }
    }
}

/// A reply's usage, or one successful request and no counts when it reported none.
pub fn usage_of(usage: Option<ChatUsage>) -> Usage {
    usage.map(Usage::from).unwrap_or(Usage {
        successful_requests: 1,
        ..Default::default()
    })
}

/// Maps OpenAI's `finish_reason`.
pub fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        None | Some("stop") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
    }
}

impl TryFrom<ChatCompletion> for LlmResponse {
    type Error = Malformed;

    /// The first choice as the response (tool names as the provider sent them). A reply whose
    /// only content is a refusal answers with it, marked [`FinishReason::ContentFilter`].
    fn try_from(completion: ChatCompletion) -> Result<Self, Malformed> {
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| Malformed::new("no `choices` in the reply"))?;
        let message = choice
            .message
            .ok_or_else(|| Malformed::new("the first choice has no `message`"))?;
        let mut tool_calls = Vec::with_capacity(message.tool_calls.len());
        for call in message.tool_calls {
            let function = call
                .function
                .ok_or_else(|| Malformed::new("a tool call has no `function`"))?;
            let name = function
                .name
                .ok_or_else(|| Malformed::new("a tool call has no name"))?;
            let arguments = match function.arguments {
                Some(Value::String(raw)) => raw,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            tool_calls.push(ToolCall::from_raw_arguments(call.id, name, &arguments));
        }
        let mut content = message.content;
        let mut reason = finish_reason(choice.finish_reason.as_deref());
        if content.is_none()
            && tool_calls.is_empty()
            && let Some(refusal) = message.refusal
        {
            content = Some(refusal);
            reason = FinishReason::ContentFilter;
        }
        Ok(LlmResponse {
            content,
            tool_calls,
            finish_reason: reason,
            usage: usage_of(completion.usage),
            response_id: completion.id,
            model: completion.model,
            thinking: Vec::new(),
        })
    }
}

/// One chunk of a streamed completion; its strings borrow from the event's text.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatChunk<'a> {
    #[serde(borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub model: Option<Text<'a>>,
    #[serde(default, deserialize_with = "null_default", borrow)]
    pub choices: Vec<ChunkChoice<'a>>,
    pub usage: Option<ChatUsage>,
    /// A server that fails mid-stream sends its error as a chunk.
    pub error: Option<ErrorField>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChunkChoice<'a> {
    #[serde(borrow)]
    pub finish_reason: Option<Text<'a>>,
    #[serde(borrow)]
    pub delta: Option<Delta<'a>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Delta<'a> {
    #[serde(borrow)]
    pub content: Option<Text<'a>>,
    #[serde(default, deserialize_with = "null_default", borrow)]
    pub tool_calls: Vec<DeltaToolCall<'a>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeltaToolCall<'a> {
    pub index: Option<usize>,
    #[serde(borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub function: Option<DeltaFunction<'a>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeltaFunction<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub arguments: Option<Text<'a>>,
}

/// An error body: `{"error": {...}}` (OpenAI, Azure, vLLM, OpenRouter), `{"error": "text"}`
/// (Ollama's native form) or `{"message": ...}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    pub error: Option<ErrorField>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ErrorField {
    Detail(ErrorDetail),
    Text(String),
}

/// `{"message", "type", "param", "code"}`, and Azure's `innererror`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorDetail {
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
    #[serde(rename = "type", default, deserialize_with = "lenient_text")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub param: Option<String>,
    #[serde(default, deserialize_with = "lenient_code")]
    pub code: Option<String>,
    pub innererror: Option<InnerError>,
}

/// Azure's detail on a filtered prompt (`ResponsibleAIPolicyViolation`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InnerError {
    #[serde(default, deserialize_with = "lenient_code")]
    pub code: Option<String>,
}

impl ErrorBody {
    /// The error's detail (a text-only error becomes one with just its message).
    pub fn detail(self) -> ErrorDetail {
        match self.error {
            Some(field) => field.into_detail(),
            None => ErrorDetail {
                message: self.message,
                ..Default::default()
            },
        }
    }
}

impl ErrorField {
    pub fn into_detail(self) -> ErrorDetail {
        match self {
            ErrorField::Detail(detail) => detail,
            ErrorField::Text(message) => ErrorDetail {
                message: Some(message),
                ..Default::default()
            },
        }
    }
}

/// What an error's codes say beyond its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorQuirk {
    ContextLength,
    ContentFilter,
    ToolsUnsupported,
}

impl ErrorDetail {
    pub fn message_or(&self, fallback: &str) -> String {
        self.message
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| fallback.to_string())
    }

    /// The quirk the error's code, parameter or (for servers with no codes) its words name.
    pub fn quirk(&self) -> Option<ErrorQuirk> {
        let code = self.code.as_deref().unwrap_or_default();
        let message = self.message.as_deref().unwrap_or_default();
        let inner = self.innererror.as_ref().and_then(|i| i.code.as_deref());
        if code == "content_filter" || inner == Some("ResponsibleAIPolicyViolation") {
            return Some(ErrorQuirk::ContentFilter);
        }
        if code == "context_length_exceeded" || crate::error::looks_like_context_overflow(message) {
            return Some(ErrorQuirk::ContextLength);
        }
        let tools_param = matches!(
            self.param.as_deref(),
            Some("tools" | "tool_choice" | "functions")
        );
        if (tools_param && matches!(code, "unsupported_parameter" | "unsupported_value"))
            || crate::adapter_support::says_tools_unsupported(message)
        {
            return Some(ErrorQuirk::ToolsUnsupported);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_bodies_of_every_shape_name_their_quirk() {
        let read = |body: Value| serde_json::from_value::<ErrorBody>(body).unwrap().detail();
        let openai = read(
            json!({"error": {"message": "Unsupported parameter: 'tools' is not supported with this model.", "type": "invalid_request_error", "param": "tools", "code": "unsupported_parameter"}}),
        );
        assert_eq!(openai.quirk(), Some(ErrorQuirk::ToolsUnsupported));
        let ollama =
            read(json!({"error": "registry.ollama.ai/library/gemma does not support tools"}));
        assert_eq!(ollama.quirk(), Some(ErrorQuirk::ToolsUnsupported));
        let azure = read(
            json!({"error": {"message": "The response was filtered", "type": null, "param": "prompt", "code": "content_filter", "status": 400, "innererror": {"code": "ResponsibleAIPolicyViolation"}}}),
        );
        assert_eq!(azure.quirk(), Some(ErrorQuirk::ContentFilter));
        let overflow =
            read(json!({"error": {"message": "too big", "code": "context_length_exceeded"}}));
        assert_eq!(overflow.quirk(), Some(ErrorQuirk::ContextLength));
        let openrouter = read(json!({"error": {"message": "No endpoints found", "code": 404}}));
        assert_eq!(openrouter.code.as_deref(), Some("404"));
        assert_eq!(openrouter.quirk(), None);
        assert_eq!(read(json!({"detail": "Not Found"})).quirk(), None);
    }

    #[test]
    fn a_completion_reads_without_the_fields_it_does_not_know() {
        let completion: ChatCompletion = serde_json::from_value(json!({
            "id": "c", "object": "chat.completion", "system_fingerprint": "fp",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "annotations": [],
                "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": 0}}
        }))
        .unwrap();
        let response = LlmResponse::try_from(completion).unwrap();
        assert_eq!(response.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            (
                response.usage.total_tokens,
                response.usage.cached_prompt_tokens
            ),
            (5, 1)
        );
    }
}
