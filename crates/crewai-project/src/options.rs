//! What a build needs besides the spec values: where tools, models, rate limiters and code come
//! from, and where the crew reports. Each is a hook the caller may replace; the defaults are what
//! `crewai run` uses.

use std::sync::Arc;

use crewai_core::events::EventBus;
use crewai_core::hooks::Hooks;
use crewai_core::store::TaskOutputStore;
use crewai_llm::{Llm, LlmConfig, LlmError, RateLimiter};

use crate::error::ProjectError;
use crate::registry::ToolRegistry;
use crate::resolve::CodeResolver;
use crate::spec::Origin;

/// Makes the model client of an `llm:` (after the default model is filled in). The default
/// builds it with [`crewai_llm::build_llm_with`] and [`BuildOptions::llm_build`]; a caller
/// replaces it to point every model somewhere else (a replay server) or to wrap each client.
pub type LlmFactory = Arc<dyn Fn(&LlmConfig) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync>;

/// Whose `max_rpm` a rate limiter serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimitOwner<'a> {
    /// An agent's own `max_rpm`: its key in the project and its role as written.
    Agent { key: &'a str, role: &'a str },
    /// The crew's `max_rpm`, shared by agents that set none.
    Crew,
}

/// Makes the limiter for a `max_rpm`. Without one the engine makes its own on the real clock;
/// a caller supplies limiters to share them or to run them on a virtual clock.
pub type RateLimiterFactory =
    Arc<dyn Fn(RateLimitOwner<'_>, u32) -> Arc<RateLimiter> + Send + Sync>;

/// What a build needs besides the project files.
///
/// ```
/// use crewai_project::{BuildOptions, ToolRegistry};
/// let options = BuildOptions::new(ToolRegistry::new()).with_llm(crewai_llm::LlmConfig::new("openai/gpt-4o-mini")).with_verbose(true);
/// assert!(options.llm_override.is_some());
/// ```
#[derive(Clone)]
pub struct BuildOptions {
    /// Where tool names are looked up.
    pub tools: ToolRegistry,
    /// A model for every agent and the manager, replacing the files' choices (`--llm`).
    pub llm_override: Option<LlmConfig>,
    /// The bus the crew emits its events on (progress display, logs). Agents built on their
    /// own ([`crate::Project::build_agent`]) emit on it too.
    pub event_bus: Option<EventBus>,
    /// Where kickoff outputs are kept for replay.
    pub task_output_store: Option<Arc<dyn TaskOutputStore>>,
    /// Overrides the files' `verbose` (agents and crew).
    pub verbose: Option<bool>,
    /// How model clients are built: extra providers (the embedded `local` model), environment,
    /// retry timing.
    pub llm_build: crewai_llm::BuildOptions,
    /// The model of agents (and the manager) whose files name none; `MODEL` or CrewAI's default
    /// when unset. Unlike `llm_override`, a model named in the files wins.
    pub default_llm: Option<LlmConfig>,
    /// Tool and model hooks of the crew (and of agents built on their own).
    pub hooks: Option<Hooks>,
    /// Replaces how model clients are made (see [`LlmFactory`]).
    pub llm_factory: Option<LlmFactory>,
    /// Supplies the limiters of `max_rpm` settings (see [`RateLimiterFactory`]).
    pub rate_limiters: Option<RateLimiterFactory>,
    /// Supplies what the files can only name: guardrails written as mappings, conditions,
    /// callbacks. Without one, such fields are refused with their place.
    pub code_resolver: Option<Arc<dyn CodeResolver>>,
    /// What training taught the agents (the trained-agents file): each agent whose role has an
    /// entry ends its task prompts with its suggestions.
    pub trained_agents: Option<crewai_core::training::TrainedAgents>,
    /// Lets a crew with `max_cost_usd` use models without a price (`--allow-unpriced`; see
    /// `CrewBuilder::allow_unpriced`).
    pub allow_unpriced: bool,
    /// Where the crew's and agents' memory is kept; default: the project's
    /// `.crewai/memory.db`. `crewai serve` and `worker` on `--database postgres://…` give the
    /// database's store, so every process shares one memory. (Knowledge stays in the file.)
    pub memory_store: Option<Arc<dyn crewai_memory::MemoryStore>>,
    /// The memory of the declarative flow running this build (`config.memory`): a crew that
    /// sets no `memory:` uses it.
    pub flow_memory: Option<crewai_memory::Memory>,
}

impl BuildOptions {
    pub fn new(tools: ToolRegistry) -> Self {
        BuildOptions {
            tools,
            llm_override: None,
            event_bus: None,
            task_output_store: None,
            verbose: None,
            llm_build: crewai_llm::BuildOptions::default(),
            default_llm: None,
            hooks: None,
            llm_factory: None,
            rate_limiters: None,
            code_resolver: None,
            trained_agents: None,
            allow_unpriced: false,
            memory_store: None,
            flow_memory: None,
        }
    }
    crewai_llm::setters! {
        /// Builds model clients with these options (register extra providers on them).
        pub fn with_llm_build(llm_build: crewai_llm::BuildOptions) => llm_build = llm_build;
        /// The model for agents whose files name none (see [`BuildOptions::default_llm`]).
        pub fn with_default_llm(default_llm: LlmConfig) => default_llm = Some(default_llm);
        /// A model for every agent and the manager (see [`BuildOptions::llm_override`]).
        pub fn with_llm(llm_override: LlmConfig) => llm_override = Some(llm_override);
        /// The bus the crew emits its events on (see [`BuildOptions::event_bus`]).
        pub fn with_event_bus(event_bus: EventBus) => event_bus = Some(event_bus);
        /// Where kickoff outputs are kept for replay.
        pub fn with_task_output_store(task_output_store: Arc<dyn TaskOutputStore>) => task_output_store = Some(task_output_store);
        /// Overrides the files' `verbose` (agents and crew).
        pub fn with_verbose(verbose: bool) => verbose = Some(verbose);
        /// Tool and model hooks of the crew (and of agents built on their own).
        pub fn with_hooks(hooks: Hooks) => hooks = Some(hooks);
        /// Supplies what the files can only name (see [`BuildOptions::code_resolver`]).
        pub fn with_code_resolver(code_resolver: Arc<dyn CodeResolver>) => code_resolver = Some(code_resolver);
        pub fn with_trained_agents(trained: crewai_core::training::TrainedAgents) => trained_agents = Some(trained);
        /// Lets a budgeted crew use models without a price (see [`BuildOptions::allow_unpriced`]).
        pub fn with_allow_unpriced(allow: bool) => allow_unpriced = allow;
        /// Keeps memory in this store (see [`BuildOptions::memory_store`]).
        pub fn with_memory_store(store: Arc<dyn crewai_memory::MemoryStore>) => memory_store = Some(store);
        /// Gives crews without `memory:` this memory (see [`BuildOptions::flow_memory`]).
        pub fn with_flow_memory(memory: crewai_memory::Memory) => flow_memory = Some(memory);
    }
    pub fn with_llm_factory(
        mut self,
        factory: impl Fn(&LlmConfig) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync + 'static,
    ) -> Self {
        self.llm_factory = Some(Arc::new(factory));
        self
    }
    pub fn with_rate_limiters(
        mut self,
        factory: impl Fn(RateLimitOwner<'_>, u32) -> Arc<RateLimiter> + Send + Sync + 'static,
    ) -> Self {
        self.rate_limiters = Some(Arc::new(factory));
        self
    }

    /// The limiter for `max_rpm` of `owner`, when the caller supplies limiters.
    pub(crate) fn rate_limiter(
        &self,
        owner: RateLimitOwner<'_>,
        max_rpm: u32,
    ) -> Option<Arc<RateLimiter>> {
        self.rate_limiters
            .as_ref()
            .map(|factory| factory(owner, max_rpm))
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("tools", &self.tools)
            .field("llm_override", &self.llm_override)
            .field("event_bus", &self.event_bus.is_some())
            .field("task_output_store", &self.task_output_store.is_some())
            .field("verbose", &self.verbose)
            .field("llm_build", &self.llm_build)
            .field("default_llm", &self.default_llm)
            .field("hooks", &self.hooks.is_some())
            .field("llm_factory", &self.llm_factory.is_some())
            .field("rate_limiters", &self.rate_limiters.is_some())
            .field("code_resolver", &self.code_resolver.is_some())
            .field(
                "trained_agents",
                &self.trained_agents.as_ref().map(|t| t.agents.len()),
            )
            .field("allow_unpriced", &self.allow_unpriced)
            .field("memory_store", &self.memory_store.is_some())
            .field("flow_memory", &self.flow_memory.is_some())
            .finish()
    }
}

/// ` (file:line)` of a field, for the context of build errors.
pub(crate) fn place(origin: Option<&Origin>) -> String {
    match origin {
        Some(origin) => match origin.line() {
            Some(line) => format!(" ({}:{line})", origin.source.display),
            None => format!(" ({})", origin.source.display),
        },
        None => String::new(),
    }
}

/// Creates a model client, naming who needs it and where it was configured.
pub(crate) fn make_llm(
    config: Option<&LlmConfig>,
    who: &str,
    origin: Option<&Origin>,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, ProjectError> {
    // An empty model means the default (the options' default model, else `MODEL`, else
    // CrewAI's), with the other settings kept.
    let default = options.default_llm.clone().unwrap_or_default();
    let config = match config {
        Some(config) if config.model.trim().is_empty() && config.provider.is_none() => LlmConfig {
            model: default.model.clone(),
            provider: default.provider.clone(),
            ..config.clone()
        },
        Some(config) => config.clone(),
        None => default,
    };
    let result = match &options.llm_factory {
        Some(factory) => factory(&config),
        None => crewai_llm::build_llm_with(&config, &options.llm_build),
    };
    result.map_err(|source| ProjectError::Llm {
        context: format!("{who}{}", place(origin)),
        source,
    })
}
