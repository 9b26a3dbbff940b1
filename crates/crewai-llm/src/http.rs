//! The HTTP plumbing every provider client shares.
//!
//! - [`HttpClient`]: the HTTP side of one model client, always with a connect timeout and a
//!   total timeout, and a pluggable [`Transport`] so a run can be recorded to or replayed from a
//!   cassette (see [`crate::cassette`]) without the provider code knowing.
//! - [`NetworkTransport`]: the default transport: one keep-alive pool (HTTP/1.1, HTTP/2 over TLS)
//!   per connect timeout, over TCP that acknowledges replies at once (why: `network.rs`), the
//!   system roots read at the first TLS handshake, proxied requests through reqwest.
//! - [`classify_status`]: an HTTP error status plus body becomes the right [`LlmError`]
//!   (authentication, rate limit with `Retry-After`, context length, ...).
//! - [`ErrorReader`]: a provider adapter's reading of its own error bodies (codes, error types),
//!   tried before [`classify_status`]; see [`HttpClient::with_error_reader`].
//! - [`parse_retry_after`]: `retry-after-ms`, `Retry-After: <seconds>` and `Retry-After: <HTTP date>`.
//! - [`HttpClient::post_sse`]: a server-sent-event reader over the response body.
//!
//! A provider module uses it like this:
//!
//! ```no_run
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::http::{ErrorContext, HttpClient};
//! use crewai_llm::LlmConfig;
//! let config = LlmConfig::new("anthropic/claude-sonnet-4-5");
//! let http = HttpClient::new(ErrorContext::new("anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"), &config)?;
//! let headers = vec![("x-api-key".to_string(), "sk-...".to_string())];
//! let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": []});
//! let reply: serde_json::Value = http.post_json("https://api.anthropic.com/v1/messages", &headers, &body).await?;
//! # let _ = reply; Ok(()) }
//! ```

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::Value;

use crate::config::LlmConfig;
use crate::error::{LlmError, looks_like_context_overflow};

mod network;

/// The longest `Retry-After` we honour; a provider asking for more is treated as asking for this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What an error needs to name: the provider, the model and the setting that holds the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorContext {
    pub provider: String,
    pub model: String,
    /// Where the key comes from, shown on authentication errors (`OPENAI_API_KEY`).
    pub key_hint: String,
}

impl ErrorContext {
    pub fn new(
        provider: impl Into<String>,
        model: impl Into<String>,
        key_hint: impl Into<String>,
    ) -> Self {
        ErrorContext {
            provider: provider.into(),
            model: model.into(),
            key_hint: key_hint.into(),
        }
    }
}

/// A byte stream of a response body.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, LlmError>> + Send>>;

/// A response body: complete, or still arriving.
pub enum ResponseBody {
    Complete(Bytes),
    Streaming(BodyStream),
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseBody::Complete(bytes) => write!(f, "Complete({} bytes)", bytes.len()),
            ResponseBody::Streaming(_) => f.write_str("Streaming"),
        }
    }
}

impl ResponseBody {
    /// Reads the whole body.
    pub async fn into_bytes(self) -> Result<Bytes, LlmError> {
        match self {
            ResponseBody::Complete(bytes) => Ok(bytes),
            ResponseBody::Streaming(mut stream) => {
                let mut all = Vec::new();
                while let Some(chunk) = stream.next().await {
                    all.extend_from_slice(&chunk?);
                }
                Ok(Bytes::from(all))
            }
        }
    }

    /// The body as a stream of chunks (one chunk when it is complete).
    pub fn into_stream(self) -> BodyStream {
        match self {
            ResponseBody::Complete(bytes) => {
                Box::pin(futures::stream::once(async move { Ok(bytes) }))
            }
            ResponseBody::Streaming(stream) => stream,
        }
    }
}

/// One HTTP request, as a [`Transport`] sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The caller wants the body as it arrives (server-sent events).
    pub streaming: bool,
}

/// One HTTP response, as a [`Transport`] returns it.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: ResponseBody,
}

impl HttpResponse {
    /// The first value of a header (names compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Moves requests to a server and responses back. The default is [`NetworkTransport`]; the
/// cassette module adds a recorder and a replayer.
#[async_trait]
pub trait Transport: Send + Sync {
    async fn send(
        &self,
        request: HttpRequest,
        context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError>;
}

/// The real network, with the client's timeouts: the default [`Transport`].
///
/// All transports with the same connect timeout share one connection pool (HTTP/1.1 keep-alive
/// and HTTP/2 over TLS with ALPN), so consecutive calls of every model client reuse warm
/// connections. The connections are hyper's over TCP sockets that acknowledge received data
/// at once (see `network::QuickAckStream` for why: a kept-alive connection to a server that
/// writes headers and body separately otherwise stalls 40 ms per reply on Linux). The system
/// root certificates are read at the first TLS handshake, not before, so plain-HTTP runs never
/// pay for them. Requests that the environment's `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` (minus
/// `NO_PROXY`) route through a proxy are sent by reqwest instead, which speaks the proxy side.
/// Redirects are not followed: model APIs answer a POST directly, and a redirect (which would
/// turn the POST into a GET under the common 301/302 handling) surfaces as its status.
#[derive(Clone)]
pub struct NetworkTransport {
    network: Arc<network::SharedNetwork>,
    request_timeout: Duration,
}

impl fmt::Debug for NetworkTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkTransport")
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// The `User-Agent` of every request that does not set its own.
const USER_AGENT: &str = concat!("crewai-rs/", env!("CARGO_PKG_VERSION"));

impl NetworkTransport {
    /// A transport whose requests fail after `connect_timeout` without a TCP connection and
    /// after `request_timeout` in total (TLS handshake and body included).
    pub fn new(connect_timeout: Duration, request_timeout: Duration) -> Result<Self, LlmError> {
        Ok(NetworkTransport {
            network: network::SharedNetwork::shared(connect_timeout)?,
            request_timeout,
        })
    }

    fn timeout(&self, context: &ErrorContext) -> LlmError {
        timed_out(context, self.request_timeout)
    }

    /// Through the environment's proxy, by reqwest.
    async fn send_proxied(
        &self,
        request: HttpRequest,
        method: http::Method,
        context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError> {
        let timeout = self.request_timeout;
        let map_error =
            move |e: reqwest::Error, context: &ErrorContext| map_reqwest_error(e, context, timeout);
        let mut builder = self
            .network
            .proxied_client()?
            .request(method, &request.url)
            .timeout(timeout)
            .body(request.body);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let response = builder.send().await.map_err(|e| map_error(e, context))?;
        let status = response.status().as_u16();
        let headers = lowercase_headers(response.headers());
        let body = if request.streaming && status < 400 {
            let context = context.clone();
            ResponseBody::Streaming(Box::pin(
                response
                    .bytes_stream()
                    .map(move |chunk| chunk.map_err(|e| map_error(e, &context))),
            ))
        } else {
            ResponseBody::Complete(response.bytes().await.map_err(|e| map_error(e, context))?)
        };
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

fn lowercase_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Turns a reqwest failure into the matching [`LlmError`].
pub fn map_reqwest_error(
    error: reqwest::Error,
    context: &ErrorContext,
    timeout: Duration,
) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout {
            provider: context.provider.clone(),
            after: timeout,
            source: Some(error.into()),
        }
    } else if error.is_decode() || error.is_body() {
        body_error(error, context)
    } else {
        LlmError::connection(context.provider.clone(), error)
    }
}

/// The client's own deadline passed (no library error behind it).
fn timed_out(context: &ErrorContext, after: Duration) -> LlmError {
    LlmError::Timeout {
        provider: context.provider.clone(),
        after,
        source: None,
    }
}

/// A failure while a response body was arriving (reqwest's "body" errors, hyper's).
fn body_error(error: impl Into<crate::error::BoxError>, context: &ErrorContext) -> LlmError {
    LlmError::malformed_because(
        context.provider.clone(),
        "reading the response body failed",
        error,
    )
}

#[async_trait]
impl Transport for NetworkTransport {
    async fn send(
        &self,
        request: HttpRequest,
        context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let method = http::Method::from_bytes(request.method.as_bytes()).map_err(|e| {
            LlmError::invalid_config(format!("invalid HTTP method '{}'", request.method), e)
        })?;
        let uri: http::Uri = request
            .url
            .parse()
            .map_err(|e| LlmError::invalid_config(format!("invalid URL '{}'", request.url), e))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(LlmError::Config(format!(
                "invalid URL '{}': expected http:// or https:// and a host",
                request.url
            )));
        }
        if self.network.is_proxied(&uri) {
            return self.send_proxied(request, method, context).await;
        }
        let mut builder = http::Request::builder().method(method).uri(uri);
        let has = |name: &str| {
            request
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        // The two headers reqwest adds by default, so servers see the same request either way.
        if !has("user-agent") {
            builder = builder.header(http::header::USER_AGENT, USER_AGENT);
        }
        if !has("accept") {
            builder = builder.header(http::header::ACCEPT, "*/*");
        }
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let outgoing = builder
            .body(http_body_util::Full::new(request.body))
            .map_err(|e| LlmError::invalid_config("invalid request header", e))?;
        let response = tokio::time::timeout_at(deadline, self.network.direct.request(outgoing))
            .await
            .map_err(|_| self.timeout(context))?
            .map_err(|e| LlmError::connection(context.provider.clone(), e))?;
        let status = response.status().as_u16();
        let headers = lowercase_headers(response.headers());
        let incoming = response.into_body();
        let body = if request.streaming && status < 400 {
            ResponseBody::Streaming(body_stream(
                incoming,
                deadline,
                self.request_timeout,
                context.clone(),
            ))
        } else {
            use http_body_util::BodyExt;
            let collected = tokio::time::timeout_at(deadline, incoming.collect())
                .await
                .map_err(|_| self.timeout(context))?
                .map_err(|e| body_error(e, context))?;
            ResponseBody::Complete(collected.to_bytes())
        };
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// The data frames of a body as they arrive, ending with `timeout` once `deadline` passes.
fn body_stream(
    body: hyper::body::Incoming,
    deadline: tokio::time::Instant,
    request_timeout: Duration,
    context: ErrorContext,
) -> BodyStream {
    use http_body_util::BodyExt;
    Box::pin(futures::stream::try_unfold(body, move |mut body| {
        let context = context.clone();
        async move {
            loop {
                let frame = tokio::time::timeout_at(deadline, body.frame())
                    .await
                    .map_err(|_| timed_out(&context, request_timeout))?;
                match frame {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(body_error(e, &context)),
                    // Trailers carry no body bytes.
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some((data, body)));
                        }
                    }
                }
            }
        }
    }))
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (empty when the server sent none).
    pub event: String,
    pub data: String,
}

/// A stream of server-sent events.
pub type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, LlmError>> + Send>>;

/// An error reply as the server sent it, for a provider adapter to read (see [`ErrorReader`]).
/// Credentials the request carried are already redacted from `body`.
#[derive(Debug, Clone, Copy)]
pub struct ErrorReply<'a> {
    pub status: u16,
    /// The wait the reply's headers asked for ([`parse_retry_after`]).
    pub retry_after: Option<Duration>,
    /// Header names in lower case.
    pub headers: &'a [(String, String)],
    pub body: &'a str,
}

/// A provider's reading of its own error bodies: the typed error its codes stand for (a tool
/// refusal, a context overflow, a content filter, ...), or `None` to leave the reply to the
/// status-based [`classify_status`].
pub type ErrorReader = fn(&ErrorContext, &ErrorReply<'_>) -> Option<LlmError>;

/// The HTTP side of one model client: transport, timeouts and error context.
#[derive(Clone)]
pub struct HttpClient {
    transport: Arc<dyn Transport>,
    context: ErrorContext,
    error_reader: Option<ErrorReader>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client over the network with the timeouts of `config`.
    pub fn new(context: ErrorContext, config: &LlmConfig) -> Result<Self, LlmError> {
        let transport = NetworkTransport::new(config.connect_timeout(), config.request_timeout())?;
        Ok(HttpClient {
            transport: Arc::new(transport),
            context,
            error_reader: None,
        })
    }

    /// A client over the given transport (a cassette recorder or replayer, or your own).
    pub fn with_transport(context: ErrorContext, transport: Arc<dyn Transport>) -> Self {
        HttpClient {
            transport,
            context,
            error_reader: None,
        }
    }

    /// Reads error replies with the provider's own `reader` first (the generic
    /// [`classify_status`] takes what it leaves).
    pub fn with_error_reader(mut self, reader: ErrorReader) -> Self {
        self.error_reader = Some(reader);
        self
    }

    /// Replaces the transport, keeping the error context.
    pub fn set_transport(&mut self, transport: Arc<dyn Transport>) {
        self.transport = transport;
    }

    /// The transport in use (wrap it to record).
    pub fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    pub fn context(&self) -> &ErrorContext {
        &self.context
    }

    /// POSTs a JSON body and parses the JSON reply; an error status becomes its [`LlmError`].
    pub async fn post_json<B: Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &B,
    ) -> Result<Value, LlmError> {
        let bytes = self.post_bytes(url, headers, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::malformed_because(
                self.context.provider.clone(),
                format!(
                    "the reply is not JSON: {}",
                    snippet(&String::from_utf8_lossy(&bytes))
                ),
                e,
            )
        })
    }

    /// POSTs a JSON body and returns the whole reply body, for the caller to decode into its
    /// provider's typed reply; an error status becomes its [`LlmError`].
    pub async fn post_bytes<B: Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &B,
    ) -> Result<Bytes, LlmError> {
        let response = self.send(url, headers, body, false).await?;
        response.body.into_bytes().await
    }

    /// POSTs a JSON body and reads the reply as server-sent events.
    pub async fn post_sse<B: Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &B,
    ) -> Result<SseStream, LlmError> {
        let mut headers = headers.to_vec();
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
        {
            headers.push(("accept".into(), "text/event-stream".into()));
        }
        let response = self.send(url, &headers, body, true).await?;
        Ok(sse_events(
            response.body.into_stream(),
            self.context.provider.clone(),
        ))
    }

    /// Sends a JSON POST and returns the response if its status is a success.
    pub async fn send<B: Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &B,
        streaming: bool,
    ) -> Result<HttpResponse, LlmError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| LlmError::invalid_config("the request body does not serialise", e))?;
        self.send_bytes(url, headers, Bytes::from(body), streaming)
            .await
    }

    /// Sends a POST of JSON already encoded (a signed body must go out as the bytes that were
    /// signed) and returns the response if its status is a success.
    pub async fn send_bytes(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: Bytes,
        streaming: bool,
    ) -> Result<HttpResponse, LlmError> {
        let mut all_headers = vec![("content-type".to_string(), "application/json".to_string())];
        all_headers.extend(
            headers
                .iter()
                .filter(|(n, _)| !n.eq_ignore_ascii_case("content-type"))
                .cloned(),
        );
        let request = HttpRequest {
            method: "POST".into(),
            url: url.to_string(),
            headers: all_headers,
            body,
            streaming,
        };
        let response = self.transport.send(request, &self.context).await?;
        if response.status >= 400 {
            let retry_after = parse_retry_after(&response.headers);
            let status = response.status;
            let reply_headers = response.headers;
            let body = response.body.into_bytes().await.unwrap_or_default();
            // Providers repeat a rejected key in the error; the message must not carry it on.
            let body = crate::error::redact_credentials(
                &String::from_utf8_lossy(&body),
                &crate::error::credentials_in(headers),
            );
            let reply = ErrorReply {
                status,
                retry_after,
                headers: &reply_headers,
                body: &body,
            };
            let error = self
                .error_reader
                .and_then(|read| read(&self.context, &reply))
                .unwrap_or_else(|| classify_status(&self.context, status, retry_after, &body));
            return Err(error);
        }
        Ok(response)
    }
}

/// Parses a body stream as server-sent events (blank-line separated `event:`/`data:` fields).
pub fn sse_events(body: BodyStream, provider: String) -> SseStream {
    Box::pin(body.eventsource().map(move |item| match item {
        Ok(event) => Ok(SseEvent {
            event: event.event,
            data: event.data,
        }),
        Err(eventsource_stream::EventStreamError::Transport(error)) => Err(error),
        Err(other) => Err(LlmError::malformed_because(
            provider.clone(),
            "bad event stream",
            other,
        )),
    }))
}

/// The wait a response asked for: `retry-after-ms`, then `Retry-After` as seconds or as an HTTP
/// date; capped at [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(headers: &[(String, String)]) -> Option<Duration> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    let wait = if let Some(ms) = find("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Duration::try_from_secs_f64(ms / 1000.0).ok()?
    } else {
        let value = find("retry-after")?;
        if let Ok(seconds) = value.parse::<f64>() {
            Duration::try_from_secs_f64(seconds).ok()?
        } else {
            let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
            delta.to_std().unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The provider's own error message from an error body (OpenAI, Anthropic, Gemini and Ollama
/// shapes), or the body itself, shortened.
pub fn provider_error_message(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return snippet(body);
    };
    let error = json.get("error").unwrap_or(&json);
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .or_else(|| json.get("message").and_then(Value::as_str))
        .or_else(|| json.get("detail").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| snippet(body))
}

fn provider_error_code(body: &str) -> Option<String> {
    let json = serde_json::from_str::<Value>(body).ok()?;
    let error = json.get("error")?;
    ["code", "type", "status"]
        .iter()
        .find_map(|key| error.get(*key).and_then(Value::as_str).map(str::to_string))
}

/// Text cut to a readable length for error messages.
pub fn snippet(text: &str) -> String {
    const LIMIT: usize = 500;
    let text = text.trim();
    if text.chars().count() <= LIMIT {
        return text.to_string();
    }
    let cut: String = text.chars().take(LIMIT).collect();
    format!("{cut}…")
}

/// Maps an HTTP error status and body to the matching [`LlmError`].
pub fn classify_status(
    context: &ErrorContext,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    let message = provider_error_message(body);
    let code = provider_error_code(body).unwrap_or_default();
    classify_message(context, status, retry_after, message, &code)
}

/// Maps an HTTP error status, the provider's message and its error code (empty when it sent
/// none) to the matching [`LlmError`]: what [`classify_status`] does once it read the body, for
/// adapters that decoded the body themselves.
pub fn classify_message(
    context: &ErrorContext,
    status: u16,
    retry_after: Option<Duration>,
    message: String,
    code: &str,
) -> LlmError {
    let provider = context.provider.clone();
    let context_overflow =
        code == "context_length_exceeded" || looks_like_context_overflow(&message);
    match status {
        401 => LlmError::Authentication {
            provider,
            message,
            hint: context.key_hint.clone(),
        },
        403 => LlmError::PermissionDenied { provider, message },
        404 => LlmError::ModelNotFound {
            provider,
            model: context.model.clone(),
            message,
        },
        413 => LlmError::ContextLengthExceeded { provider, message },
        429 if code == "insufficient_quota" => LlmError::PermissionDenied {
            provider,
            message: format!("quota exhausted: {message}"),
        },
        429 => LlmError::RateLimited {
            provider,
            retry_after,
            message,
        },
        408 => LlmError::Server {
            provider,
            status,
            message,
            retry_after,
        },
        400..=499 if context_overflow => LlmError::ContextLengthExceeded { provider, message },
        400..=499 => LlmError::InvalidRequest {
            provider,
            status,
            message,
        },
        _ => LlmError::Server {
            provider,
            status,
            message,
            retry_after,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ErrorContext {
        ErrorContext::new("openai", "gpt-4o", "OPENAI_API_KEY")
    }

    #[test]
    fn retry_after_seconds_ms_and_date() {
        let h = |n: &str, v: &str| vec![(n.to_string(), v.to_string())];
        assert_eq!(
            parse_retry_after(&h("Retry-After", "2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(&h("retry-after-ms", "250")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after(&h("retry-after", "99999")),
            Some(MAX_RETRY_AFTER)
        );
        let past = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            parse_retry_after(&h("retry-after", past)),
            Some(Duration::ZERO)
        );
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc2822();
        let wait = parse_retry_after(&h("retry-after", &soon)).unwrap_or_default();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(parse_retry_after(&h("retry-after", "soon")), None);
        assert_eq!(parse_retry_after(&[]), None);
    }

    #[test]
    fn statuses_become_typed_errors() {
        let body = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        match classify_status(&ctx(), 401, None, body) {
            LlmError::Authentication { hint, message, .. } => {
                assert_eq!(hint, "OPENAI_API_KEY");
                assert_eq!(message, "Incorrect API key provided");
            }
            other => panic!("{other:?}"),
        }
        let overflow = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            classify_status(&ctx(), 400, None, overflow),
            LlmError::ContextLengthExceeded { .. }
        ));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            classify_status(&ctx(), 400, None, anthropic),
            LlmError::ContextLengthExceeded { .. }
        ));
        let limited = classify_status(&ctx(), 429, Some(Duration::from_secs(1)), "{}");
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(1)));
        assert!(limited.is_retryable());
        assert!(matches!(
            classify_status(&ctx(), 403, None, "{}"),
            LlmError::PermissionDenied { .. }
        ));
        let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert!(
            !classify_status(&ctx(), 429, None, quota).is_retryable(),
            "an empty quota does not refill by retrying"
        );
        assert!(
            matches!(classify_status(&ctx(), 404, None, "not here"), LlmError::ModelNotFound { model, .. } if model == "gpt-4o")
        );
        assert!(matches!(
            classify_status(&ctx(), 529, None, "overloaded"),
            LlmError::Server { status: 529, .. }
        ));
        assert!(!classify_status(&ctx(), 422, None, "bad").is_retryable());
    }

    #[tokio::test]
    async fn sse_reader_splits_events() {
        let chunks: Vec<Result<Bytes, LlmError>> = vec![
            Ok(Bytes::from_static(b"event: message_start\ndata: {\"a\":")),
            Ok(Bytes::from_static(b"1}\n\ndata: [DONE]\n\n")),
        ];
        let events: Vec<_> = sse_events(Box::pin(futures::stream::iter(chunks)), "test".into())
            .collect()
            .await;
        let events: Vec<SseEvent> = events
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event, "message_start");
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].data, "[DONE]");
    }
}
