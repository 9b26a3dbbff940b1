//! [`Crew::replay`]: re-running from a task with the latest kickoff's stored outputs.

use crewai_llm::Usage;

use crate::interpolate::Inputs;
use crate::output::CrewOutput;

use super::kickoff::{RunOrigin, RunPlan, RunRequest};
use super::{Crew, CrewError, KickoffOptions};

impl Crew {
    /// Re-runs the crew from `task` (its name or id): the earlier tasks get the outputs stored by the
    /// last kickoff, the inputs are `inputs` or the ones stored with that task.
    pub async fn replay(
        &self,
        task: &str,
        inputs: Option<Inputs>,
    ) -> Result<CrewOutput, CrewError> {
        self.replay_with(task, inputs, KickoffOptions::default())
            .await
    }

    /// [`Crew::replay`] with kickoff options (cancellation, the new run's id).
    pub async fn replay_with(
        &self,
        task: &str,
        inputs: Option<Inputs>,
        options: KickoffOptions,
    ) -> Result<CrewOutput, CrewError> {
        let index = self.task_index(task).ok_or_else(|| {
            CrewError::Replay(format!(
                "Task with id {task} not found in the crew's tasks."
            ))
        })?;
        let stored = self.spec.store.load().await?;
        let mut restored = Vec::with_capacity(index);
        for earlier in 0..index {
            let row = stored.iter().find(|row| row.task_index == earlier).ok_or_else(|| {
                CrewError::Replay(format!(
                    "cannot replay from task '{task}': no stored output for task {} ('{}'); run a kickoff first",
                    earlier + 1,
                    self.spec.tasks[earlier].key()
                ))
            })?;
            restored.push((earlier, row.output.clone()));
        }
        let inputs = inputs.unwrap_or_else(|| {
            stored
                .iter()
                .find(|row| row.task_index == index)
                .map(|row| row.inputs.clone())
                .unwrap_or_default()
        });
        self.run(RunRequest {
            inputs,
            plan: RunPlan {
                restored,
                origin: RunOrigin::Replay,
                prior_usage: Usage::default(),
                // CrewAI plans a replayed run again.
                crew_plan: None,
            },
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }
}
