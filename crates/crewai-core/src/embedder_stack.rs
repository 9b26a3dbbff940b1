//! The run's accounting around every embedding call, as [`crate::llm_stack`] is around every
//! model call: memory's saves and recalls (and anything else a run embeds with, such as
//! knowledge) go through [`metered`], so their tokens count in the run's usage, per agent, task
//! and embedding model, and its budget refuses a call that would go over it.

use std::sync::Arc;

use async_trait::async_trait;
use crewai_llm::embeddings::{Embedded, Embedder, estimate_embedding_tokens};
use crewai_llm::{LlmError, Usage};

use crate::llm_stack::CallScope;

/// `embedder` counted under `scope`: its agent, task, ledger, budget and cancellation.
pub(crate) fn metered(embedder: Arc<dyn Embedder>, scope: Arc<CallScope>) -> Arc<dyn Embedder> {
    Arc::new(MeteredEmbedder {
        inner: embedder,
        scope,
    })
}

struct MeteredEmbedder {
    inner: Arc<dyn Embedder>,
    scope: Arc<CallScope>,
}

#[async_trait]
impl Embedder for MeteredEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(self.embed_counted(texts).await?.vectors)
    }

    /// Checked against the budget by the texts' estimated tokens before it is made; recorded
    /// with the tokens the embedder reports (the estimate when it reports none).
    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        if texts.is_empty() {
            return self.inner.embed_counted(texts).await;
        }
        let model = self.inner.model();
        let estimate = estimate_embedding_tokens(texts);
        self.scope
            .usage()
            .check_budget(model, estimate)
            .map_err(|exceeded| LlmError::BudgetExceeded(Box::new(exceeded)))?;
        let embedded = tokio::select! {
            biased;
            _ = self.scope.cancellation().cancelled() => Err(LlmError::Cancelled),
            embedded = self.inner.embed_counted(texts) => embedded,
        }?;
        let tokens = embedded.prompt_tokens.unwrap_or(estimate);
        self.scope.record(
            model,
            &Usage {
                prompt_tokens: tokens,
                total_tokens: tokens,
                successful_requests: 1,
                ..Usage::default()
            },
        );
        Ok(Embedded {
            prompt_tokens: Some(tokens),
            ..embedded
        })
    }

    fn dimensions(&self) -> Option<usize> {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}
