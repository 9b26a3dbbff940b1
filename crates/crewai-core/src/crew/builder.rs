//! [`CrewBuilder`]: building a crew and checking its configuration.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crewai_llm::{Llm, PriceTable, RateLimiter};
use crewai_tools::ToolCache;
use uuid::Uuid;

use crate::agent::{Agent, StepCallback};
use crate::delegation::DEFAULT_MAX_DELEGATION_DEPTH;
use crate::events::{ConsoleListener, EventBus, EventKind};
use crate::hooks::Hooks;
use crate::interpolate::Inputs;
use crate::output::{CrewOutput, TaskOutput};
use crate::process::hierarchical;
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
    /// The crew's hooks (they run before each agent's). Layers added with
    /// [`CrewBuilder::llm_layer`] are kept.
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks.replacing(std::mem::take(&mut self.hooks));
        self
    }
    /// A layer every model call of the crew goes through, whichever agent makes it and for
    /// what: agents' turns, summaries, LLM guardrail judges, structured-output converters, the
    /// manager's calls. The crew's layers run before each agent's own; where they sit in the
    /// stack, and an example, is in [`crate::llm_stack`].
    pub fn llm_layer(mut self, layer: impl crewai_llm::LlmLayer + 'static) -> Self {
        self.hooks = std::mem::take(&mut self.hooks).llm_layer(layer);
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

    fn task(name: &str) -> Task {
        Task::builder()
            .name(name)
            .description("d")
            .expected_output("e")
            .build()
            .unwrap()
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
