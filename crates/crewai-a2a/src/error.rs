//! [`A2aError`]: what can go wrong talking to a remote A2A agent.

use std::time::Duration;

use crate::types::TaskState;

/// A remote A2A agent could not be reached, answered outside the protocol, or ended the task
/// without an answer. Messages name the URL or the agent; secrets (tokens, header values) never
/// appear in them.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    /// The configuration asks for something impossible (an endpoint that is not a URL).
    #[error("A2A configuration: {0}")]
    Config(String),
    /// The configuration asks for a part of A2A this crate does not build.
    #[error("A2A: {what} is not supported by crewai-rs; {instead}")]
    Unsupported {
        what: &'static str,
        instead: &'static str,
    },
    /// The request could not be sent or its answer not read (refused connection, DNS, TLS).
    #[error("A2A agent at {url} could not be reached")]
    Connect {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The peer did not answer (or finish the stream) within the time allowed.
    #[error("A2A agent at {url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("A2A agent at {url} answered HTTP {status}: {body}")]
    HttpStatus {
        url: String,
        status: u16,
        /// The start of the body, for the reason.
        body: String,
    },
    /// The answer (or the stream) was larger than the limit; it was cut off there.
    #[error("A2A agent at {url} sent more than {limit} bytes; the answer was abandoned")]
    TooLarge { url: String, limit: usize },
    /// The body is not JSON, or not the JSON the protocol describes.
    #[error("A2A agent at {url} sent {what} that does not parse")]
    InvalidJson {
        url: String,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The body is JSON but not a JSON-RPC 2.0 response (no result and no error, both, ...).
    #[error("A2A agent at {url} broke JSON-RPC: {detail}")]
    Protocol { url: String, detail: String },
    /// The agent answered with a JSON-RPC error.
    #[error("A2A agent at {url} refused the call ({code}): {message}")]
    Remote {
        url: String,
        code: i64,
        message: String,
    },
    /// The agent card lists no JSON-RPC endpoint of protocol 0.3.
    #[error(
        "the agent card at {url} offers no JSON-RPC endpoint for A2A 0.3 (crewai-rs speaks 0.3.0): {offered}"
    )]
    NoCompatibleInterface { url: String, offered: String },
    /// The SSE stream broke (bad framing, cut connection).
    #[error("A2A agent at {url}: the event stream broke: {detail}")]
    Stream { url: String, detail: String },
    /// The stream ended before the task reached a final state.
    #[error(
        "A2A agent at {url} closed the event stream before the task finished (last state: {last})"
    )]
    StreamEndedEarly { url: String, last: String },
    /// The remote task ended without an answer (failed, rejected, canceled, auth-required).
    #[error("the remote agent '{agent}' ended the task as {}{}", state.as_str(), detail(.message))]
    TaskEnded {
        agent: String,
        state: TaskState,
        message: Option<String>,
    },
    /// The conversation with the remote agent used up its turns.
    #[error(
        "the conversation with the remote agent '{agent}' reached its {max_turns} turns (`max_turns`)"
    )]
    MaxTurns { agent: String, max_turns: u32 },
    /// The caller's run was cancelled; the remote task was asked to cancel too.
    #[error("the call to the remote agent '{agent}' was cancelled")]
    Cancelled { agent: String },
}

fn detail(message: &Option<String>) -> String {
    match message.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => format!(": {text}"),
        _ => String::new(),
    }
}
