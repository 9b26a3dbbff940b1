//! Anthropic's Messages API (`POST /v1/messages`): content blocks tagged by `type` (text, image,
//! document, tool_use, tool_result, thinking, redacted_thinking), the stream's events, and the
//! `{"type": "error", "error": {type, message}}` body.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Text, lenient_text};
use crate::types::{ThinkingBlock, Usage};

/// A Messages request body (fields in the order they have always been sent).
#[derive(Debug, Clone, Serialize)]
pub struct MessagesRequest<'a> {
    /// Vertex AI's version of the API, which goes in the body there (the header on Anthropic's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anthropic_version: Option<&'a str>,
    /// Vertex AI sends none: the model is in the URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    pub max_tokens: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<RequestBlock<'a>>,
    pub messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<&'a str>,
    /// The config's `thinking` value, sent as it is (free-form: `{type, budget_tokens}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<&'a Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, Serialize)]
pub struct Turn<'a> {
    pub role: TurnRole,
    pub content: Vec<RequestBlock<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    User,
    Assistant,
}

/// `cache_control`: a prompt-cache breakpoint after this block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CacheControl {
    Ephemeral,
}

/// A content block of a request.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RequestBlock<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Document {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The call's arguments object (free-form).
        input: Cow<'a, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ToolResultContent<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

impl<'a> RequestBlock<'a> {
    pub fn text(text: impl Into<Cow<'a, str>>) -> Self {
        RequestBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    pub fn is_tool_result(&self) -> bool {
        matches!(self, RequestBlock::ToolResult { .. })
    }

    /// Puts a cache breakpoint after this block (thinking blocks take none).
    pub fn set_cache_control(&mut self) {
        match self {
            RequestBlock::Text { cache_control, .. }
            | RequestBlock::Image { cache_control, .. }
            | RequestBlock::Document { cache_control, .. }
            | RequestBlock::ToolUse { cache_control, .. }
            | RequestBlock::ToolResult { cache_control, .. } => {
                *cache_control = Some(CacheControl::Ephemeral);
            }
            RequestBlock::Thinking { .. } | RequestBlock::RedactedThinking { .. } => {}
        }
    }
}

impl<'a> From<&'a ThinkingBlock> for RequestBlock<'a> {
    /// A reasoning block sent back as it came, signature included.
    fn from(block: &'a ThinkingBlock) -> Self {
        match &block.redacted_data {
            Some(data) => RequestBlock::RedactedThinking { data },
            None => RequestBlock::Thinking {
                thinking: &block.thinking,
                signature: block.signature.as_deref().unwrap_or_default(),
            },
        }
    }
}

/// Where an image's or a document's bytes are.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source<'a> {
    Base64 {
        media_type: &'a str,
        data: &'a str,
    },
    Url {
        url: &'a str,
    },
    /// A plain-text document, decoded from its base64.
    Text {
        media_type: &'a str,
        data: String,
    },
}

/// A tool result: text, or blocks when the tool returned media.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<RequestBlock<'a>>),
}

/// A tool offered to the model.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's JSON schema (free-form).
    pub input_schema: Cow<'a, Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice<'a> {
    Auto,
    None,
    Any,
    Tool { name: &'a str },
}

/// A complete message (the reply of a call that does not stream, and the `message` of
/// `message_start`); its strings borrow from the reply's text.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageReply<'a> {
    #[serde(rename = "type", default, deserialize_with = "lenient_text")]
    pub kind: Option<String>,
    pub id: Option<String>,
    pub model: Option<String>,
    #[serde(borrow)]
    pub content: Option<Vec<ReplyBlock<'a>>>,
    pub stop_reason: Option<String>,
    pub usage: Option<AnthropicUsage>,
    /// Set when the body is an error (`"type": "error"`).
    pub error: Option<ErrorDetail>,
}

/// A content block of a reply; server-side tool blocks and later kinds are skipped.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReplyBlock<'a> {
    Text {
        #[serde(borrow, default)]
        text: Text<'a>,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        /// The call's arguments (free-form JSON; `{}` when streaming opens the block).
        input: Option<Value>,
    },
    Thinking {
        #[serde(borrow, default)]
        thinking: Text<'a>,
        #[serde(borrow, default)]
        signature: Text<'a>,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    #[serde(other)]
    Other,
}

/// Token counts; a stream's `message_delta` repeats the ones that changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct AnthropicUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// Takes the counts `later` reports, keeping the others.
    pub fn merge(&mut self, later: AnthropicUsage) {
        let take = |mine: &mut Option<u64>, theirs: Option<u64>| {
            if theirs.is_some() {
                *mine = theirs;
            }
        };
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
    }
}

impl From<AnthropicUsage> for Usage {
    fn from(usage: AnthropicUsage) -> Self {
        let cache_read = usage.cache_read_input_tokens.unwrap_or(0);
        let cache_write = usage.cache_creation_input_tokens.unwrap_or(0);
        // Anthropic's input_tokens leaves out the cached parts; our prompt count includes them.
        let prompt = usage.input_tokens.unwrap_or(0) + cache_read + cache_write;
        let completion = usage.output_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_prompt_tokens: cache_read,
            cache_creation_tokens: cache_write,
            successful_requests: 1,
            ..Default::default()
        }
    }
}

/// One event of a streamed message, tagged by its `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessagesEvent<'a> {
    MessageStart {
        #[serde(borrow)]
        message: Option<MessageReply<'a>>,
    },
    ContentBlockStart {
        index: Option<usize>,
        #[serde(borrow)]
        content_block: Option<ReplyBlock<'a>>,
    },
    ContentBlockDelta {
        index: Option<usize>,
        #[serde(borrow)]
        delta: Option<BlockDelta<'a>>,
    },
    MessageDelta {
        delta: Option<MessageDeltaBody>,
        usage: Option<AnthropicUsage>,
    },
    MessageStop,
    Error {
        error: Option<ErrorDetail>,
    },
    /// `ping`, `content_block_stop` and kinds added later: nothing to do.
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MessageDeltaBody {
    pub stop_reason: Option<String>,
}

/// A piece of the block at the event's index.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta<'a> {
    TextDelta {
        #[serde(borrow, default)]
        text: Text<'a>,
    },
    InputJsonDelta {
        #[serde(borrow, default)]
        partial_json: Text<'a>,
    },
    ThinkingDelta {
        #[serde(borrow, default)]
        thinking: Text<'a>,
    },
    SignatureDelta {
        #[serde(borrow, default)]
        signature: Text<'a>,
    },
    /// Deltas of later kinds (citations) carry nothing the response keeps.
    #[serde(other)]
    Other,
}

impl BlockDelta<'_> {
    /// The delta's `type`, for errors.
    pub fn kind(&self) -> &'static str {
        match self {
            BlockDelta::TextDelta { .. } => "text_delta",
            BlockDelta::InputJsonDelta { .. } => "input_json_delta",
            BlockDelta::ThinkingDelta { .. } => "thinking_delta",
            BlockDelta::SignatureDelta { .. } => "signature_delta",
            BlockDelta::Other => "unknown",
        }
    }
}

/// `{type, message}` of an error body or an `error` event.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorDetail {
    #[serde(rename = "type", default, deserialize_with = "lenient_text")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub message: Option<String>,
}

/// An error body as an HTTP error reply carries it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    pub error: Option<ErrorDetail>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_serialize_with_their_tag_first_and_breakpoints_last() {
        let mut block = RequestBlock::Document {
            source: Source::Base64 {
                media_type: "application/pdf",
                data: "JVBE",
            },
            title: Some("a.pdf"),
            cache_control: None,
        };
        block.set_cache_control();
        assert_eq!(
            serde_json::to_string(&block).unwrap(),
            r#"{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"a.pdf","cache_control":{"type":"ephemeral"}}"#
        );
        assert_eq!(
            serde_json::to_value(ToolChoice::Any).unwrap(),
            json!({"type": "any"})
        );
    }

    #[test]
    fn later_block_and_event_kinds_are_skipped() {
        let reply: MessageReply<'_> = serde_json::from_str(
            r#"{"id": "m", "type": "message", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}, {"type": "text", "text": "hi", "citations": []}],
                "usage": {"input_tokens": 1, "output_tokens": 2, "service_tier": "standard", "server_tool_use": {"web_search_requests": 1}}}"#,
        )
        .unwrap();
        let blocks = reply.content.unwrap_or_default();
        assert!(matches!(blocks[0], ReplyBlock::Other));
        assert!(matches!(&blocks[1], ReplyBlock::Text { text } if text.as_str() == "hi"));
        let delta: MessagesEvent<'_> = serde_json::from_str(
            r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {}}}"#,
        )
        .unwrap();
        assert!(matches!(
            delta,
            MessagesEvent::ContentBlockDelta {
                delta: Some(BlockDelta::Other),
                ..
            }
        ));
        let ping: MessagesEvent<'_> = serde_json::from_str(r#"{"type": "ping"}"#).unwrap();
        assert!(matches!(ping, MessagesEvent::Other));
    }
}
