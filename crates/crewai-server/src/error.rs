//! The crate's errors.

use std::path::PathBuf;

/// A failure of the kickoff queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The database could not be reached or is busy: the API answers 503 with `Retry-After`.
    #[error("the kickoff queue's database at {location} is unavailable")]
    Unavailable {
        location: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The database answered with an error that retrying will not fix.
    #[error("the kickoff queue's database at {location} failed")]
    Database {
        location: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot create the queue's folder {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A stored row does not read back (written by a newer version, or edited by hand).
    #[error("kickoff {kickoff_id}: the stored {field} is not valid")]
    Corrupt {
        kickoff_id: String,
        field: &'static str,
    },
    #[error(
        "Idempotency-Key '{key}' was used for kickoff {kickoff_id} with different inputs; use a new key for a new kickoff"
    )]
    IdempotencyConflict { key: String, kickoff_id: String },
    #[error(
        "kickoff {kickoff_id} is {state}; only failed, cancelled or dead-lettered kickoffs can be resumed"
    )]
    NotResumable { kickoff_id: String, state: String },
    #[error(
        "the queue's database is at schema version {found}, newer than this build knows ({known}); upgrade crewai"
    )]
    SchemaTooNew { found: i64, known: i64 },
    /// The blocking task running the database call panicked or was cancelled.
    #[error("the queue's database call did not complete")]
    Join(#[source] tokio::task::JoinError),
}

/// A failure to start or run the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("cannot listen on {address}")]
    Bind {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the HTTP server stopped")]
    Serve(#[source] std::io::Error),
    #[error(
        "refusing to serve on {host} without a token: anyone who reaches it could run the crew"
    )]
    NoTokenOffLoopback { host: std::net::IpAddr },
}
