//! An agent that plans before it acts (CrewAI's `planning_config`, and the older `reasoning` and
//! agent-level `planning` flags that map onto it): plan-and-execute.
//!
//! One execution with a [`PlanningConfig`] runs like this (see [`run`]):
//! 1. **Plan.** The planner (the agent's model, or `PlanningConfig::llm`) is made to call the
//!    `create_reasoning_plan` function: a summary, numbered steps (`description`, `tool_to_use`,
//!    `depends_on`) and `ready`. A plan that is not ready is refined, up to `max_attempts`
//!    calls in all. A model without function calling answers in the same schema as a
//!    structured output instead.
//! 2. **Execute.** Steps run as todos: every step whose dependencies are done runs, several at
//!    once (one at a time with `high` effort), each as a small execution of the agent with its
//!    tools, `max_step_iterations` tool rounds and `step_timeout`. A step is given the results
//!    of the steps it depends on.
//! 3. **Observe.** With `medium` or `high` effort (or `observe_steps: true`) the planner judges
//!    the results after each round of steps through the `observe_step_results` function: is the
//!    goal reached (the run stops early), is the last result already the answer, does the rest
//!    of the plan need changing. A replan (also made when a step fails) replaces the steps not
//!    yet run, at most `max_replans` times.
//! 4. **Answer.** One last call of the agent turns the step results into the final answer (in
//!    the task's response format when it has one), unless the last step's result is the answer.
//!
//! Every call goes through the execution's model stack, so hooks, the user's layers, the budget
//! and the rate limit hold for each, and their usage is the task's. Each phase is an event under
//! the agent's execution: `agent_reasoning_*` around planning, `plan_step_*` around each step
//! (whose model and tool calls hang under it), `plan_step_observed`, `plan_replanned`. The
//! execution's deadline (`max_execution_time`) bounds the whole; `step_timeout` each step.

mod plan;
mod run;

use std::sync::Arc;
use std::time::Duration;

use crewai_llm::Llm;

pub use plan::{OBSERVE_FUNCTION, PLAN_FUNCTION, PlanStep, ReasoningPlan, StepObservation};

/// How much thought an agent puts into its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// Plan once, run the steps, answer: no observation (a failed step still gets a replan).
    Low,
    /// Observe the results after each round of steps; replan when the observer asks.
    #[default]
    Medium,
    /// As `medium`, with the steps run one at a time so every result can redirect the next.
    High,
}

impl std::str::FromStr for ReasoningEffort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "low" => Ok(ReasoningEffort::Low),
            "medium" => Ok(ReasoningEffort::Medium),
            "high" => Ok(ReasoningEffort::High),
            other => Err(format!(
                "reasoning_effort '{other}' is not one of low, medium, high"
            )),
        }
    }
}

/// Plans refined at most when `max_attempts` is not set. CrewAI refines until the model says it
/// is ready; a limit keeps a model that never does from looping (and spending) without end.
pub const DEFAULT_PLAN_ATTEMPTS: u32 = 3;

/// Steps run at once in one round (the native loop's own ceiling for concurrent tool calls).
pub const MAX_CONCURRENT_STEPS: usize = 8;

/// CrewAI's `PlanningConfig`: how an agent plans and runs its plan.
///
/// ```
/// use crewai_core::reasoning::{PlanningConfig, ReasoningEffort};
/// let config = PlanningConfig {
///     reasoning_effort: ReasoningEffort::High,
///     max_replans: 1,
///     ..PlanningConfig::default()
/// };
/// assert!(config.observes());
/// assert_eq!(config.plan_attempts(), 3);
/// ```
#[derive(Clone)]
pub struct PlanningConfig {
    pub reasoning_effort: ReasoningEffort,
    /// Whether results are observed after each round; `None` follows the effort.
    pub observe_steps: Option<bool>,
    /// Calls that make or refine the plan before it runs (`None`: [`DEFAULT_PLAN_ATTEMPTS`]).
    pub max_attempts: Option<u32>,
    /// Steps a plan may have; a longer plan is cut, with a warning (default 20).
    pub max_steps: usize,
    /// Plans made again after the first (default 3).
    pub max_replans: u32,
    /// Tool rounds of one step before it must answer (default 15).
    pub max_step_iterations: u32,
    /// A deadline on each step (default none; the task's deadline still holds).
    pub step_timeout: Option<Duration>,
    /// Replaces the planner's system prompt.
    pub system_prompt: Option<String>,
    /// Replaces the request for a plan: `{task}`, `{tools}` and `{max_steps}` are filled in.
    pub plan_prompt: Option<String>,
    /// Replaces the request to refine a plan that is not ready: `{plan}` is filled in.
    pub refine_prompt: Option<String>,
    /// The planner's and observer's model (default: the agent's).
    pub llm: Option<Arc<dyn Llm>>,
}

impl Default for PlanningConfig {
    fn default() -> Self {
        PlanningConfig {
            reasoning_effort: ReasoningEffort::Medium,
            observe_steps: None,
            max_attempts: None,
            max_steps: 20,
            max_replans: 3,
            max_step_iterations: 15,
            step_timeout: None,
            system_prompt: None,
            plan_prompt: None,
            refine_prompt: None,
            llm: None,
        }
    }
}

impl std::fmt::Debug for PlanningConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanningConfig")
            .field("reasoning_effort", &self.reasoning_effort)
            .field("observe_steps", &self.observe_steps)
            .field("max_attempts", &self.max_attempts)
            .field("max_steps", &self.max_steps)
            .field("max_replans", &self.max_replans)
            .field("max_step_iterations", &self.max_step_iterations)
            .field("step_timeout", &self.step_timeout)
            .field("llm", &self.llm.as_ref().map(|l| l.model().to_string()))
            .finish_non_exhaustive()
    }
}

impl PlanningConfig {
    /// CrewAI's agent-level `planning: true`: a low-effort plan made in one call.
    pub fn quick() -> Self {
        PlanningConfig {
            reasoning_effort: ReasoningEffort::Low,
            max_attempts: Some(1),
            ..PlanningConfig::default()
        }
    }

    /// CrewAI's deprecated `reasoning: true` with `max_reasoning_attempts`.
    pub fn from_reasoning(max_reasoning_attempts: Option<u32>) -> Self {
        PlanningConfig {
            max_attempts: max_reasoning_attempts,
            ..PlanningConfig::default()
        }
    }

    /// Whether results are observed after each round of steps.
    pub fn observes(&self) -> bool {
        self.observe_steps
            .unwrap_or(self.reasoning_effort != ReasoningEffort::Low)
    }

    /// Calls that may make or refine the plan before it runs (at least one).
    pub fn plan_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(DEFAULT_PLAN_ATTEMPTS).max(1)
    }

    /// Steps run at once in one round.
    pub fn concurrent_steps(&self) -> usize {
        match self.reasoning_effort {
            ReasoningEffort::High => 1,
            ReasoningEffort::Low | ReasoningEffort::Medium => MAX_CONCURRENT_STEPS,
        }
    }

    /// The configuration's own mistakes, as the agent builder reports them.
    pub fn problem(&self) -> Option<&'static str> {
        if self.max_steps == 0 {
            return Some("`planning_config.max_steps` must be at least 1");
        }
        if self.max_step_iterations == 0 {
            return Some("`planning_config.max_step_iterations` must be at least 1");
        }
        if self.step_timeout.is_some_and(|t| t.is_zero()) {
            return Some(
                "`planning_config.step_timeout` must be longer than zero (leave it unset for none)",
            );
        }
        if self.max_attempts == Some(0) {
            return Some("`planning_config.max_attempts` must be at least 1");
        }
        None
    }
}
