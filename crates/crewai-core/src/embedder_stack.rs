//! The run's accounting around every embedding call, as [`crate::llm_stack`] is around every
//! model call: memory's saves and recalls, knowledge's searches and its ingestion at kickoff go
//! through [`metered`], so their tokens count in the run's usage, per agent (or owner), task and
//! embedding model, and its budget refuses a call that would go over it.

use std::sync::Arc;

use async_trait::async_trait;
use crewai_llm::embeddings::{Embedded, Embedder, estimate_embedding_tokens};
use crewai_llm::{LlmError, Usage};
use tokio_util::sync::CancellationToken;

use crate::llm_stack::CallScope;
use crate::usage::UsageTracker;

/// Where a metered embedder's calls are counted and what stops them.
pub(crate) trait Meter: Send + Sync {
    /// The run's ledger and budget.
    fn usage(&self) -> &UsageTracker;
    fn cancellation(&self) -> &CancellationToken;
    /// Counts one call of `model`.
    fn record(&self, model: &str, usage: &Usage);
}

impl Meter for CallScope {
    fn usage(&self) -> &UsageTracker {
        CallScope::usage(self)
    }

    fn cancellation(&self) -> &CancellationToken {
        CallScope::cancellation(self)
    }

    fn record(&self, model: &str, usage: &Usage) {
        CallScope::record(self, model, usage);
    }
}

/// A run's embeddings that no agent's execution makes (the knowledge ingested at kickoff),
/// counted under `owner`.
pub(crate) struct RunMeter {
    pub(crate) usage: UsageTracker,
    pub(crate) owner: String,
    pub(crate) cancellation: CancellationToken,
}

impl Meter for RunMeter {
    fn usage(&self) -> &UsageTracker {
        &self.usage
    }

    fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    fn record(&self, model: &str, usage: &Usage) {
        self.usage.record_call(model, &self.owner, None, usage);
    }
}

/// `embedder` counted by `meter`: its ledger, budget and cancellation (an agent's call scope
/// also names the agent and task).
pub(crate) fn metered<M: Meter + 'static>(
    embedder: Arc<dyn Embedder>,
    meter: Arc<M>,
) -> Arc<dyn Embedder> {
    Arc::new(MeteredEmbedder {
        inner: embedder,
        meter,
    })
}

struct MeteredEmbedder {
    inner: Arc<dyn Embedder>,
    meter: Arc<dyn Meter>,
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
        let estimate = estimate_embedding_tokens(model, texts);
        self.meter
            .usage()
            .check_budget(model, estimate)
            .map_err(|exceeded| LlmError::BudgetExceeded(Box::new(exceeded)))?;
        let embedded = tokio::select! {
            biased;
            _ = self.meter.cancellation().cancelled() => Err(LlmError::Cancelled),
            embedded = self.inner.embed_counted(texts) => embedded,
        }?;
        let tokens = embedded.prompt_tokens.unwrap_or(estimate);
        self.meter.record(
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
