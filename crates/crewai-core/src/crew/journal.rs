//! The run journal from the crew's side: resume and fork, claiming a run and keeping the claim
//! alive, recording each finished task, and the guard that records a dropped kickoff.

use std::sync::Arc;

use chrono::Utc;
use crewai_llm::Usage;

use crate::interpolate::Inputs;
use crate::output::{CrewOutput, TaskOutput};
use crate::store::{
    HEARTBEAT_INTERVAL, RunEnd, RunJournal, RunOwner, RunParent, RunStart, RunStatus, StoreError,
    StoredRun, StoredTaskOutput, TaskOutputStore,
};
use crate::task::Task;
use crate::usage::UsageTracker;

use super::kickoff::{Prepared, RunOrigin, RunPlan, RunRequest};
use super::{Crew, CrewError, KickoffOptions};

impl Crew {
    /// Continues a journaled run that did not complete (killed, failed, cancelled or stopped by
    /// its budget): the tasks that finished keep their stored outputs and are not run again,
    /// the others run with the stored inputs under the same run id.
    ///
    /// The crew must have the run's tasks (same keys, same order). Guardrails, callbacks and
    /// tools are not stored: they are this crew's, task by task, so a resumed task is checked by
    /// its guardrails as a fresh one is. Resuming a completed run returns its stored output and
    /// calls no model.
    ///
    /// A budget (`max_tokens`, `max_cost_usd`) is the run's, not the attempt's: the resumed
    /// attempt starts with what the earlier attempts spent (the journal records the run's usage
    /// with every finished task, so a killed attempt's spending up to its last finished task
    /// counts too), so a run stopped by its budget resumes only with a raised limit. The
    /// returned [`CrewOutput::token_usage`] is this attempt's; the journal's
    /// [`StoredRun::usage`] is the run's total.
    ///
    /// A run is owned by the attempt running it ([`crate::store::RunOwner`]: process id, a token
    /// and a heartbeat every [`HEARTBEAT_INTERVAL`]). Resuming a run whose owner is still alive,
    /// in this process or another, fails with [`StoreError::RunOwned`] before anything runs; a
    /// run whose process is gone, or whose heartbeat is older than
    /// [`crate::store::LEASE_TIMEOUT`], is taken over. An attempt that finds its run taken over
    /// (it had looked dead) stops with that error.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crewai_core::agent::Agent;
    /// use crewai_core::crew::{Crew, KickoffOptions};
    /// use crewai_core::store::{InMemoryRunJournal, RunJournal, RunStatus};
    /// use crewai_core::task::Task;
    /// use crewai_llm::{LlmError, ScriptedLlm};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let llm = Arc::new(ScriptedLlm::new("scripted")
    ///     .then_text("Bees dance.")
    ///     .then_error(LlmError::PermissionDenied { provider: "p".into(), message: "no".into() })
    ///     .then_text("Bees dance, so they talk."));
    /// let agent = Agent::builder().role("Writer").goal("Write").backstory("Brief.").llm(llm.clone()).build()?;
    /// let task = |name: &str| Task::builder().name(name).description(format!("Do {name}")).expected_output("A line").agent(agent.clone()).build();
    /// let journal = Arc::new(InMemoryRunJournal::new());
    /// let crew = Crew::builder().agents(vec![agent.clone()]).tasks(vec![task("facts")?, task("summary")?])
    ///     .run_journal(journal.clone()).build()?;
    ///
    /// let options = KickoffOptions::new().run_id("run-1");
    /// assert!(crew.kickoff_with(Default::default(), options).await.is_err());
    /// assert_eq!(journal.load("run-1").await?.unwrap().status, RunStatus::Failed);
    ///
    /// let output = crew.resume("run-1").await?; // `facts` is not asked again
    /// assert_eq!(output.raw, "Bees dance, so they talk.");
    /// assert_eq!(output.tasks_output[0].raw, "Bees dance.");
    /// assert_eq!(llm.requests().len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn resume(&self, run_id: &str) -> Result<CrewOutput, CrewError> {
        self.resume_with(run_id, KickoffOptions::default()).await
    }

    /// [`Crew::resume`] with kickoff options (cancellation, parent event); `options.run_id` is
    /// ignored, the run keeps its id.
    pub async fn resume_with(
        &self,
        run_id: &str,
        mut options: KickoffOptions,
    ) -> Result<CrewOutput, CrewError> {
        let stored = self.stored_run(run_id).await?;
        if stored.status == RunStatus::Completed {
            return Ok(completed_output(stored));
        }
        options.run_id = Some(stored.run_id.clone());
        self.run(RunRequest {
            inputs: stored.inputs,
            plan: RunPlan {
                restored: stored
                    .tasks
                    .into_iter()
                    .map(|(index, row)| (index, row.output))
                    .collect(),
                origin: RunOrigin::Resume,
                prior_usage: stored.usage.unwrap_or_default(),
                crew_plan: stored.plan,
            },
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    /// Starts a new run from a journaled one: the outputs of the tasks before `from_task` (its
    /// name or key) are copied from run `run_id`, `from_task` and the tasks after it run again
    /// with the stored inputs. The stored run is left as it is.
    pub async fn fork(&self, run_id: &str, from_task: &str) -> Result<CrewOutput, CrewError> {
        self.fork_with(run_id, from_task, KickoffOptions::default())
            .await
    }

    /// [`Crew::fork`] with kickoff options (`options.run_id` names the new run).
    pub async fn fork_with(
        &self,
        run_id: &str,
        from_task: &str,
        options: KickoffOptions,
    ) -> Result<CrewOutput, CrewError> {
        let stored = self.stored_run(run_id).await?;
        let cannot = |message: String| CrewError::Resume {
            crew: self.spec.name.clone(),
            run_id: run_id.to_string(),
            message,
        };
        let index = self.task_index(from_task).ok_or_else(|| {
            cannot(format!(
                "the crew has no task '{from_task}' to fork from; its tasks are: {}",
                self.task_keys().join(", ")
            ))
        })?;
        let mut restored = Vec::with_capacity(index);
        for earlier in 0..index {
            let row = stored.tasks.get(&earlier).ok_or_else(|| {
                cannot(format!(
                    "task {} ('{}') did not finish in that run, so there is nothing to copy; fork from it or an earlier task",
                    earlier + 1,
                    stored.task_keys[earlier]
                ))
            })?;
            restored.push((earlier, row.output.clone()));
        }
        self.run(RunRequest {
            inputs: stored.inputs,
            plan: RunPlan {
                restored,
                origin: RunOrigin::Fork(RunParent {
                    run_id: stored.run_id,
                    from_task_index: index,
                }),
                prior_usage: Usage::default(),
                // The copied outputs were made with the stored run's plans: the fork keeps them.
                crew_plan: stored.plan,
            },
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    pub(super) fn task_keys(&self) -> Vec<String> {
        self.spec.tasks.iter().map(Task::key).collect()
    }

    /// The position of the task with this id or name.
    pub(super) fn task_index(&self, task: &str) -> Option<usize> {
        self.spec.tasks.iter().position(|t| t.is_called(task))
    }

    /// The journaled run, checked against this crew's tasks.
    async fn stored_run(&self, run_id: &str) -> Result<StoredRun, CrewError> {
        let cannot = |message: String| CrewError::Resume {
            crew: self.spec.name.clone(),
            run_id: run_id.to_string(),
            message,
        };
        let journal = self.spec.journal.as_ref().ok_or_else(|| {
            cannot(
                "the crew has no run journal; give it one with `CrewBuilder::run_journal`".into(),
            )
        })?;
        let stored = journal
            .load(run_id)
            .await?
            .ok_or_else(|| cannot("the journal has no run with that id".into()))?;
        let ours = self.task_keys();
        if let Some(difference) = task_list_difference(&stored.task_keys, &ours) {
            return Err(cannot(format!(
                "it was started by a different crew: {difference}"
            )));
        }
        Ok(stored)
    }

    /// Journals the start (claiming the run for this attempt) and resets the latest-kickoff
    /// store as the run's origin asks; the returned guard journals the run as cancelled if it is
    /// dropped before it ends.
    pub(super) async fn start_run(
        &self,
        run_id: &str,
        given: Inputs,
        plan: &RunPlan,
        prepared: &Prepared,
        recorder: &TaskRecorder,
        spending: RunSpending,
    ) -> Result<JournaledRun, CrewError> {
        let rows = || {
            plan.restored
                .iter()
                .map(|(index, output)| recorder.row(*index, &prepared.tasks[*index], output))
        };
        // The claim comes first: a run another attempt still owns leaves the store untouched.
        let journaled = self
            .journal_start(run_id, given, plan, rows().collect(), spending)
            .await?;
        match plan.origin {
            // The store already holds the replayed run's outputs.
            RunOrigin::Replay => {}
            RunOrigin::Kickoff => self.spec.store.reset().await?,
            // A resumed or forked run becomes the latest kickoff, restored outputs included.
            RunOrigin::Resume | RunOrigin::Fork(_) => {
                self.spec.store.reset().await?;
                for row in rows() {
                    self.spec.store.save(row).await?;
                }
            }
        }
        Ok(journaled)
    }

    async fn journal_start(
        &self,
        run_id: &str,
        given: Inputs,
        plan: &RunPlan,
        restored_rows: Vec<StoredTaskOutput>,
        spending: RunSpending,
    ) -> Result<JournaledRun, CrewError> {
        let owner = RunOwner::this_process();
        let Some(journal) = &self.spec.journal else {
            return Ok(JournaledRun {
                journal: None,
                run_id: run_id.to_string(),
                owner_token: owner.token,
                spending,
            });
        };
        let (parent, carried_over) = match &plan.origin {
            RunOrigin::Kickoff | RunOrigin::Resume => (None, Vec::new()),
            RunOrigin::Replay => (None, restored_rows),
            RunOrigin::Fork(parent) => (Some(parent.clone()), restored_rows),
        };
        journal
            .start(&RunStart {
                run_id: run_id.to_string(),
                crew: self.spec.name.clone(),
                inputs: given,
                task_keys: self.task_keys(),
                parent,
                carried_over,
                owner: owner.clone(),
            })
            .await?;
        Ok(JournaledRun {
            journal: Some(journal.clone()),
            run_id: run_id.to_string(),
            owner_token: owner.token,
            spending,
        })
    }
}

/// The output a completed run returns when it is resumed: its stored tasks, final text and usage.
fn completed_output(stored: StoredRun) -> CrewOutput {
    let mut output = CrewOutput::from_tasks(
        stored.tasks.into_values().map(|row| row.output).collect(),
        stored.usage.unwrap_or_default(),
    );
    if let Some(raw) = stored.output {
        output.raw = raw;
    }
    output.run_id = Some(stored.run_id);
    output
}

/// The first way two task lists differ, for an error message.
fn task_list_difference(stored: &[String], ours: &[String]) -> Option<String> {
    if let Some((at, (was, is))) = stored
        .iter()
        .zip(ours)
        .enumerate()
        .find(|(_, (was, is))| was != is)
    {
        return Some(format!(
            "its task {} is '{was}', this crew's is '{is}'",
            at + 1
        ));
    }
    (stored.len() != ours.len()).then(|| {
        format!(
            "it had {} task(s) ({}), this crew has {} ({})",
            stored.len(),
            stored.join(", "),
            ours.len(),
            ours.join(", ")
        )
    })
}

/// Where each finished task's output goes: the run journal first (durable before the next task
/// starts), then the latest-kickoff store that `replay` reads.
#[derive(Clone)]
pub(super) struct TaskRecorder {
    pub(super) store: Arc<dyn TaskOutputStore>,
    pub(super) journal: Option<(Arc<dyn RunJournal>, String)>,
    pub(super) inputs: Inputs,
    pub(super) replaying: bool,
    pub(super) spending: RunSpending,
}

/// What a run has used over all its attempts: the earlier attempts' journaled total plus this
/// attempt's ledger.
#[derive(Clone)]
pub(super) struct RunSpending {
    pub(super) attempt: UsageTracker,
    pub(super) prior: Usage,
}

impl RunSpending {
    fn total(&self) -> Usage {
        let mut total = self.prior;
        total.add(&self.attempt.total());
        total
    }
}

impl TaskRecorder {
    pub(super) fn row(&self, index: usize, task: &Task, output: &TaskOutput) -> StoredTaskOutput {
        StoredTaskOutput {
            task_id: task.id().to_string(),
            task_name: task.name().map(str::to_string),
            task_index: index,
            output: output.clone(),
            inputs: self.inputs.clone(),
            was_replayed: self.replaying,
            timestamp: Utc::now(),
        }
    }

    /// Journals the planner's answer, so a resume of the run does not plan again.
    pub(super) async fn record_plan(&self, plan: &super::CrewPlan) -> Result<(), CrewError> {
        if let Some((journal, run_id)) = &self.journal {
            journal
                .plan_made(run_id, plan, &self.spending.total())
                .await?;
        }
        Ok(())
    }

    pub(super) async fn record(
        &self,
        index: usize,
        task: &Task,
        output: &TaskOutput,
    ) -> Result<(), CrewError> {
        let row = self.row(index, task, output);
        if let Some((journal, run_id)) = &self.journal {
            journal
                .task_finished(run_id, &row, &self.spending.total())
                .await?;
        }
        self.store.save(row).await?;
        Ok(())
    }
}

/// A journaled run until its end is recorded: dropped earlier (the kickoff's future was
/// dropped), it records the run as cancelled, so it can be resumed, with the journal's one
/// blocking call ([`RunJournal::finish_blocking`]).
pub(super) struct JournaledRun {
    journal: Option<Arc<dyn RunJournal>>,
    run_id: String,
    /// This attempt's claim on the run.
    owner_token: String,
    spending: RunSpending,
}

impl JournaledRun {
    /// The run's usage over all its attempts so far.
    pub(super) fn run_total(&self) -> Usage {
        self.spending.total()
    }

    /// Heartbeats the claim while the run goes on; ends only when another attempt has taken the
    /// run over (this one looked dead), so the run stops instead of doing its tasks twice.
    pub(super) async fn keep_alive(&self) -> StoreError {
        let Some(journal) = &self.journal else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
            match journal.heartbeat(&self.run_id, &self.owner_token).await {
                Ok(()) => {}
                Err(taken @ StoreError::RunOwned { .. }) => return taken,
                Err(error) => {
                    tracing::warn!(
                        run_id = %self.run_id,
                        error = crewai_llm::error_chain(&error),
                        "the run's heartbeat could not be journaled"
                    );
                }
            }
        }
    }

    /// Lets go of the run without journaling anything.
    pub(super) fn release(mut self) {
        self.journal = None;
    }

    pub(super) async fn finish(mut self, end: &RunEnd) -> Result<(), StoreError> {
        match self.journal.take() {
            Some(journal) => journal.finish(&self.run_id, end).await,
            None => Ok(()),
        }
    }
}

impl Drop for JournaledRun {
    fn drop(&mut self) {
        if let Some(journal) = self.journal.take() {
            let end = RunEnd::stopped(
                RunStatus::Cancelled,
                "the kickoff was dropped before it finished",
                Some(self.spending.total()),
            );
            // The one blocking journal write on a runtime thread (see
            // `RunJournal::finish_blocking`): a drop cannot await, and a spawned write could be
            // lost with the runtime, leaving the run owned by this live process.
            if let Err(error) = journal.finish_blocking(&self.run_id, &end) {
                tracing::warn!(
                    run_id = %self.run_id,
                    error = crewai_llm::error_chain(&error),
                    "the cancellation could not be journaled"
                );
            }
        }
    }
}
