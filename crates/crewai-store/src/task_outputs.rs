//! `latest_kickoff_task_outputs`: the task outputs of the latest kickoff, read by `replay`.

use async_trait::async_trait;
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
use crewai_core::store::{StoreError as CoreStoreError, StoredTaskOutput, TaskOutputStore};
use rusqlite::{OptionalExtension, params};

use crate::error::StoreError;
use crate::{Store, parse_time};

/// The columns both task output tables share, which [`TaskColumns::read`] reads by name; a query
/// adds its time column as `at`.
pub(crate) const TASK_COLUMNS: &str =
    "task_id, task_name, task_index, output, inputs, was_replayed";

/// A stored task output as its row holds it, before its values are parsed.
pub(crate) struct TaskColumns {
    task_id: String,
    task_name: Option<String>,
    task_index: i64,
    output: String,
    inputs: Option<String>,
    was_replayed: bool,
    at: String,
}

impl TaskColumns {
    /// Reads [`TASK_COLUMNS`] and `at`.
    pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<TaskColumns> {
        Ok(TaskColumns {
            task_id: row.get("task_id")?,
            task_name: row.get("task_name")?,
            task_index: row.get("task_index")?,
            output: row.get("output")?,
            inputs: row.get("inputs")?,
            was_replayed: row.get("was_replayed")?,
            at: row.get("at")?,
        })
    }
}

impl Store {
    /// A stored task output from its columns; `place` (`run <id>: `, or nothing) starts what a
    /// corrupt value is reported as.
    pub(crate) fn stored_task(
        &self,
        columns: TaskColumns,
        place: &str,
    ) -> Result<StoredTaskOutput, StoreError> {
        let TaskColumns {
            task_id,
            task_name,
            task_index,
            output,
            inputs,
            was_replayed,
            at,
        } = columns;
        let output: TaskOutput = serde_json::from_str(&output)
            .map_err(|e| self.corrupt_json(format!("{place}task {task_id}: output"), e))?;
        let inputs: Inputs = match inputs {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| self.corrupt_json(format!("{place}task {task_id}: inputs"), e))?,
            None => Inputs::new(),
        };
        Ok(StoredTaskOutput {
            task_index: usize::try_from(task_index)
                .map_err(|_| self.corrupt(format!("{place}negative task_index {task_index}")))?,
            timestamp: parse_time(&at)
                .ok_or_else(|| self.corrupt(format!("{place}task {task_id}: time {at:?}")))?,
            task_id,
            task_name,
            output,
            inputs,
            was_replayed,
        })
    }

    /// Forgets the stored task outputs (a new kickoff starts).
    pub fn reset_task_outputs(&self) -> Result<(), StoreError> {
        self.conn()?
            .execute("DELETE FROM latest_kickoff_task_outputs", [])
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Stores one task's output, replacing whatever was stored at its index or under its id.
    pub fn save_task_output(&self, record: &StoredTaskOutput) -> Result<(), StoreError> {
        let (output, inputs) = self.task_output_columns(record)?;
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
        let sql = format!(
            "SELECT {TASK_COLUMNS}, timestamp AS at FROM latest_kickoff_task_outputs ORDER BY task_index"
        );
        self.select(&conn, &sql, [], TaskColumns::read)?
            .into_iter()
            .map(|columns| self.stored_task(columns, ""))
            .collect()
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
}

/// Each call runs on tokio's blocking pool, so SQLite never holds up a runtime worker.
#[async_trait]
impl TaskOutputStore for Store {
    async fn reset(&self) -> Result<(), CoreStoreError> {
        self.for_engine(|store| store.reset_task_outputs()).await
    }

    async fn save(&self, record: StoredTaskOutput) -> Result<(), CoreStoreError> {
        self.for_engine(move |store| store.save_task_output(&record))
            .await
    }

    async fn load(&self) -> Result<Vec<StoredTaskOutput>, CoreStoreError> {
        self.for_engine(|store| store.task_outputs()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::record;
    use serde_json::{Value, json};
    use std::sync::Arc;

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

    #[tokio::test]
    async fn implements_the_core_trait() {
        let store = Store::in_memory().unwrap();
        let shared: Arc<dyn TaskOutputStore> = Arc::new(store.clone());
        shared.save(record(0, "a", "x")).await.unwrap();
        assert_eq!(shared.load().await.unwrap()[0].output.raw, "x");
        assert_eq!(store.task_output_count().unwrap(), 1, "the same database");
        shared.reset().await.unwrap();
        assert!(shared.load().await.unwrap().is_empty());
    }
}
