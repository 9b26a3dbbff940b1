//! Reading what Anthropic sends back: whole messages, the event stream, error bodies.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::adapter_support::{SseReplyDecoder, ToolNameMap};
use crate::error::LlmError;
use crate::http::{ErrorContext, ErrorReply};
use crate::types::{FinishReason, LlmResponse, StreamEvent, ThinkingBlock, ToolCall};
use crate::wire::Malformed;
use crate::wire::anthropic::{
    AnthropicUsage, BlockDelta, ErrorBody, ErrorDetail, MessageReply, MessagesEvent, ReplyBlock,
};

/// Reads Anthropic answers back into the neutral types.
#[derive(Debug, Clone)]
pub(super) struct ResponseReader {
    pub(super) names: ToolNameMap,
    /// The forced structured-output tool's name as sent, if any.
    pub(super) structured_tool: Option<String>,
    /// The client's: the provider (`anthropic`, or `vertex_ai` for Claude on Vertex AI) and where
    /// its key comes from, for errors.
    pub(super) context: ErrorContext,
}

impl ResponseReader {
    fn malformed(&self, message: impl Into<String>) -> LlmError {
        Malformed::new(message).into_error(&self.context.provider)
    }

    /// A complete (non-streamed) reply, from its bytes.
    pub(super) fn read_reply(self, bytes: &[u8]) -> Result<LlmResponse, LlmError> {
        let mut reply: MessageReply<'_> =
            crate::wire::decode(&self.context.provider, "the reply", bytes)?;
        if reply.kind.as_deref() == Some("error") {
            return Err(detail_error(reply.error.unwrap_or_default(), &self.context));
        }
        let blocks = reply.content.take().ok_or_else(|| {
            self.malformed(format!(
                "no `content` array in the reply: {}",
                crate::http::snippet(&String::from_utf8_lossy(bytes))
            ))
        })?;
        let mut assembler = Assembler::new(self);
        assembler.start_message(&reply);
        for (index, block) in blocks.into_iter().enumerate() {
            assembler.start_block(index, block)?;
        }
        assembler.stop_reason = reply.stop_reason;
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
pub(super) struct Assembler {
    reader: ResponseReader,
    blocks: BTreeMap<usize, Block>,
    tool_calls: usize,
    id: Option<String>,
    model: Option<String>,
    usage: AnthropicUsage,
    stop_reason: Option<String>,
}

impl Assembler {
    pub(super) fn new(reader: ResponseReader) -> Self {
        Assembler {
            reader,
            blocks: BTreeMap::new(),
            tool_calls: 0,
            id: None,
            model: None,
            usage: AnthropicUsage::default(),
            stop_reason: None,
        }
    }

    fn start_message(&mut self, message: &MessageReply<'_>) {
        self.id.clone_from(&message.id);
        self.model.clone_from(&message.model);
        if let Some(usage) = message.usage {
            self.usage.merge(usage);
        }
    }

    fn is_structured(&self, provider_name: &str) -> bool {
        self.reader.structured_tool.as_deref() == Some(provider_name)
    }

    /// A block opens (streaming) or arrives whole; returns the events it produces.
    fn start_block(
        &mut self,
        index: usize,
        block: ReplyBlock<'_>,
    ) -> Result<Vec<StreamEvent>, LlmError> {
        let mut events = Vec::new();
        let assembled = match block {
            ReplyBlock::Text { text } => {
                let text = text.into_string();
                if !text.is_empty() {
                    events.push(StreamEvent::TextDelta(text.clone()));
                }
                Block::Text(text)
            }
            ReplyBlock::ToolUse {
                id,
                name: provider_name,
                input,
            } => {
                let input = match input {
                    // Streaming opens with `{}` and sends the real input as deltas.
                    Some(Value::Object(map)) if map.is_empty() => String::new(),
                    Some(value) => value.to_string(),
                    None => String::new(),
                };
                if id.is_empty() {
                    return Err(self.reader.malformed("a tool_use block without an id"));
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
            ReplyBlock::Thinking {
                thinking,
                signature,
            } => {
                let text = thinking.into_string();
                if !text.is_empty() {
                    events.push(StreamEvent::ThinkingDelta(text.clone()));
                }
                Block::Thinking {
                    text,
                    signature: signature.into_string(),
                }
            }
            ReplyBlock::RedactedThinking { data } => Block::Redacted(data),
            // Server-side tool blocks and future kinds carry nothing the caller can use.
            ReplyBlock::Other => return Ok(events),
        };
        self.blocks.insert(index, assembled);
        Ok(events)
    }

    fn delta(&mut self, index: usize, delta: BlockDelta<'_>) -> Result<Vec<StreamEvent>, LlmError> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Ok(Vec::new());
        };
        let event = match (delta, block) {
            (BlockDelta::TextDelta { text: piece }, Block::Text(text)) => {
                text.push_str(piece.as_str());
                StreamEvent::TextDelta(piece.into_string())
            }
            (
                BlockDelta::InputJsonDelta { partial_json },
                Block::Tool {
                    call_index, input, ..
                },
            ) => {
                input.push_str(partial_json.as_str());
                if *call_index == usize::MAX {
                    StreamEvent::TextDelta(partial_json.into_string())
                } else {
                    StreamEvent::ToolCallDelta {
                        index: *call_index,
                        id: None,
                        name: None,
                        arguments_delta: partial_json.into_string(),
                    }
                }
            }
            (BlockDelta::ThinkingDelta { thinking }, Block::Thinking { text, .. }) => {
                text.push_str(thinking.as_str());
                StreamEvent::ThinkingDelta(thinking.into_string())
            }
            (
                BlockDelta::SignatureDelta { signature: piece },
                Block::Thinking { signature, .. },
            ) => {
                signature.push_str(piece.as_str());
                return Ok(Vec::new());
            }
            // Citations and later kinds add nothing the response keeps.
            (BlockDelta::Other, _) => return Ok(Vec::new()),
            (other, _) => {
                return Err(self.reader.malformed(format!(
                    "a `{}` delta for content block {index} of another kind",
                    other.kind()
                )));
            }
        };
        Ok(vec![event])
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        let usage = self.usage.into();
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
                        Value::Object(Default::default())
                    } else {
                        serde_json::from_str(&input).map_err(|e| {
                            let start = crate::http::snippet(&input);
                            LlmError::malformed_because(
                                self.reader.context.provider.clone(),
                                format!("the structured answer is not JSON: {start}"),
                                e,
                            )
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

/// The error an `error` event (or an error-typed body) carries, by its `type`.
fn detail_error(error: ErrorDetail, context: &ErrorContext) -> LlmError {
    {
        let kind = error.kind.unwrap_or_default();
        let message = error.message.unwrap_or_else(|| kind.clone());
        let provider = context.provider.clone();
        match kind.as_str() {
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
                hint: context.key_hint.clone(),
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
}

/// Reads an Anthropic error reply: an `invalid_request_error` whose message says the prompt is
/// too long is a context overflow (Anthropic gives it no code of its own); the statuses say the
/// rest, left to [`crate::http::classify_status`].
pub(super) fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    let error = serde_json::from_str::<ErrorBody>(reply.body).ok()?.error?;
    let message = error.message?;
    let overflow = matches!(
        error.kind.as_deref(),
        Some("invalid_request_error" | "request_too_large")
    ) && crate::error::looks_like_context_overflow(&message);
    overflow.then(|| LlmError::ContextLengthExceeded {
        provider: context.provider.clone(),
        message,
    })
}

/// Anthropic's event stream: `message_start`, content blocks and their deltas, `message_delta`,
/// then `message_stop`, which completes the reply (a stream closed before it is an error).
pub(super) struct EventDecoder {
    pub(super) assembler: Assembler,
    pub(super) finished: bool,
}

impl SseReplyDecoder for EventDecoder {
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let event: MessagesEvent<'_> = crate::wire::decode(
            &self.assembler.reader.context.provider,
            "an event",
            data.as_bytes(),
        )?;
        let assembler = &mut self.assembler;
        let index = |index: Option<usize>, reader: &ResponseReader| {
            index.ok_or_else(|| reader.malformed("a content event without an index"))
        };
        match event {
            MessagesEvent::MessageStart { message } => {
                if let Some(message) = message {
                    assembler.start_message(&message);
                } else {
                    assembler.id = None;
                    assembler.model = None;
                }
            }
            MessagesEvent::ContentBlockStart {
                index: at,
                content_block,
            } => {
                let at = index(at, &assembler.reader)?;
                return match content_block {
                    Some(block) => assembler.start_block(at, block),
                    None => Ok(Vec::new()),
                };
            }
            MessagesEvent::ContentBlockDelta { index: at, delta } => {
                let at = index(at, &assembler.reader)?;
                return match delta {
                    Some(delta) => assembler.delta(at, delta),
                    None => Ok(Vec::new()),
                };
            }
            MessagesEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    assembler.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    assembler.usage.merge(usage);
                }
            }
            MessagesEvent::MessageStop => {
                let done = std::mem::replace(assembler, Assembler::new(assembler.reader.clone()));
                self.finished = true;
                return Ok(vec![StreamEvent::Done(done.finish()?)]);
            }
            MessagesEvent::Error { error } => {
                return Err(detail_error(
                    error.unwrap_or_default(),
                    &assembler.reader.context,
                ));
            }
            // `ping`, `content_block_stop` and event kinds added later need no action.
            MessagesEvent::Other => {}
        }
        Ok(Vec::new())
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        Some(Err(self
            .assembler
            .reader
            .malformed("the event stream ended before message_stop")))
    }

    fn is_complete(&self) -> bool {
        self.finished
    }
}
