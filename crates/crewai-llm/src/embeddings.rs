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

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::adapter_support;
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, Transport};
use crate::retry::RetryPolicy;
use crate::router::EnvLookup;

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
    /// The vectors' length, when known before the first call.
    fn dimensions(&self) -> Option<usize>;
    /// The embedding model's name.
    fn model(&self) -> &str;
}

#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        (**self).embed(texts).await
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
        "all-minilm" => 384,
        _ => return None,
    })
}

fn http_client(
    provider: &str,
    model: &str,
    key_hint: &str,
    timeout: Duration,
) -> Result<HttpClient, LlmError> {
    let mut timeouts = LlmConfig::new(model);
    timeouts.timeout = Some(timeout.as_secs_f64());
    HttpClient::new(ErrorContext::new(provider, model, key_hint), &timeouts)
}

fn malformed(provider: &str, message: impl Into<String>) -> LlmError {
    LlmError::MalformedResponse {
        provider: provider.to_string(),
        message: message.into(),
    }
}

/// Reads a JSON array of numbers as a vector.
fn vector(provider: &str, value: &Value) -> Result<Vec<f32>, LlmError> {
    let numbers = value
        .as_array()
        .ok_or_else(|| malformed(provider, "an embedding is not an array of numbers"))?;
    numbers
        .iter()
        .map(|n| {
            n.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| malformed(provider, format!("an embedding holds a non-number: {n}")))
        })
        .collect()
}

fn check_count(provider: &str, sent: usize, vectors: &[Vec<f32>]) -> Result<(), LlmError> {
    if vectors.len() == sent {
        Ok(())
    } else {
        Err(malformed(
            provider,
            format!("sent {sent} texts but got {} embeddings", vectors.len()),
        ))
    }
}

/// OpenAI's `/embeddings` endpoint, and the servers that copy it (Azure OpenAI deployments,
/// OpenRouter, vLLM, LM Studio, ...).
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    provider: String,
    http: HttpClient,
    url: String,
    headers: Vec<(String, String)>,
    model: String,
    /// Azure takes the model from the deployment in the URL.
    send_model: bool,
    dimensions: Option<usize>,
}

/// OpenAI's own endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The default OpenAI embedding model (CrewAI's knowledge default).
pub const OPENAI_DEFAULT_MODEL: &str = "text-embedding-3-small";
/// The Azure OpenAI API version used when none is configured.
pub const AZURE_DEFAULT_API_VERSION: &str = "2024-10-21";
/// OpenAI accepts at most this many inputs per request.
const OPENAI_BATCH: usize = 2048;

impl OpenAiEmbedder {
    /// OpenAI, or another server at `base_url` (the part before `/embeddings`, such as
    /// `https://api.openai.com/v1`).
    pub fn openai(model: &str, api_key: String, base_url: Option<&str>) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(base_url.unwrap_or(OPENAI_BASE_URL));
        Self::build(
            "openai",
            model,
            format!("{base}/embeddings"),
            vec![bearer(&api_key)],
            true,
            "OPENAI_API_KEY",
        )
    }

    /// Any OpenAI-compatible server; `api_key` is sent as a bearer token when given.
    pub fn compatible(
        provider: &str,
        model: &str,
        base_url: &str,
        api_key: Option<String>,
    ) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(base_url);
        let headers = api_key.iter().map(|k| bearer(k)).collect();
        Self::build(
            provider,
            model,
            format!("{base}/embeddings"),
            headers,
            true,
            "api_key",
        )
    }

    /// An Azure OpenAI deployment: `{endpoint}/openai/deployments/{deployment}/embeddings`.
    pub fn azure(
        deployment: &str,
        endpoint: &str,
        api_version: &str,
        api_key: String,
    ) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(endpoint);
        let base = base.strip_suffix("/openai").unwrap_or(&base);
        let url =
            format!("{base}/openai/deployments/{deployment}/embeddings?api-version={api_version}");
        Self::build(
            "azure",
            deployment,
            url,
            vec![("api-key".to_string(), api_key)],
            false,
            "AZURE_API_KEY",
        )
    }

    fn build(
        provider: &str,
        model: &str,
        url: String,
        headers: Vec<(String, String)>,
        send_model: bool,
        key_hint: &str,
    ) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "{provider} embeddings: no model given"
            )));
        }
        Ok(OpenAiEmbedder {
            provider: provider.to_string(),
            http: http_client(provider, model, key_hint, DEFAULT_TIMEOUT)?,
            url,
            headers,
            model: model.to_string(),
            send_model,
            dimensions: None,
        })
    }

    /// Asks for shorter vectors (`text-embedding-3-*` support it).
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// The total time one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, LlmError> {
        let context = self.http.context().clone();
        self.http = http_client(
            &context.provider,
            &context.model,
            &context.key_hint,
            timeout,
        )?;
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

fn bearer(key: &str) -> (String, String) {
    ("authorization".to_string(), format!("Bearer {key}"))
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut all = Vec::with_capacity(texts.len());
        for batch in texts.chunks(OPENAI_BATCH) {
            let mut body = json!({"input": batch, "encoding_format": "float"});
            if self.send_model {
                body["model"] = json!(self.model);
            }
            if let Some(dimensions) = self.dimensions {
                body["dimensions"] = json!(dimensions);
            }
            let reply = self.http.post_json(&self.url, &self.headers, &body).await?;
            let data = reply
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed(&self.provider, "no `data` array in the reply"))?;
            let mut indexed = data
                .iter()
                .enumerate()
                .map(|(position, item)| {
                    let index = item
                        .get("index")
                        .and_then(Value::as_u64)
                        .map_or(position, |i| i as usize);
                    Ok((
                        index,
                        vector(
                            &self.provider,
                            item.get("embedding").unwrap_or(&Value::Null),
                        )?,
                    ))
                })
                .collect::<Result<Vec<_>, LlmError>>()?;
            // The order of `data` is not promised; `index` is.
            indexed.sort_by_key(|(index, _)| *index);
            let vectors: Vec<Vec<f32>> = indexed.into_iter().map(|(_, v)| v).collect();
            check_count(&self.provider, batch.len(), &vectors)?;
            all.extend(vectors);
        }
        Ok(all)
    }

    fn dimensions(&self) -> Option<usize> {
        self.dimensions.or_else(|| known_dimensions(&self.model))
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// Gemini's `:batchEmbedContents`.
#[derive(Debug, Clone)]
pub struct GeminiEmbedder {
    http: HttpClient,
    url: String,
    api_key: String,
    model: String,
    dimensions: Option<usize>,
    task_type: Option<String>,
}

/// The default Gemini embedding model.
pub const GEMINI_DEFAULT_MODEL: &str = "gemini-embedding-001";
/// Gemini takes at most this many texts per batch request.
const GEMINI_BATCH: usize = 100;

impl GeminiEmbedder {
    /// `model` with or without `models/`; `base_url` defaults to Google's endpoint.
    pub fn new(model: &str, api_key: String, base_url: Option<&str>) -> Result<Self, LlmError> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if model.trim().is_empty() {
            return Err(LlmError::Config("gemini embeddings: no model given".into()));
        }
        let base = adapter_support::trim_base(base_url.unwrap_or(crate::gemini::DEFAULT_BASE_URL));
        let versioned = ["/v1beta", "/v1", "/v1alpha"]
            .iter()
            .any(|v| base.ends_with(v));
        let root = if versioned {
            base
        } else {
            format!("{base}/v1beta")
        };
        Ok(GeminiEmbedder {
            http: http_client(
                "gemini",
                model,
                "GEMINI_API_KEY or GOOGLE_API_KEY",
                DEFAULT_TIMEOUT,
            )?,
            url: format!("{root}/models/{model}:batchEmbedContents"),
            api_key,
            model: model.to_string(),
            dimensions: None,
            task_type: None,
        })
    }

    /// Asks for shorter vectors (`outputDimensionality`).
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// What the vectors are for (`RETRIEVAL_DOCUMENT`, `RETRIEVAL_QUERY`, `SEMANTIC_SIMILARITY`, ...).
    pub fn with_task_type(mut self, task_type: impl Into<String>) -> Self {
        self.task_type = Some(task_type.into());
        self
    }

    /// The total time one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, LlmError> {
        self.http = http_client(
            "gemini",
            &self.model,
            "GEMINI_API_KEY or GOOGLE_API_KEY",
            timeout,
        )?;
        Ok(self)
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }
}

#[async_trait]
impl Embedder for GeminiEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let headers = vec![("x-goog-api-key".to_string(), self.api_key.clone())];
        let mut all = Vec::with_capacity(texts.len());
        for batch in texts.chunks(GEMINI_BATCH) {
            let requests: Vec<Value> = batch
                .iter()
                .map(|text| {
                    let mut request = json!({"model": format!("models/{}", self.model), "content": {"parts": [{"text": text}]}});
                    if let Some(dimensions) = self.dimensions {
                        request["outputDimensionality"] = json!(dimensions);
                    }
                    if let Some(task) = &self.task_type {
                        request["taskType"] = json!(task);
                    }
                    request
                })
                .collect();
            let reply = self
                .http
                .post_json(&self.url, &headers, &json!({"requests": requests}))
                .await?;
            let embeddings = reply
                .get("embeddings")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed("gemini", "no `embeddings` array in the reply"))?;
            let vectors = embeddings
                .iter()
                .map(|e| vector("gemini", e.get("values").unwrap_or(&Value::Null)))
                .collect::<Result<Vec<_>, _>>()?;
            check_count("gemini", batch.len(), &vectors)?;
            all.extend(vectors);
        }
        Ok(all)
    }

    fn dimensions(&self) -> Option<usize> {
        self.dimensions.or_else(|| known_dimensions(&self.model))
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// Ollama's `/api/embed`.
#[derive(Debug, Clone)]
pub struct OllamaEmbedder {
    http: HttpClient,
    url: String,
    model: String,
    dimensions: Option<usize>,
}

/// The default Ollama embedding model.
pub const OLLAMA_DEFAULT_MODEL: &str = "nomic-embed-text";
/// Where Ollama listens unless `OLLAMA_HOST` says otherwise.
pub const OLLAMA_DEFAULT_HOST: &str = "http://localhost:11434";
/// Texts per request, to keep each one well inside the timeout.
const OLLAMA_BATCH: usize = 256;

impl OllamaEmbedder {
    /// `host` like `http://localhost:11434` (a scheme-less `0.0.0.0:11434`, as `OLLAMA_HOST`
    /// often holds, and a trailing `/api` or `/v1` are accepted).
    pub fn new(model: &str, host: &str) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config("ollama embeddings: no model given".into()));
        }
        let host = if host.contains("://") {
            host.to_string()
        } else {
            format!("http://{host}")
        };
        let host = adapter_support::trim_base(&host);
        let host = ["/api/embed", "/api/embeddings", "/api", "/v1"]
            .iter()
            .find_map(|s| host.strip_suffix(s))
            .unwrap_or(&host);
        Ok(OllamaEmbedder {
            http: http_client("ollama", model, "OLLAMA_API_KEY", DEFAULT_TIMEOUT)?,
            url: format!("{host}/api/embed"),
            model: model.to_string(),
            dimensions: None,
        })
    }

    /// Asks for shorter vectors (models that support it).
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// The total time one request may take (local models can be slow to load).
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, LlmError> {
        self.http = http_client("ollama", &self.model, "OLLAMA_API_KEY", timeout)?;
        Ok(self)
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }
}

#[async_trait]
impl Embedder for OllamaEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut all = Vec::with_capacity(texts.len());
        for batch in texts.chunks(OLLAMA_BATCH) {
            let mut body = json!({"model": self.model, "input": batch});
            if let Some(dimensions) = self.dimensions {
                body["dimensions"] = json!(dimensions);
            }
            let reply = self.http.post_json(&self.url, &[], &body).await?;
            let embeddings = reply
                .get("embeddings")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed("ollama", "no `embeddings` array in the reply"))?;
            let vectors = embeddings
                .iter()
                .map(|e| vector("ollama", e))
                .collect::<Result<Vec<_>, _>>()?;
            check_count("ollama", batch.len(), &vectors)?;
            all.extend(vectors);
        }
        Ok(all)
    }

    fn dimensions(&self) -> Option<usize> {
        self.dimensions.or_else(|| known_dimensions(&self.model))
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// A local, deterministic embedder: feature hashing of words and their character trigrams into
/// a fixed-size vector, normalised to unit length.
///
/// Texts that share words and word pieces get similar vectors, with no model and no network; good
/// for tests, offline runs and small keyword-heavy knowledge bases. It does not understand
/// meaning the way a trained model does.
///
/// ```
/// use crewai_llm::embeddings::{Embedder, HashEmbedder};
/// # futures::executor::block_on(async {
/// let e = HashEmbedder::new(256);
/// let v = e.embed(&["rust crates".into(), "Rust crate".into(), "banana bread".into()]).await.unwrap();
/// let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
/// assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashEmbedder {
    dimensions: usize,
}

/// The [`HashEmbedder`]'s size unless configured.
pub const HASH_DEFAULT_DIMENSIONS: usize = 256;

impl HashEmbedder {
    /// An embedder producing `dimensions`-long vectors (at least 1).
    pub fn new(dimensions: usize) -> Self {
        HashEmbedder {
            dimensions: dimensions.max(1),
        }
    }

    /// The vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut out = vec![0.0f32; self.dimensions];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add_feature(&mut out, word.as_bytes(), 1.0);
            let padded: Vec<char> = format!("<{word}>").chars().collect();
            for gram in padded.windows(3) {
                let gram: String = gram.iter().collect();
                self.add_feature(&mut out, gram.as_bytes(), 0.5);
            }
        }
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        }
        out
    }

    fn add_feature(&self, out: &mut [f32], feature: &[u8], weight: f32) {
        let hash = fnv1a(feature);
        let slot = (hash % self.dimensions as u64) as usize;
        // The sign bit keeps collisions from only ever adding up.
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        out[slot] += sign * weight;
    }
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder::new(HASH_DEFAULT_DIMENSIONS)
    }
}

/// FNV-1a, 64 bits: stable across runs, platforms and versions (unlike std's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[async_trait]
impl Embedder for HashEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }

    fn dimensions(&self) -> Option<usize> {
        Some(self.dimensions)
    }

    fn model(&self) -> &str {
        "feature-hash"
    }
}

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

    fn dimensions(&self) -> Option<usize> {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}

/// Which embedder to build, in CrewAI's form: `{provider: openai, config: {model_name: ..}}`.
///
/// Providers: `openai`, `azure`, `google-generativeai` (also `gemini`, `google`), `ollama`,
/// `openai-compatible` (needs `base_url`), `openrouter`, and `hash` (the local [`HashEmbedder`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedderConfig {
    pub provider: String,
    #[serde(default)]
    pub config: EmbedderSettings,
}

/// The settings inside [`EmbedderConfig`], with CrewAI's key names accepted as aliases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedderSettings {
    #[serde(default, alias = "model_name", skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The server (`api_base`, `url` and `host` are accepted too: CrewAI's Ollama reads `url`).
    #[serde(
        default,
        alias = "api_base",
        alias = "url",
        alias = "host",
        skip_serializing_if = "Option::is_none"
    )]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    /// Azure's API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Azure's deployment (defaults to the model name).
    #[serde(
        default,
        alias = "deployment_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub deployment: Option<String>,
    /// Gemini's task type (`RETRIEVAL_DOCUMENT`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    /// Seconds one request may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retries of a retryable failure (2 unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
}

impl EmbedderConfig {
    /// A config for `provider` with default settings.
    pub fn new(provider: impl Into<String>) -> Self {
        EmbedderConfig {
            provider: provider.into(),
            config: EmbedderSettings::default(),
        }
    }

    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.config.model = Some(model.into());
        self
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.config.api_key = Some(key.into());
        self
    }

    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.config.base_url = Some(url.into());
        self
    }

    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.config.dimensions = Some(dimensions);
        self
    }

    /// Same as [`build_embedder`].
    pub fn build(&self) -> Result<Arc<dyn Embedder>, LlmError> {
        build_embedder(self)
    }
}

/// Builds the embedder a config describes, reading keys and endpoints the config leaves unset
/// from the variables CrewAI users set (`OPENAI_API_KEY`, `AZURE_API_KEY`, `GEMINI_API_KEY`, ...).
pub fn build_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>, LlmError> {
    build_embedder_with(
        config,
        &|name| std::env::var(name).ok(),
        &RetryPolicy::default(),
    )
}

/// [`build_embedder`] with an explicit environment and retry timing.
pub fn build_embedder_with(
    config: &EmbedderConfig,
    env: EnvLookup<'_>,
    policy: &RetryPolicy,
) -> Result<Arc<dyn Embedder>, LlmError> {
    let settings = &config.config;
    let provider = config
        .provider
        .trim()
        .to_ascii_lowercase()
        .replace('_', "-");
    let from_env = |names: &[&str]| {
        names.iter().find_map(|n| {
            env(n)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        })
    };
    let key = |names: &[&str]| {
        settings
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| from_env(names))
    };
    let missing = |var: &str| LlmError::MissingApiKey {
        provider: format!("the {provider} embedder"),
        env_var: format!("{var} (or `api_key` in the embedder config)"),
    };
    let model = |default: &str| {
        settings
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let timeout = settings
        .timeout
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);

    let client: Arc<dyn Embedder> = match provider.as_str() {
        "hash" | "local-hash" => {
            return Ok(Arc::new(HashEmbedder::new(
                settings.dimensions.unwrap_or(HASH_DEFAULT_DIMENSIONS),
            )));
        }
        "openai" => {
            let api_key = key(&["OPENAI_API_KEY"]).ok_or_else(|| missing("OPENAI_API_KEY"))?;
            let base = settings
                .base_url
                .clone()
                .or_else(|| from_env(&["OPENAI_BASE_URL", "OPENAI_API_BASE"]));
            let client =
                OpenAiEmbedder::openai(&model(OPENAI_DEFAULT_MODEL), api_key, base.as_deref())?
                    .with_timeout(timeout)?;
            Arc::new(with_optional_dimensions(
                client,
                settings.dimensions,
                OpenAiEmbedder::with_dimensions,
            ))
        }
        "openrouter" => {
            let api_key =
                key(&["OPENROUTER_API_KEY"]).ok_or_else(|| missing("OPENROUTER_API_KEY"))?;
            let base = settings
                .base_url
                .clone()
                .unwrap_or_else(|| "https://openrouter.ai/api/v1".to_string());
            let client = OpenAiEmbedder::compatible(
                "openrouter",
                &model(&format!("openai/{OPENAI_DEFAULT_MODEL}")),
                &base,
                Some(api_key),
            )?;
            Arc::new(with_optional_dimensions(
                client.with_timeout(timeout)?,
                settings.dimensions,
                OpenAiEmbedder::with_dimensions,
            ))
        }
        "openai-compatible" | "custom-openai" | "vllm" | "lm-studio" => {
            let base = settings.base_url.clone().ok_or_else(|| {
                LlmError::Config(format!("the {provider} embedder needs `base_url` (the server's URL up to `/embeddings`)"))
            })?;
            let name = settings.model.clone().ok_or_else(|| {
                LlmError::Config(format!("the {provider} embedder needs `model`"))
            })?;
            let client =
                OpenAiEmbedder::compatible(&provider, &name, &base, settings.api_key.clone())?
                    .with_timeout(timeout)?;
            Arc::new(with_optional_dimensions(
                client,
                settings.dimensions,
                OpenAiEmbedder::with_dimensions,
            ))
        }
        "azure" | "azure-openai" => {
            let api_key = key(&["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"])
                .ok_or_else(|| missing("AZURE_API_KEY"))?;
            let endpoint = settings.base_url.clone().or_else(|| from_env(&["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"])).ok_or_else(|| {
                LlmError::Config("the azure embedder needs an endpoint: set AZURE_API_BASE or `api_base` in the embedder config".into())
            })?;
            let version = settings
                .api_version
                .clone()
                .or_else(|| from_env(&["AZURE_API_VERSION", "OPENAI_API_VERSION"]))
                .unwrap_or_else(|| AZURE_DEFAULT_API_VERSION.to_string());
            let deployment = settings
                .deployment
                .clone()
                .unwrap_or_else(|| model(OPENAI_DEFAULT_MODEL));
            let client = OpenAiEmbedder::azure(&deployment, &endpoint, &version, api_key)?
                .with_timeout(timeout)?;
            Arc::new(with_optional_dimensions(
                client,
                settings.dimensions,
                OpenAiEmbedder::with_dimensions,
            ))
        }
        "google-generativeai" | "google" | "gemini" | "google-genai" => {
            let api_key = key(&["GEMINI_API_KEY", "GOOGLE_API_KEY"])
                .ok_or_else(|| missing("GEMINI_API_KEY or GOOGLE_API_KEY"))?;
            let mut client = GeminiEmbedder::new(
                &model(GEMINI_DEFAULT_MODEL),
                api_key,
                settings.base_url.as_deref(),
            )?
            .with_timeout(timeout)?;
            if let Some(task) = &settings.task_type {
                client = client.with_task_type(task.clone());
            }
            Arc::new(with_optional_dimensions(
                client,
                settings.dimensions,
                GeminiEmbedder::with_dimensions,
            ))
        }
        "ollama" => {
            let host = settings
                .base_url
                .clone()
                .or_else(|| from_env(&["OLLAMA_HOST", "OLLAMA_API_BASE"]))
                .unwrap_or_else(|| OLLAMA_DEFAULT_HOST.to_string());
            let client =
                OllamaEmbedder::new(&model(OLLAMA_DEFAULT_MODEL), &host)?.with_timeout(timeout)?;
            Arc::new(with_optional_dimensions(
                client,
                settings.dimensions,
                OllamaEmbedder::with_dimensions,
            ))
        }
        other => {
            return Err(LlmError::Unsupported(format!(
                "embedder provider '{other}' is not available; use openai, azure, google-generativeai, ollama, openai-compatible (with base_url), openrouter or hash"
            )));
        }
    };
    let policy = RetryPolicy {
        max_retries: settings.max_retries.unwrap_or(policy.max_retries),
        ..policy.clone()
    };
    if policy.max_retries == 0 {
        return Ok(client);
    }
    Ok(Arc::new(RetryEmbedder::new(client, policy)))
}

fn with_optional_dimensions<T>(client: T, dimensions: Option<usize>, set: fn(T, usize) -> T) -> T {
    match dimensions {
        Some(n) => set(client, n),
        None => client,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(
        pairs: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> + Send + Sync {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn crewai_config_forms_deserialise() {
        let config: EmbedderConfig = serde_json::from_value(json!({
            "provider": "openai",
            "config": {"model_name": "text-embedding-3-large", "api_key": "k", "api_base": "http://x/v1", "dimensions": 256}
        }))
        .unwrap();
        assert_eq!(
            config.config.model.as_deref(),
            Some("text-embedding-3-large")
        );
        assert_eq!(config.config.base_url.as_deref(), Some("http://x/v1"));
        let typo = serde_json::from_value::<EmbedderConfig>(
            json!({"provider": "openai", "config": {"modle": "x"}}),
        );
        assert!(typo.unwrap_err().to_string().contains("modle"));
    }

    #[test]
    fn missing_keys_and_unknown_providers_explain_themselves() {
        let none = env_of(&[]);
        let error =
            build_embedder_with(&EmbedderConfig::new("openai"), &none, &RetryPolicy::none())
                .err()
                .unwrap();
        assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
        let error = build_embedder_with(
            &EmbedderConfig::new("voyageai"),
            &none,
            &RetryPolicy::none(),
        )
        .err()
        .unwrap();
        assert!(
            error.to_string().contains("voyageai") && error.to_string().contains("ollama"),
            "{error}"
        );
        let error = build_embedder_with(
            &EmbedderConfig::new("azure").with_api_key("k"),
            &none,
            &RetryPolicy::none(),
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("AZURE_API_BASE"), "{error}");
    }

    #[test]
    fn keys_come_from_the_environment_and_dimensions_from_the_model() {
        let env = env_of(&[("GOOGLE_API_KEY", "g")]);
        let gemini = build_embedder_with(
            &EmbedderConfig::new("google-generativeai"),
            &env,
            &RetryPolicy::none(),
        )
        .unwrap();
        assert_eq!(gemini.model(), GEMINI_DEFAULT_MODEL);
        assert_eq!(gemini.dimensions(), Some(3072));
        let env = env_of(&[("OPENAI_API_KEY", "o")]);
        let openai = build_embedder_with(
            &EmbedderConfig::new("openai").with_dimensions(512),
            &env,
            &RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(openai.dimensions(), Some(512));
    }

    #[test]
    fn ollama_hosts_are_normalised() {
        assert_eq!(
            OllamaEmbedder::new("m", "0.0.0.0:11434").unwrap().url,
            "http://0.0.0.0:11434/api/embed"
        );
        assert_eq!(
            OllamaEmbedder::new("m", "http://h:1/api/").unwrap().url,
            "http://h:1/api/embed"
        );
    }

    #[test]
    fn hash_vectors_are_unit_length_and_stable() {
        let embedder = HashEmbedder::new(32);
        let a = embedder.embed_one("Hello, world");
        assert_eq!(a, embedder.embed_one("hello world"));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(embedder.embed_one("").iter().all(|x| *x == 0.0));
        // Pinned so a change of the hash (which would invalidate stored vectors) is noticed.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
