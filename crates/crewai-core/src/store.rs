//! Where a crew keeps what its kickoffs produced.
//!
//! - [`TaskOutputStore`]: the task outputs of the latest kickoff, so `Crew::replay` can restart
//!   from any task (CrewAI's `latest_kickoff_task_outputs.db`).
//! - [`RunJournal`]: every run by its id: what it started with, each task's output the moment the
//!   task finished, and how it ended, so `Crew::resume` continues a run that was killed,
//!   cancelled or stopped by its budget, and `Crew::fork` starts a new run from a stored one.
//!
//! `crewai-store` implements both on SQLite; [`InMemoryTaskOutputStore`] and
//! [`InMemoryRunJournal`] serve tests and short-lived programs.
//!
//! Both traits are async so a durable implementation can do its file I/O off the runtime's
//! worker threads (`crewai-store` runs SQLite on tokio's blocking pool). The one synchronous
//! call is [`RunJournal::finish_blocking`], for the guard that records a dropped kickoff from
//! `Drop`, where nothing can be awaited.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use crewai_llm::Usage;
use serde::{Deserialize, Serialize};

use crate::crew::CrewPlan;
use crate::error::BoxedCause;
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

/// A failure of the backing store. The backend's own error (SQLite, I/O, a message) is the
/// source; show the chain with [`crewai_llm::error_chain`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the task output store failed")]
    Backend(#[source] BoxedCause),
    #[error("task output store: a stored row could not be read")]
    Corrupt(#[source] BoxedCause),
    /// [`RunJournal::start`] refused: another attempt that is still alive owns the run.
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

/// Storage of the latest kickoff's task outputs.
///
/// The calls are short local writes; an implementation that touches files does so off the
/// runtime's worker threads (`spawn_blocking`), and none waits on the network.
#[async_trait]
pub trait TaskOutputStore: Send + Sync {
    /// Forgets everything (a new kickoff starts).
    async fn reset(&self) -> Result<(), StoreError>;
    /// Adds a task's output, replacing any stored at the same `task_index`.
    async fn save(&self, record: StoredTaskOutput) -> Result<(), StoreError>;
    /// The stored outputs, ordered by `task_index`.
    async fn load(&self) -> Result<Vec<StoredTaskOutput>, StoreError>;
}

/// A [`TaskOutputStore`] in memory (one per crew unless shared on purpose).
///
/// ```
/// use crewai_core::store::{InMemoryTaskOutputStore, StoredTaskOutput, TaskOutputStore};
/// use crewai_core::output::TaskOutput;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = InMemoryTaskOutputStore::new();
/// store.save(StoredTaskOutput {
///     task_id: "t1".into(), task_name: None, task_index: 0,
///     output: TaskOutput::new("d", "e", "raw", "Agent"), inputs: Default::default(),
///     was_replayed: false, timestamp: chrono::Utc::now(),
/// }).await.unwrap();
/// assert_eq!(store.load().await.unwrap()[0].output.raw, "raw");
/// # });
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

#[async_trait]
impl TaskOutputStore for InMemoryTaskOutputStore {
    async fn reset(&self) -> Result<(), StoreError> {
        self.rows()?.clear();
        Ok(())
    }

    async fn save(&self, record: StoredTaskOutput) -> Result<(), StoreError> {
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

    async fn load(&self) -> Result<Vec<StoredTaskOutput>, StoreError> {
        Ok(self.rows()?.clone())
    }
}

/// Where a run stands (or how it ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Started and not finished: still running, or its process was killed.
    Running,
    Completed,
    /// A task failed; the finished tasks are kept.
    Failed,
    /// The kickoff was cancelled (its token, or its future dropped).
    Cancelled,
    /// Stopped before a call that would have gone over `max_cost_usd` / `max_tokens`.
    BudgetStopped,
}

impl RunStatus {
    /// The status as stored and shown (`running`, `completed`, `failed`, `cancelled`,
    /// `budget_stopped`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::BudgetStopped => "budget_stopped",
        }
    }

    /// The status [`RunStatus::as_str`] wrote.
    pub fn parse(text: &str) -> Option<Self> {
        [
            RunStatus::Running,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::BudgetStopped,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }

    /// Whether `Crew::resume` has work left to do (every status but `Completed`).
    pub fn is_resumable(self) -> bool {
        self != RunStatus::Completed
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a forked run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParent {
    /// The stored run it was forked from (left untouched).
    pub run_id: String,
    /// The index of the first task the fork ran again; the outputs before it were copied.
    pub from_task_index: usize,
}

/// How often a running attempt tells the journal it is alive ([`RunJournal::heartbeat`]).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(20);
/// How long after its last heartbeat an owner counts as gone even when a process with its id
/// exists: process ids are reused (after a reboot, or when they wrap), so a stale lease must not
/// block a resume forever.
pub const LEASE_TIMEOUT: Duration = Duration::from_secs(300);

/// The attempt that is running a run: a resume refuses to take over a run whose owner is alive,
/// so no task runs twice at once.
///
/// ```
/// use crewai_core::store::RunOwner;
/// let me = RunOwner::this_process();
/// assert_eq!(me.pid, std::process::id());
/// assert!(me.is_alive(chrono::Utc::now()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOwner {
    /// The owning process's id.
    pub pid: u32,
    /// Unique to the attempt (a UUID): tells two attempts in one process apart.
    pub token: String,
    /// When the attempt claimed the run.
    pub since: DateTime<Utc>,
    /// When the attempt last said it is alive.
    pub heartbeat_at: DateTime<Utc>,
}

impl RunOwner {
    /// A new attempt of this process, claiming now.
    pub fn this_process() -> Self {
        let now = Utc::now();
        RunOwner {
            pid: std::process::id(),
            token: uuid::Uuid::new_v4().to_string(),
            since: now,
            heartbeat_at: now,
        }
    }

    /// Whether the owner may still be running at `now`: its heartbeat is younger than
    /// [`LEASE_TIMEOUT`] and a live process has its id. A journal shared by processes on several
    /// machines would need the host too; this one is a project folder on one machine.
    pub fn is_alive(&self, now: DateTime<Utc>) -> bool {
        let fresh = chrono::Duration::from_std(LEASE_TIMEOUT)
            .is_ok_and(|timeout| now.signed_duration_since(self.heartbeat_at) < timeout);
        fresh && process_exists(self.pid)
    }
}

/// Whether a live (not zombie) process has id `pid`.
#[cfg(target_os = "linux")]
fn process_exists(pid: u32) -> bool {
    // Field 3 of `stat` is the state; a killed process nobody has reaped yet is `Z` (zombie).
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Whether a process has id `pid` (signal 0 checks without sending anything).
#[cfg(all(unix, not(target_os = "linux")))]
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: `kill` with signal 0 only checks that the process exists and may be signalled.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Without a portable process check, the heartbeat alone decides.
#[cfg(not(unix))]
fn process_exists(_pid: u32) -> bool {
    true
}

/// What a run starts with, as [`RunJournal::start`] records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStart {
    pub run_id: String,
    /// The crew's name.
    pub crew: String,
    /// The kickoff inputs, before the crew's `before_kickoff` callbacks (a resume runs them again).
    pub inputs: Inputs,
    /// Every task's key (`Task::key()`: its name, else its description), in crew order: what a
    /// resume checks the crew against.
    pub task_keys: Vec<String>,
    /// Set for a fork.
    pub parent: Option<RunParent>,
    /// Outputs the run begins with (a fork's or replay's copies of earlier tasks), recorded in the
    /// same write as the start.
    pub carried_over: Vec<StoredTaskOutput>,
    /// The attempt claiming the run.
    pub owner: RunOwner,
}

/// How a run ended, as [`RunJournal::finish`] records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    pub status: RunStatus,
    /// The final output's raw text (completed runs).
    pub output: Option<String>,
    /// What went wrong (failed, cancelled and budget-stopped runs).
    pub error: Option<String>,
    /// What the run used over all its attempts (a resumed run adds its own calls).
    pub usage: Option<Usage>,
}

impl RunEnd {
    pub fn completed(output: impl Into<String>, usage: Usage) -> Self {
        RunEnd {
            status: RunStatus::Completed,
            output: Some(output.into()),
            error: None,
            usage: Some(usage),
        }
    }

    /// A run that ended without completing, with `status` and the reason.
    pub fn stopped(status: RunStatus, error: impl Into<String>, usage: Option<Usage>) -> Self {
        RunEnd {
            status,
            output: None,
            error: Some(error.into()),
            usage,
        }
    }
}

/// A run as the journal has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun {
    pub run_id: String,
    pub crew: String,
    pub inputs: Inputs,
    pub task_keys: Vec<String>,
    pub parent: Option<RunParent>,
    pub status: RunStatus,
    /// The outputs of the tasks that finished, by task index (async tasks may finish out of
    /// order: this is a set, not a prefix).
    pub tasks: BTreeMap<usize, StoredTaskOutput>,
    pub output: Option<String>,
    pub error: Option<String>,
    /// What the run used over all its attempts, as of its latest journal write: each finished
    /// task updates it, so a killed attempt's spending up to its last finished task is kept.
    pub usage: Option<Usage>,
    /// The crew planner's answer (`planning: true`), once it was made: a resumed run appends
    /// the same plans and does not plan again.
    #[serde(default)]
    pub plan: Option<CrewPlan>,
    /// The attempt running it (`None` once it ended).
    pub owner: Option<RunOwner>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A durable record of runs: the crew writes each task's output as soon as the task finishes and
/// before the next one starts, so a run whose process dies can be resumed without redoing work.
///
/// The calls are short local writes; an implementation must have made a write durable when it
/// returns, and one that touches files does so off the runtime's worker threads
/// (`spawn_blocking`).
///
/// A run has at most one live owner (a [`RunOwner`]): `start` claims it atomically, so of two
/// processes resuming the same run at once, one wins and the other gets
/// [`StoreError::RunOwned`].
#[async_trait]
pub trait RunJournal: Send + Sync {
    /// Records a run starting and claims it for `run.owner`. For a run id the journal already
    /// has (a resume), the run becomes `Running` again and keeps its finished tasks and usage;
    /// when another owner that is still alive holds it, nothing changes and the call fails with
    /// [`StoreError::RunOwned`].
    async fn start(&self, run: &RunStart) -> Result<(), StoreError>;
    /// Records that the attempt with `owner_token` is alive. Fails with
    /// [`StoreError::RunOwned`] when another attempt has taken the run over.
    async fn heartbeat(&self, run_id: &str, owner_token: &str) -> Result<(), StoreError>;
    /// Records one finished task of a started run (replacing any output at its index), and in
    /// the same write what the run has used so far over all its attempts.
    async fn task_finished(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError>;
    /// Records the crew planner's answer for a started run (`planning: true`), with what the
    /// run has used so far over all its attempts (the planner's calls included).
    async fn plan_made(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), StoreError>;
    /// Records how the run ended and releases its owner.
    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError>;
    /// The run with this id, if the journal has it.
    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError>;
    /// [`RunJournal::finish`] done on the calling thread before it returns: the journal's one
    /// blocking call. A kickoff whose future is dropped mid-run records itself cancelled from
    /// its guard's `Drop`, where nothing can be awaited; a task spawned to do it instead could
    /// be lost (a runtime shutting down drops it), leaving the run owned by a live process, so
    /// no resume could claim it until the lease ran out. It must be one short local write.
    fn finish_blocking(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError>;
}

/// A [`RunJournal`] in memory: runs survive as long as the value (tests, documentation, a
/// process that only resumes its own cancelled runs).
///
/// ```
/// use crewai_core::store::{InMemoryRunJournal, RunEnd, RunJournal, RunOwner, RunStart, RunStatus};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let journal = InMemoryRunJournal::new();
/// journal.start(&RunStart {
///     run_id: "r1".into(), crew: "crew".into(), inputs: Default::default(),
///     task_keys: vec!["research".into()], parent: None, carried_over: Vec::new(),
///     owner: RunOwner::this_process(),
/// }).await.unwrap();
/// journal.finish("r1", &RunEnd::stopped(RunStatus::Cancelled, "Ctrl-C", None)).await.unwrap();
/// let run = journal.load("r1").await.unwrap().unwrap();
/// assert_eq!(run.status, RunStatus::Cancelled);
/// assert!(run.status.is_resumable());
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct InMemoryRunJournal {
    runs: Arc<Mutex<BTreeMap<String, StoredRun>>>,
}

impl InMemoryRunJournal {
    pub fn new() -> Self {
        Self::default()
    }

    fn runs(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, StoredRun>>, StoreError> {
        self.runs.lock().map_err(|_| {
            StoreError::Backend("a writer panicked while holding the in-memory journal".into())
        })
    }

    fn with_run<T>(
        &self,
        run_id: &str,
        change: impl FnOnce(&mut StoredRun) -> T,
    ) -> Result<T, StoreError> {
        let mut runs = self.runs()?;
        let run = runs.get_mut(run_id).ok_or_else(|| {
            StoreError::Backend(format!("run journal: no run with id {run_id}").into())
        })?;
        Ok(change(run))
    }
}

#[async_trait]
impl RunJournal for InMemoryRunJournal {
    async fn start(&self, start: &RunStart) -> Result<(), StoreError> {
        let mut runs = self.runs()?;
        // In one process an owner is released by its kickoff's end or its drop guard, so a live
        // one is a kickoff still going; the liveness check is the durable journals' own, so a
        // test can stand in a dead process's run with an owner whose pid does not exist.
        if let Some(owner) = runs.get(&start.run_id).and_then(|run| run.owner.as_ref())
            && owner.token != start.owner.token
            && owner.is_alive(Utc::now())
        {
            return Err(StoreError::RunOwned {
                run_id: start.run_id.clone(),
                owner: Box::new(owner.clone()),
            });
        }
        let run = runs
            .entry(start.run_id.clone())
            .or_insert_with(|| StoredRun {
                run_id: start.run_id.clone(),
                crew: start.crew.clone(),
                inputs: start.inputs.clone(),
                task_keys: start.task_keys.clone(),
                parent: start.parent.clone(),
                status: RunStatus::Running,
                tasks: BTreeMap::new(),
                output: None,
                error: None,
                usage: None,
                plan: None,
                owner: None,
                started_at: Utc::now(),
                finished_at: None,
            });
        run.status = RunStatus::Running;
        run.error = None;
        run.finished_at = None;
        run.owner = Some(start.owner.clone());
        for task in &start.carried_over {
            run.tasks.insert(task.task_index, task.clone());
        }
        Ok(())
    }

    async fn heartbeat(&self, run_id: &str, owner_token: &str) -> Result<(), StoreError> {
        self.with_run(run_id, |run| match &mut run.owner {
            Some(owner) if owner.token == owner_token => {
                owner.heartbeat_at = Utc::now();
                Ok(())
            }
            Some(other) => Err(StoreError::RunOwned {
                run_id: run_id.to_string(),
                owner: Box::new(other.clone()),
            }),
            None => Err(StoreError::Backend(
                format!("run journal: run {run_id} has ended; there is no attempt to keep alive")
                    .into(),
            )),
        })?
    }

    async fn task_finished(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        self.with_run(run_id, |run| {
            run.tasks.insert(task.task_index, task.clone());
            run.usage = Some(*usage);
        })
    }

    async fn plan_made(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        self.with_run(run_id, |run| {
            run.plan = Some(plan.clone());
            run.usage = Some(*usage);
        })
    }

    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        self.finish_blocking(run_id, end)
    }

    fn finish_blocking(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        self.with_run(run_id, |run| {
            run.status = end.status;
            run.output = end.output.clone();
            run.error = end.error.clone();
            // An end that does not know the usage keeps what the tasks journaled.
            if end.usage.is_some() {
                run.usage = end.usage;
            }
            run.owner = None;
            run.finished_at = Some(Utc::now());
        })
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        Ok(self.runs()?.get(run_id).cloned())
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

    #[tokio::test]
    async fn save_replaces_by_index_and_keeps_order() {
        let store = InMemoryTaskOutputStore::new();
        store.save(row(1, "b")).await.unwrap();
        store.save(row(0, "a")).await.unwrap();
        store.save(row(1, "b2")).await.unwrap();
        let rows = store.load().await.unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| r.output.raw.as_str())
                .collect::<Vec<_>>(),
            ["a", "b2"]
        );
        store.reset().await.unwrap();
        assert!(store.load().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn journal_keeps_finished_tasks_across_a_restart_of_the_run() {
        let journal = InMemoryRunJournal::new();
        let start = RunStart {
            run_id: "r".into(),
            crew: "c".into(),
            inputs: Inputs::new(),
            task_keys: vec!["a".into(), "b".into()],
            parent: None,
            carried_over: vec![row(0, "a")],
            owner: RunOwner::this_process(),
        };
        let spent = Usage {
            total_tokens: 42,
            ..Usage::default()
        };
        journal.start(&start).await.unwrap();
        journal
            .task_finished("r", &row(1, "b"), &spent)
            .await
            .unwrap();
        journal
            .finish("r", &RunEnd::stopped(RunStatus::Failed, "boom", None))
            .await
            .unwrap();
        let run = journal.load("r").await.unwrap().unwrap();
        assert_eq!(run.owner, None, "an ended run has no owner");
        assert_eq!(
            run.usage.unwrap().total_tokens,
            42,
            "the tasks' usage is kept"
        );
        journal.start(&start).await.unwrap();
        let run = journal.load("r").await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.tasks.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert!(
            journal
                .task_finished("missing", &row(0, "x"), &spent)
                .await
                .is_err()
        );
        for status in [RunStatus::Completed, RunStatus::BudgetStopped] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
        }
    }

    #[tokio::test]
    async fn a_run_with_a_live_owner_cannot_be_claimed_again() {
        let journal = InMemoryRunJournal::new();
        let first = RunStart {
            run_id: "r".into(),
            crew: "c".into(),
            inputs: Inputs::new(),
            task_keys: vec!["a".into()],
            parent: None,
            carried_over: Vec::new(),
            owner: RunOwner::this_process(),
        };
        journal.start(&first).await.unwrap();
        let second = RunStart {
            owner: RunOwner::this_process(),
            ..first.clone()
        };
        let refused = journal.start(&second).await.unwrap_err();
        assert!(matches!(refused, StoreError::RunOwned { .. }), "{refused}");
        let message = refused.to_string();
        assert!(
            message.contains(&format!("still running in process {}", std::process::id())),
            "{message}"
        );
        journal.heartbeat("r", &first.owner.token).await.unwrap();
        assert!(journal.heartbeat("r", &second.owner.token).await.is_err());
        journal
            .finish("r", &RunEnd::stopped(RunStatus::Cancelled, "dropped", None))
            .await
            .unwrap();
        journal.start(&second).await.unwrap();
        assert_eq!(
            journal
                .load("r")
                .await
                .unwrap()
                .unwrap()
                .owner
                .unwrap()
                .token,
            second.owner.token
        );
    }

    #[test]
    fn an_owner_is_gone_when_its_process_is_or_its_heartbeat_is_stale() {
        let now = Utc::now();
        let mut owner = RunOwner::this_process();
        assert!(owner.is_alive(now));
        owner.heartbeat_at = now - chrono::Duration::from_std(LEASE_TIMEOUT).unwrap();
        assert!(!owner.is_alive(now), "a stale heartbeat is a dead owner");
        // Beyond Linux's largest pid (2^22): no process has it.
        let gone = RunOwner {
            pid: 4_194_304 + 7,
            ..RunOwner::this_process()
        };
        assert!(!gone.is_alive(now));
    }
}
