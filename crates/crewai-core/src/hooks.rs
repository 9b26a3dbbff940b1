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
use crewai_llm::{Capabilities, Llm, LlmError, LlmRequest, LlmResponse, LlmStream, Message};
use serde_json::Value;

use crate::events::{CaughtPanic, EventBus, PanicSite, panic_message};

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

/// What an LLM-call hook sees. Before the call `messages` may be edited; after it `response` holds
/// the reply text.
#[derive(Debug, Clone, Default)]
pub struct LlmCallContext {
    pub messages: Vec<Message>,
    /// The model called (`None` never happens for real calls; kept optional for symmetry).
    pub model: Option<String>,
    pub agent_role: Option<String>,
    pub task_name: Option<String>,
    pub crew_name: Option<String>,
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
    pub agent_role: Option<String>,
    pub task_name: Option<String>,
    pub crew_name: Option<String>,
    pub tool_result: Option<String>,
}

type BeforeHook<C> = Arc<dyn Fn(&mut C) -> HookDecision + Send + Sync>;
type AfterHook<C> = Arc<dyn Fn(&mut C) -> Option<String> + Send + Sync>;
type BeforeLlm = BeforeHook<LlmCallContext>;
type AfterLlm = AfterHook<LlmCallContext>;
type BeforeTool = BeforeHook<ToolCallContext>;
type AfterTool = AfterHook<ToolCallContext>;

/// A set of hooks (cheap to clone). Hooks of one kind run in registration order.
#[derive(Clone, Default)]
pub struct Hooks {
    before_llm: Vec<BeforeLlm>,
    after_llm: Vec<AfterLlm>,
    before_tool: Vec<BeforeTool>,
    after_tool: Vec<AfterTool>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("before_llm_call", &self.before_llm.len())
            .field("after_llm_call", &self.after_llm.len())
            .field("before_tool_call", &self.before_tool.len())
            .field("after_tool_call", &self.after_tool.len())
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

impl Hooks {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn before_llm_call(
        mut self,
        hook: impl Fn(&mut LlmCallContext) -> HookDecision + Send + Sync + 'static,
    ) -> Self {
        self.before_llm.push(Arc::new(hook));
        self
    }

    pub fn after_llm_call(
        mut self,
        hook: impl Fn(&mut LlmCallContext) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.after_llm.push(Arc::new(hook));
        self
    }

    pub fn before_tool_call(
        mut self,
        hook: impl Fn(&mut ToolCallContext) -> HookDecision + Send + Sync + 'static,
    ) -> Self {
        self.before_tool.push(Arc::new(hook));
        self
    }

    pub fn after_tool_call(
        mut self,
        hook: impl Fn(&mut ToolCallContext) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.after_tool.push(Arc::new(hook));
        self
    }

    /// A before-tool hook that runs only for the named tools (CrewAI's `tools=[...]` filter).
    pub fn before_tool_call_for(
        self,
        tools: impl IntoIterator<Item = impl Into<String>>,
        hook: impl Fn(&mut ToolCallContext) -> HookDecision + Send + Sync + 'static,
    ) -> Self {
        let tools: Vec<String> = tools.into_iter().map(Into::into).collect();
        self.before_tool_call(move |ctx| {
            if tools.contains(&ctx.tool_name) {
                hook(ctx)
            } else {
                HookDecision::Continue
            }
        })
    }

    /// An after-tool hook that runs only for the named tools.
    pub fn after_tool_call_for(
        self,
        tools: impl IntoIterator<Item = impl Into<String>>,
        hook: impl Fn(&mut ToolCallContext) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let tools: Vec<String> = tools.into_iter().map(Into::into).collect();
        self.after_tool_call(move |ctx| {
            if tools.contains(&ctx.tool_name) {
                hook(ctx)
            } else {
                None
            }
        })
    }

    /// These hooks followed by `other`'s (crew hooks first, then the agent's).
    pub fn merged(&self, other: &Hooks) -> Hooks {
        let mut merged = self.clone();
        merged.before_llm.extend(other.before_llm.iter().cloned());
        merged.after_llm.extend(other.after_llm.iter().cloned());
        merged.before_tool.extend(other.before_tool.iter().cloned());
        merged.after_tool.extend(other.after_tool.iter().cloned());
        merged
    }

    /// How many hooks are registered in all.
    pub fn len(&self) -> usize {
        self.before_llm.len()
            + self.after_llm.len()
            + self.before_tool.len()
            + self.after_tool.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs the before-LLM hooks; the first block wins. A hook that panics blocks the call; the
    /// panic is only logged here (see [`Hooks::run_before_llm_reporting`]).
    pub fn run_before_llm(&self, ctx: &mut LlmCallContext) -> HookDecision {
        self.run_before_llm_reporting(ctx, &mut |_| {})
    }

    /// [`Hooks::run_before_llm`], passing each caught panic to `on_panic` (the executor counts it
    /// on the run's event bus).
    pub fn run_before_llm_reporting(
        &self,
        ctx: &mut LlmCallContext,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> HookDecision {
        run_before(&self.before_llm, "before_llm_call", ctx, on_panic)
    }

    /// Runs the after-LLM hooks; each replacement becomes the response the next hook sees.
    /// Returns the final response text when any hook replaced it. A hook that panics changes
    /// nothing.
    pub fn run_after_llm(&self, ctx: &mut LlmCallContext) -> Option<String> {
        self.run_after_llm_reporting(ctx, &mut |_| {})
    }

    /// [`Hooks::run_after_llm`], passing each caught panic to `on_panic`.
    pub fn run_after_llm_reporting(
        &self,
        ctx: &mut LlmCallContext,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> Option<String> {
        run_after(
            &self.after_llm,
            "after_llm_call",
            ctx,
            |ctx, text| ctx.response = Some(text),
            on_panic,
        )
    }

    /// Runs the before-tool hooks; the first block wins.
    pub fn run_before_tool(&self, ctx: &mut ToolCallContext) -> HookDecision {
        self.run_before_tool_reporting(ctx, &mut |_| {})
    }

    /// [`Hooks::run_before_tool`], passing each caught panic to `on_panic`.
    pub fn run_before_tool_reporting(
        &self,
        ctx: &mut ToolCallContext,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> HookDecision {
        run_before(&self.before_tool, "before_tool_call", ctx, on_panic)
    }

    /// Runs the after-tool hooks, chaining replacements; returns the final result text.
    pub fn run_after_tool(&self, ctx: &mut ToolCallContext) -> Option<String> {
        self.run_after_tool_reporting(ctx, &mut |_| {})
    }

    /// [`Hooks::run_after_tool`], passing each caught panic to `on_panic`.
    pub fn run_after_tool_reporting(
        &self,
        ctx: &mut ToolCallContext,
        on_panic: &mut dyn FnMut(CaughtPanic),
    ) -> Option<String> {
        run_after(
            &self.after_tool,
            "after_tool_call",
            ctx,
            |ctx, text| ctx.tool_result = Some(text),
            on_panic,
        )
    }
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

fn run_after<C>(
    hooks: &[AfterHook<C>],
    kind: &'static str,
    ctx: &mut C,
    store: impl Fn(&mut C, String),
    on_panic: &mut dyn FnMut(CaughtPanic),
) -> Option<String> {
    let mut replaced = None;
    for hook in hooks {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(ctx))) {
            Ok(Some(text)) => {
                store(ctx, text.clone());
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

/// An LLM with hooks around each call, for bare LLM calls outside an agent (agents run their hooks
/// themselves).
///
/// ```
/// use std::sync::Arc;
/// use crewai_core::hooks::{HookDecision, HookedLlm, Hooks};
/// use crewai_llm::{async_trait, Llm, LlmError, LlmRequest, LlmResponse, Message};
///
/// struct Fixed;
/// #[async_trait]
/// impl Llm for Fixed {
///     fn model(&self) -> &str { "fixed" }
///     async fn call(&self, _: LlmRequest) -> Result<LlmResponse, LlmError> {
///         Ok(LlmResponse { content: Some("Hello".into()), ..Default::default() })
///     }
/// }
///
/// let hooks = Hooks::new().after_llm_call(|ctx| ctx.response.as_ref().map(|r| format!("[HOOKED] {r}")));
/// let llm = HookedLlm::new(Arc::new(Fixed), hooks);
/// let reply = futures::executor::block_on(llm.call(LlmRequest::new(vec![Message::user("hi")]))).unwrap();
/// assert_eq!(reply.content.as_deref(), Some("[HOOKED] Hello"));
/// ```
pub struct HookedLlm {
    inner: Arc<dyn Llm>,
    hooks: Hooks,
    /// Where a panicking hook is counted and reported, when given.
    events: Option<EventBus>,
}

impl HookedLlm {
    pub fn new(inner: Arc<dyn Llm>, hooks: Hooks) -> Self {
        HookedLlm {
            inner,
            hooks,
            events: None,
        }
    }

    /// Reports hooks that panic on `events` (a `panic_caught` event, counted by the bus);
    /// without a bus they are only logged.
    pub fn with_events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    fn report(&self) -> impl FnMut(CaughtPanic) + '_ {
        move |panic| {
            if let Some(events) = &self.events {
                events.report_panic(None, panic);
            }
        }
    }

    fn before(&self, request: &mut LlmRequest) -> Result<LlmCallContext, LlmError> {
        let mut ctx = LlmCallContext {
            messages: std::mem::take(&mut request.messages),
            model: Some(self.inner.model().to_string()),
            ..Default::default()
        };
        let decision = self
            .hooks
            .run_before_llm_reporting(&mut ctx, &mut self.report());
        request.messages = ctx.messages.clone();
        match decision {
            HookDecision::Continue => Ok(ctx),
            HookDecision::Block { reason } => Err(LlmError::Unsupported(match reason {
                Some(reason) => format!("{LLM_CALL_BLOCKED}: {reason}"),
                None => LLM_CALL_BLOCKED.to_string(),
            })),
        }
    }
}

#[async_trait]
impl Llm for HookedLlm {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    async fn call(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut ctx = self.before(&mut request)?;
        let mut response = self.inner.call(request).await?;
        ctx.response = response.content.clone();
        if let Some(text) = self
            .hooks
            .run_after_llm_reporting(&mut ctx, &mut self.report())
        {
            response.content = Some(text);
        }
        Ok(response)
    }

    /// Streams pass through untouched after the before-hooks: an after-hook cannot rewrite text
    /// that was already delivered, so a hooked stream with after-hooks is made as one call instead.
    async fn stream(&self, mut request: LlmRequest) -> Result<LlmStream, LlmError> {
        if self.hooks.after_llm.is_empty() {
            self.before(&mut request)?;
            return self.inner.stream(request).await;
        }
        let response = self.call(request).await?;
        let mut events = Vec::new();
        if let Some(text) = response.content.clone().filter(|t| !t.is_empty()) {
            events.push(Ok(crewai_llm::StreamEvent::TextDelta(text)));
        }
        events.push(Ok(crewai_llm::StreamEvent::Done(response)));
        Ok(Box::pin(futures::stream::iter(events)))
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

#[cfg(test)]
mod tests {
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
        hooks.run_before_tool_reporting(&mut ctx, &mut |p| caught.push(p));
        hooks.run_after_tool_reporting(&mut ctx, &mut |p| caught.push(p));
        hooks.run_after_llm_reporting(&mut LlmCallContext::default(), &mut |p| caught.push(p));
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

    #[test]
    fn a_hooked_llm_counts_its_hooks_panics_on_its_bus() {
        let bus = EventBus::new();
        let hooks = Hooks::new().after_llm_call(|_| panic!("after bug"));
        let llm = HookedLlm::new(Arc::new(Fixed), hooks).with_events(bus.clone());
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
    async fn hooked_llm_blocks_and_rewrites_messages() {
        let blocked = HookedLlm::new(
            Arc::new(Fixed),
            Hooks::new().before_llm_call(|_| HookDecision::block()),
        );
        let error = blocked
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), LLM_CALL_BLOCKED);

        let rewriting = HookedLlm::new(
            Arc::new(Fixed),
            Hooks::new().before_llm_call(|ctx| {
                ctx.messages.push(Message::user("extra"));
                HookDecision::Continue
            }),
        );
        let reply = rewriting
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(reply.content.as_deref(), Some("2 messages"));
    }
}
