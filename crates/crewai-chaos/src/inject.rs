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

/// Where a run gets a panic of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InjectedPanic {
    /// The agents' `word_count` tool is a `#[tool]` function that panics.
    Tool,
    /// The summary's guardrail panics on its first check.
    Guardrail,
    /// A listener on the crew's bus panics on the first event.
    Listener,
    /// A crew before-tool hook panics on its first call.
    Hook,
    /// The crew's step callback panics on its first step.
    StepCallback,
    /// The crew's task callback panics on its first task.
    TaskCallback,
    /// The model client of the async `research` task panics on its first call: nothing inside
    /// the task catches that, so the task itself panics.
    AsyncTask,
}

impl InjectedPanic {
    /// Every injection point.
    pub const ALL: [InjectedPanic; 7] = [
        InjectedPanic::Tool,
        InjectedPanic::Guardrail,
        InjectedPanic::Listener,
        InjectedPanic::Hook,
        InjectedPanic::StepCallback,
        InjectedPanic::TaskCallback,
        InjectedPanic::AsyncTask,
    ];

    /// The site the engine reports the panic at.
    pub fn site(self) -> PanicSite {
        match self {
            InjectedPanic::Tool => PanicSite::Tool,
            InjectedPanic::Guardrail => PanicSite::Guardrail,
            InjectedPanic::Listener => PanicSite::Listener,
            InjectedPanic::Hook => PanicSite::Hook,
            InjectedPanic::StepCallback => PanicSite::StepCallback,
            InjectedPanic::TaskCallback => PanicSite::TaskCallback,
            InjectedPanic::AsyncTask => PanicSite::AsyncTask,
        }
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
/// [`InjectedPanic::Tool`]).
///
/// # Arguments
/// * `text` - The text whose words to count.
#[tool(name = "word_count")]
pub(crate) fn panicking_word_count(text: String) -> usize {
    panic!(
        "{} (asked to count {} bytes)",
        InjectedPanic::Tool.message(),
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
            panic!("{}", InjectedPanic::AsyncTask.message());
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
