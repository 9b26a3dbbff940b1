//! # crewai-server
//!
//! `crewai serve`'s kickoff API in the shape of CrewAI AMP (`GET /inputs`, `POST /kickoff`,
//! `GET /status/{id}`), plus live progress as Server-Sent Events, cancel and resume, and the
//! OpenAPI document. Kickoffs go through a durable [`KickoffQueue`] ([`SqliteQueue`] on one
//! machine, `PgQueue` with the `postgres` feature for many) and are run by [`workers`] that
//! claim them under leases; the crew itself is run by the caller's [`KickoffRunner`] (the CLI
//! runs each kickoff through its journaled run path, so a kickoff whose worker died resumes
//! without re-running finished tasks).
//!
//! Feature `postgres` (off by default here; crewai-cli turns it on): `PgQueue` and
//! `PgJournal`, the queue and crewai-core's `RunJournal` in one PostgreSQL database shared by
//! processes on many machines, through sqlx (its Postgres driver and rustls; 24 crates more in
//! the lock).

mod error;
#[cfg(feature = "postgres")]
mod pg;
mod queue;
mod settle;
mod sqlite_queue;

pub use error::{QueueError, ServerError};
#[cfg(feature = "postgres")]
pub use pg::{PgJournal, PgPoolConfig, PgQueue, connect_pool};
pub use queue::{
    AttemptEnd, Claimed, KickoffEvent, KickoffQueue, KickoffRecord, KickoffState, Lease,
    QueueConfig, Submitted, WorkerIdentity,
};
pub use sqlite_queue::SqliteQueue;
mod api;
pub mod openapi;
mod runner;
pub mod workers;

pub use api::{DEFAULT_MAX_REQUEST_BYTES, KickoffApi};
pub use runner::{KickoffJob, KickoffRunner, ProgressSink};
pub use workers::{WorkerConfig, run_workers};

/// A database URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}
