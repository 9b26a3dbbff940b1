//! Listing the runs of the journal (`crewai log-runs`), and decoding a `runs` row.

use chrono::{DateTime, Utc};
use crewai_core::interpolate::Inputs;
use crewai_core::store::{RunOwner, RunParent, RunStatus};
use rusqlite::params;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;
use crate::{Store, parse_time};

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

impl Store {
    /// The latest runs, newest first.
    pub fn runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn()?;
        let rows = self.select(
            &conn,
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT ?1"),
            params![limit as i64],
            RunRow::read,
        )?;
        let mut runs = Vec::new();
        for row in rows {
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

    pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
        &self,
        row: &RunRow,
        column: &str,
        text: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text)
            .map_err(|e| self.corrupt_json(format!("run {}: {column}", row.shown_id()), e))
    }

    pub(crate) fn parse_status(&self, row: &RunRow) -> Result<RunStatus, StoreError> {
        RunStatus::parse(&row.status)
            .ok_or_else(|| self.corrupt(format!("run {}: status {:?}", row.shown_id(), row.status)))
    }

    pub(crate) fn parse_started(&self, row: &RunRow) -> Result<DateTime<Utc>, StoreError> {
        parse_time(&row.started_at).ok_or_else(|| {
            self.corrupt(format!(
                "run {}: started_at {:?}",
                row.shown_id(),
                row.started_at
            ))
        })
    }

    pub(crate) fn parse_task_keys(&self, row: &RunRow) -> Result<Vec<String>, StoreError> {
        row.task_keys
            .as_deref()
            .map(|keys| self.parse_json(row, "task_keys", keys))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// [`Store::runs`] on the blocking pool (the listing is not part of the journal trait).
    pub async fn runs_async(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        self.blocking(move |s| s.runs(limit)).await
    }
}

/// A `runs` row as stored (columns decoded later, so errors can name the run).
pub(crate) struct RunRow {
    pub(crate) number: i64,
    pub(crate) run_id: Option<String>,
    pub(crate) crew: String,
    pub(crate) inputs: String,
    pub(crate) status: String,
    pub(crate) output: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) usage: Option<String>,
    pub(crate) task_keys: Option<String>,
    pub(crate) parent_run_id: Option<String>,
    pub(crate) fork_task_index: Option<i64>,
    pub(crate) started_at: String,
    pub(crate) finished_at: Option<String>,
    pub(crate) tasks_finished: i64,
}

/// The columns [`RunRow::read`] expects, in order (the last counts the run's finished tasks).
pub(crate) const RUN_COLUMNS: &str =
    "id, run_id, crew, inputs, status, output, error, token_usage, task_keys,
     parent_run_id, fork_task_index, started_at, finished_at,
     (SELECT COUNT(*) FROM run_task_outputs t WHERE t.run_id = runs.run_id)";

impl RunRow {
    pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
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

    pub(crate) fn shown_id(&self) -> String {
        self.run_id
            .clone()
            .unwrap_or_else(|| format!("#{}", self.number))
    }

    pub(crate) fn parent(&self) -> Option<RunParent> {
        Some(RunParent {
            run_id: self.parent_run_id.clone()?,
            from_task_index: usize::try_from(self.fork_task_index?).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{record, spent, start};
    use crewai_core::store::RunEnd;

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

    #[tokio::test]
    async fn the_async_listing_reads_the_same_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store.start_run(&start("r", Vec::new())).unwrap();
        let listed = store.runs_async(5).await.unwrap();
        assert_eq!(listed, store.runs(5).unwrap());
        assert_eq!(listed[0].id, "r");
    }
}
