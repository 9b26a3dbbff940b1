//! OpenAI chat completions (`/chat/completions`), also spoken by Azure OpenAI, Ollama,
//! OpenRouter, DeepSeek, Groq and any OpenAI-compatible server.
//!
//! The request body matches what CrewAI sends: top-level fields in alphabetical order
//! (`messages`, `model`, `response_format`, `tool_choice`, `tools`, ...), no `stop` field (stop
//! words are cut on the client, see [`crate::stop_words`]), and for reasoning models (`o1`, `o3`,
//! `o4`, `gpt-5`) no temperature, `max_completion_tokens` and `reasoning_effort`.
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
use serde_json::{Map, Value, json};

use crate::adapter_support::{self, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, SseStream, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, ContentPart, FinishReason, LlmRequest, LlmResponse, Message, ResponseFormat,
    Role, StreamEvent, ToolCall, ToolChoice, ToolDefinition, Usage,
};

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
    pub(crate) reasoning_effort: Option<&'a String>,
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
            reasoning_effort: config.reasoning_effort.as_ref().filter(|_| reasoning),
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
        let http = HttpClient::new(ErrorContext::new(provider, model, key_hint), config)?;
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
        )?;
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
    /// [`crate::stop_words::StopWordLlm`], which `build_llm` wraps around every client).
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
        self.prepare(request, stream).0
    }

    /// The body and the tool-name mapping used in it.
    fn prepare(&self, request: &LlmRequest, stream: bool) -> (Value, ToolNameMap) {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        let sampling = Sampling::resolve(&self.model, &self.config, request);
        let reasoning = sampling.reasoning;
        let mut body: BTreeMap<String, Value> = BTreeMap::new();
        body.insert(
            "messages".into(),
            Value::Array(
                request
                    .messages
                    .iter()
                    .map(|m| message_json_named(m, &names))
                    .collect(),
            ),
        );
        if self.send_model {
            body.insert("model".into(), Value::String(self.model.clone()));
        }
        if let Some(t) = sampling.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(n) = sampling.max_tokens {
            let key = if reasoning || self.config.max_completion_tokens.is_some() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(key.into(), json!(n));
        }
        if let Some(effort) = sampling.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        if self.send_stop && !reasoning {
            let mut stop: Vec<&String> = Vec::new();
            for word in self.config.stop.iter().chain(&request.options.stop) {
                if !word.is_empty() && !stop.contains(&word) {
                    stop.push(word);
                }
            }
            // The chat-completions API takes at most four.
            stop.truncate(4);
            if !stop.is_empty() {
                body.insert("stop".into(), json!(stop));
            }
        }
        if let Some(p) = self.config.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(seed) = self.config.seed {
            body.insert("seed".into(), json!(seed));
        }
        if let Some(p) = self.config.frequency_penalty {
            body.insert("frequency_penalty".into(), json!(p));
        }
        if let Some(p) = self.config.presence_penalty {
            body.insert("presence_penalty".into(), json!(p));
        }
        if let Some(format) = response_format_json(
            request.response_format.as_ref(),
            self.config.response_format.as_ref(),
        ) {
            body.insert("response_format".into(), format);
        }
        if !request.tools.is_empty() {
            body.insert(
                "tools".into(),
                Value::Array(
                    request
                        .tools
                        .iter()
                        .map(|t| tool_json_named(t, &names))
                        .collect(),
                ),
            );
            let choice = match request
                .options
                .tool_choice
                .clone()
                .unwrap_or(ToolChoice::Auto)
            {
                ToolChoice::Tool(name) => ToolChoice::Tool(names.provider_name(&name)),
                other => other,
            };
            body.insert("tool_choice".into(), tool_choice_json(&choice));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        for (key, value) in &self.config.extra_body {
            body.insert(key.clone(), value.clone());
        }
        (
            Value::Object(body.into_iter().collect::<Map<_, _>>()),
            names,
        )
    }

    fn provider_name(&self) -> &str {
        &self.http.context().provider
    }

    fn malformed(&self, message: impl Into<String>) -> LlmError {
        LlmError::MalformedResponse {
            provider: self.provider_name().to_string(),
            message: message.into(),
        }
    }
}

/// One message in OpenAI's shape.
pub fn message_json(message: &Message) -> Value {
    message_json_named(message, &ToolNameMap::default())
}

fn message_json_named(message: &Message, names: &ToolNameMap) -> Value {
    match message.role {
        Role::Tool => {
            let mut out = Map::new();
            out.insert("role".into(), json!("tool"));
            out.insert(
                "tool_call_id".into(),
                json!(message.tool_call_id.clone().unwrap_or_default()),
            );
            if let Some(name) = &message.name {
                out.insert("name".into(), json!(names.provider_name(name)));
            }
            out.insert("content".into(), json!(message.text()));
            Value::Object(out)
        }
        Role::Assistant if !message.tool_calls.is_empty() => {
            let text = message.text();
            json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text) },
                "tool_calls": message.tool_calls.iter().map(|call| json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": names.provider_name(&call.name), "arguments": call.arguments_text()},
                })).collect::<Vec<_>>(),
            })
        }
        role => {
            let role = match role {
                Role::System => "system",
                Role::User => "user",
                _ => "assistant",
            };
            json!({"role": role, "content": content_json(message)})
        }
    }
}

fn content_json(message: &Message) -> Value {
    if !message.has_media() {
        return Value::String(message.text());
    }
    Value::Array(
        message
            .content
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => json!({"type": "text", "text": text}),
                ContentPart::Image { url, .. } => {
                    json!({"type": "image_url", "image_url": {"url": url}})
                }
                ContentPart::File {
                    data_base64,
                    media_type,
                    filename,
                } => {
                    let mut file =
                        json!({"file_data": format!("data:{media_type};base64,{data_base64}")});
                    if let Some(name) = filename {
                        file["filename"] = json!(name);
                    }
                    json!({"type": "file", "file": file})
                }
            })
            .collect(),
    )
}

/// One tool in OpenAI's shape (`strict` only when asked for, as CrewAI sends it).
pub fn tool_json(tool: &ToolDefinition) -> Value {
    tool_json_named(tool, &ToolNameMap::default())
}

fn tool_json_named(tool: &ToolDefinition, names: &ToolNameMap) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(names.provider_name(&tool.name)));
    function.insert("description".into(), json!(tool.description));
    if tool.strict {
        function.insert("strict".into(), Value::Bool(true));
    }
    function.insert("parameters".into(), tool.parameters.clone());
    json!({"type": "function", "function": function})
}

fn tool_choice_json(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// The `response_format` field: the request's schema, else the config's (a bare JSON schema, a
/// `{"type": ...}` object passed as is, or a `{name, schema, strict}` mapping).
pub fn response_format_json(
    request: Option<&ResponseFormat>,
    config: Option<&Value>,
) -> Option<Value> {
    if let Some(format) = request {
        return Some(json!({
            "type": "json_schema",
            "json_schema": {"schema": format.schema, "name": format.name, "strict": format.strict},
        }));
    }
    let config = config?;
    let kind = config.get("type").and_then(Value::as_str);
    if matches!(kind, Some("json_schema" | "json_object" | "text")) {
        return Some(config.clone());
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
        return Some(
            json!({"type": "json_schema", "json_schema": {"schema": schema, "name": name, "strict": strict}}),
        );
    }
    let name = config
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("response");
    Some(
        json!({"type": "json_schema", "json_schema": {"schema": config, "name": name, "strict": true}}),
    )
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

/// Reads OpenAI's `usage` object (cached and reasoning tokens included).
pub fn parse_usage(usage: Option<&Value>) -> Usage {
    let Some(usage) = usage.filter(|u| u.is_object()) else {
        return Usage {
            successful_requests: 1,
            ..Default::default()
        };
    };
    let number = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = number(usage.get("prompt_tokens"));
    let completion = number(usage.get("completion_tokens"));
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: usage
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion),
        cached_prompt_tokens: number(usage.pointer("/prompt_tokens_details/cached_tokens")),
        reasoning_tokens: number(usage.pointer("/completion_tokens_details/reasoning_tokens")),
        cache_creation_tokens: 0,
        successful_requests: 1,
        ..Default::default()
    }
}

/// Parses a complete chat-completions reply.
pub fn parse_completion(provider: &str, body: &Value) -> Result<LlmResponse, LlmError> {
    let malformed = |message: String| LlmError::MalformedResponse {
        provider: provider.to_string(),
        message,
    };
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| {
            malformed(format!(
                "no `choices` in the reply: {}",
                crate::http::snippet(&body.to_string())
            ))
        })?;
    let message = choice
        .get("message")
        .ok_or_else(|| malformed("the first choice has no `message`".into()))?;
    let mut tool_calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call
            .get("function")
            .ok_or_else(|| malformed("a tool call has no `function`".into()))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("a tool call has no name".into()))?;
        let arguments = match function.get("arguments") {
            Some(Value::String(raw)) => raw.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        tool_calls.push(ToolCall::from_raw_arguments(id, name, &arguments));
    }
    let mut content = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut reason = finish_reason(choice.get("finish_reason").and_then(Value::as_str));
    if content.is_none()
        && tool_calls.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        content = Some(refusal.to_string());
        reason = FinishReason::ContentFilter;
    }
    Ok(LlmResponse {
        content,
        tool_calls,
        finish_reason: reason,
        usage: parse_usage(body.get("usage")),
        response_id: body.get("id").and_then(Value::as_str).map(str::to_string),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        thinking: Vec::new(),
    })
}

/// Assembles a streamed reply from its chunks.
#[derive(Debug, Default)]
struct StreamAssembly {
    content: String,
    /// Tool calls by their stream index: (id, name, argument text).
    tool_calls: BTreeMap<usize, (String, String, String)>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    response_id: Option<String>,
    model: Option<String>,
    done: bool,
    /// Whether any chunk carried a choice: a stream without one has no reply at all.
    saw_choice: bool,
}

impl StreamAssembly {
    /// Takes one chunk; returns the deltas to show.
    fn absorb(&mut self, chunk: &Value) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        if self.response_id.is_none() {
            self.response_id = chunk.get("id").and_then(Value::as_str).map(str::to_string);
        }
        if self.model.is_none() {
            self.model = chunk
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return events;
        };
        self.saw_choice = true;
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return events;
        };
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.content.push_str(text);
            events.push(StreamEvent::TextDelta(text.to_string()));
        }
        for (position, call) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .unwrap_or(position);
            let id = call.get("id").and_then(Value::as_str).map(str::to_string);
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .map(str::to_string);
            let arguments = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let entry = self.tool_calls.entry(index).or_default();
            if let Some(id) = &id {
                entry.0 = id.clone();
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
    fn into_done(self, provider: String) -> Result<StreamEvent, LlmError> {
        if !self.saw_choice {
            return Err(LlmError::MalformedResponse {
                provider,
                message: "the stream carried no `choices`".into(),
            });
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
            usage: parse_usage(self.usage.as_ref()),
            response_id: self.response_id,
            model: self.model,
            thinking: Vec::new(),
        }
    }
}

/// Turns chat-completion SSE chunks into stream events ending with [`StreamEvent::Done`].
pub fn completion_events(provider: String, sse: SseStream) -> LlmStream {
    let state = (sse, Some(StreamAssembly::default()));
    let events = futures::stream::unfold(state, move |(mut sse, assembly)| {
        let provider = provider.clone();
        async move {
            let mut assembly = assembly?;
            loop {
                let Some(event) = sse.next().await else {
                    if assembly.done || assembly.finish_reason.is_some() {
                        return Some((vec![assembly.into_done(provider)], (sse, None)));
                    }
                    let error = LlmError::MalformedResponse {
                        provider,
                        message: "the stream ended before the reply was complete".into(),
                    };
                    return Some((vec![Err(error)], (sse, None)));
                };
                let event = match event {
                    Ok(event) => event,
                    Err(error) => return Some((vec![Err(error)], (sse, None))),
                };
                let data = event.data.trim();
                if data.is_empty() {
                    continue;
                }
                if data == "[DONE]" {
                    assembly.done = true;
                    return Some((vec![assembly.into_done(provider)], (sse, None)));
                }
                let chunk: Value = match serde_json::from_str(data) {
                    Ok(chunk) => chunk,
                    Err(e) => {
                        let message = format!(
                            "a stream chunk is not JSON ({e}): {}",
                            crate::http::snippet(data)
                        );
                        return Some((
                            vec![Err(LlmError::MalformedResponse { provider, message })],
                            (sse, None),
                        ));
                    }
                };
                if let Some(error) = chunk.get("error") {
                    let message =
                        crate::http::provider_error_message(&json!({ "error": error }).to_string());
                    let error = if crate::error::looks_like_context_overflow(&message) {
                        LlmError::ContextLengthExceeded { provider, message }
                    } else {
                        LlmError::Server {
                            provider,
                            status: 200,
                            message,
                            retry_after: None,
                        }
                    };
                    return Some((vec![Err(error)], (sse, None)));
                }
                let deltas = assembly.absorb(&chunk);
                if !deltas.is_empty() {
                    return Some((deltas.into_iter().map(Ok).collect(), (sse, Some(assembly))));
                }
            }
        }
    });
    Box::pin(events.flat_map(futures::stream::iter))
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
        let (body, names) = self.prepare(&request, false);
        let reply = self
            .http
            .post_json(&self.url, &self.headers(), &body)
            .await?;
        let mut response = parse_completion(self.provider_name(), &reply).map_err(|e| match e {
            LlmError::MalformedResponse { message, .. } => self.malformed(message),
            other => other,
        })?;
        restore_tool_names(&mut response, &names);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (body, names) = self.prepare(&request, true);
        let sse = self
            .http
            .post_sse(&self.url, &self.headers(), &body)
            .await?;
        Ok(restore_stream_names(
            completion_events(self.provider_name().to_string(), sse),
            names,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (body, names) = client("gpt-4o", LlmConfig::default()).prepare(&request, false);
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
