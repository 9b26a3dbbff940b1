//! Durable flow state: the [`FlowPersistence`] trait and its default SQLite backend.
//!
//! A save is a [`FlowSnapshot`]: the state (as JSON, with its `id`) plus the run's progress (the
//! outputs of completed methods, the calls scheduled but not completed, half-completed joins,
//! feedback answers). Resuming re-runs only the scheduled calls, so completed methods are not run
//! again. Snapshots are appended, never updated: the newest row of a flow id wins, older rows are
//! its history.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use crewai_core::usage::UsageSummary;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{BoxError, PersistenceError};
use crate::feedback::{AwaitingFeedback, FeedbackRecord};
use crate::trigger::JoinProgress;

/// One method's output in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodRecord {
    pub method: String,
    pub output: Value,
}

/// A call scheduled but not completed when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub method: String,
    /// The method or label whose completion triggered it (`None` for a start at kickoff).
    pub triggered_by: Option<String>,
    pub trigger_output: Option<Value>,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Running,
    AwaitingFeedback,
    Completed,
    /// Stopped before an LLM call that would have gone over the flow's budget; resuming (with a
    /// higher limit) re-runs the method that was stopped.
    BudgetExceeded,
}

/// The execution progress saved beside the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunProgress {
    pub status: RunStatus,
    pub completed: Vec<MethodRecord>,
    pub pending: Vec<PendingCall>,
    /// Half-completed `and` joins, per listening method.
    pub joins: std::collections::BTreeMap<String, JoinProgress>,
    pub method_calls: u32,
    pub feedback: Vec<FeedbackRecord>,
    pub awaiting_feedback: Vec<AwaitingFeedback>,
    /// What the run's LLM calls used so far; a resumed run keeps counting from it, so the
    /// flow's budget covers the whole run.
    pub usage: UsageSummary,
}

/// One saved point of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSnapshot {
    pub flow_uuid: String,
    /// The method after which it was saved (`kickoff` / `finish` for the run's edges).
    pub method_name: String,
    pub timestamp: DateTime<Utc>,
    pub state: Value,
    pub progress: RunProgress,
}

/// A place to keep flow snapshots (SQLite by default; a Postgres one can implement the same).
#[async_trait]
pub trait FlowPersistence: Send + Sync {
    /// Appends a snapshot.
    async fn save_state(&self, snapshot: &FlowSnapshot) -> Result<(), PersistenceError>;
    /// The newest snapshot of `flow_uuid`, if any.
    async fn load_state(&self, flow_uuid: &str) -> Result<Option<FlowSnapshot>, PersistenceError>;
}

/// SQLite persistence: one file in WAL mode with a busy timeout, so several processes can share it.
/// The table keeps CrewAI's columns (`flow_states(id, flow_uuid, method_name, timestamp,
/// state_json)`) plus `progress_json`.
///
/// ```
/// use crewai_flow::{FlowPersistence, SqliteFlowPersistence};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteFlowPersistence::open(dir.path().join("flow_states.db")).unwrap();
/// assert!(store.load_state("missing").await.unwrap().is_none());
/// # });
/// ```
#[derive(Clone)]
pub struct SqliteFlowPersistence {
    path: PathBuf,
    connection: Arc<Mutex<Connection>>,
}

impl std::fmt::Debug for SqliteFlowPersistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteFlowPersistence")
            .field("path", &self.path)
            .finish()
    }
}

/// How long a writer waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

impl SqliteFlowPersistence {
    /// `$CREWAI_STORAGE_DIR/flow_states.db`, or `.crewai/flow_states.db` under the working directory.
    pub fn default_path() -> PathBuf {
        std::env::var_os("CREWAI_STORAGE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".crewai"))
            .join("flow_states.db")
    }

    /// Opens (creating if needed) the database at `path`. Blocks briefly on file I/O.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PersistenceError> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| PersistenceError::Io {
                path: shown.clone(),
                source,
            })?;
        }
        let sqlite = |source| PersistenceError::Sqlite {
            path: shown.clone(),
            source,
        };
        let connection = Connection::open(&path).map_err(sqlite)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        // journal_mode returns a row, so it is queried rather than executed.
        connection
            .query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(sqlite)?;
        connection
            .execute_batch(
                "PRAGMA synchronous=NORMAL;
                 CREATE TABLE IF NOT EXISTS flow_states (
                     id INTEGER PRIMARY KEY AUTOINCREMENT,
                     flow_uuid TEXT NOT NULL,
                     method_name TEXT NOT NULL,
                     timestamp TEXT NOT NULL,
                     state_json TEXT NOT NULL,
                     progress_json TEXT NOT NULL DEFAULT '{}'
                 );
                 CREATE INDEX IF NOT EXISTS idx_flow_states_uuid ON flow_states(flow_uuid, id);",
            )
            .map_err(sqlite)?;
        Ok(SqliteFlowPersistence {
            path,
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn with_connection<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Result<T, PersistenceError> {
        let connection = self.connection.clone();
        let path = self.path.display().to_string();
        tokio::task::spawn_blocking(move || {
            let connection = connection.lock().unwrap_or_else(|p| p.into_inner());
            work(&connection).map_err(|source| PersistenceError::Sqlite { path, source })
        })
        .await
        .map_err(PersistenceError::Worker)?
    }
}

#[async_trait]
impl FlowPersistence for SqliteFlowPersistence {
    async fn save_state(&self, snapshot: &FlowSnapshot) -> Result<(), PersistenceError> {
        let encode = |value: Result<String, serde_json::Error>| {
            value.map_err(|e| PersistenceError::Decode {
                flow_uuid: snapshot.flow_uuid.clone(),
                source: Box::new(e),
            })
        };
        let state = encode(serde_json::to_string(&snapshot.state))?;
        let progress = encode(serde_json::to_string(&snapshot.progress))?;
        let (uuid, method, timestamp) = (
            snapshot.flow_uuid.clone(),
            snapshot.method_name.clone(),
            snapshot.timestamp.to_rfc3339(),
        );
        self.with_connection(move |c| {
            c.execute(
                "INSERT INTO flow_states (flow_uuid, method_name, timestamp, state_json, progress_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![uuid, method, timestamp, state, progress],
            )
            .map(|_| ())
        })
        .await
    }

    async fn load_state(&self, flow_uuid: &str) -> Result<Option<FlowSnapshot>, PersistenceError> {
        let uuid = flow_uuid.to_string();
        let row = self
            .with_connection(move |c| {
                c.query_row(
                    "SELECT method_name, timestamp, state_json, progress_json FROM flow_states WHERE flow_uuid = ?1 ORDER BY id DESC LIMIT 1",
                    params![uuid],
                    |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?, row.get::<_, String>(3)?)),
                )
                .optional()
            })
            .await?;
        let Some((method_name, timestamp, state, progress)) = row else {
            return Ok(None);
        };
        let decode = |source: BoxError| PersistenceError::Decode {
            flow_uuid: flow_uuid.to_string(),
            source,
        };
        Ok(Some(FlowSnapshot {
            flow_uuid: flow_uuid.to_string(),
            method_name,
            timestamp: DateTime::parse_from_rfc3339(&timestamp)
                .map_err(|e| decode(e.into()))?
                .with_timezone(&Utc),
            state: serde_json::from_str(&state).map_err(|e| decode(e.into()))?,
            progress: serde_json::from_str(&progress).map_err(|e| decode(e.into()))?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshot(uuid: &str, method: &str, counter: u32) -> FlowSnapshot {
        FlowSnapshot {
            flow_uuid: uuid.into(),
            method_name: method.into(),
            timestamp: Utc::now(),
            state: json!({"id": uuid, "counter": counter}),
            progress: RunProgress {
                method_calls: counter,
                ..Default::default()
            },
        }
    }

    #[tokio::test]
    async fn newest_snapshot_wins_and_ids_are_separate() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteFlowPersistence::open(dir.path().join("nested/flows.db")).unwrap();
        store.save_state(&snapshot("a", "one", 1)).await.unwrap();
        store.save_state(&snapshot("a", "two", 2)).await.unwrap();
        store.save_state(&snapshot("b", "one", 7)).await.unwrap();
        let loaded = store.load_state("a").await.unwrap().unwrap();
        assert_eq!(
            (
                loaded.method_name.as_str(),
                loaded.state["counter"].clone(),
                loaded.progress.method_calls
            ),
            ("two", json!(2), 2)
        );
        assert_eq!(
            store.load_state("b").await.unwrap().unwrap().state["counter"],
            7
        );
    }

    #[tokio::test]
    async fn two_connections_share_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flows.db");
        let first = SqliteFlowPersistence::open(&path).unwrap();
        let second = SqliteFlowPersistence::open(&path).unwrap();
        first.save_state(&snapshot("a", "one", 1)).await.unwrap();
        assert_eq!(
            second.load_state("a").await.unwrap().unwrap().state["counter"],
            1
        );
        second.save_state(&snapshot("a", "two", 2)).await.unwrap();
        assert_eq!(
            first.load_state("a").await.unwrap().unwrap().method_name,
            "two"
        );
        let mode: String = first
            .connection
            .lock()
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}
