//! Model calls as a stack of layers.
//!
//! Everything that happens around a model call and is not the provider's wire format is an
//! [`LlmLayer`]: client-side stop words, retries, rate limits and fallback models here;
//! budgets, hooks, events and usage in crewai-core; whatever a user adds (redaction, a
//! per-tenant quota). One type, [`LayeredLlm`], runs a model under a list of layers and is
//! itself an [`Llm`], so a layered model goes wherever a model goes.
//!
//! A layer gets the request and [`Next`], the rest of the stack. It may change the request,
//! refuse it, call `next` once, several times or not at all, and change what comes back:
//!
//! ```
//! # futures::executor::block_on(async {
//! use std::sync::Arc;
//! use crewai_llm::{async_trait, ContentPart, LayeredLlm, Llm, LlmError, LlmLayer, LlmRequest, LlmResponse, Message, Next, ScriptedLlm};
//!
//! /// Replaces e-mail-like words before anything leaves the process.
//! struct Redact;
//!
//! #[async_trait]
//! impl LlmLayer for Redact {
//!     fn name(&self) -> &str { "redact" }
//!     async fn call(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
//!         for message in &mut request.messages {
//!             for part in &mut message.content {
//!                 if let ContentPart::Text { text } = part {
//!                     *text = text.split(' ').map(|w| if w.contains('@') { "[email]" } else { w }).collect::<Vec<_>>().join(" ");
//!                 }
//!             }
//!         }
//!         next.call(request).await
//!     }
//! }
//!
//! let model = ScriptedLlm::new("scripted").then_text("noted");
//! let llm = LayeredLlm::builder(Arc::new(model.clone())).layer(Redact).build();
//! llm.call(LlmRequest::new(vec![Message::user("write to ann@example.com")])).await.unwrap();
//! assert_eq!(model.requests()[0].messages[0].text(), "write to [email]");
//! # });
//! ```
//!
//! ## Why this shape and not tower's `Service`/`Layer`
//!
//! tower is in the dependency tree (reqwest, axum), but its shape fits a model call badly:
//! `Service::call` takes `&mut self` behind `poll_ready`, so a model shared by every agent of
//! a crew would be cloned or put behind a buffer for each call; a `Layer` builds a new wrapper
//! type per concern, which is exactly the hand-forwarding this module replaces; a service has
//! one response type, while a model call is two operations (a complete reply, or a stream of
//! pieces) that a layer must both see; and boxing for `dyn` is needed anyway to let a crew mix
//! layers it did not know at compile time. So a layer is an `async_trait` object with both
//! operations, and the rest of the stack is a borrowed slice: a call through the stack clones
//! nothing, and costs one boxed future per layer (what each hand-written wrapper cost before).
//!
//! ## Streams
//!
//! [`LlmLayer::stream`] defaults to *one complete call through [`LlmLayer::call`]*, delivered
//! as a one-piece stream, not to forwarding: a layer written for `call` alone then still sees
//! every call, streamed ones included (a redacting layer that let streamed calls past unseen
//! would leak). Layers that can work on a live stream implement `stream` too; every layer in
//! this crate and in crewai-core does.
//!
//! ## Context
//!
//! Layers are built once and shared; what they need to know about one call (the agent making
//! it, the task, where its events go) travels with the request in
//! [`LlmRequest::extensions`](crate::LlmRequest::extensions), by type (crewai-core attaches its
//! `CallScope` there). A layer finds what it needs there, or passes the call on untouched.
//!
//! ## Order
//!
//! `layers[0]` is the outermost: it sees the request first and the response last. A model
//! built by [`crate::build_llm`] is fallbacks → rate limit → retries → stop words → the
//! provider client (see [`crate::router`]).

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::LlmError;
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse, StreamEvent};

/// One concern of a model call: something done before the call, after it, or instead of it.
///
/// Only [`LlmLayer::name`] and [`LlmLayer::call`] are required; see the [module docs](self).
#[async_trait]
pub trait LlmLayer: Send + Sync {
    /// A short name for logs and listings (`retry`, `hooks`, `redact`).
    fn name(&self) -> &str;

    /// A complete call: do what the layer does and pass the request on with `next.call`.
    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError>;

    /// A streamed call. The default makes the call through [`LlmLayer::call`] and delivers the
    /// reply as one text piece and the final response, so a layer that only implements `call`
    /// still sees streamed calls; override it to pass a live stream through (`next.stream`).
    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let response = self.call(request, next).await?;
        Ok(one_piece_stream(response))
    }

    /// What the model looks like from above this layer (a stop-word layer adds `stop_words`).
    fn capabilities(&self, below: Capabilities) -> Capabilities {
        below
    }
}

/// A shared layer is a layer (one quota for several stacks, a handle kept by the caller).
#[async_trait]
impl<T: LlmLayer + ?Sized> LlmLayer for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        (**self).call(request, next).await
    }
    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        (**self).stream(request, next).await
    }
    fn capabilities(&self, below: Capabilities) -> Capabilities {
        (**self).capabilities(below)
    }
}

/// A complete response as a stream: its text as one delta (when it has any), then `Done`.
pub fn one_piece_stream(response: LlmResponse) -> LlmStream {
    let mut events = Vec::with_capacity(2);
    if let Some(text) = response.content.clone().filter(|t| !t.is_empty()) {
        events.push(Ok(StreamEvent::TextDelta(text)));
    }
    events.push(Ok(StreamEvent::Done(response)));
    Box::pin(futures::stream::iter(events))
}

/// The rest of a stack, below the layer that holds it: the layers still to run and the model at
/// the bottom. It is `Copy`, so a layer may call it more than once (retries, fallbacks).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    layers: &'a [Arc<dyn LlmLayer>],
    model: &'a dyn Llm,
}

impl<'a> Next<'a> {
    /// The stack `layers` over `model` (`layers[0]` runs first).
    pub fn new(layers: &'a [Arc<dyn LlmLayer>], model: &'a dyn Llm) -> Self {
        Next { layers, model }
    }

    /// Passes a complete call on to the next layer, or to the model when none is left.
    pub async fn call(self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        match self.layers.split_first() {
            Some((layer, rest)) => layer.call(request, Next::new(rest, self.model)).await,
            None => self.model.call(request).await,
        }
    }

    /// Passes a streamed call on to the next layer, or to the model when none is left.
    pub async fn stream(self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        match self.layers.split_first() {
            Some((layer, rest)) => layer.stream(request, Next::new(rest, self.model)).await,
            None => self.model.stream(request).await,
        }
    }

    /// The model at the bottom of the stack (its name and provider label the call in errors,
    /// events and budgets).
    pub fn model(&self) -> &'a dyn Llm {
        self.model
    }

    /// The capabilities the rest of the stack reports.
    pub fn capabilities(&self) -> Capabilities {
        capabilities_of(self.layers, self.model)
    }

    /// The layers still to run, outermost first.
    pub fn layers(&self) -> &'a [Arc<dyn LlmLayer>] {
        self.layers
    }
}

fn capabilities_of(layers: &[Arc<dyn LlmLayer>], model: &dyn Llm) -> Capabilities {
    layers
        .iter()
        .rev()
        .fold(model.capabilities(), |below, layer| {
            layer.capabilities(below)
        })
}

/// A model under a stack of layers; `layers[0]` is the outermost.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use crewai_llm::{LayeredLlm, Llm, LlmError, LlmRequest, Message, RetryLayer, RetryPolicy, ScriptedLlm, StopWordsLayer};
///
/// let flaky = ScriptedLlm::new("scripted")
///     .then_error(LlmError::connection("scripted", "reset"))
///     .then_text("Thought: done\nObservation: made up");
/// let llm = LayeredLlm::builder(Arc::new(flaky))
///     .layer(RetryLayer::new(RetryPolicy::default().with_delays(Duration::ZERO, Duration::ZERO)))
///     .layer(StopWordsLayer::new(vec!["\nObservation:".into()]))
///     .build();
/// assert_eq!(llm.layer_names(), ["retry", "stop_words"]);
/// let reply = llm.call(LlmRequest::new(vec![Message::user("go")])).await.unwrap();
/// assert_eq!(reply.content.as_deref(), Some("Thought: done"));
/// # });
/// ```
#[derive(Clone)]
pub struct LayeredLlm {
    model: Arc<dyn Llm>,
    layers: Vec<Arc<dyn LlmLayer>>,
}

impl std::fmt::Debug for LayeredLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredLlm")
            .field("provider", &self.model.provider())
            .field("model", &self.model.model())
            .field("layers", &self.layer_names())
            .finish()
    }
}

impl LayeredLlm {
    /// `model` under `layers` (outermost first).
    pub fn new(model: Arc<dyn Llm>, layers: Vec<Arc<dyn LlmLayer>>) -> Self {
        LayeredLlm { model, layers }
    }

    /// Starts a stack over `model`; each [`LayeredLlmBuilder::layer`] goes below the ones added
    /// before it.
    pub fn builder(model: Arc<dyn Llm>) -> LayeredLlmBuilder {
        LayeredLlmBuilder {
            model,
            layers: Vec::new(),
        }
    }

    /// The model at the bottom.
    pub fn inner(&self) -> &Arc<dyn Llm> {
        &self.model
    }

    /// The layers, outermost first.
    pub fn layers(&self) -> &[Arc<dyn LlmLayer>] {
        &self.layers
    }

    /// The layers' names, outermost first.
    pub fn layer_names(&self) -> Vec<&str> {
        self.layers.iter().map(|layer| layer.name()).collect()
    }

    /// The whole stack, as a layer calling into it sees it.
    pub fn next(&self) -> Next<'_> {
        Next::new(&self.layers, self.model.as_ref())
    }
}

/// Builds a [`LayeredLlm`].
pub struct LayeredLlmBuilder {
    model: Arc<dyn Llm>,
    layers: Vec<Arc<dyn LlmLayer>>,
}

impl LayeredLlmBuilder {
    /// Adds a layer below those added so far (closer to the model).
    pub fn layer(self, layer: impl LlmLayer + 'static) -> Self {
        self.layer_arc(Arc::new(layer))
    }

    /// [`LayeredLlmBuilder::layer`] with a layer that is shared (one quota for several models).
    pub fn layer_arc(mut self, layer: Arc<dyn LlmLayer>) -> Self {
        self.layers.push(layer);
        self
    }

    /// Adds several shared layers, in order.
    pub fn layers(mut self, layers: impl IntoIterator<Item = Arc<dyn LlmLayer>>) -> Self {
        self.layers.extend(layers);
        self
    }

    pub fn build(self) -> LayeredLlm {
        LayeredLlm::new(self.model, self.layers)
    }
}

#[async_trait]
impl Llm for LayeredLlm {
    fn model(&self) -> &str {
        self.model.model()
    }
    fn provider(&self) -> &str {
        self.model.provider()
    }
    fn capabilities(&self) -> Capabilities {
        capabilities_of(&self.layers, self.model.as_ref())
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.next().call(request).await
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        self.next().stream(request).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::scripted::ScriptedLlm;
    use crate::traits::collect_stream;
    use crate::types::Message;

    /// Notes when it sees a call and when the call comes back, to show the order.
    struct Trace {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
    }

    #[async_trait]
    impl LlmLayer for Trace {
        fn name(&self) -> &str {
            self.name
        }
        async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
            self.log.lock().unwrap().push(format!("{} in", self.name));
            let response = next.call(request).await;
            self.log.lock().unwrap().push(format!("{} out", self.name));
            response
        }
    }

    fn request() -> LlmRequest {
        LlmRequest::new(vec![Message::user("hi")])
    }

    #[tokio::test]
    async fn the_first_layer_sees_the_call_first_and_the_reply_last() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let trace = |name| Trace {
            name,
            log: log.clone(),
        };
        let llm = LayeredLlm::builder(Arc::new(ScriptedLlm::new("m").then_text("ok")))
            .layer(trace("outer"))
            .layer(trace("inner"))
            .build();
        assert_eq!(
            llm.call(request()).await.unwrap().content.as_deref(),
            Some("ok")
        );
        assert_eq!(
            *log.lock().unwrap(),
            ["outer in", "inner in", "inner out", "outer out"]
        );
        assert_eq!((llm.model(), llm.provider()), ("m", "scripted"));
    }

    #[tokio::test]
    async fn a_layer_without_a_stream_of_its_own_still_sees_streamed_calls() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let llm = LayeredLlm::builder(Arc::new(ScriptedLlm::new("m").then_text("streamed")))
            .layer(Trace {
                name: "call_only",
                log: log.clone(),
            })
            .build();
        let mut pieces = Vec::new();
        let reply = collect_stream(llm.stream(request()).await.unwrap(), |event| {
            if let StreamEvent::TextDelta(text) = event {
                pieces.push(text.clone());
            }
        })
        .await
        .unwrap();
        assert_eq!(reply.content.as_deref(), Some("streamed"));
        assert_eq!(pieces, ["streamed"]);
        assert_eq!(*log.lock().unwrap(), ["call_only in", "call_only out"]);
    }

    #[tokio::test]
    async fn an_empty_stack_is_the_model() {
        let llm = LayeredLlm::new(
            Arc::new(ScriptedLlm::new("m").then_text("bare")),
            Vec::new(),
        );
        assert!(llm.layer_names().is_empty());
        assert_eq!(
            llm.call(request()).await.unwrap().content.as_deref(),
            Some("bare")
        );
    }
}
