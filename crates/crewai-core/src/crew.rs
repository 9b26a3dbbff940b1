//! [`Crew`]: agents working through tasks, sequentially or under a manager (CrewAI's `Crew`).
//!
//! A crew is a specification plus the bookkeeping of its latest kickoff (usage, the manager's
//! tools). Every kickoff works on its own interpolated copies of the agents and tasks, with its own
//! usage ledger and deadlines, so kickoffs never share run state: not between two crews, and not
//! between two kickoffs of the same crew.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use chrono::Utc;
use crewai_llm::{Llm, PriceTable, RateLimiter, Usage};
use crewai_tools::{ToolCache, ToolHandle};
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::{Agent, DelegationChain, RunServices, StepCallback};
use crate::delegation::DEFAULT_MAX_DELEGATION_DEPTH;
use crate::error::AgentError;
use crate::events::{
    CaughtPanic, ConsoleListener, Event, EventBus, EventKind, PanicSite, panic_message,
};
use crate::hooks::Hooks;
use crate::interpolate::{Inputs, InterpolationError, Location, interpolate, placeholders};
use crate::output::{CrewOutput, TaskOutput};
use crate::process::hierarchical::{self, ManagerError};
use crate::process::{DelegatedFrom, RunContext, execute_task, merge_tools};
use crate::prompts::crew as prompts;
use crate::store::{
    HEARTBEAT_INTERVAL, InMemoryTaskOutputStore, RunEnd, RunJournal, RunOwner, RunParent, RunStart,
    RunStatus, StoreError, StoredRun, StoredTaskOutput, TaskOutputStore,
};
use crate::task::{
    ConsoleInputProvider, InputProvider, Task, TaskCallback, TaskContext, TaskError,
};
use crate::usage::{Budget, BudgetExceeded, UsageSummary, UsageTracker};

/// How a crew goes through its tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Process {
    /// Each task by its own agent, in order.
    #[default]
    Sequential,
    /// Every task through a manager that delegates to the agents.
    Hierarchical,
}

/// Changes the inputs before a kickoff (CrewAI's `before_kickoff_callbacks`).
pub type BeforeKickoff = Arc<dyn Fn(Inputs) -> Inputs + Send + Sync>;
/// Changes the output after a kickoff (CrewAI's `after_kickoff_callbacks`).
pub type AfterKickoff = Arc<dyn Fn(CrewOutput) -> CrewOutput + Send + Sync>;

/// The default deadline of a task whose agent has no `max_execution_time`.
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);
/// How many kickoffs `kickoff_for_each` runs at once by default.
pub const DEFAULT_KICKOFF_CONCURRENCY: usize = 4;

/// Everything that can go wrong building or running a crew.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CrewError {
    #[error("crew '{crew}' is misconfigured: {message}")]
    Config { crew: String, message: String },
    #[error(
        "crew '{crew}': `{feature}: true` is not supported yet; remove it (it is never silently ignored)"
    )]
    Unsupported { crew: String, feature: &'static str },
    #[error("crew '{crew}': {source}")]
    Manager { crew: String, source: ManagerError },
    #[error(transparent)]
    Interpolation(#[from] InterpolationError),
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error("crew '{crew}': task '{task}' crashed: {message}")]
    TaskPanicked {
        crew: String,
        task: String,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Replay(String),
    #[error("crew '{crew}': the kickoff was cancelled")]
    Cancelled { crew: String },
    /// [`Crew::resume`] or [`Crew::fork`] cannot use the stored run.
    #[error("crew '{crew}': cannot continue run {run_id}: {message}")]
    Resume {
        crew: String,
        run_id: String,
        message: String,
    },
    /// The run stopped before an LLM call that would have gone over the crew's budget. The tasks
    /// that finished are kept here (and in the task output store, so [`Crew::replay`] from
    /// `task` resumes the run).
    #[error("crew '{crew}' stopped at task '{}' with {} finished task(s) kept: {exceeded}", task.as_deref().unwrap_or("?"), completed.len())]
    BudgetExceeded {
        crew: String,
        /// The task that was running (its name, else its description).
        task: Option<String>,
        exceeded: Box<BudgetExceeded>,
        /// The outputs of the tasks that finished, in task order.
        completed: Vec<TaskOutput>,
        /// What the run used up to the stop.
        usage: Box<Usage>,
    },
}

#[derive(Default)]
struct RunRecord {
    usage: UsageSummary,
    manager_tools: Vec<ToolHandle>,
    run_id: Option<String>,
}

struct CrewSpec {
    id: Uuid,
    name: String,
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    process: Process,
    manager: Option<Agent>,
    function_calling_llm: Option<Arc<dyn Llm>>,
    rate_limiter: Option<Arc<RateLimiter>>,
    /// The crew's shared tool-result cache (`cache: true`); copies get their own.
    tool_cache: Option<ToolCache>,
    stream: bool,
    events: EventBus,
    hooks: Hooks,
    step_callback: Option<StepCallback>,
    task_callback: Option<TaskCallback>,
    before_kickoff: Vec<BeforeKickoff>,
    after_kickoff: Vec<AfterKickoff>,
    store: Arc<dyn TaskOutputStore>,
    journal: Option<Arc<dyn RunJournal>>,
    input_provider: Arc<dyn InputProvider>,
    task_timeout: Option<Duration>,
    max_delegation_depth: usize,
    kickoff_concurrency: usize,
    budget: Budget,
    prices: Arc<PriceTable>,
    last_run: Mutex<RunRecord>,
}

/// A crew of agents and their tasks.
///
/// ```
/// use std::sync::Arc;
/// use crewai_core::agent::Agent;
/// use crewai_core::crew::Crew;
/// use crewai_core::task::Task;
/// use crewai_llm::ScriptedLlm;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A scripted model stands in for a real one (`build_llm(&LlmConfig::new("gpt-4o-mini"))`).
/// let llm = Arc::new(ScriptedLlm::new("scripted").then_text("- bees dance\n- bees pollinate").then_text("Bees dance and pollinate."));
/// let researcher = Agent::builder().role("{topic} Researcher").goal("Find facts").backstory("Careful.").llm(llm.clone()).build()?;
/// let research = Task::builder().name("research").description("Two facts about {topic}").expected_output("Two bullets").agent(researcher.clone()).build()?;
/// let summary = Task::builder().name("summary").description("One sentence from the facts").expected_output("A sentence").agent(researcher.clone()).build()?;
/// let crew = Crew::builder().agents(vec![researcher]).tasks(vec![research, summary]).build()?;
///
/// let output = crew.kickoff([("topic".to_string(), "bees".into())].into()).await?;
/// assert_eq!(output.raw, "Bees dance and pollinate.");
/// assert_eq!(output.tasks_output.len(), 2);
/// assert_eq!(output.tasks_output[0].agent, "bees Researcher");
/// assert_eq!(output.token_usage.successful_requests, 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Crew {
    spec: Arc<CrewSpec>,
}

impl fmt::Debug for Crew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Crew")
            .field("name", &self.spec.name)
            .field("process", &self.spec.process)
            .field(
                "agents",
                &self
                    .spec
                    .agents
                    .iter()
                    .map(|a| a.role().to_string())
                    .collect::<Vec<_>>(),
            )
            .field(
                "tasks",
                &self.spec.tasks.iter().map(Task::key).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// How a kickoff is embedded in a larger run.
#[derive(Debug, Clone, Default)]
pub struct KickoffOptions {
    /// The event `crew_kickoff_started` hangs under (a flow method's event).
    pub parent_event_id: Option<Uuid>,
    /// Cancelling it abandons the kickoff, which then fails with [`CrewError::Cancelled`] (and
    /// is journaled as cancelled, so it can be resumed).
    pub cancellation: Option<CancellationToken>,
    /// The id to journal the run under (default: a new UUID). Choosing it lets the caller name
    /// the run before it starts (to print it, or to resume it after a crash).
    pub run_id: Option<String>,
    /// An enclosing run's ledger (a flow's): every call of the kickoff also counts there and is
    /// held to its budget too. The crew's own usage and budget stay separate.
    pub usage: Option<UsageTracker>,
}

/// One run of the crew, as the public entry points ask for it.
struct RunRequest {
    inputs: Inputs,
    plan: RunPlan,
    stream: bool,
    claim: Option<Arc<Mutex<StreamClaim>>>,
    options: KickoffOptions,
}

/// What a run starts from: a fresh kickoff restores nothing; a replay, resume or fork restores
/// the outputs of tasks that are not run again.
#[derive(Default)]
struct RunPlan {
    /// Outputs by task index, in index order. Not necessarily a prefix: async tasks of a killed
    /// run may have finished out of order.
    restored: Vec<(usize, TaskOutput)>,
    origin: RunOrigin,
    /// What earlier attempts of a resumed run used.
    prior_usage: Usage,
}

#[derive(Default)]
enum RunOrigin {
    #[default]
    Kickoff,
    /// `Crew::replay`: the latest-kickoff store already holds the restored outputs.
    Replay,
    /// `Crew::resume`: the journal already holds the restored outputs, under the same run id.
    Resume,
    /// `Crew::fork`: a new run whose restored outputs are copies from `parent`.
    Fork(RunParent),
}

/// The agents and tasks of one kickoff, interpolated.
struct Prepared {
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    manager: Option<Agent>,
}

impl Crew {
    pub fn builder() -> CrewBuilder {
        CrewBuilder::default()
    }

    pub fn id(&self) -> Uuid {
        self.spec.id
    }
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    pub fn agents(&self) -> &[Agent] {
        &self.spec.agents
    }
    pub fn tasks(&self) -> &[Task] {
        &self.spec.tasks
    }
    pub fn process(&self) -> Process {
        self.spec.process
    }
    /// The manager of a hierarchical crew.
    pub fn manager(&self) -> Option<&Agent> {
        self.spec.manager.as_ref()
    }
    /// The bus this crew reports to.
    pub fn event_bus(&self) -> &EventBus {
        &self.spec.events
    }

    fn record(&self) -> MutexGuard<'_, RunRecord> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.spec.last_run.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Usage of the latest kickoff (the sum of all runs after `kickoff_for_each`): in total, per
    /// agent role (the manager included) and per task.
    pub fn usage(&self) -> UsageSummary {
        self.record().usage.clone()
    }

    /// The tools the manager had for the last task it ran (the two delegation tools).
    pub fn manager_tools(&self) -> Vec<ToolHandle> {
        self.record().manager_tools.clone()
    }

    /// The placeholder names the agents and tasks use (CrewAI's `fetch_inputs`).
    pub fn fetch_inputs(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for agent in &self.spec.agents {
            for text in [agent.role(), agent.goal(), agent.backstory()] {
                names.extend(placeholders(text));
            }
        }
        for task in &self.spec.tasks {
            names.extend(placeholders(task.description()));
            names.extend(placeholders(task.expected_output()));
        }
        names
    }

    /// A copy of the crew with its own run bookkeeping (the bus, store and rate limit are shared).
    pub fn copy(&self) -> Crew {
        Crew {
            spec: Arc::new(self.respec(Uuid::new_v4(), self.spec.journal.clone())),
        }
    }

    /// The same crew journaling its runs to `journal` (see [`CrewBuilder::run_journal`]), for a
    /// crew built by someone else (a project loader).
    pub fn with_run_journal(&self, journal: Arc<dyn RunJournal>) -> Crew {
        let mut spec = self.respec(self.spec.id, Some(journal));
        spec.tool_cache = self.spec.tool_cache.clone();
        Crew {
            spec: Arc::new(spec),
        }
    }

    /// The crew's definition with fresh run bookkeeping and its own tool cache.
    fn respec(&self, id: Uuid, journal: Option<Arc<dyn RunJournal>>) -> CrewSpec {
        let s = &self.spec;
        CrewSpec {
            id,
            name: s.name.clone(),
            agents: s.agents.clone(),
            tasks: s.tasks.clone(),
            process: s.process,
            manager: s.manager.clone(),
            function_calling_llm: s.function_calling_llm.clone(),
            rate_limiter: s.rate_limiter.clone(),
            tool_cache: s.tool_cache.as_ref().map(|_| ToolCache::new()),
            stream: s.stream,
            events: s.events.clone(),
            hooks: s.hooks.clone(),
            step_callback: s.step_callback.clone(),
            task_callback: s.task_callback.clone(),
            before_kickoff: s.before_kickoff.clone(),
            after_kickoff: s.after_kickoff.clone(),
            store: s.store.clone(),
            journal,
            input_provider: s.input_provider.clone(),
            task_timeout: s.task_timeout,
            max_delegation_depth: s.max_delegation_depth,
            kickoff_concurrency: s.kickoff_concurrency,
            budget: s.budget,
            prices: s.prices.clone(),
            last_run: Mutex::new(RunRecord::default()),
        }
    }

    /// Runs the crew. `inputs` fill the `{placeholders}` of agents and tasks (empty: nothing is
    /// interpolated); every placeholder is checked before anything runs.
    pub async fn kickoff(&self, inputs: Inputs) -> Result<CrewOutput, CrewError> {
        self.kickoff_with(inputs, KickoffOptions::default()).await
    }

    /// [`Crew::kickoff`] inside a larger run (a flow method): the kickoff's events hang under
    /// `options.parent_event_id`, and cancelling `options.cancellation` abandons it.
    pub async fn kickoff_with(
        &self,
        inputs: Inputs,
        options: KickoffOptions,
    ) -> Result<CrewOutput, CrewError> {
        self.run(RunRequest {
            inputs,
            plan: RunPlan::default(),
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    /// Starts a kickoff in the background (on the current tokio runtime).
    pub fn kickoff_async(&self, inputs: Inputs) -> JoinHandle<Result<CrewOutput, CrewError>> {
        let crew = self.clone();
        tokio::spawn(async move { crew.kickoff(inputs).await })
    }

    /// Runs one kickoff per input set, concurrently (at most `kickoff_concurrency` at once), each on
    /// its own copy of the crew; outputs come back in input order, each with its own usage, and
    /// [`Crew::usage`] afterwards is their sum. All inputs are checked before any run starts.
    pub async fn kickoff_for_each(
        &self,
        inputs: Vec<Inputs>,
    ) -> Result<Vec<CrewOutput>, CrewError> {
        for set in &inputs {
            self.prepare(&self.apply_before_kickoff(set.clone()))?;
        }
        // Each run owns its copy, so the future borrows nothing from here and stays `Send`.
        let runs = futures::stream::iter(inputs.into_iter().map(|set| {
            let copy = self.copy();
            async move {
                let output = copy.kickoff(set).await;
                (output, copy.usage())
            }
        }))
        .buffered(self.spec.kickoff_concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
        let mut total = UsageSummary::default();
        for (_, usage) in &runs {
            total.add(usage);
        }
        self.record().usage = total;
        runs.into_iter().map(|(output, _)| output).collect()
    }

    /// Runs the crew and streams text chunks (from the model's streamed replies) and tool calls as
    /// they happen; the [`CrewStream`] ends with the kickoff's result. The kickoff runs on the
    /// current tokio runtime and is abandoned if the stream is dropped.
    pub fn kickoff_stream(&self, inputs: Inputs) -> CrewStream {
        let (sender, chunks) = mpsc::unbounded_channel();
        let claim = Arc::new(Mutex::new(StreamClaim::default()));
        let listener_claim = claim.clone();
        let listener = self.spec.events.subscribe(move |event| {
            if let Some(chunk) = listener_claim
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .chunk_for(event)
            {
                let _ = sender.send(chunk);
            }
        });
        let crew = self.clone();
        let result = tokio::spawn(async move {
            let outcome = crew.run_claimed(inputs, claim).await;
            crew.spec.events.unsubscribe(listener);
            outcome
        });
        CrewStream {
            crew: self.spec.name.clone(),
            events: self.spec.events.clone(),
            chunks,
            result: AbortOnDrop(result),
        }
    }

    async fn run_claimed(
        &self,
        inputs: Inputs,
        claim: Arc<Mutex<StreamClaim>>,
    ) -> Result<CrewOutput, CrewError> {
        claim.lock().unwrap_or_else(|p| p.into_inner()).armed_on =
            Some(std::thread::current().id());
        self.run(RunRequest {
            inputs,
            plan: RunPlan::default(),
            stream: true,
            claim: Some(claim),
            options: KickoffOptions::default(),
        })
        .await
    }

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
        let index = self
            .spec
            .tasks
            .iter()
            .position(|t| t.is_called(task))
            .ok_or_else(|| {
                CrewError::Replay(format!(
                    "Task with id {task} not found in the crew's tasks."
                ))
            })?;
        let stored = self.spec.store.load()?;
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
            },
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    /// The id of the latest run this crew started (also in [`CrewOutput::run_id`]); with
    /// concurrent kickoffs of one crew, choose ids with [`KickoffOptions::run_id`] instead.
    pub fn last_run_id(&self) -> Option<String> {
        self.record().run_id.clone()
    }

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
    /// let options = KickoffOptions { run_id: Some("run-1".into()), ..Default::default() };
    /// assert!(crew.kickoff_with(Default::default(), options).await.is_err());
    /// assert_eq!(journal.load("run-1")?.unwrap().status, RunStatus::Failed);
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
        let stored = self.stored_run(run_id)?;
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
        let stored = self.stored_run(run_id)?;
        let cannot = |message: String| CrewError::Resume {
            crew: self.spec.name.clone(),
            run_id: run_id.to_string(),
            message,
        };
        let index = self
            .spec
            .tasks
            .iter()
            .position(|t| t.is_called(from_task))
            .ok_or_else(|| {
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
            },
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    fn task_keys(&self) -> Vec<String> {
        self.spec.tasks.iter().map(Task::key).collect()
    }

    /// The journaled run, checked against this crew's tasks.
    fn stored_run(&self, run_id: &str) -> Result<StoredRun, CrewError> {
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
            .load(run_id)?
            .ok_or_else(|| cannot("the journal has no run with that id".into()))?;
        let ours = self.task_keys();
        if let Some(difference) = task_list_difference(&stored.task_keys, &ours) {
            return Err(cannot(format!(
                "it was started by a different crew: {difference}"
            )));
        }
        Ok(stored)
    }

    fn apply_before_kickoff(&self, mut inputs: Inputs) -> Inputs {
        for callback in &self.spec.before_kickoff {
            inputs = callback(inputs);
        }
        inputs
    }

    async fn run(&self, request: RunRequest) -> Result<CrewOutput, CrewError> {
        let RunRequest {
            inputs: given,
            plan,
            stream,
            claim,
            options,
        } = request;
        let spec = &self.spec;
        let inputs = self.apply_before_kickoff(given.clone());
        let prepared = self.prepare(&inputs)?;
        let run_id = options
            .run_id
            .clone()
            .unwrap_or_else(|| Uuid::new_v4().to_string());
        self.record().run_id = Some(run_id.clone());
        // A budget is the run's: a resumed run counts what its earlier attempts spent.
        let usage = UsageTracker::new()
            .with_prices(spec.prices.clone())
            .with_budget(spec.budget)
            .with_prior_spending(plan.prior_usage)
            .with_parent(options.usage.clone());
        let spending = RunSpending {
            attempt: usage.clone(),
            prior: plan.prior_usage,
        };
        let recorder = TaskRecorder {
            store: spec.store.clone(),
            journal: spec
                .journal
                .clone()
                .map(|journal| (journal, run_id.clone())),
            inputs: inputs.clone(),
            replaying: matches!(plan.origin, RunOrigin::Replay | RunOrigin::Fork(_)),
            spending: spending.clone(),
        };
        let journaled = self.start_run(&run_id, given, &plan, &prepared, &recorder, spending)?;

        let inputs_json =
            (!inputs.is_empty()).then(|| serde_json::to_value(&inputs).unwrap_or(Value::Null));
        let started = spec.events.emit(
            options.parent_event_id,
            EventKind::CrewKickoffStarted {
                crew_name: spec.name.clone(),
                crew_id: Some(spec.id.to_string()),
                inputs: inputs_json,
            },
        );
        if let Some(claim) = claim {
            claim.lock().unwrap_or_else(|p| p.into_inner()).armed_on = None;
        }

        let cancellation = options
            .cancellation
            .as_ref()
            .map(CancellationToken::child_token)
            .unwrap_or_default();
        let services = RunServices {
            events: spec.events.clone(),
            hooks: spec.hooks.clone(),
            tool_cache: spec.tool_cache.clone(),
            rate_limiter: spec.rate_limiter.clone(),
            crew_name: Some(spec.name.clone()),
            crew_id: Some(spec.id.to_string()),
            cancellation: cancellation.clone(),
            delegation: DelegationChain {
                chain: Vec::new(),
                max_depth: spec.max_delegation_depth,
            },
            usage: usage.clone(),
            step_callback: spec.step_callback.clone(),
            tool_failure_policy: None,
            stream,
            default_timeout: spec.task_timeout,
        };
        let run = RunContext {
            services,
            agents: prepared.agents.clone(),
            task_callback: spec.task_callback.clone(),
            input_provider: spec.input_provider.clone(),
            task_timeout: spec.task_timeout,
        };

        let result = tokio::select! {
            result = self.execute_tasks(&run, &prepared, started, plan.restored, &recorder) => result,
            _ = cancellation.cancelled() => Err(CrewError::Cancelled { crew: spec.name.clone() }),
            taken_over = journaled.keep_alive() => Err(CrewError::Store(taken_over)),
        };
        // An agent may notice the cancellation first and fail with its own error: it is still a cancellation.
        let result = match result {
            Err(CrewError::BudgetExceeded {
                crew,
                task,
                exceeded,
                completed,
                ..
            }) => Err(CrewError::BudgetExceeded {
                crew,
                task,
                exceeded,
                completed,
                usage: Box::new(usage.total()),
            }),
            Err(_) if cancellation.is_cancelled() => Err(CrewError::Cancelled {
                crew: spec.name.clone(),
            }),
            other => other,
        };
        // Whatever still runs for this kickoff (a coworker, a pending call) stops now.
        cancellation.cancel();
        self.record().usage = usage.summary();
        let total_usage = journaled.run_total();
        match result {
            Ok(outputs) => {
                let mut output = CrewOutput::from_tasks(outputs, usage.total());
                for callback in &spec.after_kickoff {
                    output = callback(output);
                }
                output.run_id = Some(run_id);
                journaled.finish(&RunEnd::completed(output.raw.clone(), total_usage))?;
                spec.events.emit(
                    Some(started),
                    EventKind::CrewKickoffCompleted {
                        crew_name: spec.name.clone(),
                        crew_id: Some(spec.id.to_string()),
                        output: output.raw.clone(),
                        total_tokens: output.token_usage.total_tokens,
                    },
                );
                Ok(output)
            }
            Err(error) => {
                let status = match &error {
                    CrewError::Cancelled { .. } => RunStatus::Cancelled,
                    CrewError::BudgetExceeded { .. } => RunStatus::BudgetStopped,
                    _ => RunStatus::Failed,
                };
                // The run's own error is what the caller needs; a journal that cannot record it
                // leaves the run `running`, which a resume handles the same way.
                if matches!(error, CrewError::Store(StoreError::RunOwned { .. })) {
                    // Another attempt owns the run now: its end is that attempt's to record.
                    journaled.release();
                } else if let Err(journal) = journaled.finish(&RunEnd::stopped(
                    status,
                    error.to_string(),
                    Some(total_usage),
                )) {
                    tracing::warn!(run_id = %run_id, "the run's end could not be journaled: {journal}");
                }
                spec.events.emit(
                    Some(started),
                    EventKind::CrewKickoffFailed {
                        crew_name: spec.name.clone(),
                        crew_id: Some(spec.id.to_string()),
                        error: error.to_string(),
                    },
                );
                Err(error)
            }
        }
    }

    /// Journals the start (claiming the run for this attempt) and resets the latest-kickoff
    /// store as the run's origin asks; the returned guard journals the run as cancelled if it is
    /// dropped before it ends.
    fn start_run(
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
        let journaled = self.journal_start(run_id, given, plan, rows().collect(), spending)?;
        match plan.origin {
            // The store already holds the replayed run's outputs.
            RunOrigin::Replay => {}
            RunOrigin::Kickoff => self.spec.store.reset()?,
            // A resumed or forked run becomes the latest kickoff, restored outputs included.
            RunOrigin::Resume | RunOrigin::Fork(_) => {
                self.spec.store.reset()?;
                for row in rows() {
                    self.spec.store.save(row)?;
                }
            }
        }
        Ok(journaled)
    }

    fn journal_start(
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
        journal.start(&RunStart {
            run_id: run_id.to_string(),
            crew: self.spec.name.clone(),
            inputs: given,
            task_keys: self.task_keys(),
            parent,
            carried_over,
            owner: owner.clone(),
        })?;
        Ok(JournaledRun {
            journal: Some(journal.clone()),
            run_id: run_id.to_string(),
            owner_token: owner.token,
            spending,
        })
    }

    /// Interpolates `inputs` into copies of the agents and tasks (checking every placeholder).
    fn prepare(&self, inputs: &Inputs) -> Result<Prepared, CrewError> {
        let spec = &self.spec;
        let adapt = |agent: &Agent| -> Result<Agent, InterpolationError> {
            let mut agent = interpolate_agent(agent, inputs)?;
            if agent.function_calling_llm().is_none()
                && let Some(llm) = &spec.function_calling_llm
            {
                agent = agent.with_function_calling_llm(llm.clone());
            }
            Ok(agent)
        };
        let mut by_id: BTreeMap<Uuid, Agent> = BTreeMap::new();
        let mut agents = Vec::with_capacity(spec.agents.len());
        for agent in &spec.agents {
            let ready = adapt(agent)?;
            by_id.insert(agent.id(), ready.clone());
            agents.push(ready);
        }
        let mut tasks = Vec::with_capacity(spec.tasks.len());
        for task in &spec.tasks {
            let mut ready = task.interpolated(inputs)?;
            if let Some(agent) = task.agent() {
                let agent = match by_id.get(&agent.id()) {
                    Some(known) => known.clone(),
                    None => {
                        let made = adapt(agent)?;
                        by_id.insert(agent.id(), made.clone());
                        made
                    }
                };
                ready = ready.with_agent(agent);
            }
            tasks.push(ready);
        }
        let manager = spec.manager.as_ref().map(adapt).transpose()?;
        Ok(Prepared {
            agents,
            tasks,
            manager,
        })
    }

    async fn execute_tasks(
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
                recorder.record(index, task, &skipped)?;
                done.push((index, skipped));
                continue;
            }
            let (agent, tools) = self.agent_and_tools(run, prepared, task, parent)?;
            let context = context_for(task, index, done, &prepared.tasks);
            if task.is_async() {
                let (run, task, agent) = (run.clone(), task.clone(), agent.clone());
                let recorder = recorder.clone();
                // Recorded inside the spawned task, the moment it finishes: a run killed before
                // the join still keeps this output.
                let handle = tokio::spawn(async move {
                    let output =
                        execute_task(&run, &task, &agent, context, tools, Some(parent)).await?;
                    recorder.record(index, &task, &output)?;
                    Ok(output)
                });
                pending.push(PendingTask {
                    index,
                    handle: AbortOnDrop(handle),
                });
            } else {
                let output = execute_task(run, task, &agent, context, tools, Some(parent)).await?;
                recorder.record(index, task, &output)?;
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
    /// delegation tools.
    fn agent_and_tools(
        &self,
        run: &RunContext,
        prepared: &Prepared,
        task: &Task,
        parent: Uuid,
    ) -> Result<(Agent, Vec<ToolHandle>), CrewError> {
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
                        DelegatedFrom {
                            task_name: task.name().map(str::to_string),
                            task_tools: Vec::new(),
                        },
                        Some(parent),
                    )
                } else {
                    Vec::new()
                };
                Ok((agent, merge_tools(own, delegation)))
            }
            Process::Hierarchical => {
                let manager = prepared.manager.clone().ok_or_else(|| CrewError::Manager {
                    crew: self.spec.name.clone(),
                    source: ManagerError::Missing,
                })?;
                let coworkers = hierarchical::coworkers_for(task, &prepared.agents);
                let from = DelegatedFrom {
                    task_name: task.name().map(str::to_string),
                    task_tools: task.tools().to_vec(),
                };
                let tools = run.delegation_tools(&manager, &coworkers, from, Some(parent));
                self.record().manager_tools = tools.clone();
                Ok((manager, tools))
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
struct TaskRecorder {
    store: Arc<dyn TaskOutputStore>,
    journal: Option<(Arc<dyn RunJournal>, String)>,
    inputs: Inputs,
    replaying: bool,
    spending: RunSpending,
}

/// What a run has used over all its attempts: the earlier attempts' journaled total plus this
/// attempt's ledger.
#[derive(Clone)]
struct RunSpending {
    attempt: UsageTracker,
    prior: Usage,
}

impl RunSpending {
    fn total(&self) -> Usage {
        let mut total = self.prior;
        total.add(&self.attempt.total());
        total
    }
}

impl TaskRecorder {
    fn row(&self, index: usize, task: &Task, output: &TaskOutput) -> StoredTaskOutput {
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

    fn record(&self, index: usize, task: &Task, output: &TaskOutput) -> Result<(), CrewError> {
        let row = self.row(index, task, output);
        if let Some((journal, run_id)) = &self.journal {
            journal.task_finished(run_id, &row, &self.spending.total())?;
        }
        self.store.save(row)?;
        Ok(())
    }
}

/// A journaled run until its end is recorded: dropped earlier (the kickoff's future was
/// dropped), it records the run as cancelled, so it can be resumed. The journal is synchronous
/// so this works from `Drop`.
struct JournaledRun {
    journal: Option<Arc<dyn RunJournal>>,
    run_id: String,
    /// This attempt's claim on the run.
    owner_token: String,
    spending: RunSpending,
}

impl JournaledRun {
    /// The run's usage over all its attempts so far.
    fn run_total(&self) -> Usage {
        self.spending.total()
    }

    /// Heartbeats the claim while the run goes on; ends only when another attempt has taken the
    /// run over (this one looked dead), so the run stops instead of doing its tasks twice.
    async fn keep_alive(&self) -> StoreError {
        let Some(journal) = &self.journal else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
            match journal.heartbeat(&self.run_id, &self.owner_token) {
                Ok(()) => {}
                Err(taken @ StoreError::RunOwned { .. }) => return taken,
                Err(error) => {
                    tracing::warn!(run_id = %self.run_id, "the run's heartbeat could not be journaled: {error}");
                }
            }
        }
    }

    /// Lets go of the run without journaling anything.
    fn release(mut self) {
        self.journal = None;
    }

    fn finish(mut self, end: &RunEnd) -> Result<(), StoreError> {
        match self.journal.take() {
            Some(journal) => journal.finish(&self.run_id, end),
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
            if let Err(error) = journal.finish(&self.run_id, &end) {
                tracing::warn!(run_id = %self.run_id, "the cancellation could not be journaled: {error}");
            }
        }
    }
}

fn interpolate_agent(agent: &Agent, inputs: &Inputs) -> Result<Agent, InterpolationError> {
    if inputs.is_empty() {
        return Ok(agent.clone());
    }
    let owner = format!("agent '{}'", agent.role());
    let at = |field: &'static str| Location {
        owner: owner.clone(),
        field,
    };
    let role = interpolate(agent.role(), inputs, &at("role"))?;
    let goal = interpolate(agent.goal(), inputs, &at("goal"))?;
    let backstory = interpolate(agent.backstory(), inputs, &at("backstory"))?;
    if role == agent.role() && goal == agent.goal() && backstory == agent.backstory() {
        return Ok(agent.clone());
    }
    Ok(agent.with_identity(role, goal, backstory))
}

/// Why a spawned task did not finish: its panic's message and `true`, or the cancellation and
/// `false`.
fn join_failure(join: tokio::task::JoinError) -> (String, bool) {
    match join.try_into_panic() {
        Ok(payload) => (panic_message(payload.as_ref()), true),
        Err(join) => (join.to_string(), false),
    }
}

/// A spawned task that is aborted when dropped, so a failed kickoff leaves nothing running.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct PendingTask {
    index: usize,
    handle: AbortOnDrop<Result<TaskOutput, CrewError>>,
}

/// What a chunk of a streamed kickoff carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamChunkType {
    Text,
    ToolCall,
}

/// A tool call announced in the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamToolCall {
    pub tool_name: String,
    pub arguments: Value,
}

/// One piece of a streamed kickoff (CrewAI's `StreamChunk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    /// Reply text (empty for tool calls).
    pub content: String,
    pub chunk_type: StreamChunkType,
    pub task_name: Option<String>,
    pub agent_role: Option<String>,
    pub tool_call: Option<StreamToolCall>,
}

/// Picks this kickoff's events off a bus other kickoffs may share: the kickoff's start event is
/// recognised while armed (it is emitted on the arming thread, synchronously), and from then on
/// every descendant of it.
#[derive(Default)]
struct StreamClaim {
    armed_on: Option<std::thread::ThreadId>,
    ours: std::collections::HashSet<Uuid>,
}

impl StreamClaim {
    fn chunk_for(&mut self, event: &Event) -> Option<StreamChunk> {
        let mine = if self.ours.is_empty() {
            matches!(event.kind, EventKind::CrewKickoffStarted { .. })
                && self.armed_on == Some(std::thread::current().id())
        } else {
            event
                .parent_event_id
                .is_some_and(|parent| self.ours.contains(&parent))
        };
        if !mine {
            return None;
        }
        self.ours.insert(event.event_id);
        match &event.kind {
            EventKind::LlmStreamChunk {
                agent_role,
                task_name,
                chunk,
                ..
            } if !chunk.is_empty() => Some(StreamChunk {
                content: chunk.clone(),
                chunk_type: StreamChunkType::Text,
                task_name: task_name.clone(),
                agent_role: agent_role.clone(),
                tool_call: None,
            }),
            EventKind::ToolUsageStarted {
                tool_name,
                tool_args,
                agent_role,
                task_name,
            } => Some(StreamChunk {
                content: String::new(),
                chunk_type: StreamChunkType::ToolCall,
                task_name: task_name.clone(),
                agent_role: agent_role.clone(),
                tool_call: Some(StreamToolCall {
                    tool_name: tool_name.clone(),
                    arguments: tool_args.clone(),
                }),
            }),
            _ => None,
        }
    }
}

/// A streamed kickoff: iterate the chunks, then take the result with [`CrewStream::result`].
pub struct CrewStream {
    crew: String,
    /// The crew's bus, where a panic of the kickoff's own task is counted.
    events: EventBus,
    chunks: mpsc::UnboundedReceiver<StreamChunk>,
    /// Dropping the stream abandons the kickoff: nothing keeps running unobserved.
    result: AbortOnDrop<Result<CrewOutput, CrewError>>,
}

impl CrewStream {
    /// Waits for the kickoff to finish (chunks not yet read are dropped).
    pub async fn result(self) -> Result<CrewOutput, CrewError> {
        let CrewStream {
            crew,
            events,
            mut result,
            ..
        } = self;
        (&mut result.0).await.map_err(|join| {
            let (message, panicked) = join_failure(join);
            if panicked {
                events.report_panic(
                    None,
                    CaughtPanic::new(PanicSite::Kickoff, crew.clone(), message.clone()),
                );
            }
            CrewError::TaskPanicked {
                crew,
                task: "kickoff".into(),
                message,
            }
        })?
    }
}

impl Stream for CrewStream {
    type Item = StreamChunk;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamChunk>> {
        self.chunks.poll_recv(cx)
    }
}

/// Builds a [`Crew`]; defaults are CrewAI's.
#[derive(Default)]
pub struct CrewBuilder {
    name: Option<String>,
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    process: Process,
    manager_llm: Option<Arc<dyn Llm>>,
    manager_agent: Option<Agent>,
    function_calling_llm: Option<Arc<dyn Llm>>,
    max_rpm: Option<u32>,
    rate_limiter: Option<Arc<RateLimiter>>,
    cache: bool,
    memory: bool,
    planning: bool,
    stream: bool,
    verbose: bool,
    events: Option<EventBus>,
    hooks: Hooks,
    step_callback: Option<StepCallback>,
    task_callback: Option<TaskCallback>,
    before_kickoff: Vec<BeforeKickoff>,
    after_kickoff: Vec<AfterKickoff>,
    output_log_file: Option<PathBuf>,
    store: Option<Arc<dyn TaskOutputStore>>,
    journal: Option<Arc<dyn RunJournal>>,
    input_provider: Option<Arc<dyn InputProvider>>,
    task_timeout: Option<Option<Duration>>,
    max_delegation_depth: Option<usize>,
    kickoff_concurrency: Option<usize>,
    budget: Budget,
    prices: Option<Arc<PriceTable>>,
}

impl CrewBuilder {
    /// The crew's name (default `crew`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    pub fn agents(mut self, agents: Vec<Agent>) -> Self {
        self.agents = agents;
        self
    }
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }
    pub fn tasks(mut self, tasks: Vec<Task>) -> Self {
        self.tasks = tasks;
        self
    }
    pub fn task(mut self, task: Task) -> Self {
        self.tasks.push(task);
        self
    }
    pub fn process(mut self, process: Process) -> Self {
        self.process = process;
        self
    }
    /// The model of the manager a hierarchical crew creates.
    pub fn manager_llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.manager_llm = Some(llm);
        self
    }
    /// A manager of your own for a hierarchical crew (it must have no tools).
    pub fn manager_agent(mut self, agent: Agent) -> Self {
        self.manager_agent = Some(agent);
        self
    }
    /// Given to agents that have no `function_calling_llm` of their own.
    pub fn function_calling_llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.function_calling_llm = Some(llm);
        self
    }
    /// One requests-per-minute limit shared by all the crew's agents (an agent's own wins).
    pub fn max_rpm(mut self, max_rpm: u32) -> Self {
        self.max_rpm = Some(max_rpm);
        self
    }
    /// A rate limiter of the caller's for the crew's agents (shared with other crews, or on a
    /// [`crewai_llm::VirtualClock`] in tests); it replaces the one `max_rpm` would make.
    pub fn rate_limiter(mut self, limiter: Arc<RateLimiter>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }
    /// Share tool results between the crew's agents (opt-in; agents with `cache: false` stay out).
    pub fn cache(mut self, cache: bool) -> Self {
        self.cache = cache;
        self
    }
    /// Not supported yet: `true` is rejected at build.
    pub fn memory(mut self, memory: bool) -> Self {
        self.memory = memory;
        self
    }
    /// Not supported yet: `true` is rejected at build.
    pub fn planning(mut self, planning: bool) -> Self {
        self.planning = planning;
        self
    }
    /// Stream model replies (chunks appear as `llm_stream_chunk` events; see `Crew::kickoff_stream`).
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }
    /// Print the run to standard output (a console listener on the crew's bus).
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }
    /// Report to this bus (default: a bus of the crew's own).
    pub fn event_bus(mut self, bus: EventBus) -> Self {
        self.events = Some(bus);
        self
    }
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }
    /// Called after every step of agents that have no step callback.
    pub fn step_callback(
        mut self,
        callback: impl Fn(&crate::agent::AgentStep) + Send + Sync + 'static,
    ) -> Self {
        self.step_callback = Some(Arc::new(callback));
        self
    }
    /// Called with every task's output.
    pub fn task_callback(mut self, callback: impl Fn(&TaskOutput) + Send + Sync + 'static) -> Self {
        self.task_callback = Some(Arc::new(callback));
        self
    }
    pub fn before_kickoff(
        mut self,
        callback: impl Fn(Inputs) -> Inputs + Send + Sync + 'static,
    ) -> Self {
        self.before_kickoff.push(Arc::new(callback));
        self
    }
    pub fn after_kickoff(
        mut self,
        callback: impl Fn(CrewOutput) -> CrewOutput + Send + Sync + 'static,
    ) -> Self {
        self.after_kickoff.push(Arc::new(callback));
        self
    }
    /// Append every event of the crew's runs to this file, one JSON object per line.
    pub fn output_log_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.output_log_file = Some(path.into());
        self
    }
    /// Where kickoffs keep task outputs for `replay` (default: in memory).
    pub fn task_output_store(mut self, store: Arc<dyn TaskOutputStore>) -> Self {
        self.store = Some(store);
        self
    }
    /// Journal every run here (each task's output as it finishes), so [`Crew::resume`] and
    /// [`Crew::fork`] can continue it (default: no journal). `crewai_store::Store` is a durable
    /// one; [`crate::store::InMemoryRunJournal`] lives as long as the process.
    pub fn run_journal(mut self, journal: Arc<dyn RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }
    /// Where `human_input` tasks ask for feedback (default: the console).
    pub fn input_provider(mut self, provider: Arc<dyn InputProvider>) -> Self {
        self.input_provider = Some(provider);
        self
    }
    /// The deadline of a task whose agent has no `max_execution_time` (default one hour; `None`:
    /// only the LLM layer's own timeouts apply).
    pub fn task_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.task_timeout = Some(timeout);
        self
    }
    /// How many hand-offs one delegation chain may have (default 3).
    pub fn max_delegation_depth(mut self, depth: usize) -> Self {
        self.max_delegation_depth = Some(depth);
        self
    }
    /// How many kickoffs `kickoff_for_each` runs at once (default 4).
    pub fn kickoff_concurrency(mut self, concurrency: usize) -> Self {
        self.kickoff_concurrency = Some(concurrency);
        self
    }

    /// Stops a kickoff before an LLM call that would take its cost over `usd` (priced with the
    /// crew's price table); the run ends with [`CrewError::BudgetExceeded`], keeping finished tasks.
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.budget.max_cost_usd = Some(usd);
        self
    }
    /// Stops a kickoff before an LLM call that would take its tokens (prompt and completion) over
    /// `tokens`; the run ends with [`CrewError::BudgetExceeded`], keeping finished tasks.
    pub fn max_tokens(mut self, tokens: u64) -> Self {
        self.budget.max_tokens = Some(tokens);
        self
    }
    /// The prices calls are priced with (default [`PriceTable::builtin`]).
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = Some(Arc::new(prices));
        self
    }

    /// Checks the crew (CrewAI's validations and ours) and builds it.
    pub fn build(self) -> Result<Crew, CrewError> {
        let name = self.name.unwrap_or_else(|| "crew".to_string());
        let config = |message: String| CrewError::Config {
            crew: name.clone(),
            message,
        };
        if self.planning {
            return Err(CrewError::Unsupported {
                crew: name,
                feature: "planning",
            });
        }
        if self.memory {
            return Err(CrewError::Unsupported {
                crew: name,
                feature: "memory",
            });
        }
        if self.tasks.is_empty() {
            return Err(config("a crew needs at least one task".into()));
        }
        if self.max_rpm == Some(0) {
            return Err(config(
                "`max_rpm` must be at least 1 (leave it unset for no limit)".into(),
            ));
        }
        if self
            .budget
            .max_cost_usd
            .is_some_and(|usd| !usd.is_finite() || usd <= 0.0)
        {
            return Err(config("`max_cost_usd` must be a positive number of US dollars (leave it unset for no limit)".into()));
        }
        if self.budget.max_tokens == Some(0) {
            return Err(config(
                "`max_tokens` must be at least 1 (leave it unset for no limit)".into(),
            ));
        }
        validate_tasks(&self.tasks, self.process).map_err(config)?;
        let manager = match self.process {
            Process::Sequential => None,
            Process::Hierarchical => {
                if self.agents.is_empty() && self.tasks.iter().any(|t| t.agent().is_none()) {
                    return Err(config(
                        "a hierarchical crew needs agents for its manager to delegate to".into(),
                    ));
                }
                Some(
                    hierarchical::manager(
                        self.manager_agent.as_ref(),
                        self.manager_llm.as_ref(),
                        &self.agents,
                    )
                    .map_err(|source| CrewError::Manager {
                        crew: name.clone(),
                        source,
                    })?,
                )
            }
        };
        let events = self.events.unwrap_or_default();
        if self.verbose {
            ConsoleListener::stdout().attach(&events);
        }
        if let Some(path) = &self.output_log_file {
            attach_log_file(&events, path).map_err(|e| {
                config(format!(
                    "cannot open output_log_file {}: {e}",
                    path.display()
                ))
            })?;
        }
        Ok(Crew {
            spec: Arc::new(CrewSpec {
                id: Uuid::new_v4(),
                name,
                agents: self.agents,
                tasks: self.tasks,
                process: self.process,
                manager,
                function_calling_llm: self.function_calling_llm,
                rate_limiter: self
                    .rate_limiter
                    .or_else(|| self.max_rpm.map(RateLimiter::per_minute)),
                tool_cache: self.cache.then(ToolCache::new),
                stream: self.stream,
                events,
                hooks: self.hooks,
                step_callback: self.step_callback,
                task_callback: self.task_callback,
                before_kickoff: self.before_kickoff,
                after_kickoff: self.after_kickoff,
                store: self
                    .store
                    .unwrap_or_else(|| Arc::new(InMemoryTaskOutputStore::new())),
                journal: self.journal,
                input_provider: self
                    .input_provider
                    .unwrap_or_else(|| Arc::new(ConsoleInputProvider)),
                task_timeout: self.task_timeout.unwrap_or(Some(DEFAULT_TASK_TIMEOUT)),
                max_delegation_depth: self
                    .max_delegation_depth
                    .unwrap_or(DEFAULT_MAX_DELEGATION_DEPTH),
                kickoff_concurrency: self
                    .kickoff_concurrency
                    .unwrap_or(DEFAULT_KICKOFF_CONCURRENCY),
                budget: self.budget,
                prices: self
                    .prices
                    .unwrap_or_else(|| Arc::new(PriceTable::builtin())),
                last_run: Mutex::new(RunRecord::default()),
            }),
        })
    }
}

/// CrewAI's task-list rules, plus a check that context names exist.
fn validate_tasks(tasks: &[Task], process: Process) -> Result<(), String> {
    for (index, task) in tasks.iter().enumerate() {
        if process == Process::Sequential && task.agent().is_none() {
            return Err(format!(
                "task '{}' has no agent; every task of a sequential crew needs one",
                task.key()
            ));
        }
        if let TaskContext::Tasks(names) = task.context() {
            for name in names {
                match tasks.iter().position(|t| t.is_called(name)) {
                    None => {
                        return Err(format!(
                            "task '{}' lists '{name}' in its context, but no task has that name",
                            task.key()
                        ));
                    }
                    Some(at) if at >= index => {
                        return Err(format!(
                            "task '{}' lists '{name}' in its context, but that task does not come before it",
                            task.key()
                        ));
                    }
                    Some(at) if at + 1 == index && task.is_async() && tasks[at].is_async() => {
                        return Err(format!(
                            "task '{}' is asynchronous and lists the asynchronous task '{name}' right before it in its context; they would run at the same time",
                            task.key()
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        if task.is_conditional() && index == 0 {
            return Err(format!(
                "the conditional task '{}' cannot be the first task: it needs a previous output to decide on",
                task.key()
            ));
        }
    }
    if tasks.iter().all(Task::is_conditional) {
        return Err("a crew needs at least one task that is not conditional".into());
    }
    let trailing_async = tasks.iter().rev().take_while(|t| t.is_async()).count();
    if trailing_async > 1 {
        return Err("the crew ends with more than one asynchronous task; end it with at most one (or a synchronous task that gathers them)".into());
    }
    Ok(())
}

fn attach_log_file(events: &EventBus, path: &PathBuf) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file = Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?,
    );
    events.subscribe(move |event| {
        if matches!(event.kind, EventKind::LlmStreamChunk { .. }) {
            return;
        }
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        // The log is best effort: a full disk must not fail the run.
        let _ = writeln!(file, "{}", event.to_json());
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::TaskOutput;

    fn done(raws: &[&str]) -> Vec<(usize, TaskOutput)> {
        raws.iter()
            .enumerate()
            .map(|(i, raw)| (i, TaskOutput::new("d", "e", *raw, "A")))
            .collect()
    }

    fn task(name: &str) -> Task {
        Task::builder()
            .name(name)
            .description("d")
            .expected_output("e")
            .build()
            .unwrap()
    }

    #[test]
    fn context_rules() {
        let tasks = vec![task("a"), task("b"), task("c")];
        let outputs = done(&["A", "", "C"]);
        assert_eq!(
            context_for(&tasks[2], 3, &outputs, &tasks).as_deref(),
            Some("A\n\n----------\n\nC")
        );
        let only_a = Task::builder()
            .name("x")
            .description("d")
            .expected_output("e")
            .context(["a"])
            .build()
            .unwrap();
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
        let none = Task::builder()
            .name("y")
            .description("d")
            .expected_output("e")
            .context_none()
            .build()
            .unwrap();
        assert_eq!(context_for(&none, 3, &outputs, &tasks), None);
    }

    #[test]
    fn validation_catches_bad_task_lists() {
        let later = Task::builder()
            .name("a")
            .description("d")
            .expected_output("e")
            .context(["b"])
            .build()
            .unwrap();
        let err = validate_tasks(&[later, task("b")], Process::Hierarchical).unwrap_err();
        assert!(err.contains("does not come before"), "{err}");
        let unknown = Task::builder()
            .name("a")
            .description("d")
            .expected_output("e")
            .context(["zzz"])
            .build()
            .unwrap();
        assert!(
            validate_tasks(&[unknown], Process::Hierarchical)
                .unwrap_err()
                .contains("zzz")
        );
        assert!(
            validate_tasks(&[task("a")], Process::Sequential)
                .unwrap_err()
                .contains("has no agent")
        );
        let conditional = Task::builder()
            .name("c")
            .description("d")
            .expected_output("e")
            .condition(|_| true)
            .build()
            .unwrap();
        assert!(
            validate_tasks(&[conditional], Process::Hierarchical)
                .unwrap_err()
                .contains("cannot be the first")
        );
        let a1 = Task::builder()
            .name("a1")
            .description("d")
            .expected_output("e")
            .async_execution(true)
            .build()
            .unwrap();
        let a2 = Task::builder()
            .name("a2")
            .description("d")
            .expected_output("e")
            .async_execution(true)
            .build()
            .unwrap();
        assert!(
            validate_tasks(&[a1, a2], Process::Hierarchical)
                .unwrap_err()
                .contains("more than one asynchronous")
        );
    }
}
