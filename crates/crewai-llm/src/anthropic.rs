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
//! - The same client speaks Claude on Vertex AI (`rawPredict` and `streamRawPredict`): the body
//!   without `model` and with `anthropic_version: vertex-2023-10-16`, an OAuth access token
//!   instead of the key; see [`crate::providers::vertex`].
//! - The wire types are [`crate::wire::anthropic`]; errors are read by their `type`
//!   (`overloaded_error`, `rate_limit_error`, ...), and an `invalid_request_error` saying the
//!   prompt is too long is [`LlmError::ContextLengthExceeded`].
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

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use serde_json::Value;

use crate::access_token::{Credential, Endpoint};
use crate::adapter_support::{self, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, SseStream, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, ContentPart, LlmRequest, LlmResponse, Message, Role, ToolChoice};
use crate::wire::anthropic::{
    CacheControl, MessagesRequest, RequestBlock, Source, ToolChoice as WireChoice,
    ToolResultContent, ToolSpec, Turn, TurnRole,
};
use crate::wire::{KeyOrder, WithExtra};

mod reply;

use reply::{Assembler, EventDecoder, ResponseReader, read_error};

/// Anthropic's public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header every request carries.
pub const API_VERSION: &str = "2023-06-01";
/// The API version Claude on Vertex AI takes, in the body.
pub const VERTEX_API_VERSION: &str = "vertex-2023-10-16";
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

/// A Claude model over Anthropic's Messages API, or on Vertex AI.
#[derive(Debug, Clone)]
pub struct AnthropicLlm {
    model: String,
    /// The API key (`x-api-key`), or Vertex AI's access token.
    credential: Credential,
    messages_url: String,
    /// Where a streamed call goes (Anthropic's: the same URL; Vertex AI's: `:streamRawPredict`).
    stream_url: String,
    /// Claude on Vertex AI: no `model` in the body, the version in it rather than in a header.
    on_vertex: bool,
    /// Headers the endpoint needs besides the credential (Vertex AI's quota project).
    endpoint_headers: Vec<(String, String)>,
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
        let http = HttpClient::new(ErrorContext::new(PROVIDER, model, KEY_VAR), config)?
            .with_error_reader(read_error);
        let messages_url = format!("{base}/v1/messages");
        Ok(AnthropicLlm {
            stream_url: messages_url.clone(),
            messages_url,
            model: model.to_string(),
            credential: Credential::Fixed {
                name: "x-api-key",
                value: api_key,
            },
            on_vertex: false,
            endpoint_headers: Vec::new(),
            config: config.clone(),
            http,
        })
    }

    /// Claude `model` on Vertex AI at `endpoint` (built by the `vertex_ai` provider).
    pub(crate) fn on_vertex(
        model: &str,
        endpoint: Endpoint,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let context = ErrorContext::new(endpoint.provider, model, endpoint.key_hint);
        let http = HttpClient::new(context, config)?.with_error_reader(read_error);
        Ok(AnthropicLlm {
            messages_url: format!("{}:rawPredict", endpoint.model_url),
            stream_url: format!("{}:streamRawPredict", endpoint.model_url),
            model: model.to_string(),
            credential: endpoint.credential,
            on_vertex: true,
            endpoint_headers: endpoint.headers,
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

    fn headers(&self, credential: (String, String)) -> Vec<(String, String)> {
        let mut own = vec![credential];
        own.extend(self.endpoint_headers.iter().cloned());
        if !self.on_vertex {
            own.push(("anthropic-version".to_string(), API_VERSION.to_string()));
        }
        adapter_support::request_headers(own, &self.config)
    }

    /// The model and version fields of the body: Anthropic names the model there, Vertex AI
    /// the version.
    fn dialect(&self) -> Dialect<'_> {
        if self.on_vertex {
            Dialect {
                model: None,
                version: Some(VERTEX_API_VERSION),
            }
        } else {
            Dialect {
                model: Some(&self.model),
                version: None,
            }
        }
    }

    /// The reader of the answer to `request`: the tool-name map and the structured-output
    /// tool's name as sent.
    fn reader(&self, request: &LlmRequest) -> ResponseReader {
        let structured = request
            .response_format
            .as_ref()
            .map(|f| structured_tool_name(&f.name));
        let extra: Vec<&str> = structured.into_iter().collect();
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &extra);
        let structured_tool = structured.map(|name| names.provider_name(name).to_string());
        ResponseReader {
            names,
            structured_tool,
            context: self.http.context().clone(),
        }
    }

    /// The JSON body for `request`, as it is sent.
    pub fn request_body(&self, request: &LlmRequest, stream: bool) -> Result<Value, LlmError> {
        let reader = self.reader(request);
        let body = build_body(self.dialect(), &self.config, request, &reader, stream)?;
        Ok(crate::wire::to_json(&body))
    }

    async fn open_stream(
        &self,
        request: &LlmRequest,
    ) -> Result<(SseStream, ResponseReader), LlmError> {
        let reader = self.reader(request);
        let body = &build_body(self.dialect(), &self.config, request, &reader, true)?;
        let events = self
            .credential
            .post_sse(&self.http, &self.stream_url, |c| self.headers(c), body)
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
        &self.http.context().provider
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let reader = self.reader(&request);
        let body = &build_body(self.dialect(), &self.config, &request, &reader, false)?;
        let reply = self
            .credential
            .post_bytes(&self.http, &self.messages_url, |c| self.headers(c), body)
            .await?;
        reader.read_reply(&reply)
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
fn structured_tool_name(format_name: &str) -> &str {
    if format_name.trim().is_empty() {
        STRUCTURED_TOOL
    } else {
        format_name
    }
}

/// Whether the config turns extended thinking on. `thinking` is the user's free-form value
/// (`{type: enabled, budget_tokens: N}`), sent as it is, so its keys are looked up here.
fn thinking_enabled(config: &LlmConfig) -> bool {
    config.thinking.as_ref().is_some_and(|t| {
        t.get("type")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind != "disabled")
    })
}

/// The fields of a body that say which API it is for.
#[derive(Debug, Clone, Copy)]
struct Dialect<'a> {
    model: Option<&'a str>,
    version: Option<&'a str>,
}

/// Builds the Messages API body.
fn build_body<'a>(
    dialect: Dialect<'a>,
    config: &'a LlmConfig,
    request: &'a LlmRequest,
    reader: &'a ResponseReader,
    stream: bool,
) -> Result<WithExtra<'a, MessagesRequest<'a>>, LlmError> {
    let names = &reader.names;
    let (system, conversation) = adapter_support::split_system(&request.messages);

    let thinking = thinking_enabled(config);
    // The budget is read from the same free-form `thinking` value.
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

    let system = if system.is_empty() {
        Vec::new()
    } else {
        vec![RequestBlock::Text {
            text: adapter_support::join_system(system),
            cache_control: Some(CacheControl::Ephemeral),
        }]
    };

    let mut tools: Vec<ToolSpec<'a>> = request
        .tools
        .iter()
        .map(|t| tool_spec(names.provider_name(&t.name), &t.description, &t.parameters))
        .collect();
    let mut tool_choice = request
        .options
        .tool_choice
        .as_ref()
        .map(|choice| match choice {
            ToolChoice::Auto => WireChoice::Auto,
            ToolChoice::None => WireChoice::None,
            ToolChoice::Required => WireChoice::Any,
            ToolChoice::Tool(name) => WireChoice::Tool {
                name: names.provider_name(name),
            },
        });
    if let (Some(format), Some(name)) = (&request.response_format, &reader.structured_tool) {
        tools.push(tool_spec(
            name,
            "Answer with this tool: its input is your final answer, in the required structure.",
            &format.schema,
        ));
        // Anthropic does not allow forcing a tool while thinking; the reader still takes the
        // tool's input as the answer when the model uses it.
        tool_choice = Some(if thinking {
            WireChoice::Auto
        } else {
            WireChoice::Tool { name }
        });
    }
    if tools.is_empty() {
        tool_choice = None;
    }
    let body = MessagesRequest {
        anthropic_version: dialect.version,
        model: dialect.model,
        max_tokens,
        system,
        messages: build_messages(&conversation, names)?,
        // Anthropic refuses sampling settings while thinking.
        temperature: request
            .options
            .temperature
            .or(config.temperature)
            .filter(|_| !thinking),
        top_p: config.top_p.filter(|_| !thinking),
        stop_sequences: adapter_support::stop_words(config, request),
        thinking: config.thinking.as_ref(),
        tools,
        tool_choice,
        stream: stream.then_some(true),
    };
    Ok(WithExtra {
        body,
        extra: &config.extra_body,
        order: KeyOrder::AsWritten,
    })
}

/// A tool; a schema that is no object with fields becomes the empty object schema Anthropic
/// requires (schemas are free-form JSON).
fn tool_spec<'a>(name: &'a str, description: &'a str, parameters: &'a Value) -> ToolSpec<'a> {
    let input_schema = match parameters {
        Value::Object(map) if !map.is_empty() => Cow::Borrowed(parameters),
        _ => Cow::Owned(serde_json::json!({"type": "object", "properties": {}})),
    };
    ToolSpec {
        name,
        description,
        input_schema,
    }
}

/// The conversation as Anthropic turns: consecutive turns of the same role are merged (tool
/// results and the user text after them form one user turn), and the last user turn ends with a
/// cache breakpoint.
fn build_messages<'a>(
    conversation: &[&'a Message],
    names: &'a ToolNameMap,
) -> Result<Vec<Turn<'a>>, LlmError> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
    for message in conversation {
        let (role, blocks) = match message.role {
            Role::User | Role::System => (TurnRole::User, content_blocks(message)?),
            Role::Tool => (TurnRole::User, vec![tool_result_block(message)]),
            Role::Assistant => (TurnRole::Assistant, assistant_blocks(message, names)?),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => {
                // Tool results must open a user turn, ahead of any text.
                if message.role == Role::Tool {
                    let at = last
                        .content
                        .iter()
                        .take_while(|b| b.is_tool_result())
                        .count();
                    last.content.splice(at..at, blocks);
                } else {
                    last.content.extend(blocks);
                }
            }
            _ => turns.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    if let Some(turn) = turns.iter_mut().rev().find(|t| t.role == TurnRole::User)
        && let Some(last) = turn.content.last_mut()
    {
        last.set_cache_control();
    }
    Ok(turns)
}

fn content_blocks(message: &Message) -> Result<Vec<RequestBlock<'_>>, LlmError> {
    let mut blocks = Vec::with_capacity(message.content.len());
    for part in &message.content {
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => blocks.push(RequestBlock::text(text.as_str())),
            ContentPart::Image { url, media_type } => {
                blocks.push(match adapter_support::parse_data_url(url) {
                    Some((media_type, data)) => RequestBlock::Image {
                        source: Source::Base64 { media_type, data },
                        cache_control: None,
                    },
                    None if media_type.as_deref() == Some("application/pdf") => {
                        RequestBlock::Document {
                            source: Source::Url { url },
                            title: None,
                            cache_control: None,
                        }
                    }
                    None => RequestBlock::Image {
                        source: Source::Url { url },
                        cache_control: None,
                    },
                })
            }
            ContentPart::File {
                data_base64,
                media_type,
                filename,
            } => blocks.push(file_block(data_base64, media_type, filename.as_deref())?),
        }
    }
    Ok(blocks)
}

fn file_block<'a>(
    data: &'a str,
    media_type: &'a str,
    filename: Option<&'a str>,
) -> Result<RequestBlock<'a>, LlmError> {
    let source = if media_type.starts_with("image/") {
        return Ok(RequestBlock::Image {
            source: Source::Base64 { media_type, data },
            cache_control: None,
        });
    } else if media_type == "application/pdf" {
        Source::Base64 { media_type, data }
    } else if media_type.starts_with("text/") {
        // Anthropic takes plain-text documents as text, not base64.
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| {
                LlmError::invalid_config(
                    format!(
                        "anthropic: the file {} is not valid base64",
                        filename.unwrap_or("(unnamed)")
                    ),
                    e,
                )
            })?;
        Source::Text {
            media_type: "text/plain",
            data: String::from_utf8_lossy(&bytes).into_owned(),
        }
    } else {
        return Err(LlmError::Unsupported(format!(
            "anthropic accepts images, PDFs and text files; the file {} is {media_type}",
            filename.unwrap_or("(unnamed)")
        )));
    };
    Ok(RequestBlock::Document {
        source,
        title: filename,
        cache_control: None,
    })
}

fn tool_result_block(message: &Message) -> RequestBlock<'_> {
    let tool_use_id = message.tool_call_id.as_deref().unwrap_or_default();
    let content = if message.has_media() {
        // A tool that returned media: keep every part (errors in unsupported files degrade to text).
        ToolResultContent::Blocks(
            content_blocks(message).unwrap_or_else(|_| vec![RequestBlock::text(message.text())]),
        )
    } else {
        ToolResultContent::Text(adapter_support::message_text(message))
    };
    RequestBlock::ToolResult {
        tool_use_id,
        content,
        cache_control: None,
    }
}

fn assistant_blocks<'a>(
    message: &'a Message,
    names: &'a ToolNameMap,
) -> Result<Vec<RequestBlock<'a>>, LlmError> {
    let mut blocks: Vec<RequestBlock<'a>> = message.thinking.iter().map(Into::into).collect();
    blocks.extend(content_blocks(message)?);
    for call in &message.tool_calls {
        blocks.push(RequestBlock::ToolUse {
            id: &call.id,
            name: names.provider_name(&call.name),
            input: adapter_support::arguments_object(&call.arguments),
            cache_control: None,
        });
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FinishReason, ResponseFormat, ToolCall, ToolDefinition};
    use serde_json::json;

    fn config() -> LlmConfig {
        LlmConfig::new("anthropic/claude-sonnet-4-5").with_api_key("test-key")
    }

    fn body_for(config: &LlmConfig, request: &LlmRequest) -> Value {
        let llm = AnthropicLlm::from_config(config).unwrap();
        llm.request_body(request, false).unwrap()
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
        let reader = llm.reader(&request);
        let reply = json!({"id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_9", "name": "Score", "input": {"score": 4}}], "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 3}});
        let response = reader.read_reply(reply.to_string().as_bytes()).unwrap();
        assert_eq!(response.content.as_deref(), Some(r#"{"score":4}"#));
        assert!(response.tool_calls.is_empty());
        assert_eq!(response.finish_reason, FinishReason::Stop);
    }

    #[test]
    fn files_map_to_documents_and_unknown_types_are_refused() {
        let text = base64::engine::general_purpose::STANDARD.encode("hello");
        assert_eq!(
            crate::wire::to_json(&file_block(&text, "text/plain", Some("a.txt")).unwrap())["source"]
                ["data"],
            "hello"
        );
        assert_eq!(
            crate::wire::to_json(&file_block("JVBE", "application/pdf", None).unwrap())["type"],
            "document"
        );
        assert!(
            matches!(file_block("AAAA", "application/zip", Some("a.zip")), Err(LlmError::Unsupported(m)) if m.contains("a.zip"))
        );
    }
}
