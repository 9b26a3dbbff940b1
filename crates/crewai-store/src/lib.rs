//! # crewai-store
//!
//! The embedded SQLite database of a project, kept in its `.crewai/` folder:
//!
//! - `latest_kickoff_task_outputs`: the task outputs of the latest kickoff, with CrewAI's columns
//!   (task_id, expected_output, output JSON, task_index, inputs JSON, was_replayed, timestamp),
//!   so `crewai replay -t TASK_ID` can re-run from any task with the earlier outputs as context.
//!   [`Store`] implements crewai-core's [`TaskOutputStore`](crewai_core::store::TaskOutputStore) for that.
//! - `runs` and `run_task_outputs`: the run journal. One row per run (its id, crew, inputs, task
//!   keys, status, final output or error, usage, the run it was forked from) and one row per
//!   finished task of a run, written as the task finishes. [`Store`] implements crewai-core's
//!   [`RunJournal`](crewai_core::store::RunJournal), so `Crew::resume` continues a run whose process was killed.
//! - `training_examples`: every iteration of `crewai train` (the first answer, the person's
//!   feedback, the improved answer), as it happens. [`Store`] implements crewai-core's
//!   [`TrainingLog`](crewai_core::training::TrainingLog) (CrewAI keeps these in a pickle).
//!
//! The database runs in WAL mode with `synchronous = NORMAL`: each write is one short
//! transaction, committed when the call returns, and survives the process being killed (a power
//! loss may lose the last commits, never corrupt the file). Databases written before the journal
//! existed are migrated in place when opened; their runs are listed under their number.
//!
//! The trait implementations are async and run each write on tokio's blocking pool, so SQLite
//! never holds up a runtime worker (the one exception is `RunJournal::finish_blocking`, for a
//! dropped kickoff's guard). The inherent methods are the same work, synchronous, for programs
//! and tests without a runtime; [`Store::runs_async`] lists runs from async code.
//!
//! ```
//! use crewai_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_project(dir.path()).unwrap();
//! assert!(store.path().unwrap().ends_with(".crewai/crewai.db"));
//! assert!(store.task_outputs().unwrap().is_empty());
//! ```

mod error;
mod journal;
mod migrate;
mod runs;
mod task_outputs;
mod training;

pub use error::StoreError;
pub use runs::RunRecord;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
pub use crewai_core::store::RunStatus;
use rusqlite::Connection;

use crate::migrate::{SCHEMA, migrate_runs};

/// The folder, inside a project, that holds its database.
pub const STORE_DIR: &str = ".crewai";
/// The database file name inside [`STORE_DIR`].
pub const DB_FILE: &str = "crewai.db";

struct Inner {
    conn: Mutex<Connection>,
    /// `None` for an in-memory database.
    path: Option<PathBuf>,
}

/// A project's database (cheap to clone; clones share the connection).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) `<project>/.crewai/crewai.db`.
    pub fn open_project(project_dir: &Path) -> Result<Store, StoreError> {
        let dir = project_dir.join(STORE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        Self::open(&dir.join(DB_FILE))
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        Self::init(conn, Some(path.to_path_buf()))
    }

    /// A database that lives as long as this value (tests, one-off runs).
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Sqlite {
            path: PathBuf::from(":memory:"),
            source,
        })?;
        Self::init(conn, None)
    }

    fn init(conn: Connection, path: Option<PathBuf>) -> Result<Store, StoreError> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        // Another process (a second `crewai run`) may hold the write lock briefly.
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|source| StoreError::Sqlite {
                path: shown.clone(),
                source,
            })?;
        let sql = |source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        };
        if path.is_some() {
            // Readers never block the writer, and a commit is one append to the log.
            conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
                .map_err(sql)?;
        }
        conn.execute_batch(SCHEMA).map_err(sql)?;
        migrate_runs(&conn).map_err(sql)?;
        Ok(Store {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path,
            }),
        })
    }

    /// The database file (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    fn shown_path(&self) -> PathBuf {
        self.inner
            .path
            .clone()
            .unwrap_or_else(|| PathBuf::from(":memory:"))
    }

    fn conn(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.inner.conn.lock().map_err(|_| StoreError::Poisoned)
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.shown_path(),
            source,
        }
    }

    fn corrupt(&self, message: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.shown_path(),
            message: message.into(),
            source: None,
        }
    }

    /// A stored JSON value (`message` says which) that does not parse.
    fn corrupt_json(&self, message: impl Into<String>, source: serde_json::Error) -> StoreError {
        StoreError::Corrupt {
            path: self.shown_path(),
            message: message.into(),
            source: Some(source),
        }
    }

    /// `value` as JSON text, to store as the column holding `what`.
    fn to_json(
        &self,
        what: &'static str,
        value: &impl serde::Serialize,
    ) -> Result<String, StoreError> {
        serde_json::to_string(value).map_err(|source| StoreError::Serialize {
            path: self.shown_path(),
            what,
            source,
        })
    }

    /// The rows `sql` selects with `params`, each read by `read`.
    fn select<T>(
        &self,
        conn: &Connection,
        sql: &str,
        params: impl rusqlite::Params,
        read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut statement = conn.prepare(sql).map_err(|e| self.sql(e))?;
        let rows = statement.query_map(params, read).map_err(|e| self.sql(e))?;
        rows.map(|row| row.map_err(|e| self.sql(e))).collect()
    }

    /// The `output` and `inputs` columns of a stored task output (JSON text).
    fn task_output_columns(
        &self,
        record: &crewai_core::store::StoredTaskOutput,
    ) -> Result<(String, String), StoreError> {
        Ok((
            self.to_json("output", &record.output)?,
            self.to_json("inputs", &record.inputs)?,
        ))
    }

    /// Runs `work` on tokio's blocking pool with a handle on the same database.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(store))
            .await
            .map_err(StoreError::Background)?
    }

    /// [`Store::blocking`] for the engine's store traits, whose error is crewai-core's.
    async fn for_engine<T: Send + 'static>(
        &self,
        work: impl FnOnce(Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, crewai_core::store::StoreError> {
        self.blocking(work).await.map_err(error::to_core)
    }
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
                .ok()
                .map(|t| t.and_utc())
        })
}

#[cfg(test)]
mod test_support {
    use chrono::Utc;
    use crewai_core::interpolate::Inputs;
    use crewai_core::output::TaskOutput;
    use crewai_core::store::{RunOwner, RunStart, StoredTaskOutput};
    use crewai_llm::Usage;
    use serde_json::json;

    pub(crate) fn record(index: usize, id: &str, raw: &str) -> StoredTaskOutput {
        let mut inputs = Inputs::new();
        inputs.insert("topic".into(), json!("AI"));
        StoredTaskOutput {
            task_id: id.into(),
            task_name: Some(format!("task{index}")),
            task_index: index,
            output: TaskOutput::new("Describe it", "A text", raw, "Writer"),
            inputs,
            was_replayed: index == 1,
            timestamp: Utc::now(),
        }
    }

    pub(crate) fn start(run_id: &str, carried_over: Vec<StoredTaskOutput>) -> RunStart {
        let mut inputs = Inputs::new();
        inputs.insert("topic".into(), json!("AI"));
        RunStart {
            run_id: run_id.into(),
            crew: "crew".into(),
            inputs,
            task_keys: vec!["task0".into(), "task1".into(), "task2".into()],
            parent: None,
            carried_over,
            owner: RunOwner::this_process(),
        }
    }

    pub(crate) fn spent(tokens: u64) -> Usage {
        Usage {
            total_tokens: tokens,
            ..Usage::default()
        }
    }

    /// An owner whose process does not exist: beyond Linux's largest pid (2^22).
    pub(crate) fn dead_owner() -> RunOwner {
        RunOwner {
            pid: 4_194_304 + 11,
            ..RunOwner::this_process()
        }
    }
}
