//! From a model string and the environment to a ready client: provider routing as CrewAI does
//! it, API keys and endpoints from the variables CrewAI users already set, and the wrappers
//! (stop words, retries, rate limits, fallbacks) in that order.
//!
//! | Provider (prefix) | Key | Endpoint (default) |
//! |---|---|---|
//! | `openai/`, `gpt-*`, `o1`/`o3`/`o4`, unknown names | `OPENAI_API_KEY` (optional for a local `base_url`) | `OPENAI_BASE_URL` or `OPENAI_API_BASE` (`https://api.openai.com/v1`) |
//! | `anthropic/`, `claude-*` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` (`https://api.anthropic.com`) |
//! | `gemini/`, `gemini-*` | `GEMINI_API_KEY` or `GOOGLE_API_KEY` | `GEMINI_API_BASE` (Google's) |
//! | `azure/<deployment>` | `AZURE_API_KEY` | `AZURE_API_BASE` + `AZURE_API_VERSION` |
//! | `ollama/` | none | `OLLAMA_HOST` (`http://localhost:11434`) + `/v1` |
//! | `openrouter/` | `OPENROUTER_API_KEY` | `https://openrouter.ai/api/v1` |
//! | `deepseek/` | `DEEPSEEK_API_KEY` | `https://api.deepseek.com/v1` |
//! | `groq/` | `GROQ_API_KEY` | `https://api.groq.com/openai/v1` |
//! | `bedrock/` (feature `bedrock`) | `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`) or `AWS_BEARER_TOKEN_BEDROCK` | `AWS_REGION` (`us-east-1`) |
//!
//! The config's `api_key` and `base_url` win over the environment; `MODEL` names the model when
//! the config has none.
//!
//! ```
//! use crewai_llm::router::{Provider, route};
//! assert_eq!(route("anthropic/claude-sonnet-4-5", None).unwrap(), (Provider::Anthropic, "claude-sonnet-4-5".to_string()));
//! assert_eq!(route("o3-mini", None).unwrap(), (Provider::OpenAi, "o3-mini".to_string()));
//! assert_eq!(route("gemini-2.5-flash", None).unwrap().0, Provider::Gemini);
//! ```

use std::sync::Arc;

use crate::anthropic::AnthropicLlm;
use crate::cassette::CassetteRecorder;
use crate::config::{DEFAULT_MODEL, LlmConfig, OpenAiApi};
use crate::error::LlmError;
use crate::fallback::FallbackLlm;
use crate::gemini::GeminiLlm;
use crate::http::{ReqwestTransport, Transport};
use crate::openai::{AZURE_DEFAULT_API_VERSION, Auth, OPENAI_BASE_URL, OpenAiClient};
use crate::openai_responses::OpenAiResponsesClient;
use crate::rate_limit::{RateLimitedLlm, RateLimiter};
use crate::retry::{RetryLlm, RetryPolicy};
use crate::stop_words::StopWordLlm;
use crate::traits::Llm;

/// A provider this crate can route to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    OpenAi,
    Anthropic,
    Gemini,
    Azure,
    Ollama,
    OpenRouter,
    DeepSeek,
    Groq,
    Bedrock,
    /// Any other server speaking OpenAI's chat completions (`base_url` required).
    OpenAiCompatible,
}

impl Provider {
    /// The prefix used in model strings (`openai/gpt-4o`).
    pub fn prefix(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Azure => "azure",
            Provider::Ollama => "ollama",
            Provider::OpenRouter => "openrouter",
            Provider::DeepSeek => "deepseek",
            Provider::Groq => "groq",
            Provider::Bedrock => "bedrock",
            Provider::OpenAiCompatible => "openai_compatible",
        }
    }

    /// Recognises a provider name or prefix (CrewAI's aliases included).
    pub fn from_name(name: &str) -> Option<Provider> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "openai" => Provider::OpenAi,
            "anthropic" | "claude" => Provider::Anthropic,
            "gemini" | "google" | "google_genai" => Provider::Gemini,
            "azure" | "azure_openai" => Provider::Azure,
            "ollama" | "ollama_chat" => Provider::Ollama,
            "openrouter" => Provider::OpenRouter,
            "deepseek" => Provider::DeepSeek,
            "groq" => Provider::Groq,
            "bedrock" | "aws" => Provider::Bedrock,
            "openai_compatible" | "custom_openai" | "hosted_vllm" | "vllm" | "lm_studio"
            | "lmstudio" => Provider::OpenAiCompatible,
            _ => return None,
        })
    }

    /// The provider a bare model name belongs to.
    pub fn infer(model: &str) -> Option<Provider> {
        let name = model.to_ascii_lowercase();
        if name.starts_with("gpt-")
            || name.starts_with("chatgpt-")
            || crate::openai::is_reasoning_model(&name)
        {
            Some(Provider::OpenAi)
        } else if name.starts_with("claude-") {
            Some(Provider::Anthropic)
        } else if name.starts_with("gemini-") || name.starts_with("gemma-") {
            Some(Provider::Gemini)
        } else {
            None
        }
    }
}

/// Splits a model string into its provider and the model name the provider expects.
///
/// `explicit` (the config's `provider`) wins over a prefix. A bare name the table does not know
/// goes to OpenAI, as CrewAI does; an unknown prefix is kept as part of the name (model names on
/// vLLM-style servers contain slashes) and sent to OpenAI (or the configured `base_url`).
pub fn route(model: &str, explicit: Option<&str>) -> Result<(Provider, String), LlmError> {
    let model = model.trim();
    if let Some(name) = explicit.filter(|p| !p.trim().is_empty()) {
        let provider = Provider::from_name(name).ok_or_else(|| {
            LlmError::Config(format!(
                "unknown provider '{name}'; use one of openai, anthropic, gemini, azure, ollama, openrouter, deepseek, groq, bedrock, openai_compatible"
            ))
        })?;
        let stripped = match model.split_once('/') {
            Some((prefix, rest)) if Provider::from_name(prefix) == Some(provider) => rest,
            _ => model,
        };
        return Ok((provider, stripped.to_string()));
    }
    if let Some((prefix, rest)) = model.split_once('/')
        && let Some(provider) = Provider::from_name(prefix)
    {
        return Ok((provider, rest.to_string()));
    }
    Ok((
        Provider::infer(model).unwrap_or(Provider::OpenAi),
        model.to_string(),
    ))
}

/// Where a builder reads environment variables from (the process environment by default; tests
/// pass a map).
pub type EnvLookup<'a> = &'a (dyn Fn(&str) -> Option<String> + Send + Sync);

/// An owned environment source.
type SharedEnv = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Builds the client of a provider this crate does not contain (the embedded `local` model lives
/// in `crewai-local`, so this crate stays free of its dependencies). It receives the config with
/// `model` already filled in (from `MODEL` when the config had none) and its prefix still on.
pub type ProviderFactory = Arc<dyn Fn(&LlmConfig) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync>;

/// The provider name of the model that runs in the process (`local/smollm2-135m`).
pub const LOCAL_PROVIDER: &str = "local";

/// How [`build_llm_with`] builds: where it reads the environment, how it retries, which
/// transport the provider clients use (a cassette recorder or replayer; the network by default),
/// and the extra providers registered with [`BuildOptions::with_provider`].
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
    providers: std::collections::BTreeMap<String, ProviderFactory>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            env: Arc::new(process_env),
            retry: RetryPolicy::default(),
            transport: None,
            recorder: None,
            providers: Default::default(),
        }
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("retry", &self.retry)
            .field("transport", &self.transport.is_some())
            .field("recording", &self.recorder.is_some())
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
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

    /// Retry timing and count (a config's `max_retries` still overrides the count).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sends every provider request through `transport`.
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Records every exchange of every model built with these options into one cassette; each
    /// client keeps its own timeouts. Share the options among a crew's agents to record a run.
    pub fn with_recorder(mut self, recorder: Arc<CassetteRecorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Routes model strings prefixed `name/` (or configs with `provider: name`) to `factory`.
    /// The built client still gets the stop-word, retry and rate-limit wrappers.
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
        self.providers
            .insert(name.into().trim().to_ascii_lowercase(), factory);
        self
    }

    /// True when a factory is registered for `name`.
    pub fn has_provider(&self, name: &str) -> bool {
        self.providers
            .contains_key(&name.trim().to_ascii_lowercase())
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
fn first_env(env: EnvLookup<'_>, names: &[&str]) -> Option<String> {
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

/// Puts a client behind `transport` when one is given.
fn attach<T: Llm + 'static>(
    client: T,
    transport: Option<&Arc<dyn Transport>>,
    set: fn(T, Arc<dyn Transport>) -> T,
) -> Arc<dyn Llm> {
    match transport {
        Some(transport) => Arc::new(set(client, transport.clone())),
        None => Arc::new(client),
    }
}

/// Builds the provider client alone, without wrappers.
pub fn build_provider(
    config: &LlmConfig,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, LlmError> {
    let env: EnvLookup<'_> = options.env.as_ref();
    let transport: Option<Arc<dyn Transport>> = match (&options.transport, &options.recorder) {
        (inner, Some(recorder)) => {
            let inner: Arc<dyn Transport> = match inner {
                Some(inner) => inner.clone(),
                None => Arc::new(ReqwestTransport::new(
                    config.connect_timeout(),
                    config.request_timeout(),
                )?),
            };
            Some(recorder.tap(inner))
        }
        (inner, None) => inner.clone(),
    };
    let transport = transport.as_ref();
    let model_string = if config.model.trim().is_empty() {
        default_model(env)
    } else {
        config.model.clone()
    };
    if let Some(name) = provider_name(&model_string, config.provider.as_deref()) {
        if let Some(factory) = options.providers.get(&name) {
            let config = LlmConfig {
                model: model_string.clone(),
                ..config.clone()
            };
            return factory(&config);
        }
        if name == LOCAL_PROVIDER {
            return Err(LlmError::Unsupported(format!(
                "model '{model_string}' runs inside the process and needs the `local` feature of crewai-cli (on by default), \
                 or a program that registers `crewai_local::build` with `BuildOptions::with_provider(\"local\", ..)`"
            )));
        }
    }
    let (provider, model) = route(&model_string, config.provider.as_deref())?;
    let key = |names: &[&str]| {
        config
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| first_env(env, names))
    };
    let missing = |env_var: &str| LlmError::MissingApiKey {
        provider: provider.prefix().to_string(),
        env_var: env_var.to_string(),
    };

    // One arm per provider; OpenAI-compatible hosts differ only in their base URL and key variable.
    let compatible = |default_base: &str, key_var: &str| -> Result<Arc<dyn Llm>, LlmError> {
        let base = config
            .base_url
            .clone()
            .unwrap_or_else(|| default_base.to_string());
        let auth = match key(&[key_var]) {
            Some(k) => Auth::Bearer(k),
            None if is_local_url(&base) => Auth::None,
            None => return Err(missing(key_var)),
        };
        Ok(attach(
            OpenAiClient::compatible(provider.prefix(), &model, &base, auth, key_var, config)?,
            transport,
            OpenAiClient::with_transport,
        ))
    };

    match provider {
        Provider::OpenAi => {
            let base = config
                .base_url
                .clone()
                .or_else(|| first_env(env, &["OPENAI_BASE_URL", "OPENAI_API_BASE"]))
                .unwrap_or_else(|| OPENAI_BASE_URL.to_string());
            let auth = match key(&["OPENAI_API_KEY"]) {
                Some(k) => Auth::Bearer(k),
                None if is_local_url(&base) => Auth::None,
                None => return Err(missing("OPENAI_API_KEY")),
            };
            if config.api.map_or_else(
                || crate::openai_responses::only_on_responses_api(&model),
                |api| api == OpenAiApi::Responses,
            ) {
                let client = OpenAiResponsesClient::new(config, &model, &base, auth)?;
                return Ok(attach(
                    client,
                    transport,
                    OpenAiResponsesClient::with_transport,
                ));
            }
            let client =
                OpenAiClient::compatible("openai", &model, &base, auth, "OPENAI_API_KEY", config)?;
            Ok(attach(client, transport, OpenAiClient::with_transport))
        }
        Provider::Azure => {
            let api_key = key(&["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"])
                .ok_or_else(|| missing("AZURE_API_KEY"))?;
            let base = config
                .base_url
                .clone()
                .or_else(|| first_env(env, &["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT", "AZURE_ENDPOINT"]))
                .ok_or_else(|| {
                    LlmError::Config("azure needs an endpoint: set AZURE_API_BASE (https://<resource>.openai.azure.com) or base_url".into())
                })?;
            let version = config
                .api_version
                .clone()
                .or_else(|| first_env(env, &["AZURE_API_VERSION", "OPENAI_API_VERSION"]))
                .unwrap_or_else(|| AZURE_DEFAULT_API_VERSION.to_string());
            let client = OpenAiClient::azure(config, &model, &base, &version, api_key)?;
            Ok(attach(client, transport, OpenAiClient::with_transport))
        }
        Provider::Ollama => {
            let base = match &config.base_url {
                Some(base) => base.clone(),
                None => format!("{}/v1", ollama_host(env)),
            };
            let auth = key(&["OLLAMA_API_KEY"])
                .map(Auth::Bearer)
                .unwrap_or(Auth::None);
            let client =
                OpenAiClient::compatible("ollama", &model, &base, auth, "OLLAMA_API_KEY", config)?;
            Ok(attach(client, transport, OpenAiClient::with_transport))
        }
        Provider::OpenRouter => compatible("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Provider::DeepSeek => compatible("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        Provider::Groq => compatible("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        Provider::OpenAiCompatible => {
            let base = config.base_url.clone().or_else(|| first_env(env, &["OPENAI_BASE_URL", "OPENAI_API_BASE"])).ok_or_else(|| {
                LlmError::Config(format!("model '{model_string}' needs `base_url` pointing at an OpenAI-compatible server"))
            })?;
            let auth = key(&["OPENAI_API_KEY"])
                .map(Auth::Bearer)
                .unwrap_or(Auth::None);
            let client = OpenAiClient::compatible(
                "openai_compatible",
                &model,
                &base,
                auth,
                "OPENAI_API_KEY",
                config,
            )?;
            Ok(attach(client, transport, OpenAiClient::with_transport))
        }
        Provider::Anthropic => {
            let api_key =
                key(&["ANTHROPIC_API_KEY"]).ok_or_else(|| missing("ANTHROPIC_API_KEY"))?;
            let base = config
                .base_url
                .clone()
                .or_else(|| first_env(env, &["ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"]));
            Ok(attach(
                AnthropicLlm::new(&model, api_key, base.as_deref(), config)?,
                transport,
                AnthropicLlm::with_transport,
            ))
        }
        Provider::Gemini => {
            let api_key = key(&["GEMINI_API_KEY", "GOOGLE_API_KEY"])
                .ok_or_else(|| missing("GEMINI_API_KEY or GOOGLE_API_KEY"))?;
            let base = config
                .base_url
                .clone()
                .or_else(|| first_env(env, &["GEMINI_API_BASE"]));
            Ok(attach(
                GeminiLlm::new(&model, api_key, base.as_deref(), config)?,
                transport,
                GeminiLlm::with_transport,
            ))
        }
        #[cfg(feature = "bedrock")]
        Provider::Bedrock => {
            use crate::bedrock::{AwsCredentials, BedrockAuth, BedrockLlm};
            let auth = match (
                config.api_key.clone().filter(|k| !k.trim().is_empty()),
                first_env(env, &["AWS_BEARER_TOKEN_BEDROCK"]),
            ) {
                (Some(key), _) | (None, Some(key)) => BedrockAuth::ApiKey(key),
                (None, None) => match (
                    first_env(env, &["AWS_ACCESS_KEY_ID"]),
                    first_env(env, &["AWS_SECRET_ACCESS_KEY"]),
                ) {
                    (Some(access_key_id), Some(secret_access_key)) => {
                        BedrockAuth::SigV4(AwsCredentials {
                            access_key_id,
                            secret_access_key,
                            session_token: first_env(env, &["AWS_SESSION_TOKEN"]),
                        })
                    }
                    _ => {
                        return Err(missing(
                            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_BEARER_TOKEN_BEDROCK)",
                        ));
                    }
                },
            };
            let region = first_env(
                env,
                &["AWS_REGION", "AWS_REGION_NAME", "AWS_DEFAULT_REGION"],
            )
            .unwrap_or_else(|| "us-east-1".to_string());
            let client =
                BedrockLlm::new(&model, &region, auth, config.base_url.as_deref(), config)?;
            Ok(attach(client, transport, BedrockLlm::with_transport))
        }
        #[cfg(not(feature = "bedrock"))]
        Provider::Bedrock => Err(LlmError::Unsupported(format!(
            "model '{model_string}' needs Bedrock support: build crewai-llm with the `bedrock` feature"
        ))),
    }
}

/// The provider a config names explicitly, else the prefix of its model string, lowercased.
fn provider_name(model: &str, explicit: Option<&str>) -> Option<String> {
    explicit
        .filter(|p| !p.trim().is_empty())
        .or_else(|| model.trim().split_once('/').map(|(prefix, _)| prefix))
        .map(|name| name.trim().to_ascii_lowercase())
}

/// `OLLAMA_HOST` as a URL (it is often given without a scheme, like `0.0.0.0:11434`).
fn ollama_host(env: EnvLookup<'_>) -> String {
    let host = first_env(env, &["OLLAMA_HOST", "OLLAMA_API_BASE"])
        .unwrap_or_else(|| "http://localhost:11434".to_string());
    let host = if host.contains("://") {
        host
    } else {
        format!("http://{host}")
    };
    let host = host.trim_end_matches('/');
    host.strip_suffix("/v1").unwrap_or(host).to_string()
}

/// Builds one model with its wrappers: provider client → stop words → retries → rate limit.
pub fn build_single(config: &LlmConfig, options: &BuildOptions) -> Result<Arc<dyn Llm>, LlmError> {
    let client = build_provider(config, options)?;
    let mut llm: Arc<dyn Llm> = Arc::new(StopWordLlm::new(client, config.stop.clone()));
    let policy = RetryPolicy {
        max_retries: config.max_retries.unwrap_or(options.retry.max_retries),
        ..options.retry.clone()
    };
    if policy.max_retries > 0 {
        llm = Arc::new(RetryLlm::new(llm, policy));
    }
    if config.max_rpm.is_some() || config.max_tpm.is_some() {
        llm = Arc::new(RateLimitedLlm::new(
            llm,
            RateLimiter::new(config.max_rpm, config.max_tpm),
        ));
    }
    Ok(llm)
}

/// [`build_llm`] with explicit [`BuildOptions`] (environment, retry timing, transport), then
/// the fallback chain of `config.fallback_llms`, each built the same way.
pub fn build_llm_with(
    config: &LlmConfig,
    options: &BuildOptions,
) -> Result<Arc<dyn Llm>, LlmError> {
    let primary = build_single(config, options)?;
    if config.fallback_llms.is_empty() {
        return Ok(primary);
    }
    let mut chain = vec![primary];
    for fallback in &config.fallback_llms {
        chain.push(build_llm_with(fallback, options)?);
    }
    Ok(Arc::new(FallbackLlm::new(chain)?))
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
    fn prefixes_and_bare_names_route() {
        let cases = [
            ("openai/gpt-4o", Provider::OpenAi, "gpt-4o"),
            ("gpt-4.1-mini", Provider::OpenAi, "gpt-4.1-mini"),
            ("o1", Provider::OpenAi, "o1"),
            ("o4-mini", Provider::OpenAi, "o4-mini"),
            (
                "claude-3-5-haiku-latest",
                Provider::Anthropic,
                "claude-3-5-haiku-latest",
            ),
            ("gemini/gemini-2.5-pro", Provider::Gemini, "gemini-2.5-pro"),
            ("azure/my-deployment", Provider::Azure, "my-deployment"),
            ("ollama/llama3.1:8b", Provider::Ollama, "llama3.1:8b"),
            (
                "openrouter/meta-llama/llama-3-70b",
                Provider::OpenRouter,
                "meta-llama/llama-3-70b",
            ),
            (
                "deepseek/deepseek-chat",
                Provider::DeepSeek,
                "deepseek-chat",
            ),
            (
                "groq/llama-3.3-70b-versatile",
                Provider::Groq,
                "llama-3.3-70b-versatile",
            ),
            (
                "bedrock/anthropic.claude-3",
                Provider::Bedrock,
                "anthropic.claude-3",
            ),
            (
                "meta-llama/Llama-3.1-8B",
                Provider::OpenAi,
                "meta-llama/Llama-3.1-8B",
            ),
        ];
        for (input, provider, model) in cases {
            assert_eq!(
                route(input, None).unwrap(),
                (provider, model.to_string()),
                "{input}"
            );
        }
        assert_eq!(
            route("openai/gpt-4o", Some("azure")).unwrap(),
            (Provider::Azure, "openai/gpt-4o".to_string())
        );
        assert!(route("x", Some("nope")).is_err());
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
    async fn registered_providers_build_their_models_with_the_usual_wrappers() {
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
            .map(|e| e.to_string())
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
        .map(|e| e.to_string());
        assert!(message.unwrap_or_default().contains("local"));
    }

    #[test]
    fn ollama_host_without_scheme() {
        assert_eq!(
            ollama_host(&env_of(&[("OLLAMA_HOST", "0.0.0.0:11434")])),
            "http://0.0.0.0:11434"
        );
        assert_eq!(ollama_host(&env_of(&[])), "http://localhost:11434");
    }
}
