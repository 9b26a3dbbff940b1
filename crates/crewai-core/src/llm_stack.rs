//! The run's layers around every model call.
//!
//! Every call a run makes (the agent's own turns, the summaries of an overgrown history, an
//! LLM guardrail's judge, the structured-output converter) goes through one stack of
//! [`LlmLayer`]s over the model, so there is one place that runs the hooks, holds the budget and
//! the rate limit, emits the `llm_call_*` events and counts the usage. Outermost first:
//!
//! 1. **scope**: attaches the call's [`CallScope`] to the request (code that makes its own
//!    requests, like a guardrail's judge, does not know about scopes).
//! 2. **hooks**: the crew's, then the agent's `before_llm_call` hooks (they may rewrite the
//!    messages, kept for the rest of the agent's run, or block the call), and the
//!    `after_llm_call` hooks on the reply ([`crate::hooks::HooksLayer`]).
//! 3. **the user's layers**: the crew's ([`crate::crew::CrewBuilder::llm_layer`]), then the
//!    agent's ([`crate::agent::AgentBuilder::llm_layer`]). Inside the hooks, so they see what
//!    is really sent; outside the budget, rate limit and events, so what a redacting layer
//!    removes reaches neither the provider nor the events and traces.
//! 4. **budget**: a call that would go over `max_cost_usd` / `max_tokens` is refused with
//!    [`LlmError::BudgetExceeded`] before it waits for a rate-limit slot or is counted.
//! 5. **rate limit**: the agent's `max_rpm` (else the crew's) limiter, announcing a wait with
//!    `rate_limit_wait_started` (its wait time included) before it starts.
//! 6. **events and usage**: `llm_call_started`, `llm_stream_chunk`, `llm_call_completed` or
//!    `llm_call_failed`; the reply's usage priced and recorded in the run's ledger (per agent,
//!    task and model) and the execution's; the call dropped when the run is cancelled.
//! 7. the model's own stack ([`crewai_llm::router`]): fallbacks, the config's rate limit,
//!    retries, stop words, the provider client.
//!
//! Events and usage sit around the model's retries and fallbacks: one logical call is one
//! `llm_call_started` and one usage record, however many attempts it took (the provider
//! reports usage only for the attempt that answered). A layer with nothing to do in a run (no
//! hooks, no budget, no rate limit) is left out of its stack.
//!
//! ## Adding a layer
//!
//! A layer is a [`crewai_llm::LlmLayer`]; the call's [`CallScope`] says who makes it. Here a
//! per-tenant quota refuses a crew's calls past a number, for every agent and every kind of
//! call:
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use crewai_core::llm_stack::CallScope;
//! use crewai_core::{Agent, crew::Crew, interpolate::Inputs, task::Task};
//! use crewai_llm::{async_trait, LlmError, LlmLayer, LlmRequest, LlmResponse, Next, ScriptedLlm};
//!
//! struct TenantQuota { left: AtomicU32 }
//!
//! #[async_trait]
//! impl LlmLayer for TenantQuota {
//!     fn name(&self) -> &str { "tenant_quota" }
//!     async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
//!         let role = CallScope::of(&request).map(|scope| scope.agent_role().to_string());
//!         if self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
//!             return Err(LlmError::Blocked { by: "the tenant quota".into(), reason: role });
//!         }
//!         next.call(request).await
//!     }
//! }
//!
//! let llm = Arc::new(ScriptedLlm::new("scripted").then_text("Final Answer: done"));
//! let writer = Agent::builder().role("Writer").goal("Write").backstory("Brief.").llm(llm).build().unwrap();
//! let task = Task::builder().description("Write").expected_output("Text").agent(writer.clone()).build().unwrap();
//! let quota = Arc::new(TenantQuota { left: AtomicU32::new(1) });
//! let crew = Crew::builder()
//!     .agents(vec![writer])
//!     .tasks(vec![task.clone(), task])
//!     .llm_layer(quota.clone()) // an `Arc` of a layer is a layer: the caller keeps a handle
//!     .build()
//!     .unwrap();
//! let error = crew.kickoff(Inputs::new()).await.unwrap_err();
//! let chain = crewai_llm::error_chain(&error); // the crew error keeps the layer's as its cause
//! assert!(chain.contains("LLM call blocked by the tenant quota: Writer"), "{chain}");
//! assert_eq!(quota.left.load(Ordering::SeqCst), 0);
//! # });
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_trait::async_trait;
use crewai_llm::{
    Extensions, LayeredLlm, Llm, LlmError, LlmLayer, LlmRequest, LlmResponse, LlmStream, Message,
    Next, RateLimiter, StreamEvent, Usage,
};
use futures::Stream;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::{Agent, RunServices};
use crate::events::{EventBus, EventKind};
use crate::executor::{RateLimitWaiter, parse_structured};
use crate::hooks::{CallOrigin, Hooks, HooksLayer};
use crate::usage::UsageTracker;

/// Why a call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallPurpose {
    /// A turn of the agent's own loop.
    Agent,
    /// A summary of part of the agent's history (context-window recovery).
    Summary,
    /// An LLM guardrail's judge.
    Guardrail,
    /// The structured-output converter.
    Conversion,
    /// Memory's own work for the agent: extracting what a task's result is worth remembering,
    /// consolidating it with what is stored.
    Memory,
    /// Knowledge's search query: the task rewritten by the agent's model before a search.
    Knowledge,
    /// An agent's planning (`planning_config`): making, refining and changing its plan, and
    /// judging its steps' results.
    Reasoning,
}

/// Who makes a model call and what the run around it provides: the request extension the run's
/// layers (and a user's) read.
///
/// ```
/// use crewai_core::llm_stack::CallScope;
/// use crewai_llm::{async_trait, LlmError, LlmLayer, LlmRequest, LlmResponse, Next};
///
/// /// Calls per agent role, for a per-tenant quota.
/// #[derive(Default)]
/// struct CountByRole(std::sync::Mutex<std::collections::BTreeMap<String, u32>>);
///
/// #[async_trait]
/// impl LlmLayer for CountByRole {
///     fn name(&self) -> &str { "count_by_role" }
///     async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
///         if let Some(scope) = CallScope::of(&request) {
///             *self.0.lock().unwrap().entry(scope.agent_role().to_string()).or_default() += 1;
///         }
///         next.call(request).await
///     }
/// }
/// ```
pub struct CallScope {
    services: RunServices,
    agent_role: String,
    task_name: Option<String>,
    parent: Option<Uuid>,
    /// The agent's own limiter, else the crew's.
    rate_limiter: Option<Arc<RateLimiter>>,
    /// The crew's hooks followed by the agent's.
    hooks: Hooks,
    cancellation: CancellationToken,
    purpose: CallPurpose,
    /// Tool rounds done so far in the agent's run (what hooks see as `iterations`).
    iterations: AtomicU32,
    /// The execution's usage: shared by every scope of one execution (its summaries, and the
    /// judge and converter of a standalone kickoff), so its total counts them all.
    spent: Arc<Mutex<Usage>>,
    /// The messages as the before-hooks left them, for the agent's loop to keep.
    rewritten: Mutex<Option<Vec<Message>>>,
}

impl std::fmt::Debug for CallScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallScope")
            .field("agent_role", &self.agent_role)
            .field("task_name", &self.task_name)
            .field("purpose", &self.purpose)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

impl CallScope {
    /// Calls `agent` makes for `purpose` in a run with `services`.
    pub(crate) fn new(agent: &Agent, services: &RunServices, purpose: CallPurpose) -> Self {
        CallScope {
            agent_role: agent.role().to_string(),
            task_name: None,
            parent: None,
            rate_limiter: agent
                .rate_limiter()
                .or(services.rate_limiter.as_ref())
                .cloned(),
            hooks: services.hooks.merged(agent.hooks()),
            cancellation: services.cancellation.clone(),
            purpose,
            iterations: AtomicU32::new(0),
            spent: Arc::default(),
            rewritten: Mutex::new(None),
            services: services.clone(),
        }
    }

    setters! {
        pub(crate) fn with_task(task_name: Option<&str>)
            => task_name = task_name.map(str::to_string);
        /// The event the call's events hang under.
        pub(crate) fn with_parent(parent: Option<Uuid>) => parent = parent;
        /// Drops the call when `token` is cancelled (an execution's own token, not the run's).
        pub(crate) fn with_cancellation(token: CancellationToken) => cancellation = token;
    }

    /// A scope for other calls of the same execution: same agent, task, parent and usage.
    pub(crate) fn derived(&self, purpose: CallPurpose) -> Self {
        CallScope {
            services: self.services.clone(),
            agent_role: self.agent_role.clone(),
            task_name: self.task_name.clone(),
            parent: self.parent,
            rate_limiter: self.rate_limiter.clone(),
            hooks: self.hooks.clone(),
            cancellation: self.cancellation.clone(),
            purpose,
            iterations: AtomicU32::new(self.iterations()),
            spent: self.spent.clone(),
            rewritten: Mutex::new(None),
        }
    }

    /// The scope attached to `request`, if a run made it.
    pub fn of(request: &LlmRequest) -> Option<&CallScope> {
        request.extensions.get::<CallScope>()
    }

    pub fn agent_role(&self) -> &str {
        &self.agent_role
    }
    pub fn task_name(&self) -> Option<&str> {
        self.task_name.as_deref()
    }
    pub fn crew_name(&self) -> Option<&str> {
        self.services.crew_name.as_deref()
    }
    /// The agent, task and crew making the call, as hooks see them.
    pub fn origin(&self) -> CallOrigin {
        CallOrigin {
            agent_role: Some(self.agent_role.clone()),
            task_name: self.task_name.clone(),
            crew_name: self.services.crew_name.clone(),
        }
    }
    pub fn purpose(&self) -> CallPurpose {
        self.purpose
    }
    /// The event the call's own events hang under (the agent's execution, or the task).
    pub fn parent_event_id(&self) -> Option<Uuid> {
        self.parent
    }
    /// Where the run's events go.
    pub fn events(&self) -> &EventBus {
        &self.services.events
    }
    /// The run's ledger and budget.
    pub fn usage(&self) -> &UsageTracker {
        &self.services.usage
    }
    /// Cancelled when the call's run (or execution) stops.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }
    /// The limiter the call waits on (the agent's, else the crew's).
    pub fn rate_limiter(&self) -> Option<&Arc<RateLimiter>> {
        self.rate_limiter.as_ref()
    }
    /// The hooks of the run: the crew's, then the agent's.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }
    /// Tool rounds done so far in the agent's run.
    pub fn iterations(&self) -> u32 {
        self.iterations.load(Ordering::Relaxed)
    }

    pub(crate) fn set_iterations(&self, iterations: u32) {
        self.iterations.store(iterations, Ordering::Relaxed);
    }

    /// What the execution's calls have used so far (priced).
    pub(crate) fn spent(&self) -> Usage {
        *self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the hooks' rewrite of the messages for the agent's loop (its own turns only: a
    /// summary's or a judge's messages are not the agent's conversation).
    pub(crate) fn keep_rewritten(&self, messages: &[Message]) {
        if self.purpose == CallPurpose::Agent {
            *self.rewritten.lock().unwrap_or_else(|p| p.into_inner()) = Some(messages.to_vec());
        }
    }

    /// The messages the before-hooks left for the last call, once.
    pub(crate) fn take_rewritten(&self) -> Option<Vec<Message>> {
        self.rewritten
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    pub(crate) fn record(&self, model: &str, usage: &Usage) -> Usage {
        let priced = self.services.usage.record_call(
            model,
            &self.agent_role,
            self.task_name.as_deref(),
            usage,
        );
        self.spent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&priced);
        priced
    }
}

/// `model` under the run's layers (see the [module docs](self)), with `scope` attached to every
/// request that comes without one.
pub(crate) fn stack(model: Arc<dyn Llm>, scope: Arc<CallScope>) -> Arc<dyn Llm> {
    let user = scope.hooks.llm_layers();
    let mut layers: Vec<Arc<dyn LlmLayer>> = Vec::with_capacity(5 + user.len());
    layers.push(Arc::new(ScopeLayer::new(scope.clone())));
    if scope.hooks.has_llm_hooks() {
        layers.push(Arc::new(HooksLayer::default()));
    }
    layers.extend(user.iter().cloned());
    if scope.services.usage.has_budget() {
        layers.push(Arc::new(BudgetLayer));
    }
    if scope.rate_limiter.is_some() {
        layers.push(Arc::new(RunRateLimitLayer));
    }
    layers.push(Arc::new(EventsLayer));
    Arc::new(LayeredLlm::new(model, layers))
}

/// Attaches a scope to requests that have none. Its extensions are built once, so attaching
/// them to a request is a reference-count increment.
struct ScopeLayer {
    scope: Arc<CallScope>,
    extensions: Extensions,
}

impl ScopeLayer {
    fn new(scope: Arc<CallScope>) -> Self {
        let mut extensions = Extensions::new();
        extensions.insert_arc(scope.clone());
        ScopeLayer { scope, extensions }
    }

    fn attach(&self, request: &mut LlmRequest) {
        if request.extensions.is_empty() {
            request.extensions = self.extensions.clone();
        } else if !request.extensions.contains::<CallScope>() {
            request.extensions.insert_arc(self.scope.clone());
        }
    }
}

#[async_trait]
impl LlmLayer for ScopeLayer {
    fn name(&self) -> &str {
        "scope"
    }
    async fn call(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        self.attach(&mut request);
        next.call(request).await
    }
    async fn stream(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        self.attach(&mut request);
        next.stream(request).await
    }
}

/// The name a call of `llm` is priced, counted and reported under: its model, or
/// `provider/model` where only that has a price (see `PriceTable::priced_name`).
fn priced_name(scope: &CallScope, llm: &dyn Llm) -> String {
    let prices = scope.services.usage.prices();
    prices.priced_name(llm.provider(), llm.model()).into_owned()
}

/// Refuses a call that would go over the run's budget (and its parents').
struct BudgetLayer;

impl BudgetLayer {
    fn admit(request: &LlmRequest, next: &Next<'_>) -> Result<(), LlmError> {
        match CallScope::of(request) {
            Some(scope) => scope
                .services
                .usage
                .check_request(&priced_name(scope, next.model()), request)
                .map_err(|exceeded| LlmError::BudgetExceeded(Box::new(exceeded))),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl LlmLayer for BudgetLayer {
    fn name(&self) -> &str {
        "budget"
    }
    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        Self::admit(&request, &next)?;
        next.call(request).await
    }
    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        Self::admit(&request, &next)?;
        next.stream(request).await
    }
}

/// Waits on the agent's (else the crew's) requests-per-minute limiter, announcing the wait.
struct RunRateLimitLayer;

impl RunRateLimitLayer {
    async fn admit(request: &LlmRequest) {
        let Some(scope) = CallScope::of(request) else {
            return;
        };
        if let Some(limiter) = &scope.rate_limiter {
            let waiter = RateLimitWaiter {
                events: &scope.services.events,
                parent: scope.parent,
                agent_role: &scope.agent_role,
                task_name: scope.task_name.as_deref(),
            };
            waiter.acquire(limiter).await;
        }
    }
}

#[async_trait]
impl LlmLayer for RunRateLimitLayer {
    fn name(&self) -> &str {
        "run_rate_limit"
    }
    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        Self::admit(&request).await;
        next.call(request).await
    }
    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        Self::admit(&request).await;
        next.stream(request).await
    }
}

/// Reports each call on the run's bus, records its usage, and drops it when the run stops.
struct EventsLayer;

#[async_trait]
impl LlmLayer for EventsLayer {
    fn name(&self) -> &str {
        "events"
    }

    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let Some(record) = CallRecord::of(&request, &next) else {
            return next.call(request).await;
        };
        match record.until_cancelled(next.call(request)).await {
            Ok(response) => record.completed(response),
            Err(error) => Err(record.failed(error)),
        }
    }

    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let Some(record) = CallRecord::of(&request, &next) else {
            return next.stream(request).await;
        };
        match record.until_cancelled(next.stream(request)).await {
            Ok(inner) => Ok(Box::pin(RecordedStream {
                inner,
                record: Some(record),
            })),
            Err(error) => Err(record.failed(error)),
        }
    }
}

/// One call on its way: the events it has emitted and the ones it still owes.
struct CallRecord {
    scope: Arc<CallScope>,
    call_id: String,
    model: String,
    /// The reply must be JSON: an agent's turn sent with its response format.
    structured: bool,
}

impl CallRecord {
    /// The record of a call made in a run (its request carries a [`CallScope`]), started.
    fn of(request: &LlmRequest, next: &Next<'_>) -> Option<Self> {
        let scope = request.extensions.get_arc::<CallScope>()?;
        let model = priced_name(&scope, next.model());
        Some(Self::start(scope, &model, request))
    }

    /// `work`, unless the run is cancelled first.
    async fn until_cancelled<T>(
        &self,
        work: impl Future<Output = Result<T, LlmError>>,
    ) -> Result<T, LlmError> {
        tokio::select! {
            biased;
            _ = self.scope.cancellation.cancelled() => Err(LlmError::Cancelled),
            result = work => result,
        }
    }

    fn start(scope: Arc<CallScope>, model: &str, request: &LlmRequest) -> Self {
        let record = CallRecord {
            structured: scope.purpose == CallPurpose::Agent && request.response_format.is_some(),
            call_id: Uuid::new_v4().to_string(),
            model: model.to_string(),
            scope,
        };
        // The conversation as JSON is the costliest payload of a call: built only if heard.
        record.emit(|| EventKind::LlmCallStarted {
            call_id: record.call_id.clone(),
            model: record.model.clone(),
            agent_role: Some(record.scope.agent_role.clone()),
            task_name: record.scope.task_name.clone(),
            messages: serde_json::to_value(&request.messages).unwrap_or(Value::Null),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
        });
        record
    }

    /// Emits the event `kind` builds under the call's parent, if anyone listens.
    fn emit(&self, kind: impl FnOnce() -> EventKind) {
        let scope = &self.scope;
        scope.services.events.emit_with(scope.parent, kind);
    }

    fn chunk(&self, chunk: &str) {
        let scope = &self.scope;
        self.emit(|| EventKind::LlmStreamChunk {
            call_id: self.call_id.clone(),
            agent_role: Some(scope.agent_role.clone()),
            task_name: scope.task_name.clone(),
            chunk: chunk.to_string(),
        });
    }

    fn failed_event(&self, error: String) {
        let scope = &self.scope;
        self.emit(|| EventKind::LlmCallFailed {
            call_id: self.call_id.clone(),
            model: self.model.clone(),
            agent_role: Some(scope.agent_role.clone()),
            task_name: scope.task_name.clone(),
            error,
        });
    }

    fn failed(self, error: LlmError) -> LlmError {
        self.failed_event(crewai_llm::error_chain(&error));
        error
    }

    /// Prices and records the reply's usage; an agent's structured turn that is not JSON is a
    /// failed call (its usage still counts: the tokens were spent).
    fn completed(self, mut response: LlmResponse) -> Result<LlmResponse, LlmError> {
        response.usage = self.scope.record(&self.model, &response.usage);
        if self.structured
            && response.tool_calls.is_empty()
            && let Err(message) = parse_structured(response.content.as_deref().unwrap_or(""))
        {
            self.failed_event(message.clone());
            return Err(LlmError::InvalidStructuredReply {
                model: self.model,
                message,
            });
        }
        let scope = &self.scope;
        self.emit(|| EventKind::LlmCallCompleted {
            call_id: self.call_id.clone(),
            model: self.model.clone(),
            agent_role: Some(scope.agent_role.clone()),
            task_name: scope.task_name.clone(),
            response: if response.tool_calls.is_empty() {
                Value::String(response.content.clone().unwrap_or_default())
            } else {
                serde_json::to_value(&response.tool_calls).unwrap_or(Value::Null)
            },
            usage: response.usage,
        });
        Ok(response)
    }
}

/// A reply stream that reports its chunks and its end (completed, failed, or cut short).
struct RecordedStream {
    inner: LlmStream,
    /// `None` once the call's last event was emitted.
    record: Option<CallRecord>,
}

/// A stream that ends without its final response is reported as `collect_stream` reports it.
const NO_FINAL_RESPONSE: &str = "the stream ended without a final response";

impl Stream for RecordedStream {
    type Item = Result<StreamEvent, LlmError>;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let item = match this.inner.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        let Some(record) = this.record.take() else {
            return Poll::Ready(item);
        };
        Poll::Ready(match item {
            Some(Ok(StreamEvent::TextDelta(text))) => {
                record.chunk(&text);
                this.record = Some(record);
                Some(Ok(StreamEvent::TextDelta(text)))
            }
            Some(Ok(StreamEvent::Done(response))) => {
                Some(record.completed(response).map(StreamEvent::Done))
            }
            Some(Err(error)) => Some(Err(record.failed(error))),
            Some(Ok(other)) => {
                this.record = Some(record);
                Some(Ok(other))
            }
            None => {
                let cut = LlmError::malformed("stream", NO_FINAL_RESPONSE);
                record.failed_event(crewai_llm::error_chain(&cut));
                None
            }
        })
    }
}
