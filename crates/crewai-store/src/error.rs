//! [`StoreError`] and its mapping onto crewai-core's store error.

use std::path::PathBuf;

use crewai_core::store::StoreError as CoreStoreError;

/// A failure of the database. The variants that wrap a lower-level error say what failed and
/// keep it as their source (render the chain with `crewai_llm::error_chain`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot create the store folder {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database {} failed", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A value to store could not be turned into JSON.
    #[error("database {}: {what} cannot be written as JSON", path.display())]
    Serialize {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A stored row does not read back (`message` says which and what); `source` is the JSON
    /// error when a stored JSON value does not parse.
    #[error("database {}: a stored row could not be read: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        message: String,
        #[source]
        source: Option<serde_json::Error>,
    },
    #[error("the store is unusable: a writer panicked while holding it")]
    Poisoned,
    #[error("the store's background task failed")]
    Background(#[source] tokio::task::JoinError),
    /// Another attempt that is still alive owns the run: the engine's
    /// [`RunOwned`](CoreStoreError::RunOwned), which names the run and its
    /// [`RunOwner`](crewai_core::store::RunOwner).
    #[error(transparent)]
    RunOwned(CoreStoreError),
}

pub(crate) fn to_core(err: StoreError) -> CoreStoreError {
    match err {
        StoreError::Corrupt { .. } => CoreStoreError::Corrupt(Box::new(err)),
        StoreError::RunOwned(owned) => owned,
        other => CoreStoreError::Backend(Box::new(other)),
    }
}
