//! OpenAI's Responses API (`/responses`), chosen with `api: responses` in the config.
//!
//! Conversation messages become input items: system and user text, assistant text,
//! `function_call` items for the assistant's tool calls and `function_call_output` items for tool
//! results. Structured output goes in `text.format`, reasoning effort in `reasoning.effort`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::openai::Auth;
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message, OpenAiResponsesClient};
//! let config = LlmConfig::new("gpt-4.1-mini");
//! let client = OpenAiResponsesClient::new(&config, "gpt-4.1-mini", "https://api.openai.com/v1", Auth::Bearer("sk-...".into()))?;
//! let reply = client.call(LlmRequest::new(vec![Message::user("Say hi")])).await?;
//! # let _ = reply; Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::adapter_support::{self, ToolNameMap};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{
    ErrorContext, HttpClient, SseStream, Transport, provider_error_message, snippet,
};
use crate::openai::{
    Auth, Sampling, TOOL_NAMES, is_reasoning_model, response_format_json, restore_stream_names,
    restore_tool_names,
};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, ContentPart, FinishReason, LlmRequest, LlmResponse, Message, Role, StreamEvent,
    ToolCall, ToolChoice, Usage,
};

/// True for OpenAI models served only by the Responses API (`o1-pro`, `o3-pro`, `codex-mini`,
/// `computer-use-preview`); they are routed there unless the config names an API.
pub fn only_on_responses_api(model: &str) -> bool {
    let name = model.to_ascii_lowercase();
    (is_reasoning_model(&name) && name.contains("-pro"))
        || name.starts_with("codex-")
        || name.starts_with("computer-use")
}

/// A Responses-API client.
#[derive(Debug, Clone)]
pub struct OpenAiResponsesClient {
    http: HttpClient,
    url: String,
    auth: Auth,
    model: String,
    config: LlmConfig,
}

impl OpenAiResponsesClient {
    /// `base_url` is the part before `/responses` (`https://api.openai.com/v1`).
    pub fn new(
        config: &LlmConfig,
        model: &str,
        base_url: &str,
        auth: Auth,
    ) -> Result<Self, LlmError> {
        let http = HttpClient::new(ErrorContext::new("openai", model, "OPENAI_API_KEY"), config)?;
        let url = format!("{}/responses", base_url.trim_end_matches('/'));
        Ok(OpenAiResponsesClient {
            http,
            url,
            auth,
            model: model.to_string(),
            config: config.clone(),
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    fn headers(&self) -> Vec<(String, String)> {
        adapter_support::request_headers(self.auth.headers(), &self.config)
    }

    /// The JSON body for `request`.
    pub fn request_body(&self, request: &LlmRequest, stream: bool) -> Value {
        self.prepare(request, stream).0
    }

    /// The body and the tool-name mapping used in it.
    fn prepare(&self, request: &LlmRequest, stream: bool) -> (Value, ToolNameMap) {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        let sampling = Sampling::resolve(&self.model, &self.config, request);
        let mut body: BTreeMap<String, Value> = BTreeMap::new();
        body.insert("model".into(), json!(self.model));
        body.insert(
            "input".into(),
            Value::Array(
                request
                    .messages
                    .iter()
                    .flat_map(|m| input_items(m, &names))
                    .collect(),
            ),
        );
        if let Some(t) = sampling.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = self.config.top_p.filter(|_| !sampling.reasoning) {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(n) = sampling.max_tokens {
            body.insert("max_output_tokens".into(), json!(n));
        }
        if let Some(effort) = sampling.reasoning_effort {
            body.insert("reasoning".into(), json!({"effort": effort}));
        }
        if let Some(format) = response_format_json(
            request.response_format.as_ref(),
            self.config.response_format.as_ref(),
        ) {
            // The Responses API flattens chat completions' `json_schema` wrapper into `text.format`.
            let mut flat = Map::new();
            flat.insert(
                "type".into(),
                format.get("type").cloned().unwrap_or(json!("json_schema")),
            );
            if let Some(Value::Object(inner)) = format.get("json_schema") {
                flat.extend(inner.clone());
            }
            body.insert("text".into(), json!({"format": flat}));
        }
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": names.provider_name(&t.name), "description": t.description, "parameters": t.parameters, "strict": t.strict})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match request
                .options
                .tool_choice
                .clone()
                .unwrap_or(ToolChoice::Auto)
            {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => {
                    json!({"type": "function", "name": names.provider_name(&name)})
                }
            };
            body.insert("tool_choice".into(), choice);
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        for (key, value) in &self.config.extra_body {
            body.insert(key.clone(), value.clone());
        }
        (Value::Object(body.into_iter().collect()), names)
    }
}

/// The input items one message becomes.
fn input_items(message: &Message, names: &ToolNameMap) -> Vec<Value> {
    match message.role {
        Role::Tool => vec![json!({
            "type": "function_call_output",
            "call_id": message.tool_call_id.clone().unwrap_or_default(),
            "output": message.text(),
        })],
        Role::Assistant => {
            let mut items = Vec::new();
            let text = message.text();
            if !text.is_empty() {
                items.push(json!({"role": "assistant", "content": text}));
            }
            items.extend(message.tool_calls.iter().map(|call| {
                json!({"type": "function_call", "call_id": call.id, "name": names.provider_name(&call.name), "arguments": call.arguments_text()})
            }));
            items
        }
        Role::System | Role::User => {
            let role = if message.role == Role::System {
                "system"
            } else {
                "user"
            };
            let content = if message.has_media() {
                Value::Array(
                    message
                        .content
                        .iter()
                        .map(|part| match part {
                            ContentPart::Text { text } => {
                                json!({"type": "input_text", "text": text})
                            }
                            ContentPart::Image { url, .. } => {
                                json!({"type": "input_image", "image_url": url})
                            }
                            ContentPart::File {
                                data_base64,
                                media_type,
                                filename,
                            } => json!({
                                "type": "input_file",
                                "file_data": format!("data:{media_type};base64,{data_base64}"),
                                "filename": filename.clone().unwrap_or_else(|| "file".into()),
                            }),
                        })
                        .collect(),
                )
            } else {
                Value::String(message.text())
            };
            vec![json!({"role": role, "content": content})]
        }
    }
}

fn parse_usage(usage: Option<&Value>) -> Usage {
    let number = |pointer: &str| {
        usage
            .and_then(|u| u.pointer(pointer))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let prompt = number("/input_tokens");
    let completion = number("/output_tokens");
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: usage
            .and_then(|u| u.get("total_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion),
        cached_prompt_tokens: number("/input_tokens_details/cached_tokens"),
        reasoning_tokens: number("/output_tokens_details/reasoning_tokens"),
        cache_creation_tokens: 0,
        successful_requests: 1,
        ..Default::default()
    }
}

/// Parses a complete Responses-API reply.
pub fn parse_response(body: &Value) -> Result<LlmResponse, LlmError> {
    let malformed = |message: String| LlmError::MalformedResponse {
        provider: "openai".into(),
        message,
    };
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            malformed(format!(
                "no `output` in the reply: {}",
                snippet(&body.to_string())
            ))
        })?;
    let mut text = String::new();
    let mut saw_text = false;
    let mut tool_calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = part.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                        saw_text = true;
                    } else if let Some(refusal) = part.get("refusal").and_then(Value::as_str) {
                        text.push_str(refusal);
                        saw_text = true;
                    }
                }
            }
            Some("function_call") => {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a function call has no name".into()))?;
                let id = item
                    .get("call_id")
                    .or_else(|| item.get("id"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let arguments = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tool_calls.push(ToolCall::from_raw_arguments(id, name, arguments));
            }
            _ => {}
        }
    }
    let finish_reason = match (
        body.get("status").and_then(Value::as_str),
        body.pointer("/incomplete_details/reason")
            .and_then(Value::as_str),
    ) {
        (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
        (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
        _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
        (Some("completed") | None, _) => FinishReason::Stop,
        (Some(other), _) => FinishReason::Other(other.to_string()),
    };
    Ok(LlmResponse {
        content: saw_text.then_some(text),
        tool_calls,
        finish_reason,
        usage: parse_usage(body.get("usage")),
        response_id: body.get("id").and_then(Value::as_str).map(str::to_string),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        thinking: Vec::new(),
    })
}

/// Turns Responses-API stream events into [`StreamEvent`]s; the final response comes from
/// `response.completed`.
fn response_events(sse: SseStream) -> LlmStream {
    let events = futures::stream::unfold((sse, false), |(mut sse, finished)| async move {
        if finished {
            return None;
        }
        loop {
            let Some(event) = sse.next().await else {
                let error = LlmError::MalformedResponse {
                    provider: "openai".into(),
                    message: "the stream ended before `response.completed`".into(),
                };
                return Some((vec![Err(error)], (sse, true)));
            };
            let event = match event {
                Ok(event) => event,
                Err(error) => return Some((vec![Err(error)], (sse, true))),
            };
            let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            let kind = data
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or(event.event.as_str())
                .to_string();
            let index = data
                .get("output_index")
                .and_then(Value::as_u64)
                .unwrap_or(0) as usize;
            match kind.as_str() {
                "response.output_text.delta" => {
                    let delta = data
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    return Some((vec![Ok(StreamEvent::TextDelta(delta))], (sse, false)));
                }
                "response.output_item.added"
                    if data.pointer("/item/type").and_then(Value::as_str)
                        == Some("function_call") =>
                {
                    let id = data
                        .pointer("/item/call_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let name = data
                        .pointer("/item/name")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    return Some((
                        vec![Ok(StreamEvent::ToolCallDelta {
                            index,
                            id,
                            name,
                            arguments_delta: String::new(),
                        })],
                        (sse, false),
                    ));
                }
                "response.function_call_arguments.delta" => {
                    let arguments_delta = data
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    return Some((
                        vec![Ok(StreamEvent::ToolCallDelta {
                            index,
                            id: None,
                            name: None,
                            arguments_delta,
                        })],
                        (sse, false),
                    ));
                }
                "response.reasoning_summary_text.delta" => {
                    let delta = data
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    return Some((vec![Ok(StreamEvent::ThinkingDelta(delta))], (sse, false)));
                }
                "response.completed" | "response.incomplete" => {
                    let result = data
                        .get("response")
                        .ok_or_else(|| LlmError::MalformedResponse {
                            provider: "openai".into(),
                            message: "`response.completed` without a response".into(),
                        });
                    let done = result.and_then(parse_response).map(StreamEvent::Done);
                    return Some((vec![done], (sse, true)));
                }
                "response.failed" | "error" => {
                    let message =
                        provider_error_message(&data.get("response").unwrap_or(&data).to_string());
                    let error = if crate::error::looks_like_context_overflow(&message) {
                        LlmError::ContextLengthExceeded {
                            provider: "openai".into(),
                            message,
                        }
                    } else {
                        LlmError::Server {
                            provider: "openai".into(),
                            status: 200,
                            message,
                            retry_after: None,
                        }
                    };
                    return Some((vec![Err(error)], (sse, true)));
                }
                _ => continue,
            }
        }
    });
    Box::pin(events.flat_map(futures::stream::iter))
}

#[async_trait]
impl Llm for OpenAiResponsesClient {
    fn model(&self) -> &str {
        &self.model
    }
    fn provider(&self) -> &str {
        "openai"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            function_calling: true,
            stop_words: false,
            multimodal: true,
            structured_output: true,
            context_window: self
                .config
                .context_window_size
                .unwrap_or_else(|| context_window_size(&self.model)),
        }
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let (body, names) = self.prepare(&request, false);
        let reply = self
            .http
            .post_json(&self.url, &self.headers(), &body)
            .await?;
        let mut response = parse_response(&reply)?;
        restore_tool_names(&mut response, &names);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (body, names) = self.prepare(&request, true);
        let sse = self
            .http
            .post_sse(&self.url, &self.headers(), &body)
            .await?;
        Ok(restore_stream_names(response_events(sse), names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pro_and_codex_models_need_the_responses_api() {
        for model in [
            "o1-pro",
            "o3-pro-2025-06-10",
            "codex-mini-latest",
            "computer-use-preview",
        ] {
            assert!(only_on_responses_api(model), "{model}");
        }
        for model in ["o3-mini", "gpt-4.1", "gpt-4o"] {
            assert!(!only_on_responses_api(model), "{model}");
        }
    }

    #[test]
    fn tool_turns_become_items() {
        let call = ToolCall::from_raw_arguments("call_1", "add", r#"{"a":1}"#);
        let items: Vec<Value> = [
            Message::user("q"),
            Message::assistant_tool_calls(None, vec![call]),
            Message::tool_result("call_1", "add", "2"),
        ]
        .iter()
        .flat_map(|m| input_items(m, &ToolNameMap::default()))
        .collect();
        assert_eq!(
            items[1],
            json!({"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":1}"})
        );
        assert_eq!(
            items[2],
            json!({"type": "function_call_output", "call_id": "call_1", "output": "2"})
        );
    }

    #[test]
    fn parses_text_calls_and_usage() {
        let body = json!({
            "id": "resp_1", "model": "gpt-4.1-mini", "status": "completed",
            "output": [
                {"type": "reasoning", "summary": []},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris", "annotations": []}]},
                {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": "{\"q\":\"x\"}"}
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": {"cached_tokens": 4}, "output_tokens_details": {"reasoning_tokens": 2}}
        });
        let response = parse_response(&body).unwrap_or_default();
        assert_eq!(response.content.as_deref(), Some("Paris"));
        assert_eq!(response.tool_calls[0].id, "call_9");
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            (
                response.usage.cached_prompt_tokens,
                response.usage.reasoning_tokens
            ),
            (4, 2)
        );
        assert_eq!(response.response_id.as_deref(), Some("resp_1"));
    }
}
