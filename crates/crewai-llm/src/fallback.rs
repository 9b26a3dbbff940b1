//! Fallback models: an ordered list tried when a call still fails with a retryable error after
//! its own retries (CrewAI has none; users asked for it in crewAI #3032).

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::LlmError;
use crate::layer::{LlmLayer, Next};
use crate::traits::{Llm, LlmStream};
use crate::types::{LlmRequest, LlmResponse};

/// The fallback layer: when the rest of the stack (the primary model, with its own rate limit
/// and retries below this layer) fails with a retryable error, each fallback model is tried in
/// order until one answers. A fallback is a whole model, usually a stack of its own.
///
/// ```
/// # futures::executor::block_on(async {
/// use std::sync::Arc;
/// use crewai_llm::{FallbackLayer, LayeredLlm, Llm, LlmError, LlmRequest, Message, ScriptedLlm};
/// let down = ScriptedLlm::new("primary").then_error(LlmError::connection("x", "refused"));
/// let backup = ScriptedLlm::new("backup").then_text("from the backup");
/// let llm = LayeredLlm::builder(Arc::new(down))
///     .layer(FallbackLayer::new(vec![Arc::new(backup)]))
///     .build();
/// let reply = llm.call(LlmRequest::new(vec![Message::user("hi")])).await.unwrap();
/// assert_eq!(reply.content.as_deref(), Some("from the backup"));
/// assert_eq!(llm.model(), "primary", "the stack is named by its primary model");
/// # });
/// ```
#[derive(Clone)]
pub struct FallbackLayer {
    fallbacks: Vec<Arc<dyn Llm>>,
}

impl std::fmt::Debug for FallbackLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<String> = self
            .fallbacks
            .iter()
            .map(|llm| label(llm.as_ref()))
            .collect();
        f.debug_struct("FallbackLayer")
            .field("fallbacks", &labels)
            .finish()
    }
}

fn label(llm: &dyn Llm) -> String {
    format!("{}/{}", llm.provider(), llm.model())
}

/// The failures so far, for [`LlmError::AllFallbacksFailed`].
#[derive(Default)]
struct Attempts {
    failures: Vec<String>,
}

impl Attempts {
    /// Keeps a retryable failure and says to go on; hands back any other error.
    fn failed(&mut self, llm: &dyn Llm, error: LlmError) -> Result<LlmError, LlmError> {
        if !error.is_retryable() {
            return Err(error);
        }
        let label = label(llm);
        let text = crate::error::error_chain(&error);
        tracing::warn!(model = %label, error = %text, "model failed; trying the next fallback");
        self.failures.push(format!("{label}: {text}"));
        Ok(error)
    }

    fn exhausted(self, last: LlmError) -> LlmError {
        LlmError::AllFallbacksFailed {
            last: Box::new(last),
            attempts: self.failures,
        }
    }
}

impl FallbackLayer {
    /// Tries `fallbacks`, in order, after the model below this layer.
    pub fn new(fallbacks: Vec<Arc<dyn Llm>>) -> Self {
        FallbackLayer { fallbacks }
    }

    /// The fallback models, in the order they are tried.
    pub fn fallbacks(&self) -> &[Arc<dyn Llm>] {
        &self.fallbacks
    }

    /// `first` (the call of `primary`, the model below this layer), then `attempt` of each
    /// fallback in turn, until one succeeds or fails with an error another model would not mend.
    async fn in_turn<T, First, Attempt>(
        &self,
        primary: &dyn Llm,
        first: First,
        attempt: impl Fn(Arc<dyn Llm>) -> Attempt + Send,
    ) -> Result<T, LlmError>
    where
        First: Future<Output = Result<T, LlmError>> + Send,
        Attempt: Future<Output = Result<T, LlmError>> + Send,
    {
        if self.fallbacks.is_empty() {
            return first.await;
        }
        let mut attempts = Attempts::default();
        let mut last = match first.await {
            Ok(value) => return Ok(value),
            Err(error) => attempts.failed(primary, error)?,
        };
        for llm in &self.fallbacks {
            last = match attempt(llm.clone()).await {
                Ok(value) => return Ok(value),
                Err(error) => attempts.failed(llm.as_ref(), error)?,
            };
        }
        Err(attempts.exhausted(last))
    }
}

#[async_trait]
impl LlmLayer for FallbackLayer {
    fn name(&self) -> &str {
        "fallback"
    }

    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let (primary, first) = (next.model(), next.call(request.clone()));
        let attempt = |llm: Arc<dyn Llm>| {
            let request = request.clone();
            async move { llm.call(request).await }
        };
        self.in_turn(primary, first, attempt).await
    }

    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let (primary, first) = (next.model(), next.stream(request.clone()));
        let open = |llm: Arc<dyn Llm>| {
            let request = request.clone();
            async move { llm.stream(request).await }
        };
        self.in_turn(primary, first, open).await
    }
}
