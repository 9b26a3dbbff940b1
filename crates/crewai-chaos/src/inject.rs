//! Panics put into a soak run on purpose ([`SoakConfig::inject_panic`](crate::SoakConfig)), to
//! show that the soak's classification sees a panic wherever the engine catches it.
//!
//! Each injected part panics the first time it runs in a run (an `armed` flag per run, never a
//! static), then behaves, so a run that recovers still ends in success and only the caught panic
//! tells it apart. The tool is the exception: it always panics (the agents move on after one
//! failed tool result).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crewai::tool;
use crewai_core::events::PanicSite;
use crewai_llm::{Capabilities, Llm, LlmError, LlmRequest, LlmResponse, LlmStream, async_trait};

/// Where a run gets a panic of its own: one of the engine's [`PanicSite`]s, the ones a soak
/// run can put a panic into (the constants below; [`InjectedPanic::ALL`] lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InjectedPanic(PanicSite);

impl InjectedPanic {
    /// The agents' `word_count` tool is a `#[tool]` function that panics.
    pub const TOOL: InjectedPanic = InjectedPanic(PanicSite::Tool);
    /// The summary's guardrail panics on its first check.
    pub const GUARDRAIL: InjectedPanic = InjectedPanic(PanicSite::Guardrail);
    /// A listener on the crew's bus panics on the first event.
    pub const LISTENER: InjectedPanic = InjectedPanic(PanicSite::Listener);
    /// A crew before-tool hook panics on its first call.
    pub const HOOK: InjectedPanic = InjectedPanic(PanicSite::Hook);
    /// The crew's step callback panics on its first step.
    pub const STEP_CALLBACK: InjectedPanic = InjectedPanic(PanicSite::StepCallback);
    /// The crew's task callback panics on its first task.
    pub const TASK_CALLBACK: InjectedPanic = InjectedPanic(PanicSite::TaskCallback);
    /// The model client of the async `research` task panics on its first call: nothing inside
    /// the task catches that, so the task itself panics.
    pub const ASYNC_TASK: InjectedPanic = InjectedPanic(PanicSite::AsyncTask);

    /// Every injection point.
    pub const ALL: [InjectedPanic; 7] = [
        Self::TOOL,
        Self::GUARDRAIL,
        Self::LISTENER,
        Self::HOOK,
        Self::STEP_CALLBACK,
        Self::TASK_CALLBACK,
        Self::ASYNC_TASK,
    ];

    /// The site the engine reports the panic at.
    pub fn site(self) -> PanicSite {
        self.0
    }

    /// The text every injected panic carries, so a test can tell it from a real one.
    pub fn message(self) -> String {
        format!("injected {} panic", self.site())
    }
}

/// Fires once: `true` the first time, `false` after.
#[derive(Debug, Default)]
pub(crate) struct Armed(AtomicBool);

impl Armed {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Armed(AtomicBool::new(true)))
    }

    pub(crate) fn fire(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// Counts the words in a text (or would: this one always panics, for
/// [`InjectedPanic::TOOL`]).
///
/// # Arguments
/// * `text` - The text whose words to count.
#[tool(name = "word_count")]
pub(crate) fn panicking_word_count(text: String) -> usize {
    panic!(
        "{} (asked to count {} bytes)",
        InjectedPanic::TOOL.message(),
        text.len()
    )
}

/// A model client that panics on its first call, then is `inner`.
pub(crate) struct PanickingLlm {
    pub(crate) inner: Arc<dyn Llm>,
    pub(crate) armed: Arc<Armed>,
}

impl PanickingLlm {
    fn maybe_panic(&self) {
        if self.armed.fire() {
            panic!("{}", InjectedPanic::ASYNC_TASK.message());
        }
    }
}

#[async_trait]
impl Llm for PanickingLlm {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.maybe_panic();
        self.inner.call(request).await
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        self.maybe_panic();
        self.inner.stream(request).await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}
