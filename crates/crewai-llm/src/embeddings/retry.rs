//! [`RetryEmbedder`]: an embedder's retryable failures tried again under a [`RetryPolicy`].

use std::sync::Arc;

use async_trait::async_trait;

use super::{Embedded, Embedder};
use crate::error::LlmError;
use crate::retry::RetryPolicy;

/// Retries an embedder's retryable failures (rate limits, server errors, timeouts) under a
/// [`RetryPolicy`].
pub struct RetryEmbedder {
    inner: Arc<dyn Embedder>,
    policy: RetryPolicy,
}

impl RetryEmbedder {
    pub fn new(inner: Arc<dyn Embedder>, policy: RetryPolicy) -> Self {
        RetryEmbedder { inner, policy }
    }
}

#[async_trait]
impl Embedder for RetryEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let model = self.inner.model();
        self.policy
            .run(&format!("embeddings ({model})"), model, || {
                self.inner.embed(texts)
            })
            .await
    }

    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        let model = self.inner.model();
        self.policy
            .run(&format!("embeddings ({model})"), model, || {
                self.inner.embed_counted(texts)
            })
            .await
    }

    fn dimensions(&self) -> Option<usize> {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}
