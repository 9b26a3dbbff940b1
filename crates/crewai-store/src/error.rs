//! [`StoreError`] and its mapping onto crewai-core's store error.

use std::path::PathBuf;

use crewai_core::store::{RunOwner, StoreError as CoreStoreError};

/// A failure of the database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot create the store folder {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {}: a stored row could not be read: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("the store is unusable: a writer panicked while holding it")]
    Poisoned,
    #[error("the store's background task failed: {0}")]
    Background(String),
    /// Another attempt that is still alive owns the run (see [`RunOwner`]).
    #[error(
        "run {run_id} is still running in process {} (started {}, last heartbeat {}); stop it first, or wait for it to end",
        owner.pid,
        owner.since.format("%Y-%m-%d %H:%M:%S UTC"),
        owner.heartbeat_at.format("%H:%M:%S UTC")
    )]
    RunOwned {
        run_id: String,
        owner: Box<RunOwner>,
    },
}

pub(crate) fn to_core(err: StoreError) -> CoreStoreError {
    match err {
        StoreError::Corrupt { .. } => CoreStoreError::Corrupt(err.to_string()),
        StoreError::RunOwned { run_id, owner } => CoreStoreError::RunOwned { run_id, owner },
        other => CoreStoreError::Backend(other.to_string()),
    }
}
