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
