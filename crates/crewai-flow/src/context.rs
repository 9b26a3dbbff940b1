//! What a method function receives.

use std::sync::{Arc, Mutex};

use crewai_core::events::EventBus;
use crewai_core::usage::UsageTracker;
use crewai_core::{KickoffOptions, MemoryAccounting};
use crewai_memory::{Memory, MemoryMatch, MemoryRecord, RecallQuery, RememberOptions};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::definition::MethodError;
use crate::feedback::FeedbackRecord;
use crate::persistence::MethodRecord;
use crate::state::{FlowState, UnstructuredState};

/// The name a flow's memory work is counted under in its usage.
pub const FLOW_MEMORY_USAGE: &str = "(flow memory)";

/// What one kickoff's methods share.
pub(crate) struct RunShared<S> {
    pub(crate) flow_name: String,
    pub(crate) id: String,
    pub(crate) state: Mutex<S>,
    pub(crate) events: EventBus,
    pub(crate) cancellation: CancellationToken,
    pub(crate) outputs: Mutex<Vec<MethodRecord>>,
    pub(crate) feedback: Mutex<Vec<FeedbackRecord>>,
    /// The run's ledger, held to the flow's budget.
    pub(crate) usage: UsageTracker,
    /// The flow's memory, when it was given one.
    pub(crate) memory: Option<Memory>,
}

/// The triggering completion a listener was run for.
#[derive(Debug, Clone)]
pub(crate) struct TriggerInput {
    pub(crate) triggered_by: String,
    pub(crate) output: Value,
}

/// A method's view of its run: the state, the output that triggered it, the event bus (with this
/// method's execution event as the parent for anything it starts) and cancellation. Cheap to clone.
///
/// State access takes short closures (no `.await` inside) so concurrent methods never deadlock:
///
/// ```
/// use crewai_flow::{Flow, FlowContext};
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Clone, Default, Serialize, Deserialize)]
/// struct Counter { count: u32 }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let flow = Flow::typed_builder::<Counter>()
///     .start("bump", |ctx: FlowContext<Counter>| async move {
///         let now = ctx.update_state(|s| { s.count += 1; s.count });
///         Ok(json!({ "count": now, "run": ctx.state_id() }))
///     })
///     .build()
///     .unwrap();
/// let output = flow.kickoff([("count", json!(41))]).await.unwrap();
/// assert_eq!(output.state.count, 42);
/// # });
/// ```
pub struct FlowContext<S = UnstructuredState> {
    pub(crate) shared: Arc<RunShared<S>>,
    pub(crate) method: Arc<str>,
    pub(crate) trigger: Option<Arc<TriggerInput>>,
    pub(crate) event_id: Uuid,
}

impl<S: FlowState> Clone for FlowContext<S> {
    fn clone(&self) -> Self {
        FlowContext {
            shared: self.shared.clone(),
            method: self.method.clone(),
            trigger: self.trigger.clone(),
            event_id: self.event_id,
        }
    }
}

impl<S: FlowState> FlowContext<S> {
    /// The run's state id (UUID v4, or the id being resumed).
    pub fn state_id(&self) -> &str {
        &self.shared.id
    }

    pub fn flow_name(&self) -> &str {
        &self.shared.flow_name
    }

    /// The name of the method being run.
    pub fn method_name(&self) -> &str {
        &self.method
    }

    /// A copy of the current state.
    pub fn state(&self) -> S {
        self.read_state(S::clone)
    }

    /// Reads the state under its lock.
    pub fn read_state<R>(&self, read: impl FnOnce(&S) -> R) -> R {
        read(&self.shared.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Changes the state under its lock; other methods see the change at once.
    pub fn update_state<R>(&self, update: impl FnOnce(&mut S) -> R) -> R {
        update(&mut self.shared.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The output of the method that triggered this one (a router's output is its label); `None` for
    /// a start run at kickoff.
    pub fn trigger_output(&self) -> Option<&Value> {
        self.trigger.as_ref().map(|t| &t.output)
    }

    /// The triggering output deserialised as `T`; the error names this method and the trigger.
    pub fn trigger_output_as<T: DeserializeOwned>(&self) -> Result<T, MethodError> {
        let Some(trigger) = &self.trigger else {
            return Err(MethodError::msg(format!(
                "method `{}` was not triggered by another method, so it has no input",
                self.method
            )));
        };
        serde_json::from_value(trigger.output.clone()).map_err(|e| {
            MethodError::msg(format!(
                "method `{}`: the output of `{}` does not have the expected shape: {e}",
                self.method, trigger.triggered_by
            ))
        })
    }

    /// The method or label whose completion triggered this call.
    pub fn triggered_by(&self) -> Option<&str> {
        self.trigger.as_ref().map(|t| t.triggered_by.as_str())
    }

    /// The latest output of `method` in this run.
    pub fn method_output(&self, method: &str) -> Option<Value> {
        self.shared
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .find(|r| r.method == method)
            .map(|r| r.output.clone())
    }

    /// The newest human-feedback answer of this run.
    pub fn last_feedback(&self) -> Option<FeedbackRecord> {
        self.shared
            .feedback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .cloned()
    }

    /// The newest human-feedback answer given on `method`'s output in this run.
    pub fn feedback_of(&self, method: &str) -> Option<FeedbackRecord> {
        self.shared
            .feedback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .find(|r| r.method == method)
            .cloned()
    }

    /// The flow's event bus; give it to crews and agents run inside this method.
    pub fn events(&self) -> &EventBus {
        &self.shared.events
    }

    /// This call's `method_execution_started` event id: the parent for what the method starts.
    pub fn event_id(&self) -> Uuid {
        self.event_id
    }

    /// Cancelled when the kickoff is; pass it to crews and agents so they stop too.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.shared.cancellation
    }

    pub fn is_cancelled(&self) -> bool {
        self.shared.cancellation.is_cancelled()
    }

    /// The run's usage ledger: every call of the crews and agents run with
    /// [`FlowContext::crew_kickoff_options`] / [`FlowContext::agent_kickoff_options`] counts here,
    /// and the flow's budget (`max_cost_usd`, `max_tokens`) is checked against it.
    pub fn usage(&self) -> &UsageTracker {
        &self.shared.usage
    }

    /// The flow's memory as this method uses it: its events under this method's, its
    /// embeddings and model calls counted in the flow's usage (as `(flow memory)`) and refused
    /// past the flow's budget. An error when the flow has no memory
    /// ([`FlowBuilder::memory`](crate::FlowBuilder::memory)).
    pub fn memory(&self) -> Result<Memory, MethodError> {
        let memory = self.shared.memory.as_ref().ok_or_else(|| {
            MethodError::msg(format!(
                "flow '{}' has no memory: give it one with FlowBuilder::memory(...) before \
                 calling remember or recall",
                self.shared.flow_name
            ))
        })?;
        let accounting = MemoryAccounting {
            events: self.shared.events.clone(),
            parent: Some(self.event_id),
            usage: self.shared.usage.clone(),
            cancellation: self.shared.cancellation.clone(),
            owner: FLOW_MEMORY_USAGE.to_string(),
        };
        Ok(accounting.apply(memory)?)
    }

    /// Stores `content` in the flow's memory (CrewAI's `Flow.remember`); scope, categories and
    /// importance come from the memory's model when it has one, else its defaults.
    pub async fn remember(&self, content: impl Into<String>) -> Result<MemoryRecord, MethodError> {
        self.remember_with(content, RememberOptions::default())
            .await
    }

    /// [`FlowContext::remember`] with the scope, categories, importance, source ... given.
    pub async fn remember_with(
        &self,
        content: impl Into<String>,
        options: RememberOptions,
    ) -> Result<MemoryRecord, MethodError> {
        Ok(self.memory()?.remember(&content.into(), options).await?)
    }

    /// The memories closest to `query` (CrewAI's `Flow.recall`: ten, deep recall).
    pub async fn recall(&self, query: impl Into<String>) -> Result<Vec<MemoryMatch>, MethodError> {
        self.recall_with(RecallQuery::new(query)).await
    }

    /// [`FlowContext::recall`] with the scope, limit, depth ... given.
    pub async fn recall_with(&self, query: RecallQuery) -> Result<Vec<MemoryMatch>, MethodError> {
        Ok(self.memory()?.recall(query).await?)
    }

    /// Options for `Agent::kickoff_with` run inside this method: [`FlowContext::crew_kickoff_options`]
    /// and the flow's bus, which the agent reports to (a crew reports to its own bus, so the crew's
    /// options leave it out).
    pub fn agent_kickoff_options(&self) -> KickoffOptions {
        self.crew_kickoff_options()
            .event_bus(self.shared.events.clone())
    }

    /// Options for `Crew::kickoff_with` run inside this method: this method's start event as the
    /// kickoff's parent, the flow's cancellation, and the flow's usage ledger (the kickoff's calls
    /// count toward the flow's budget, and a crew's toward its own as well). Add to them with the
    /// [`KickoffOptions`] setters (`.run_id(..)`, say).
    pub fn crew_kickoff_options(&self) -> KickoffOptions {
        KickoffOptions::new()
            .parent_event(self.event_id)
            .cancellation(self.shared.cancellation.clone())
            .usage(self.shared.usage.clone())
    }
}
