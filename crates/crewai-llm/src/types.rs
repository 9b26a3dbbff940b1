//! The provider-neutral message, tool and response types every adapter speaks.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::extensions::Extensions;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// An image, by URL (`https://…` or a `data:` URL).
    Image {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
    /// A file given inline as base64 (PDFs and the like).
    File {
        data_base64: String,
        media_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
}

/// A reasoning block a provider returned (Anthropic extended thinking); sent back unchanged on later turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    pub thinking: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Anthropic's `redacted_thinking` carries only opaque data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_data: Option<String>,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them, parsed as JSON. When the model sent text that is not
    /// valid JSON it is kept verbatim as a `Value::String`, so the tool layer can repair it.
    pub arguments: Value,
    /// Provider-specific opaque data that must travel back with the call (Gemini's thought signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl ToolCall {
    /// Builds a call from the raw argument text a provider sent.
    pub fn from_raw_arguments(id: impl Into<String>, name: impl Into<String>, raw: &str) -> Self {
        let arguments = if raw.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
        };
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            signature: None,
        }
    }

    /// The arguments as JSON text, the way OpenAI-style APIs carry them.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ContentPart>,
    /// Assistant messages: the tool calls the model made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages: the id of the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool messages: the tool's name (some providers need it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Assistant messages: reasoning blocks to send back on the next turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
}

impl Message {
    fn text_message(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![ContentPart::Text { text: text.into() }],
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            thinking: Vec::new(),
        }
    }
    pub fn system(text: impl Into<String>) -> Self {
        Self::text_message(Role::System, text)
    }
    pub fn user(text: impl Into<String>) -> Self {
        Self::text_message(Role::User, text)
    }
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text_message(Role::Assistant, text)
    }
    /// An assistant turn that called tools (content may be empty).
    pub fn assistant_tool_calls(text: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        let mut message = Self::text_message(Role::Assistant, String::new());
        message.content = text
            .filter(|t| !t.is_empty())
            .map(|text| vec![ContentPart::Text { text }])
            .unwrap_or_default();
        message.tool_calls = tool_calls;
        message
    }
    /// The result of one tool call.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        let mut message = Self::text_message(Role::Tool, text);
        message.tool_call_id = Some(tool_call_id.into());
        message.name = Some(name.into());
        message
    }
    /// Adds a content part (an image or a file) to the message.
    pub fn with_part(mut self, part: ContentPart) -> Self {
        self.content.push(part);
        self
    }
    /// All text parts joined, the way providers without multi-part content see the message.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }
    /// True when the message carries an image or a file.
    pub fn has_media(&self) -> bool {
        self.content
            .iter()
            .any(|p| !matches!(p, ContentPart::Text { .. }))
    }
}

/// A tool the model may call: its name, what it does, and the JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    /// Ask the provider to enforce the schema exactly (OpenAI `strict`).
    #[serde(default)]
    pub strict: bool,
}

/// Ask the provider for output that matches a JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// The schema's name (OpenAI requires one); `[a-zA-Z0-9_-]`.
    pub name: String,
    pub schema: Value,
    #[serde(default = "default_true")]
    pub strict: bool,
}

fn default_true() -> bool {
    true
}

/// Per-call options; unset fields fall back to the client's [`crate::LlmConfig`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop words for this call (added to the config's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

/// How the model may use the offered tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    /// Force this tool.
    Tool(String),
}

/// Everything one model call needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub options: CallOptions,
    /// What the reply is expected to look like, for providers that can hold their decoding to
    /// it (the embedded model does). A hint only: providers that cannot use it ignore it, and it
    /// is never serialized, so request bodies are the same with or without it.
    #[serde(skip)]
    pub reply_shape: Option<ReplyShape>,
    /// Context for the layers the call passes through (who makes it, for which task, where its
    /// events go; see [`crate::layer`]). Never serialized and never compared.
    #[serde(skip)]
    pub extensions: Extensions,
}

/// The expected shape of a reply (see [`LlmRequest::reply_shape`]).
///
/// ```
/// use crewai_llm::{LlmRequest, Message, ReplyShape, ToolDefinition};
/// let search = ToolDefinition {
///     name: "search".into(),
///     description: "Searches the web".into(),
///     parameters: serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}}),
///     strict: false,
/// };
/// let request = LlmRequest::new(vec![Message::user("Find it")])
///     .with_reply_shape(ReplyShape::React { tools: vec![search] });
/// // The hint is for the provider only: it is never serialized.
/// assert!(!serde_json::to_string(&request).unwrap().contains("reply_shape"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyShape {
    /// One ReAct step in text: a `Thought:` line, then either `Action:` naming one of `tools`
    /// with an `Action Input:` JSON object of that tool's arguments, or a `Final Answer:`. The
    /// tools are described in the prompt; they are not offered as native tools.
    React { tools: Vec<ToolDefinition> },
}

impl LlmRequest {
    pub fn new(messages: Vec<Message>) -> Self {
        LlmRequest {
            messages,
            ..Default::default()
        }
    }
    setters! {
        pub fn with_tools(tools: Vec<ToolDefinition>) => tools = tools;
        pub fn with_response_format(format: ResponseFormat) => response_format = Some(format);
        pub fn with_stop(stop: Vec<String>) => options.stop = stop;
        /// Tells the provider what the reply should look like (a hint; see [`ReplyShape`]).
        pub fn with_reply_shape(shape: ReplyShape) => reply_shape = Some(shape);
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    #[default]
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    /// A stop word cut the reply (client-side or by the provider).
    StopSequence,
    Other(String),
}

/// Tokens one call (or an aggregate of calls) used, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache (part of `prompt_tokens`).
    pub cached_prompt_tokens: u64,
    /// Reasoning tokens (part of `completion_tokens`).
    pub reasoning_tokens: u64,
    /// Tokens written to the prompt cache (Anthropic).
    pub cache_creation_tokens: u64,
    /// Calls that returned a response.
    pub successful_requests: u64,
    /// What the calls cost in USD, from the price table (`pricing`); 0 until priced, and for
    /// models without a price.
    #[serde(default)]
    pub cost_usd: f64,
}

impl Usage {
    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.successful_requests += other.successful_requests;
        self.cost_usd += other.cost_usd;
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.add(&rhs);
    }
}

/// The model's answer to one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The text reply, if any (after stop words were applied).
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    /// This call's usage; `successful_requests` is 1.
    pub usage: Usage,
    /// The provider's id for this response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The model that answered, as the provider named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning blocks to keep in the conversation (Anthropic).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
}

impl LlmResponse {
    /// The assistant message to append to the conversation for this response.
    pub fn to_message(&self) -> Message {
        let mut message = if self.tool_calls.is_empty() {
            Message::assistant(self.content.clone().unwrap_or_default())
        } else {
            Message::assistant_tool_calls(self.content.clone(), self.tool_calls.clone())
        };
        message.thinking = self.thinking.clone();
        message
    }
}

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More reply text.
    TextDelta(String),
    /// More of a tool call: `index` identifies the call within the response; `id` and `name`
    /// arrive with its first delta.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments_delta: String,
    },
    /// Reasoning text (not part of the reply).
    ThinkingDelta(String),
    /// The stream ended; the assembled response, usage included.
    Done(LlmResponse),
}

/// What a model can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub function_calling: bool,
    pub stop_words: bool,
    pub multimodal: bool,
    pub structured_output: bool,
    /// The model's context window in tokens.
    pub context_window: u64,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            function_calling: true,
            stop_words: true,
            multimodal: false,
            structured_output: true,
            context_window: 8192,
        }
    }
}
