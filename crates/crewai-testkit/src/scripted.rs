//! A scripted OpenAI-compatible chat-completions server on `127.0.0.1`.
//!
//! Tests queue the replies the "model" gives, point a real client at [`ScriptedServer::base_url`],
//! run the code under test, and then inspect every request body the server received. Replies are
//! answered strictly in order, one per request, whatever the request path (`/v1/chat/completions`
//! normally); a request that arrives when the queue is empty gets HTTP 400 with an OpenAI-style error
//! saying so (400, not 5xx, so clients do not retry and tests fail fast).
//!
//! # API at a glance
//!
//! - Start: [`ScriptedServer::start`] (inside a tokio runtime) or [`ScriptedServer::start_blocking`]
//!   (own thread and runtime; for `#[test]` fns that spawn a binary). The server stops when the value is
//!   dropped.
//! - Where: [`ScriptedServer::base_url`] (`http://127.0.0.1:PORT/v1`, the OpenAI `base_url`),
//!   [`ScriptedServer::address`].
//! - Script: [`ScriptedServer::push`] one [`Reply`], [`ScriptedServer::push_all`] several;
//!   shorthands [`ScriptedServer::push_text`] and [`ScriptedServer::push_tool_call`].
//! - Replies: [`Reply::text`], [`Reply::tool_call`], [`Reply::tool_calls`] (several calls in one
//!   response), [`Reply::error`], [`Reply::context_length_exceeded`], [`Reply::rate_limited`],
//!   [`Reply::raw`] (any status and body, e.g. malformed JSON), [`Reply::raw_sse`] (hand-written SSE
//!   events); modifiers [`Reply::with_usage`], [`Reply::with_cached_tokens`],
//!   [`Reply::with_reasoning_tokens`], [`Reply::with_finish_reason`], [`Reply::with_header`],
//!   [`Reply::delayed`] (answer after a pause: for deadline tests).
//! - Streaming: a request whose body has `"stream": true` gets the same reply as server-sent events
//!   (`chat.completion.chunk` objects, a usage chunk when `stream_options.include_usage` is true, then
//!   `data: [DONE]`); errors are sent as plain JSON error responses either way.
//! - Inspect: [`ScriptedServer::requests`] (every [`RecordedRequest`] in arrival order: method, path,
//!   headers, body as JSON), [`ScriptedServer::request_count`], [`ScriptedServer::remaining`] (replies
//!   not yet consumed), [`ScriptedServer::wait_for_requests`].
//!
//! Every text/tool reply reports usage: 10 prompt and 5 completion tokens unless set with
//! [`Reply::with_usage`]; the response's `model` echoes the request's. Tool-call ids are `call_1`,
//! `call_2`, ... in the order the server hands them out, unless given with [`ScriptedToolCall::with_id`].
//!
//! ```
//! use crewai_testkit::scripted::{Reply, ScriptedServer};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ScriptedServer::start().await;
//! server.push(Reply::tool_call("get_weather", json!({"city": "Paris"})));
//! server.push(Reply::text("It is sunny in Paris.").with_usage(120, 12));
//!
//! // ... point a client at server.base_url() and run it; here a bare HTTP call stands in:
//! let url = format!("{}/chat/completions", server.base_url());
//! let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "weather?"}]});
//! # let client = TestClient;
//! let first = client.post(&url, &body).await;
//! assert_eq!(first["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
//!
//! assert_eq!(server.requests()[0].body["model"], "gpt-4o");
//! assert_eq!(server.remaining(), 1);
//! # }
//! # struct TestClient;
//! # impl TestClient {
//! #     async fn post(&self, url: &str, body: &serde_json::Value) -> serde_json::Value {
//! #         use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! #         let rest = url.trim_start_matches("http://");
//! #         let (host, path) = rest.split_at(rest.find('/').unwrap());
//! #         let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
//! #         let payload = body.to_string();
//! #         let request = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}", payload.len());
//! #         stream.write_all(request.as_bytes()).await.unwrap();
//! #         let mut response = String::new();
//! #         stream.read_to_string(&mut response).await.unwrap();
//! #         let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
//! #         serde_json::from_str(body).unwrap()
//! #     }
//! # }
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::serve::{self, Running, Stopped};

/// One tool call inside a scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedToolCall {
    /// The call id; assigned by the server (`call_N`) when `None`.
    pub id: Option<String>,
    pub name: String,
    /// The `arguments` string sent to the client: JSON text, or anything else to test repair.
    pub arguments: String,
}

impl ScriptedToolCall {
    /// A call of `name` with `arguments` serialised as JSON.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ScriptedToolCall {
            id: None,
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    /// A call whose arguments text is sent verbatim (for broken-JSON tests).
    pub fn raw(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ScriptedToolCall {
            id: None,
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// Fixes the call id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// What the scripted model answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    body: ReplyBody,
    usage: ScriptedUsage,
    finish_reason: Option<String>,
    headers: Vec<(String, String)>,
    delay: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
enum ReplyBody {
    Completion {
        content: Option<String>,
        tool_calls: Vec<ScriptedToolCall>,
    },
    Error {
        status: u16,
        message: String,
        error_type: String,
        code: Option<String>,
    },
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    RawSse {
        events: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct ScriptedUsage {
    prompt: u64,
    completion: u64,
    cached: u64,
    reasoning: u64,
}

impl Default for ScriptedUsage {
    fn default() -> Self {
        ScriptedUsage {
            prompt: 10,
            completion: 5,
            cached: 0,
            reasoning: 0,
        }
    }
}

impl Reply {
    fn completion(content: Option<String>, tool_calls: Vec<ScriptedToolCall>) -> Self {
        Reply {
            body: ReplyBody::Completion {
                content,
                tool_calls,
            },
            usage: ScriptedUsage::default(),
            finish_reason: None,
            headers: Vec::new(),
            delay: None,
        }
    }

    fn from_body(body: ReplyBody) -> Self {
        Reply {
            body,
            usage: ScriptedUsage::default(),
            finish_reason: None,
            headers: Vec::new(),
            delay: None,
        }
    }

    /// A plain assistant text reply (`finish_reason: stop`).
    pub fn text(content: impl Into<String>) -> Self {
        Self::completion(Some(content.into()), Vec::new())
    }

    /// One tool call with JSON arguments (`content: null`, `finish_reason: tool_calls`).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::completion(None, vec![ScriptedToolCall::new(name, arguments)])
    }

    /// Several tool calls in one response, in this order.
    pub fn tool_calls(calls: impl IntoIterator<Item = ScriptedToolCall>) -> Self {
        Self::completion(None, calls.into_iter().collect())
    }

    /// Text and tool calls in the same assistant message.
    pub fn text_and_tool_calls(
        content: impl Into<String>,
        calls: impl IntoIterator<Item = ScriptedToolCall>,
    ) -> Self {
        Self::completion(Some(content.into()), calls.into_iter().collect())
    }

    /// An OpenAI-style error response: `{"error": {"message", "type", "param", "code"}}`.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        let error_type = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            _ => "server_error",
        };
        Self::from_body(ReplyBody::Error {
            status,
            message: message.into(),
            error_type: error_type.to_string(),
            code: None,
        })
    }

    /// Sets the error's `code` (only meaningful on [`Reply::error`]).
    pub fn with_error_code(mut self, new_code: impl Into<String>) -> Self {
        if let ReplyBody::Error { code, .. } = &mut self.body {
            *code = Some(new_code.into());
        }
        self
    }

    /// OpenAI's context-window overflow: HTTP 400, code `context_length_exceeded`.
    pub fn context_length_exceeded() -> Self {
        Self::error(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
        )
        .with_error_code("context_length_exceeded")
    }

    /// HTTP 429 with a `retry-after` header (seconds).
    pub fn rate_limited(retry_after_seconds: u64) -> Self {
        Self::error(429, "Rate limit reached for requests")
            .with_error_code("rate_limit_exceeded")
            .with_header("retry-after", retry_after_seconds.to_string())
    }

    /// Any status and body, sent as is.
    pub fn raw(status: u16, content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::from_body(ReplyBody::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// A hand-written SSE stream: each entry is the text after `data: ` of one event (add `"[DONE]"`
    /// yourself if the stream should end properly).
    pub fn raw_sse(events: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::from_body(ReplyBody::RawSse {
            events: events.into_iter().map(Into::into).collect(),
        })
    }

    /// The usage the response reports (total = prompt + completion).
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage.prompt = prompt_tokens;
        self.usage.completion = completion_tokens;
        self
    }

    /// `prompt_tokens_details.cached_tokens`.
    pub fn with_cached_tokens(mut self, cached: u64) -> Self {
        self.usage.cached = cached;
        self
    }

    /// `completion_tokens_details.reasoning_tokens`.
    pub fn with_reasoning_tokens(mut self, reasoning: u64) -> Self {
        self.usage.reasoning = reasoning;
        self
    }

    /// Overrides `finish_reason` (default `stop`, or `tool_calls` when the reply has calls).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits this long before answering (the request is recorded on arrival).
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when empty, a `Value::String` when not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header's value (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `messages` array of a chat-completions body (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The names of the offered tools (`tools[].function.name`).
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    next_call_id: u64,
    next_response_id: u64,
}

#[derive(Default)]
struct Shared {
    script: Mutex<Script>,
    arrived: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Script> {
        serve::lock(&self.script)
    }
}

/// A running scripted server; dropping it shuts the server down.
pub struct ScriptedServer {
    running: Running,
    shared: Arc<Shared>,
}

impl ScriptedServer {
    /// Starts a server on a random port of 127.0.0.1 in the current tokio runtime.
    ///
    /// Panics if no port can be bound (a broken test machine, not a test outcome).
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(answer).with_state(shared.clone());
        ScriptedServer {
            running: Running::spawn(SERVER, |listener, stopped| serve(listener, app, stopped))
                .await,
            shared,
        }
    }

    /// Starts a server on its own thread and runtime, for synchronous tests (spawning a binary).
    pub fn start_blocking() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(answer).with_state(shared.clone());
        ScriptedServer {
            running: Running::on_own_thread(SERVER, |listener, stopped| {
                serve(listener, app, stopped)
            }),
            shared,
        }
    }

    /// The socket address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.running.address()
    }

    /// The OpenAI-style base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address())
    }

    /// The server's root URL without `/v1`, `http://127.0.0.1:PORT`.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.address())
    }

    /// Queues one reply.
    pub fn push(&self, reply: Reply) -> &Self {
        self.shared.lock().replies.push_back(reply);
        self
    }

    /// Queues several replies, in order.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.shared.lock().replies.extend(replies);
        self
    }

    /// Queues a text reply.
    pub fn push_text(&self, content: impl Into<String>) -> &Self {
        self.push(Reply::text(content))
    }

    /// Queues a reply with one tool call.
    pub fn push_tool_call(&self, name: impl Into<String>, arguments: Value) -> &Self {
        self.push(Reply::tool_call(name, arguments))
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Replies still queued.
    pub fn remaining(&self) -> usize {
        self.shared.lock().replies.len()
    }

    /// Waits until at least `count` requests arrived or `timeout` passed; returns whether they did.
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.arrived.notified();
            if self.request_count() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.request_count() >= count;
            }
        }
    }
}

/// The server's name in its panic messages.
const SERVER: &str = "scripted server";

/// Answers requests on `listener` until the server is stopped.
async fn serve(listener: TcpListener, app: Router, mut stopped: Stopped) {
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await;
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body_json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body_json.clone(),
    };
    let (reply, request_number, response_id, call_ids) = {
        let mut script = shared.lock();
        script.requests.push(recorded);
        let request_number = script.requests.len();
        let reply = script.replies.pop_front();
        script.next_response_id += 1;
        let response_id = format!("chatcmpl-scripted-{}", script.next_response_id);
        let call_ids = reply
            .as_ref()
            .map(|reply| reply.assign_call_ids(&mut script.next_call_id))
            .unwrap_or_default();
        (reply, request_number, response_id, call_ids)
    };
    shared.arrived.notify_waiters();

    let Some(reply) = reply else {
        return error_response(
            400,
            &format!(
                "scripted server: no reply left for request #{request_number} to {}",
                uri.path()
            ),
            "invalid_request_error",
            Some("scripted_queue_empty"),
            &[],
        );
    };
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    let rendered = reply.render(&body_json, &response_id, call_ids);
    plain_response(
        rendered.status,
        &rendered.content_type,
        rendered.body,
        &rendered.headers,
    )
}

/// A reply as it goes on the wire (shared with the fault-injecting server).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RenderedReply {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    /// The ids of this reply's tool calls: the fixed ones, else `call_N` drawn from `next_call_id`.
    pub(crate) fn assign_call_ids(&self, next_call_id: &mut u64) -> Vec<String> {
        match &self.body {
            ReplyBody::Completion { tool_calls, .. } => tool_calls
                .iter()
                .map(|call| {
                    call.id.clone().unwrap_or_else(|| {
                        *next_call_id += 1;
                        format!("call_{next_call_id}")
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The pause before the answer, if any.
    pub(crate) fn delay(&self) -> Option<Duration> {
        self.delay
    }

    /// The status, headers and body answering `request` (the request body as JSON): a completion
    /// as JSON, or as server-sent events when the request asked to stream.
    pub(crate) fn render(
        &self,
        request: &Value,
        response_id: &str,
        call_ids: Vec<String>,
    ) -> RenderedReply {
        let model = request["model"].as_str().unwrap_or("scripted-model");
        let streaming = request["stream"].as_bool().unwrap_or(false);
        let include_usage = request["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false);
        let rendered = |status: u16, content_type: &str, body: String| RenderedReply {
            status,
            content_type: content_type.to_string(),
            headers: self.headers.clone(),
            body,
        };
        match &self.body {
            ReplyBody::Error {
                status,
                message,
                error_type,
                code,
            } => rendered(
                *status,
                "application/json",
                error_body(message, error_type, code.as_deref()),
            ),
            ReplyBody::Raw {
                status,
                content_type,
                body,
            } => rendered(*status, content_type, body.clone()),
            ReplyBody::RawSse { events } => rendered(
                200,
                "text/event-stream",
                events.iter().map(|e| format!("data: {e}\n\n")).collect(),
            ),
            ReplyBody::Completion {
                content,
                tool_calls,
            } => {
                let calls: Vec<(String, &ScriptedToolCall)> =
                    call_ids.into_iter().zip(tool_calls.iter()).collect();
                let finish_reason = self.finish_reason.clone().unwrap_or_else(|| {
                    if calls.is_empty() {
                        "stop".into()
                    } else {
                        "tool_calls".into()
                    }
                });
                let completion = Completion {
                    id: response_id,
                    model,
                    content: content.as_deref(),
                    calls: &calls,
                    finish_reason: &finish_reason,
                    usage: self.usage,
                };
                if streaming {
                    rendered(200, "text/event-stream", completion.sse(include_usage))
                } else {
                    rendered(200, "application/json", completion.json().to_string())
                }
            }
        }
    }
}

struct Completion<'a> {
    id: &'a str,
    model: &'a str,
    content: Option<&'a str>,
    calls: &'a [(String, &'a ScriptedToolCall)],
    finish_reason: &'a str,
    usage: ScriptedUsage,
}

impl Completion<'_> {
    fn usage_json(&self) -> Value {
        let u = self.usage;
        json!({
            "prompt_tokens": u.prompt,
            "completion_tokens": u.completion,
            "total_tokens": u.prompt + u.completion,
            "prompt_tokens_details": {"cached_tokens": u.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        })
    }

    fn json(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content, "refusal": null, "annotations": []});
        if !self.calls.is_empty() {
            message["tool_calls"] = Value::Array(
                self.calls
                    .iter()
                    .map(|(id, call)| json!({"id": id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}))
                    .collect(),
            );
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": 1_700_000_000u64,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": self.finish_reason}],
            "usage": self.usage_json(),
            "service_tier": "default",
            "system_fingerprint": null
        })
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000u64,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]
        })
    }

    /// The reply as OpenAI streams it: role first, text in small pieces, each tool call's name then its
    /// arguments in two pieces, the finish reason, the usage chunk when asked for, `[DONE]`.
    fn sse(&self, include_usage: bool) -> String {
        let mut chunks = vec![self.chunk(json!({"role": "assistant", "content": ""}), None)];
        if let Some(text) = self.content {
            for piece in split_for_streaming(text) {
                chunks.push(self.chunk(json!({"content": piece}), None));
            }
        }
        for (index, (id, call)) in self.calls.iter().enumerate() {
            chunks.push(self.chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
                None,
            ));
            let middle = call
                .arguments
                .char_indices()
                .nth(call.arguments.chars().count() / 2)
                .map(|(i, _)| i)
                .unwrap_or(0);
            let (head, tail) = call.arguments.split_at(middle);
            for part in [head, tail].into_iter().filter(|p| !p.is_empty()) {
                chunks.push(self.chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                    None,
                ));
            }
        }
        chunks.push(self.chunk(json!({}), Some(self.finish_reason)));
        if include_usage {
            chunks.push(json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000u64,
                "model": self.model,
                "choices": [],
                "usage": self.usage_json()
            }));
        }
        let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        out.push_str("data: [DONE]\n\n");
        out
    }
}

/// Splits text into pieces of about eight characters, on char boundaries, so streams have several deltas.
fn split_for_streaming(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(8).map(|c| c.iter().collect()).collect()
}

fn error_response(
    status: u16,
    message: &str,
    error_type: &str,
    code: Option<&str>,
    headers: &[(String, String)],
) -> Response {
    plain_response(
        status,
        "application/json",
        error_body(message, error_type, code),
        headers,
    )
}

/// OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`.
fn error_body(message: &str, error_type: &str, code: Option<&str>) -> String {
    json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
        .to_string()
}

fn plain_response(
    status: u16,
    content_type: &str,
    body: String,
    headers: &[(String, String)],
) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let response_headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response_headers.insert(axum::http::header::CONTENT_TYPE, value);
    }
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response_headers.insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(server: &ScriptedServer, body: Value) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(server.address())
            .await
            .unwrap();
        let payload = body.to_string();
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            server.address(),
            payload.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status: u16 = response[9..12].parse().unwrap();
        let split = response.find("\r\n\r\n").unwrap();
        (status, response[split + 4..].to_string())
    }

    #[tokio::test]
    async fn answers_in_order_and_records_requests() {
        let server = ScriptedServer::start().await;
        server.push(Reply::tool_calls([
            ScriptedToolCall::new("a", json!({"x": 1})),
            ScriptedToolCall::new("b", json!({})),
        ]));
        server.push(Reply::text("done").with_usage(7, 3));

        let (status, first) = post(&server, json!({"model": "m1", "messages": []})).await;
        assert_eq!(status, 200);
        let first: Value = serde_json::from_str(&first).unwrap();
        let calls = &first["choices"][0]["message"]["tool_calls"];
        assert_eq!(calls[0]["id"], "call_1");
        assert_eq!(calls[1]["function"]["name"], "b");
        assert_eq!(calls[0]["function"]["arguments"], "{\"x\":1}");
        assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(first["model"], "m1");

        let (_, second) = post(
            &server,
            json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        let second: Value = serde_json::from_str(&second).unwrap();
        assert_eq!(second["choices"][0]["message"]["content"], "done");
        assert_eq!(second["usage"]["total_tokens"], 10);

        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1].messages()[0]["content"], "hi");
        assert_eq!(requests[0].path, "/v1/chat/completions");
    }

    #[tokio::test]
    async fn empty_queue_is_a_non_retryable_error() {
        let server = ScriptedServer::start().await;
        let (status, body) = post(&server, json!({"model": "m"})).await;
        assert_eq!(status, 400);
        assert!(body.contains("no reply left for request #1"), "{body}");
    }

    #[tokio::test]
    async fn errors_carry_openai_shape() {
        let server = ScriptedServer::start().await;
        server.push(Reply::context_length_exceeded());
        let (status, body) = post(&server, json!({"model": "m"})).await;
        assert_eq!(status, 400);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], "context_length_exceeded");
    }

    #[tokio::test]
    async fn streams_when_asked() {
        let server = ScriptedServer::start().await;
        server.push(Reply::text("hello streaming world"));
        let (_, body) = post(
            &server,
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}}),
        )
        .await;
        let events: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        assert_eq!(events.last(), Some(&"[DONE]"));
        let text: String = events
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(text, "hello streaming world");
        assert!(events.iter().any(|e| e.contains("\"usage\"")));
    }

    #[test]
    fn blocking_server_serves_from_its_own_thread() {
        let server = ScriptedServer::start_blocking();
        server.push_text("hi");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (status, _) = runtime.block_on(post(&server, json!({"model": "m"})));
        assert_eq!(status, 200);
        assert_eq!(server.remaining(), 0);
    }
}
