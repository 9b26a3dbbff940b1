//! Fallback models: an ordered list tried when a call still fails with a retryable error after
//! its own retries (CrewAI has none; users asked for it in crewAI #3032).

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::LlmError;
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse};

/// Tries each model in order until one answers.
///
/// ```
/// # futures::executor::block_on(async {
/// use std::sync::Arc;
/// use crewai_llm::{FallbackLlm, Llm, LlmError, LlmRequest, Message, ScriptedLlm};
/// let down = ScriptedLlm::new("primary").then_error(LlmError::Connection { provider: "x".into(), message: "refused".into() });
/// let backup = ScriptedLlm::new("backup").then_text("from the backup");
/// let llm = FallbackLlm::new(vec![Arc::new(down), Arc::new(backup)]).unwrap();
/// let reply = llm.call(LlmRequest::new(vec![Message::user("hi")])).await.unwrap();
/// assert_eq!(reply.content.as_deref(), Some("from the backup"));
/// # });
/// ```
pub struct FallbackLlm {
    chain: Vec<Arc<dyn Llm>>,
}

impl FallbackLlm {
    /// `chain[0]` is the primary model; the rest are tried in order.
    pub fn new(chain: Vec<Arc<dyn Llm>>) -> Result<Self, LlmError> {
        if chain.is_empty() {
            return Err(LlmError::Config(
                "a fallback chain needs at least one model".into(),
            ));
        }
        Ok(FallbackLlm { chain })
    }

    fn primary(&self) -> &Arc<dyn Llm> {
        &self.chain[0]
    }

    fn label(llm: &dyn Llm) -> String {
        format!("{}/{}", llm.provider(), llm.model())
    }

    async fn run<T, F>(&self, attempt: F) -> Result<T, LlmError>
    where
        F: for<'a> Fn(&'a Arc<dyn Llm>) -> futures::future::BoxFuture<'a, Result<T, LlmError>>
            + Send
            + Sync,
        T: Send,
    {
        let mut attempts = Vec::new();
        let mut last = None;
        for llm in &self.chain {
            match attempt(llm).await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_retryable() => {
                    tracing::warn!(model = %Self::label(llm.as_ref()), %error, "model failed; trying the next fallback");
                    attempts.push(format!("{}: {error}", Self::label(llm.as_ref())));
                    last = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        match last {
            Some(last) if self.chain.len() > 1 => Err(LlmError::AllFallbacksFailed {
                last: Box::new(last),
                attempts,
            }),
            Some(last) => Err(last),
            None => Err(LlmError::Config(
                "a fallback chain needs at least one model".into(),
            )),
        }
    }
}

#[async_trait]
impl Llm for FallbackLlm {
    fn model(&self) -> &str {
        self.primary().model()
    }
    fn provider(&self) -> &str {
        self.primary().provider()
    }
    fn capabilities(&self) -> Capabilities {
        self.primary().capabilities()
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.run(|llm| {
            let request = request.clone();
            Box::pin(async move { llm.call(request).await })
        })
        .await
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        self.run(|llm| {
            let request = request.clone();
            Box::pin(async move { llm.stream(request).await })
        })
        .await
    }
}
