//! Errors of the flow engine: one enum for building a definition, one for running it, one for
//! persistence backends.

use crewai_core::usage::{BudgetExceeded, UsageSummary};
use serde_json::Value;
use thiserror::Error;

use crate::persistence::MethodRecord;
use crate::state::StateError;

/// Boxed error returned by a method function (any `std::error::Error`, `anyhow::Error` or string).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A flow definition that cannot run, found by [`FlowBuilder::build`](crate::FlowBuilder::build).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FlowBuildError {
    #[error("the flow has no start method; add one with `.start(name, f)`")]
    NoStart,
    #[error("method `{0}` is defined twice; method names must be unique within a flow")]
    DuplicateMethod(String),
    #[error(
        "method `{method}` listens to `{trigger}`, which is neither a method of this flow nor a label declared by a router (known: {known})"
    )]
    UnknownTrigger {
        method: String,
        trigger: String,
        known: String,
    },
    #[error("method `{method}` has an empty `{combinator}(..)` trigger; give it at least one part")]
    EmptyTrigger {
        method: String,
        combinator: &'static str,
    },
    #[error(
        "router `{0}` declares no labels; declare the labels it may return with `.emits([..])`"
    )]
    RouterWithoutLabels(String),
    #[error(
        "label `{label}` declared by `{method}` is also the name of a method; rename one of them so triggers are unambiguous"
    )]
    LabelShadowsMethod { method: String, label: String },
    #[error(
        "`.{modifier}()` was called before any method was added; call it right after the method it configures"
    )]
    ModifierWithoutMethod { modifier: &'static str },
    #[error(
        "`.emits(..)` applies to routers only, but `{0}` is not a router (use `.router(..)`, or `.human_feedback(..)` with outcomes)"
    )]
    EmitsOnNonRouter(String),
    #[error("human feedback on `{method}`: {message}")]
    InvalidFeedback { method: String, message: String },
    #[error("max_method_calls must be at least 1")]
    ZeroMaxMethodCalls,
    #[error("the flow's {setting} must be greater than zero (got {value})")]
    InvalidBudget {
        setting: &'static str,
        value: String,
    },
    #[error("cannot open the flow persistence")]
    Persistence(#[from] PersistenceError),
}

/// A kickoff that did not complete. The variants that wrap a lower-level error say what failed
/// and keep it as their source (render the chain with `crewai_llm::error_chain`).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FlowError {
    #[error("flow `{flow}`: method `{method}` failed")]
    MethodFailed {
        flow: String,
        method: String,
        #[source]
        source: BoxError,
    },
    #[error("flow `{flow}`: method `{method}` panicked: {message}")]
    MethodPanicked {
        flow: String,
        method: String,
        message: String,
    },
    #[error("flow `{flow}`: method `{method}` returned a value that is not JSON-serialisable")]
    OutputNotSerializable {
        flow: String,
        method: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "flow `{flow}`: router `{method}` returned label `{label}`, which it does not declare (declared: {declared}); add it to `.emits([..])`"
    )]
    UndeclaredLabel {
        flow: String,
        method: String,
        label: String,
        declared: String,
    },
    #[error(
        "flow `{flow}` reached max_method_calls ({limit}) when about to run `{method}`; a router probably loops forever — fix the loop condition or raise the limit with `.max_method_calls(n)`"
    )]
    MaxMethodCallsExceeded {
        flow: String,
        method: String,
        limit: u32,
    },
    #[error("flow `{flow}`: invalid inputs for the state")]
    InvalidInputs {
        flow: String,
        #[source]
        source: StateError,
    },
    #[error("flow `{flow}`: the state cannot be converted to or from JSON")]
    StateConversion {
        flow: String,
        #[source]
        source: StateError,
    },
    #[error("flow `{flow}`: the saved state `{id}` cannot be used")]
    CorruptSnapshot {
        flow: String,
        id: String,
        #[source]
        source: BoxError,
    },
    #[error("flow `{flow}`: no saved state with id `{id}` to {action} from")]
    UnknownStateId {
        flow: String,
        id: String,
        action: &'static str,
    },
    #[error(
        "flow `{flow}`: {action} needs a persistence backend; configure one with `.persist()` or `.persistence(..)`"
    )]
    PersistenceRequired { flow: String, action: &'static str },
    #[error("flow `{flow}`: persistence failed")]
    Persistence {
        flow: String,
        #[source]
        source: PersistenceError,
    },
    #[error("flow `{flow}`: human feedback on `{method}` failed")]
    Feedback {
        flow: String,
        method: String,
        #[source]
        source: BoxError,
    },
    #[error(
        "flow `{flow}`: state `{id}` is not waiting for human feedback, so there is nothing to answer"
    )]
    NotAwaitingFeedback { flow: String, id: String },
    #[error("flow `{flow}` was cancelled")]
    Cancelled { flow: String },
    /// A method stopped before an LLM call (its own, or one of a crew or agent it ran with the
    /// flow's kickoff options) that would have gone over the flow's budget. What the run produced
    /// is kept here; with persistence, the run was saved with the stopped method still to run,
    /// so resuming `id` with a higher limit continues it.
    #[error("flow `{flow}` stopped in method `{method}` with {} method output(s) kept{}: {exceeded}", completed.len(), resume_hint(*saved, id))]
    BudgetExceeded {
        flow: String,
        /// The run's state id.
        id: String,
        /// The method that was stopped.
        method: String,
        exceeded: Box<BudgetExceeded>,
        /// The outputs of the methods that completed, in completion order.
        completed: Vec<MethodRecord>,
        /// The state at the stop, as JSON.
        state: Box<Value>,
        /// What the run used up to the stop.
        usage: Box<UsageSummary>,
        /// Whether the stop was saved (the flow has persistence), so that it can be resumed.
        saved: bool,
    },
}

fn resume_hint(saved: bool, id: &str) -> String {
    if saved {
        format!(" (saved: resume state `{id}` to continue)")
    } else {
        " (not saved: the flow has no persistence, so it cannot be resumed)".to_string()
    }
}

/// A persistence backend failure.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PersistenceError {
    #[error("SQLite database `{path}` failed")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create the directory for `{path}`")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the saved data for flow `{flow_uuid}` cannot be read or written")]
    Decode {
        flow_uuid: String,
        #[source]
        source: BoxError,
    },
    #[error("the persistence worker stopped")]
    Worker(#[source] tokio::task::JoinError),
    #[error("{0}")]
    Backend(String),
}
