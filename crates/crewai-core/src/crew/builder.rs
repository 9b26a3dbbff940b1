//! [`CrewBuilder`]: building a crew and checking its configuration.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crewai_llm::{Llm, PriceTable, RateLimiter};
use crewai_tools::{ToolCache, ToolFailurePolicy};
use uuid::Uuid;

use crate::agent::{Agent, StepCallback};
use crate::delegation::DEFAULT_MAX_DELEGATION_DEPTH;
use crate::events::{ConsoleListener, EventBus, EventKind};
use crate::hooks::Hooks;
use crate::interpolate::Inputs;
use crate::output::{CrewOutput, TaskOutput};
use crate::process::hierarchical;
use crate::skills::SkillSource;
use crate::store::{InMemoryTaskOutputStore, RunJournal, TaskOutputStore};
use crate::task::{ConsoleInputProvider, InputProvider, Task, TaskCallback, TaskContext};
use crate::usage::Budget;

use super::{
    AfterKickoff, BeforeKickoff, Crew, CrewError, CrewSpec, DEFAULT_KICKOFF_CONCURRENCY,
    DEFAULT_TASK_TIMEOUT, Process, RunRecord,
};

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
    planning: bool,
    planning_llm: Option<Arc<dyn Llm>>,
    consensus: Option<crate::consensus::ConsensusConfig>,
    trained: crate::training::TrainedAgents,
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
    tool_failure_policy: Option<ToolFailurePolicy>,
    kickoff_concurrency: Option<usize>,
    budget: Budget,
    prices: Option<Arc<PriceTable>>,
    allow_unpriced: bool,
    skills: Vec<SkillSource>,
    memory: Option<crewai_memory::Memory>,
    knowledge: Option<crewai_knowledge::Knowledge>,
}

impl CrewBuilder {
    setters! {
        /// The crew's name (default `crew`).
        pub fn name(name: impl Into<String>) => name = Some(name.into());
        pub fn agents(agents: Vec<Agent>) => agents = agents;
        pub fn agent(agent: Agent) => |b| b.agents.push(agent);
        pub fn tasks(tasks: Vec<Task>) => tasks = tasks;
        /// Skills every agent of the crew gets after its own (CrewAI's crew `skills`; see
        /// [`crate::skills`]).
        pub fn skills(skills: Vec<SkillSource>) => skills = skills;
        pub fn skill(skill: impl Into<SkillSource>) => |b| b.skills.push(skill.into());
        /// The crew's memory (CrewAI's `memory=True`), for every agent without its own: before
        /// each task the five memories closest to it are recalled into its prompt; the agents
        /// get `search_memory` and `save_to_memory`; after each task (a delegated answer
        /// excepted) what its result is worth remembering is saved under `/agent/<role>`, in
        /// the background, all of it written before the kickoff returns. Root it at the crew's
        /// scope (`/crew/<name>`) with [`crewai_memory::MemoryBuilder::root_scope`].
        pub fn memory(memory: crewai_memory::Memory) => memory = Some(memory);
        /// The crew's knowledge (CrewAI's crew `knowledge_sources`; build it with
        /// [`crewai_knowledge::KnowledgeOwner::Crew`]): ingested at each kickoff (unchanged
        /// documents are skipped), searched before every task after the agent's own, and by
        /// [`Crew::query_knowledge`](super::Crew::query_knowledge).
        pub fn knowledge(knowledge: crewai_knowledge::Knowledge) => knowledge = Some(knowledge);
        pub fn task(task: Task) => |b| b.tasks.push(task);
        pub fn process(process: Process) => process = process;
        /// The model of the manager a hierarchical crew creates.
        pub fn manager_llm(llm: Arc<dyn Llm>) => manager_llm = Some(llm);
        /// A manager of your own for a hierarchical crew (it must have no tools).
        pub fn manager_agent(agent: Agent) => manager_agent = Some(agent);
        /// Given to agents that have no `function_calling_llm` of their own.
        pub fn function_calling_llm(llm: Arc<dyn Llm>) => function_calling_llm = Some(llm);
        /// One requests-per-minute limit shared by all the crew's agents (an agent's own wins).
        pub fn max_rpm(max_rpm: u32) => max_rpm = Some(max_rpm);
        /// A rate limiter of the caller's for the crew's agents (shared with other crews, or on a
        /// [`crewai_llm::VirtualClock`] in tests); it replaces the one `max_rpm` would make.
        pub fn rate_limiter(limiter: Arc<RateLimiter>) => rate_limiter = Some(limiter);
        /// Share tool results between the crew's agents (opt-in; agents with `cache: false` stay
        /// out).
        pub fn cache(cache: bool) => cache = cache;
        /// Plan before the tasks run (CrewAI's `planning=True`): a planner agent gets a
        /// summary of every task and answers with one plan per task, appended to the task's
        /// description for the run (see [`super::CrewPlan`]). One model call per kickoff (more
        /// when its answer needs converting), counted in the run's usage and budget.
        pub fn planning(planning: bool) => planning = planning;
        /// The planner's model (default: the default model, as for an agent without `llm`).
        pub fn planning_llm(llm: Arc<dyn Llm>) => planning_llm = Some(llm);
        /// How a consensual crew ([`Process::Consensual`]) works its tasks: the voters, the
        /// revision rounds and the decision (default: every agent votes after one revision).
        /// Given to a crew of another process, it is a configuration error.
        pub fn consensus(config: crate::consensus::ConsensusConfig) => consensus = Some(config);
        /// What training taught the agents (the trained-agents file, [`Crew::train`]): an
        /// agent whose role, after interpolation, has an entry ends each task prompt with its
        /// suggestions, as CrewAI does with a trained agent.
        pub fn trained_agents(trained: crate::training::TrainedAgents) => trained = trained;
        /// Stream model replies (chunks appear as `llm_stream_chunk` events; see
        /// `Crew::kickoff_stream`).
        pub fn stream(stream: bool) => stream = stream;
        /// Print the run to standard output (a console listener on the crew's bus).
        pub fn verbose(verbose: bool) => verbose = verbose;
        /// Report to this bus (default: a bus of the crew's own).
        pub fn event_bus(bus: EventBus) => events = Some(bus);
        /// Called after every step of agents that have no step callback.
        pub fn step_callback(callback: impl Fn(&crate::agent::AgentStep) + Send + Sync + 'static)
            => step_callback = Some(Arc::new(callback));
        /// What a failing tool does for agents and tasks without a policy of their own (default
        /// `warn`; a task's policy wins, then the agent's, then this one).
        pub fn tool_failure_policy(policy: ToolFailurePolicy)
            => tool_failure_policy = Some(policy);
        /// Called with every task's output.
        pub fn task_callback(callback: impl Fn(&TaskOutput) + Send + Sync + 'static)
            => task_callback = Some(Arc::new(callback));
        /// Append every event of the crew's runs to this file, one JSON object per line.
        pub fn output_log_file(path: impl Into<PathBuf>) => output_log_file = Some(path.into());
        /// Where kickoffs keep task outputs for `replay` (default: in memory).
        pub fn task_output_store(store: Arc<dyn TaskOutputStore>) => store = Some(store);
        /// Journal every run here (each task's output as it finishes), so [`Crew::resume`] and
        /// [`Crew::fork`] can continue it (default: no journal). `crewai_store::Store` is a durable
        /// one; [`crate::store::InMemoryRunJournal`] lives as long as the process.
        pub fn run_journal(journal: Arc<dyn RunJournal>) => journal = Some(journal);
        /// Where `human_input` tasks ask for feedback (default: the console).
        pub fn input_provider(provider: Arc<dyn InputProvider>) => input_provider = Some(provider);
        /// The deadline of a task whose agent has no `max_execution_time` (default one hour;
        /// `None`: only the LLM layer's own timeouts apply).
        pub fn task_timeout(timeout: Option<Duration>) => task_timeout = Some(timeout);
        /// How many hand-offs one delegation chain may have (default 3).
        pub fn max_delegation_depth(depth: usize) => max_delegation_depth = Some(depth);
        /// How many kickoffs `kickoff_for_each` runs at once (default 4).
        pub fn kickoff_concurrency(concurrency: usize) => kickoff_concurrency = Some(concurrency);
        /// Stops a kickoff before an LLM call that would take its cost over `usd` (priced with the
        /// crew's price table); the run ends with [`CrewError::BudgetExceeded`], keeping finished
        /// tasks.
        pub fn max_cost_usd(usd: f64) => budget.max_cost_usd = Some(usd);
        /// Stops a kickoff before an LLM call that would take its tokens (prompt and completion)
        /// over `tokens`; the run ends with [`CrewError::BudgetExceeded`], keeping finished tasks.
        pub fn max_tokens(tokens: u64) => budget.max_tokens = Some(tokens);
        /// The prices calls are priced with (default [`PriceTable::builtin`]).
        pub fn prices(prices: PriceTable) => prices = Some(Arc::new(prices));
        /// Lets a crew with `max_cost_usd` use models the price table does not know (their
        /// calls count as $0, so the budget does not see them). Without it such a crew is a
        /// configuration error at build time, naming the model.
        pub fn allow_unpriced(allow: bool) => allow_unpriced = allow;
        /// The crew's hooks (they run before each agent's). Layers added with
        /// [`CrewBuilder::llm_layer`] are kept.
        pub fn hooks(hooks: Hooks) => |b| b.hooks = hooks.replacing(std::mem::take(&mut b.hooks));
        /// A layer every model call of the crew goes through, whichever agent makes it and for
        /// what: agents' turns, summaries, LLM guardrail judges, structured-output converters, the
        /// manager's calls. The crew's layers run before each agent's own; where they sit in the
        /// stack, and an example, is in [`crate::llm_stack`].
        pub fn llm_layer(layer: impl crewai_llm::LlmLayer + 'static)
            => |b| b.hooks = std::mem::take(&mut b.hooks).llm_layer(layer);
        pub fn before_kickoff(callback: impl Fn(Inputs) -> Inputs + Send + Sync + 'static)
            => |b| b.before_kickoff.push(Arc::new(callback));
        pub fn after_kickoff(callback: impl Fn(CrewOutput) -> CrewOutput + Send + Sync + 'static)
            => |b| b.after_kickoff.push(Arc::new(callback));
    }

    /// Checks the crew (CrewAI's validations and ours) and builds it.
    pub fn build(self) -> Result<Crew, CrewError> {
        let name = self.name.unwrap_or_else(|| "crew".to_string());
        let config = |message: String| CrewError::Config {
            crew: name.clone(),
            message,
        };
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
        let consensus = match (self.process, &self.consensus) {
            (Process::Consensual, given) => {
                if self.manager_agent.is_some() || self.manager_llm.is_some() {
                    return Err(config_error(
                        &name,
                        "a consensual crew has no manager; remove `manager_llm` / `manager_agent` (or use `process: hierarchical`)",
                    ));
                }
                let given = given.clone().unwrap_or_default();
                Some(super::consensus::setup(&given, &self.agents, &self.tasks).map_err(config)?)
            }
            (_, Some(_)) => {
                return Err(config_error(
                    &name,
                    "a consensus configuration is set, but the crew's process is not consensual; set the process to `Process::Consensual` or remove it",
                ));
            }
            (_, None) => None,
        };
        let manager = match self.process {
            Process::Sequential | Process::Consensual => None,
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
        let planner = match self.planning {
            true => Some(
                super::planning::planner_agent(self.planning_llm)
                    .map_err(|e| config(format!("cannot set up the planner: {e}")))?,
            ),
            false => None,
        };
        let prices = self
            .prices
            .unwrap_or_else(|| Arc::new(PriceTable::builtin()));
        if self.budget.max_cost_usd.is_some() && !self.allow_unpriced {
            let callers = self
                .agents
                .iter()
                .chain(self.tasks.iter().filter_map(Task::agent))
                .chain(&manager)
                .chain(&planner)
                .chain(consensus.as_ref().and_then(|c| c.judge()));
            if let Some((role, model)) = first_unpriced(callers, &prices) {
                return Err(config(format!(
                    "`max_cost_usd` is set, but agent '{role}' uses model '{model}', which has no \
                     price: its calls would count as $0 and the budget would not hold. Add its \
                     price under `pricing:` in crew.yaml (or `CrewBuilder::prices`), or accept \
                     it with `crewai run --allow-unpriced` (`CrewBuilder::allow_unpriced`)"
                )));
            }
        }
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
                planner,
                consensus,
                trained: Arc::new(self.trained),
                function_calling_llm: self.function_calling_llm,
                rate_limiter: self
                    .rate_limiter
                    .or_else(|| self.max_rpm.map(RateLimiter::per_minute)),
                tool_cache: self.cache.then(ToolCache::new),
                stream: self.stream,
                events,
                hooks: self.hooks,
                step_callback: self.step_callback,
                tool_failure_policy: self.tool_failure_policy,
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
                skills: self.skills,
                memory: self.memory,
                knowledge: self.knowledge,
                prices,
                last_run: Mutex::new(RunRecord::default()),
            }),
        })
    }
}

fn config_error(crew: &str, message: &str) -> CrewError {
    CrewError::Config {
        crew: crew.to_string(),
        message: message.to_string(),
    }
}

/// The first of `agents` whose model (or function-calling model) `prices` has no price for:
/// its role and the model's name. An agent without a model of its own is skipped: the crew
/// cannot know what it will be given.
fn first_unpriced<'a>(
    mut agents: impl Iterator<Item = &'a Agent>,
    prices: &PriceTable,
) -> Option<(String, String)> {
    agents.find_map(|agent| {
        let models = agent
            .llm()
            .ok()
            .into_iter()
            .chain(agent.function_calling_llm().cloned());
        models
            .map(|llm| prices.priced_name(llm.provider(), llm.model()).into_owned())
            .find(|model| prices.lookup(model).is_none())
            .map(|model| (agent.role().to_string(), model))
    })
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
    use crate::task::test_task;

    fn task(name: &str) -> Task {
        test_task(name, |b| b)
    }

    #[test]
    fn validation_catches_bad_task_lists() {
        let later = test_task("a", |b| b.context(["b"]));
        let err = validate_tasks(&[later, task("b")], Process::Hierarchical).unwrap_err();
        assert!(err.contains("does not come before"), "{err}");
        let unknown = test_task("a", |b| b.context(["zzz"]));
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
        let conditional = test_task("c", |b| b.condition(|_| true));
        assert!(
            validate_tasks(&[conditional], Process::Hierarchical)
                .unwrap_err()
                .contains("cannot be the first")
        );
        let a1 = test_task("a1", |b| b.async_execution(true));
        let a2 = test_task("a2", |b| b.async_execution(true));
        assert!(
            validate_tasks(&[a1, a2], Process::Hierarchical)
                .unwrap_err()
                .contains("more than one asynchronous")
        );
    }
}
