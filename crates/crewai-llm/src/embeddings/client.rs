//! The HTTP client every remote embedder is: one endpoint, its headers, the model, and the
//! [`EmbeddingApi`] that writes each batch's request and reads its reply.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{DEFAULT_TIMEOUT, Embedded, Embedder, known_dimensions};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, Transport};

/// What differs between the embedding APIs: how many texts one request takes, the request body
/// of a batch and where the vectors are in the reply. Implemented by [`super::OpenAiEmbeddings`],
/// [`super::GeminiEmbeddings`] and [`super::OllamaEmbeddings`].
pub trait EmbeddingApi: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The most texts one request may carry.
    const BATCH: usize;

    /// The request body for `batch`.
    fn body(&self, model: &str, dimensions: Option<usize>, batch: &[String]) -> Value;

    /// The vectors of a reply, in the order of the texts sent. A reply without them is an
    /// [`LlmError::MalformedResponse`] of `provider`.
    fn vectors(&self, provider: &str, reply: &Value) -> Result<Vec<Vec<f32>>, LlmError>;

    /// The input tokens a reply says the batch cost, when the API reports them.
    fn prompt_tokens(&self, _reply: &Value) -> Option<u64> {
        None
    }
}

/// A remote embedder: posts batches of texts to one endpoint in the JSON of its [`EmbeddingApi`].
/// Build one with [`super::OpenAiEmbedder::openai`] (and `compatible`, `azure`),
/// [`super::GeminiEmbedder::new`] or [`super::OllamaEmbedder::new`].
#[derive(Debug, Clone)]
pub struct HttpEmbedder<A> {
    api: A,
    http: HttpClient,
    url: String,
    headers: Vec<(String, String)>,
    model: String,
    dimensions: Option<usize>,
}

fn http_client(context: ErrorContext, timeout: Duration) -> Result<HttpClient, LlmError> {
    let mut timeouts = LlmConfig::new(context.model.clone());
    timeouts.timeout = Some(timeout.as_secs_f64());
    HttpClient::new(context, &timeouts)
}

impl<A: EmbeddingApi> HttpEmbedder<A> {
    /// A client of `provider`'s `model` at `url`; `key_hint` names where its key comes from (shown
    /// on authentication errors).
    pub(super) fn with_api(
        api: A,
        provider: &str,
        model: &str,
        key_hint: &str,
        url: String,
        headers: Vec<(String, String)>,
    ) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "{provider} embeddings: no model given"
            )));
        }
        Ok(HttpEmbedder {
            api,
            http: http_client(
                ErrorContext::new(provider, model, key_hint),
                DEFAULT_TIMEOUT,
            )?,
            url,
            headers,
            model: model.to_string(),
            dimensions: None,
        })
    }

    pub(super) fn api_mut(&mut self) -> &mut A {
        &mut self.api
    }

    /// Asks for shorter vectors (models that support it, such as `text-embedding-3-*`).
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// The total time one request may take (local models can be slow to load).
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, LlmError> {
        self.http = http_client(self.http.context().clone(), timeout)?;
        Ok(self)
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

#[async_trait]
impl<A: EmbeddingApi> Embedder for HttpEmbedder<A> {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(self.embed_counted(texts).await?.vectors)
    }

    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        let provider = &self.http.context().provider;
        let mut all = Vec::with_capacity(texts.len());
        // Known only when every batch's reply says it.
        let mut tokens = Some(0u64);
        for batch in texts.chunks(A::BATCH) {
            let body = self.api.body(&self.model, self.dimensions, batch);
            let reply = self.http.post_json(&self.url, &self.headers, &body).await?;
            let vectors = self.api.vectors(provider, &reply)?;
            if vectors.len() != batch.len() {
                return Err(LlmError::malformed(
                    provider.as_str(),
                    format!(
                        "sent {} texts but got {} embeddings",
                        batch.len(),
                        vectors.len()
                    ),
                ));
            }
            all.extend(vectors);
            tokens = tokens
                .zip(self.api.prompt_tokens(&reply))
                .map(|(a, b)| a + b);
        }
        Ok(Embedded {
            vectors: all,
            prompt_tokens: tokens.filter(|_| !texts.is_empty()),
        })
    }

    fn dimensions(&self) -> Option<usize> {
        self.dimensions.or_else(|| known_dimensions(&self.model))
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// The array `field` of a reply, or the error that says it is missing.
pub(super) fn reply_array<'a>(
    provider: &str,
    reply: &'a Value,
    field: &str,
) -> Result<&'a [Value], LlmError> {
    reply
        .get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| LlmError::malformed(provider, format!("no `{field}` array in the reply")))
}

/// Reads a JSON array of numbers as a vector.
pub(super) fn vector(provider: &str, value: &Value) -> Result<Vec<f32>, LlmError> {
    let numbers = value
        .as_array()
        .ok_or_else(|| LlmError::malformed(provider, "an embedding is not an array of numbers"))?;
    numbers
        .iter()
        .map(|n| {
            n.as_f64().map(|f| f as f32).ok_or_else(|| {
                LlmError::malformed(provider, format!("an embedding holds a non-number: {n}"))
            })
        })
        .collect()
}
