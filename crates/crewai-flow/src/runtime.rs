//! Running a flow: kickoff, resume, fork and feedback, on tokio.

use crewai_memory::Memory;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use crewai_core::events::{CaughtPanic, EventBus, EventKind, PanicSite, panic_message};
use crewai_core::usage::{Budget, UsageSummary, UsageTracker};
use crewai_llm::error_chain;
use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::context::{FlowContext, RunShared, TriggerInput};
use crate::definition::{FlowBuilder, MethodFailure, MethodInfo, MethodKind, MethodSpec};
use crate::error::{BoxError, FlowError};
use crate::feedback::{
    AwaitingFeedback, FeedbackProvider, FeedbackRecord, FeedbackReply, FeedbackRequest,
};
use crate::persistence::{
    FlowPersistence, FlowSnapshot, MethodRecord, PendingCall, RunProgress, RunStatus,
};
use crate::state::{self, FlowState, UnstructuredState};

/// A built, validated flow. Cheap to clone; every kickoff is an independent run with its own state.
///
/// ```
/// use crewai_flow::{and, on, Flow, FlowContext};
/// use serde_json::json;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let flow = Flow::builder()
///     .start("left", |_ctx: FlowContext| async move { Ok(1) })
///     .start("right", |_ctx: FlowContext| async move { Ok(2) })
///     .listen("sum", and(["left", "right"]), |ctx: FlowContext| async move {
///         let left = ctx.method_output("left").and_then(|v| v.as_i64()).unwrap_or(0);
///         let right = ctx.method_output("right").and_then(|v| v.as_i64()).unwrap_or(0);
///         Ok(left + right)
///     })
///     .build()
///     .unwrap();
/// let output = flow.kickoff(serde_json::Map::new()).await.unwrap();
/// assert_eq!(output.result, Some(json!(3)));
/// assert_eq!(output.method_outputs.len(), 3);
/// # });
/// ```
pub struct Flow<S: FlowState = UnstructuredState> {
    inner: Arc<FlowInner<S>>,
}

impl<S: FlowState> Clone for Flow<S> {
    fn clone(&self) -> Self {
        Flow {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct FlowInner<S> {
    pub(crate) name: String,
    pub(crate) methods: Vec<MethodSpec<S>>,
    pub(crate) initial_state: S,
    pub(crate) events: EventBus,
    pub(crate) persistence: Option<Arc<dyn FlowPersistence>>,
    pub(crate) persist_all: bool,
    pub(crate) feedback: Arc<dyn FeedbackProvider>,
    pub(crate) max_method_calls: u32,
    pub(crate) budget: Budget,
    pub(crate) memory: Option<Memory>,
}

impl Flow<UnstructuredState> {
    /// A builder for a flow with an unstructured (JSON map) state.
    pub fn builder() -> FlowBuilder<UnstructuredState> {
        FlowBuilder::new()
    }

    /// A builder for a flow with a typed state `T`.
    pub fn typed_builder<T: FlowState>() -> FlowBuilder<T> {
        FlowBuilder::new()
    }
}

/// How to start a run: inputs, an id to resume, a saved state to fork, an answer for a paused
/// feedback request, a cancellation token and a parent event.
///
/// ```
/// use crewai_flow::Kickoff;
/// use serde_json::json;
/// let request = Kickoff::new().input("topic", json!("rust")).resume("0b9c…");
/// # let _ = request;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Kickoff {
    inputs: Map<String, Value>,
    resume: Option<String>,
    fork_from: Option<String>,
    feedback: Option<String>,
    cancellation: Option<CancellationToken>,
    parent_event: Option<Uuid>,
}

impl Kickoff {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inputs merged into the state; an `id` input resumes that state (as in CrewAI).
    pub fn inputs<K: Into<String>>(mut self, inputs: impl IntoIterator<Item = (K, Value)>) -> Self {
        self.inputs
            .extend(inputs.into_iter().map(|(k, v)| (k.into(), v)));
        self
    }

    pub fn input(mut self, key: impl Into<String>, value: Value) -> Self {
        self.inputs.insert(key.into(), value);
        self
    }

    crewai_llm::setters! {
        /// Resumes the saved state `resume`: an unfinished run continues with the calls it had
        /// scheduled (completed methods are not re-run); a finished one starts over from its
        /// saved state. An unknown id starts a fresh run under that id.
        pub fn resume(resume: impl Into<String>) => resume = Some(resume.into());
        /// Starts a fresh run under a new id from the saved state `fork_from`, leaving the
        /// original untouched.
        pub fn fork_from(fork_from: impl Into<String>) => fork_from = Some(fork_from.into());
        /// The answer to the oldest feedback request the resumed run is waiting on.
        pub fn feedback(feedback: impl Into<String>) => feedback = Some(feedback.into());
        /// Cancelling it stops the run: running methods are dropped and the kickoff fails with
        /// [`FlowError::Cancelled`].
        pub fn cancellation(cancellation: CancellationToken) => cancellation = Some(cancellation);
        /// The parent of the `flow_started` event (e.g. the method of an enclosing flow).
        pub fn parent_event(parent_event: Uuid) => parent_event = Some(parent_event);
    }
}

/// Appends `record` to the run's own list and to the copy its methods read.
fn keep<T: Clone>(own: &mut Vec<T>, shared: &Mutex<Vec<T>>, record: T) {
    own.push(record.clone());
    shared
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(record);
}

/// Whether a run finished.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", content = "awaiting", rename_all = "snake_case")]
pub enum FlowStatus {
    Completed,
    /// Paused until these methods get an answer ([`Flow::resume_with_feedback`]).
    AwaitingFeedback(Vec<AwaitingFeedback>),
}

/// The outcome of a kickoff.
#[derive(Debug, Clone, Serialize)]
pub struct FlowOutput<S> {
    /// The state id (pass it to [`Kickoff::resume`] or [`Kickoff::fork_from`]).
    pub id: String,
    pub status: FlowStatus,
    /// The output of the last method that completed.
    pub result: Option<Value>,
    pub state: S,
    /// Every method output of the run, in completion order (a resumed run includes the outputs
    /// saved before it).
    pub method_outputs: Vec<MethodRecord>,
    pub feedback: Vec<FeedbackRecord>,
    /// What the run's LLM calls used (those of crews and agents run with the flow's kickoff
    /// options), with cost; a resumed run includes what it used before.
    pub usage: UsageSummary,
}

impl<S> FlowOutput<S> {
    /// The latest output of `method`.
    pub fn output_of(&self, method: &str) -> Option<&Value> {
        self.method_outputs
            .iter()
            .rev()
            .find(|r| r.method == method)
            .map(|r| &r.output)
    }

    /// The result deserialised as `T`.
    pub fn result_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.result.clone().unwrap_or(Value::Null))
    }

    pub fn is_completed(&self) -> bool {
        self.status == FlowStatus::Completed
    }
}

impl<S: FlowState> Flow<S> {
    pub(crate) fn from_inner(inner: FlowInner<S>) -> Self {
        Flow {
            inner: Arc::new(inner),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The bus this flow's events go to; subscribe to it before kickoff.
    pub fn event_bus(&self) -> &EventBus {
        &self.inner.events
    }

    pub fn max_method_calls(&self) -> u32 {
        self.inner.max_method_calls
    }

    /// The run budget set with [`FlowBuilder::max_cost_usd`] / [`FlowBuilder::max_tokens`].
    pub fn budget(&self) -> Budget {
        self.inner.budget
    }

    pub fn persistence(&self) -> Option<&Arc<dyn FlowPersistence>> {
        self.inner.persistence.as_ref()
    }

    /// The methods in declaration order.
    pub fn methods(&self) -> Vec<MethodInfo<'_>> {
        self.inner.methods.iter().map(MethodSpec::info).collect()
    }

    /// Runs the flow with `inputs` merged into a fresh state (an `id` input resumes that state).
    pub async fn kickoff<K: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<FlowOutput<S>, FlowError> {
        self.kickoff_with(Kickoff::new().inputs(inputs)).await
    }

    /// Resumes the saved run `id` (see [`Kickoff::resume`]).
    pub async fn resume(&self, id: impl Into<String>) -> Result<FlowOutput<S>, FlowError> {
        self.kickoff_with(Kickoff::new().resume(id)).await
    }

    /// Starts a new run from the saved state `id` with `inputs` merged in (see [`Kickoff::fork_from`]).
    pub async fn fork<K: Into<String>>(
        &self,
        id: impl Into<String>,
        inputs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<FlowOutput<S>, FlowError> {
        self.kickoff_with(Kickoff::new().fork_from(id).inputs(inputs))
            .await
    }

    /// Answers the feedback request the saved run `id` is paused on, and continues it.
    pub async fn resume_with_feedback(
        &self,
        id: impl Into<String>,
        answer: impl Into<String>,
    ) -> Result<FlowOutput<S>, FlowError> {
        self.kickoff_with(Kickoff::new().resume(id).feedback(answer))
            .await
    }

    /// The saved state of run `id`, if the persistence has one.
    pub async fn saved_state(&self, id: &str) -> Result<Option<S>, FlowError> {
        match self.load_snapshot(id).await? {
            Some(snapshot) => Ok(Some(self.state_from_snapshot(&snapshot)?)),
            None => Ok(None),
        }
    }

    /// The general kickoff.
    pub async fn kickoff_with(&self, request: Kickoff) -> Result<FlowOutput<S>, FlowError> {
        let Kickoff {
            mut inputs,
            resume,
            fork_from,
            feedback,
            cancellation,
            parent_event,
        } = request;
        let resume = match inputs.remove("id") {
            Some(Value::String(id)) => resume.or(Some(id)),
            Some(other) => resume.or(Some(other.to_string())),
            None => resume,
        };
        let (id, initial, progress) = if let Some(source) = fork_from {
            let snapshot =
                self.load_snapshot(&source)
                    .await?
                    .ok_or_else(|| FlowError::UnknownStateId {
                        flow: self.name().into(),
                        id: source.clone(),
                        action: "fork",
                    })?;
            (
                Uuid::new_v4().to_string(),
                self.state_from_snapshot(&snapshot)?,
                RunProgress::default(),
            )
        } else if let Some(id) = resume {
            match self.load_snapshot(&id).await? {
                Some(snapshot) => {
                    let state = self.state_from_snapshot(&snapshot)?;
                    let progress = if snapshot.progress.status == RunStatus::Completed {
                        RunProgress::default()
                    } else {
                        snapshot.progress
                    };
                    (id, state, progress)
                }
                None => (id, self.inner.initial_state.clone(), RunProgress::default()),
            }
        } else {
            (
                Uuid::new_v4().to_string(),
                self.inner.initial_state.clone(),
                RunProgress::default(),
            )
        };
        if feedback.is_some() && progress.awaiting_feedback.is_empty() {
            return Err(FlowError::NotAwaitingFeedback {
                flow: self.name().into(),
                id,
            });
        }
        let merged =
            state::merge_inputs(&initial, &inputs).map_err(|source| FlowError::InvalidInputs {
                flow: self.name().into(),
                source,
            })?;
        let with_id = state::with_id(merged, &id).map_err(|source| FlowError::StateConversion {
            flow: self.name().into(),
            source,
        })?;

        let events = self.inner.events.clone();
        let flow_event = events.emit(
            parent_event,
            EventKind::FlowStarted {
                flow_name: self.name().into(),
                inputs: (!inputs.is_empty()).then(|| Value::Object(inputs.clone())),
            },
        );
        let usage = UsageTracker::new().with_budget(self.inner.budget);
        usage.add_summary(&progress.usage);
        let shared = Arc::new(RunShared {
            flow_name: self.name().into(),
            id,
            state: Mutex::new(with_id),
            events,
            cancellation: cancellation.unwrap_or_default(),
            outputs: Mutex::new(progress.completed.clone()),
            feedback: Mutex::new(progress.feedback.clone()),
            usage,
            memory: self.inner.memory.clone(),
        });
        let run = Run {
            flow: self.inner.clone(),
            shared,
            progress,
            running: JoinSet::new(),
            in_flight: BTreeMap::new(),
            next_call: 0,
            flow_event,
            last_output: None,
        };
        run.execute(feedback).await
    }

    async fn load_snapshot(&self, id: &str) -> Result<Option<FlowSnapshot>, FlowError> {
        match &self.inner.persistence {
            Some(backend) => {
                backend
                    .load_state(id)
                    .await
                    .map_err(|source| FlowError::Persistence {
                        flow: self.name().into(),
                        source,
                    })
            }
            None => Ok(None),
        }
    }

    fn state_from_snapshot(&self, snapshot: &FlowSnapshot) -> Result<S, FlowError> {
        state::from_json(snapshot.state.clone()).map_err(|e| FlowError::CorruptSnapshot {
            flow: self.name().into(),
            id: snapshot.flow_uuid.clone(),
            source: Box::new(e),
        })
    }
}

/// How a call ended: the method's result, or the panic message.
type CallEnd = (u64, Result<Result<Value, MethodFailure>, String>);

/// What a feedback request led to.
enum FeedbackStep {
    /// Answered; the selected outcome label, if the method declares outcomes.
    Answered(Option<String>),
    Paused,
}

/// The call a budget stop ended, and the stop.
struct BudgetStop {
    call_id: u64,
    call: PendingCall,
    started: Uuid,
    exceeded: crewai_core::usage::BudgetExceeded,
}

/// One kickoff in progress.
struct Run<S> {
    flow: Arc<FlowInner<S>>,
    shared: Arc<RunShared<S>>,
    progress: RunProgress,
    /// Dropping it (on any error) aborts the methods still running.
    running: JoinSet<CallEnd>,
    in_flight: BTreeMap<u64, (PendingCall, Uuid)>,
    next_call: u64,
    flow_event: Uuid,
    last_output: Option<Value>,
}

impl<S: FlowState> Run<S> {
    fn flow_name(&self) -> String {
        self.flow.name.clone()
    }

    async fn execute(mut self, answer: Option<String>) -> Result<FlowOutput<S>, FlowError> {
        let resumed = std::mem::take(&mut self.progress.pending);
        let awaiting = std::mem::take(&mut self.progress.awaiting_feedback);
        if resumed.is_empty() && awaiting.is_empty() && self.progress.completed.is_empty() {
            let flow = self.flow.clone();
            for spec in flow
                .methods
                .iter()
                .filter(|m| m.kind == MethodKind::Start && m.trigger.is_none())
            {
                self.schedule(
                    PendingCall {
                        method: spec.name.clone(),
                        triggered_by: None,
                        trigger_output: None,
                    },
                    true,
                )?;
            }
        } else {
            // Calls scheduled before the interruption were already counted.
            for call in resumed {
                self.schedule(call, false)?;
            }
        }
        let mut answer = answer;
        for waiting in awaiting {
            let index = self.index_of(&waiting.method)?;
            let step = self
                .ask_feedback(index, &waiting.output, answer.take())
                .await?;
            self.after_feedback(index, &waiting.output, step)?;
        }

        let cancellation = self.shared.cancellation.clone();
        loop {
            let next = tokio::select! {
                biased;
                _ = cancellation.cancelled() => return Err(FlowError::Cancelled { flow: self.flow_name() }),
                next = self.running.join_next() => next,
            };
            let Some(joined) = next else { break };
            // Panics are caught inside each task, so a join error can only be an abort.
            let Ok((call_id, ended)) = joined else {
                return Err(FlowError::Cancelled {
                    flow: self.flow_name(),
                });
            };
            let Some((call, started)) = self.in_flight.remove(&call_id) else {
                continue;
            };
            match ended {
                Ok(Ok(output)) => self.complete(call, started, output).await?,
                Ok(Err(failure)) => {
                    if let Some(exceeded) = self.shared.usage.budget_stop() {
                        let stop = BudgetStop {
                            call_id,
                            call,
                            started,
                            exceeded,
                        };
                        return Err(self.stop_on_budget(stop, failure).await);
                    }
                    return Err(self.fail(&call.method, started, failure));
                }
                Err(panic) => {
                    // Counted on the flow's bus as well as failing the flow, so a panic is
                    // visible however the caller handles the error.
                    self.shared.events.report_panic(
                        Some(started),
                        CaughtPanic::new(PanicSite::FlowMethod, call.method.clone(), panic.clone()),
                    );
                    self.emit_failed(&call.method, started, &format!("panicked: {panic}"));
                    return Err(FlowError::MethodPanicked {
                        flow: self.flow_name(),
                        method: call.method,
                        message: panic,
                    });
                }
            }
        }
        self.finish().await
    }

    fn index_of(&self, method: &str) -> Result<usize, FlowError> {
        self.flow
            .methods
            .iter()
            .position(|m| m.name == method)
            .ok_or_else(|| FlowError::CorruptSnapshot {
                flow: self.flow_name(),
                id: self.shared.id.clone(),
                source: format!("it refers to method `{method}`, which this flow does not have")
                    .into(),
            })
    }

    fn schedule(&mut self, call: PendingCall, count: bool) -> Result<(), FlowError> {
        let index = self.index_of(&call.method)?;
        if count {
            if self.progress.method_calls >= self.flow.max_method_calls {
                return Err(FlowError::MaxMethodCallsExceeded {
                    flow: self.flow_name(),
                    method: call.method,
                    limit: self.flow.max_method_calls,
                });
            }
            self.progress.method_calls += 1;
        }
        let spec = &self.flow.methods[index];
        let started = self.shared.events.emit(
            Some(self.flow_event),
            EventKind::MethodExecutionStarted {
                flow_name: self.flow_name(),
                method_name: spec.name.clone(),
            },
        );
        let trigger = match (&call.triggered_by, &call.trigger_output) {
            (Some(by), output) => Some(Arc::new(TriggerInput {
                triggered_by: by.clone(),
                output: output.clone().unwrap_or(Value::Null),
            })),
            (None, _) => None,
        };
        let ctx = FlowContext {
            shared: self.shared.clone(),
            method: spec.name.as_str().into(),
            trigger,
            event_id: started,
        };
        let func = spec.func.clone();
        let call_id = self.next_call;
        self.next_call += 1;
        self.in_flight.insert(call_id, (call, started));
        self.running.spawn(async move {
            let ended = AssertUnwindSafe(async move { func(ctx).await })
                .catch_unwind()
                .await
                .map_err(|panic| panic_message(panic.as_ref()));
            (call_id, ended)
        });
        Ok(())
    }

    async fn complete(
        &mut self,
        call: PendingCall,
        started: Uuid,
        output: Value,
    ) -> Result<(), FlowError> {
        let index = self.index_of(&call.method)?;
        let flow = self.flow.clone();
        let spec = &flow.methods[index];
        if spec.kind == MethodKind::Router {
            let label = output.as_str().unwrap_or_default();
            if !spec.labels.iter().any(|l| l == label) {
                let error = FlowError::UndeclaredLabel {
                    flow: self.flow_name(),
                    method: spec.name.clone(),
                    label: label.to_string(),
                    declared: spec.labels.join(", "),
                };
                self.emit_failed(&spec.name, started, &error_chain(&error));
                return Err(error);
            }
        }
        self.shared.events.emit(
            Some(started),
            EventKind::MethodExecutionFinished {
                flow_name: self.flow_name(),
                method_name: spec.name.clone(),
                result: Some(output.clone()),
            },
        );
        let record = MethodRecord {
            method: spec.name.clone(),
            output: output.clone(),
        };
        keep(&mut self.progress.completed, &self.shared.outputs, record);
        self.last_output = Some(output.clone());

        if spec.feedback.is_some() {
            let step = self.ask_feedback(index, &output, None).await?;
            self.after_feedback(index, &output, step)?;
        } else {
            self.fire(&spec.name, &output)?;
            if spec.kind == MethodKind::Router {
                self.fire(output.as_str().unwrap_or_default(), &output)?;
            }
        }
        if self.flow.persist_all || spec.persist {
            self.save(&spec.name, RunStatus::Running).await?;
        }
        Ok(())
    }

    async fn ask_feedback(
        &mut self,
        index: usize,
        output: &Value,
        answer: Option<String>,
    ) -> Result<FeedbackStep, FlowError> {
        let flow = self.flow.clone();
        let spec = &flow.methods[index];
        let Some(config) = &spec.feedback else {
            return Ok(FeedbackStep::Answered(None));
        };
        let feedback_error = |source: BoxError| FlowError::Feedback {
            flow: flow.name.clone(),
            method: spec.name.clone(),
            source,
        };
        let reply = match answer {
            Some(answer) => FeedbackReply::Answer(answer),
            None => {
                let request = FeedbackRequest {
                    flow_name: flow.name.clone(),
                    flow_id: self.shared.id.clone(),
                    method: spec.name.clone(),
                    message: config.message.clone(),
                    output: output.clone(),
                    outcomes: config.outcomes.clone(),
                };
                tokio::select! {
                    _ = self.shared.cancellation.cancelled() => return Err(FlowError::Cancelled { flow: flow.name.clone() }),
                    reply = flow.feedback.request(&request) => reply.map_err(feedback_error)?,
                }
            }
        };
        match reply {
            FeedbackReply::Pending => {
                if flow.persistence.is_none() {
                    return Err(FlowError::PersistenceRequired {
                        flow: flow.name.clone(),
                        action: "pausing for human feedback",
                    });
                }
                self.progress.awaiting_feedback.push(AwaitingFeedback {
                    method: spec.name.clone(),
                    message: config.message.clone(),
                    output: output.clone(),
                    outcomes: config.outcomes.clone(),
                });
                Ok(FeedbackStep::Paused)
            }
            FeedbackReply::Answer(text) => {
                let outcome = config
                    .resolve(&text)
                    .map_err(|message| feedback_error(message.into()))?;
                let record = FeedbackRecord {
                    method: spec.name.clone(),
                    output: output.clone(),
                    feedback: text,
                    outcome: outcome.clone(),
                    timestamp: Utc::now(),
                };
                keep(&mut self.progress.feedback, &self.shared.feedback, record);
                Ok(FeedbackStep::Answered(outcome))
            }
        }
    }

    /// An answered method fires like a router (its name, then the selected outcome); a paused one
    /// fires nothing until it is answered.
    fn after_feedback(
        &mut self,
        index: usize,
        output: &Value,
        step: FeedbackStep,
    ) -> Result<(), FlowError> {
        let name = self.flow.methods[index].name.clone();
        match step {
            FeedbackStep::Paused => Ok(()),
            FeedbackStep::Answered(outcome) => {
                self.fire(&name, output)?;
                match outcome {
                    Some(label) => self.fire(&label, output),
                    None => Ok(()),
                }
            }
        }
    }

    /// Feeds one completed method or emitted label to every trigger, scheduling the methods that fire.
    fn fire(&mut self, event: &str, output: &Value) -> Result<(), FlowError> {
        let flow = self.flow.clone();
        let mut fired = Vec::new();
        for spec in &flow.methods {
            let Some(trigger) = &spec.trigger else {
                continue;
            };
            let joins = self.progress.joins.entry(spec.name.clone()).or_default();
            let fires = trigger.fire(event, joins);
            if joins.is_empty() {
                self.progress.joins.remove(&spec.name);
            }
            if fires {
                fired.push(spec.name.clone());
            }
        }
        for method in fired {
            self.schedule(
                PendingCall {
                    method,
                    triggered_by: Some(event.to_string()),
                    trigger_output: Some(output.clone()),
                },
                true,
            )?;
        }
        Ok(())
    }

    fn emit_failed(&self, method: &str, started: Uuid, error: &str) {
        self.shared.events.emit(
            Some(started),
            EventKind::MethodExecutionFailed {
                flow_name: self.flow_name(),
                method_name: method.to_string(),
                error: error.to_string(),
            },
        );
    }

    fn fail(&self, method: &str, started: Uuid, failure: MethodFailure) -> FlowError {
        let error = match failure {
            MethodFailure::Error(source) => FlowError::MethodFailed {
                flow: self.flow_name(),
                method: method.to_string(),
                source,
            },
            MethodFailure::NotSerializable(source) => FlowError::OutputNotSerializable {
                flow: self.flow_name(),
                method: method.to_string(),
                source,
            },
        };
        // The event carries what the method's own error says (CrewAI's `str(e)`), with its causes.
        let text = match &error {
            FlowError::MethodFailed { source, .. } => error_chain(source.as_ref()),
            other => error_chain(other),
        };
        self.emit_failed(method, started, &text);
        error
    }

    /// A method failed after the flow's budget refused a call: the run ends with the typed stop,
    /// keeping its outputs, and (with persistence) is saved with that method still to run.
    async fn stop_on_budget(&mut self, stop: BudgetStop, failure: MethodFailure) -> FlowError {
        let BudgetStop {
            call_id,
            call,
            started,
            exceeded,
        } = stop;
        let method = call.method.clone();
        let text = match failure {
            MethodFailure::Error(source) => error_chain(source.as_ref()),
            MethodFailure::NotSerializable(source) => error_chain(&source),
        };
        self.emit_failed(&method, started, &text);
        // The other methods still running are abandoned with the run: they run again on resume.
        self.running.abort_all();
        self.in_flight.insert(call_id, (call, started));
        let saved = match self.save(&method, RunStatus::BudgetExceeded).await {
            Ok(()) => self.flow.persistence.is_some(),
            Err(error) => {
                tracing::warn!(flow = %self.flow_name(), %error, "the budget stop could not be saved");
                false
            }
        };
        let state = {
            let guard = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            state::to_json(&*guard).unwrap_or(Value::Null)
        };
        FlowError::BudgetExceeded {
            flow: self.flow_name(),
            id: self.shared.id.clone(),
            method,
            exceeded: Box::new(exceeded),
            completed: self.progress.completed.clone(),
            state: Box::new(state),
            usage: Box::new(self.shared.usage.summary()),
            saved,
        }
    }

    async fn save(&self, method: &str, status: RunStatus) -> Result<(), FlowError> {
        let Some(backend) = &self.flow.persistence else {
            return Ok(());
        };
        let mut progress = self.progress.clone();
        progress.status = status;
        progress.usage = self.shared.usage.summary();
        progress.pending = self
            .in_flight
            .values()
            .map(|(call, _)| call.clone())
            .collect();
        let state = {
            let guard = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            state::to_json(&*guard).map_err(|source| FlowError::StateConversion {
                flow: self.flow_name(),
                source,
            })?
        };
        let snapshot = FlowSnapshot {
            flow_uuid: self.shared.id.clone(),
            method_name: method.to_string(),
            timestamp: Utc::now(),
            state,
            progress,
        };
        backend
            .save_state(&snapshot)
            .await
            .map_err(|source| FlowError::Persistence {
                flow: self.flow_name(),
                source,
            })
    }

    async fn finish(self) -> Result<FlowOutput<S>, FlowError> {
        let paused = !self.progress.awaiting_feedback.is_empty();
        let status = if paused {
            RunStatus::AwaitingFeedback
        } else {
            RunStatus::Completed
        };
        self.save("finish", status).await?;
        let result = self
            .last_output
            .clone()
            .or_else(|| self.progress.completed.last().map(|r| r.output.clone()));
        if !paused {
            self.shared.events.emit(
                Some(self.flow_event),
                EventKind::FlowFinished {
                    flow_name: self.flow_name(),
                    result: result.clone(),
                },
            );
        }
        let state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Ok(FlowOutput {
            id: self.shared.id.clone(),
            status: if paused {
                FlowStatus::AwaitingFeedback(self.progress.awaiting_feedback.clone())
            } else {
                FlowStatus::Completed
            },
            result,
            state,
            method_outputs: self.progress.completed.clone(),
            feedback: self.progress.feedback.clone(),
            usage: self.shared.usage.summary(),
        })
    }
}
