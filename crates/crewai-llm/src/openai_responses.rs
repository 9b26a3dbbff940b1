//! OpenAI's Responses API (`/responses`), chosen with `api: responses` in the config.
//!
//! Conversation messages become input items: system and user text, assistant text,
//! `function_call` items for the assistant's tool calls and `function_call_output` items for tool
//! results. Structured output goes in `text.format`, reasoning effort in `reasoning.effort`.
//!
//! The wire types are [`crate::wire::responses`]; error bodies, `response.failed` and `error`
//! events are typed the way chat completions' are (see [`crate::openai`]).
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

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::adapter_support::{self, SseReplyDecoder, ToolNameMap};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, SseStream, Transport};
use crate::openai::{
    Auth, Sampling, TOOL_NAMES, is_reasoning_model, quirk_error, restore_stream_names,
    restore_tool_names,
};
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse, Message, Role, StreamEvent, ToolChoice};
use crate::wire::openai::{ChatResponseFormat, ErrorDetail, FunctionKind, ToolMode};
use crate::wire::responses::{
    InputContent, InputItem, InputMessage, Reasoning, ResponseObject, ResponsesEvent,
    ResponsesRequest, ResponsesTool, ResponsesToolChoice, TextConfig, TextFormat, TypedItem,
};
use crate::wire::{KeyOrder, WithExtra, to_json};

const PROVIDER: &str = "openai";

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
        let http = HttpClient::new(ErrorContext::new("openai", model, "OPENAI_API_KEY"), config)?
            .with_error_reader(crate::openai::read_error);
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
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        to_json(&self.body(request, &names, stream))
    }

    /// The typed body for `request`, borrowing from it, the config and the tool-name map.
    fn body<'a>(
        &'a self,
        request: &'a LlmRequest,
        names: &'a ToolNameMap,
        stream: bool,
    ) -> WithExtra<'a, ResponsesRequest<'a>> {
        let sampling = Sampling::resolve(&self.model, &self.config, request);
        let tool_choice = (!request.tools.is_empty()).then(|| {
            match request
                .options
                .tool_choice
                .as_ref()
                .unwrap_or(&ToolChoice::Auto)
            {
                ToolChoice::Auto => ResponsesToolChoice::Mode(ToolMode::Auto),
                ToolChoice::None => ResponsesToolChoice::Mode(ToolMode::None),
                ToolChoice::Required => ResponsesToolChoice::Mode(ToolMode::Required),
                ToolChoice::Tool(name) => ResponsesToolChoice::Function {
                    kind: FunctionKind::Function,
                    name: names.provider_name(name),
                },
            }
        });
        let body = ResponsesRequest {
            input: request
                .messages
                .iter()
                .flat_map(|m| input_items(m, names))
                .collect(),
            max_output_tokens: sampling.max_tokens,
            model: &self.model,
            reasoning: sampling.reasoning_effort.map(|effort| Reasoning { effort }),
            stream: stream.then_some(true),
            temperature: sampling.temperature,
            // The Responses API flattens chat completions' `json_schema` wrapper into `text.format`.
            text: ChatResponseFormat::resolve(
                request.response_format.as_ref(),
                self.config.response_format.as_ref(),
            )
            .map(|format| TextConfig {
                format: TextFormat::from(format),
            }),
            tool_choice,
            tools: request
                .tools
                .iter()
                .map(|t| ResponsesTool {
                    kind: FunctionKind::Function,
                    name: names.provider_name(&t.name),
                    description: &t.description,
                    parameters: &t.parameters,
                    strict: t.strict,
                })
                .collect(),
            top_p: self.config.top_p.filter(|_| !sampling.reasoning),
        };
        WithExtra {
            body,
            extra: &self.config.extra_body,
            order: KeyOrder::Sorted,
        }
    }
}

/// The input items one message becomes.
fn input_items<'a>(message: &'a Message, names: &'a ToolNameMap) -> Vec<InputItem<'a>> {
    match message.role {
        Role::Tool => vec![InputItem::Item(TypedItem::FunctionCallOutput {
            call_id: message.tool_call_id.as_deref().unwrap_or_default(),
            output: adapter_support::message_text(message),
        })],
        Role::Assistant => {
            let mut items = Vec::with_capacity(1 + message.tool_calls.len());
            let text = adapter_support::message_text(message);
            if !text.is_empty() {
                items.push(InputItem::Message(InputMessage::Assistant {
                    content: text,
                }));
            }
            items.extend(message.tool_calls.iter().map(|call| {
                InputItem::Item(TypedItem::FunctionCall {
                    call_id: &call.id,
                    name: names.provider_name(&call.name),
                    arguments: adapter_support::arguments_text(call),
                })
            }));
            items
        }
        Role::System | Role::User => {
            let content = if message.has_media() {
                InputContent::Parts(message.content.iter().map(Into::into).collect())
            } else {
                InputContent::Text(adapter_support::message_text(message))
            };
            vec![InputItem::Message(if message.role == Role::System {
                InputMessage::System { content }
            } else {
                InputMessage::User { content }
            })]
        }
    }
}

/// Parses a complete Responses-API reply already read as JSON.
pub fn parse_response(body: &Value) -> Result<LlmResponse, LlmError> {
    use serde::Deserialize as _;
    let response = ResponseObject::deserialize(body).map_err(|e| {
        let start = crate::http::snippet(&body.to_string());
        LlmError::malformed_because(
            PROVIDER,
            format!("the reply does not have the documented shape: {start}"),
            e,
        )
    })?;
    response_of(response, || body.to_string())
}

fn response_of(
    response: ResponseObject,
    text: impl FnOnce() -> String,
) -> Result<LlmResponse, LlmError> {
    if response.output.is_none() {
        return Err(LlmError::malformed(
            PROVIDER,
            format!(
                "no `output` in the reply: {}",
                crate::http::snippet(&text())
            ),
        ));
    }
    LlmResponse::try_from(response).map_err(|e| e.into_error(PROVIDER))
}

/// The error a failed response or an `error` event carries: its quirk's typed error (a context
/// overflow, a content filter), a rate limit, else a server error (the stream had opened).
fn stream_error(context: &ErrorContext, detail: ErrorDetail) -> LlmError {
    let message = detail.message_or(
        detail
            .code
            .as_deref()
            .unwrap_or("the response failed without a message"),
    );
    if let Some(quirk) = detail.quirk() {
        return quirk_error(context, quirk, message);
    }
    if matches!(
        detail.code.as_deref(),
        Some("rate_limit_exceeded" | "rate_limit_error")
    ) {
        return LlmError::RateLimited {
            provider: context.provider.clone(),
            retry_after: None,
            message,
        };
    }
    LlmError::Server {
        provider: context.provider.clone(),
        status: 200,
        message,
        retry_after: None,
    }
}

/// The Responses stream: deltas as they come; `response.completed` (or `.incomplete`) carries
/// the final response, and a stream closed before it is an error.
struct EventDecoder {
    context: ErrorContext,
    finished: bool,
}

impl SseReplyDecoder for EventDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        // Data that is no event of the documented shape (keep-alive comments some proxies
        // inject) is skipped, as before: only the completed response decides the reply.
        let Ok(event) = serde_json::from_str::<ResponsesEvent<'_>>(data) else {
            return Ok(Vec::new());
        };
        let event = match event {
            ResponsesEvent::OutputTextDelta { delta } => {
                StreamEvent::TextDelta(delta.into_string())
            }
            ResponsesEvent::OutputItemAdded {
                output_index,
                item: Some(crate::wire::responses::OutputItem::FunctionCall { call_id, name, .. }),
            } => StreamEvent::ToolCallDelta {
                index: output_index.unwrap_or(0),
                id: call_id,
                name,
                arguments_delta: String::new(),
            },
            ResponsesEvent::FunctionCallArgumentsDelta {
                output_index,
                delta,
            } => StreamEvent::ToolCallDelta {
                index: output_index.unwrap_or(0),
                id: None,
                name: None,
                arguments_delta: delta.into_string(),
            },
            ResponsesEvent::ReasoningSummaryTextDelta { delta } => {
                StreamEvent::ThinkingDelta(delta.into_string())
            }
            ResponsesEvent::Completed { response } => {
                self.finished = true;
                let response = response.ok_or_else(|| {
                    LlmError::malformed(PROVIDER, "`response.completed` without a response")
                })?;
                StreamEvent::Done(response_of(response, || data.to_string())?)
            }
            ResponsesEvent::Failed { response } => {
                self.finished = true;
                let detail = response.and_then(|r| r.error).unwrap_or_default();
                return Err(stream_error(&self.context, detail));
            }
            ResponsesEvent::Error {
                message,
                code,
                param,
            } => {
                self.finished = true;
                let detail = ErrorDetail {
                    message,
                    code,
                    param,
                    ..Default::default()
                };
                return Err(stream_error(&self.context, detail));
            }
            ResponsesEvent::OutputItemAdded { .. } | ResponsesEvent::Other => return Ok(Vec::new()),
        };
        Ok(vec![event])
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        Some(Err(LlmError::malformed(
            PROVIDER,
            "the stream ended before `response.completed`",
        )))
    }

    fn is_complete(&self) -> bool {
        self.finished
    }
}

fn response_events(context: ErrorContext, sse: SseStream) -> LlmStream {
    adapter_support::decode_sse_reply(
        sse,
        EventDecoder {
            context,
            finished: false,
        },
    )
}

#[async_trait]
impl Llm for OpenAiResponsesClient {
    fn model(&self) -> &str {
        &self.model
    }
    fn provider(&self) -> &str {
        PROVIDER
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
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let reply = self
            .http
            .post_bytes(
                &self.url,
                &self.headers(),
                &self.body(&request, &names, false),
            )
            .await?;
        let response: ResponseObject = crate::wire::decode(PROVIDER, "the reply", &reply)?;
        let mut response = response_of(response, || String::from_utf8_lossy(&reply).into_owned())?;
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
            response_events(self.http.context().clone(), sse),
            names,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FinishReason, ToolCall};
    use serde_json::json;

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
        .flat_map(|m| {
            input_items(m, &ToolNameMap::default())
                .iter()
                .map(to_json)
                .collect::<Vec<_>>()
        })
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
