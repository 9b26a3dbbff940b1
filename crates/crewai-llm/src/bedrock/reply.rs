//! Reading what Bedrock sends back: a Converse reply whole, a ConverseStream reply as the
//! binary event-stream frames it arrives in (`application/vnd.amazon.eventstream`, decoded by
//! the AWS SDK's own frame decoder, which checks each frame's CRCs), and error replies.

use std::collections::BTreeMap;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message as Frame;
use bytes::{Buf, BytesMut};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::PROVIDER;
use crate::adapter_support::{self, PieceStream, ReplyDecoder, ToolNameMap};
use crate::error::LlmError;
use crate::http::{BodyStream, ErrorContext, ErrorReply, classify_status, snippet};
use crate::types::{LlmResponse, StreamEvent, ToolCall, Usage};
use crate::wire::Malformed;
use crate::wire::bedrock::{
    BlockDelta, BlockStart, ConverseReply, ErrorBody, MessageStop, StreamMetadata, error_type,
    finish_reason,
};

fn malformed(message: impl Into<String>) -> LlmError {
    Malformed::new(message).into_error(PROVIDER)
}

/// Reads Bedrock's answers to one request back into the neutral types.
#[derive(Debug, Clone)]
pub(super) struct ResponseReader {
    pub(super) names: ToolNameMap,
    /// The response-format tool's name as sent, if the request asked for structured output.
    pub(super) structured: Option<String>,
}

impl ResponseReader {
    /// A complete Converse reply, from its bytes.
    pub(super) fn read_reply(self, raw: &[u8]) -> Result<LlmResponse, LlmError> {
        let reply: ConverseReply = crate::wire::decode(PROVIDER, "the reply", raw)?;
        let stop_reason = reply.stop_reason.clone();
        let usage = reply.usage;
        let blocks = reply.into_blocks().map_err(|e| {
            malformed(format!(
                "{}: {}",
                e.0,
                snippet(&String::from_utf8_lossy(raw))
            ))
        })?;
        let mut assembler = Assembler::new(self);
        for (index, block) in blocks.into_iter().enumerate() {
            if let Some(text) = block.text {
                assembler.add_text(index, &text);
            } else if let Some(call) = block.tool_use {
                let name = call
                    .name
                    .ok_or_else(|| malformed("a toolUse block has no name"))?;
                assembler.start_tool(index, call.tool_use_id, &name);
                let input = call
                    .input
                    .unwrap_or_else(|| Value::Object(Default::default()));
                assembler.add_tool_input(index, &input.to_string())?;
            }
        }
        assembler.stop_reason = stop_reason;
        assembler.usage = usage.map(Usage::from);
        assembler.finish()
    }
}

/// One content block being assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    /// A tool call; `call_index` is `None` for the response-format tool, whose input is the
    /// answer's text.
    Tool {
        call_index: Option<usize>,
        id: String,
        name: String,
        input: String,
    },
}

/// Builds a response from content blocks, whole or streamed piece by piece.
#[derive(Debug)]
struct Assembler {
    reader: ResponseReader,
    blocks: BTreeMap<usize, Block>,
    tool_calls: usize,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

impl Assembler {
    fn new(reader: ResponseReader) -> Self {
        Assembler {
            reader,
            blocks: BTreeMap::new(),
            tool_calls: 0,
            stop_reason: None,
            usage: None,
        }
    }

    /// Text for block `index` (Converse opens a text block with its first piece).
    fn add_text(&mut self, index: usize, piece: &str) -> Vec<StreamEvent> {
        let block = self
            .blocks
            .entry(index)
            .or_insert_with(|| Block::Text(String::new()));
        match block {
            Block::Text(text) => text.push_str(piece),
            // A text piece for a tool block: Converse sends none; the answer stays the tool's.
            Block::Tool { .. } => return Vec::new(),
        }
        if piece.is_empty() {
            Vec::new()
        } else {
            vec![StreamEvent::TextDelta(piece.to_string())]
        }
    }

    /// A tool call opens at block `index` under the name the provider was sent.
    fn start_tool(&mut self, index: usize, id: String, provider_name: &str) -> Vec<StreamEvent> {
        if self.reader.structured.as_deref() == Some(provider_name) {
            self.blocks.insert(
                index,
                Block::Tool {
                    call_index: None,
                    id,
                    name: provider_name.to_string(),
                    input: String::new(),
                },
            );
            return Vec::new();
        }
        let call_index = self.tool_calls;
        self.tool_calls += 1;
        let name = self.reader.names.original_name(provider_name);
        let event = StreamEvent::ToolCallDelta {
            index: call_index,
            id: Some(id.clone()),
            name: Some(name.clone()),
            arguments_delta: String::new(),
        };
        self.blocks.insert(
            index,
            Block::Tool {
                call_index: Some(call_index),
                id,
                name,
                input: String::new(),
            },
        );
        vec![event]
    }

    /// More of the input JSON (as text) of the tool call at block `index`.
    fn add_tool_input(&mut self, index: usize, piece: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let Some(Block::Tool {
            call_index, input, ..
        }) = self.blocks.get_mut(&index)
        else {
            return Err(malformed(format!(
                "tool input for content block {index}, which is not a tool call"
            )));
        };
        input.push_str(piece);
        if piece.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![match call_index {
            Some(index) => StreamEvent::ToolCallDelta {
                index: *index,
                id: None,
                name: None,
                arguments_delta: piece.to_string(),
            },
            None => StreamEvent::TextDelta(piece.to_string()),
        }])
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        let mut text = String::new();
        let mut structured = None;
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(piece) => text.push_str(&piece),
                Block::Tool {
                    call_index: None,
                    input,
                    ..
                } => structured = Some(compact_json(&input)?),
                Block::Tool {
                    id, name, input, ..
                } => tool_calls.push(ToolCall::from_raw_arguments(id, name, &input)),
            }
        }
        let content = structured.or(Some(text).filter(|t| !t.is_empty()));
        Ok(LlmResponse {
            content,
            finish_reason: finish_reason(self.stop_reason.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage.unwrap_or(Usage {
                successful_requests: 1,
                ..Default::default()
            }),
            response_id: None,
            model: None,
            thinking: Vec::new(),
        })
    }
}

/// The structured answer as compact JSON text, whether it came whole or in pieces.
fn compact_json(input: &str) -> Result<String, LlmError> {
    if input.trim().is_empty() {
        return Ok("{}".to_string());
    }
    let value: Value = serde_json::from_str(input).map_err(|e| {
        LlmError::malformed_because(
            PROVIDER,
            format!("the structured answer is not JSON: {}", snippet(input)),
            e,
        )
    })?;
    Ok(value.to_string())
}

/// Reads a Bedrock error reply by its type (the `x-amzn-errortype` header, or the body's
/// `__type`): a validation error that says the model takes no tools, or that the input is too
/// long. The statuses say the rest, left to [`crate::http::classify_status`].
pub(super) fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    if !(400..500).contains(&reply.status) || matches!(reply.status, 401 | 403 | 429) {
        return None;
    }
    let body: ErrorBody = serde_json::from_str(reply.body).unwrap_or_default();
    let kind = error_type(reply.headers, &body);
    if kind.as_deref().is_some_and(|k| k != "ValidationException") {
        return None;
    }
    let message = body.message?;
    let provider = context.provider.clone();
    if adapter_support::says_tools_unsupported(&message) {
        return Some(LlmError::ToolsUnsupported {
            provider,
            model: context.model.clone(),
            message,
        });
    }
    let overflow = crate::error::looks_like_context_overflow(&message);
    overflow.then_some(LlmError::ContextLengthExceeded { provider, message })
}

/// The frames of an event-stream body as they arrive. A body that ends inside a frame is an
/// error; so is a frame whose lengths or checksums are wrong.
pub(super) fn frames(body: BodyStream) -> PieceStream<Frame> {
    struct State {
        body: BodyStream,
        buffer: BytesMut,
        decoder: MessageFrameDecoder,
        /// Bytes of a frame not yet complete have arrived.
        partial: bool,
    }
    let state = State {
        body,
        buffer: BytesMut::new(),
        decoder: MessageFrameDecoder::new(),
        partial: false,
    };
    Box::pin(futures::stream::try_unfold(state, |mut state| async move {
        loop {
            let decoded = state.decoder.decode_frame(&mut state.buffer).map_err(|e| {
                LlmError::malformed_because(PROVIDER, "a bad event-stream frame", e)
            })?;
            if let DecodedFrame::Complete(frame) = decoded {
                state.partial = state.buffer.has_remaining();
                return Ok(Some((frame, state)));
            }
            match state.body.next().await {
                Some(chunk) => {
                    state.buffer.extend_from_slice(&chunk?);
                    state.partial = true;
                }
                None if state.partial => {
                    return Err(malformed("the event stream ended inside a frame"));
                }
                None => return Ok(None),
            }
        }
    }))
}

/// A string header of a frame (`:event-type`, `:message-type`, `:exception-type`).
fn frame_header<'f>(frame: &'f Frame, name: &str) -> Option<&'f str> {
    frame
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|v| v.as_str())
}

/// The HTTP status AWS gives each exception a stream can end with, so that a throttled or
/// failed stream is the same typed error as a throttled or failed call.
fn exception_status(kind: &str) -> u16 {
    match kind {
        "throttlingException" => 429,
        "validationException" => 400,
        "accessDeniedException" => 403,
        "resourceNotFoundException" => 404,
        "modelTimeoutException" => 408,
        "modelStreamErrorException" => 424,
        "serviceUnavailableException" => 503,
        _ => 500,
    }
}

/// ConverseStream's events: text and tool-input deltas, `messageStop` with the stop reason,
/// then `metadata` with the usage, which completes the reply. A stream closed before
/// `messageStop` is an error; one closed after it, before `metadata`, ends without usage.
pub(super) struct StreamDecoder {
    assembler: Option<Assembler>,
    context: ErrorContext,
    stopped: bool,
}

impl StreamDecoder {
    pub(super) fn new(reader: ResponseReader, context: ErrorContext) -> Self {
        StreamDecoder {
            assembler: Some(Assembler::new(reader)),
            context,
            stopped: false,
        }
    }

    fn assembler(&mut self) -> Result<&mut Assembler, LlmError> {
        self.assembler
            .as_mut()
            .ok_or_else(|| malformed("an event after the stream's metadata"))
    }

    fn done(&mut self) -> Result<Vec<StreamEvent>, LlmError> {
        match self.assembler.take() {
            Some(assembler) => Ok(vec![StreamEvent::Done(assembler.finish()?)]),
            None => Ok(Vec::new()),
        }
    }

    /// The typed error of an `exception` (or `error`) frame.
    fn exception(&self, frame: &Frame) -> LlmError {
        let kind = frame_header(frame, ":exception-type")
            .or_else(|| frame_header(frame, ":error-code"))
            .unwrap_or("unknown");
        let body = String::from_utf8_lossy(frame.payload());
        let body = match frame_header(frame, ":error-message") {
            Some(message) if body.trim().is_empty() => {
                serde_json::json!({ "message": message }).to_string()
            }
            _ => body.into_owned(),
        };
        let status = exception_status(kind);
        if kind == "modelStreamErrorException" {
            // AWS's advice for it is to retry: a 424 that is the model's failure, not the request's.
            return LlmError::Server {
                provider: PROVIDER.into(),
                status,
                message: crate::http::provider_error_message(&body),
                retry_after: None,
            };
        }
        // The reader keys on the REST protocol's spelling of the type.
        let mut type_name = kind.to_string();
        if let Some(first) = type_name.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let headers = vec![("x-amzn-errortype".to_string(), type_name)];
        let reply = ErrorReply {
            status,
            retry_after: None,
            headers: &headers,
            body: &body,
        };
        read_error(&self.context, &reply)
            .unwrap_or_else(|| classify_status(&self.context, status, None, &body))
    }
}

fn payload<T: DeserializeOwned>(frame: &Frame, event: &str) -> Result<T, LlmError> {
    crate::wire::decode(PROVIDER, &format!("a `{event}` event"), frame.payload())
}

impl ReplyDecoder<Frame> for StreamDecoder {
    fn on_piece(&mut self, frame: Frame) -> Result<Vec<StreamEvent>, LlmError> {
        match frame_header(&frame, ":message-type") {
            Some("event") => {}
            Some("exception" | "error") => return Err(self.exception(&frame)),
            other => {
                return Err(malformed(format!(
                    "an event-stream frame of message type {other:?}"
                )));
            }
        }
        let event = frame_header(&frame, ":event-type").unwrap_or_default();
        match event {
            "contentBlockStart" => {
                let start: BlockStart = payload(&frame, event)?;
                let tool = start.start.and_then(|s| s.tool_use);
                Ok(match tool {
                    Some(tool) => self.assembler()?.start_tool(
                        start.content_block_index,
                        tool.tool_use_id,
                        &tool.name,
                    ),
                    None => Vec::new(),
                })
            }
            "contentBlockDelta" => {
                let delta: BlockDelta = payload(&frame, event)?;
                let index = delta.content_block_index;
                let assembler = self.assembler()?;
                match delta.delta {
                    Some(kind) => match (kind.text, kind.tool_use) {
                        (Some(text), _) => Ok(assembler.add_text(index, &text)),
                        (None, Some(tool)) => assembler.add_tool_input(index, &tool.input),
                        // Reasoning and citation deltas: nothing the response keeps.
                        (None, None) => Ok(Vec::new()),
                    },
                    None => Ok(Vec::new()),
                }
            }
            "messageStop" => {
                let stop: MessageStop = payload(&frame, event)?;
                self.assembler()?.stop_reason = stop.stop_reason;
                self.stopped = true;
                Ok(Vec::new())
            }
            "metadata" => {
                let metadata: StreamMetadata = payload(&frame, event)?;
                self.assembler()?.usage = metadata.usage.map(Usage::from);
                if self.stopped {
                    self.done()
                } else {
                    Err(malformed("the stream's metadata came before messageStop"))
                }
            }
            // `messageStart`, `contentBlockStop` and event kinds added later need no action.
            _ => Ok(Vec::new()),
        }
    }

    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        if !self.stopped {
            return Some(Err(malformed("the event stream ended before messageStop")));
        }
        match self.done() {
            Ok(mut events) => events.pop().map(Ok),
            Err(error) => Some(Err(error)),
        }
    }

    fn is_complete(&self) -> bool {
        self.assembler.is_none()
    }
}
