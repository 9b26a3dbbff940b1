//! CrewAI's `embedder:` settings ([`EmbedderConfig`]) and [`build_embedder`], which turns them
//! into a client.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::{EmbeddingApi, HttpEmbedder};
use super::{
    AZURE_DEFAULT_API_VERSION, DEFAULT_TIMEOUT, Embedder, GEMINI_DEFAULT_MODEL, GeminiEmbedder,
    HASH_DEFAULT_DIMENSIONS, HashEmbedder, OLLAMA_DEFAULT_HOST, OLLAMA_DEFAULT_MODEL,
    OPENAI_DEFAULT_MODEL, OllamaEmbedder, OpenAiEmbedder, RetryEmbedder,
};
use crate::error::LlmError;
use crate::retry::RetryPolicy;
use crate::router::EnvLookup;

/// Which embedder to build, in CrewAI's form: `{provider: openai, config: {model_name: ..}}`.
///
/// Providers: `openai`, `azure`, `google-generativeai` (also `gemini`, `google`), `ollama`,
/// `openai-compatible` (needs `base_url`), `openrouter`, `hash` (the local [`HashEmbedder`]), and
/// `local` (also CrewAI's `sentence-transformer`): all-MiniLM-L6-v2 in process, built by
/// crewai-local once registered ([`build_embedder_from`]).
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

    setters! {
        pub fn with_model(model: impl Into<String>) => config.model = Some(model.into());
        pub fn with_api_key(key: impl Into<String>) => config.api_key = Some(key.into());
        pub fn with_base_url(url: impl Into<String>) => config.base_url = Some(url.into());
        pub fn with_dimensions(dimensions: usize) => config.dimensions = Some(dimensions);
    }

    /// Same as [`build_embedder`].
    pub fn build(&self) -> Result<Arc<dyn Embedder>, LlmError> {
        build_embedder(self)
    }
}

/// Builds an embedder for a provider crewai-llm does not ship, from the whole config (see
/// [`crate::BuildOptions::with_embedder_provider`]).
pub type EmbedderFactory =
    Arc<dyn Fn(&EmbedderConfig) -> Result<Arc<dyn Embedder>, LlmError> + Send + Sync>;

/// The provider name of the embedder that runs in the process (crewai-local's all-MiniLM-L6-v2);
/// CrewAI's `sentence-transformer` is read as this name.
pub const LOCAL_EMBEDDER_PROVIDER: &str = "local";

/// A provider name as the builders compare it: trimmed, lowercase, `_` as `-`, and CrewAI's
/// `sentence-transformer` (the in-process embedder) as [`LOCAL_EMBEDDER_PROVIDER`].
pub fn normalise_provider(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase().replace('_', "-");
    match name.as_str() {
        "sentence-transformer" | "sentence-transformers" => LOCAL_EMBEDDER_PROVIDER.to_string(),
        _ => name,
    }
}

/// [`build_embedder`] with the environment, retry policy and embedder providers of `options`:
/// a provider added with [`crate::BuildOptions::with_embedder_provider`] is built by its
/// factory (as configured, with no retry layer: a local embedder has nothing to retry), any
/// other by [`build_embedder_with`].
pub fn build_embedder_from(
    config: &EmbedderConfig,
    options: &crate::BuildOptions,
) -> Result<Arc<dyn Embedder>, LlmError> {
    match options.embedder_provider(&config.provider) {
        Some(factory) => factory(config),
        None => build_embedder_with(config, options.env(), options.retry_policy()),
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

/// What [`build_embedder_with`] reads a provider's client from: the settings, with the
/// environment for what they leave unset.
struct Sources<'a> {
    provider: String,
    settings: &'a EmbedderSettings,
    env: EnvLookup<'a>,
}

impl Sources<'_> {
    /// The first of `names` set (and not blank) in the environment.
    fn env(&self, names: &[&str]) -> Option<String> {
        crate::router::first_env(self.env, names)
    }

    /// The configured key, else the first of `names` in the environment; `missing` names what to
    /// set when there is none.
    fn key(&self, names: &[&str], missing: &str) -> Result<String, LlmError> {
        self.settings
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| self.env(names))
            .ok_or_else(|| LlmError::MissingApiKey {
                provider: format!("the {} embedder", self.provider),
                env_var: format!("{missing} (or `api_key` in the embedder config)"),
            })
    }

    /// The configured model, else `default`.
    fn model(&self, default: &str) -> String {
        self.settings
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| default.to_string())
    }

    /// The configured server, else the first of `names` in the environment.
    fn base_url(&self, names: &[&str]) -> Option<String> {
        self.settings.base_url.clone().or_else(|| self.env(names))
    }

    fn required(&self, value: &Option<String>, what: &str) -> Result<String, LlmError> {
        value
            .clone()
            .ok_or_else(|| LlmError::Config(format!("the {} embedder needs {what}", self.provider)))
    }

    /// `client` with the configured timeout and vector size.
    fn finish<A: EmbeddingApi>(
        &self,
        client: HttpEmbedder<A>,
    ) -> Result<Arc<dyn Embedder>, LlmError> {
        let timeout = self
            .settings
            .timeout
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
        let client = client.with_timeout(timeout)?;
        Ok(Arc::new(match self.settings.dimensions {
            Some(n) => client.with_dimensions(n),
            None => client,
        }))
    }
}

/// [`build_embedder`] with an explicit environment and retry timing.
pub fn build_embedder_with(
    config: &EmbedderConfig,
    env: EnvLookup<'_>,
    policy: &RetryPolicy,
) -> Result<Arc<dyn Embedder>, LlmError> {
    let settings = &config.config;
    let from = Sources {
        provider: normalise_provider(&config.provider),
        settings,
        env,
    };
    let client = match from.provider.as_str() {
        "hash" | "local-hash" => {
            return Ok(Arc::new(HashEmbedder::new(
                settings.dimensions.unwrap_or(HASH_DEFAULT_DIMENSIONS),
            )));
        }
        "openai" => from.finish(OpenAiEmbedder::openai(
            &from.model(OPENAI_DEFAULT_MODEL),
            from.key(&["OPENAI_API_KEY"], "OPENAI_API_KEY")?,
            from.base_url(&["OPENAI_BASE_URL", "OPENAI_API_BASE"])
                .as_deref(),
        )?)?,
        "openrouter" => from.finish(OpenAiEmbedder::compatible(
            "openrouter",
            &from.model(&format!("openai/{OPENAI_DEFAULT_MODEL}")),
            settings
                .base_url
                .as_deref()
                .unwrap_or("https://openrouter.ai/api/v1"),
            Some(from.key(&["OPENROUTER_API_KEY"], "OPENROUTER_API_KEY")?),
        )?)?,
        "openai-compatible" | "custom-openai" | "vllm" | "lm-studio" => {
            let base = from.required(
                &settings.base_url,
                "`base_url` (the server's URL up to `/embeddings`)",
            )?;
            let name = from.required(&settings.model, "`model`")?;
            from.finish(OpenAiEmbedder::compatible(
                &from.provider,
                &name,
                &base,
                settings.api_key.clone(),
            )?)?
        }
        "azure" | "azure-openai" => {
            let api_key = from.key(&["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"], "AZURE_API_KEY")?;
            let endpoint = from.base_url(&["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"]).ok_or_else(|| {
                LlmError::Config("the azure embedder needs an endpoint: set AZURE_API_BASE or `api_base` in the embedder config".into())
            })?;
            let version = settings
                .api_version
                .clone()
                .or_else(|| from.env(&["AZURE_API_VERSION", "OPENAI_API_VERSION"]))
                .unwrap_or_else(|| AZURE_DEFAULT_API_VERSION.to_string());
            let deployment = settings
                .deployment
                .clone()
                .unwrap_or_else(|| from.model(OPENAI_DEFAULT_MODEL));
            from.finish(OpenAiEmbedder::azure(
                &deployment,
                &endpoint,
                &version,
                api_key,
            )?)?
        }
        "google-generativeai" | "google" | "gemini" | "google-genai" => {
            let mut client = GeminiEmbedder::new(
                &from.model(GEMINI_DEFAULT_MODEL),
                from.key(
                    &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                    "GEMINI_API_KEY or GOOGLE_API_KEY",
                )?,
                settings.base_url.as_deref(),
            )?;
            if let Some(task) = &settings.task_type {
                client = client.with_task_type(task.clone());
            }
            from.finish(client)?
        }
        "ollama" => {
            let host = from
                .base_url(&["OLLAMA_HOST", "OLLAMA_API_BASE"])
                .unwrap_or_else(|| OLLAMA_DEFAULT_HOST.to_string());
            from.finish(OllamaEmbedder::new(
                &from.model(OLLAMA_DEFAULT_MODEL),
                &host,
            )?)?
        }
        LOCAL_EMBEDDER_PROVIDER => {
            return Err(LlmError::Unsupported(
                "the local embedder (all-MiniLM-L6-v2, in process) lives in crewai-local and this build has not registered it; \
                 the crewai binary does, and in Rust: `BuildOptions::new().with_embedder_provider(\"local\", Arc::new(crewai_local::build_embedder))` \
                 with `build_embedder_from`".into(),
            ));
        }
        other => {
            return Err(LlmError::Unsupported(format!(
                "embedder provider '{other}' is not available; use openai, azure, google-generativeai, ollama, openai-compatible (with base_url), openrouter, local (crewai-local's all-MiniLM-L6-v2) or hash"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_chain;
    use serde_json::json;

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
        assert!(error_chain(&typo.unwrap_err()).contains("modle"));
    }

    #[test]
    fn missing_keys_and_unknown_providers_explain_themselves() {
        let none = env_of(&[]);
        let error =
            build_embedder_with(&EmbedderConfig::new("openai"), &none, &RetryPolicy::none())
                .err()
                .unwrap();
        assert!(error_chain(&error).contains("OPENAI_API_KEY"), "{error}");
        let error = build_embedder_with(
            &EmbedderConfig::new("voyageai"),
            &none,
            &RetryPolicy::none(),
        )
        .err()
        .unwrap();
        assert!(
            error_chain(&error).contains("voyageai") && error_chain(&error).contains("ollama"),
            "{error}"
        );
        let error = build_embedder_with(
            &EmbedderConfig::new("azure").with_api_key("k"),
            &none,
            &RetryPolicy::none(),
        )
        .err()
        .unwrap();
        assert!(error_chain(&error).contains("AZURE_API_BASE"), "{error}");
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
}
