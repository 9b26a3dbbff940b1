//! # crewai-flow
//!
//! CrewAI's second engine: a flow is a set of async methods with triggers. Start methods run at
//! kickoff; a listener runs when its trigger fires; a router's returned label fires the listeners of
//! that label. Triggers combine with [`or`] and [`and`] (a join). Methods fired by the same event run
//! concurrently on tokio, each listener receives the output that triggered it, and cycles are
//! allowed (a router may send the flow back to an earlier method), bounded by
//! [`FlowBuilder::max_method_calls`] (default 100).
//!
//! ```
//! use crewai_flow::{on, Flow, FlowContext, MethodError};
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//!
//! #[derive(Clone, Default, Serialize, Deserialize)]
//! struct Review { topic: String, attempts: u32, draft: String }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let flow = Flow::typed_builder::<Review>()
//!     .name("review")
//!     .start("write", |ctx: FlowContext<Review>| async move {
//!         // A crew or agent would run here, with `ctx.events()` and `ctx.event_id()` as its parent.
//!         let draft = ctx.update_state(|s| { s.attempts += 1; s.draft = format!("{} v{}", s.topic, s.attempts); s.draft.clone() });
//!         Ok(draft)
//!     })
//!     .router("check", on("write"), |ctx: FlowContext<Review>| async move {
//!         Ok(if ctx.read_state(|s| s.attempts) < 3 { "retry" } else { "done" })
//!     })
//!     .emits(["retry", "done"])
//!     // A conditional start closes the loop: it runs whenever the router says "retry".
//!     .start_on("rewrite", on("retry"), |ctx: FlowContext<Review>| async move {
//!         let draft = ctx.update_state(|s| { s.attempts += 1; s.draft = format!("{} v{}", s.topic, s.attempts); s.draft.clone() });
//!         Ok(draft)
//!     })
//!     .router("recheck", on("rewrite"), |ctx: FlowContext<Review>| async move {
//!         Ok(if ctx.read_state(|s| s.attempts) < 3 { "retry" } else { "done" })
//!     })
//!     .emits(["retry", "done"])
//!     .listen("publish", on("done"), |ctx: FlowContext<Review>| async move {
//!         let draft: String = ctx.method_output("rewrite").and_then(|v| v.as_str().map(String::from))
//!             .ok_or_else(|| MethodError::msg("nothing to publish"))?;
//!         Ok(json!({ "published": draft }))
//!     })
//!     .build()
//!     .unwrap();
//!
//! let output = flow.kickoff([("topic", json!("flows"))]).await.unwrap();
//! assert_eq!(output.result, Some(json!({ "published": "flows v3" })));
//! assert_eq!(output.state.attempts, 3);
//! assert!(flow.to_mermaid().starts_with("flowchart TD"));
//! # });
//! ```
//!
//! ## The `#[flow]` macro
//! The same definition from an impl block: `#[start]` / `#[start(trigger)]`, `#[listen(trigger)]`,
//! `#[router(trigger, emits = [..])]`, `#[persist]` and
//! `#[human_feedback(message = "..", emit = [..], default = "..")]` on async methods taking
//! `&self` and (optionally) the [`FlowContext`]; options `#[flow(state = T, name = "..", persist,
//! crate = "path")]`. It adds `flow_builder(self) -> FlowBuilder<T>` and `into_flow(self)`.
//!
//! ```
//! use crewai_flow::{flow, FlowContext, MethodResult};
//!
//! struct Greeter { greeting: &'static str }
//!
//! #[flow(name = "greeter")]
//! impl Greeter {
//!     #[start]
//!     async fn name(&self, ctx: FlowContext) -> MethodResult<String> {
//!         Ok(ctx.read_state(|s| s["who"].as_str().unwrap_or("world").to_string()))
//!     }
//!
//!     #[router(name, emits = [polite, casual])]
//!     async fn tone(&self) -> MethodResult<&'static str> {
//!         Ok(if self.greeting == "Hello" { "polite" } else { "casual" })
//!     }
//!
//!     #[listen(or(polite, casual))]
//!     async fn greet(&self, ctx: FlowContext) -> MethodResult<String> {
//!         Ok(format!("{}, {}!", self.greeting, ctx.method_output("name").and_then(|v| v.as_str().map(String::from)).unwrap_or_default()))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let flow = Greeter { greeting: "Hello" }.into_flow().unwrap();
//! let output = flow.kickoff([("who", serde_json::json!("Ada"))]).await.unwrap();
//! assert_eq!(output.result, Some(serde_json::json!("Hello, Ada!")));
//! # });
//! ```
//!
//! ## State
//! Typed (any `Clone + Default + Serialize + DeserializeOwned` struct) or unstructured
//! ([`UnstructuredState`], a JSON map). Each run has an id (UUID v4) available as
//! [`FlowContext::state_id`] and written to the state's `id` field when it has one.
//! [`Flow::kickoff`] merges its inputs into the state; an input that does not fit a typed state
//! fails the kickoff naming the input.
//!
//! ## Events
//! On the flow's [`EventBus`](crewai_core::events::EventBus) (never a global one): `flow_started`
//! (parent: [`Kickoff::parent_event`]), `method_execution_started` (parent: `flow_started`),
//! `method_execution_finished` / `method_execution_failed` (parent: the method's start), and
//! `flow_finished` (parent: `flow_started`). [`FlowContext::event_id`] is the running method's
//! start event, the parent for a crew kicked off inside it.
//!
//! ## Persistence
//! [`FlowBuilder::persist`] (every method) or [`FlowBuilder::persist_method`] (one method) saves a
//! [`FlowSnapshot`] after the method, to [`SqliteFlowPersistence`] by default. Kickoff with an
//! existing id ([`Kickoff::resume`], or an `id` input) continues an interrupted run without
//! re-running completed methods; [`Kickoff::fork_from`] starts a new id from a saved state.
//!
//! ## Budgets
//! [`FlowBuilder::max_cost_usd`] and [`FlowBuilder::max_tokens`] bound the whole run: every call of
//! the crews and agents a method runs with [`FlowContext::crew_kickoff_options`] /
//! [`FlowContext::agent_kickoff_options`] (guardrail and conversion calls included) counts in one
//! ledger ([`FlowContext::usage`], [`FlowOutput::usage`]). A call that would go over is not made;
//! the kickoff ends with [`FlowError::BudgetExceeded`], keeping the outputs and state so far, and
//! with persistence the run is saved with the stopped method still to run, so resuming it (after
//! raising the limit) continues where it stopped. The spending before the stop counts on resume.
//!
//! ## Human feedback
//! [`FlowBuilder::human_feedback`] shows a method's output through a [`FeedbackProvider`]
//! ([`ConsoleFeedbackProvider`] by default); with outcomes, the answer routes to a label. A
//! provider answering [`FeedbackReply::Pending`] pauses the run ([`FlowStatus::AwaitingFeedback`]);
//! [`Flow::resume_with_feedback`] continues it, in this or another process.
//!
//! ## Plots
//! [`Flow::to_mermaid`] and [`Flow::plot_html`] (a self-contained page with inline SVG).

mod context;
mod definition;
mod error;
mod feedback;
mod persistence;
mod plot;
mod runtime;
mod state;
mod trigger;

pub use context::{FLOW_MEMORY_USAGE, FlowContext};
/// `#[flow]` on an impl block (see the crate docs).
pub use crewai_macros::flow;
pub use definition::{
    DEFAULT_MAX_METHOD_CALLS, FlowBuilder, FlowMethod, MethodError, MethodInfo, MethodKind,
    MethodResult,
};
pub use error::{BoxError, FlowBuildError, FlowError, PersistenceError};
pub use feedback::{
    AwaitingFeedback, ConsoleFeedbackProvider, FeedbackProvider, FeedbackRecord, FeedbackReply,
    FeedbackRequest, HumanFeedback,
};
pub use persistence::{
    FlowPersistence, FlowSnapshot, MethodRecord, PendingCall, RunProgress, RunStatus,
    SqliteFlowPersistence,
};
pub use runtime::{Flow, FlowOutput, FlowStatus, Kickoff};
pub use state::{FlowState, StateError, UnstructuredState};
pub use trigger::{JoinProgress, Trigger, and, on, or};
