//! Google's Gemini API (`generateContent`, `streamGenerateContent?alt=sse`): contents of parts
//! (`text`, `inlineData`, `fileData`, `functionCall`, `functionResponse`, with a
//! `thoughtSignature` beside a call), generation config, and Google's error body.
//!
//! A part is one of several fields rather than a `type` tag: requests write it as an
//! externally tagged enum (exactly one field set); replies read it as a struct of optional
//! fields, so parts of kinds not read here (executable code, inline data) are skipped.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Text, lenient_text, null_default};
use crate::types::Usage;

/// A generateContent request body (fields in the order they have always been sent).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest<'a> {
    pub contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<SystemInstruction<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "GenerationConfig::is_empty")]
    pub generation_config: GenerationConfig<'a>,
}

/// One turn: `user` or `model`.
#[derive(Debug, Clone, Serialize)]
pub struct Content<'a> {
    pub role: &'static str,
    pub parts: Vec<Part<'a>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemInstruction<'a> {
    pub parts: Vec<TextPart<'a>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TextPart<'a> {
    pub text: Cow<'a, str>,
}

/// A request part: its data, and the signature a thinking model gave the call it carries.
#[derive(Debug, Clone, Serialize)]
pub struct Part<'a> {
    #[serde(flatten)]
    pub data: PartData<'a>,
    #[serde(rename = "thoughtSignature", skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<&'a str>,
}

impl<'a> From<PartData<'a>> for Part<'a> {
    fn from(data: PartData<'a>) -> Self {
        Part {
            data,
            thought_signature: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PartData<'a> {
    Text(&'a str),
    InlineData(Blob<'a>),
    FileData(FileData<'a>),
    FunctionCall(FunctionCall<'a>),
    FunctionResponse(FunctionResponse<'a>),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob<'a> {
    pub mime_type: &'a str,
    pub data: &'a str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileData<'a> {
    pub mime_type: &'a str,
    pub file_uri: &'a str,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionCall<'a> {
    pub name: &'a str,
    /// The call's arguments object (free-form).
    pub args: Cow<'a, Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionResponse<'a> {
    pub name: &'a str,
    pub response: FunctionOutput<'a>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionOutput<'a> {
    pub output: Cow<'a, str>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tools<'a> {
    pub function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FunctionDeclaration<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's schema rewritten into Gemini's OpenAPI subset (free-form JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig<'a> {
    pub function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCallingConfig<'a> {
    pub mode: FunctionCallingMode,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_function_names: Vec<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FunctionCallingMode {
    Auto,
    None,
    Any,
}

/// `generationConfig`; left out of the body when nothing is set.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_mime_type: Option<&'static str>,
    /// The response schema in Gemini's OpenAPI subset (free-form JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
}

impl GenerationConfig<'_> {
    pub fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.max_output_tokens.is_none()
            && self.stop_sequences.is_empty()
            && self.seed.is_none()
            && self.presence_penalty.is_none()
            && self.frequency_penalty.is_none()
            && self.thinking_config.is_none()
            && self.response_mime_type.is_none()
            && self.response_schema.is_none()
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingConfig {
    pub thinking_budget: u64,
    pub include_thoughts: bool,
}

/// A `GenerateContentResponse`: a whole reply, or one chunk of a stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse<'a> {
    #[serde(default, deserialize_with = "null_default", borrow)]
    pub candidates: Vec<Candidate<'a>>,
    pub prompt_feedback: Option<PromptFeedback>,
    pub usage_metadata: Option<UsageMetadata>,
    pub model_version: Option<String>,
    pub response_id: Option<String>,
    /// An error sent with a 200 or as a stream chunk.
    pub error: Option<GoogleError>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate<'a> {
    #[serde(borrow)]
    pub content: Option<CandidateContent<'a>>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CandidateContent<'a> {
    #[serde(default, deserialize_with = "null_default", borrow)]
    pub parts: Vec<ReplyPart<'a>>,
}

/// A reply part: text (a thought when `thought` is true) or a function call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyPart<'a> {
    #[serde(borrow)]
    pub text: Option<Text<'a>>,
    pub thought: Option<bool>,
    pub thought_signature: Option<String>,
    pub function_call: Option<ReplyFunctionCall>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReplyFunctionCall {
    pub id: Option<String>,
    pub name: Option<String>,
    /// The call's arguments (free-form JSON).
    pub args: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback {
    pub block_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    pub prompt_token_count: Option<u64>,
    pub tool_use_prompt_token_count: Option<u64>,
    pub candidates_token_count: Option<u64>,
    pub thoughts_token_count: Option<u64>,
    pub total_token_count: Option<u64>,
    pub cached_content_token_count: Option<u64>,
}

impl From<UsageMetadata> for Usage {
    fn from(usage: UsageMetadata) -> Self {
        let count = |n: Option<u64>| n.unwrap_or(0);
        let prompt = count(usage.prompt_token_count) + count(usage.tool_use_prompt_token_count);
        let thoughts = count(usage.thoughts_token_count);
        // Gemini counts thinking apart from the candidates; our completion count includes it.
        let completion = count(usage.candidates_token_count) + thoughts;
        let total = match count(usage.total_token_count) {
            0 => prompt + completion,
            total => total,
        };
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: total,
            cached_prompt_tokens: count(usage.cached_content_token_count),
            reasoning_tokens: thoughts,
            successful_requests: 1,
            ..Default::default()
        }
    }
}

/// `{"error": {...}}` as an HTTP error reply carries it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    pub error: Option<GoogleError>,
}

/// Google's error: the HTTP code, the message, the canonical status and typed details.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GoogleError {
    pub code: Option<u16>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub details: Vec<ErrorDetail>,
}

/// One of `google.rpc.ErrorInfo` (its `reason`) or `google.rpc.RetryInfo` (its `retryDelay`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    #[serde(default, deserialize_with = "lenient_text")]
    pub reason: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub retry_delay: Option<String>,
}

impl GoogleError {
    /// Whether a detail gives `reason` (`API_KEY_INVALID`).
    pub fn has_reason(&self, reason: &str) -> bool {
        self.details
            .iter()
            .any(|d| d.reason.as_deref() == Some(reason))
    }

    /// The wait a `RetryInfo` detail asks for (`"37s"`, `"2.5s"`).
    pub fn retry_delay(&self) -> Option<Duration> {
        self.details.iter().find_map(|d| {
            let seconds: f64 = d.retry_delay.as_deref()?.strip_suffix('s')?.parse().ok()?;
            Duration::try_from_secs_f64(seconds).ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_write_one_field_and_the_signature_beside_it() {
        let part = Part {
            data: PartData::FunctionCall(FunctionCall {
                name: "look_up",
                args: Cow::Owned(json!({"q": 1})),
            }),
            thought_signature: Some("sig"),
        };
        assert_eq!(
            serde_json::to_string(&part).unwrap(),
            r#"{"functionCall":{"name":"look_up","args":{"q":1}},"thoughtSignature":"sig"}"#
        );
        let empty = GenerationConfig::default();
        assert!(empty.is_empty());
    }

    #[test]
    fn replies_skip_parts_they_do_not_read_and_errors_give_typed_details() {
        let reply: GenerateContentResponse<'_> = serde_json::from_str(
            r#"{"candidates": [{"content": {"role": "model", "parts": [{"executableCode": {"code": "1"}}, {"text": "hi"}]}, "finishReason": "STOP", "safetyRatings": []}], "modelVersion": "g"}"#,
        )
        .unwrap();
        let parts = &reply.candidates[0].content.as_ref().unwrap().parts;
        assert!(parts[0].text.is_none() && parts[0].function_call.is_none());
        assert_eq!(parts[1].text.as_ref().map(Text::as_str), Some("hi"));
        let error: ErrorBody = serde_json::from_value(json!({"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}))
        .unwrap();
        let error = error.error.unwrap();
        assert_eq!(error.retry_delay(), Some(Duration::from_secs(37)));
        assert!(!error.has_reason("API_KEY_INVALID"));
    }
}
