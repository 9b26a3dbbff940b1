//! Working through the tasks of one run: which agent and tools each task gets, its context,
//! async tasks and their joins, conditional skips.

use std::collections::BTreeSet;

use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::error::AgentError;
use crate::events::{CaughtPanic, PanicSite, panic_message};
use crate::output::TaskOutput;
use crate::process::hierarchical::{self, ManagerError};
use crate::process::{DelegatedFrom, RunContext, TaskWorker, merge_tools};
use crate::prompts::crew as prompts;
use crate::task::{Task, TaskContext, TaskError};

use super::journal::TaskRecorder;
use super::kickoff::Prepared;
use super::{Crew, CrewError, Process};

impl Crew {
    pub(super) async fn execute_tasks(
        &self,
        run: &RunContext,
        prepared: &Prepared,
        parent: Uuid,
        restored: Vec<(usize, TaskOutput)>,
        recorder: &TaskRecorder,
    ) -> Result<Vec<TaskOutput>, CrewError> {
        let mut done = restored;
        let outcome = self
            .execute_remaining(&mut done, run, prepared, parent, recorder)
            .await;
        done.sort_by_key(|(index, _)| *index);
        match outcome {
            Ok(()) => Ok(done.into_iter().map(|(_, output)| output).collect()),
            Err(error) => Err(self.keep_outputs_on_budget_stop(error, done)),
        }
    }

    /// A budget stop deep inside a task becomes the crew's own error, with the finished outputs
    /// (`done` in task order).
    fn keep_outputs_on_budget_stop(
        &self,
        error: CrewError,
        done: Vec<(usize, TaskOutput)>,
    ) -> CrewError {
        let CrewError::Task(TaskError::Agent { task, source }) = &error else {
            return error;
        };
        let AgentError::BudgetExceeded { exceeded, .. } = source.as_ref() else {
            return error;
        };
        CrewError::BudgetExceeded {
            crew: self.spec.name.clone(),
            task: Some(task.clone()),
            exceeded: exceeded.clone(),
            completed: done.into_iter().map(|(_, output)| output).collect(),
            usage: Box::default(),
        }
    }

    /// Runs every task that has no output in `done` yet (the restored ones are skipped), adding
    /// each output to `done` once it is recorded.
    async fn execute_remaining(
        &self,
        done: &mut Vec<(usize, TaskOutput)>,
        run: &RunContext,
        prepared: &Prepared,
        parent: Uuid,
        recorder: &TaskRecorder,
    ) -> Result<(), CrewError> {
        let restored: BTreeSet<usize> = done.iter().map(|(index, _)| *index).collect();
        let mut pending: Vec<PendingTask> = Vec::new();

        for (index, task) in prepared.tasks.iter().enumerate() {
            if restored.contains(&index) {
                continue;
            }
            if task.is_conditional()
                || !task.is_async()
                || self.context_waits_on(task, &pending, &prepared.tasks)
            {
                self.join_pending(&mut pending, done, &prepared.tasks, parent)
                    .await?;
            }
            if let Some(condition) = task.condition()
                && let Some((_, previous)) = done
                    .iter()
                    .filter(|(earlier, _)| *earlier < index)
                    .max_by_key(|(earlier, _)| *earlier)
                && !condition(previous)
            {
                let role = task
                    .agent()
                    .map(|a| a.role().to_string())
                    .unwrap_or_default();
                let skipped = TaskOutput::skipped(
                    task.description(),
                    task.expected_output(),
                    task.name().map(str::to_string),
                    role,
                );
                recorder.record(index, task, &skipped).await?;
                done.push((index, skipped));
                continue;
            }
            let worker = self.worker_for(run, prepared, task, parent)?;
            let context = context_for(task, index, done, &prepared.tasks);
            if task.is_async() {
                let (run, task) = (run.clone(), task.clone());
                let recorder = recorder.clone();
                // Recorded inside the spawned task, the moment it finishes: a run killed before
                // the join still keeps this output.
                let handle = tokio::spawn(async move {
                    let output = worker.execute(&run, &task, context, Some(parent)).await?;
                    recorder.record(index, &task, &output).await?;
                    Ok(output)
                });
                pending.push(PendingTask {
                    index,
                    handle: AbortOnDrop(handle),
                });
            } else {
                let output = worker.execute(run, task, context, Some(parent)).await?;
                recorder.record(index, task, &output).await?;
                done.push((index, output));
            }
        }
        self.join_pending(&mut pending, done, &prepared.tasks, parent)
            .await?;
        Ok(())
    }

    /// Whether an async task names, in its context, a task that is still running.
    fn context_waits_on(&self, task: &Task, pending: &[PendingTask], tasks: &[Task]) -> bool {
        match task.context() {
            TaskContext::Tasks(names) => pending
                .iter()
                .any(|p| names.iter().any(|n| tasks[p.index].is_called(n))),
            _ => false,
        }
    }

    /// Waits for the running async tasks (the first failure stops the others) and appends their
    /// (already recorded) outputs in definition order. A task that panicked (a panic nothing
    /// inside it caught) fails the kickoff with [`CrewError::TaskPanicked`] and is counted on the
    /// crew's bus, under the kickoff's event `parent`.
    async fn join_pending(
        &self,
        pending: &mut Vec<PendingTask>,
        done: &mut Vec<(usize, TaskOutput)>,
        tasks: &[Task],
        parent: Uuid,
    ) -> Result<(), CrewError> {
        if pending.is_empty() {
            return Ok(());
        }
        let running = std::mem::take(pending);
        let crew = self.spec.name.clone();
        let events = &self.spec.events;
        let results = futures::future::try_join_all(running.into_iter().map(|mut p| {
            let crew = crew.clone();
            let task = &tasks[p.index];
            async move {
                match (&mut p.handle.0).await {
                    Ok(Ok(output)) => Ok((p.index, output)),
                    Ok(Err(error)) => Err(error),
                    Err(join) => {
                        let (message, panicked) = join_failure(join);
                        if panicked {
                            let panic =
                                CaughtPanic::new(PanicSite::AsyncTask, task.key(), message.clone())
                                    .in_task(task.agent().map(|a| a.role()), task.name());
                            events.report_panic(Some(parent), panic);
                        }
                        Err(CrewError::TaskPanicked {
                            crew,
                            task: task.key(),
                            message,
                        })
                    }
                }
            }
        }))
        .await?;
        done.extend(results);
        Ok(())
    }

    /// Who runs `task` and with which tools: its agent with the task's (or its own) tools plus
    /// delegation tools for its coworkers; in a hierarchical crew the manager with only the
    /// delegation tools; in a consensual crew the panel of voters (each with the task's tools,
    /// or its own).
    fn worker_for(
        &self,
        run: &RunContext,
        prepared: &Prepared,
        task: &Task,
        parent: Uuid,
    ) -> Result<TaskWorker, CrewError> {
        let key = task.key();
        match self.spec.process {
            Process::Sequential => {
                let agent = task
                    .agent()
                    .cloned()
                    .ok_or_else(|| CrewError::Task(TaskError::NoAgent { task: key.clone() }))?;
                let own = if task.tools().is_empty() {
                    agent.tools().to_vec()
                } else {
                    task.tools().to_vec()
                };
                let delegation = if agent.allow_delegation() && prepared.agents.len() > 1 {
                    run.delegation_tools(
                        &agent,
                        &prepared.agents,
                        DelegatedFrom::task(task, Vec::new()),
                        Some(parent),
                    )
                } else {
                    Vec::new()
                };
                Ok(TaskWorker::Agent {
                    agent,
                    tools: merge_tools(own, delegation),
                })
            }
            Process::Hierarchical => {
                let manager = prepared.manager.clone().ok_or_else(|| CrewError::Manager {
                    crew: self.spec.name.clone(),
                    source: ManagerError::Missing,
                })?;
                let coworkers = hierarchical::coworkers_for(task, &prepared.agents);
                let from = DelegatedFrom::task(task, task.tools().to_vec());
                let tools = run.delegation_tools(&manager, &coworkers, from, Some(parent));
                self.record().manager_tools = tools.clone();
                Ok(TaskWorker::Agent {
                    agent: manager,
                    tools,
                })
            }
            Process::Consensual => {
                let setup = self
                    .spec
                    .consensus
                    .as_ref()
                    .ok_or_else(|| CrewError::Config {
                        crew: self.spec.name.clone(),
                        message: "a consensual crew was built without its consensus setup".into(),
                    })?;
                Ok(TaskWorker::Panel(setup.panel(prepared, task)))
            }
        }
    }
}

/// The context task `index` gets from the outputs so far: only earlier tasks', in task order (a
/// resumed run may hold outputs of later async tasks that finished first).
fn context_for(
    task: &Task,
    index: usize,
    done: &[(usize, TaskOutput)],
    tasks: &[Task],
) -> Option<String> {
    let mut earlier: Vec<&(usize, TaskOutput)> = done.iter().filter(|(i, _)| *i < index).collect();
    earlier.sort_by_key(|(i, _)| *i);
    let selected: Vec<&str> = match task.context() {
        TaskContext::None => return None,
        TaskContext::AllPrevious => earlier
            .iter()
            .map(|(_, o)| o.raw.as_str())
            .filter(|raw| !raw.is_empty())
            .collect(),
        TaskContext::Tasks(names) => earlier
            .iter()
            .filter(|(i, _)| names.iter().any(|name| tasks[*i].is_called(name)))
            .map(|(_, o)| o.raw.as_str())
            .filter(|raw| !raw.is_empty())
            .collect(),
    };
    (!selected.is_empty()).then(|| prompts::join_context(selected))
}

/// Why a spawned task did not finish: its panic's message and `true`, or the cancellation and
/// `false`.
pub(super) fn join_failure(join: tokio::task::JoinError) -> (String, bool) {
    match join.try_into_panic() {
        Ok(payload) => (panic_message(payload.as_ref()), true),
        Err(join) => (join.to_string(), false),
    }
}

/// A spawned task that is aborted when dropped, so a failed kickoff leaves nothing running.
pub(super) struct AbortOnDrop<T>(pub(super) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct PendingTask {
    index: usize,
    handle: AbortOnDrop<Result<TaskOutput, CrewError>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::TaskOutput;
    use crate::task::test_task;

    fn done(raws: &[&str]) -> Vec<(usize, TaskOutput)> {
        raws.iter()
            .enumerate()
            .map(|(i, raw)| (i, TaskOutput::new("d", "e", *raw, "A")))
            .collect()
    }

    fn task(name: &str) -> Task {
        test_task(name, |b| b)
    }

    #[test]
    fn context_rules() {
        let tasks = vec![task("a"), task("b"), task("c")];
        let outputs = done(&["A", "", "C"]);
        assert_eq!(
            context_for(&tasks[2], 3, &outputs, &tasks).as_deref(),
            Some("A\n\n----------\n\nC")
        );
        let only_a = test_task("x", |b| b.context(["a"]));
        assert_eq!(
            context_for(&only_a, 3, &outputs, &tasks).as_deref(),
            Some("A")
        );
        // Only earlier tasks count, in task order, whatever order they finished in.
        let out_of_order = vec![outputs[2].clone(), outputs[0].clone()];
        assert_eq!(
            context_for(&tasks[1], 1, &out_of_order, &tasks).as_deref(),
            Some("A")
        );
        let none = test_task("y", |b| b.context_none());
        assert_eq!(context_for(&none, 3, &outputs, &tasks), None);
    }
}
