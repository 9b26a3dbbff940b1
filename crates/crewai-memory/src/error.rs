//! [`MemoryError`]: everything memory can fail at, with its cause kept as the source.

use std::path::PathBuf;

/// A failure of memory. Variants that wrap a lower-level error say what failed at this level and
/// keep the cause as their source (render the chain with `crewai_llm::error_chain`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A scope path that is not a clean `/a/b` path (see [`ScopePath::parse`](crate::ScopePath::parse)).
    #[error("invalid memory scope {path:?}: {reason}")]
    InvalidScope { path: String, reason: &'static str },
    /// A value given to a memory call that cannot be used.
    #[error("invalid memory {field}: {reason}")]
    InvalidInput { field: &'static str, reason: String },
    #[error("cannot create the memory folder {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("memory database {} failed", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A stored row that does not read back.
    #[error("memory database {}: a stored row could not be read: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    /// The PostgreSQL memory database could not be reached: the connection failed or timed
    /// out, or the server is going away or starting (worth retrying).
    #[cfg(feature = "postgres")]
    #[error("memory database {location} is unavailable")]
    PostgresUnavailable {
        location: String,
        #[source]
        source: sqlx::Error,
    },
    /// The PostgreSQL memory database refused a call.
    #[cfg(feature = "postgres")]
    #[error("memory database {location} failed")]
    Postgres {
        location: String,
        #[source]
        source: sqlx::Error,
    },
    /// A row of the PostgreSQL memory database that does not read back.
    #[cfg(feature = "postgres")]
    #[error("memory database {location}: a stored row could not be read: {message}")]
    PostgresCorrupt { location: String, message: String },
    /// The PostgreSQL memory database was migrated by a newer crewai.
    #[cfg(feature = "postgres")]
    #[error(
        "memory database {location} has schema version {found}, newer than this build's {known}: \
         upgrade crewai (every process sharing the database must run the same version)"
    )]
    SchemaTooNew {
        location: String,
        found: i64,
        known: i64,
    },
    /// The collection was written with vectors of another size (another embedding model).
    #[error(
        "memory collection {collection:?} holds {stored}-dimensional vectors from {stored_model:?}, \
         but the embedder {model:?} produces {found}; clear it with `crewai reset-memories -m` \
         (or use the embedder it was written with)"
    )]
    DimensionMismatch {
        collection: String,
        stored: usize,
        stored_model: String,
        found: usize,
        model: String,
    },
    #[error("no memory record with id {id:?} in this scope")]
    NotFound { id: String },
    /// This memory was opened read-only.
    #[error("memory is read-only: {operation} is not allowed")]
    ReadOnly { operation: &'static str },
    /// An operation needs the memory's model (`MemoryBuilder::llm`) and none was given.
    #[error(
        "memory {operation} needs a model: set one with MemoryBuilder::llm (crew: `chat_llm` or an agent's `llm`)"
    )]
    NoLlm { operation: &'static str },
    #[error("the embedder {model:?} failed")]
    Embedding {
        model: String,
        #[source]
        source: crewai_llm::LlmError,
    },
    #[error("the embedder {model:?} returned {got} vectors for {expected} texts")]
    EmbeddingCount {
        model: String,
        expected: usize,
        got: usize,
    },
    #[error("the memory model failed during {operation}")]
    Llm {
        operation: &'static str,
        #[source]
        source: crewai_llm::LlmError,
    },
    /// The memory model answered, but not with the JSON asked for.
    #[error("the memory model's reply to {operation} is not the JSON asked for: {reply:?}")]
    BadReply {
        operation: &'static str,
        reply: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the memory store is unusable: a writer panicked while holding it")]
    Poisoned,
    #[error("a memory background task failed")]
    Background(#[source] tokio::task::JoinError),
    /// A background write (`Memory::remember_background`) failed; `drain_writes` reports it.
    #[error("a background memory write failed")]
    BackgroundWrite(#[source] Box<MemoryError>),
}

impl MemoryError {
    /// Whether the same call may succeed later: the database was out of reach.
    pub fn is_transient(&self) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            MemoryError::PostgresUnavailable { .. } => true,
            MemoryError::BackgroundWrite(inner) => inner.is_transient(),
            _ => false,
        }
    }
}
