//! Text embeddings: the [`Embedder`] trait memory and knowledge build on, clients for OpenAI,
//! Azure OpenAI, Gemini, Ollama and any OpenAI-compatible server, and [`HashEmbedder`], a
//! deterministic local embedder for offline use and tests.
//!
//! [`EmbedderConfig`] reads CrewAI's `embedder:` form, so existing crews keep their settings:
//!
//! ```
//! use crewai_llm::embeddings::{EmbedderConfig, build_embedder};
//! let config: EmbedderConfig = yaml_serde::from_str(
//!     "provider: ollama\nconfig:\n  model_name: nomic-embed-text\n  url: http://localhost:11434",
//! ).unwrap();
//! let embedder = build_embedder(&config).unwrap();
//! assert_eq!(embedder.model(), "nomic-embed-text");
//! assert_eq!(embedder.dimensions(), Some(768));
//! ```
//!
//! Every client sends at most its provider's batch size per request, with a connect timeout and
//! a total timeout, and [`build_embedder`] retries rate limits and server errors with backoff.
//!
//! The modules: `client` (the HTTP client the remote embedders share), one per provider's API
//! (`openai`, `gemini`, `ollama`), `hash` (the local embedder), `retry` and `config` (the
//! `embedder:` settings and [`build_embedder`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::LlmError;

mod client;
mod config;
mod gemini;
mod hash;
mod ollama;
mod openai;
mod retry;

pub use client::{EmbeddingApi, HttpEmbedder};
pub use config::{
    EmbedderConfig, EmbedderFactory, EmbedderSettings, LOCAL_EMBEDDER_PROVIDER, build_embedder,
    build_embedder_from, build_embedder_with, normalise_provider,
};
pub use gemini::{GEMINI_DEFAULT_MODEL, GeminiEmbedder, GeminiEmbeddings};
pub use hash::{HASH_DEFAULT_DIMENSIONS, HashEmbedder};
pub use ollama::{OLLAMA_DEFAULT_HOST, OLLAMA_DEFAULT_MODEL, OllamaEmbedder, OllamaEmbeddings};
pub use openai::{
    AZURE_DEFAULT_API_VERSION, OPENAI_BASE_URL, OPENAI_DEFAULT_MODEL, OpenAiEmbedder,
    OpenAiEmbeddings,
};
pub use retry::RetryEmbedder;

/// Turns texts into vectors.
///
/// ```
/// use crewai_llm::embeddings::{Embedder, HashEmbedder};
/// # futures::executor::block_on(async {
/// let embedder = HashEmbedder::new(64);
/// let vectors = embedder.embed(&["a red apple".to_string(), "a green pear".to_string()]).await.unwrap();
/// assert_eq!(vectors.len(), 2);
/// assert_eq!(vectors[0].len(), 64);
/// # });
/// ```
#[async_trait]
pub trait Embedder: Send + Sync {
    /// One vector per text, in order. An empty slice makes no request.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError>;
    /// [`embed`](Embedder::embed) with the input tokens the texts cost, for usage and budgets.
    /// Embedders that know the count (a provider's reply, an in-process tokenizer) override it;
    /// the default says nothing (`None`) and the caller estimates.
    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        Ok(Embedded {
            vectors: self.embed(texts).await?,
            prompt_tokens: None,
        })
    }
    /// The vectors' length, when known before the first call.
    fn dimensions(&self) -> Option<usize>;
    /// The embedding model's name.
    fn model(&self) -> &str;
}

/// The vectors of one [`Embedder::embed_counted`] call and what they cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens as the provider reported them (or the in-process model counted them);
    /// `None` when the embedder does not know.
    pub prompt_tokens: Option<u64>,
}

/// The tokens `texts` are estimated to cost `model` when an embedder does not report them,
/// counted as prompts are for budgets ([`estimate_text_tokens`](crate::tokens::estimate_text_tokens)).
pub fn estimate_embedding_tokens(model: &str, texts: &[String]) -> u64 {
    crate::tokens::estimate_text_tokens(model, texts.iter().map(String::as_str))
}

#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        (**self).embed(texts).await
    }
    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        (**self).embed_counted(texts).await
    }
    fn dimensions(&self) -> Option<usize> {
        (**self).dimensions()
    }
    fn model(&self) -> &str {
        (**self).model()
    }
}

/// The total time one embedding request may take unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The vector sizes of well-known models (at their default size).
pub fn known_dimensions(model: &str) -> Option<usize> {
    let name = model.rsplit('/').next().unwrap_or(model);
    Some(match name {
        "text-embedding-3-small" | "text-embedding-ada-002" => 1536,
        "text-embedding-3-large" | "gemini-embedding-001" => 3072,
        "text-embedding-004" | "embedding-001" | "nomic-embed-text" => 768,
        "mxbai-embed-large" => 1024,
        "all-minilm" | "all-minilm-l6-v2" | "all-MiniLM-L6-v2" => 384,
        _ => return None,
    })
}
