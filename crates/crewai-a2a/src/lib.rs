//! # crewai-a2a
//!
//! A2A (agent-to-agent) for crewai, **protocol version 0.3.0** (pinned: [`PROTOCOL_VERSION`]):
//! the JSON-RPC 2.0 binding with `message/send`, `message/stream` (SSE), `tasks/get` and
//! `tasks/cancel`, and the agent card at `/.well-known/agent-card.json`. The wire types follow
//! the official Python SDK's v0.3 models (`a2a-sdk` 1.3.0, `a2a.compat.v0_3.types`); that SDK
//! speaks 0.3 to a card that says `protocolVersion: "0.3.0"`, and serves 0.3 beside 1.0 with
//! `enable_v0_3_compat=True`. A2A 1.0 (`SendMessage`, protobuf JSON) is not spoken: a card
//! that offers only 1.0 endpoints is refused with [`A2aError::NoCompatibleInterface`].
//!
//! - [`Conversation`]: the client side of a delegation: fetches the remote agent's card, sends
//!   each turn with one context id, follows the task by streaming or by polling `tasks/get`,
//!   and maps its end to a [`Reply`] or a typed [`A2aError`]. Every call is bounded by the
//!   config's timeout and every answer (a JSON body, a whole event stream) by
//!   [`A2aClientConfig::max_response_bytes`].
//! - `server` (cargo feature `server`, axum): a crew behind the JSON-RPC endpoint, each A2A task
//!   a kickoff run by a [`server::CrewRunner`] the caller provides (`crewai a2a serve` passes
//!   the CLI's journaled run).
//!
//! Not built (refused where a config could ask for them): push notifications, the gRPC and
//! HTTP+JSON transports, card signing and verification, `tasks/resubscribe`, the authenticated
//! extended card, OAuth2 and OpenID Connect credentials.

mod client;
mod config;
mod conversation;
mod error;
pub mod jsonrpc;
#[cfg(feature = "server")]
pub mod server;
pub mod types;

pub use client::A2aClient;
pub use config::{
    A2aAuth, A2aClientConfig, A2aUpdates, DEFAULT_A2A_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_TURNS, DEFAULT_POLL_INTERVAL,
};
pub use conversation::{Conversation, Reply};
pub use error::A2aError;

/// The A2A protocol version this crate speaks, as written in agent cards.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// Where an agent card is served, under the agent's base URL.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
