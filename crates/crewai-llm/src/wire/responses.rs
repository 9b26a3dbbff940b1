//! OpenAI's Responses API (`POST /responses`): input items, output items, the stream's typed
//! events. Errors share chat completions' `{message, type, param, code}` detail.
//!
//! The request's fields are declared in alphabetical order, as the body has always been sent.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::openai::{ChatResponseFormat, ErrorDetail, FunctionKind, SchemaFormat, ToolMode};
use super::{Malformed, Text, lenient_code, lenient_text, null_default};
use crate::types::{ContentPart, FinishReason, LlmResponse, ToolCall, Usage};

/// A Responses-API request body.
#[derive(Debug, Clone, Serialize)]
pub struct ResponsesRequest<'a> {
    pub input: Vec<InputItem<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    pub model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ResponsesToolChoice<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ResponsesTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reasoning<'a> {
    pub effort: &'a str,
}

/// One input item: a message (tagged by role) or a function call or its output (tagged by type).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum InputItem<'a> {
    Message(InputMessage<'a>),
    Item(TypedItem<'a>),
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum InputMessage<'a> {
    System { content: InputContent<'a> },
    User { content: InputContent<'a> },
    Assistant { content: Cow<'a, str> },
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TypedItem<'a> {
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        /// JSON text, as the model wrote it.
        arguments: Cow<'a, str>,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Cow<'a, str>,
    },
}

/// A message's content: text, or parts when it carries images or files.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum InputContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<InputPart<'a>>),
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputPart<'a> {
    InputText {
        text: &'a str,
    },
    InputImage {
        image_url: &'a str,
    },
    InputFile {
        /// A `data:` URL of the file's base64 bytes.
        file_data: String,
        filename: &'a str,
    },
}

impl<'a> From<&'a ContentPart> for InputPart<'a> {
    fn from(part: &'a ContentPart) -> Self {
        match part {
            ContentPart::Text { text } => InputPart::InputText { text },
            ContentPart::Image { url, .. } => InputPart::InputImage { image_url: url },
            ContentPart::File {
                data_base64,
                media_type,
                filename,
            } => InputPart::InputFile {
                file_data: format!("data:{media_type};base64,{data_base64}"),
                filename: filename.as_deref().unwrap_or("file"),
            },
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ResponsesTool<'a> {
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's JSON schema (free-form).
    pub parameters: &'a Value,
    pub strict: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ResponsesToolChoice<'a> {
    Mode(ToolMode),
    Function {
        #[serde(rename = "type")]
        kind: FunctionKind,
        name: &'a str,
    },
}

/// `text`: the output format.
#[derive(Debug, Clone, Serialize)]
pub struct TextConfig<'a> {
    pub format: TextFormat<'a>,
}

/// Chat completions' `response_format` with its `json_schema` wrapper flattened away.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum TextFormat<'a> {
    Schema {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(flatten)]
        spec: super::openai::JsonSchemaSpec<'a>,
    },
    /// The config's own format value, flattened the same way (free-form).
    Passthrough(Map<String, Value>),
}

impl<'a> From<ChatResponseFormat<'a>> for TextFormat<'a> {
    fn from(format: ChatResponseFormat<'a>) -> Self {
        match format {
            ChatResponseFormat::Schema(SchemaFormat::JsonSchema { json_schema }) => {
                TextFormat::Schema {
                    kind: "json_schema",
                    spec: json_schema,
                }
            }
            ChatResponseFormat::Passthrough(config) => {
                let mut flat = Map::new();
                flat.insert(
                    "type".into(),
                    config
                        .get("type")
                        .cloned()
                        .unwrap_or_else(|| Value::String("json_schema".into())),
                );
                if let Some(Value::Object(inner)) = config.get("json_schema") {
                    flat.extend(inner.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                TextFormat::Passthrough(flat)
            }
        }
    }
}

/// A complete response object (also the payload of `response.completed`).
#[derive(Debug, Clone, Deserialize)]
pub struct ResponseObject {
    pub id: Option<String>,
    pub model: Option<String>,
    pub status: Option<String>,
    pub output: Option<Vec<OutputItem>>,
    pub usage: Option<ResponsesUsage>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub error: Option<ErrorDetail>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IncompleteDetails {
    pub reason: Option<String>,
}

/// One output item; kinds not read here (reasoning, web search calls, ...) are skipped.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Message {
        #[serde(default, deserialize_with = "null_default")]
        content: Vec<OutputContent>,
    },
    FunctionCall {
        call_id: Option<String>,
        id: Option<String>,
        name: Option<String>,
        #[serde(default, deserialize_with = "lenient_text")]
        arguments: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    OutputText {
        #[serde(default)]
        text: String,
    },
    Refusal {
        #[serde(default)]
        refusal: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct ResponsesUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub input_tokens_details: Option<InputTokensDetails>,
    pub output_tokens_details: Option<OutputTokensDetails>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct InputTokensDetails {
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: Option<u64>,
}

impl From<ResponsesUsage> for Usage {
    fn from(usage: ResponsesUsage) -> Self {
        let prompt = usage.input_tokens.unwrap_or(0);
        let completion = usage.output_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage.total_tokens.unwrap_or(prompt + completion),
            cached_prompt_tokens: usage
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: usage
                .output_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            successful_requests: 1,
            ..Default::default()
        }
    }
}

impl TryFrom<ResponseObject> for LlmResponse {
    type Error = Malformed;

    /// The text of the message items (refusals included) and the function calls, with tool
    /// names as the provider sent them.
    fn try_from(response: ResponseObject) -> Result<Self, Malformed> {
        let output = response
            .output
            .ok_or_else(|| Malformed::new("no `output` in the reply"))?;
        let mut text = String::new();
        let mut saw_text = false;
        let mut tool_calls = Vec::new();
        for item in output {
            match item {
                OutputItem::Message { content } => {
                    for part in content {
                        match part {
                            OutputContent::OutputText { text: t }
                            | OutputContent::Refusal { refusal: t } => {
                                text.push_str(&t);
                                saw_text = true;
                            }
                            OutputContent::Other => {}
                        }
                    }
                }
                OutputItem::FunctionCall {
                    call_id,
                    id,
                    name,
                    arguments,
                } => {
                    let name = name.ok_or_else(|| Malformed::new("a function call has no name"))?;
                    let id = call_id.or(id).unwrap_or_default();
                    tool_calls.push(ToolCall::from_raw_arguments(
                        id,
                        name,
                        arguments.as_deref().unwrap_or_default(),
                    ));
                }
                OutputItem::Other => {}
            }
        }
        let incomplete = response
            .incomplete_details
            .and_then(|details| details.reason);
        let finish_reason = match (response.status.as_deref(), incomplete.as_deref()) {
            (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
            (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
            _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
            (Some("completed") | None, _) => FinishReason::Stop,
            (Some(other), _) => FinishReason::Other(other.to_string()),
        };
        Ok(LlmResponse {
            content: saw_text.then_some(text),
            tool_calls,
            finish_reason,
            usage: response.usage.map(Usage::from).unwrap_or(Usage {
                successful_requests: 1,
                ..Default::default()
            }),
            response_id: response.id,
            model: response.model,
            thinking: Vec::new(),
        })
    }
}

/// One stream event, tagged by its `type`; the kinds not read here are skipped.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type")]
pub enum ResponsesEvent<'a> {
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        #[serde(borrow, default)]
        delta: Text<'a>,
    },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        output_index: Option<usize>,
        item: Option<OutputItem>,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        output_index: Option<usize>,
        #[serde(borrow, default)]
        delta: Text<'a>,
    },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta {
        #[serde(borrow, default)]
        delta: Text<'a>,
    },
    /// The response ended (`response.completed`, or `response.incomplete` when cut short).
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Completed { response: Option<ResponseObject> },
    #[serde(rename = "response.failed")]
    Failed { response: Option<ResponseObject> },
    /// A stream-level error: the detail's fields at the top level.
    #[serde(rename = "error")]
    Error {
        #[serde(default, deserialize_with = "lenient_text")]
        message: Option<String>,
        #[serde(default, deserialize_with = "lenient_code")]
        code: Option<String>,
        #[serde(default, deserialize_with = "lenient_text")]
        param: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_of_later_kinds_and_extra_fields_are_tolerated() {
        let created: ResponsesEvent<'_> = serde_json::from_str(
            r#"{"type": "response.created", "sequence_number": 0, "response": {"output": []}}"#,
        )
        .unwrap();
        assert!(matches!(created, ResponsesEvent::Other));
        let delta: ResponsesEvent<'_> = serde_json::from_str(
            r#"{"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Bon"}"#,
        )
        .unwrap();
        assert!(
            matches!(delta, ResponsesEvent::OutputTextDelta { delta } if delta.as_str() == "Bon")
        );
        let incomplete = json!({"type": "response.incomplete", "response": {"status": "incomplete", "output": [], "incomplete_details": {"reason": "max_output_tokens"}}}).to_string();
        let incomplete: ResponsesEvent<'_> = serde_json::from_str(&incomplete).unwrap();
        let ResponsesEvent::Completed {
            response: Some(response),
        } = incomplete
        else {
            panic!("response.incomplete ends the response");
        };
        let response = LlmResponse::try_from(response).unwrap();
        assert_eq!(response.finish_reason, FinishReason::Length);
    }

    #[test]
    fn flattened_text_formats_keep_their_keys() {
        let schema = json!({"type": "object"});
        let format = crate::types::ResponseFormat {
            name: "Out".into(),
            schema,
            strict: true,
        };
        let text =
            TextFormat::from(ChatResponseFormat::resolve(Some(&format), None).expect("a format"));
        assert_eq!(
            serde_json::to_string(&text).unwrap(),
            r#"{"type":"json_schema","schema":{"type":"object"},"name":"Out","strict":true}"#
        );
        let object = json!({"type": "json_object"});
        let text =
            TextFormat::from(ChatResponseFormat::resolve(None, Some(&object)).expect("a format"));
        assert_eq!(serde_json::to_value(&text).unwrap(), object);
    }
}
