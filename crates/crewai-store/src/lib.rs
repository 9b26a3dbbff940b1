//! # crewai-store
//!
//! The embedded SQLite database of a project, kept in its `.crewai/` folder:
//!
//! - `latest_kickoff_task_outputs`: the task outputs of the latest kickoff, with CrewAI's columns
//!   (task_id, expected_output, output JSON, task_index, inputs JSON, was_replayed, timestamp),
//!   so `crewai replay -t TASK_ID` can re-run from any task with the earlier outputs as context.
//!   [`Store`] implements crewai-core's [`TaskOutputStore`] for that.
//! - `runs`: one row per kickoff (crew, inputs, status, final output or error, token usage).
//!
//! The [`TaskOutputStore`] methods are synchronous, as the trait is: each is one short local
//! write. The `*_async` methods run the same work on tokio's blocking pool.
//!
//! ```
//! use crewai_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_project(dir.path()).unwrap();
//! assert!(store.path().unwrap().ends_with(".crewai/crewai.db"));
//! assert!(store.task_outputs().unwrap().is_empty());
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
use crewai_core::store::{StoreError as CoreStoreError, StoredTaskOutput, TaskOutputStore};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The folder, inside a project, that holds its database.
pub const STORE_DIR: &str = ".crewai";
/// The database file name inside [`STORE_DIR`].
pub const DB_FILE: &str = "crewai.db";

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
}

/// How a kickoff ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(RunStatus::Running),
            "completed" => Some(RunStatus::Completed),
            "failed" => Some(RunStatus::Failed),
            _ => None,
        }
    }
}

/// One kickoff, as recorded in `runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: i64,
    pub crew: String,
    pub inputs: Inputs,
    pub status: RunStatus,
    /// The final output's raw text when the run completed.
    pub output: Option<String>,
    /// The error when it failed.
    pub error: Option<String>,
    /// Token usage as JSON (`prompt_tokens`, `completion_tokens`, ...).
    pub token_usage: Option<Value>,
    /// Whether the run was a replay.
    pub replay: bool,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

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

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS latest_kickoff_task_outputs (
    task_id TEXT PRIMARY KEY,
    expected_output TEXT,
    output JSON,
    task_index INTEGER,
    inputs JSON,
    was_replayed BOOLEAN,
    timestamp DATETIME DEFAULT CURRENT_TIMESTAMP,
    task_name TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    crew TEXT NOT NULL,
    inputs JSON NOT NULL,
    status TEXT NOT NULL,
    output TEXT,
    error TEXT,
    token_usage JSON,
    replay BOOLEAN NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
";

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
        conn.execute_batch(SCHEMA)
            .map_err(|source| StoreError::Sqlite {
                path: shown,
                source,
            })?;
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
        }
    }

    // ----- latest kickoff task outputs -----

    /// Forgets the stored task outputs (a new kickoff starts).
    pub fn reset_task_outputs(&self) -> Result<(), StoreError> {
        self.conn()?
            .execute("DELETE FROM latest_kickoff_task_outputs", [])
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Stores one task's output, replacing whatever was stored at its index or under its id.
    pub fn save_task_output(&self, record: &StoredTaskOutput) -> Result<(), StoreError> {
        let output =
            serde_json::to_string(&record.output).map_err(|e| self.corrupt(e.to_string()))?;
        let inputs =
            serde_json::to_string(&record.inputs).map_err(|e| self.corrupt(e.to_string()))?;
        let mut conn = self.conn()?;
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "DELETE FROM latest_kickoff_task_outputs WHERE task_index = ?1",
            params![record.task_index as i64],
        )
        .map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT OR REPLACE INTO latest_kickoff_task_outputs
             (task_id, expected_output, output, task_index, inputs, was_replayed, timestamp, task_name)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                record.task_id,
                record.output.expected_output,
                output,
                record.task_index as i64,
                inputs,
                record.was_replayed,
                record.timestamp.to_rfc3339(),
                record.task_name,
            ],
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The stored task outputs, in task order.
    pub fn task_outputs(&self) -> Result<Vec<StoredTaskOutput>, StoreError> {
        let conn = self.conn()?;
        let mut statement = conn
            .prepare(
                "SELECT task_id, task_name, task_index, output, inputs, was_replayed, timestamp
                 FROM latest_kickoff_task_outputs ORDER BY task_index",
            )
            .map_err(|e| self.sql(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, Option<String>>(4)?,
                    row.get::<_, bool>(5)?,
                    row.get::<_, String>(6)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut records = Vec::new();
        for row in rows {
            let (task_id, task_name, task_index, output, inputs, was_replayed, timestamp) =
                row.map_err(|e| self.sql(e))?;
            let output: TaskOutput = serde_json::from_str(&output)
                .map_err(|e| self.corrupt(format!("task {task_id}: output: {e}")))?;
            let inputs: Inputs = match inputs {
                Some(text) => serde_json::from_str(&text)
                    .map_err(|e| self.corrupt(format!("task {task_id}: inputs: {e}")))?,
                None => Inputs::new(),
            };
            records.push(StoredTaskOutput {
                task_id,
                task_name,
                task_index: usize::try_from(task_index)
                    .map_err(|_| self.corrupt(format!("negative task_index {task_index}")))?,
                output,
                inputs,
                was_replayed,
                timestamp: parse_time(&timestamp)
                    .ok_or_else(|| self.corrupt(format!("bad timestamp {timestamp:?}")))?,
            });
        }
        Ok(records)
    }

    // ----- runs -----

    /// Records the start of a kickoff and returns its id.
    pub fn start_run(&self, crew: &str, inputs: &Inputs, replay: bool) -> Result<i64, StoreError> {
        let inputs = serde_json::to_string(inputs).map_err(|e| self.corrupt(e.to_string()))?;
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO runs (crew, inputs, status, replay, started_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![crew, inputs, RunStatus::Running.as_str(), replay, Utc::now().to_rfc3339()],
        )
        .map_err(|e| self.sql(e))?;
        Ok(conn.last_insert_rowid())
    }

    /// Records how a kickoff ended: its final output and usage, or its error.
    pub fn finish_run(
        &self,
        id: i64,
        outcome: Result<(&str, &Value), &str>,
    ) -> Result<(), StoreError> {
        let (status, output, usage, error) = match outcome {
            Ok((raw, usage)) => (
                RunStatus::Completed,
                Some(raw.to_string()),
                Some(usage.to_string()),
                None,
            ),
            Err(error) => (RunStatus::Failed, None, None, Some(error.to_string())),
        };
        let changed = self
            .conn()?
            .execute(
                "UPDATE runs SET status = ?1, output = ?2, token_usage = ?3, error = ?4, finished_at = ?5 WHERE id = ?6",
                params![status.as_str(), output, usage, error, Utc::now().to_rfc3339(), id],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            return Err(self.corrupt(format!("no run with id {id}")));
        }
        Ok(())
    }

    /// The latest runs, newest first.
    pub fn runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn()?;
        let mut statement = conn
            .prepare(
                "SELECT id, crew, inputs, status, output, error, token_usage, replay, started_at, finished_at
                 FROM runs ORDER BY id DESC LIMIT ?1",
            )
            .map_err(|e| self.sql(e))?;
        let rows = statement
            .query_map(params![limit as i64], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, Option<String>>(4)?,
                    row.get::<_, Option<String>>(5)?,
                    row.get::<_, Option<String>>(6)?,
                    row.get::<_, bool>(7)?,
                    row.get::<_, String>(8)?,
                    row.get::<_, Option<String>>(9)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut runs = Vec::new();
        for row in rows {
            let (id, crew, inputs, status, output, error, usage, replay, started, finished) =
                row.map_err(|e| self.sql(e))?;
            runs.push(RunRecord {
                id,
                crew,
                inputs: serde_json::from_str(&inputs)
                    .map_err(|e| self.corrupt(format!("run {id}: inputs: {e}")))?,
                status: RunStatus::parse(&status)
                    .ok_or_else(|| self.corrupt(format!("run {id}: status {status:?}")))?,
                output,
                error,
                token_usage: usage
                    .map(|u| serde_json::from_str(&u))
                    .transpose()
                    .map_err(|e| self.corrupt(format!("run {id}: usage: {e}")))?,
                replay,
                started_at: parse_time(&started)
                    .ok_or_else(|| self.corrupt(format!("run {id}: started_at {started:?}")))?,
                finished_at: finished.as_deref().and_then(parse_time),
            });
        }
        Ok(runs)
    }

    /// The task id stored for a task name or id (what `crewai replay -t` accepts).
    pub fn find_task(&self, id_or_name: &str) -> Result<Option<StoredTaskOutput>, StoreError> {
        Ok(self
            .task_outputs()?
            .into_iter()
            .find(|r| r.task_id == id_or_name || r.task_name.as_deref() == Some(id_or_name)))
    }

    /// How many task outputs are stored.
    pub fn task_output_count(&self) -> Result<usize, StoreError> {
        let count: Option<i64> = self
            .conn()?
            .query_row(
                "SELECT COUNT(*) FROM latest_kickoff_task_outputs",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(count.unwrap_or(0).max(0) as usize)
    }

    // ----- the same, off the async runtime -----

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(store))
            .await
            .map_err(|e| StoreError::Background(e.to_string()))?
    }

    /// [`Store::task_outputs`] on the blocking pool.
    pub async fn task_outputs_async(&self) -> Result<Vec<StoredTaskOutput>, StoreError> {
        self.blocking(|s| s.task_outputs()).await
    }

    /// [`Store::reset_task_outputs`] on the blocking pool.
    pub async fn reset_task_outputs_async(&self) -> Result<(), StoreError> {
        self.blocking(|s| s.reset_task_outputs()).await
    }

    /// [`Store::start_run`] on the blocking pool.
    pub async fn start_run_async(
        &self,
        crew: String,
        inputs: Inputs,
        replay: bool,
    ) -> Result<i64, StoreError> {
        self.blocking(move |s| s.start_run(&crew, &inputs, replay))
            .await
    }

    /// [`Store::finish_run`] on the blocking pool.
    pub async fn finish_run_async(
        &self,
        id: i64,
        outcome: Result<(String, Value), String>,
    ) -> Result<(), StoreError> {
        self.blocking(move |s| match &outcome {
            Ok((raw, usage)) => s.finish_run(id, Ok((raw, usage))),
            Err(error) => s.finish_run(id, Err(error)),
        })
        .await
    }

    /// [`Store::runs`] on the blocking pool.
    pub async fn runs_async(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        self.blocking(move |s| s.runs(limit)).await
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

fn to_core(err: StoreError) -> CoreStoreError {
    match err {
        StoreError::Corrupt { .. } => CoreStoreError::Corrupt(err.to_string()),
        other => CoreStoreError::Backend(other.to_string()),
    }
}

impl TaskOutputStore for Store {
    fn reset(&self) -> Result<(), CoreStoreError> {
        self.reset_task_outputs().map_err(to_core)
    }

    fn save(&self, record: StoredTaskOutput) -> Result<(), CoreStoreError> {
        self.save_task_output(&record).map_err(to_core)
    }

    fn load(&self) -> Result<Vec<StoredTaskOutput>, CoreStoreError> {
        self.task_outputs().map_err(to_core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(index: usize, id: &str, raw: &str) -> StoredTaskOutput {
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

    #[test]
    fn task_outputs_round_trip_in_order_and_replace_by_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store.save_task_output(&record(1, "b", "second")).unwrap();
        store.save_task_output(&record(0, "a", "first")).unwrap();
        store
            .save_task_output(&record(1, "b2", "second again"))
            .unwrap();
        let rows = store.task_outputs().unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| (r.task_id.as_str(), r.output.raw.as_str()))
                .collect::<Vec<_>>(),
            [("a", "first"), ("b2", "second again")]
        );
        assert_eq!(rows[1].inputs["topic"], "AI");
        assert!(rows[1].was_replayed);
        assert_eq!(rows[0].task_name.as_deref(), Some("task0"));
        assert_eq!(store.find_task("task1").unwrap().unwrap().task_id, "b2");
        assert_eq!(store.task_output_count().unwrap(), 2);

        // A second handle on the same file sees the rows (another `crewai` process).
        let again = Store::open_project(dir.path()).unwrap();
        assert_eq!(again.task_outputs().unwrap().len(), 2);
        again.reset_task_outputs().unwrap();
        assert!(store.task_outputs().unwrap().is_empty());
    }

    #[test]
    fn uses_crewai_columns() {
        let store = Store::in_memory().unwrap();
        store.save_task_output(&record(0, "a", "first")).unwrap();
        let conn = store.conn().unwrap();
        let (expected, output, inputs): (String, String, String) = conn
            .query_row(
                "SELECT expected_output, output, inputs FROM latest_kickoff_task_outputs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(expected, "A text");
        assert_eq!(
            serde_json::from_str::<Value>(&output).unwrap()["raw"],
            "first"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&inputs).unwrap(),
            json!({"topic": "AI"})
        );
    }

    #[test]
    fn implements_the_core_trait() {
        let store = Store::in_memory().unwrap();
        let shared: Arc<dyn TaskOutputStore> = Arc::new(store.clone());
        shared.save(record(0, "a", "x")).unwrap();
        assert_eq!(shared.load().unwrap()[0].output.raw, "x");
        shared.reset().unwrap();
        assert!(shared.load().unwrap().is_empty());
    }

    #[test]
    fn runs_record_start_and_outcome() {
        let store = Store::in_memory().unwrap();
        let ok = store.start_run("crew", &Inputs::new(), false).unwrap();
        let failed = store.start_run("crew", &Inputs::new(), true).unwrap();
        store
            .finish_run(ok, Ok(("done", &json!({"total_tokens": 3}))))
            .unwrap();
        store.finish_run(failed, Err("boom")).unwrap();
        let runs = store.runs(10).unwrap();
        assert_eq!(runs[0].id, failed);
        assert_eq!(runs[0].status, RunStatus::Failed);
        assert_eq!(runs[0].error.as_deref(), Some("boom"));
        assert!(runs[0].replay);
        assert_eq!(runs[1].output.as_deref(), Some("done"));
        assert_eq!(runs[1].token_usage, Some(json!({"total_tokens": 3})));
        assert!(runs[1].finished_at.is_some());
        assert!(store.finish_run(999, Err("x")).is_err());
    }

    #[tokio::test]
    async fn async_methods_run_off_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store.save_task_output(&record(0, "a", "first")).unwrap();
        assert_eq!(store.task_outputs_async().await.unwrap().len(), 1);
        let id = store
            .start_run_async("crew".into(), Inputs::new(), false)
            .await
            .unwrap();
        store
            .finish_run_async(id, Ok(("r".into(), json!({}))))
            .await
            .unwrap();
        assert_eq!(
            store.runs_async(5).await.unwrap()[0].status,
            RunStatus::Completed
        );
        store.reset_task_outputs_async().await.unwrap();
        assert!(store.task_outputs().unwrap().is_empty());
    }
}
