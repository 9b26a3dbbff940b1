//! Anthropic's Messages API (`POST {base}/v1/messages`).
//!
//! - System messages become top-level `system` blocks; tool calls and results become `tool_use`
//!   and `tool_result` blocks (the results of consecutive tool messages travel in one user turn,
//!   as Anthropic wants for parallel tool use).
//! - Prompt caching the way CrewAI designs it: a `cache_control: {type: ephemeral}` breakpoint at
//!   the end of the system prompt and at the end of the last user turn, so an agent's growing
//!   conversation is read from the cache on every step.
//! - Extended thinking (`thinking` in [`LlmConfig`]): thinking and redacted-thinking blocks come
//!   back in [`LlmResponse::thinking`] and are sent back, signatures included, ahead of the tool
//!   calls of that assistant turn.
//! - Structured output: a forced tool whose input schema is the requested schema; its input
//!   becomes the response's content as JSON text.
//! - Streaming over server-sent events, ending with the assembled response and its usage.
//! - Tool names rewritten to `^[a-zA-Z0-9_-]{1,64}$` and mapped back in responses.
//!
//! Calling Claude with a tool:
//!
//! ```no_run
//! use crewai_llm::anthropic::AnthropicLlm;
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message, ToolDefinition};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! // The key comes from `api_key` or ANTHROPIC_API_KEY.
//! let claude = AnthropicLlm::from_config(&LlmConfig::new("anthropic/claude-sonnet-4-5"))?;
//! let weather = ToolDefinition {
//!     name: "get_weather".into(),
//!     description: "The current weather in a city".into(),
//!     parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!     strict: false,
//! };
//! let mut conversation = vec![Message::user("Do I need an umbrella in Paris?")];
//! let reply = claude.call(LlmRequest::new(conversation.clone()).with_tools(vec![weather.clone()])).await?;
//! conversation.push(reply.to_message());
//! for call in &reply.tool_calls {
//!     // Run the tool with `call.arguments`, then hand its result back.
//!     conversation.push(Message::tool_result(&call.id, &call.name, "light rain, 14°C"));
//! }
//! let answer = claude.call(LlmRequest::new(conversation).with_tools(vec![weather])).await?;
//! println!("{}", answer.content.unwrap_or_default());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Map, Value, json};

use crate::adapter_support::{self, SseReplyDecoder, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, SseStream, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, ContentPart, FinishReason, LlmRequest, LlmResponse, Message, Role, StreamEvent,
    ThinkingBlock, ToolCall, ToolChoice, Usage,
};

/// Anthropic's public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header every request carries.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by Anthropic; this is used when the config sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Claude's context window, for models the shared table does not list.
pub const CONTEXT_WINDOW: u64 = 200_000;

const PROVIDER: &str = "anthropic";
const KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The name of the forced tool that carries structured output when the format has no usable name.
const STRUCTURED_TOOL: &str = "structured_output";

const TOOL_NAMES: ToolNameRules = ToolNameRules {
    max_len: 64,
    allowed: |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
    allowed_first: |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
};

/// A Claude model over Anthropic's Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicLlm {
    model: String,
    api_key: String,
    messages_url: String,
    config: LlmConfig,
    http: HttpClient,
}

impl AnthropicLlm {
    /// A client for `config.model` (with or without the `anthropic/` or `claude/` prefix),
    /// reading what the config leaves unset from the environment.
    ///
    /// The key is `config.api_key` or `ANTHROPIC_API_KEY`; the endpoint is `config.base_url`,
    /// `ANTHROPIC_BASE_URL` or Anthropic's own. Fails when no key is set, naming the variable.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        let model = adapter_support::strip_prefixes(&config.model, &["anthropic/", "claude/"]);
        let api_key = adapter_support::api_key(config, PROVIDER, &[KEY_VAR])?;
        let base = config
            .base_url
            .clone()
            .or_else(|| adapter_support::env_value(&["ANTHROPIC_BASE_URL"]));
        Self::new(model, api_key, base.as_deref(), config)
    }

    /// A client for `model` with an explicit key and endpoint (`None`: Anthropic's); the other
    /// settings (timeouts, sampling, thinking, headers) come from `config`. Reads no environment.
    pub fn new(
        model: &str,
        api_key: String,
        base_url: Option<&str>,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config(
                "anthropic: no model given (for example `anthropic/claude-sonnet-4-5`)".into(),
            ));
        }
        let base = adapter_support::trim_base(base_url.unwrap_or(DEFAULT_BASE_URL));
        let base = base.strip_suffix("/v1").unwrap_or(&base);
        let http = HttpClient::new(ErrorContext::new(PROVIDER, model, KEY_VAR), config)?;
        Ok(AnthropicLlm {
            messages_url: format!("{base}/v1/messages"),
            model: model.to_string(),
            api_key,
            config: config.clone(),
            http,
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.messages_url
    }

    fn headers(&self) -> Vec<(String, String)> {
        let own = vec![
            ("x-api-key".to_string(), self.api_key.clone()),
            ("anthropic-version".to_string(), API_VERSION.to_string()),
        ];
        adapter_support::request_headers(own, &self.config)
    }

    /// The request body for `request`, and the tool-name map to read the answer with.
    fn prepare(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<(Value, ResponseReader), LlmError> {
        let structured = request
            .response_format
            .as_ref()
            .map(|f| structured_tool_name(&f.name));
        let extra: Vec<&str> = structured.iter().map(String::as_str).collect();
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &extra);
        let body = build_body(&self.model, &self.config, request, &names, stream)?;
        let structured_tool = structured.map(|name| names.provider_name(&name));
        Ok((
            body,
            ResponseReader {
                names,
                structured_tool,
            },
        ))
    }

    async fn open_stream(
        &self,
        request: &LlmRequest,
    ) -> Result<(SseStream, ResponseReader), LlmError> {
        let (body, reader) = self.prepare(request, true)?;
        let events = self
            .http
            .post_sse(&self.messages_url, &self.headers(), &body)
            .await?;
        Ok((events, reader))
    }
}

#[async_trait]
impl Llm for AnthropicLlm {
    fn model(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let (body, reader) = self.prepare(&request, false)?;
        let reply = self
            .http
            .post_json(&self.messages_url, &self.headers(), &body)
            .await?;
        reader.read_message(&reply)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (events, reader) = self.open_stream(&request).await?;
        Ok(adapter_support::decode_sse_reply(
            events,
            EventDecoder {
                assembler: Assembler::new(reader),
                finished: false,
            },
        ))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            function_calling: true,
            stop_words: true,
            multimodal: true,
            structured_output: true,
            context_window: self.config.context_window_size.unwrap_or_else(|| {
                crate::context_window::known_context_window(&self.model).unwrap_or(CONTEXT_WINDOW)
            }),
        }
    }
}

/// The forced tool's name for a response format (its own name when it has one).
fn structured_tool_name(format_name: &str) -> String {
    if format_name.trim().is_empty() {
        STRUCTURED_TOOL.to_string()
    } else {
        format_name.to_string()
    }
}

fn thinking_enabled(config: &LlmConfig) -> bool {
    config.thinking.as_ref().is_some_and(|t| {
        t.get("type")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind != "disabled")
    })
}

/// Builds the Messages API body.
fn build_body(
    model: &str,
    config: &LlmConfig,
    request: &LlmRequest,
    names: &ToolNameMap,
    stream: bool,
) -> Result<Value, LlmError> {
    let (system, conversation) = adapter_support::split_system(&request.messages);
    let mut body = Map::new();
    body.insert("model".into(), json!(model));

    let thinking = thinking_enabled(config);
    let budget = config
        .thinking
        .as_ref()
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let requested = request
        .options
        .max_tokens
        .or(config.max_tokens)
        .or(config.max_completion_tokens);
    // With thinking on, the answer has to fit after the thinking budget.
    let max_tokens = match requested {
        Some(n) => u64::from(n),
        None if thinking && budget >= u64::from(DEFAULT_MAX_TOKENS) => {
            budget + u64::from(DEFAULT_MAX_TOKENS)
        }
        None => u64::from(DEFAULT_MAX_TOKENS),
    };
    body.insert("max_tokens".into(), json!(max_tokens));

    if !system.is_empty() {
        let text = system.join("\n\n");
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]),
        );
    }
    body.insert(
        "messages".into(),
        Value::Array(build_messages(&conversation, names)?),
    );

    // Anthropic refuses sampling settings while thinking.
    if !thinking {
        if let Some(t) = request.options.temperature.or(config.temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = config.top_p {
            body.insert("top_p".into(), json!(p));
        }
    }
    let stop = adapter_support::stop_words(config, request);
    if !stop.is_empty() {
        body.insert("stop_sequences".into(), json!(stop));
    }
    if let Some(t) = config.thinking.clone() {
        body.insert("thinking".into(), t);
    }

    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| tool_json(&names.provider_name(&t.name), &t.description, &t.parameters))
        .collect();
    let mut tool_choice = request
        .options
        .tool_choice
        .as_ref()
        .map(|choice| match choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": names.provider_name(name)}),
        });
    if let Some(format) = &request.response_format {
        let name = names.provider_name(&structured_tool_name(&format.name));
        tools.push(tool_json(
            &name,
            "Answer with this tool: its input is your final answer, in the required structure.",
            &format.schema,
        ));
        // Anthropic does not allow forcing a tool while thinking; the reader still takes the
        // tool's input as the answer when the model uses it.
        tool_choice = Some(if thinking {
            json!({"type": "auto"})
        } else {
            json!({"type": "tool", "name": name})
        });
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    for (key, value) in &config.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Ok(Value::Object(body))
}

fn tool_json(name: &str, description: &str, parameters: &Value) -> Value {
    let schema = match parameters {
        Value::Object(map) if !map.is_empty() => parameters.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    json!({"name": name, "description": description, "input_schema": schema})
}

/// The conversation as Anthropic turns: consecutive turns of the same role are merged (tool
/// results and the user text after them form one user turn), and the last user turn ends with a
/// cache breakpoint.
fn build_messages(conversation: &[&Message], names: &ToolNameMap) -> Result<Vec<Value>, LlmError> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in conversation {
        let (role, blocks) = match message.role {
            Role::User | Role::System => ("user", content_blocks(message)?),
            Role::Tool => ("user", vec![tool_result_block(message)]),
            Role::Assistant => ("assistant", assistant_blocks(message, names)?),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => {
                // Tool results must open a user turn, ahead of any text.
                if message.role == Role::Tool {
                    let at = last_blocks
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    last_blocks.splice(at..at, blocks);
                } else {
                    last_blocks.extend(blocks);
                }
            }
            _ => turns.push((role, blocks)),
        }
    }
    if let Some((_, blocks)) = turns.iter_mut().rev().find(|(role, _)| *role == "user")
        && let Some(Value::Object(last)) = blocks.last_mut()
    {
        last.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
    Ok(turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect())
}

fn content_blocks(message: &Message) -> Result<Vec<Value>, LlmError> {
    let mut blocks = Vec::new();
    for part in &message.content {
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => blocks.push(json!({"type": "text", "text": text})),
            ContentPart::Image { url, media_type } => blocks.push(match adapter_support::parse_data_url(url) {
                Some((data_type, data)) => json!({"type": "image", "source": {"type": "base64", "media_type": data_type, "data": data}}),
                None if media_type.as_deref() == Some("application/pdf") => {
                    json!({"type": "document", "source": {"type": "url", "url": url}})
                }
                None => json!({"type": "image", "source": {"type": "url", "url": url}}),
            }),
            ContentPart::File { data_base64, media_type, filename } => blocks.push(file_block(data_base64, media_type, filename.as_deref())?),
        }
    }
    Ok(blocks)
}

fn file_block(data: &str, media_type: &str, filename: Option<&str>) -> Result<Value, LlmError> {
    let mut block = if media_type.starts_with("image/") {
        return Ok(
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}),
        );
    } else if media_type == "application/pdf" {
        json!({"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}})
    } else if media_type.starts_with("text/") {
        // Anthropic takes plain-text documents as text, not base64.
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| {
                LlmError::Config(format!(
                    "anthropic: the file {} is not valid base64: {e}",
                    filename.unwrap_or("(unnamed)")
                ))
            })?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}})
    } else {
        return Err(LlmError::Unsupported(format!(
            "anthropic accepts images, PDFs and text files; the file {} is {media_type}",
            filename.unwrap_or("(unnamed)")
        )));
    };
    if let Some(name) = filename {
        block["title"] = json!(name);
    }
    Ok(block)
}

fn tool_result_block(message: &Message) -> Value {
    let id = message.tool_call_id.clone().unwrap_or_default();
    if !message.has_media() {
        return json!({"type": "tool_result", "tool_use_id": id, "content": message.text()});
    }
    // A tool that returned media: keep every part (errors in unsupported files degrade to text).
    let content: Vec<Value> = content_blocks(message)
        .unwrap_or_else(|_| vec![json!({"type": "text", "text": message.text()})]);
    json!({"type": "tool_result", "tool_use_id": id, "content": content})
}

fn assistant_blocks(message: &Message, names: &ToolNameMap) -> Result<Vec<Value>, LlmError> {
    let mut blocks: Vec<Value> = message
        .thinking
        .iter()
        .map(|t| match &t.redacted_data {
            Some(data) => json!({"type": "redacted_thinking", "data": data}),
            None => json!({"type": "thinking", "thinking": t.thinking, "signature": t.signature.clone().unwrap_or_default()}),
        })
        .collect();
    blocks.extend(content_blocks(message)?);
    for call in &message.tool_calls {
        let input = adapter_support::arguments_object(&call.arguments);
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": names.provider_name(&call.name), "input": input}));
    }
    Ok(blocks)
}

/// Reads Anthropic answers back into the neutral types.
#[derive(Debug, Clone)]
struct ResponseReader {
    names: ToolNameMap,
    /// The forced structured-output tool's name as sent, if any.
    structured_tool: Option<String>,
}

impl ResponseReader {
    fn malformed(message: impl Into<String>) -> LlmError {
        LlmError::MalformedResponse {
            provider: PROVIDER.into(),
            message: message.into(),
        }
    }

    /// A complete (non-streamed) message.
    fn read_message(self, reply: &Value) -> Result<LlmResponse, LlmError> {
        if reply.get("type").and_then(Value::as_str) == Some("error") {
            return Err(stream_error(reply));
        }
        let blocks = reply
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                Self::malformed(format!(
                    "no `content` array in the reply: {}",
                    crate::http::snippet(&reply.to_string())
                ))
            })?;
        let mut assembler = Assembler::new(self);
        assembler.start_message(reply);
        for (index, block) in blocks.iter().enumerate() {
            assembler.start_block(index, block)?;
        }
        assembler.stop_reason = reply
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        assembler.finish()
    }
}

/// One content block being assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    Tool {
        call_index: usize,
        id: String,
        name: String,
        input: String,
    },
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
}

/// Builds a response from content blocks, whole or streamed piece by piece.
#[derive(Debug)]
struct Assembler {
    reader: ResponseReader,
    blocks: BTreeMap<usize, Block>,
    tool_calls: usize,
    id: Option<String>,
    model: Option<String>,
    usage: Map<String, Value>,
    stop_reason: Option<String>,
}

impl Assembler {
    fn new(reader: ResponseReader) -> Self {
        Assembler {
            reader,
            blocks: BTreeMap::new(),
            tool_calls: 0,
            id: None,
            model: None,
            usage: Map::new(),
            stop_reason: None,
        }
    }

    fn start_message(&mut self, message: &Value) {
        self.id = message
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.model = message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.merge_usage(message.get("usage"));
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(fields)) = usage {
            for (key, value) in fields {
                if value.is_u64() {
                    self.usage.insert(key.clone(), value.clone());
                }
            }
        }
    }

    fn is_structured(&self, provider_name: &str) -> bool {
        self.reader.structured_tool.as_deref() == Some(provider_name)
    }

    /// A block opens (streaming) or arrives whole; returns the events it produces.
    fn start_block(&mut self, index: usize, block: &Value) -> Result<Vec<StreamEvent>, LlmError> {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text_of = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mut events = Vec::new();
        let assembled = match kind {
            "text" => {
                let text = text_of("text");
                if !text.is_empty() {
                    events.push(StreamEvent::TextDelta(text.clone()));
                }
                Block::Text(text)
            }
            "tool_use" => {
                let provider_name = text_of("name");
                let input = match block.get("input") {
                    // Streaming opens with `{}` and sends the real input as deltas.
                    Some(Value::Object(map)) if map.is_empty() => String::new(),
                    Some(value) => value.to_string(),
                    None => String::new(),
                };
                let id = text_of("id");
                if id.is_empty() {
                    return Err(ResponseReader::malformed("a tool_use block without an id"));
                }
                if self.is_structured(&provider_name) {
                    if !input.is_empty() {
                        events.push(StreamEvent::TextDelta(input.clone()));
                    }
                    Block::Tool {
                        call_index: usize::MAX,
                        id,
                        name: provider_name,
                        input,
                    }
                } else {
                    let call_index = self.tool_calls;
                    self.tool_calls += 1;
                    let name = self.reader.names.original_name(&provider_name);
                    events.push(StreamEvent::ToolCallDelta {
                        index: call_index,
                        id: Some(id.clone()),
                        name: Some(name.clone()),
                        arguments_delta: input.clone(),
                    });
                    Block::Tool {
                        call_index,
                        id,
                        name,
                        input,
                    }
                }
            }
            "thinking" => {
                let text = text_of("thinking");
                if !text.is_empty() {
                    events.push(StreamEvent::ThinkingDelta(text.clone()));
                }
                Block::Thinking {
                    text,
                    signature: text_of("signature"),
                }
            }
            "redacted_thinking" => Block::Redacted(text_of("data")),
            // Server-side tool blocks and future kinds carry nothing the caller can use.
            _ => return Ok(events),
        };
        self.blocks.insert(index, assembled);
        Ok(events)
    }

    fn delta(&mut self, index: usize, delta: &Value) -> Result<Vec<StreamEvent>, LlmError> {
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let Some(block) = self.blocks.get_mut(&index) else {
            return Ok(Vec::new());
        };
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let event = match (kind, block) {
            ("text_delta", Block::Text(text)) => {
                text.push_str(piece("text"));
                StreamEvent::TextDelta(piece("text").to_string())
            }
            (
                "input_json_delta",
                Block::Tool {
                    call_index, input, ..
                },
            ) => {
                input.push_str(piece("partial_json"));
                if *call_index == usize::MAX {
                    StreamEvent::TextDelta(piece("partial_json").to_string())
                } else {
                    StreamEvent::ToolCallDelta {
                        index: *call_index,
                        id: None,
                        name: None,
                        arguments_delta: piece("partial_json").to_string(),
                    }
                }
            }
            ("thinking_delta", Block::Thinking { text, .. }) => {
                text.push_str(piece("thinking"));
                StreamEvent::ThinkingDelta(piece("thinking").to_string())
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature.push_str(piece("signature"));
                return Ok(Vec::new());
            }
            (other, _) => {
                return Err(ResponseReader::malformed(format!(
                    "a `{other}` delta for content block {index} of another kind"
                )));
            }
        };
        Ok(vec![event])
    }

    fn usage(&self) -> Usage {
        let count = |key: &str| self.usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cache_read = count("cache_read_input_tokens");
        let cache_write = count("cache_creation_input_tokens");
        // Anthropic's input_tokens leaves out the cached parts; our prompt count includes them.
        let prompt = count("input_tokens") + cache_read + cache_write;
        let completion = count("output_tokens");
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_prompt_tokens: cache_read,
            reasoning_tokens: 0,
            cache_creation_tokens: cache_write,
            successful_requests: 1,
            ..Default::default()
        }
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        let usage = self.usage();
        let mut content = String::new();
        let mut structured: Option<String> = None;
        let mut tool_calls = Vec::new();
        let mut thinking = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => content.push_str(&text),
                Block::Tool {
                    call_index: usize::MAX,
                    input,
                    ..
                } => {
                    // Normalise to compact JSON text, whether it came whole or in pieces.
                    let value: Value = if input.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&input).map_err(|e| {
                            ResponseReader::malformed(format!(
                                "the structured answer is not JSON ({e}): {}",
                                crate::http::snippet(&input)
                            ))
                        })?
                    };
                    structured = Some(value.to_string());
                }
                Block::Tool {
                    id, name, input, ..
                } => tool_calls.push(ToolCall::from_raw_arguments(id, name, &input)),
                Block::Thinking { text, signature } => thinking.push(ThinkingBlock {
                    thinking: text,
                    signature: Some(signature).filter(|s| !s.is_empty()),
                    redacted_data: None,
                }),
                Block::Redacted(data) => thinking.push(ThinkingBlock {
                    thinking: String::new(),
                    signature: None,
                    redacted_data: Some(data),
                }),
            }
        }
        let finish_reason = match self.stop_reason.as_deref() {
            _ if structured.is_some() && tool_calls.is_empty() => FinishReason::Stop,
            Some("end_turn") | None => FinishReason::Stop,
            Some("max_tokens") | Some("model_context_window_exceeded") => FinishReason::Length,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("stop_sequence") => FinishReason::StopSequence,
            Some("refusal") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        let content = structured.or(Some(content).filter(|c| !c.is_empty()));
        Ok(LlmResponse {
            content,
            tool_calls,
            finish_reason,
            usage,
            response_id: self.id,
            model: self.model,
            thinking,
        })
    }
}

/// The error an `error` event (or an error-typed body) carries.
fn stream_error(event: &Value) -> LlmError {
    let error = event.get("error").unwrap_or(event);
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(kind)
        .to_string();
    let provider = PROVIDER.to_string();
    match kind {
        "overloaded_error" => LlmError::Server {
            provider,
            status: 529,
            message,
            retry_after: None,
        },
        "rate_limit_error" => LlmError::RateLimited {
            provider,
            retry_after: None,
            message,
        },
        "api_error" => LlmError::Server {
            provider,
            status: 500,
            message,
            retry_after: None,
        },
        "authentication_error" => LlmError::Authentication {
            provider,
            message,
            hint: KEY_VAR.into(),
        },
        "permission_error" => LlmError::PermissionDenied { provider, message },
        _ if crate::error::looks_like_context_overflow(&message) => {
            LlmError::ContextLengthExceeded { provider, message }
        }
        _ => LlmError::InvalidRequest {
            provider,
            status: 400,
            message,
        },
    }
}

/// Anthropic's event stream: `message_start`, content blocks and their deltas, `message_delta`,
/// then `message_stop`, which completes the reply (a stream closed before it is an error).
struct EventDecoder {
    assembler: Assembler,
    finished: bool,
}

impl SseReplyDecoder for EventDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let event: Value = serde_json::from_str(data).map_err(|e| {
            ResponseReader::malformed(format!(
                "an event is not JSON ({e}): {}",
                crate::http::snippet(data)
            ))
        })?;
        let index = || {
            event
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .ok_or_else(|| ResponseReader::malformed("a content event without an index"))
        };
        let assembler = &mut self.assembler;
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => {
                assembler.start_message(event.get("message").unwrap_or(&Value::Null))
            }
            "content_block_start" => {
                return assembler
                    .start_block(index()?, event.get("content_block").unwrap_or(&Value::Null));
            }
            "content_block_delta" => {
                return assembler.delta(index()?, event.get("delta").unwrap_or(&Value::Null));
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    assembler.stop_reason = Some(reason.to_string());
                }
                assembler.merge_usage(event.get("usage"));
            }
            "message_stop" => {
                let done = std::mem::replace(assembler, Assembler::new(assembler.reader.clone()));
                self.finished = true;
                return Ok(vec![StreamEvent::Done(done.finish()?)]);
            }
            "error" => return Err(stream_error(&event)),
            // `ping`, `content_block_stop` and event kinds added later need no action.
            _ => {}
        }
        Ok(Vec::new())
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        Some(Err(ResponseReader::malformed(
            "the event stream ended before message_stop",
        )))
    }

    fn is_complete(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ResponseFormat, ToolDefinition};

    fn config() -> LlmConfig {
        LlmConfig::new("anthropic/claude-sonnet-4-5").with_api_key("test-key")
    }

    fn body_for(config: &LlmConfig, request: &LlmRequest) -> Value {
        let llm = AnthropicLlm::from_config(config).unwrap();
        llm.prepare(request, false).unwrap().0
    }

    #[test]
    fn system_tools_and_cache_breakpoints() {
        let request = LlmRequest::new(vec![
            Message::system("You are a researcher."),
            Message::user("Find it."),
            Message::assistant_tool_calls(
                Some("Looking.".into()),
                vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "Search the web".into(),
                        arguments: json!({"q": "a"}),
                        signature: None,
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "Search the web".into(),
                        arguments: json!({"q": "b"}),
                        signature: None,
                    },
                ],
            ),
            Message::tool_result("toolu_1", "Search the web", "result a"),
            Message::tool_result("toolu_2", "Search the web", "result b"),
        ])
        .with_tools(vec![ToolDefinition {
            name: "Search the web".into(),
            description: "Searches".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            strict: true,
        }]);
        let body = body_for(&config(), &request);
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You are a researcher.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["tools"][0]["name"], "Search_the_web");
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0]["content"][0].get("cache_control"), None);
        assert_eq!(messages[1]["content"][1]["name"], "Search_the_web");
        let results = &messages[2]["content"];
        assert_eq!(results.as_array().unwrap().len(), 2);
        assert_eq!(results[0]["tool_use_id"], "toolu_1");
        assert_eq!(results[1]["tool_use_id"], "toolu_2");
        assert_eq!(results[1]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(results[0].get("cache_control"), None);
    }

    #[test]
    fn thinking_drops_sampling_settings_and_grows_max_tokens() {
        let mut config = config().with_temperature(0.3);
        config.thinking = Some(json!({"type": "enabled", "budget_tokens": 8000}));
        let body = body_for(&config, &LlmRequest::new(vec![Message::user("hi")]));
        assert_eq!(body["max_tokens"], 12096);
        assert_eq!(body.get("temperature"), None);
        assert_eq!(body["thinking"]["budget_tokens"], 8000);
    }

    #[test]
    fn structured_output_is_a_forced_tool() {
        let request =
            LlmRequest::new(vec![Message::user("Rate it")]).with_response_format(ResponseFormat {
                name: "Score".into(),
                schema: json!({"type": "object", "properties": {"score": {"type": "integer"}}}),
                strict: true,
            });
        let body = body_for(&config(), &request);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "Score"})
        );
        assert_eq!(
            body["tools"][0]["input_schema"]["properties"]["score"]["type"],
            "integer"
        );
        let llm = AnthropicLlm::from_config(&config()).unwrap();
        let (_, reader) = llm.prepare(&request, false).unwrap();
        let reply = json!({"id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_9", "name": "Score", "input": {"score": 4}}], "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 3}});
        let response = reader.read_message(&reply).unwrap();
        assert_eq!(response.content.as_deref(), Some(r#"{"score":4}"#));
        assert!(response.tool_calls.is_empty());
        assert_eq!(response.finish_reason, FinishReason::Stop);
    }

    #[test]
    fn files_map_to_documents_and_unknown_types_are_refused() {
        let text = base64::engine::general_purpose::STANDARD.encode("hello");
        assert_eq!(
            file_block(&text, "text/plain", Some("a.txt")).unwrap()["source"]["data"],
            "hello"
        );
        assert_eq!(
            file_block("JVBE", "application/pdf", None).unwrap()["type"],
            "document"
        );
        assert!(
            matches!(file_block("AAAA", "application/zip", Some("a.zip")), Err(LlmError::Unsupported(m)) if m.contains("a.zip"))
        );
    }
}
