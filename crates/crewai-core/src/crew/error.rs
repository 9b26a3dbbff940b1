//! [`CrewError`]: what can go wrong building or running a crew.

use crewai_llm::Usage;

use crate::interpolate::InterpolationError;
use crate::output::TaskOutput;
use crate::process::hierarchical::ManagerError;
use crate::store::StoreError;
use crate::task::TaskError;
use crate::usage::BudgetExceeded;

/// Everything that can go wrong building or running a crew. A variant that wraps another error
/// keeps it as its source and says only what failed at the crew's level; show the whole chain
/// with [`crewai_llm::error_chain`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CrewError {
    #[error("crew '{crew}' is misconfigured: {message}")]
    Config { crew: String, message: String },
    #[error("crew '{crew}': cannot set up the manager")]
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
    /// `planning: true`: the planner gave no usable plan, so no task ran.
    #[error("crew '{crew}': planning the tasks failed")]
    Planning {
        crew: String,
        #[source]
        source: Box<super::PlanningError>,
    },
    /// `Crew::test` or `Crew::train`: the judge could not evaluate `task` (or an agent).
    #[error("crew '{crew}': evaluating '{task}' failed")]
    Evaluation {
        crew: String,
        task: String,
        #[source]
        source: crate::error::BoxedCause,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Replay(String),
    /// The crew's or an agent's knowledge could not be ingested or searched.
    #[error("crew '{crew}': knowledge failed")]
    Knowledge {
        crew: String,
        #[source]
        source: Box<crewai_knowledge::KnowledgeError>,
    },
    #[error("crew '{crew}': the kickoff was cancelled")]
    Cancelled { crew: String },
    /// [`Crew::resume`](super::Crew::resume) or [`Crew::fork`](super::Crew::fork) cannot use the
    /// stored run.
    #[error("crew '{crew}': cannot continue run {run_id}: {message}")]
    Resume {
        crew: String,
        run_id: String,
        message: String,
    },
    /// The run stopped before an LLM call that would have gone over the crew's budget. The tasks
    /// that finished are kept here (and in the task output store, so
    /// [`Crew::replay`](super::Crew::replay) from `task` resumes the run).
    #[error("crew '{crew}' stopped at task '{}' with {} finished task(s) kept", task.as_deref().unwrap_or("?"), completed.len())]
    BudgetExceeded {
        crew: String,
        /// The task that was running (its name, else its description).
        task: Option<String>,
        #[source]
        exceeded: Box<BudgetExceeded>,
        /// The outputs of the tasks that finished, in task order.
        completed: Vec<TaskOutput>,
        /// What the run used up to the stop.
        usage: Box<Usage>,
    },
}
