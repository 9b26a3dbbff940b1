//! IBM watsonx.ai's chat API (`POST /ml/v1/text/chat`, `/ml/v1/text/chat_stream`): OpenAI's
//! messages and tools with watsonx's own envelope. Its replies and stream chunks have OpenAI's
//! shape (`choices`, `delta`, `usage`) and are read with [`super::openai`]'s types.
//!
//! The envelope: the model is `model_id` and the calls run in a `project_id` or a `space_id`
//! (none for a deployment, whose URL names it); a tool choice is split in two fields,
//! `tool_choice_option` for a mode and `tool_choice` for one named function; the stream is its
//! own endpoint, so there is no `stream` field.

use serde::{Deserialize, Serialize};

use super::lenient_code;
use super::lenient_text;
use super::openai::{ChatMessage, ChatResponseFormat, ChatTool, NamedFunction, ToolMode};

/// A chat request body.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    /// `None` for a deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space_id: Option<&'a str>,
    pub messages: Vec<ChatMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice_option: Option<ToolMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<NamedFunction<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ChatResponseFormat<'a>>,
}

/// An error body: `{"errors": [{"code", "message", "more_info"}], "trace", "status_code"}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(default, deserialize_with = "super::null_default")]
    pub errors: Vec<ErrorItem>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorItem {
    #[serde(default, deserialize_with = "lenient_code")]
    pub code: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_read_and_tolerate_nulls() {
        let body: ErrorBody = serde_json::from_str(
            r#"{"errors":[{"code":"authentication_token_expired","message":"Failed to authenticate the request due to an expired token","more_info":"https://cloud.ibm.com/apidocs/watsonx-ai"}],"trace":"t","status_code":401}"#,
        )
        .unwrap_or_default();
        assert_eq!(
            body.errors.first().and_then(|e| e.code.as_deref()),
            Some("authentication_token_expired")
        );
        let empty: ErrorBody = serde_json::from_str(r#"{"errors":null}"#).unwrap_or_default();
        assert!(empty.errors.is_empty());
    }
}
