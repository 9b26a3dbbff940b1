//! Google's Gemini API (`POST {base}/v1beta/models/{model}:generateContent`, streaming through
//! `:streamGenerateContent?alt=sse`).
//!
//! - System messages become `systemInstruction`; the conversation becomes `contents` with the
//!   roles `user` and `model`; tool results become `functionResponse` parts (the results of one
//!   step travel in one turn).
//! - Tool schemas are rewritten into the OpenAPI subset Gemini accepts: `$ref`s are inlined and
//!   keywords it rejects (`additionalProperties`, `$schema`, `title`, `default`, ...) are dropped;
//!   `["string", "null"]` types and `anyOf` with `null` become `nullable`.
//! - `thoughtSignature`s on function calls are kept in [`ToolCall::signature`] and sent back with
//!   the call, as Gemini's thinking models require.
//! - Structured output through `responseMimeType: application/json` and `responseSchema`.
//! - The key travels in the `x-goog-api-key` header, so it never ends up in URLs or logs.
//! - The same client speaks Vertex AI's `generateContent` (the body format is the same), with a
//!   project and location in the URL and an OAuth access token; see
//!   [`crate::providers::vertex`].
//! - Tool names rewritten to `^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$` and mapped back in responses.
//! - The wire types are [`crate::wire::gemini`]; errors are read from Google's typed details:
//!   `API_KEY_INVALID` is an authentication error, `RetryInfo` the wait of a rate limit, and a
//!   model that takes no function calls (Gemma) is [`LlmError::ToolsUnsupported`].
//!
//! ```no_run
//! use crewai_llm::gemini::GeminiLlm;
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message};
//!
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! // The key comes from `api_key`, GEMINI_API_KEY or GOOGLE_API_KEY.
//! let gemini = GeminiLlm::from_config(&LlmConfig::new("gemini/gemini-2.5-flash"))?;
//! let reply = gemini.call(LlmRequest::new(vec![Message::user("Say hello")])).await?;
//! println!("{}", reply.content.unwrap_or_default());
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::access_token::{Credential, Endpoint};
use crate::adapter_support::{self, SseReplyDecoder, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, ErrorReply, HttpClient, SseStream, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, ContentPart, FinishReason, LlmRequest, LlmResponse, Message, Role, StreamEvent,
    ThinkingBlock, ToolCall, ToolChoice, Usage,
};
use crate::wire::gemini::{
    Blob, Content, ErrorBody, FileData, FunctionCall, FunctionCallingConfig, FunctionCallingMode,
    FunctionDeclaration, FunctionOutput, FunctionResponse, GenerateContentRequest,
    GenerateContentResponse, GenerationConfig, GoogleError, Part, PartData, SystemInstruction,
    TextPart, ThinkingConfig, ToolConfig, Tools, UsageMetadata,
};
use crate::wire::{KeyOrder, Malformed, WithExtra};

mod schema;

pub use schema::clean_schema;

/// Google's public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// Gemini takes at most this many stop sequences; the client-side stop-word cut handles the rest.
pub const MAX_STOP_SEQUENCES: usize = 5;

const PROVIDER: &str = "gemini";
const KEY_VARS: &[&str] = &["GEMINI_API_KEY", "GOOGLE_API_KEY"];

const TOOL_NAMES: ToolNameRules = ToolNameRules {
    max_len: 64,
    allowed: |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'),
    allowed_first: |c| c.is_ascii_alphabetic() || c == '_',
};

/// A Gemini model over the Generative Language API or Vertex AI.
#[derive(Debug, Clone)]
pub struct GeminiLlm {
    /// `gemini`, or `vertex_ai` for a model on Vertex AI.
    provider: &'static str,
    model: String,
    /// The API key header, or Vertex AI's access token.
    credential: Credential,
    /// Headers the endpoint needs besides the credential (Vertex AI's quota project).
    endpoint_headers: Vec<(String, String)>,
    /// `{base}/v1beta/models/{model}` (Vertex AI: `…/publishers/google/models/{model}`); the
    /// method is appended per call.
    model_url: String,
    config: LlmConfig,
    http: HttpClient,
}

/// The versioned API root at `base_url` (Google's when `None`): `…/v1beta` unless the URL
/// already ends in a version. The chat and the embeddings client post below it.
pub(crate) fn api_root(base_url: Option<&str>) -> String {
    let base = adapter_support::trim_base(base_url.unwrap_or(DEFAULT_BASE_URL));
    let versioned = ["/v1beta", "/v1", "/v1alpha"]
        .iter()
        .any(|v| base.ends_with(v));
    if versioned {
        base
    } else {
        format!("{base}/v1beta")
    }
}

impl GeminiLlm {
    /// A client for `config.model` (with or without the `gemini/`, `google/` or `models/`
    /// prefix), reading what the config leaves unset from the environment.
    ///
    /// The key is `config.api_key`, `GEMINI_API_KEY` or `GOOGLE_API_KEY`; the endpoint is
    /// `config.base_url` or Google's.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        let model = adapter_support::strip_prefixes(&config.model, &["gemini/", "google/"]);
        let api_key = adapter_support::api_key(config, PROVIDER, KEY_VARS)?;
        Self::new(model, api_key, config.base_url.as_deref(), config)
    }

    /// A client for `model` with an explicit key and endpoint (`None`: Google's; with or without
    /// a trailing `/v1beta`); the other settings come from `config`. Reads no environment.
    pub fn new(
        model: &str,
        api_key: String,
        base_url: Option<&str>,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if model.trim().is_empty() {
            return Err(LlmError::Config(
                "gemini: no model given (for example `gemini/gemini-2.5-flash`)".into(),
            ));
        }
        let root = api_root(base_url);
        let credential = Credential::Fixed {
            name: "x-goog-api-key",
            value: api_key,
        };
        let endpoint = Endpoint {
            provider: PROVIDER,
            model_url: format!("{root}/models/{model}"),
            credential,
            headers: Vec::new(),
            key_hint: KEY_VARS.join(" or "),
        };
        Self::at(model, endpoint, config)
    }

    /// A client for `model` at `endpoint` (Vertex AI's, built by its provider).
    pub(crate) fn at(
        model: &str,
        endpoint: Endpoint,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let http = HttpClient::new(
            ErrorContext::new(endpoint.provider, model, endpoint.key_hint),
            config,
        )?
        .with_error_reader(read_error);
        Ok(GeminiLlm {
            provider: endpoint.provider,
            model_url: endpoint.model_url,
            model: model.to_string(),
            credential: endpoint.credential,
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

    /// The model's endpoint, without the method (`…/models/gemini-2.5-flash`).
    pub fn url(&self) -> &str {
        &self.model_url
    }

    fn headers(&self, credential: (String, String)) -> Vec<(String, String)> {
        let mut own = vec![credential];
        own.extend(self.endpoint_headers.iter().cloned());
        adapter_support::request_headers(own, &self.config)
    }

    /// The JSON body for `request`, as it is sent.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        crate::wire::to_json(&build_body(&self.config, request, &names))
    }

    fn reader(&self, request: &LlmRequest) -> ResponseReader {
        ResponseReader {
            names: ToolNameMap::for_request(TOOL_NAMES, request, &[]),
            context: self.http.context().clone(),
        }
    }

    async fn open_stream(
        &self,
        request: &LlmRequest,
    ) -> Result<(SseStream, ResponseReader), LlmError> {
        let reader = self.reader(request);
        let url = format!("{}:streamGenerateContent?alt=sse", self.model_url);
        let body = &build_body(&self.config, request, &reader.names);
        let url = url.as_str();
        let events = self
            .credential
            .post_sse(&self.http, url, |c| self.headers(c), body)
            .await?;
        Ok((events, reader))
    }
}

#[async_trait]
impl Llm for GeminiLlm {
    fn model(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        self.provider
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let reader = self.reader(&request);
        let url = format!("{}:generateContent", self.model_url);
        let body = &build_body(&self.config, &request, &reader.names);
        let url = url.as_str();
        let reply = self
            .credential
            .post_bytes(&self.http, url, |c| self.headers(c), body)
            .await?;
        let chunk: GenerateContentResponse<'_> =
            crate::wire::decode(self.provider, "the reply", &reply)?;
        let mut assembler = Assembler::new(reader);
        assembler.add_chunk(chunk)?;
        assembler.finish()
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (events, reader) = self.open_stream(&request).await?;
        Ok(adapter_support::decode_sse_reply(
            events,
            ChunkDecoder {
                provider: self.provider,
                assembler: Some(Assembler::new(reader)),
            },
        ))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            function_calling: true,
            stop_words: true,
            multimodal: true,
            structured_output: true,
            context_window: self
                .config
                .context_window_size
                .unwrap_or_else(|| context_window(&self.model)),
        }
    }
}

/// The context window: the shared table's entry, 1M tokens for other Gemini models, and the
/// smaller windows of the open Gemma models served by the same API.
fn context_window(model: &str) -> u64 {
    if model.starts_with("gemma-3") {
        131_072
    } else if model.starts_with("gemma") {
        8_192
    } else {
        crate::context_window::known_context_window(model).unwrap_or(1_048_576)
    }
}

/// Reads Google's error body for what it says beyond the status: an invalid key arrives as a
/// 400 (`API_KEY_INVALID`), the wait before a retry is in a `RetryInfo` detail (or only in the
/// message: "Please retry in 37.5s"), and Gemma models refuse tools in words.
fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    match serde_json::from_str::<ErrorBody>(reply.body) {
        Ok(ErrorBody { error: Some(error) }) => Some(google_error(
            context,
            reply.status,
            reply.retry_after,
            error,
        )),
        // A body that is no Google error (a proxy's page): the status says it all, except
        // the wait a rate limit may name in words.
        _ if reply.status == 429 && reply.retry_after.is_none() => Some(LlmError::RateLimited {
            provider: context.provider.clone(),
            retry_after: retry_delay_in(reply.body),
            message: crate::http::provider_error_message(reply.body),
        }),
        _ => None,
    }
}

/// The typed error for a Google error with the HTTP `status`.
fn google_error(
    context: &ErrorContext,
    status: u16,
    retry_after: Option<Duration>,
    error: GoogleError,
) -> LlmError {
    let message = error
        .message
        .clone()
        .or_else(|| error.status.clone())
        .unwrap_or_else(|| format!("error {status}"));
    let provider = context.provider.clone();
    if error.has_reason("API_KEY_INVALID") || message.contains("API key not valid") {
        return LlmError::Authentication {
            provider,
            message,
            hint: context.key_hint.clone(),
        };
    }
    let refusable = (400..500).contains(&status) && !matches!(status, 401 | 403 | 429);
    if refusable && adapter_support::says_tools_unsupported(&message) {
        return LlmError::ToolsUnsupported {
            provider,
            model: context.model.clone(),
            message,
        };
    }
    let retry_after = retry_after
        .or_else(|| error.retry_delay())
        .or_else(|| retry_delay_in(&message))
        .map(|d| d.min(crate::http::MAX_RETRY_AFTER));
    crate::http::classify_message(
        context,
        status,
        retry_after,
        message,
        error.status.as_deref().unwrap_or_default(),
    )
}

/// The seconds in "retry in 12.3s" within a message, capped like a `Retry-After` header.
fn retry_delay_in(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let start = lower.find("retry in ")? + "retry in ".len();
    let number: String = lower[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let rest = &lower[start + number.len()..];
    let seconds: f64 = number.parse().ok()?;
    let seconds = if rest.starts_with("ms") {
        seconds / 1000.0
    } else {
        seconds
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .map(|d| d.min(crate::http::MAX_RETRY_AFTER))
}

/// Builds the generateContent body.
fn build_body<'a>(
    config: &'a LlmConfig,
    request: &'a LlmRequest,
    names: &'a ToolNameMap,
) -> WithExtra<'a, GenerateContentRequest<'a>> {
    let (system, conversation) = adapter_support::split_system(&request.messages);
    let system_instruction = (!system.is_empty()).then(|| SystemInstruction {
        parts: vec![TextPart {
            text: adapter_support::join_system(system),
        }],
    });
    let (tools, tool_config) = if request.tools.is_empty() {
        (Vec::new(), None)
    } else {
        let declarations = request
            .tools
            .iter()
            .map(|tool| {
                let parameters = clean_schema(&tool.parameters);
                // Gemini rejects an object schema without properties; a tool without arguments has none.
                let has_properties = parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty());
                FunctionDeclaration {
                    name: names.provider_name(&tool.name),
                    description: &tool.description,
                    parameters: has_properties.then_some(parameters),
                }
            })
            .collect();
        let tool_config = request.options.tool_choice.as_ref().map(|choice| {
            let (mode, allowed) = match choice {
                ToolChoice::Auto => (FunctionCallingMode::Auto, Vec::new()),
                ToolChoice::None => (FunctionCallingMode::None, Vec::new()),
                ToolChoice::Required => (FunctionCallingMode::Any, Vec::new()),
                ToolChoice::Tool(name) => {
                    (FunctionCallingMode::Any, vec![names.provider_name(name)])
                }
            };
            ToolConfig {
                function_calling_config: FunctionCallingConfig {
                    mode,
                    allowed_function_names: allowed,
                },
            }
        });
        (
            vec![Tools {
                function_declarations: declarations,
            }],
            tool_config,
        )
    };
    WithExtra {
        body: GenerateContentRequest {
            contents: build_contents(&conversation, names),
            system_instruction,
            tools,
            tool_config,
            generation_config: generation_config(config, request),
        },
        extra: &config.extra_body,
        order: KeyOrder::AsWritten,
    }
}

fn generation_config<'a>(config: &'a LlmConfig, request: &'a LlmRequest) -> GenerationConfig<'a> {
    let mut stop = adapter_support::stop_words(config, request);
    stop.truncate(MAX_STOP_SEQUENCES);
    // `thinking` is the user's free-form value; only its budget applies to Gemini.
    let thinking_config = config
        .thinking
        .as_ref()
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64)
        .map(|budget| ThinkingConfig {
            thinking_budget: budget,
            include_thoughts: true,
        });
    let format = request.response_format.as_ref();
    GenerationConfig {
        temperature: request.options.temperature.or(config.temperature),
        top_p: config.top_p,
        max_output_tokens: request
            .options
            .max_tokens
            .or(config.max_tokens)
            .or(config.max_completion_tokens),
        stop_sequences: stop,
        seed: config.seed,
        presence_penalty: config.presence_penalty,
        frequency_penalty: config.frequency_penalty,
        thinking_config,
        response_mime_type: format.map(|_| "application/json"),
        response_schema: format.map(|f| clean_schema(&f.schema)),
    }
}

/// The conversation as Gemini contents; consecutive turns of one role are merged.
fn build_contents<'a>(conversation: &[&'a Message], names: &'a ToolNameMap) -> Vec<Content<'a>> {
    let mut contents: Vec<Content<'a>> = Vec::new();
    for (position, message) in conversation.iter().enumerate() {
        let (role, parts) = match message.role {
            Role::Assistant => ("model", model_parts(message, names)),
            Role::Tool => {
                let name = message
                    .name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .or_else(|| called_name(&conversation[..position], message))
                    .unwrap_or_default();
                let part = PartData::FunctionResponse(FunctionResponse {
                    name: names.provider_name(name),
                    response: FunctionOutput {
                        output: adapter_support::message_text(message),
                    },
                });
                ("user", vec![part.into()])
            }
            Role::User | Role::System => ("user", user_parts(message)),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => contents.push(Content { role, parts }),
        }
    }
    contents
}

/// The name of the call a tool message answers, found in the turns before it.
fn called_name<'a>(history: &[&'a Message], result: &Message) -> Option<&'a str> {
    let id = result.tool_call_id.as_deref()?;
    history
        .iter()
        .rev()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.id == id)
        .map(|c| c.name.as_str())
}

fn user_parts(message: &Message) -> Vec<Part<'_>> {
    message
        .content
        .iter()
        .filter_map(|part| {
            let data = match part {
                ContentPart::Text { text } if text.is_empty() => return None,
                ContentPart::Text { text } => PartData::Text(text),
                ContentPart::Image { url, media_type } => {
                    match adapter_support::parse_data_url(url) {
                        Some((mime_type, data)) => PartData::InlineData(Blob { mime_type, data }),
                        None => PartData::FileData(FileData {
                            mime_type: media_type
                                .as_deref()
                                .or_else(|| adapter_support::media_type_from_url(url))
                                .unwrap_or("image/jpeg"),
                            file_uri: url,
                        }),
                    }
                }
                ContentPart::File {
                    data_base64,
                    media_type,
                    ..
                } => PartData::InlineData(Blob {
                    mime_type: media_type,
                    data: data_base64,
                }),
            };
            Some(data.into())
        })
        .collect()
}

fn model_parts<'a>(message: &'a Message, names: &'a ToolNameMap) -> Vec<Part<'a>> {
    let mut parts = user_parts(message);
    parts.extend(message.tool_calls.iter().map(|call| Part {
        data: PartData::FunctionCall(FunctionCall {
            name: names.provider_name(&call.name),
            args: adapter_support::arguments_object(&call.arguments),
        }),
        thought_signature: call.signature.as_deref(),
    }));
    parts
}

/// Reads Gemini answers back into the neutral types.
#[derive(Debug, Clone)]
struct ResponseReader {
    names: ToolNameMap,
    /// The client's, for errors sent in a reply.
    context: ErrorContext,
}

/// Builds a response from one complete reply or from the chunks of a stream.
#[derive(Debug)]
struct Assembler {
    reader: ResponseReader,
    text: String,
    thoughts: String,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    block_reason: Option<String>,
    usage: Option<UsageMetadata>,
    response_id: Option<String>,
    model: Option<String>,
    chunks: usize,
}

impl Assembler {
    fn new(reader: ResponseReader) -> Self {
        Assembler {
            reader,
            text: String::new(),
            thoughts: String::new(),
            tool_calls: Vec::new(),
            finish_reason: None,
            block_reason: None,
            usage: None,
            response_id: None,
            model: None,
            chunks: 0,
        }
    }

    /// Takes in one GenerateContentResponse; returns the deltas it carries.
    fn add_chunk(
        &mut self,
        chunk: GenerateContentResponse<'_>,
    ) -> Result<Vec<StreamEvent>, LlmError> {
        if let Some(error) = chunk.error {
            let status = error.code.unwrap_or(500);
            return Err(google_error(&self.reader.context, status, None, error));
        }
        self.chunks += 1;
        if chunk.response_id.is_some() {
            self.response_id = chunk.response_id;
        }
        if chunk.model_version.is_some() {
            self.model = chunk.model_version;
        }
        if chunk.usage_metadata.is_some() {
            self.usage = chunk.usage_metadata;
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.block_reason = Some(reason);
        }
        let mut events = Vec::new();
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            return Ok(events);
        };
        if candidate.finish_reason.is_some() {
            self.finish_reason = candidate.finish_reason;
        }
        let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
        for part in parts {
            if let Some(call) = part.function_call {
                let provider_name = call.name.ok_or_else(|| {
                    Malformed::new("a functionCall without a name")
                        .into_error(&self.reader.context.provider)
                })?;
                let index = self.tool_calls.len();
                let id = call.id.unwrap_or_else(|| {
                    format!(
                        "call_{}_{index}",
                        self.response_id.as_deref().unwrap_or("gemini")
                    )
                });
                let arguments = call
                    .args
                    .unwrap_or_else(|| Value::Object(Default::default()));
                let name = self.reader.names.original_name(&provider_name);
                events.push(StreamEvent::ToolCallDelta {
                    index,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments_delta: arguments.to_string(),
                });
                self.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                    signature: part.thought_signature,
                });
            } else if let Some(text) = part.text {
                if part.thought == Some(true) {
                    self.thoughts.push_str(text.as_str());
                    events.push(StreamEvent::ThinkingDelta(text.into_string()));
                } else if !text.as_str().is_empty() {
                    self.text.push_str(text.as_str());
                    events.push(StreamEvent::TextDelta(text.into_string()));
                }
            }
        }
        Ok(events)
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        if self.chunks == 0 {
            return Err(Malformed::new("the reply held no response")
                .into_error(&self.reader.context.provider));
        }
        let finish_reason = match (self.block_reason.as_deref(), self.finish_reason.as_deref()) {
            (Some(_), _) => FinishReason::ContentFilter,
            _ if !self.tool_calls.is_empty() => FinishReason::ToolCalls,
            (None, Some("STOP") | None) => FinishReason::Stop,
            (None, Some("MAX_TOKENS")) => FinishReason::Length,
            (
                None,
                Some(
                    "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
                    | "IMAGE_SAFETY",
                ),
            ) => FinishReason::ContentFilter,
            (None, Some(other)) => FinishReason::Other(other.to_string()),
        };
        let usage = self.usage.map(Usage::from).unwrap_or(Usage {
            successful_requests: 1,
            ..Default::default()
        });
        let thinking = if self.thoughts.is_empty() {
            Vec::new()
        } else {
            vec![ThinkingBlock {
                thinking: self.thoughts,
                signature: None,
                redacted_data: None,
            }]
        };
        Ok(LlmResponse {
            content: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls: self.tool_calls,
            finish_reason,
            usage,
            response_id: self.response_id,
            model: self.model,
            thinking,
        })
    }
}

/// Gemini's stream: each event is a whole `GenerateContentResponse` chunk; the server ends the
/// reply by closing the stream (the last chunk carried the finish reason).
struct ChunkDecoder {
    provider: &'static str,
    /// `None` once the final response went out.
    assembler: Option<Assembler>,
}

impl SseReplyDecoder for ChunkDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let chunk: GenerateContentResponse<'_> =
            crate::wire::decode(self.provider, "a stream chunk", data.as_bytes())?;
        match self.assembler.as_mut() {
            Some(assembler) => assembler.add_chunk(chunk),
            None => Ok(Vec::new()),
        }
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        Some(self.assembler.take()?.finish().map(StreamEvent::Done))
    }

    fn is_complete(&self) -> bool {
        self.assembler.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retry_delay_is_read_from_the_message() {
        assert_eq!(
            retry_delay_in("Quota exceeded. Please retry in 37.5s."),
            Some(Duration::from_millis(37_500))
        );
        assert_eq!(
            retry_delay_in("Please retry in 250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_delay_in("slow down"), None);
    }

    #[test]
    fn tool_results_find_their_call_name_and_merge_into_one_turn() {
        let call = ToolCall {
            id: "c1".into(),
            name: "look up".into(),
            arguments: json!({"q": 1}),
            signature: Some("sig".into()),
        };
        let mut anonymous = Message::tool_result("c1", "", "found");
        anonymous.name = None;
        let messages = [
            Message::user("go"),
            Message::assistant_tool_calls(None, vec![call]),
            anonymous,
            Message::user("and?"),
        ];
        let refs: Vec<&Message> = messages.iter().collect();
        let names = ToolNameMap::new(TOOL_NAMES, ["look up"]);
        let contents = crate::wire::to_json(&build_contents(&refs, &names));
        assert_eq!(contents.as_array().map(Vec::len), Some(3));
        assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "sig");
        assert_eq!(contents[1]["parts"][0]["functionCall"]["name"], "look_up");
        assert_eq!(
            contents[2]["parts"][0]["functionResponse"]["name"],
            "look_up"
        );
        assert_eq!(contents[2]["parts"][1]["text"], "and?");
    }
}
