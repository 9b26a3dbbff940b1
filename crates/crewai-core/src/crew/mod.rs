//! [`Crew`]: agents working through tasks, sequentially, under a manager, or by consensus
//! (CrewAI's `Crew`).
//!
//! A crew is a specification plus the bookkeeping of its latest kickoff (usage, the manager's
//! tools). Every kickoff works on its own interpolated copies of the agents and tasks, with its own
//! usage ledger and deadlines, so kickoffs never share run state: not between two crews, and not
//! between two kickoffs of the same crew.

mod builder;
mod consensus;
mod error;
mod execute;
mod journal;
mod kickoff;
mod knowledge;
mod planning;
mod replay;
mod stream;
mod testing;
mod training;

pub use crate::consensus::{
    ConsensusAnswer, ConsensusConfig, ConsensusDecision, ConsensusError, ConsensusOutcome,
    ConsensusRecord, ConsensusRound, ConsensusVote, DecisionMethod, JUDGEMENT_SCHEMA_NAME,
    VOTE_SCHEMA_NAME,
};
pub use crate::kickoff::KickoffOptions;
pub use crate::process::hierarchical::ManagerError;
pub use builder::CrewBuilder;
pub use error::CrewError;
pub use knowledge::{CREW_KNOWLEDGE_USAGE, QUERY_KNOWLEDGE_LIMIT, QUERY_KNOWLEDGE_THRESHOLD};
pub use planning::{
    CrewPlan, PLANNER_SCHEMA_NAME, PLANNING_TASK_NAME, PlanningError, TaskPlan, planner_prompt,
};
pub use stream::{CrewStream, StreamChunk, StreamChunkType, StreamToolCall};
pub use testing::{TEST_EVALUATION_SCHEMA_NAME, TaskScores, TestReport};
pub use training::{TRAINING_EVALUATION_SCHEMA_NAME, TrainingReport};

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crewai_llm::{Llm, PriceTable, RateLimiter};
use crewai_tools::{ToolCache, ToolFailurePolicy, ToolHandle};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::agent::{Agent, StepCallback};
use crate::events::EventBus;
use crate::hooks::Hooks;
use crate::interpolate::{Inputs, placeholders};
use crate::output::CrewOutput;
use crate::store::{RunJournal, TaskOutputStore};
use crate::task::{InputProvider, Task, TaskCallback};
use crate::usage::{Budget, UsageSummary};

/// How a crew goes through its tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Process {
    /// Each task by its own agent, in order.
    #[default]
    Sequential,
    /// Every task through a manager that delegates to the agents.
    Hierarchical,
    /// Every task answered by several agents, who revise after reading each other's answers
    /// and then vote, or let a judge decide (see [`crate::consensus`]; configured with
    /// [`CrewBuilder::consensus`]).
    Consensual,
}

/// Changes the inputs before a kickoff (CrewAI's `before_kickoff_callbacks`).
pub type BeforeKickoff = Arc<dyn Fn(Inputs) -> Inputs + Send + Sync>;
/// Changes the output after a kickoff (CrewAI's `after_kickoff_callbacks`).
pub type AfterKickoff = Arc<dyn Fn(CrewOutput) -> CrewOutput + Send + Sync>;

/// The default deadline of a task whose agent has no `max_execution_time`.
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);
/// How many kickoffs `kickoff_for_each` runs at once by default.
pub const DEFAULT_KICKOFF_CONCURRENCY: usize = 4;

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
    /// The planner of a crew with `planning: true`.
    planner: Option<Agent>,
    /// The voters and the judge of a consensual crew.
    consensus: Option<consensus::ConsensusSetup>,
    /// What training taught agents, by role: applied to each kickoff's interpolated agents.
    trained: Arc<crate::training::TrainedAgents>,
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
    /// For agents and tasks without a tool failure policy of their own.
    tool_failure_policy: Option<ToolFailurePolicy>,
    kickoff_concurrency: usize,
    budget: Budget,
    /// Given to every agent after its own skills.
    skills: Vec<crate::skills::SkillSource>,
    memory: Option<crewai_memory::Memory>,
    knowledge: Option<crewai_knowledge::Knowledge>,
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
    /// The policy for failing tools of agents and tasks that set none.
    pub fn tool_failure_policy(&self) -> Option<ToolFailurePolicy> {
        self.spec.tool_failure_policy
    }
    /// The manager of a hierarchical crew.
    pub fn manager(&self) -> Option<&Agent> {
        self.spec.manager.as_ref()
    }
    /// The planner agent of a crew with `planning: true`.
    pub fn planner(&self) -> Option<&Agent> {
        self.spec.planner.as_ref()
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
            planner: s.planner.clone(),
            consensus: s.consensus.clone(),
            trained: s.trained.clone(),
            function_calling_llm: s.function_calling_llm.clone(),
            rate_limiter: s.rate_limiter.clone(),
            tool_cache: s.tool_cache.as_ref().map(|_| ToolCache::new()),
            stream: s.stream,
            events: s.events.clone(),
            hooks: s.hooks.clone(),
            step_callback: s.step_callback.clone(),
            tool_failure_policy: s.tool_failure_policy,
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
            skills: s.skills.clone(),
            memory: s.memory.clone(),
            knowledge: s.knowledge.clone(),
            prices: s.prices.clone(),
            last_run: Mutex::new(RunRecord::default()),
        }
    }

    /// The id of the latest run this crew started (also in [`CrewOutput::run_id`]); with
    /// concurrent kickoffs of one crew, choose ids with [`KickoffOptions::run_id`] instead.
    pub fn last_run_id(&self) -> Option<String> {
        self.record().run_id.clone()
    }
}
