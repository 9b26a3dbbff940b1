//! Where a crew keeps the task outputs of its latest kickoff, so `Crew::replay` can restart from
//! any task (CrewAI's `latest_kickoff_task_outputs.db`). `crewai-store` implements
//! [`TaskOutputStore`] on SQLite; [`InMemoryTaskOutputStore`] serves tests and short-lived
//! programs.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::interpolate::Inputs;
use crate::output::TaskOutput;

/// One task's stored result from a kickoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredTaskOutput {
    /// The task's id (`Task::id()`).
    pub task_id: String,
    /// The task's name, when it has one (replay accepts either).
    #[serde(default)]
    pub task_name: Option<String>,
    /// Its position in the crew's task list.
    pub task_index: usize,
    pub output: TaskOutput,
    /// The kickoff inputs the task ran with.
    #[serde(default)]
    pub inputs: Inputs,
    /// Whether this output came from a replay.
    #[serde(default)]
    pub was_replayed: bool,
    pub timestamp: DateTime<Utc>,
}

/// A failure of the backing store.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("task output store: {0}")]
    Backend(String),
    #[error("task output store: a stored row could not be read: {0}")]
    Corrupt(String),
}

/// Storage of the latest kickoff's task outputs.
///
/// The calls are short local writes; implementations must not wait on the network.
pub trait TaskOutputStore: Send + Sync {
    /// Forgets everything (a new kickoff starts).
    fn reset(&self) -> Result<(), StoreError>;
    /// Adds a task's output, replacing any stored at the same `task_index`.
    fn save(&self, record: StoredTaskOutput) -> Result<(), StoreError>;
    /// The stored outputs, ordered by `task_index`.
    fn load(&self) -> Result<Vec<StoredTaskOutput>, StoreError>;
}

/// A [`TaskOutputStore`] in memory (one per crew unless shared on purpose).
///
/// ```
/// use crewai_core::store::{InMemoryTaskOutputStore, StoredTaskOutput, TaskOutputStore};
/// use crewai_core::output::TaskOutput;
/// let store = InMemoryTaskOutputStore::new();
/// store.save(StoredTaskOutput {
///     task_id: "t1".into(), task_name: None, task_index: 0,
///     output: TaskOutput::new("d", "e", "raw", "Agent"), inputs: Default::default(),
///     was_replayed: false, timestamp: chrono::Utc::now(),
/// }).unwrap();
/// assert_eq!(store.load().unwrap()[0].output.raw, "raw");
/// ```
#[derive(Debug, Clone, Default)]
pub struct InMemoryTaskOutputStore {
    rows: Arc<Mutex<Vec<StoredTaskOutput>>>,
}

impl InMemoryTaskOutputStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> Result<std::sync::MutexGuard<'_, Vec<StoredTaskOutput>>, StoreError> {
        self.rows.lock().map_err(|_| {
            StoreError::Backend("a writer panicked while holding the in-memory store".into())
        })
    }
}

impl TaskOutputStore for InMemoryTaskOutputStore {
    fn reset(&self) -> Result<(), StoreError> {
        self.rows()?.clear();
        Ok(())
    }

    fn save(&self, record: StoredTaskOutput) -> Result<(), StoreError> {
        let mut rows = self.rows()?;
        match rows
            .iter_mut()
            .find(|row| row.task_index == record.task_index)
        {
            Some(existing) => *existing = record,
            None => {
                rows.push(record);
                rows.sort_by_key(|row| row.task_index);
            }
        }
        Ok(())
    }

    fn load(&self) -> Result<Vec<StoredTaskOutput>, StoreError> {
        Ok(self.rows()?.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(index: usize, raw: &str) -> StoredTaskOutput {
        StoredTaskOutput {
            task_id: format!("t{index}"),
            task_name: None,
            task_index: index,
            output: TaskOutput::new("d", "e", raw, "A"),
            inputs: Inputs::new(),
            was_replayed: false,
            timestamp: Utc::now(),
        }
    }

    #[test]
    fn save_replaces_by_index_and_keeps_order() {
        let store = InMemoryTaskOutputStore::new();
        store.save(row(1, "b")).unwrap();
        store.save(row(0, "a")).unwrap();
        store.save(row(1, "b2")).unwrap();
        let rows = store.load().unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| r.output.raw.as_str())
                .collect::<Vec<_>>(),
            ["a", "b2"]
        );
        store.reset().unwrap();
        assert!(store.load().unwrap().is_empty());
    }
}
