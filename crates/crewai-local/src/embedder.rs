//! The `local` embedder: all-MiniLM-L6-v2 run in this process, behind crewai-llm's
//! [`Embedder`] trait.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crewai_llm::embeddings::{Embedded, Embedder, EmbedderConfig, known_dimensions};
use crewai_llm::{LlmError, async_trait};
use tokio::sync::OnceCell;

use crate::cache::{self, DEFAULT_LOCAL_EMBEDDER, KnownModel, ModelKind, PullProgress};
use crate::error::LocalError;
use crate::sentence::SentenceEncoder;

/// A sentence embedder running in this process (CPU, candle): all-MiniLM-L6-v2, 384-dimensional
/// unit vectors, the same numbers sentence-transformers gives (to 1e-3).
///
/// Built from `embedder: {provider: local, config: {model: all-minilm-l6-v2}}` (the model is
/// the default; CrewAI's `provider: sentence-transformer, config: {model_name: all-MiniLM-L6-v2}`
/// is the same). Nothing is read until the first call, which pulls the model into the models
/// folder if it is not there yet (`crewai models pull minilm` does it ahead of time) and loads
/// it once; clones share the loaded model. Each call runs on tokio's blocking pool; dropping
/// the call's future (a timeout, a cancelled task) stops the work at the next batch of texts.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), crewai_llm::LlmError> {
/// use crewai_llm::embeddings::{Embedder, EmbedderConfig};
/// let embedder = crewai_local::LocalEmbedder::from_config(&EmbedderConfig::new("local"))?;
/// let vectors = embedder.embed(&["The cat sits on the mat.".to_string()]).await?;
/// assert_eq!(vectors[0].len(), 384);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    model: &'static KnownModel,
    dir: PathBuf,
    timeout: Option<Duration>,
    encoder: Arc<OnceCell<Arc<SentenceEncoder>>>,
}

/// The [`crewai_llm::embeddings::EmbedderFactory`] of the `local` embedder provider: register it
/// with `BuildOptions::with_embedder_provider("local", Arc::new(crewai_local::build_embedder))`.
pub fn build_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>, LlmError> {
    Ok(Arc::new(LocalEmbedder::from_config(config)?))
}

/// A setting of the `embedder:` config the local embedder has no use for.
fn refuse(setting: &str, why: &str) -> LlmError {
    LlmError::Config(format!(
        "the local embedder's config sets `{setting}`, which {why}; remove it"
    ))
}

impl LocalEmbedder {
    /// The embedder a config names (`model` defaults to all-minilm-l6-v2; `timeout` bounds each
    /// call in seconds). Settings of remote embedders (`api_key`, `base_url`, ...) are refused,
    /// not ignored.
    pub fn from_config(config: &EmbedderConfig) -> Result<Self, LlmError> {
        let settings = &config.config;
        let remote_only = "only remote embedders use";
        let refused = [
            ("api_key", settings.api_key.is_some()),
            ("base_url", settings.base_url.is_some()),
            ("api_version", settings.api_version.is_some()),
            ("deployment", settings.deployment.is_some()),
            ("task_type", settings.task_type.is_some()),
        ];
        if let Some((setting, _)) = refused.iter().find(|(_, set)| *set) {
            return Err(refuse(setting, remote_only));
        }
        if settings.max_retries.is_some() {
            return Err(refuse(
                "max_retries",
                "means nothing in process (no request can be retried)",
            ));
        }
        let name = settings
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(DEFAULT_LOCAL_EMBEDDER);
        let model = cache::known_model(name)
            .filter(|m| m.kind == ModelKind::Embedding)
            .ok_or_else(|| {
                LlmError::from(LocalError::UnknownEmbedder {
                    name: name.to_string(),
                    known: cache::known_names(ModelKind::Embedding),
                })
            })?;
        let mut embedder = LocalEmbedder::new(model, &cache::models_dir())?;
        if let Some(dimensions) = settings.dimensions
            && Some(dimensions) != embedder.dimensions()
        {
            return Err(refuse(
                "dimensions",
                &format!(
                    "{} cannot change: its vectors have {} dimensions",
                    model.name,
                    embedder.dimensions().unwrap_or_default()
                ),
            ));
        }
        if let Some(seconds) = settings.timeout {
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(refuse("timeout", "must be a positive number of seconds"));
            }
            embedder.timeout = Some(Duration::from_secs_f64(seconds));
        }
        Ok(embedder)
    }

    /// The known embedding model `model`, kept in (or pulled into) the models folder `dir`.
    pub fn new(model: &'static KnownModel, dir: &Path) -> Result<Self, LocalError> {
        if model.kind != ModelKind::Embedding {
            return Err(LocalError::UnknownEmbedder {
                name: model.name.to_string(),
                known: cache::known_names(ModelKind::Embedding),
            });
        }
        Ok(LocalEmbedder {
            model,
            dir: dir.to_path_buf(),
            timeout: None,
            encoder: Arc::new(OnceCell::new()),
        })
    }

    /// Bounds each [`Embedder::embed`] call (none by default: a large batch on a slow machine
    /// can take minutes, and the caller's own deadline applies).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The model's folder.
    pub fn path(&self) -> PathBuf {
        self.model.path_in(&self.dir)
    }

    /// Loads the model now (pulling it first if needed) instead of on the first call.
    pub async fn preload(&self) -> Result<(), LlmError> {
        self.encoder().await.map(|_| ())
    }

    async fn encoder(&self) -> Result<Arc<SentenceEncoder>, LlmError> {
        let model = self.model;
        let dir = self.dir.clone();
        let encoder = self
            .encoder
            .get_or_try_init(|| async move {
                let loaded = tokio::task::spawn_blocking(move || load(model, &dir))
                    .await
                    .map_err(|e| LocalError::inference_from("the embedder loader stopped", e))??;
                Ok::<_, LocalError>(Arc::new(loaded))
            })
            .await?;
        Ok(encoder.clone())
    }

    async fn embed_all(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        let encoder = self.encoder().await?;
        let texts = texts.to_vec();
        let stop = StopOnDrop::default();
        let flag = stop.0.clone();
        let (vectors, tokens) =
            tokio::task::spawn_blocking(move || encoder.encode_counted(&texts, &flag))
                .await
                .map_err(|e| LocalError::inference_from("the embedder stopped", e))??;
        drop(stop);
        Ok(Embedded {
            vectors,
            prompt_tokens: Some(tokens),
        })
    }
}

/// Raises its flag when dropped: the blocking encoder checks it between batches, so a call
/// whose future is dropped stops using the CPU.
#[derive(Default)]
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Reads the model's folder, pulling it first when a file is missing.
fn load(model: &'static KnownModel, dir: &Path) -> Result<SentenceEncoder, LocalError> {
    if !model.is_pulled(dir) {
        cache::pull(model, dir, &mut |step: PullProgress| {
            tracing::info!(model = model.name, "{step}")
        })?;
    }
    let started = std::time::Instant::now();
    let encoder = SentenceEncoder::load(&model.path_in(dir))?;
    tracing::debug!(
        model = model.name,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "local embedder loaded"
    );
    Ok(encoder)
}

#[async_trait]
impl Embedder for LocalEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(self.embed_counted(texts).await?.vectors)
    }

    /// The tokens are the model's own (its tokenizer's count, special tokens included).
    async fn embed_counted(&self, texts: &[String]) -> Result<Embedded, LlmError> {
        if texts.is_empty() {
            return Ok(Embedded::default());
        }
        match self.timeout {
            None => self.embed_all(texts).await,
            Some(limit) => tokio::time::timeout(limit, self.embed_all(texts))
                .await
                .map_err(|_| LlmError::Timeout {
                    provider: "local".into(),
                    after: limit,
                    source: None,
                })?,
        }
    }

    fn dimensions(&self) -> Option<usize> {
        self.encoder
            .get()
            .map(|encoder| encoder.dimensions())
            .or_else(|| known_dimensions(self.model.name))
    }

    fn model(&self) -> &str {
        self.model.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewai_llm::error_chain;

    fn error_of(config: &EmbedderConfig) -> String {
        LocalEmbedder::from_config(config)
            .err()
            .map(|e| error_chain(&e))
            .unwrap_or_default()
    }

    #[test]
    fn configs_name_the_model_and_refuse_settings_it_cannot_use() {
        let default = LocalEmbedder::from_config(&EmbedderConfig::new("local"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(default.model(), "all-minilm-l6-v2");
        assert_eq!(default.dimensions(), Some(384));
        let crewai_form: EmbedderConfig = serde_json::from_value(serde_json::json!({
            "provider": "sentence-transformer",
            "config": {"model_name": "all-MiniLM-L6-v2", "dimensions": 384, "timeout": 30}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let built = LocalEmbedder::from_config(&crewai_form).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(built.timeout, Some(Duration::from_secs(30)));

        let unknown = error_of(&EmbedderConfig::new("local").with_model("bge-large"));
        assert!(
            unknown.contains("bge-large") && unknown.contains("all-minilm-l6-v2"),
            "{unknown}"
        );
        let chat = error_of(&EmbedderConfig::new("local").with_model("smollm2-135m"));
        assert!(chat.contains("smollm2-135m"), "{chat}");
        let keyed = error_of(&EmbedderConfig::new("local").with_api_key("k"));
        assert!(keyed.contains("`api_key`"), "{keyed}");
        let resized = error_of(&EmbedderConfig::new("local").with_dimensions(256));
        assert!(resized.contains("384 dimensions"), "{resized}");
    }

    #[tokio::test]
    async fn no_texts_need_no_model() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let embedder = LocalEmbedder::new(&cache::ALL_MINILM_L6_V2, dir.path())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(embedder.embed(&[]).await.ok(), Some(Vec::new()));
        assert!(LocalEmbedder::new(&cache::SMOLLM2_135M, dir.path()).is_err());
    }
}
