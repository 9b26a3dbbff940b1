//! A fault-injecting OpenAI-compatible chat-completions server on `127.0.0.1`.
//!
//! It speaks HTTP/1.1 itself over a raw TCP listener (so it can misbehave below HTTP: hold a request
//! forever, or reset the connection halfway through a body) and decides per request what goes
//! wrong: first from a scripted queue of [`Fault`]s, then from a seeded random [`FaultMix`]. When a
//! request is answered properly, the answer comes from a *responder* (a function from the request
//! to a [`Reply`](crate::scripted::Reply) of [`crate::scripted`]; by default the text `ok`),
//! rendered exactly like the scripted server renders it: chat-completions JSON, or server-sent
//! events when the request has `"stream": true`. Every request is logged with the fault it got
//! ([`FaultServer::served`]).
//!
//! # Faults
//!
//! | [`Fault`] | On the wire |
//! |---|---|
//! | `None` | the responder's reply |
//! | `NeverAnswer` | the request is read and never answered; the connection stays open until the server stops |
//! | `Slow(d)` | the responder's reply after `d` |
//! | `RateLimited` | 429, OpenAI's rate-limit error, `retry-after: N` |
//! | `ServerError(s)` | `s` (500, 502, 503, ...) with OpenAI's server-error body |
//! | `ResetMidBody` | the status line, headers (full `content-length`) and half the body, then a TCP reset |
//! | `MalformedJson` | 200 `application/json` whose body is a proxy's HTML page; in a stream, an event whose data is not JSON |
//! | `TruncatedStream` | the reply's first half and no more: a stream without its finish chunk and `[DONE]`, or a JSON body cut in the middle (both well-formed HTTP) |
//! | `NoChoices` | a 200 completion with `choices: []` (a stream of chunks without choices, then `[DONE]`) |
//! | `UnknownTool` | a call of a tool the request did not offer |
//! | `InvalidArguments` | a call of the first offered tool with arguments that miss its parameters |
//!
//! The random policy never draws `UnknownTool` or `InvalidArguments` for a request that offers no
//! tools (a model cannot call tools it was not given); it serves a healthy reply instead, logged as
//! `None`. Scripted faults are served as given. Connections are kept alive between requests, as
//! OpenAI's are, so clients also meet resets on pooled connections. Request bodies are read by
//! their `content-length` (as reqwest sends them); chunked request bodies are not supported.
//!
//! ```
//! use std::time::Duration;
//! use crewai_testkit::fault::{Fault, FaultKind, FaultMix, FaultServer};
//! use crewai_testkit::scripted::Reply;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // One 503, then a seeded mix: mostly healthy, 5% rate limits, 5% slow answers.
//! let server = FaultServer::builder()
//!     .script([Fault::ServerError(503)])
//!     .mix(FaultMix::healthy().with_rate(FaultKind::RateLimited, 0.05).with_rate(FaultKind::Slow, 0.05))
//!     .seed(7)
//!     .responder(|_request| Reply::text("All good."))
//!     .start()
//!     .await;
//! // Point an OpenAI client at server.base_url() and run the code under test; then:
//! assert_eq!(server.request_count(), 0);
//! assert!(server.base_url().ends_with("/v1"));
//! # }

mod answer;
mod http;
mod mix;
mod server;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use mix::FaultMix;
pub use server::{FaultServer, FaultServerBuilder, Responder, ServedRequest};

/// The name of the tool `UnknownTool` faults call (never offered by anyone).
pub const UNKNOWN_TOOL_NAME: &str = "purge_customer_records";

/// What goes wrong with one request.
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(FaultKind),
    doc = "A [`Fault`] without its parameters: the unit of a [`FaultMix`] and of the served counts.",
    derive(PartialOrd, Ord, Hash, strum::IntoStaticStr, strum::Display),
    strum(serialize_all = "snake_case")
)]
pub enum Fault {
    /// Nothing: the responder's reply.
    None,
    /// Read the request, never answer, keep the connection open.
    NeverAnswer,
    /// The responder's reply after this pause.
    Slow(Duration),
    /// HTTP 429 with `retry-after` in whole seconds.
    RateLimited { retry_after_seconds: u64 },
    /// An HTTP 5xx status (500, 502, 503 are the usual ones).
    ServerError(u16),
    /// Half the body, then a TCP reset.
    ResetMidBody,
    /// A 200 whose body is not JSON (an event that is not JSON in a stream).
    MalformedJson,
    /// The reply's first half, well-formed HTTP: a stream without its end, or JSON cut short.
    TruncatedStream,
    /// A completion with an empty `choices` array.
    NoChoices,
    /// A call of a tool the request did not offer.
    UnknownTool,
    /// A call of an offered tool with arguments that do not fit its parameters.
    InvalidArguments,
}

impl Fault {
    /// The fault's kind (its variant without parameters).
    pub fn kind(&self) -> FaultKind {
        FaultKind::from(self)
    }
}

impl FaultKind {
    /// Every kind that is a fault (all but `None`).
    pub const FAULTS: [FaultKind; 10] = [
        FaultKind::NeverAnswer,
        FaultKind::Slow,
        FaultKind::RateLimited,
        FaultKind::ServerError,
        FaultKind::ResetMidBody,
        FaultKind::MalformedJson,
        FaultKind::TruncatedStream,
        FaultKind::NoChoices,
        FaultKind::UnknownTool,
        FaultKind::InvalidArguments,
    ];

    /// A snake_case name for reports (also the kind's `Display`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    fn needs_tools(self) -> bool {
        matches!(self, FaultKind::UnknownTool | FaultKind::InvalidArguments)
    }
}
