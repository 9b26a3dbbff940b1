//! From a model string and the environment to a ready client: the model string is routed over
//! the build's [`ProviderRegistry`] (the providers, their names, keys, endpoints and the
//! routing rules are in [`crate::providers`]), the routed provider's factory builds the client,
//! and the config's layers go around it in one [`LayeredLlm`] (outermost first: fallbacks,
//! rate limit, retries, stop words; see [`crate::layer`]).
//!
//! The config's `api_key` and `base_url` win over the environment; `MODEL` names the model when
//! the config has none.
//!
//! ```
//! use crewai_llm::router::BuildOptions;
//! use crewai_llm::{LlmConfig, build_llm_with};
//! let options = BuildOptions::new().with_env_vars([("ANTHROPIC_API_KEY", "k")]);
//! let llm = build_llm_with(&LlmConfig::new("claude-3-5-haiku-latest"), &options).unwrap();
//! assert_eq!((llm.provider(), llm.model()), ("anthropic", "claude-3-5-haiku-latest"));
//! assert!(build_llm_with(&LlmConfig::new("antropic/claude-3"), &options).is_err());
//! ```

use std::sync::Arc;

use crate::cassette::CassetteRecorder;
use crate::config::{DEFAULT_MODEL, LlmConfig};
use crate::embeddings::EmbedderFactory;
use crate::error::LlmError;
use crate::fallback::FallbackLayer;
use crate::http::{NetworkTransport, Transport};
use crate::layer::{LayeredLlm, LlmLayer};
use crate::providers::{Provider, ProviderContext, ProviderRegistry};
use crate::rate_limit::{RateLimitLayer, RateLimiter};
use crate::retry::{RetryLayer, RetryPolicy};
use crate::stop_words::StopWordsLayer;
use crate::traits::Llm;

pub use crate::providers::ProviderFactory;

/// Where a builder reads environment variables from (the process environment by default; tests
/// pass a map).
pub type EnvLookup<'a> = &'a (dyn Fn(&str) -> Option<String> + Send + Sync);

/// An owned environment source.
type SharedEnv = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The provider name of the model that runs in the process (`local/smollm2-135m`).
pub const LOCAL_PROVIDER: &str = crate::providers::local::NAME;

/// How [`build_llm_with`] builds: where it reads the environment, how it retries, which
/// transport the provider clients use (a cassette recorder or replayer; the network by default),
/// and the providers it routes to ([`ProviderRegistry::builtin`] unless changed with
/// [`BuildOptions::register`], [`BuildOptions::with_provider`] or
/// [`BuildOptions::with_providers`]).
///
/// ```
/// use std::time::Duration;
/// use crewai_llm::router::BuildOptions;
/// use crewai_llm::{LlmConfig, RetryPolicy, build_llm_with};
/// let options = BuildOptions::new()
///     .with_env_vars([("OPENAI_API_KEY", "sk-test")])
///     .with_retry_policy(RetryPolicy::default().with_delays(Duration::from_millis(1), Duration::from_millis(5)));
/// let llm = build_llm_with(&LlmConfig::new("gpt-4o-mini"), &options).unwrap();
/// assert_eq!(llm.model(), "gpt-4o-mini");
/// ```
#[derive(Clone)]
pub struct BuildOptions {
    env: SharedEnv,
    retry: RetryPolicy,
    transport: Option<Arc<dyn Transport>>,
    recorder: Option<Arc<CassetteRecorder>>,
    providers: ProviderRegistry,
    /// Embedder providers added with [`BuildOptions::with_embedder_provider`], by normalised name.
    embedders: std::collections::BTreeMap<String, EmbedderFactory>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            env: Arc::new(process_env),
            retry: RetryPolicy::default(),
            transport: None,
            recorder: None,
            providers: ProviderRegistry::builtin(),
            embedders: std::collections::BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("retry", &self.retry)
            .field("transport", &self.transport.is_some())
            .field("recording", &self.recorder.is_some())
            .field("providers", &self.providers)
            .field("embedders", &self.embedders.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl BuildOptions {
    /// The process environment, the default retry policy, the network.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads variables through `lookup` instead of the process environment.
    pub fn with_env(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.env = Arc::new(lookup);
        self
    }

    /// Reads variables from these pairs only.
    pub fn with_env_vars<K: Into<String>, V: Into<String>>(
        self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let map: std::collections::HashMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self.with_env(move |name| map.get(name).cloned())
    }

    setters! {
        /// Retry timing and count (a config's `max_retries` still overrides the count).
        pub fn with_retry_policy(policy: RetryPolicy) => retry = policy;
        /// Sends every provider request through `transport`.
        pub fn with_transport(transport: Arc<dyn Transport>) => transport = Some(transport);
        /// Records every exchange of every model built with these options into one cassette; each
        /// client keeps its own timeouts. Share the options among a crew's agents to record a run.
        pub fn with_recorder(recorder: Arc<CassetteRecorder>) => recorder = Some(recorder);
    }

    /// Routes model strings prefixed `name/` (or configs with `provider: name`) to `factory`,
    /// which gets the config with the model string as written (prefix on). A provider already
    /// answering to `name` keeps its descriptor (this is how the CLI makes `local` available);
    /// another name becomes a provider of its own. The built client still gets the stop-word,
    /// retry and rate-limit layers.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crewai_llm::router::BuildOptions;
    /// use crewai_llm::{Llm, LlmConfig, ScriptedLlm, build_llm_with};
    /// let options = BuildOptions::new().with_provider("echo", Arc::new(|config: &LlmConfig| {
    ///     Ok(Arc::new(ScriptedLlm::new(config.model.clone())) as Arc<dyn Llm>)
    /// }));
    /// let llm = build_llm_with(&LlmConfig::new("echo/any"), &options).unwrap();
    /// assert_eq!(llm.model(), "echo/any");
    /// ```
    pub fn with_provider(mut self, name: impl Into<String>, factory: ProviderFactory) -> Self {
        self.providers.set_factory(&name.into(), factory);
        self
    }

    /// Adds a provider (or replaces the one of the same name); see
    /// [`crate::providers`] and the "Adding a provider" section of ARCHITECTURE.md.
    pub fn register(mut self, provider: Provider) -> Self {
        self.providers.register(provider);
        self
    }

    setters! {
        /// Routes over `providers` instead.
        pub fn with_providers(providers: ProviderRegistry) => providers = providers;
    }

    /// Builds embedder configs with `provider: name` through `factory` (before the built-in
    /// embedders: this is how the CLI makes crewai-local's `local` embedder available). Names are
    /// compared as [`crate::embeddings::build_embedder_from`] normalises them (lowercase, `_` as
    /// `-`, `sentence-transformer` as `local`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crewai_llm::BuildOptions;
    /// use crewai_llm::embeddings::{Embedder, EmbedderConfig, HashEmbedder, build_embedder_from};
    /// let options = BuildOptions::new().with_embedder_provider("mine", Arc::new(|_: &EmbedderConfig| {
    ///     Ok(Arc::new(HashEmbedder::new(8)) as Arc<dyn Embedder>)
    /// }));
    /// let embedder = build_embedder_from(&EmbedderConfig::new("Mine"), &options).unwrap();
    /// assert_eq!(embedder.dimensions(), Some(8));
    /// ```
    pub fn with_embedder_provider(
        mut self,
        name: impl AsRef<str>,
        factory: EmbedderFactory,
    ) -> Self {
        self.embedders.insert(
            crate::embeddings::normalise_provider(name.as_ref()),
            factory,
        );
        self
    }

    /// The factory added for the embedder provider `name`, if any.
    pub fn embedder_provider(&self, name: &str) -> Option<&EmbedderFactory> {
        self.embedders
            .get(&crate::embeddings::normalise_provider(name))
    }

    /// The environment lookup builders read.
    pub fn env(&self) -> &(dyn Fn(&str) -> Option<String> + Send + Sync) {
        &*self.env
    }

    /// The providers models are routed to.
    pub fn providers(&self) -> &ProviderRegistry {
        &self.providers
    }

    /// True when a provider answers to `name` and this build can make its models.
    pub fn has_provider(&self, name: &str) -> bool {
        self.providers.is_available(name)
    }

    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }
}

/// Reads the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The first of `names` that is set and not empty.
pub(crate) fn first_env(env: EnvLookup<'_>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// True when `url` points at this machine or a private network address (servers that usually
/// need no key).
pub fn is_local_url(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    match parsed.host() {
        Some(url::Host::Domain(host)) => {
            host == "localhost"
                || host.ends_with(".local")
                || host.ends_with(".localhost")
                || host == "host.docker.internal"
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    }
}

/// The model string when none is configured: `MODEL` or CrewAI's default.
pub fn default_model(env: EnvLookup<'_>) -> String {
    first_env(env, &["MODEL"]).unwrap_or_else(|| DEFAULT_MODEL.to_string())
}

/// Builds the provider client alone, without layers: routes the model string over the
/// options' registry and calls the routed provider's factory.
pub fn build_provider(
    config: &LlmConfig,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, LlmError> {
    let env: EnvLookup<'_> = options.env.as_ref();
    let transport: Option<Arc<dyn Transport>> = match (&options.transport, &options.recorder) {
        (inner, Some(recorder)) => {
            let inner: Arc<dyn Transport> = match inner {
                Some(inner) => inner.clone(),
                None => Arc::new(NetworkTransport::new(
                    config.connect_timeout(),
                    config.request_timeout(),
                )?),
            };
            Some(recorder.tap(inner))
        }
        (inner, None) => inner.clone(),
    };
    let mut config = config.clone();
    if config.model.trim().is_empty() {
        config.model = default_model(env);
    }
    let route = options.providers.route(&config)?;
    if config.context_window_size.is_none() {
        // A provider's declared window reaches its client through the config, so a provider
        // added outside this crate needs no entry anywhere else.
        config.context_window_size = route.provider().context_window(route.model());
    }
    let cx = ProviderContext {
        descriptor: route.provider(),
        config: &config,
        model: route.model(),
        env,
        transport: transport.as_ref(),
    };
    route.target().build(&cx)
}

/// The layers a config asks for around its provider client, outermost first: rate limit (when
/// `max_rpm` or `max_tpm` is set), retries (unless there are none), stop words. The rate limit
/// is outside the retries, so a retried attempt does not take another request slot.
pub fn config_layers(config: &LlmConfig, options: &BuildOptions) -> Vec<Arc<dyn LlmLayer>> {
    let mut layers: Vec<Arc<dyn LlmLayer>> = Vec::with_capacity(3);
    if config.max_rpm.is_some() || config.max_tpm.is_some() {
        layers.push(Arc::new(RateLimitLayer::new(RateLimiter::new(
            config.max_rpm,
            config.max_tpm,
        ))));
    }
    let policy = RetryPolicy {
        max_retries: config.max_retries.unwrap_or(options.retry.max_retries),
        ..options.retry.clone()
    };
    if policy.max_retries > 0 {
        layers.push(Arc::new(RetryLayer::new(policy)));
    }
    layers.push(Arc::new(StopWordsLayer::new(config.stop.clone())));
    layers
}

/// Builds one model with its layers: rate limit → retries → stop words → provider client.
pub fn build_single(config: &LlmConfig, options: &BuildOptions) -> Result<LayeredLlm, LlmError> {
    let client = build_provider(config, options)?;
    Ok(LayeredLlm::new(client, config_layers(config, options)))
}

/// [`build_llm`] with explicit [`BuildOptions`] (environment, retry timing, transport). With
/// `config.fallback_llms`, each fallback is built the same way and a [`FallbackLayer`] goes on
/// top of the primary's stack: fallbacks → rate limit → retries → stop words → client.
pub fn build_llm_with(
    config: &LlmConfig,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, LlmError> {
    let mut primary = build_single(config, options)?;
    if config.fallback_llms.is_empty() {
        return Ok(Arc::new(primary));
    }
    let fallbacks = config
        .fallback_llms
        .iter()
        .map(|fallback| build_llm_with(fallback, options))
        .collect::<Result<Vec<_>, _>>()?;
    let mut layers: Vec<Arc<dyn LlmLayer>> = vec![Arc::new(FallbackLayer::new(fallbacks))];
    layers.extend(primary.layers().iter().cloned());
    primary = LayeredLlm::new(primary.inner().clone(), layers);
    Ok(Arc::new(primary))
}

/// Builds the model a config describes, reading keys and endpoints from the process environment.
///
/// ```
/// use crewai_llm::{LlmConfig, build_llm};
/// let llm = build_llm(&LlmConfig::new("ollama/llama3.1")).unwrap();
/// assert_eq!(llm.model(), "llama3.1");
/// assert_eq!(llm.provider(), "ollama");
/// ```
pub fn build_llm(config: &LlmConfig) -> Result<Arc<dyn Llm>, LlmError> {
    build_llm_with(config, &BuildOptions::default())
}

/// The model used when none is configured (`MODEL`, else `gpt-4.1-mini`).
pub fn default_llm() -> Result<Arc<dyn Llm>, LlmError> {
    build_llm(&LlmConfig::new(default_model(&process_env)))
}

impl LlmConfig {
    /// Same as [`build_llm`].
    pub fn build(&self) -> Result<Arc<dyn Llm>, LlmError> {
        build_llm(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Send + Sync + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn build(model: &str, pairs: &[(&str, &str)]) -> Result<Arc<dyn Llm>, LlmError> {
        let options = BuildOptions::new()
            .with_env(env_of(pairs))
            .with_retry_policy(RetryPolicy::none());
        build_llm_with(&LlmConfig::new(model), &options)
    }

    #[test]
    fn missing_keys_name_the_variable_and_provider() {
        let cases = [
            ("gpt-4o", "openai", "OPENAI_API_KEY"),
            (
                "anthropic/claude-sonnet-4-5",
                "anthropic",
                "ANTHROPIC_API_KEY",
            ),
            (
                "gemini/gemini-2.5-flash",
                "gemini",
                "GEMINI_API_KEY or GOOGLE_API_KEY",
            ),
            ("azure/dep", "azure", "AZURE_API_KEY"),
            ("groq/llama", "groq", "GROQ_API_KEY"),
            ("openrouter/x", "openrouter", "OPENROUTER_API_KEY"),
            ("deepseek/deepseek-chat", "deepseek", "DEEPSEEK_API_KEY"),
        ];
        for (model, provider, var) in cases {
            match build(model, &[]).err() {
                Some(LlmError::MissingApiKey {
                    provider: p,
                    env_var,
                }) => {
                    assert_eq!((p.as_str(), env_var.as_str()), (provider, var), "{model}");
                }
                other => panic!("{model}: {other:?}"),
            }
        }
    }

    #[test]
    fn local_servers_need_no_key() {
        assert!(build("gpt-4o", &[("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")]).is_ok());
        assert!(build("ollama/llama3", &[]).is_ok());
        assert!(matches!(
            build(
                "gpt-4o",
                &[("OPENAI_BASE_URL", "https://api.example.com/v1")]
            ),
            Err(LlmError::MissingApiKey { .. })
        ));
        let llm = build("anthropic/claude-sonnet-4-5", &[("ANTHROPIC_API_KEY", "k")])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(llm.provider(), "anthropic");
        let llm =
            build("gemini-2.5-flash", &[("GOOGLE_API_KEY", "k")]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(llm.model(), "gemini-2.5-flash");
    }

    #[test]
    fn default_model_comes_from_env() {
        assert_eq!(default_model(&env_of(&[])), "gpt-4.1-mini");
        assert_eq!(
            default_model(&env_of(&[("MODEL", "claude-3-haiku")])),
            "claude-3-haiku"
        );
        let llm = build("", &[("MODEL", "groq/llama-x"), ("GROQ_API_KEY", "k")])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((llm.provider(), llm.model()), ("groq", "llama-x"));
    }

    #[tokio::test]
    async fn registered_providers_build_their_models_with_the_usual_layers() {
        use crate::types::{LlmRequest, LlmResponse, Message};
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let factory: ProviderFactory = Arc::new(move |config: &LlmConfig| {
            record.lock().map(|mut s| s.push(config.model.clone())).ok();
            let scripted = crate::ScriptedLlm::new("tiny").then_response(LlmResponse {
                content: Some("answer STOP tail".into()),
                ..Default::default()
            });
            Ok(Arc::new(scripted) as Arc<dyn Llm>)
        });
        let options = BuildOptions::new()
            .with_env(env_of(&[("MODEL", "local/tiny")]))
            .with_provider("Local", factory);
        assert!(options.has_provider("local"));
        let llm = build_llm_with(&LlmConfig::new("").with_stop(vec!["STOP".into()]), &options)
            .unwrap_or_else(|e| panic!("{e}"));
        let reply = llm
            .call(LlmRequest::new(vec![Message::user("q")]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reply.content.as_deref(), Some("answer "));
        let explicit = build_llm_with(&LlmConfig::new("tiny").with_provider("local"), &options);
        assert!(explicit.is_ok());
        assert_eq!(
            seen.lock().map(|s| s.clone()).unwrap_or_default(),
            vec!["local/tiny".to_string(), "tiny".to_string()]
        );
    }

    #[test]
    fn local_models_without_the_local_provider_say_what_to_enable() {
        let message = build("local/smollm2-135m", &[])
            .err()
            .map(|e| crate::error_chain(&e))
            .unwrap_or_default();
        assert!(
            message.contains("`local` feature of crewai-cli"),
            "{message}"
        );
        let message = build_llm_with(
            &LlmConfig::new("x").with_provider("local"),
            &BuildOptions::new(),
        )
        .err()
        .map(|e| crate::error_chain(&e));
        assert!(message.unwrap_or_default().contains("local"));
    }
}
