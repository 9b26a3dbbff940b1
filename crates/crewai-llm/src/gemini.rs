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
//! - Tool names rewritten to `^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$` and mapped back in responses.
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

/// A Gemini model over the Generative Language API.
#[derive(Debug, Clone)]
pub struct GeminiLlm {
    model: String,
    api_key: String,
    /// `{base}/v1beta/models/{model}`; the method is appended per call.
    model_url: String,
    config: LlmConfig,
    http: HttpClient,
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
        let base = adapter_support::trim_base(base_url.unwrap_or(DEFAULT_BASE_URL));
        let versioned = ["/v1beta", "/v1", "/v1alpha"]
            .iter()
            .any(|v| base.ends_with(v));
        let root = if versioned {
            base
        } else {
            format!("{base}/v1beta")
        };
        let http = HttpClient::new(
            ErrorContext::new(PROVIDER, model, KEY_VARS.join(" or ")),
            config,
        )?;
        Ok(GeminiLlm {
            model_url: format!("{root}/models/{model}"),
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

    /// The model's endpoint, without the method (`…/models/gemini-2.5-flash`).
    pub fn url(&self) -> &str {
        &self.model_url
    }

    fn headers(&self) -> Vec<(String, String)> {
        adapter_support::request_headers(
            vec![("x-goog-api-key".to_string(), self.api_key.clone())],
            &self.config,
        )
    }

    fn prepare(&self, request: &LlmRequest) -> Result<(Value, ResponseReader), LlmError> {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        let body = build_body(&self.config, request, &names)?;
        Ok((body, ResponseReader { names }))
    }

    async fn open_stream(
        &self,
        request: &LlmRequest,
    ) -> Result<(SseStream, ResponseReader), LlmError> {
        let (body, reader) = self.prepare(request)?;
        let url = format!("{}:streamGenerateContent?alt=sse", self.model_url);
        let events = self
            .http
            .post_sse(&url, &self.headers(), &body)
            .await
            .map_err(refine_error)?;
        Ok((events, reader))
    }
}

#[async_trait]
impl Llm for GeminiLlm {
    fn model(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let (body, reader) = self.prepare(&request)?;
        let url = format!("{}:generateContent", self.model_url);
        let reply = self
            .http
            .post_json(&url, &self.headers(), &body)
            .await
            .map_err(refine_error)?;
        let mut assembler = Assembler::new(reader);
        assembler.add_chunk(&reply)?;
        assembler.finish()
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (events, reader) = self.open_stream(&request).await?;
        Ok(adapter_support::decode_sse_reply(
            events,
            ChunkDecoder {
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

/// Adds what Gemini's error bodies say beyond the status: an invalid key arrives as a 400, and
/// the wait before a retry is in the message ("Please retry in 37.5s").
fn refine_error(error: LlmError) -> LlmError {
    match error {
        LlmError::InvalidRequest {
            provider, message, ..
        } if message.contains("API key not valid") || message.contains("API_KEY_INVALID") => {
            LlmError::Authentication {
                provider,
                message,
                hint: KEY_VARS.join(" or "),
            }
        }
        LlmError::RateLimited {
            provider,
            retry_after: None,
            message,
        } => {
            let retry_after = retry_delay_in(&message);
            LlmError::RateLimited {
                provider,
                retry_after,
                message,
            }
        }
        other => other,
    }
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
fn build_body(
    config: &LlmConfig,
    request: &LlmRequest,
    names: &ToolNameMap,
) -> Result<Value, LlmError> {
    let (system, conversation) = adapter_support::split_system(&request.messages);
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(build_contents(&conversation, names)),
    );
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system.join("\n\n")}]}),
        );
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut declaration = json!({"name": names.provider_name(&tool.name), "description": tool.description});
                let parameters = clean_schema(&tool.parameters);
                // Gemini rejects an object schema without properties; a tool without arguments has none.
                if parameters.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
                    declaration["parameters"] = parameters;
                }
                declaration
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
        if let Some(choice) = &request.options.tool_choice {
            let config = match choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::Tool(name) => {
                    json!({"mode": "ANY", "allowedFunctionNames": [names.provider_name(name)]})
                }
            };
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": config}),
            );
        }
    }
    let generation = generation_config(config, request);
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    for (key, value) in &config.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Ok(Value::Object(body))
}

fn generation_config(config: &LlmConfig, request: &LlmRequest) -> Map<String, Value> {
    let mut generation = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            generation.insert(key.to_string(), value);
        }
    };
    set(
        "temperature",
        request
            .options
            .temperature
            .or(config.temperature)
            .map(|t| json!(t)),
    );
    set("topP", config.top_p.map(|p| json!(p)));
    set(
        "maxOutputTokens",
        request
            .options
            .max_tokens
            .or(config.max_tokens)
            .or(config.max_completion_tokens)
            .map(|n| json!(n)),
    );
    let stop: Vec<String> = adapter_support::stop_words(config, request)
        .into_iter()
        .take(MAX_STOP_SEQUENCES)
        .collect();
    set(
        "stopSequences",
        Some(json!(stop)).filter(|_| !stop.is_empty()),
    );
    set("seed", config.seed.map(|s| json!(s)));
    set("presencePenalty", config.presence_penalty.map(|p| json!(p)));
    set(
        "frequencyPenalty",
        config.frequency_penalty.map(|p| json!(p)),
    );
    if let Some(budget) = config
        .thinking
        .as_ref()
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64)
    {
        set(
            "thinkingConfig",
            Some(json!({"thinkingBudget": budget, "includeThoughts": true})),
        );
    }
    if let Some(format) = &request.response_format {
        set("responseMimeType", Some(json!("application/json")));
        set("responseSchema", Some(clean_schema(&format.schema)));
    }
    generation
}

/// The conversation as Gemini contents; consecutive turns of one role are merged.
fn build_contents(conversation: &[&Message], names: &ToolNameMap) -> Vec<Value> {
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (position, message) in conversation.iter().enumerate() {
        let (role, parts) = match message.role {
            Role::Assistant => ("model", model_parts(message, names)),
            Role::Tool => {
                let name = message
                    .name
                    .clone()
                    .filter(|n| !n.is_empty())
                    .or_else(|| called_name(&conversation[..position], message))
                    .unwrap_or_default();
                let part = json!({"functionResponse": {"name": names.provider_name(&name), "response": {"output": message.text()}}});
                ("user", vec![part])
            }
            Role::User | Role::System => ("user", user_parts(message)),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last_role, last_parts)) if *last_role == role => last_parts.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

/// The name of the call a tool message answers, found in the turns before it.
fn called_name(history: &[&Message], result: &Message) -> Option<String> {
    let id = result.tool_call_id.as_deref()?;
    history
        .iter()
        .rev()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.id == id)
        .map(|c| c.name.clone())
}

fn user_parts(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(json!({"text": text})),
            ContentPart::Image { url, media_type } => {
                Some(match adapter_support::parse_data_url(url) {
                    Some((mime, data)) => json!({"inlineData": {"mimeType": mime, "data": data}}),
                    None => {
                        let mime = media_type
                            .as_deref()
                            .or_else(|| adapter_support::media_type_from_url(url))
                            .unwrap_or("image/jpeg");
                        json!({"fileData": {"mimeType": mime, "fileUri": url}})
                    }
                })
            }
            ContentPart::File {
                data_base64,
                media_type,
                ..
            } => Some(json!({"inlineData": {"mimeType": media_type, "data": data_base64}})),
        })
        .collect()
}

fn model_parts(message: &Message, names: &ToolNameMap) -> Vec<Value> {
    let mut parts = user_parts(message);
    for call in &message.tool_calls {
        let args = adapter_support::arguments_object(&call.arguments);
        let mut part =
            json!({"functionCall": {"name": names.provider_name(&call.name), "args": args}});
        if let Some(signature) = &call.signature {
            part["thoughtSignature"] = json!(signature);
        }
        parts.push(part);
    }
    parts
}

/// A JSON schema rewritten into the OpenAPI subset Gemini accepts.
///
/// ```
/// use crewai_llm::gemini::clean_schema;
/// use serde_json::json;
/// let schema = json!({
///     "$schema": "https://json-schema.org/draft/2020-12/schema",
///     "title": "Args", "type": "object", "additionalProperties": false,
///     "properties": {"city": {"type": ["string", "null"], "title": "City", "default": null}},
///     "required": ["city"]
/// });
/// assert_eq!(clean_schema(&schema), json!({
///     "type": "object",
///     "properties": {"city": {"type": "string", "nullable": true}},
///     "required": ["city"]
/// }));
/// ```
pub fn clean_schema(schema: &Value) -> Value {
    let definitions = ["$defs", "definitions"]
        .iter()
        .filter_map(|key| schema.get(*key))
        .filter_map(Value::as_object)
        .fold(Map::new(), |mut all, defs| {
            all.extend(defs.iter().map(|(k, v)| (k.clone(), v.clone())));
            all
        });
    clean_node(schema, &definitions, 0)
}

/// How deep `$ref`s are followed; recursive schemas end in a plain object there.
const MAX_SCHEMA_DEPTH: usize = 24;

fn clean_node(node: &Value, definitions: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(map) = node else {
        // `true` (anything) has no OpenAPI form beyond "no constraints".
        return json!({});
    };
    if depth > MAX_SCHEMA_DEPTH {
        return json!({"type": "object"});
    }
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        let Some(Value::Object(target)) = definitions.get(name) else {
            return json!({"type": "object"});
        };
        // Keywords beside the `$ref` (a description) win over the definition's.
        let mut merged = target.clone();
        merged.extend(
            map.iter()
                .filter(|(k, _)| k.as_str() != "$ref")
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        return clean_node(&Value::Object(merged), definitions, depth + 1);
    }
    if let Some(Value::Array(all)) = map.get("allOf") {
        let mut merged: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| k.as_str() != "allOf")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for part in all {
            let cleaned = clean_node(part, definitions, depth + 1);
            if let Value::Object(fields) = cleaned {
                for (key, value) in fields {
                    merged.entry(key).or_insert(value);
                }
            }
        }
        return clean_node(&Value::Object(merged), definitions, depth + 1);
    }

    let mut out = Map::new();
    let mut nullable = map
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match map.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            let named: Vec<&str> = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| *k != "null")
                .collect();
            nullable |= named.len() < kinds.len();
            match named.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                many => {
                    let options: Vec<Value> =
                        many.iter().map(|kind| json!({"type": kind})).collect();
                    out.insert("anyOf".into(), Value::Array(options));
                }
            }
        }
        _ => {}
    }
    if let Some(options) = map
        .get("anyOf")
        .or_else(|| map.get("oneOf"))
        .and_then(Value::as_array)
    {
        let is_null = |o: &&Value| o.get("type").and_then(Value::as_str) == Some("null");
        nullable |= options.iter().any(|o| is_null(&o));
        let kept: Vec<Value> = options
            .iter()
            .filter(|o| !is_null(o))
            .map(|o| clean_node(o, definitions, depth + 1))
            .collect();
        match kept.len() {
            0 => {}
            1 => {
                if let Some(Value::Object(only)) = kept.into_iter().next() {
                    for (key, value) in only {
                        out.entry(key).or_insert(value);
                    }
                }
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
    }
    if let Some(value) = map.get("const") {
        out.insert("enum".into(), json!([scalar_text(value)]));
        out.entry("type").or_insert(json!("string"));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        // Gemini's enums are lists of strings.
        if values.iter().all(Value::is_string) {
            out.insert("enum".into(), Value::Array(values.clone()));
        }
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        let cleaned: Map<String, Value> = properties
            .iter()
            .map(|(k, v)| (k.clone(), clean_node(v, definitions, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = map.get("required") {
            let present: Vec<Value> = required
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| cleaned.contains_key(r)))
                .cloned()
                .collect();
            if !present.is_empty() {
                out.insert("required".into(), Value::Array(present));
            }
        }
        out.insert("properties".into(), Value::Object(cleaned));
    }
    match map.get("items") {
        Some(items @ Value::Object(_)) => {
            out.insert("items".into(), clean_node(items, definitions, depth + 1));
        }
        // Tuple schemas have no OpenAPI form; the first position's schema is the closest.
        Some(Value::Array(positions)) if !positions.is_empty() => {
            out.insert(
                "items".into(),
                clean_node(&positions[0], definitions, depth + 1),
            );
        }
        _ => {}
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        let kind = out.get("type").and_then(Value::as_str).unwrap_or_default();
        let supported = match kind {
            "string" => matches!(format, "enum" | "date-time"),
            "number" => matches!(format, "float" | "double"),
            "integer" => matches!(format, "int32" | "int64"),
            _ => false,
        };
        if supported {
            out.insert("format".into(), json!(format));
        }
    }
    const KEPT: &[&str] = &[
        "description",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
    ];
    for key in KEPT {
        if let Some(value) = map.get(*key) {
            out.insert((*key).to_string(), value.clone());
        }
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    Value::Object(out)
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Reads Gemini answers back into the neutral types.
#[derive(Debug, Clone)]
struct ResponseReader {
    names: ToolNameMap,
}

fn malformed(message: impl Into<String>) -> LlmError {
    LlmError::MalformedResponse {
        provider: PROVIDER.into(),
        message: message.into(),
    }
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
    usage: Option<Value>,
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
    fn add_chunk(&mut self, chunk: &Value) -> Result<Vec<StreamEvent>, LlmError> {
        if let Some(error) = chunk.get("error") {
            let status = error
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500);
            let context = ErrorContext::new(
                PROVIDER,
                self.model.clone().unwrap_or_default(),
                KEY_VARS.join(" or "),
            );
            return Err(refine_error(crate::http::classify_status(
                &context,
                status,
                None,
                &chunk.to_string(),
            )));
        }
        if !chunk.is_object() {
            return Err(malformed(format!(
                "expected a JSON object, got {}",
                crate::http::snippet(&chunk.to_string())
            )));
        }
        self.chunks += 1;
        let text_of = |key: &str| chunk.get(key).and_then(Value::as_str).map(str::to_string);
        self.response_id = text_of("responseId").or(self.response_id.take());
        self.model = text_of("modelVersion").or(self.model.take());
        if let Some(usage) = chunk.get("usageMetadata") {
            self.usage = Some(usage.clone());
        }
        if let Some(reason) = chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            self.block_reason = Some(reason.to_string());
        }
        let mut events = Vec::new();
        let Some(candidate) = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(events);
        };
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for part in parts {
            let signature = part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(call) = part.get("functionCall") {
                let provider_name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a functionCall without a name"))?;
                let index = self.tool_calls.len();
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!(
                            "call_{}_{index}",
                            self.response_id.as_deref().unwrap_or("gemini")
                        )
                    });
                let arguments = call.get("args").cloned().unwrap_or_else(|| json!({}));
                let name = self.reader.names.original_name(provider_name);
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
                    signature,
                });
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    self.thoughts.push_str(text);
                    events.push(StreamEvent::ThinkingDelta(text.to_string()));
                } else if !text.is_empty() {
                    self.text.push_str(text);
                    events.push(StreamEvent::TextDelta(text.to_string()));
                }
            }
        }
        Ok(events)
    }

    fn usage(&self) -> Usage {
        let count = |key: &str| {
            self.usage
                .as_ref()
                .and_then(|u| u.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let prompt = count("promptTokenCount") + count("toolUsePromptTokenCount");
        let thoughts = count("thoughtsTokenCount");
        // Gemini counts thinking apart from the candidates; our completion count includes it.
        let completion = count("candidatesTokenCount") + thoughts;
        let total = match count("totalTokenCount") {
            0 => prompt + completion,
            total => total,
        };
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: total,
            cached_prompt_tokens: count("cachedContentTokenCount"),
            reasoning_tokens: thoughts,
            cache_creation_tokens: 0,
            successful_requests: 1,
            ..Default::default()
        }
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        if self.chunks == 0 {
            return Err(malformed("the reply held no response"));
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
        let usage = self.usage();
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
    /// `None` once the final response went out.
    assembler: Option<Assembler>,
}

impl SseReplyDecoder for ChunkDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            malformed(format!(
                "a stream chunk is not JSON ({e}): {}",
                crate::http::snippet(data)
            ))
        })?;
        match self.assembler.as_mut() {
            Some(assembler) => assembler.add_chunk(&chunk),
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

    #[test]
    fn refs_are_inlined_and_unions_become_nullable() {
        let schema = json!({
            "type": "object",
            "$defs": {"Address": {"type": "object", "title": "Address", "properties": {"city": {"type": "string", "format": "uri"}}}},
            "properties": {
                "home": {"$ref": "#/$defs/Address", "description": "Where"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "kind": {"const": "basic"},
                "tags": {"type": "array", "items": {"type": "string"}, "examples": [["a"]]},
                "level": {"type": "integer", "enum": [1, 2]}
            },
            "required": ["home", "ghost"]
        });
        assert_eq!(
            clean_schema(&schema),
            json!({
                "type": "object",
                "required": ["home"],
                "properties": {
                    "home": {"type": "object", "properties": {"city": {"type": "string"}}, "description": "Where"},
                    "note": {"type": "string", "nullable": true},
                    "kind": {"enum": ["basic"], "type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "level": {"type": "integer"}
                }
            })
        );
    }

    #[test]
    fn recursive_refs_end_at_the_depth_limit() {
        let schema = json!({"$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}, "$ref": "#/$defs/Node"});
        let cleaned = clean_schema(&schema);
        assert_eq!(cleaned["properties"]["child"]["type"], "object");
    }

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
        let contents = build_contents(&refs, &names);
        assert_eq!(contents.len(), 3);
        assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "sig");
        assert_eq!(contents[1]["parts"][0]["functionCall"]["name"], "look_up");
        assert_eq!(
            contents[2]["parts"][0]["functionResponse"]["name"],
            "look_up"
        );
        assert_eq!(contents[2]["parts"][1]["text"], "and?");
    }
}
