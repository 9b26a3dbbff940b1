//! # crewai-store
//!
//! The embedded SQLite database of a project, kept in its `.crewai/` folder:
//!
//! - `latest_kickoff_task_outputs`: the task outputs of the latest kickoff, with CrewAI's columns
//!   (task_id, expected_output, output JSON, task_index, inputs JSON, was_replayed, timestamp),
//!   so `crewai replay -t TASK_ID` can re-run from any task with the earlier outputs as context.
//!   [`Store`] implements crewai-core's [`TaskOutputStore`] for that.
//! - `runs` and `run_task_outputs`: the run journal. One row per run (its id, crew, inputs, task
//!   keys, status, final output or error, usage, the run it was forked from) and one row per
//!   finished task of a run, written as the task finishes. [`Store`] implements crewai-core's
//!   [`RunJournal`], so `Crew::resume` continues a run whose process was killed.
//!
//! The database runs in WAL mode with `synchronous = NORMAL`: each write is one short
//! transaction, committed when the call returns, and survives the process being killed (a power
//! loss may lose the last commits, never corrupt the file). Databases written before the journal
//! existed are migrated in place when opened; their runs are listed under their number.
//!
//! The trait methods are synchronous, as the traits are: each is one short local write. The
//! `*_async` methods run the same work on tokio's blocking pool.
//!
//! ```
//! use crewai_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_project(dir.path()).unwrap();
//! assert!(store.path().unwrap().ends_with(".crewai/crewai.db"));
//! assert!(store.task_outputs().unwrap().is_empty());
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
pub use crewai_core::store::RunStatus;
use crewai_core::store::{
    RunEnd, RunJournal, RunOwner, RunParent, RunStart, StoreError as CoreStoreError, StoredRun,
    StoredTaskOutput, TaskOutputStore,
};
use crewai_llm::Usage;
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

/// One run, as [`Store::runs`] lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id (`crewai run --resume` takes it); a run recorded before the journal existed
    /// shows its row number and cannot be resumed.
    pub id: String,
    pub crew: String,
    pub inputs: Inputs,
    pub status: RunStatus,
    /// The final output's raw text when the run completed.
    pub output: Option<String>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// Token usage as JSON (`prompt_tokens`, `completion_tokens`, ...).
    pub token_usage: Option<Value>,
    /// The run it was forked from.
    pub parent: Option<RunParent>,
    /// How many of its tasks have a journaled output.
    pub tasks_finished: usize,
    /// How many tasks the crew had (0 for runs from before the journal).
    pub task_count: usize,
    /// The attempt running it, for a `running` run (its process may be gone:
    /// [`RunOwner::is_alive`]).
    #[serde(default)]
    pub owner: Option<RunOwner>,
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
CREATE TABLE IF NOT EXISTS run_task_outputs (
    run_id TEXT NOT NULL,
    task_index INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    task_name TEXT,
    output JSON NOT NULL,
    inputs JSON NOT NULL,
    was_replayed BOOLEAN NOT NULL DEFAULT 0,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (run_id, task_index)
);
";

/// Columns the run journal added to `runs`, with their types (added to older databases).
const RUN_JOURNAL_COLUMNS: [(&str, &str); 8] = [
    ("run_id", "TEXT"),
    ("task_keys", "JSON"),
    ("parent_run_id", "TEXT"),
    ("fork_task_index", "INTEGER"),
    // The attempt running the run (NULL once it ended): see `RunOwner`.
    ("owner_pid", "INTEGER"),
    ("owner_token", "TEXT"),
    ("owner_since", "TEXT"),
    ("owner_heartbeat", "TEXT"),
];

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

    /// The latest runs, newest first.
    pub fn runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn()?;
        let mut statement = conn
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT ?1"
            ))
            .map_err(|e| self.sql(e))?;
        let rows = statement
            .query_map(params![limit as i64], RunRow::read)
            .map_err(|e| self.sql(e))?;
        let mut runs = Vec::new();
        for row in rows {
            let row = row.map_err(|e| self.sql(e))?;
            let task_count = self.parse_task_keys(&row)?.len();
            let owner = match &row.run_id {
                Some(run_id) => self.owner_of(&conn, run_id)?,
                None => None,
            };
            runs.push(RunRecord {
                id: row.run_id.clone().unwrap_or_else(|| row.number.to_string()),
                crew: row.crew.clone(),
                inputs: self.parse_json(&row, "inputs", &row.inputs)?,
                status: self.parse_status(&row)?,
                output: row.output.clone(),
                error: row.error.clone(),
                token_usage: row
                    .usage
                    .as_deref()
                    .map(|usage| self.parse_json(&row, "token_usage", usage))
                    .transpose()?,
                parent: row.parent(),
                tasks_finished: usize::try_from(row.tasks_finished).unwrap_or(0),
                task_count,
                owner,
                started_at: self.parse_started(&row)?,
                finished_at: row.finished_at.as_deref().and_then(parse_time),
            });
        }
        Ok(runs)
    }

    fn parse_json<T: serde::de::DeserializeOwned>(
        &self,
        row: &RunRow,
        column: &str,
        text: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text)
            .map_err(|e| self.corrupt(format!("run {}: {column}: {e}", row.shown_id())))
    }

    fn parse_status(&self, row: &RunRow) -> Result<RunStatus, StoreError> {
        RunStatus::parse(&row.status)
            .ok_or_else(|| self.corrupt(format!("run {}: status {:?}", row.shown_id(), row.status)))
    }

    fn parse_started(&self, row: &RunRow) -> Result<DateTime<Utc>, StoreError> {
        parse_time(&row.started_at).ok_or_else(|| {
            self.corrupt(format!(
                "run {}: started_at {:?}",
                row.shown_id(),
                row.started_at
            ))
        })
    }

    fn parse_task_keys(&self, row: &RunRow) -> Result<Vec<String>, StoreError> {
        row.task_keys
            .as_deref()
            .map(|keys| self.parse_json(row, "task_keys", keys))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// Writes one finished task of a run (inside the caller's transaction).
    fn insert_run_task(
        &self,
        conn: &Connection,
        run_id: &str,
        record: &StoredTaskOutput,
    ) -> Result<(), StoreError> {
        let output =
            serde_json::to_string(&record.output).map_err(|e| self.corrupt(e.to_string()))?;
        let inputs =
            serde_json::to_string(&record.inputs).map_err(|e| self.corrupt(e.to_string()))?;
        conn.execute(
            "INSERT OR REPLACE INTO run_task_outputs
             (run_id, task_index, task_id, task_name, output, inputs, was_replayed, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run_id,
                record.task_index as i64,
                record.task_id,
                record.task_name,
                output,
                inputs,
                record.was_replayed,
                record.timestamp.to_rfc3339(),
            ],
        )
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records a run starting (or, for an id already stored, running again) and claims it for
    /// `start.owner`; fails with [`StoreError::RunOwned`] when another live attempt owns it.
    ///
    /// The claim is one compare-and-set: the upsert only replaces the owner it saw dead, so of
    /// two processes claiming at once exactly one changes the row.
    pub fn start_run(&self, start: &RunStart) -> Result<(), StoreError> {
        let inputs =
            serde_json::to_string(&start.inputs).map_err(|e| self.corrupt(e.to_string()))?;
        let keys =
            serde_json::to_string(&start.task_keys).map_err(|e| self.corrupt(e.to_string()))?;
        let mut conn = self.conn()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        let seen = self.owner_of(&tx, &start.run_id)?;
        if let Some(owner) = &seen
            && owner.token != start.owner.token
            && owner.is_alive(Utc::now())
        {
            return Err(self.owned(&start.run_id, owner.clone()));
        }
        let owner = &start.owner;
        let changed = tx
            .execute(
                "INSERT INTO runs (run_id, crew, inputs, status, task_keys, parent_run_id, fork_task_index, started_at,
                                   owner_pid, owner_token, owner_since, owner_heartbeat)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, error = NULL, finished_at = NULL,
                     owner_pid = excluded.owner_pid, owner_token = excluded.owner_token,
                     owner_since = excluded.owner_since, owner_heartbeat = excluded.owner_heartbeat
                 WHERE runs.owner_token IS ?13",
                params![
                    start.run_id,
                    start.crew,
                    inputs,
                    RunStatus::Running.as_str(),
                    keys,
                    start.parent.as_ref().map(|p| p.run_id.clone()),
                    start.parent.as_ref().map(|p| p.from_task_index as i64),
                    Utc::now().to_rfc3339(),
                    i64::from(owner.pid),
                    owner.token,
                    owner.since.to_rfc3339(),
                    owner.heartbeat_at.to_rfc3339(),
                    seen.as_ref().map(|seen| seen.token.clone()),
                ],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            // Claimed by someone else between our read and our write.
            return Err(match self.owner_of(&tx, &start.run_id)? {
                Some(winner) => self.owned(&start.run_id, winner),
                None => self.corrupt(format!("run {}: the claim changed no row", start.run_id)),
            });
        }
        for record in &start.carried_over {
            self.insert_run_task(&tx, &start.run_id, record)?;
        }
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(())
    }

    fn owned(&self, run_id: &str, owner: RunOwner) -> StoreError {
        StoreError::RunOwned {
            run_id: run_id.to_string(),
            owner: Box::new(owner),
        }
    }

    /// The recorded owner of a run (`None`: no such run, or it ended).
    fn owner_of(&self, conn: &Connection, run_id: &str) -> Result<Option<RunOwner>, StoreError> {
        let row = conn
            .query_row(
                "SELECT owner_pid, owner_token, owner_since, owner_heartbeat FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| {
                    Ok((
                        r.get::<_, Option<i64>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((Some(pid), Some(token), Some(since), Some(heartbeat))) = row else {
            return Ok(None);
        };
        let bad =
            |what: &str, value: &str| self.corrupt(format!("run {run_id}: owner {what} {value:?}"));
        Ok(Some(RunOwner {
            pid: u32::try_from(pid).map_err(|_| bad("pid", &pid.to_string()))?,
            token,
            since: parse_time(&since).ok_or_else(|| bad("since", &since))?,
            heartbeat_at: parse_time(&heartbeat).ok_or_else(|| bad("heartbeat", &heartbeat))?,
        }))
    }

    /// Records that the attempt holding `owner_token` is alive.
    pub fn heartbeat_run(&self, run_id: &str, owner_token: &str) -> Result<(), StoreError> {
        let conn = self.conn()?;
        let changed = conn
            .execute(
                "UPDATE runs SET owner_heartbeat = ?1 WHERE run_id = ?2 AND owner_token = ?3",
                params![Utc::now().to_rfc3339(), run_id, owner_token],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 1 {
            return Ok(());
        }
        Err(match self.owner_of(&conn, run_id)? {
            Some(other) => self.owned(run_id, other),
            None => self.corrupt(format!(
                "run {run_id} is not running (unknown or ended); there is no attempt to keep alive"
            )),
        })
    }

    /// Records one finished task of a started run, and what the run has used so far.
    pub fn record_run_task(
        &self,
        run_id: &str,
        record: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let usage = serde_json::to_string(usage).map_err(|e| self.corrupt(e.to_string()))?;
        let mut conn = self.conn()?;
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        let known = tx
            .execute(
                "UPDATE runs SET token_usage = ?1 WHERE run_id = ?2",
                params![usage, run_id],
            )
            .map_err(|e| self.sql(e))?;
        if known == 0 {
            return Err(self.corrupt(format!("no run with id {run_id}")));
        }
        self.insert_run_task(&tx, run_id, record)?;
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records how a run ended and releases its owner; an end without usage keeps the usage its
    /// tasks journaled.
    pub fn finish_run(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        let usage = end
            .usage
            .map(|usage| serde_json::to_string(&usage))
            .transpose()
            .map_err(|e| self.corrupt(e.to_string()))?;
        let changed = self
            .conn()?
            .execute(
                "UPDATE runs SET status = ?1, output = ?2, token_usage = COALESCE(?3, token_usage), error = ?4,
                     finished_at = ?5, owner_pid = NULL, owner_token = NULL, owner_since = NULL,
                     owner_heartbeat = NULL
                 WHERE run_id = ?6",
                params![end.status.as_str(), end.output, usage, end.error, Utc::now().to_rfc3339(), run_id],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            return Err(self.corrupt(format!("no run with id {run_id}")));
        }
        Ok(())
    }

    /// The run with this id and its finished tasks.
    pub fn load_run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        let conn = self.conn()?;
        let row = conn
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
                params![run_id],
                RunRow::read,
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner = self.owner_of(&conn, run_id)?;
        let mut statement = conn
            .prepare(
                "SELECT task_index, task_id, task_name, output, inputs, was_replayed, finished_at
                 FROM run_task_outputs WHERE run_id = ?1 ORDER BY task_index",
            )
            .map_err(|e| self.sql(e))?;
        let tasks = statement
            .query_map(params![run_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut finished = BTreeMap::new();
        for task in tasks {
            let (index, task_id, task_name, output, inputs, was_replayed, at) =
                task.map_err(|e| self.sql(e))?;
            let task_index = usize::try_from(index)
                .map_err(|_| self.corrupt(format!("run {run_id}: negative task_index {index}")))?;
            finished.insert(
                task_index,
                StoredTaskOutput {
                    output: self.parse_json(&row, "task output", &output)?,
                    inputs: self.parse_json(&row, "task inputs", &inputs)?,
                    task_id,
                    task_name,
                    task_index,
                    was_replayed,
                    timestamp: parse_time(&at).ok_or_else(|| {
                        self.corrupt(format!("run {run_id}: task {task_index}: time {at:?}"))
                    })?,
                },
            );
        }
        Ok(Some(StoredRun {
            run_id: run_id.to_string(),
            crew: row.crew.clone(),
            inputs: self.parse_json(&row, "inputs", &row.inputs)?,
            task_keys: self.parse_task_keys(&row)?,
            parent: row.parent(),
            status: self.parse_status(&row)?,
            tasks: finished,
            output: row.output.clone(),
            error: row.error.clone(),
            usage: row
                .usage
                .as_deref()
                .map(|usage| self.parse_json::<Usage>(&row, "token_usage", usage))
                .transpose()?,
            owner,
            started_at: self.parse_started(&row)?,
            finished_at: row.finished_at.as_deref().and_then(parse_time),
        }))
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

    /// [`Store::load_run`] on the blocking pool.
    pub async fn load_run_async(&self, run_id: String) -> Result<Option<StoredRun>, StoreError> {
        self.blocking(move |s| s.load_run(&run_id)).await
    }

    /// [`Store::runs`] on the blocking pool.
    pub async fn runs_async(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        self.blocking(move |s| s.runs(limit)).await
    }
}

/// A `runs` row as stored (columns decoded later, so errors can name the run).
struct RunRow {
    number: i64,
    run_id: Option<String>,
    crew: String,
    inputs: String,
    status: String,
    output: Option<String>,
    error: Option<String>,
    usage: Option<String>,
    task_keys: Option<String>,
    parent_run_id: Option<String>,
    fork_task_index: Option<i64>,
    started_at: String,
    finished_at: Option<String>,
    tasks_finished: i64,
}

/// The columns [`RunRow::read`] expects, in order (the last counts the run's finished tasks).
const RUN_COLUMNS: &str = "id, run_id, crew, inputs, status, output, error, token_usage, task_keys,
     parent_run_id, fork_task_index, started_at, finished_at,
     (SELECT COUNT(*) FROM run_task_outputs t WHERE t.run_id = runs.run_id)";

impl RunRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            number: row.get(0)?,
            run_id: row.get(1)?,
            crew: row.get(2)?,
            inputs: row.get(3)?,
            status: row.get(4)?,
            output: row.get(5)?,
            error: row.get(6)?,
            usage: row.get(7)?,
            task_keys: row.get(8)?,
            parent_run_id: row.get(9)?,
            fork_task_index: row.get(10)?,
            started_at: row.get(11)?,
            finished_at: row.get(12)?,
            tasks_finished: row.get(13)?,
        })
    }

    fn shown_id(&self) -> String {
        self.run_id
            .clone()
            .unwrap_or_else(|| format!("#{}", self.number))
    }

    fn parent(&self) -> Option<RunParent> {
        Some(RunParent {
            run_id: self.parent_run_id.clone()?,
            from_task_index: usize::try_from(self.fork_task_index?).ok()?,
        })
    }
}

/// Adds the run journal's columns to a `runs` table made before them.
fn migrate_runs(conn: &Connection) -> rusqlite::Result<()> {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info('runs')")?;
    let existing = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (column, kind) in RUN_JOURNAL_COLUMNS {
        if !existing.iter().any(|name| name == column) {
            conn.execute_batch(&format!("ALTER TABLE runs ADD COLUMN {column} {kind}"))?;
        }
    }
    conn.execute_batch("CREATE UNIQUE INDEX IF NOT EXISTS runs_by_run_id ON runs (run_id)")
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
        StoreError::RunOwned { run_id, owner } => CoreStoreError::RunOwned { run_id, owner },
        other => CoreStoreError::Backend(other.to_string()),
    }
}

impl RunJournal for Store {
    fn start(&self, run: &RunStart) -> Result<(), CoreStoreError> {
        self.start_run(run).map_err(to_core)
    }

    fn heartbeat(&self, run_id: &str, owner_token: &str) -> Result<(), CoreStoreError> {
        self.heartbeat_run(run_id, owner_token).map_err(to_core)
    }

    fn task_finished(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), CoreStoreError> {
        self.record_run_task(run_id, task, usage).map_err(to_core)
    }

    fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), CoreStoreError> {
        self.finish_run(run_id, end).map_err(to_core)
    }

    fn load(&self, run_id: &str) -> Result<Option<StoredRun>, CoreStoreError> {
        self.load_run(run_id).map_err(to_core)
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

    fn start(run_id: &str, carried_over: Vec<StoredTaskOutput>) -> RunStart {
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

    fn spent(tokens: u64) -> Usage {
        Usage {
            total_tokens: tokens,
            ..Usage::default()
        }
    }

    #[test]
    fn the_journal_survives_reopening_the_file_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let mode: String = store
            .conn()
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let journal: Arc<dyn RunJournal> = Arc::new(store.clone());
        journal
            .start(&start("r1", vec![record(0, "a", "first")]))
            .unwrap();
        // Out of order: the async task 2 finished before task 1.
        journal
            .task_finished("r1", &record(2, "c", "third"), &spent(5))
            .unwrap();
        assert!(
            journal
                .task_finished("nope", &record(1, "b", "x"), &spent(5))
                .is_err()
        );
        drop((journal, store));

        let reopened = Store::open_project(dir.path()).unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.inputs["topic"], "AI");
        assert_eq!(run.task_keys, ["task0", "task1", "task2"]);
        assert_eq!(run.tasks.keys().copied().collect::<Vec<_>>(), [0, 2]);
        assert_eq!(run.tasks[&2].output.raw, "third");
        assert_eq!(run.tasks[&0].task_name.as_deref(), Some("task0"));
        assert_eq!(
            run.usage.unwrap().total_tokens,
            5,
            "journaled with the task"
        );
        assert_eq!(run.owner.unwrap().pid, std::process::id());

        let usage = spent(7);
        reopened
            .finish_run(
                "r1",
                &RunEnd::stopped(RunStatus::BudgetStopped, "over budget", Some(usage)),
            )
            .unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.owner, None, "an ended run is released");
        // A resume marks it running again and keeps what finished.
        reopened.start_run(&start("r1", Vec::new())).unwrap();
        reopened
            .record_run_task("r1", &record(1, "b", "second"), &usage)
            .unwrap();
        reopened
            .finish_run("r1", &RunEnd::completed("third", usage))
            .unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.error, None);
        assert_eq!(run.tasks.len(), 3);
        assert_eq!(run.usage.unwrap().total_tokens, 7);
        assert!(reopened.load_run("other").unwrap().is_none());
        assert!(
            reopened
                .finish_run("other", &RunEnd::completed("x", usage))
                .is_err()
        );
    }

    /// An owner whose process does not exist: beyond Linux's largest pid (2^22).
    fn dead_owner() -> RunOwner {
        RunOwner {
            pid: 4_194_304 + 11,
            ..RunOwner::this_process()
        }
    }

    #[test]
    fn a_run_is_claimed_by_one_live_attempt_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let first = start("r", Vec::new());
        store.start_run(&first).unwrap();
        store
            .record_run_task("r", &record(0, "a", "x"), &spent(30))
            .unwrap();

        // Another process's resume while this one is alive and heartbeating.
        let other = Store::open_project(dir.path()).unwrap();
        let refused = other.start_run(&start("r", Vec::new())).unwrap_err();
        let message = refused.to_string();
        assert!(matches!(refused, StoreError::RunOwned { .. }), "{message}");
        assert!(
            message.contains(&format!(
                "run r is still running in process {}",
                std::process::id()
            )),
            "{message}"
        );
        store.heartbeat_run("r", &first.owner.token).unwrap();
        let run = other.load_run("r").unwrap().unwrap();
        assert_eq!(run.owner.as_ref().unwrap().token, first.owner.token);
        assert_eq!(
            run.usage.unwrap().total_tokens,
            30,
            "the refusal changed nothing"
        );
    }

    #[test]
    fn a_run_whose_owner_is_gone_or_stale_is_claimed_and_the_old_owner_learns_it() {
        let store = Store::in_memory().unwrap();
        let killed = RunStart {
            owner: dead_owner(),
            ..start("r", Vec::new())
        };
        store.start_run(&killed).unwrap();
        let resume = start("r", Vec::new());
        store.start_run(&resume).unwrap();
        assert_eq!(
            store.load_run("r").unwrap().unwrap().owner.unwrap().token,
            resume.owner.token
        );
        // The old attempt, were it still going, finds the run taken over.
        let taken = store.heartbeat_run("r", &killed.owner.token).unwrap_err();
        assert!(matches!(taken, StoreError::RunOwned { .. }), "{taken}");

        // A live pid with a heartbeat older than the lease (a pid reused after a reboot).
        let stale = RunOwner {
            heartbeat_at: Utc::now()
                - chrono::Duration::from_std(crewai_core::store::LEASE_TIMEOUT).unwrap(),
            ..RunOwner::this_process()
        };
        store
            .start_run(&RunStart {
                owner: stale,
                ..start("s", Vec::new())
            })
            .unwrap();
        store.start_run(&start("s", Vec::new())).unwrap();
        assert!(
            store
                .heartbeat_run("ended", "token")
                .unwrap_err()
                .to_string()
                .contains("not running")
        );
    }

    #[test]
    fn of_concurrent_claims_exactly_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store
            .start_run(&RunStart {
                owner: dead_owner(),
                ..start("r", Vec::new())
            })
            .unwrap();
        let path = store.path().unwrap().to_path_buf();
        let barrier = std::sync::Barrier::new(8);
        let won = std::thread::scope(|scope| {
            let claims: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let mine = Store::open(&path).unwrap();
                        barrier.wait();
                        mine.start_run(&start("r", Vec::new()))
                    })
                })
                .collect();
            claims
                .into_iter()
                .map(|claim| claim.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(
            won.iter().filter(|claim| claim.is_ok()).count(),
            1,
            "{won:?}"
        );
        assert!(
            won.iter()
                .filter_map(|claim| claim.as_ref().err())
                .all(|error| matches!(error, StoreError::RunOwned { .. }))
        );
    }

    #[test]
    fn runs_are_listed_newest_first_with_forks_and_progress() {
        let store = Store::in_memory().unwrap();
        store.start_run(&start("first", Vec::new())).unwrap();
        store
            .record_run_task("first", &record(0, "a", "x"), &spent(1))
            .unwrap();
        store
            .finish_run(
                "first",
                &RunEnd::stopped(RunStatus::Cancelled, "Ctrl-C", None),
            )
            .unwrap();
        let mut fork = start("second", vec![record(0, "a", "x")]);
        fork.parent = Some(RunParent {
            run_id: "first".into(),
            from_task_index: 1,
        });
        store.start_run(&fork).unwrap();
        let runs = store.runs(10).unwrap();
        assert_eq!(runs[0].id, "second");
        assert_eq!(runs[0].status, RunStatus::Running);
        assert_eq!(runs[0].parent.as_ref().unwrap().run_id, "first");
        assert_eq!((runs[0].tasks_finished, runs[0].task_count), (1, 3));
        assert_eq!(runs[0].owner.as_ref().unwrap().pid, std::process::id());
        assert_eq!(runs[1].owner, None);
        assert_eq!(runs[1].status, RunStatus::Cancelled);
        assert_eq!(runs[1].error.as_deref(), Some("Ctrl-C"));
        assert!(runs[1].finished_at.is_some());
        // The original is untouched by its fork.
        assert_eq!(store.load_run("first").unwrap().unwrap().tasks.len(), 1);
    }

    #[test]
    fn opens_a_database_from_before_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, crew TEXT NOT NULL,
                 inputs JSON NOT NULL, status TEXT NOT NULL, output TEXT, error TEXT,
                 token_usage JSON, replay BOOLEAN NOT NULL DEFAULT 0, started_at TEXT NOT NULL,
                 finished_at TEXT);
                 INSERT INTO runs (crew, inputs, status, output, started_at)
                 VALUES ('old', '{}', 'completed', 'done', '2025-01-01T00:00:00+00:00');",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        store.start_run(&start("new", Vec::new())).unwrap();
        let runs = store.runs(10).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].id, "1");
        assert_eq!(runs[1].output.as_deref(), Some("done"));
        assert_eq!(runs[1].task_count, 0);
        // Opening again finds the columns already there.
        assert_eq!(Store::open(&path).unwrap().runs(10).unwrap().len(), 2);
    }

    #[tokio::test]
    async fn async_methods_run_off_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store.save_task_output(&record(0, "a", "first")).unwrap();
        assert_eq!(store.task_outputs_async().await.unwrap().len(), 1);
        store.start_run(&start("r", Vec::new())).unwrap();
        assert_eq!(
            store
                .load_run_async("r".into())
                .await
                .unwrap()
                .unwrap()
                .status,
            RunStatus::Running
        );
        assert_eq!(store.runs_async(5).await.unwrap()[0].id, "r");
        store.reset_task_outputs_async().await.unwrap();
        assert!(store.task_outputs().unwrap().is_empty());
    }
}
