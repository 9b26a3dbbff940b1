//! OpenAI chat completions (`/chat/completions`), also spoken by Azure OpenAI, Ollama,
//! OpenRouter, DeepSeek, Groq and any OpenAI-compatible server.
//!
//! The request body matches what CrewAI sends: top-level fields in alphabetical order
//! (`messages`, `model`, `response_format`, `tool_choice`, `tools`, ...), no `stop` field (stop
//! words are cut on the client, see [`crate::stop_words`]), and for reasoning models (`o1`, `o3`,
//! `o4`, `gpt-5`) no temperature, `max_completion_tokens` and `reasoning_effort`.
//!
//! The wire types are [`crate::wire::openai`]. Error bodies are read by their codes into typed
//! errors: `unsupported_parameter` on `tools` (or a server that says in words it takes no tools:
//! Ollama, vLLM, OpenRouter) is [`LlmError::ToolsUnsupported`], `content_filter` (Azure's
//! `ResponsibleAIPolicyViolation`) is [`LlmError::ContentFiltered`], `context_length_exceeded`
//! is [`LlmError::ContextLengthExceeded`]; the same for errors sent as stream chunks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::openai::OpenAiClient;
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message};
//! let config = LlmConfig::new("gpt-4o-mini").with_api_key("sk-...");
//! let client = OpenAiClient::openai(&config, "gpt-4o-mini")?;
//! let reply = client.call(LlmRequest::new(vec![Message::user("Say hi")])).await?;
//! println!("{}", reply.content.unwrap_or_default());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde::Deserialize as _;
use serde_json::Value;

use crate::adapter_support::{self, SseReplyDecoder, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, ErrorReply, HttpClient, SseStream, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, FinishReason, LlmRequest, LlmResponse, Message, ResponseFormat, Role,
    StreamEvent, ToolCall, ToolChoice, ToolDefinition, Usage,
};
use crate::wire::openai::{
    ChatChunk, ChatCompletion, ChatContent, ChatMessage, ChatRequest, ChatResponseFormat, ChatTool,
    ChatToolCall, ChatToolChoice, ChatUsage, ErrorBody, ErrorDetail, ErrorField, ErrorQuirk,
    FunctionCall, FunctionDefinition, FunctionKind, FunctionName, NamedFunction, StreamOptions,
    ToolMode,
};
use crate::wire::{KeyOrder, Malformed, WithExtra, to_json};

/// OpenAI's public endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The Azure OpenAI `api-version` used when neither the config nor `AZURE_API_VERSION` sets one.
pub const AZURE_DEFAULT_API_VERSION: &str = "2024-10-21";

/// What OpenAI accepts as a function name (`^[a-zA-Z0-9_-]{1,64}$`); others are rewritten and
/// mapped back in the reply.
pub(crate) const TOOL_NAMES: ToolNameRules = ToolNameRules {
    max_len: 64,
    allowed: |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
    allowed_first: |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
};

/// Gives tool calls in a reply back the caller's tool names.
pub(crate) fn restore_tool_names(response: &mut LlmResponse, names: &ToolNameMap) {
    for call in &mut response.tool_calls {
        call.name = names.original_name(&call.name);
    }
}

/// Restores the caller's tool names in a stream's deltas and final response.
pub(crate) fn restore_stream_names(stream: LlmStream, names: ToolNameMap) -> LlmStream {
    Box::pin(stream.map(move |event| match event {
        Ok(StreamEvent::ToolCallDelta {
            index,
            id,
            name,
            arguments_delta,
        }) => Ok(StreamEvent::ToolCallDelta {
            index,
            id,
            name: name.map(|n| names.original_name(&n)),
            arguments_delta,
        }),
        Ok(StreamEvent::Done(mut response)) => {
            restore_tool_names(&mut response, &names);
            Ok(StreamEvent::Done(response))
        }
        other => other,
    }))
}

/// How a request proves who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <key>`
    Bearer(String),
    /// Azure's `api-key: <key>`
    ApiKeyHeader(String),
    /// Local servers that need no key.
    None,
}

impl Auth {
    pub(crate) fn headers(&self) -> Vec<(String, String)> {
        match self {
            Auth::Bearer(key) => vec![("authorization".into(), format!("Bearer {key}"))],
            Auth::ApiKeyHeader(key) => vec![("api-key".into(), key.clone())],
            Auth::None => Vec::new(),
        }
    }
}

/// True for models with OpenAI's reasoning rules (no temperature, `max_completion_tokens`,
/// `reasoning_effort`).
pub fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|prefix| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-') || rest.starts_with('.'))
    })
}

/// The generation settings both OpenAI APIs send, resolved from the request and the config under
/// the reasoning-model rules (no temperature; a reasoning effort only for reasoning models).
pub(crate) struct Sampling<'a> {
    pub(crate) reasoning: bool,
    pub(crate) temperature: Option<f64>,
    /// The request's limit, else `max_completion_tokens`, else `max_tokens`.
    pub(crate) max_tokens: Option<u32>,
    pub(crate) reasoning_effort: Option<&'a str>,
}

impl<'a> Sampling<'a> {
    pub(crate) fn resolve(model: &str, config: &'a LlmConfig, request: &LlmRequest) -> Self {
        let reasoning = is_reasoning_model(model);
        Sampling {
            reasoning,
            temperature: request
                .options
                .temperature
                .or(config.temperature)
                .filter(|_| !reasoning),
            max_tokens: request
                .options
                .max_tokens
                .or(config.max_completion_tokens)
                .or(config.max_tokens),
            reasoning_effort: config.reasoning_effort.as_deref().filter(|_| reasoning),
        }
    }
}

/// A chat-completions client.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: HttpClient,
    url: String,
    auth: Auth,
    model: String,
    /// The model name sent in the body (Azure sends none: the deployment is in the URL).
    send_model: bool,
    /// Send stop words in the body. OpenAI itself gets none, as from CrewAI's native client (the
    /// reply is cut on the client); other OpenAI-compatible servers get them, saving tokens.
    send_stop: bool,
    config: LlmConfig,
}

impl OpenAiClient {
    /// OpenAI itself (or `config.base_url`), with `config.api_key`; the caller resolves
    /// environment variables (see [`crate::router`]).
    pub fn openai(config: &LlmConfig, model: &str) -> Result<Self, LlmError> {
        let base = config
            .base_url
            .clone()
            .unwrap_or_else(|| OPENAI_BASE_URL.to_string());
        let auth = config
            .api_key
            .clone()
            .map(Auth::Bearer)
            .unwrap_or(Auth::None);
        Self::compatible("openai", model, &base, auth, "OPENAI_API_KEY", config)
    }

    /// Any OpenAI-compatible server: `base_url` is the part before `/chat/completions`
    /// (for example `http://localhost:11434/v1`).
    pub fn compatible(
        provider: &str,
        model: &str,
        base_url: &str,
        auth: Auth,
        key_hint: &str,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let http = HttpClient::new(ErrorContext::new(provider, model, key_hint), config)?
            .with_error_reader(read_error);
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        let send_stop = !matches!(provider, "openai" | "azure");
        Ok(OpenAiClient {
            http,
            url,
            auth,
            model: model.to_string(),
            send_model: true,
            send_stop,
            config: config.clone(),
        })
    }

    /// Azure OpenAI: `{base}/openai/deployments/{deployment}/chat/completions?api-version=..`
    /// with the `api-key` header.
    pub fn azure(
        config: &LlmConfig,
        deployment: &str,
        base_url: &str,
        api_version: &str,
        api_key: String,
    ) -> Result<Self, LlmError> {
        let http = HttpClient::new(
            ErrorContext::new("azure", deployment, "AZURE_API_KEY"),
            config,
        )?
        .with_error_reader(read_error);
        let base = base_url.trim_end_matches('/');
        let base = base.strip_suffix("/openai").unwrap_or(base);
        let url = format!(
            "{base}/openai/deployments/{deployment}/chat/completions?api-version={api_version}"
        );
        Ok(OpenAiClient {
            http,
            url,
            auth: Auth::ApiKeyHeader(api_key),
            model: deployment.to_string(),
            send_model: false,
            send_stop: false,
            config: config.clone(),
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// Whether stop words go in the request body (they are always applied on the client by
    /// [`crate::stop_words::StopWordsLayer`], which `build_llm` puts over every client).
    pub fn with_server_stop(mut self, send: bool) -> Self {
        self.send_stop = send;
        self
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn headers(&self) -> Vec<(String, String)> {
        adapter_support::request_headers(self.auth.headers(), &self.config)
    }

    /// The JSON body for `request`, as CrewAI would send it.
    pub fn request_body(&self, request: &LlmRequest, stream: bool) -> Value {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        to_json(&self.body(request, &names, stream))
    }

    /// The body bytes for `request`, exactly as a call sends them.
    pub fn request_bytes(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError> {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        serde_json::to_vec(&self.body(request, &names, stream))
            .map_err(|e| LlmError::invalid_config("the request body does not serialise", e))
    }

    /// The typed body for `request`, borrowing from it, the config and the tool-name map.
    fn body<'a>(
        &'a self,
        request: &'a LlmRequest,
        names: &'a ToolNameMap,
        stream: bool,
    ) -> WithExtra<'a, ChatRequest<'a>> {
        let sampling = Sampling::resolve(&self.model, &self.config, request);
        let reasoning = sampling.reasoning;
        let (max_completion_tokens, max_tokens) = match sampling.max_tokens {
            Some(n) if reasoning || self.config.max_completion_tokens.is_some() => (Some(n), None),
            other => (None, other),
        };
        let stop = if self.send_stop && !reasoning {
            let mut stop = adapter_support::stop_words(&self.config, request);
            // The chat-completions API takes at most four.
            stop.truncate(4);
            stop
        } else {
            Vec::new()
        };
        let tool_choice = (!request.tools.is_empty()).then(|| {
            tool_choice(
                request
                    .options
                    .tool_choice
                    .as_ref()
                    .unwrap_or(&ToolChoice::Auto),
                names,
            )
        });
        let body = ChatRequest {
            frequency_penalty: self.config.frequency_penalty,
            max_completion_tokens,
            max_tokens,
            messages: request
                .messages
                .iter()
                .map(|m| chat_message(m, names))
                .collect(),
            model: self.send_model.then_some(self.model.as_str()),
            presence_penalty: self.config.presence_penalty,
            reasoning_effort: sampling.reasoning_effort,
            response_format: ChatResponseFormat::resolve(
                request.response_format.as_ref(),
                self.config.response_format.as_ref(),
            ),
            seed: self.config.seed,
            stop,
            stream: stream.then_some(true),
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            temperature: sampling.temperature,
            tool_choice,
            tools: request.tools.iter().map(|t| chat_tool(t, names)).collect(),
            top_p: self.config.top_p,
        };
        WithExtra {
            body,
            extra: &self.config.extra_body,
            order: KeyOrder::Sorted,
        }
    }

    fn provider_name(&self) -> &str {
        &self.http.context().provider
    }
}

/// One message in OpenAI's shape.
pub fn message_json(message: &Message) -> Value {
    to_json(&chat_message(message, &ToolNameMap::default()))
}

pub(crate) fn chat_message<'a>(message: &'a Message, names: &'a ToolNameMap) -> ChatMessage<'a> {
    match message.role {
        Role::Tool => ChatMessage::Tool {
            tool_call_id: message.tool_call_id.as_deref().unwrap_or_default(),
            name: message
                .name
                .as_deref()
                .map(|name| names.provider_name(name)),
            content: adapter_support::message_text(message),
        },
        Role::Assistant if !message.tool_calls.is_empty() => {
            let text = adapter_support::message_text(message);
            ChatMessage::Assistant {
                content: (!text.is_empty()).then_some(ChatContent::Text(text)),
                tool_calls: message
                    .tool_calls
                    .iter()
                    .map(|call| ChatToolCall {
                        id: &call.id,
                        kind: FunctionKind::Function,
                        function: FunctionCall {
                            name: names.provider_name(&call.name),
                            arguments: adapter_support::arguments_text(call),
                        },
                    })
                    .collect(),
            }
        }
        Role::System => ChatMessage::System {
            content: chat_content(message),
        },
        Role::User => ChatMessage::User {
            content: chat_content(message),
        },
        Role::Assistant => ChatMessage::Assistant {
            content: Some(chat_content(message)),
            tool_calls: Vec::new(),
        },
    }
}

fn chat_content(message: &Message) -> ChatContent<'_> {
    if !message.has_media() {
        return ChatContent::Text(adapter_support::message_text(message));
    }
    ChatContent::Parts(message.content.iter().map(Into::into).collect())
}

/// One tool in OpenAI's shape (`strict` only when asked for, as CrewAI sends it).
pub fn tool_json(tool: &ToolDefinition) -> Value {
    to_json(&chat_tool(tool, &ToolNameMap::default()))
}

fn chat_tool<'a>(tool: &'a ToolDefinition, names: &'a ToolNameMap) -> ChatTool<'a> {
    ChatTool::Function {
        function: FunctionDefinition {
            name: names.provider_name(&tool.name),
            description: &tool.description,
            strict: tool.strict,
            parameters: &tool.parameters,
        },
    }
}

fn tool_choice<'a>(choice: &'a ToolChoice, names: &'a ToolNameMap) -> ChatToolChoice<'a> {
    match choice {
        ToolChoice::Auto => ChatToolChoice::Mode(ToolMode::Auto),
        ToolChoice::None => ChatToolChoice::Mode(ToolMode::None),
        ToolChoice::Required => ChatToolChoice::Mode(ToolMode::Required),
        ToolChoice::Tool(name) => ChatToolChoice::Function(NamedFunction {
            kind: FunctionKind::Function,
            function: FunctionName {
                name: names.provider_name(name),
            },
        }),
    }
}

/// The `response_format` field: the request's schema, else the config's (a bare JSON schema, a
/// `{"type": ...}` object passed as is, or a `{name, schema, strict}` mapping).
pub fn response_format_json(
    request: Option<&ResponseFormat>,
    config: Option<&Value>,
) -> Option<Value> {
    ChatResponseFormat::resolve(request, config).map(|format| to_json(&format))
}

/// Maps OpenAI's `finish_reason`.
pub fn finish_reason(reason: Option<&str>) -> FinishReason {
    crate::wire::openai::finish_reason(reason)
}

/// Reads OpenAI's `usage` object (cached and reasoning tokens included).
pub fn parse_usage(usage: Option<&Value>) -> Usage {
    let usage = usage.and_then(|u| ChatUsage::deserialize(u).ok());
    crate::wire::openai::usage_of(usage)
}

/// Parses a complete chat-completions reply already read as JSON.
pub fn parse_completion(provider: &str, body: &Value) -> Result<LlmResponse, LlmError> {
    let completion = ChatCompletion::deserialize(body).map_err(|e| {
        let start = crate::http::snippet(&body.to_string());
        LlmError::malformed_because(
            provider,
            format!("the reply does not have the documented shape: {start}"),
            e,
        )
    })?;
    completion_response(provider, completion, || body.to_string())
}

/// Parses a complete chat-completions reply from its bytes.
pub fn parse_completion_bytes(provider: &str, body: &[u8]) -> Result<LlmResponse, LlmError> {
    let completion: ChatCompletion = crate::wire::decode(provider, "the reply", body)?;
    completion_response(provider, completion, || {
        String::from_utf8_lossy(body).into_owned()
    })
}

fn completion_response(
    provider: &str,
    completion: ChatCompletion,
    text: impl FnOnce() -> String,
) -> Result<LlmResponse, LlmError> {
    if completion.choices.is_empty() {
        return Err(Malformed(format!(
            "no `choices` in the reply: {}",
            crate::http::snippet(&text())
        ))
        .into_error(provider));
    }
    LlmResponse::try_from(completion).map_err(|e| e.into_error(provider))
}

/// Reads an OpenAI-shaped error body for what its codes say beyond the status: a content
/// filter, a context overflow, a model that takes no tools. The statuses that say it all
/// (401, 403, 429) and server errors are left to [`crate::http::classify_status`].
pub(crate) fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    if !(400..500).contains(&reply.status) || matches!(reply.status, 401 | 403 | 429) {
        return None;
    }
    let detail = serde_json::from_str::<ErrorBody>(reply.body).ok()?.detail();
    let quirk = detail.quirk()?;
    let message = detail.message_or(&crate::http::provider_error_message(reply.body));
    Some(quirk_error(context, quirk, message))
}

/// The typed error for a quirk.
pub(crate) fn quirk_error(context: &ErrorContext, quirk: ErrorQuirk, message: String) -> LlmError {
    let provider = context.provider.clone();
    match quirk {
        ErrorQuirk::ContextLength => LlmError::ContextLengthExceeded { provider, message },
        ErrorQuirk::ContentFilter => LlmError::ContentFiltered { provider, message },
        ErrorQuirk::ToolsUnsupported => LlmError::ToolsUnsupported {
            provider,
            model: context.model.clone(),
            message,
        },
    }
}

/// An error a server sent as a stream chunk: its quirk's typed error, else a server error (the
/// stream had opened with a 200).
fn chunk_error(context: &ErrorContext, field: ErrorField) -> LlmError {
    let detail: ErrorDetail = field.into_detail();
    let message = detail.message_or(
        detail
            .code
            .as_deref()
            .unwrap_or("the server reported an error mid-stream"),
    );
    match detail.quirk() {
        Some(quirk) => quirk_error(context, quirk, message),
        None => LlmError::Server {
            provider: context.provider.clone(),
            status: 200,
            message,
            retry_after: None,
        },
    }
}

/// Assembles a streamed reply from its chunks.
#[derive(Debug, Default)]
struct StreamAssembly {
    content: String,
    /// Tool calls by their stream index: (id, name, argument text).
    tool_calls: BTreeMap<usize, (String, String, String)>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    response_id: Option<String>,
    model: Option<String>,
    /// Whether any chunk carried a choice: a stream without one has no reply at all.
    saw_choice: bool,
}

impl StreamAssembly {
    /// Takes one chunk; returns the deltas to show.
    fn absorb(&mut self, chunk: ChatChunk<'_>) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        if self.response_id.is_none() {
            self.response_id = chunk.id.map(|id| id.into_string());
        }
        if self.model.is_none() {
            self.model = chunk.model.map(|model| model.into_string());
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return events;
        };
        self.saw_choice = true;
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason.into_string());
        }
        let Some(delta) = choice.delta else {
            return events;
        };
        if let Some(text) = delta.content.filter(|t| !t.as_str().is_empty()) {
            self.content.push_str(text.as_str());
            events.push(StreamEvent::TextDelta(text.into_string()));
        }
        for (position, call) in delta.tool_calls.into_iter().enumerate() {
            let index = call.index.unwrap_or(position);
            let id = call.id.map(|id| id.into_string());
            let (name, arguments) = match call.function {
                Some(function) => (
                    function.name.map(|n| n.into_string()),
                    function
                        .arguments
                        .map(|a| a.into_string())
                        .unwrap_or_default(),
                ),
                None => (None, String::new()),
            };
            let entry = self.tool_calls.entry(index).or_default();
            if let Some(id) = &id {
                entry.0.clone_from(id);
            }
            if let Some(name) = &name {
                entry.1.push_str(name);
            }
            entry.2.push_str(&arguments);
            events.push(StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta: arguments,
            });
        }
        events
    }

    /// The final event of a stream that ended properly: the reply, or an error when no chunk
    /// carried a choice (as a complete reply with `choices: []` is an error).
    fn into_done(self, provider: &str) -> Result<StreamEvent, LlmError> {
        if !self.saw_choice {
            return Err(Malformed::new("the stream carried no `choices`").into_error(provider));
        }
        Ok(StreamEvent::Done(self.finish()))
    }

    fn finish(self) -> LlmResponse {
        let tool_calls: Vec<ToolCall> = self
            .tool_calls
            .into_values()
            .map(|(id, name, args)| ToolCall::from_raw_arguments(id, name, &args))
            .collect();
        LlmResponse {
            content: if self.content.is_empty() && !tool_calls.is_empty() {
                None
            } else {
                Some(self.content)
            },
            tool_calls,
            finish_reason: finish_reason(self.finish_reason.as_deref()),
            usage: crate::wire::openai::usage_of(self.usage),
            response_id: self.response_id,
            model: self.model,
            thinking: Vec::new(),
        }
    }
}

/// Chat-completion chunks until `[DONE]`; a stream the server closes after a finish reason is
/// complete too (some compatible servers send no `[DONE]`).
struct ChunkDecoder {
    context: ErrorContext,
    /// `None` once the final response went out.
    assembly: Option<StreamAssembly>,
}

impl SseReplyDecoder for ChunkDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let provider = self.context.provider.as_str();
        if data.trim() == "[DONE]" {
            return match self.assembly.take() {
                Some(assembly) => assembly.into_done(provider).map(|done| vec![done]),
                None => Ok(Vec::new()),
            };
        }
        let chunk: ChatChunk<'_> =
            crate::wire::decode(provider, "a stream chunk", data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(chunk_error(&self.context, error));
        }
        Ok(match self.assembly.as_mut() {
            Some(assembly) => assembly.absorb(chunk),
            None => Vec::new(),
        })
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        let assembly = self.assembly.take()?;
        let provider = self.context.provider.as_str();
        if assembly.finish_reason.is_some() {
            return Some(assembly.into_done(provider));
        }
        Some(Err(Malformed::new(
            "the stream ended before the reply was complete",
        )
        .into_error(provider)))
    }

    fn is_complete(&self) -> bool {
        self.assembly.is_none()
    }
}

/// Turns chat-completion SSE chunks into stream events ending with [`StreamEvent::Done`].
pub fn completion_events(provider: String, sse: SseStream) -> LlmStream {
    completion_stream(ErrorContext::new(provider, "", ""), sse)
}

/// [`completion_events`] with the client's error context (a typed error names the model).
pub(crate) fn completion_stream(context: ErrorContext, sse: SseStream) -> LlmStream {
    adapter_support::decode_sse_reply(
        sse,
        ChunkDecoder {
            context,
            assembly: Some(StreamAssembly::default()),
        },
    )
}

#[async_trait]
impl Llm for OpenAiClient {
    fn model(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        self.provider_name()
    }

    fn capabilities(&self) -> Capabilities {
        let name = self.model.to_ascii_lowercase();
        let multimodal = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-5",
            "o1",
            "o3",
            "o4",
            "gpt-4-turbo",
            "llava",
            "vision",
        ]
        .iter()
        .any(|m| name.contains(m));
        Capabilities {
            function_calling: true,
            stop_words: false,
            multimodal,
            structured_output: true,
            context_window: self
                .config
                .context_window_size
                .unwrap_or_else(|| context_window_size(&self.model)),
        }
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        if self.config.stream {
            let stream = self.stream(request).await?;
            return crate::traits::collect_stream(stream, |_| {}).await;
        }
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let reply = self
            .http
            .post_bytes(
                &self.url,
                &self.headers(),
                &self.body(&request, &names, false),
            )
            .await?;
        let mut response = parse_completion_bytes(self.provider_name(), &reply)?;
        restore_tool_names(&mut response, &names);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let sse = self
            .http
            .post_sse(
                &self.url,
                &self.headers(),
                &self.body(&request, &names, true),
            )
            .await?;
        Ok(restore_stream_names(
            completion_stream(self.http.context().clone(), sse),
            names,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ContentPart;
    use serde_json::json;

    fn client(model: &str, config: LlmConfig) -> OpenAiClient {
        OpenAiClient::openai(&config.with_api_key("sk-test"), model)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn reasoning_models_are_recognised() {
        for model in [
            "o1",
            "o1-mini",
            "o3-mini",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "openai/o3",
        ] {
            assert!(is_reasoning_model(model), "{model}");
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "o10x", "omni"] {
            assert!(!is_reasoning_model(model), "{model}");
        }
    }

    #[test]
    fn body_matches_crewai_shape() {
        let tool = ToolDefinition {
            name: "calculator".into(),
            description: "Does math".into(),
            parameters: json!({"type": "object", "properties": {}}),
            strict: false,
        };
        let request = LlmRequest::new(vec![Message::system("s"), Message::user("u")])
            .with_tools(vec![tool])
            .with_stop(vec!["\nObservation:".into()]);
        let body = client("gpt-4o-mini", LlmConfig::default()).request_body(&request, false);
        let text = body.to_string();
        assert!(text.starts_with(r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"model":"gpt-4o-mini","tool_choice":"auto","tools":[{"type":"function","function":{"name":"calculator","description":"Does math","parameters""#), "{text}");
        assert!(body.get("stop").is_none());
    }

    #[test]
    fn the_bytes_sent_are_the_body_shown() {
        let mut config = LlmConfig::default().with_temperature(0.1);
        config.extra_body.insert("user".into(), json!("u-1"));
        let request = LlmRequest::new(vec![
            Message::system("s"),
            Message::user("u").with_part(ContentPart::Image {
                url: "https://x/y.png".into(),
                media_type: None,
            }),
        ])
        .with_tools(vec![ToolDefinition {
            name: "a tool".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            strict: true,
        }]);
        let client = client("gpt-4o", config);
        let shown = client.request_body(&request, true);
        let sent = client.request_bytes(&request, true).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&sent), shown.to_string());
        let keys: Vec<&String> = shown
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "CrewAI's client writes the keys sorted");
        assert!(keys.contains(&&"user".to_string()));
    }

    #[test]
    fn reasoning_rules_apply() {
        let mut config = LlmConfig::new("o3-mini")
            .with_temperature(0.3)
            .with_max_tokens(100);
        config.reasoning_effort = Some("low".into());
        let body = client("o3-mini", config.clone())
            .request_body(&LlmRequest::new(vec![Message::user("q")]), false);
        assert!(body.get("temperature").is_none());
        assert_eq!(body["max_completion_tokens"], json!(100));
        assert_eq!(body["reasoning_effort"], json!("low"));
        let body = client("gpt-4o", config)
            .request_body(&LlmRequest::new(vec![Message::user("q")]), false);
        assert_eq!(body["temperature"], json!(0.3));
        assert_eq!(body["max_tokens"], json!(100));
        assert!(body.get("reasoning_effort").is_none());
    }

    #[test]
    fn tool_messages_round_trip_in_openai_shape() {
        let call = ToolCall::from_raw_arguments("call_1", "calculator", r#"{"expression":"1+1"}"#);
        let assistant = message_json(&Message::assistant_tool_calls(None, vec![call]));
        assert_eq!(
            assistant.to_string(),
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"1+1\"}"}}]}"#
        );
        let result = message_json(&Message::tool_result("call_1", "calculator", "2"));
        assert_eq!(
            result.to_string(),
            r#"{"role":"tool","tool_call_id":"call_1","name":"calculator","content":"2"}"#
        );
    }

    #[test]
    fn invalid_tool_names_are_rewritten_and_mapped_back() {
        let tool = ToolDefinition {
            name: "Search the web".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            strict: false,
        };
        let request = LlmRequest::new(vec![Message::user("q")]).with_tools(vec![tool]);
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let body = client("gpt-4o", LlmConfig::default()).request_body(&request, false);
        assert_eq!(
            body["tools"][0]["function"]["name"],
            json!("Search_the_web")
        );
        let mut response = LlmResponse {
            tool_calls: vec![ToolCall::from_raw_arguments("c", "Search_the_web", "{}")],
            ..Default::default()
        };
        restore_tool_names(&mut response, &names);
        assert_eq!(response.tool_calls[0].name, "Search the web");
    }

    #[test]
    fn config_response_format_forms() {
        let schema = json!({"title": "Out", "type": "object", "properties": {}});
        let wrapped = response_format_json(None, Some(&schema)).unwrap_or_default();
        assert_eq!(wrapped["json_schema"]["name"], json!("Out"));
        let object = json!({"type": "json_object"});
        assert_eq!(response_format_json(None, Some(&object)), Some(object));
    }
}
