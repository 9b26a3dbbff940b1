//! The training log (`training_examples`): each iteration of `crewai train`, kept as it happens.

use async_trait::async_trait;
use chrono::Utc;
use crewai_core::store::StoreError as CoreStoreError;
use crewai_core::training::{TrainingExample, TrainingLog};
use rusqlite::params;

use crate::Store;
use crate::error::StoreError;

impl Store {
    /// Keeps one training iteration of `crew`.
    pub fn record_training_example(
        &self,
        crew: &str,
        example: &TrainingExample,
    ) -> Result<(), StoreError> {
        self.conn()?
            .execute(
                "INSERT INTO training_examples
                 (crew, iteration, agent_role, task, initial_output, human_feedback, improved_output, recorded_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    crew,
                    i64::from(example.iteration),
                    example.agent_role,
                    example.task,
                    example.initial_output,
                    example.human_feedback,
                    example.improved_output,
                    Utc::now().to_rfc3339(),
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Every training iteration kept, with its crew's name, oldest first.
    pub fn training_examples(&self) -> Result<Vec<(String, TrainingExample)>, StoreError> {
        let conn = self.conn()?;
        let rows = self.select(
            &conn,
            "SELECT crew, iteration, agent_role, task, initial_output, human_feedback, improved_output
             FROM training_examples ORDER BY id",
            [],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    TrainingExample {
                        iteration: 0,
                        agent_role: r.get(2)?,
                        task: r.get(3)?,
                        initial_output: r.get(4)?,
                        human_feedback: r.get(5)?,
                        improved_output: r.get(6)?,
                    },
                ))
            },
        )?;
        rows.into_iter()
            .map(|(crew, iteration, mut example)| {
                example.iteration = u32::try_from(iteration).map_err(|_| {
                    self.corrupt(format!("training iteration {iteration} is out of range"))
                })?;
                Ok((crew, example))
            })
            .collect()
    }
}

/// Runs on tokio's blocking pool, as the other trait implementations do.
#[async_trait]
impl TrainingLog for Store {
    async fn record(&self, crew: &str, example: &TrainingExample) -> Result<(), CoreStoreError> {
        let (crew, example) = (crew.to_string(), example.clone());
        self.for_engine(move |store| store.record_training_example(&crew, &example))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn iterations_are_kept_in_order_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let example = |iteration: u32, feedback: &str| TrainingExample {
            iteration,
            agent_role: "Writer".into(),
            task: "line".into(),
            initial_output: "Bees dance.".into(),
            human_feedback: feedback.into(),
            improved_output: "Bees dance (Frisch).".into(),
        };
        let log: &dyn TrainingLog = &store;
        log.record("crew", &example(1, "Cite.")).await.unwrap();
        log.record("crew", &example(2, "")).await.unwrap();
        drop(store);
        let kept = Store::open_project(dir.path())
            .unwrap()
            .training_examples()
            .unwrap();
        assert_eq!(
            kept,
            vec![
                ("crew".to_string(), example(1, "Cite.")),
                ("crew".to_string(), example(2, ""))
            ]
        );
    }
}
