//! Hooks around every LLM call and every tool call (CrewAI's `@before_llm_call`, `@after_llm_call`,
//! `@before_tool_call`, `@after_tool_call`), registered per crew or per agent, never globally.
//!
//! - A before-LLM hook may rewrite the messages or block the call (the run fails with
//!   "LLM call blocked by before_llm_call hook").
//! - An after-LLM hook may replace the response text.
//! - A before-tool hook may rewrite the arguments or block the call: the tool does not run and its
//!   result is `Tool execution blocked by hook. Tool: <name>` (plus the reason, when given); the
//!   after-tool hooks still run on that result.
//! - An after-tool hook may replace the result.
//!
//! The LLM-call hooks run in the hooks layer of the run's model stack ([`HooksLayer`], see
//! [`crate::llm_stack`]), so they see every call of the run: the agent's turns, summaries, LLM
//! guardrail judges and the structured-output converter. A set of hooks can also carry whole
//! [`LlmLayer`]s ([`Hooks::llm_layer`]), which join the same stack below the hooks.
//!
//! ```
//! use crewai_core::hooks::{HookDecision, Hooks};
//!
//! let hooks = Hooks::new()
//!     .before_tool_call(|ctx| if ctx.tool_name == "delete_everything" { HookDecision::block() } else { HookDecision::Continue })
//!     .after_llm_call(|ctx| ctx.response.as_ref().map(|text| format!("[checked] {text}")));
//! assert_eq!(hooks.len(), 2);
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use crewai_llm::{
    LlmError, LlmLayer, LlmRequest, LlmResponse, LlmStream, Message, Next, StreamEvent,
};
use futures::StreamExt;
use serde_json::Value;

use crate::events::{CaughtPanic, EventBus, PanicSite, panic_message};
use crate::llm_stack::CallScope;

/// What a before-hook decides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HookDecision {
    /// Go on (with whatever the hook rewrote in the context).
    #[default]
    Continue,
    /// Stop this call; the reason, when given, is shown to the model (tool calls) or in the error.
    Block { reason: Option<String> },
}

impl HookDecision {
    /// Block without a reason.
    pub fn block() -> Self {
        HookDecision::Block { reason: None }
    }

    /// Block and tell the model why.
    pub fn block_because(reason: impl Into<String>) -> Self {
        HookDecision::Block {
            reason: Some(reason.into()),
        }
    }
}

impl From<bool> for HookDecision {
    /// CrewAI's convention: `false` blocks, `true` continues.
    fn from(allow: bool) -> Self {
        if allow {
            HookDecision::Continue
        } else {
            HookDecision::block()
        }
    }
}

/// Who makes a model or tool call: the agent, its task and its crew, each `None` outside one
/// (a hook run directly, a call outside any crew).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOrigin {
    pub agent_role: Option<String>,
    pub task_name: Option<String>,
    pub crew_name: Option<String>,
}

/// What an LLM-call hook sees. Before the call `messages` may be edited; after it `response` holds
/// the reply text.
#[derive(Debug, Clone, Default)]
pub struct LlmCallContext {
    pub messages: Vec<Message>,
    /// The model called (`None` never happens for real calls; kept optional for symmetry).
    pub model: Option<String>,
    pub origin: CallOrigin,
    /// Tool rounds completed so far in this execution.
    pub iterations: u32,
    pub response: Option<String>,
}

/// What a tool-call hook sees. Before the call `tool_input` may be edited; after it `tool_result`
/// holds the text the model will see.
#[derive(Debug, Clone, Default)]
pub struct ToolCallContext {
    pub tool_name: String,
    pub tool_input: Value,
    pub origin: CallOrigin,
    pub tool_result: Option<String>,
}

type BeforeHook<C> = Arc<dyn Fn(&mut C) -> HookDecision + Send + Sync>;
type AfterHook<C> = Arc<dyn Fn(&mut C) -> Option<String> + Send + Sync>;

/// The hooks of one kind of call (model or tool), before it and after it.
pub(crate) struct HookSet<C> {
    before: Vec<BeforeHook<C>>,
    after: Vec<AfterHook<C>>,
}

impl<C> Default for HookSet<C> {
    fn default() -> Self {
        HookSet {
            before: Vec::new(),
            after: Vec::new(),
        }
    }
}

impl<C> Clone for HookSet<C> {
    fn clone(&self) -> Self {
        HookSet {
            before: self.before.clone(),
            after: self.after.clone(),
        }
    }
}

impl<C> HookSet<C> {
    fn len(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// Adds `other`'s hooks after these.
    fn extend(&mut self, other: &HookSet<C>) {
        self.before.extend(other.before.iter().cloned());
        self.after.extend(other.after.iter().cloned());
    }
}

/// A set of hooks and model-call layers (cheap to clone). Hooks of one kind, and the layers,
/// run in registration order.
#[derive(Clone, Default)]
pub struct Hooks {
    llm: HookSet<LlmCallContext>,
    tool: HookSet<ToolCallContext>,
    llm_layers: Vec<Arc<dyn LlmLayer>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layers: Vec<&str> = self.llm_layers.iter().map(|layer| layer.name()).collect();
        f.debug_struct("Hooks")
            .field("before_llm_call", &self.llm.before.len())
            .field("after_llm_call", &self.llm.after.len())
            .field("before_tool_call", &self.tool.before.len())
            .field("after_tool_call", &self.tool.after.len())
            .field("llm_layers", &layers)
            .finish()
    }
}

/// The tool result a blocking before-tool hook leaves (the text CrewAI uses, kept for conformance).
pub fn blocked_tool_result(tool_name: &str, reason: Option<&str>) -> String {
    match reason {
        Some(reason) => {
            format!("Tool execution blocked by hook. Tool: {tool_name}. Reason: {reason}")
        }
        None => format!("Tool execution blocked by hook. Tool: {tool_name}"),
    }
}

/// The error text of a blocked LLM call.
pub const LLM_CALL_BLOCKED: &str = "LLM call blocked by before_llm_call hook";

/// What [`LlmError::Blocked`] names as the refuser when a before-LLM hook blocks a call.
pub const BLOCKED_BY_HOOK: &str = "before_llm_call hook";

impl Hooks {
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Runs `hook` before each model call: it may change the messages, or block the call.
        pub fn before_llm_call(
            hook: impl Fn(&mut LlmCallContext) -> HookDecision + Send + Sync + 'static,
        ) => |b| b.llm.before.push(Arc::new(hook));
        /// Runs `hook` after each model call: text it returns replaces the response.
        pub fn after_llm_call(
            hook: impl Fn(&mut LlmCallContext) -> Option<String> + Send + Sync + 'static,
        ) => |b| b.llm.after.push(Arc::new(hook));
        /// Runs `hook` before each tool call: it may change the arguments, or block the call.
        pub fn before_tool_call(
            hook: impl Fn(&mut ToolCallContext) -> HookDecision + Send + Sync + 'static,
        ) => |b| b.tool.before.push(Arc::new(hook));
        /// Runs `hook` after each tool call: text it returns replaces the result.
        pub fn after_tool_call(
            hook: impl Fn(&mut ToolCallContext) -> Option<String> + Send + Sync + 'static,
        ) => |b| b.tool.after.push(Arc::new(hook));
        /// A before-tool hook that runs only for the named tools (CrewAI's `tools=[...]` filter).
        pub fn before_tool_call_for(
            tools: impl IntoIterator<Item = impl Into<String>>,
            hook: impl Fn(&mut ToolCallContext) -> HookDecision + Send + Sync + 'static,
        ) => |b| b.tool.before.push(only_for(tools, hook, HookDecision::Continue));
        /// An after-tool hook that runs only for the named tools.
        pub fn after_tool_call_for(
            tools: impl IntoIterator<Item = impl Into<String>>,
            hook: impl Fn(&mut ToolCallContext) -> Option<String> + Send + Sync + 'static,
        ) => |b| b.tool.after.push(only_for(tools, hook, None));
        /// [`Hooks::llm_layer`] with a layer that is shared (one quota for several crews).
        pub fn llm_layer_arc(layer: Arc<dyn LlmLayer>) => |b| b.llm_layers.push(layer);
    }

    /// Adds a layer to every model call these hooks apply to: the run puts it in its model
    /// stack below the LLM-call hooks, above the budget, rate limit and events (see
    /// [`crate::llm_stack`]). Layers run in the order they were added, a crew's before an
    /// agent's.
    pub fn llm_layer(self, layer: impl LlmLayer + 'static) -> Self {
        self.llm_layer_arc(Arc::new(layer))
    }

    /// The model-call layers, in order.
    pub fn llm_layers(&self) -> &[Arc<dyn LlmLayer>] {
        &self.llm_layers
    }

    /// Whether any before- or after-LLM hook is registered.
    pub fn has_llm_hooks(&self) -> bool {
        self.llm.len() > 0
    }

    /// These hooks followed by `other`'s (crew hooks first, then the agent's).
    pub fn merged(&self, other: &Hooks) -> Hooks {
        let mut merged = self.clone();
        merged.llm.extend(&other.llm);
        merged.tool.extend(&other.tool);
        merged.llm_layers.extend(other.llm_layers.iter().cloned());
        merged
    }

    /// `self` in place of `earlier`, keeping the layers `earlier` had before `self`'s own: the
    /// builders' `hooks(...)` replaces the hooks, not the layers added with `llm_layer`.
    pub(crate) fn replacing(mut self, earlier: Hooks) -> Hooks {
        let mut layers = earlier.llm_layers;
        layers.append(&mut self.llm_layers);
        self.llm_layers = layers;
        self
    }

    /// How many hooks are registered in all (layers are not hooks: see [`Hooks::llm_layers`]).
    pub fn len(&self) -> usize {
        self.llm.len() + self.tool.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs the before-LLM hooks; the first block wins. A hook that panics blocks the call; the
    /// panic is only logged here (a run also counts it on its event bus).
    pub fn run_before_llm(&self, ctx: &mut LlmCallContext) -> HookDecision {
        self.run_before_reporting(ctx, &mut |_| {})
    }

    /// Runs the after-LLM hooks; each replacement becomes the response the next hook sees.
    /// Returns the final response text when any hook replaced it. A hook that panics changes
    /// nothing.
    pub fn run_after_llm(&self, ctx: &mut LlmCallContext) -> Option<String> {
        self.run_after_reporting(ctx, &mut |_| {})
    }

    /// Runs the before-tool hooks; the first block wins.
    pub fn run_before_tool(&self, ctx: &mut ToolCallContext) -> HookDecision {
        self.run_before_reporting(ctx, &mut |_| {})
    }

    /// Runs the after-tool hooks, chaining replacements; returns the final result text.
    pub fn run_after_tool(&self, ctx: &mut ToolCallContext) -> Option<String> {
        self.run_after_reporting(ctx, &mut |_| {})
    }

    /// The before-hooks of `C`'s kind, passing each caught panic to `on_panic` (the executor
    /// counts it on the run's event bus).
    pub(crate) fn run_before_reporting<C: HookedCall>(
        &self,
        ctx: &mut C,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> HookDecision {
        run_before(&C::set(self).before, C::BEFORE, ctx, on_panic)
    }

    /// The after-hooks of `C`'s kind, passing each caught panic to `on_panic`.
    pub(crate) fn run_after_reporting<C: HookedCall>(
        &self,
        ctx: &mut C,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> Option<String> {
        run_after(&C::set(self).after, C::AFTER, ctx, on_panic)
    }
}

/// What hooks run on: a model call or a tool call, with the hooks of its kind, the kinds' names
/// (in events and logs) and where an after-hook's replacement goes.
pub(crate) trait HookedCall: Sized {
    const BEFORE: &'static str;
    const AFTER: &'static str;
    fn set(hooks: &Hooks) -> &HookSet<Self>;
    /// Keeps an after-hook's replacement, for the next hook to see.
    fn replace(&mut self, text: String);
}

/// `HookedCall` for a context whose hooks are `hooks.$set`, named `$before` and `$after`, and
/// whose after-hooks replace `$result`.
macro_rules! hooked_call {
    ($context:ty, $set:ident, $before:literal, $after:literal, $result:ident) => {
        impl HookedCall for $context {
            const BEFORE: &'static str = $before;
            const AFTER: &'static str = $after;
            fn set(hooks: &Hooks) -> &HookSet<Self> {
                &hooks.$set
            }
            fn replace(&mut self, text: String) {
                self.$result = Some(text);
            }
        }
    };
}

hooked_call!(
    LlmCallContext,
    llm,
    "before_llm_call",
    "after_llm_call",
    response
);
hooked_call!(
    ToolCallContext,
    tool,
    "before_tool_call",
    "after_tool_call",
    tool_result
);

/// `hook` for calls of the named tools; other tool calls get `otherwise`.
fn only_for<R: Clone + Send + Sync + 'static>(
    tools: impl IntoIterator<Item = impl Into<String>>,
    hook: impl Fn(&mut ToolCallContext) -> R + Send + Sync + 'static,
    otherwise: R,
) -> Arc<dyn Fn(&mut ToolCallContext) -> R + Send + Sync> {
    let tools: Vec<String> = tools.into_iter().map(Into::into).collect();
    Arc::new(move |ctx| {
        if tools.contains(&ctx.tool_name) {
            hook(ctx)
        } else {
            otherwise.clone()
        }
    })
}

/// A hook is user code: one that panics blocks the call (before) or changes nothing (after), and
/// the run goes on; the panic goes to `on_panic`, named by the hook's kind.
fn run_before<C>(
    hooks: &[BeforeHook<C>],
    kind: &'static str,
    ctx: &mut C,
    on_panic: &mut dyn FnMut(CaughtPanic),
) -> HookDecision {
    for hook in hooks {
        let decision = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(ctx))) {
            Ok(decision) => decision,
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                tracing::warn!(hook = kind, %message, "a before-call hook panicked; the call is blocked");
                on_panic(CaughtPanic::new(PanicSite::Hook, kind, message));
                HookDecision::block_because("a before-call hook panicked")
            }
        };
        if let HookDecision::Block { .. } = decision {
            return decision;
        }
    }
    HookDecision::Continue
}

fn run_after<C: HookedCall>(
    hooks: &[AfterHook<C>],
    kind: &'static str,
    ctx: &mut C,
    on_panic: &mut dyn FnMut(CaughtPanic),
) -> Option<String> {
    let mut replaced = None;
    for hook in hooks {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(ctx))) {
            Ok(Some(text)) => {
                ctx.replace(text.clone());
                replaced = Some(text);
            }
            Ok(None) => {}
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                tracing::warn!(hook = kind, %message, "an after-call hook panicked; its result is ignored");
                on_panic(CaughtPanic::new(PanicSite::Hook, kind, message));
            }
        }
    }
    replaced
}

/// The hooks layer of a model stack: before-LLM hooks on the request (they may rewrite the
/// messages or block the call with [`LlmError::Blocked`]), after-LLM hooks on the reply.
///
/// In a run's stack it runs the run's hooks, the crew's then the agent's, which the call's
/// [`CallScope`] carries. Built with hooks of its own, it runs those first; that is how a bare
/// model gets hooks:
///
/// ```
/// use std::sync::Arc;
/// use crewai_core::hooks::{Hooks, HooksLayer};
/// use crewai_llm::{LayeredLlm, Llm, LlmRequest, Message, ScriptedLlm};
///
/// let hooks = Hooks::new().after_llm_call(|ctx| ctx.response.as_ref().map(|r| format!("[HOOKED] {r}")));
/// let llm = LayeredLlm::builder(Arc::new(ScriptedLlm::new("scripted").then_text("Hello")))
///     .layer(HooksLayer::new(hooks))
///     .build();
/// let reply = futures::executor::block_on(llm.call(LlmRequest::new(vec![Message::user("hi")]))).unwrap();
/// assert_eq!(reply.content.as_deref(), Some("[HOOKED] Hello"));
/// ```
///
/// A streamed call streams on: the after-hooks replace the final response's text, the pieces
/// already delivered stay as the model wrote them.
#[derive(Clone, Default)]
pub struct HooksLayer {
    hooks: Hooks,
    /// Where a panicking hook is counted outside a run (a run reports on its own bus).
    events: Option<EventBus>,
}

impl std::fmt::Debug for HooksLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HooksLayer")
            .field("hooks", &self.hooks)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl HooksLayer {
    /// A layer running `hooks` on every call (before the hooks of the run the call is in).
    pub fn new(hooks: Hooks) -> Self {
        HooksLayer {
            hooks,
            events: None,
        }
    }

    /// Reports hooks that panic outside a run on `events` (a `panic_caught` event, counted by
    /// the bus); without a bus they are only logged.
    pub fn with_events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    /// The sets of hooks a call runs: the layer's own, then the run's.
    fn sets<'a>(&'a self, scope: Option<&'a CallScope>) -> impl Iterator<Item = &'a Hooks> {
        std::iter::once(&self.hooks).chain(scope.map(CallScope::hooks))
    }

    fn report<'a>(&'a self, scope: Option<&'a CallScope>) -> impl FnMut(CaughtPanic) + 'a {
        move |panic| match scope {
            Some(scope) => {
                let panic = panic.in_task(Some(scope.agent_role()), scope.task_name());
                scope.events().report_panic(scope.parent_event_id(), panic);
            }
            None => {
                if let Some(events) = &self.events {
                    events.report_panic(None, panic);
                }
            }
        }
    }

    /// Runs the before-hooks on the request; returns the context the after-hooks need, when
    /// there are any.
    fn before(
        &self,
        request: &mut LlmRequest,
        model: &str,
        scope: Option<&CallScope>,
    ) -> Result<Option<LlmCallContext>, LlmError> {
        let has_before = self.sets(scope).any(|hooks| !hooks.llm.before.is_empty());
        let has_after = self.sets(scope).any(|hooks| !hooks.llm.after.is_empty());
        if !has_before && !has_after {
            return Ok(None);
        }
        let mut ctx = LlmCallContext {
            messages: std::mem::take(&mut request.messages),
            model: Some(model.to_string()),
            origin: scope.map(CallScope::origin).unwrap_or_default(),
            iterations: scope.map_or(0, CallScope::iterations),
            response: None,
        };
        if has_before {
            let mut report = self.report(scope);
            let mut decision = HookDecision::Continue;
            for hooks in self.sets(scope) {
                decision = hooks.run_before_reporting(&mut ctx, &mut report);
                if let HookDecision::Block { .. } = decision {
                    break;
                }
            }
            // What the hooks left is the agent's conversation from now on, blocked or not.
            if let Some(scope) = scope {
                scope.keep_rewritten(&ctx.messages);
            }
            if let HookDecision::Block { reason } = decision {
                request.messages = ctx.messages;
                return Err(LlmError::Blocked {
                    by: BLOCKED_BY_HOOK.to_string(),
                    reason,
                });
            }
        }
        if has_after {
            request.messages = ctx.messages.clone();
            Ok(Some(ctx))
        } else {
            request.messages = ctx.messages;
            Ok(None)
        }
    }

    /// Runs the after-hooks on the reply; each replacement is what the next hook sees.
    fn after(
        &self,
        ctx: &mut LlmCallContext,
        response: &mut LlmResponse,
        scope: Option<&CallScope>,
    ) {
        ctx.response = response.content.clone();
        let mut report = self.report(scope);
        let mut replaced = None;
        for hooks in self.sets(scope) {
            if let Some(text) = hooks.run_after_reporting(ctx, &mut report) {
                replaced = Some(text);
            }
        }
        if let Some(text) = replaced {
            response.content = Some(text);
        }
    }
}

#[async_trait]
impl LlmLayer for HooksLayer {
    fn name(&self) -> &str {
        "hooks"
    }

    async fn call(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let scope = request.extensions.get_arc::<CallScope>();
        let ctx = self.before(&mut request, next.model().model(), scope.as_deref())?;
        let mut response = next.call(request).await?;
        if let Some(mut ctx) = ctx {
            self.after(&mut ctx, &mut response, scope.as_deref());
        }
        Ok(response)
    }

    async fn stream(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let scope = request.extensions.get_arc::<CallScope>();
        let ctx = self.before(&mut request, next.model().model(), scope.as_deref())?;
        let stream = next.stream(request).await?;
        let Some(mut ctx) = ctx else {
            return Ok(stream);
        };
        let layer = self.clone();
        Ok(Box::pin(stream.map(move |event| match event {
            Ok(StreamEvent::Done(mut response)) => {
                layer.after(&mut ctx, &mut response, scope.as_deref());
                Ok(StreamEvent::Done(response))
            }
            other => other,
        })))
    }
}

#[cfg(test)]
mod tests {
    use crewai_llm::{LayeredLlm, Llm};

    use super::*;

    #[test]
    fn first_block_wins_and_later_hooks_do_not_run() {
        let hooks = Hooks::new()
            .before_tool_call(|ctx| {
                ctx.tool_input = serde_json::json!({"rewritten": true});
                HookDecision::Continue
            })
            .before_tool_call(|_| HookDecision::block_because("not allowed"))
            .before_tool_call(|_| panic!("must not run after a block"));
        let mut ctx = ToolCallContext {
            tool_name: "t".into(),
            ..Default::default()
        };
        assert_eq!(
            hooks.run_before_tool(&mut ctx),
            HookDecision::block_because("not allowed")
        );
        assert_eq!(ctx.tool_input["rewritten"], true);
    }

    #[test]
    fn after_hooks_chain_replacements() {
        let hooks = Hooks::new()
            .after_tool_call(|ctx| ctx.tool_result.as_ref().map(|r| format!("{r}!")))
            .after_tool_call(|_| None)
            .after_tool_call(|ctx| ctx.tool_result.as_ref().map(|r| format!("<{r}>")));
        let mut ctx = ToolCallContext {
            tool_name: "t".into(),
            tool_result: Some("42".into()),
            ..Default::default()
        };
        assert_eq!(hooks.run_after_tool(&mut ctx).as_deref(), Some("<42!>"));
    }

    #[test]
    fn filtered_hooks_only_see_their_tools() {
        let hooks = Hooks::new().before_tool_call_for(["danger"], |_| HookDecision::block());
        let mut safe = ToolCallContext {
            tool_name: "safe".into(),
            ..Default::default()
        };
        let mut danger = ToolCallContext {
            tool_name: "danger".into(),
            ..Default::default()
        };
        assert_eq!(hooks.run_before_tool(&mut safe), HookDecision::Continue);
        assert_eq!(hooks.run_before_tool(&mut danger), HookDecision::block());
    }

    #[test]
    fn a_panicking_hook_blocks_instead_of_crashing() {
        let hooks = Hooks::new()
            .before_tool_call(|_| panic!("hook bug"))
            .after_tool_call(|_| panic!("hook bug"));
        let mut ctx = ToolCallContext {
            tool_name: "t".into(),
            tool_result: Some("r".into()),
            ..Default::default()
        };
        assert!(matches!(
            hooks.run_before_tool(&mut ctx),
            HookDecision::Block { .. }
        ));
        assert_eq!(hooks.run_after_tool(&mut ctx), None);
    }

    #[test]
    fn a_panicking_hook_is_reported_with_its_kind_and_message() {
        let hooks = Hooks::new()
            .before_tool_call(|_| panic!("before bug"))
            .after_tool_call(|_| panic!("after bug {}", 2))
            .after_llm_call(|_| panic!("llm bug"));
        let mut caught = Vec::new();
        let mut ctx = ToolCallContext::default();
        hooks.run_before_reporting(&mut ctx, &mut |p| caught.push(p));
        hooks.run_after_reporting(&mut ctx, &mut |p| caught.push(p));
        hooks.run_after_reporting(&mut LlmCallContext::default(), &mut |p| caught.push(p));
        let seen: Vec<_> = caught
            .iter()
            .map(|p| (p.site, p.name.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            seen,
            vec![
                (PanicSite::Hook, "before_tool_call", "before bug"),
                (PanicSite::Hook, "after_tool_call", "after bug 2"),
                (PanicSite::Hook, "after_llm_call", "llm bug"),
            ]
        );
    }

    /// `Fixed` under a hooks layer with `hooks`.
    fn hooked(hooks: HooksLayer) -> LayeredLlm {
        LayeredLlm::builder(Arc::new(Fixed)).layer(hooks).build()
    }

    #[test]
    fn a_hooks_layer_counts_its_hooks_panics_on_its_bus() {
        let bus = EventBus::new();
        let hooks = Hooks::new().after_llm_call(|_| panic!("after bug"));
        let llm = hooked(HooksLayer::new(hooks).with_events(bus.clone()));
        let reply =
            futures::executor::block_on(llm.call(LlmRequest::new(vec![Message::user("hi")])))
                .unwrap();
        assert!(reply.content.is_some());
        assert_eq!(bus.caught_panics_at(PanicSite::Hook), 1);
    }

    #[test]
    fn blocked_text_is_crewais() {
        assert_eq!(
            blocked_tool_result("dangerous_operation", None),
            "Tool execution blocked by hook. Tool: dangerous_operation"
        );
        assert!(HookDecision::from(false) != HookDecision::Continue);
    }

    #[test]
    fn merged_keeps_order() {
        let first = Hooks::new().after_llm_call(|_| Some("first".into()));
        let second =
            Hooks::new().after_llm_call(|ctx| ctx.response.as_ref().map(|r| format!("{r}+second")));
        let mut ctx = LlmCallContext::default();
        assert_eq!(
            first.merged(&second).run_after_llm(&mut ctx).as_deref(),
            Some("first+second")
        );
    }

    struct Fixed;
    #[async_trait]
    impl Llm for Fixed {
        fn model(&self) -> &str {
            "fixed"
        }
        async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
            Ok(LlmResponse {
                content: Some(format!("{} messages", request.messages.len())),
                ..Default::default()
            })
        }
    }

    #[tokio::test]
    async fn a_hooks_layer_blocks_and_rewrites_messages() {
        let blocked = hooked(HooksLayer::new(
            Hooks::new().before_llm_call(|_| HookDecision::block()),
        ));
        let error = blocked
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), LLM_CALL_BLOCKED);
        assert!(
            matches!(&error, LlmError::Blocked { by, reason: None } if by == BLOCKED_BY_HOOK),
            "{error:?}"
        );

        let rewriting = hooked(HooksLayer::new(Hooks::new().before_llm_call(|ctx| {
            ctx.messages.push(Message::user("extra"));
            HookDecision::Continue
        })));
        let reply = rewriting
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(reply.content.as_deref(), Some("2 messages"));
    }
}
