//! A flow's definition and its builder.

use crewai_memory::Memory;
use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crewai_core::events::EventBus;
use crewai_core::usage::Budget;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::context::FlowContext;
use crate::error::{BoxError, FlowBuildError};
use crate::feedback::{ConsoleFeedbackProvider, FeedbackProvider, HumanFeedback};
use crate::persistence::{FlowPersistence, SqliteFlowPersistence};
use crate::runtime::{Flow, FlowInner};
use crate::state::{FlowState, UnstructuredState};
use crate::trigger::Trigger;

/// CrewAI's default bound on method executions per kickoff.
pub const DEFAULT_MAX_METHOD_CALLS: u32 = 100;

/// The error a method function returns. Any `std::error::Error + Send + Sync` converts into it
/// with `?` (agent and crew errors included); [`MethodError::msg`] makes one from text.
pub struct MethodError(BoxError);

impl MethodError {
    /// An error carrying just a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        MethodError(Box::new(Message(message.to_string())))
    }

    /// The underlying error.
    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for MethodError {
    fn from(error: E) -> Self {
        MethodError(Box::new(error))
    }
}

impl fmt::Debug for MethodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for MethodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// What a method function returns: its output (anything serde-serialisable) or an error.
pub type MethodResult<T = Value> = Result<T, MethodError>;

/// A flow method: an async function of the run's context whose result is a [`MethodResult`] of
/// `T`. Any `Fn(FlowContext<S>) -> impl Future<Output = MethodResult<T>>` closure is one.
pub trait FlowMethod<S, T>: Fn(FlowContext<S>) -> Self::Future + Send + Sync + 'static {
    /// What a call returns.
    type Future: Future<Output = MethodResult<T>> + Send + 'static;
}

impl<S, T, F, Fut> FlowMethod<S, T> for F
where
    F: Fn(FlowContext<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = MethodResult<T>> + Send + 'static,
{
    type Future = Fut;
}

/// Why a method call produced no output.
pub(crate) enum MethodFailure {
    Error(BoxError),
    NotSerializable(serde_json::Error),
}

pub(crate) type MethodFn<S> =
    Arc<dyn Fn(FlowContext<S>) -> BoxFuture<'static, Result<Value, MethodFailure>> + Send + Sync>;

/// The role of a method in the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodKind {
    /// Runs at kickoff (or, with a trigger, when the trigger fires).
    Start,
    /// Runs when its trigger fires.
    Listen,
    /// Runs when its trigger fires; the label it returns fires the listeners of that label.
    Router,
}

pub(crate) struct MethodSpec<S> {
    pub(crate) name: String,
    pub(crate) kind: MethodKind,
    pub(crate) trigger: Option<Trigger>,
    pub(crate) labels: Vec<String>,
    pub(crate) persist: bool,
    pub(crate) feedback: Option<HumanFeedback>,
    pub(crate) func: MethodFn<S>,
}

impl<S> MethodSpec<S> {
    /// The labels this method may emit: a router's declared labels or its feedback outcomes.
    pub(crate) fn emitted_labels(&self) -> &[String] {
        match &self.feedback {
            Some(feedback) if !feedback.outcomes.is_empty() => &feedback.outcomes,
            _ => &self.labels,
        }
    }

    pub(crate) fn info(&self) -> MethodInfo<'_> {
        MethodInfo {
            name: &self.name,
            kind: self.kind,
            trigger: self.trigger.as_ref(),
            labels: self.emitted_labels(),
            persisted: self.persist,
            human_feedback: self.feedback.as_ref(),
        }
    }
}

/// A read-only view of one method of a built flow (for plots, the CLI and tests).
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo<'a> {
    pub name: &'a str,
    pub kind: MethodKind,
    /// `None` for an unconditional start.
    pub trigger: Option<&'a Trigger>,
    /// The labels the method may emit (a router's `emits`, or human-feedback outcomes).
    pub labels: &'a [String],
    /// Whether the state is saved after this method (the flow-wide `persist` adds every method).
    pub persisted: bool,
    pub human_feedback: Option<&'a HumanFeedback>,
}

/// Builds a [`Flow`]: methods with their triggers, the initial state, the event bus, persistence
/// and human feedback. Modifiers (`emits`, `persist_method`, `human_feedback`) apply to the method
/// added just before them.
///
/// ```
/// use crewai_flow::{on, Flow, FlowContext};
/// use serde_json::json;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let flow = Flow::builder()
///     .name("review")
///     .start("draft", |_ctx: FlowContext| async move { Ok(json!("a draft")) })
///     .router("check", on("draft"), |ctx: FlowContext| async move {
///         let draft = ctx.trigger_output().and_then(|v| v.as_str()).unwrap_or_default().to_string();
///         Ok(if draft.is_empty() { "rejected" } else { "approved" })
///     })
///     .emits(["approved", "rejected"])
///     .listen("publish", on("approved"), |_ctx: FlowContext| async move { Ok(json!("published")) })
///     .listen("redo", on("rejected"), |_ctx: FlowContext| async move { Ok(json!("redone")) })
///     .build()
///     .unwrap();
/// let output = flow.kickoff([("topic", json!("rust"))]).await.unwrap();
/// assert_eq!(output.result, Some(json!("published")));
/// assert_eq!(output.state["topic"], "rust");
/// # });
/// ```
pub struct FlowBuilder<S: FlowState = UnstructuredState> {
    name: Option<String>,
    methods: Vec<MethodSpec<S>>,
    errors: Vec<FlowBuildError>,
    initial_state: Option<S>,
    events: Option<EventBus>,
    persistence: Option<Arc<dyn FlowPersistence>>,
    persist_all: bool,
    feedback_provider: Option<Arc<dyn FeedbackProvider>>,
    max_method_calls: u32,
    budget: Budget,
    memory: Option<Memory>,
}

impl<S: FlowState> Default for FlowBuilder<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: FlowState> FlowBuilder<S> {
    /// An empty builder for a flow whose state is `S`.
    pub fn new() -> Self {
        FlowBuilder {
            name: None,
            methods: Vec::new(),
            errors: Vec::new(),
            initial_state: None,
            events: None,
            persistence: None,
            persist_all: false,
            feedback_provider: None,
            max_method_calls: DEFAULT_MAX_METHOD_CALLS,
            budget: Budget::default(),
            memory: None,
        }
    }

    crewai_llm::setters! {
        /// The flow's name, used in events and errors (default `Flow`).
        pub fn name(name: impl Into<String>) => name = Some(name.into());
        /// The state a fresh kickoff starts from (default `S::default()`).
        pub fn initial_state(initial_state: S) => initial_state = Some(initial_state);
        /// The bus flow and method events go to (default: a new, private bus; see
        /// [`Flow::event_bus`]).
        pub fn event_bus(events: EventBus) => events = Some(events);
        /// The bound on method executions per kickoff (default 100); reaching it fails the
        /// kickoff.
        pub fn max_method_calls(max_method_calls: u32) => max_method_calls = max_method_calls;
    }

    /// Stops the run before an LLM call that would take the run's cost (priced with the built-in
    /// price table) over `usd`. The calls counted are those of the crews and agents the methods
    /// run with [`FlowContext::crew_kickoff_options`] / [`FlowContext::agent_kickoff_options`]
    /// (guardrail and conversion calls included). The kickoff ends with
    /// [`FlowError::BudgetExceeded`](crate::FlowError::BudgetExceeded), keeping the outputs so far.
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.budget.max_cost_usd = Some(usd);
        self
    }

    /// Stops the run before an LLM call that would take its tokens (prompt and completion, over
    /// every crew and agent of the run) over `tokens`; see [`FlowBuilder::max_cost_usd`].
    pub fn max_tokens(mut self, tokens: u64) -> Self {
        self.budget.max_tokens = Some(tokens);
        self
    }

    /// The flow's memory (CrewAI's `Flow.memory`): what its methods' [`FlowContext::remember`]
    /// and [`FlowContext::recall`] use. Its events go to the flow's bus under the method, and
    /// its embeddings and model calls count in the flow's usage and budget.
    pub fn memory(mut self, memory: Memory) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Saves the state after every method (CrewAI's class-level `@persist`), to the backend set with
    /// [`FlowBuilder::persistence`] or, by default, SQLite at [`SqliteFlowPersistence::default_path`].
    pub fn persist(mut self) -> Self {
        self.persist_all = true;
        self
    }

    crewai_llm::setters! {
        /// The persistence backend (needed to resume, fork or pause; also used by `persist`).
        pub fn persistence(persistence: Arc<dyn FlowPersistence>) => persistence = Some(persistence);
        /// Who answers human-feedback requests (default: [`ConsoleFeedbackProvider`]).
        pub fn feedback_provider(feedback_provider: Arc<dyn FeedbackProvider>) => feedback_provider = Some(feedback_provider);
    }

    /// A method run at kickoff.
    pub fn start<T: Serialize>(
        self,
        name: impl Into<String>,
        method: impl FlowMethod<S, T>,
    ) -> Self {
        self.add(name.into(), MethodKind::Start, None, value_method(method))
    }

    /// A conditional start: drawn and treated as a start, but run when `trigger` fires (e.g. a router
    /// label that restarts the flow), not at kickoff.
    pub fn start_on<T: Serialize>(
        self,
        name: impl Into<String>,
        trigger: impl Into<Trigger>,
        method: impl FlowMethod<S, T>,
    ) -> Self {
        self.add(
            name.into(),
            MethodKind::Start,
            Some(trigger.into()),
            value_method(method),
        )
    }

    /// A method run whenever `trigger` fires; it receives the triggering output in its context.
    pub fn listen<T: Serialize>(
        self,
        name: impl Into<String>,
        trigger: impl Into<Trigger>,
        method: impl FlowMethod<S, T>,
    ) -> Self {
        self.add(
            name.into(),
            MethodKind::Listen,
            Some(trigger.into()),
            value_method(method),
        )
    }

    /// A router: run when `trigger` fires; the label it returns (one of those declared with
    /// [`FlowBuilder::emits`]) fires the listeners of that label, and its own name fires as well.
    pub fn router<L: Into<String>>(
        self,
        name: impl Into<String>,
        trigger: impl Into<Trigger>,
        method: impl FlowMethod<S, L>,
    ) -> Self {
        let func: MethodFn<S> = Arc::new(move |ctx| {
            method(ctx)
                .map(|result| {
                    result
                        .map(|label| Value::String(label.into()))
                        .map_err(|e| MethodFailure::Error(e.into_inner()))
                })
                .boxed()
        });
        self.add(name.into(), MethodKind::Router, Some(trigger.into()), func)
    }

    /// Declares the labels the router added last may return.
    pub fn emits<L: Into<String>>(mut self, labels: impl IntoIterator<Item = L>) -> Self {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        match self.methods.last_mut() {
            None => self
                .errors
                .push(FlowBuildError::ModifierWithoutMethod { modifier: "emits" }),
            Some(method) if method.kind != MethodKind::Router => self
                .errors
                .push(FlowBuildError::EmitsOnNonRouter(method.name.clone())),
            Some(method) => method.labels.extend(labels),
        }
        self
    }

    /// Saves the state after the method added last (CrewAI's method-level `@persist`).
    pub fn persist_method(mut self) -> Self {
        match self.methods.last_mut() {
            None => self.errors.push(FlowBuildError::ModifierWithoutMethod {
                modifier: "persist_method",
            }),
            Some(method) => method.persist = true,
        }
        self
    }

    /// Asks a person about the output of the method added last; with outcomes, the answer picks the
    /// label to emit (the method then routes like a router).
    pub fn human_feedback(mut self, feedback: HumanFeedback) -> Self {
        match self.methods.last_mut() {
            None => self.errors.push(FlowBuildError::ModifierWithoutMethod { modifier: "human_feedback" }),
            Some(method) if method.kind == MethodKind::Router => self.errors.push(FlowBuildError::InvalidFeedback {
                method: method.name.clone(),
                message: "a router already chooses its label; put the feedback on the method before it, or replace the router".into(),
            }),
            Some(method) => {
                if let Err(message) = feedback.validate() {
                    self.errors.push(FlowBuildError::InvalidFeedback { method: method.name.clone(), message });
                }
                method.feedback = Some(feedback);
            }
        }
        self
    }

    fn add(
        mut self,
        name: String,
        kind: MethodKind,
        trigger: Option<Trigger>,
        func: MethodFn<S>,
    ) -> Self {
        self.methods.push(MethodSpec {
            name,
            kind,
            trigger,
            labels: Vec::new(),
            persist: false,
            feedback: None,
            func,
        });
        self
    }

    /// Validates the definition: unique names, at least one unconditional start, every trigger names
    /// a method or a declared label, routers declare labels.
    pub fn build(self) -> Result<Flow<S>, FlowBuildError> {
        if let Some(error) = self.errors.into_iter().next() {
            return Err(error);
        }
        if self.max_method_calls == 0 {
            return Err(FlowBuildError::ZeroMaxMethodCalls);
        }
        if let Some(usd) = self
            .budget
            .max_cost_usd
            .filter(|usd| !usd.is_finite() || *usd <= 0.0)
        {
            return Err(FlowBuildError::InvalidBudget {
                setting: "max_cost_usd",
                value: usd.to_string(),
            });
        }
        if self.budget.max_tokens == Some(0) {
            return Err(FlowBuildError::InvalidBudget {
                setting: "max_tokens",
                value: "0".into(),
            });
        }
        let mut names = BTreeSet::new();
        for method in &self.methods {
            if !names.insert(method.name.as_str()) {
                return Err(FlowBuildError::DuplicateMethod(method.name.clone()));
            }
        }
        if !self
            .methods
            .iter()
            .any(|m| m.kind == MethodKind::Start && m.trigger.is_none())
        {
            return Err(FlowBuildError::NoStart);
        }
        let mut labels = BTreeSet::new();
        for method in &self.methods {
            if method.kind == MethodKind::Router && method.labels.is_empty() {
                return Err(FlowBuildError::RouterWithoutLabels(method.name.clone()));
            }
            for label in method.emitted_labels() {
                if names.contains(label.as_str()) {
                    return Err(FlowBuildError::LabelShadowsMethod {
                        method: method.name.clone(),
                        label: label.clone(),
                    });
                }
                labels.insert(label.as_str());
            }
        }
        for method in &self.methods {
            let Some(trigger) = &method.trigger else {
                continue;
            };
            if let Some(combinator) = trigger.first_empty_combinator() {
                return Err(FlowBuildError::EmptyTrigger {
                    method: method.name.clone(),
                    combinator,
                });
            }
            if let Some(unknown) = trigger
                .names()
                .into_iter()
                .find(|n| !names.contains(n) && !labels.contains(n))
            {
                let known = names
                    .iter()
                    .chain(labels.iter())
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(FlowBuildError::UnknownTrigger {
                    method: method.name.clone(),
                    trigger: unknown.to_string(),
                    known,
                });
            }
        }
        let persistence = match (
            self.persistence,
            self.persist_all || self.methods.iter().any(|m| m.persist),
        ) {
            (Some(backend), _) => Some(backend),
            (None, true) => Some(Arc::new(SqliteFlowPersistence::open(
                SqliteFlowPersistence::default_path(),
            )?) as Arc<dyn FlowPersistence>),
            (None, false) => None,
        };
        Ok(Flow::from_inner(FlowInner {
            name: self.name.unwrap_or_else(|| "Flow".to_string()),
            methods: self.methods,
            initial_state: self.initial_state.unwrap_or_default(),
            events: self.events.unwrap_or_default(),
            persistence,
            persist_all: self.persist_all,
            feedback: self
                .feedback_provider
                .unwrap_or_else(|| Arc::new(ConsoleFeedbackProvider)),
            max_method_calls: self.max_method_calls,
            budget: self.budget,
            memory: self.memory,
        }))
    }
}

fn value_method<S: FlowState, T: Serialize>(method: impl FlowMethod<S, T>) -> MethodFn<S> {
    Arc::new(move |ctx| {
        method(ctx)
            .map(|result| match result {
                Ok(output) => serde_json::to_value(output).map_err(MethodFailure::NotSerializable),
                Err(error) => Err(MethodFailure::Error(error.into_inner())),
            })
            .boxed()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trigger::{and, on, or};
    use serde_json::json;

    async fn noop(_ctx: FlowContext) -> MethodResult {
        Ok(json!(null))
    }

    async fn router_noop(_ctx: FlowContext) -> MethodResult<&'static str> {
        Ok("a")
    }

    #[test]
    fn unknown_trigger_is_named() {
        let error = Flow::builder()
            .start("fetch", noop)
            .listen("summarise", or([on("fetch"), on("fecth")]), noop)
            .build()
            .err()
            .unwrap();
        let text = error.to_string();
        assert!(text.contains("`summarise` listens to `fecth`"), "{text}");
        assert!(text.contains("`fetch`"), "{text}");
    }

    #[test]
    fn router_labels_are_known_triggers_only_when_declared() {
        let undeclared = Flow::builder()
            .start("s", noop)
            .router("r", on("s"), router_noop)
            .emits(["a"])
            .listen("x", on("b"), noop)
            .build();
        assert!(
            matches!(undeclared, Err(FlowBuildError::UnknownTrigger { trigger, .. }) if trigger == "b")
        );
        let declared = Flow::builder()
            .start("s", noop)
            .router("r", on("s"), router_noop)
            .emits(["a", "b"])
            .listen("x", and(["a", "b"]), noop)
            .build();
        assert!(declared.is_ok());
    }

    #[test]
    fn structural_errors() {
        assert!(matches!(
            Flow::builder().listen("x", on("x"), noop).build(),
            Err(FlowBuildError::NoStart)
        ));
        assert!(
            matches!(Flow::builder().start("s", noop).start("s", noop).build(), Err(FlowBuildError::DuplicateMethod(n)) if n == "s")
        );
        assert!(
            matches!(Flow::builder().start("s", noop).router("r", on("s"), router_noop).build(), Err(FlowBuildError::RouterWithoutLabels(n)) if n == "r")
        );
        assert!(
            matches!(Flow::builder().start("s", noop).emits(["a"]).build(), Err(FlowBuildError::EmitsOnNonRouter(n)) if n == "s")
        );
        assert!(matches!(
            Flow::builder()
                .start("s", noop)
                .router("r", on("s"), router_noop)
                .emits(["s"])
                .build(),
            Err(FlowBuildError::LabelShadowsMethod { .. })
        ));
        assert!(matches!(
            Flow::builder()
                .start("s", noop)
                .listen("x", or(Vec::<Trigger>::new()), noop)
                .build(),
            Err(FlowBuildError::EmptyTrigger { .. })
        ));
        assert!(matches!(
            Flow::builder().start("s", noop).max_method_calls(0).build(),
            Err(FlowBuildError::ZeroMaxMethodCalls)
        ));
        assert!(matches!(
            FlowBuilder::<UnstructuredState>::new()
                .persist_method()
                .start("s", noop)
                .build(),
            Err(FlowBuildError::ModifierWithoutMethod { .. })
        ));
    }
}
