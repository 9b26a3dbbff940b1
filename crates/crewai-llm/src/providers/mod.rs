//! The providers a model string can route to, as a value: a [`ProviderRegistry`] of
//! [`Provider`]s, each a [`ProviderDescriptor`] (names, key and endpoint variables, capabilities,
//! OpenTelemetry name, context windows, which bare model names it claims, its default model) and
//! a factory that builds its client. The router, the CLI's default-model choice, the OpenTelemetry
//! `gen_ai.provider.name` attribute and the conformance runner all read the registry; nothing
//! else keeps a list of providers. There is no global registry: [`ProviderRegistry::builtin`]
//! returns a fresh value, and a build carries its own in [`crate::BuildOptions`].
//!
//! Each provider is one module here that declares its descriptor and factory; the registry
//! is [`ProviderRegistry::builtin`], one line per provider.
//!
//! | Provider (prefix; aliases) | Bare names | Key | Endpoint (default) |
//! |---|---|---|---|
//! | `openai` | `gpt-*`, `chatgpt-*`, `o1`/`o3`/`o4`, unclaimed names | `OPENAI_API_KEY` (optional for a local `base_url`) | `OPENAI_BASE_URL` or `OPENAI_API_BASE` (`https://api.openai.com/v1`) |
//! | `anthropic`; `claude` | `claude-*` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` or `ANTHROPIC_API_BASE` (`https://api.anthropic.com`) |
//! | `gemini`; `google`, `google_genai` | `gemini-*`, `gemma-*` | `GEMINI_API_KEY` or `GOOGLE_API_KEY` | `GEMINI_API_BASE` (Google's) |
//! | `azure`; `azure_openai` | | `AZURE_API_KEY` or `AZURE_OPENAI_API_KEY` | `AZURE_API_BASE` + `AZURE_API_VERSION` |
//! | `vertex_ai`; `vertex_ai_beta` | | Google credentials: `vertex_credentials`, `VERTEXAI_CREDENTIALS`, `GOOGLE_APPLICATION_CREDENTIALS` or gcloud's ADC file; `VERTEXAI_PROJECT`, `VERTEXAI_LOCATION` | `VERTEXAI_API_BASE` (`https://{location}-aiplatform.googleapis.com`) |
//! | `watsonx` (`watsonx_text` refused) | | `WATSONX_TOKEN`, `WATSONX_ZENAPIKEY` or `WATSONX_APIKEY` (exchanged at IAM); `WATSONX_PROJECT_ID` or `WATSONX_SPACE_ID` | `WATSONX_URL` (required) |
//! | `ollama`; `ollama_chat` | | none | `OLLAMA_HOST` (`http://localhost:11434`) + `/v1` |
//! | `openrouter` | | `OPENROUTER_API_KEY` | `OPENROUTER_API_BASE` (`https://openrouter.ai/api/v1`) |
//! | `deepseek` | | `DEEPSEEK_API_KEY` | `DEEPSEEK_API_BASE` (`https://api.deepseek.com/v1`) |
//! | `groq` | | `GROQ_API_KEY` | `GROQ_API_BASE` (`https://api.groq.com/openai/v1`) |
//! | `openai_compatible`; `custom_openai`, `hosted_vllm`, `vllm`, `lm_studio`, `lmstudio` | | `OPENAI_API_KEY` (optional) | `base_url`, `OPENAI_BASE_URL` or `OPENAI_API_BASE` (required) |
//! | `bedrock`; `aws` | | `AWS_BEARER_TOKEN_BEDROCK`, else AWS credentials as the AWS SDK finds them (`AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`), `AWS_PROFILE` and `~/.aws/credentials` / `~/.aws/config`, SSO, the container endpoint, IMDSv2) | `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_REGION_NAME` or the profile's `region` (`us-east-1`) |
//! | `local` (registered by the CLI from crewai-local) | | none | in the process |
//!
//! OpenAI's Responses API is not a provider of its own: an `openai` model speaks it when the
//! config says `api: responses`, or when the model exists only there (`o3-pro`, `codex-mini`).
//!
//! # Routing
//!
//! [`ProviderRegistry::route`] turns a config's `model` (and `provider`, `base_url`) into a
//! provider and the model name that provider is sent, by the first rule that applies:
//!
//! 1. `provider:` is set: that provider (an unknown name is an error listing the known ones). A
//!    prefix naming the same provider is removed; any other name is passed whole
//!    (`provider: openai_compatible` with `meta-llama/Llama-3-8B`).
//! 2. The model has a known prefix: that provider, with the rest of the name, slashes and all
//!    (`openrouter/meta-llama/llama-3` sends `meta-llama/llama-3` to OpenRouter).
//! 3. The prefix is unknown but the config sets `base_url`: OpenAI's chat completions at that
//!    URL, with the whole name (`meta-llama/Llama-3-8B` on a vLLM server).
//! 4. The prefix is unknown and there is no `base_url`: an error listing the known prefixes
//!    (a misspelt `antropic/claude-3` must not be sent to OpenAI with the key of another
//!    provider). `openai/meta-llama/Llama-3-8B` says "this server speaks OpenAI's API" instead.
//! 5. A bare name (no slash) that a provider claims: that provider (`claude-3-5-haiku`).
//! 6. Any other bare name: OpenAI, as CrewAI does.
//!
//! ```
//! use crewai_llm::LlmConfig;
//! use crewai_llm::providers::ProviderRegistry;
//! let registry = ProviderRegistry::builtin();
//! let route = |config: LlmConfig| registry.route(&config).map(|r| (r.provider().name.clone(), r.model().to_string()));
//! assert_eq!(route(LlmConfig::new("claude/claude-sonnet-4-5")).unwrap(), ("anthropic".into(), "claude-sonnet-4-5".into()));
//! assert_eq!(route(LlmConfig::new("gemini-2.5-flash")).unwrap().0, "gemini");
//! assert_eq!(route(LlmConfig::new("my-finetune")).unwrap().0, "openai");
//! let vllm = LlmConfig::new("meta-llama/Llama-3-8B").with_base_url("http://localhost:8000/v1");
//! assert_eq!(route(vllm).unwrap(), ("openai".into(), "meta-llama/Llama-3-8B".into()));
//! assert!(route(LlmConfig::new("antropic/claude-3")).unwrap_err().to_string().contains("anthropic"));
//! ```

use std::sync::{Arc, LazyLock};

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::traits::Llm;

pub mod anthropic;
pub mod azure;
pub mod bedrock;
mod context;
pub mod deepseek;
mod descriptor;
pub mod gemini;
pub mod groq;
mod hosted;
pub mod local;
pub mod ollama;
pub mod openai;
pub mod openai_compatible;
pub mod openrouter;
pub mod vertex;
pub mod watsonx;

pub use context::ProviderContext;
pub use descriptor::{
    DefaultModel, KeyRequirement, ModelPattern, ProviderCapabilities, ProviderDescriptor,
};

/// The provider a bare model name goes to when no provider claims it (CrewAI's default).
pub const FALLBACK_PROVIDER: &str = "openai";

/// Builds a provider's client from a [`ProviderContext`].
pub type ProviderBuilder =
    Arc<dyn Fn(&ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync>;

/// Builds the client of a provider from the config alone, `model` still carrying its prefix
/// (the form [`crate::BuildOptions::with_provider`] takes, used for the embedded `local` model
/// of crewai-local).
pub type ProviderFactory = Arc<dyn Fn(&LlmConfig) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync>;

#[derive(Clone)]
enum Build {
    Factory(ProviderBuilder),
    /// Known, but this build cannot make it; the text says what would (`local` until a program
    /// registers crewai-local's factory).
    Unavailable(String),
}

/// One provider: what it declares and how its client is built.
#[derive(Clone)]
pub struct Provider {
    descriptor: ProviderDescriptor,
    build: Build,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("descriptor", &self.descriptor)
            .field("available", &self.is_available())
            .finish()
    }
}

impl Provider {
    /// A provider built by `build`.
    pub fn new(
        descriptor: ProviderDescriptor,
        build: impl Fn(&ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> + Send + Sync + 'static,
    ) -> Self {
        Provider {
            descriptor,
            build: Build::Factory(Arc::new(build)),
        }
    }

    /// A provider that speaks OpenAI's chat completions: the whole provider is its descriptor
    /// (key from its key variables or `api_key`, endpoint from `base_url`, its base-URL
    /// variables or its default, auth as its [`KeyRequirement`] says).
    ///
    /// ```
    /// use crewai_llm::providers::{Provider, ProviderDescriptor};
    /// let together = Provider::openai_compatible(
    ///     ProviderDescriptor::new("together")
    ///         .key_env(["TOGETHERAI_API_KEY"])
    ///         .default_base_url("https://api.together.xyz/v1"),
    /// );
    /// assert!(together.is_available());
    /// ```
    pub fn openai_compatible(descriptor: ProviderDescriptor) -> Self {
        Provider::new(descriptor, openai_compatible::build)
    }

    /// A provider with a [`ProviderFactory`]: it gets the config with the model string as
    /// written (prefix on).
    pub fn from_factory(descriptor: ProviderDescriptor, factory: ProviderFactory) -> Self {
        Provider::new(descriptor, move |cx: &ProviderContext<'_>| {
            factory(cx.config())
        })
    }

    /// A provider this build knows but cannot make; building one of its models fails with
    /// "model '<model>' <reason>".
    pub fn unavailable(descriptor: ProviderDescriptor, reason: impl Into<String>) -> Self {
        Provider {
            descriptor,
            build: Build::Unavailable(reason.into()),
        }
    }

    pub fn descriptor(&self) -> &ProviderDescriptor {
        &self.descriptor
    }

    /// False for a provider registered as [`Provider::unavailable`].
    pub fn is_available(&self) -> bool {
        matches!(self.build, Build::Factory(_))
    }

    /// Builds the client for one routed model.
    pub fn build(&self, cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
        match &self.build {
            Build::Factory(build) => build(cx),
            Build::Unavailable(reason) => Err(LlmError::Unsupported(format!(
                "model '{}' {reason}",
                cx.config().model.trim()
            ))),
        }
    }
}

/// A model string resolved to its provider.
#[derive(Debug, Clone)]
pub struct Route<'r> {
    provider: &'r Provider,
    model: String,
}

impl<'r> Route<'r> {
    fn to(provider: &'r Provider, model: &str) -> Self {
        Route {
            provider,
            model: model.to_string(),
        }
    }

    /// The provider's descriptor.
    pub fn provider(&self) -> &'r ProviderDescriptor {
        &self.provider.descriptor
    }

    /// The provider itself (to build with).
    pub fn target(&self) -> &'r Provider {
        self.provider
    }

    /// The model name the provider is sent.
    pub fn model(&self) -> &str {
        &self.model
    }
}

/// The providers a build can route to, in registration order (the order the CLI tries their
/// keys in). Cheap to clone.
///
/// ```
/// use crewai_llm::providers::{Provider, ProviderDescriptor, ProviderRegistry};
/// let registry = ProviderRegistry::builtin().with(Provider::openai_compatible(
///     ProviderDescriptor::new("myprov").default_base_url("https://api.myprov.example/v1"),
/// ));
/// assert!(registry.get("myprov").is_some());
/// assert_eq!(registry.get("claude").map(|d| d.name.as_str()), Some("anthropic"));
/// assert_eq!(registry.gen_ai_system("gemini/gemini-2.5-pro"), "gcp.gemini");
/// ```
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    providers: Vec<Arc<Provider>>,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.providers.iter().map(|p| &p.descriptor.name))
            .finish()
    }
}

/// The built-in registry, made once: it is immutable data (like the built-in price table), and
/// [`ProviderRegistry::builtin`] hands out copies that callers extend on their own.
static BUILTIN: LazyLock<ProviderRegistry> = LazyLock::new(|| {
    let mut registry = ProviderRegistry::empty();
    // The order is the CLI's default-model order: OpenAI, Anthropic, Gemini, Azure.
    registry.register(openai::provider());
    registry.register(anthropic::provider());
    registry.register(gemini::provider());
    registry.register(azure::provider());
    registry.register(vertex::provider());
    registry.register(watsonx::provider());
    registry.register(watsonx::text_provider());
    registry.register(ollama::provider());
    registry.register(openrouter::provider());
    registry.register(deepseek::provider());
    registry.register(groq::provider());
    for provider in hosted::providers() {
        registry.register(provider);
    }
    registry.register(openai_compatible::provider());
    registry.register(bedrock::provider());
    registry.register(local::provider());
    registry
});

impl ProviderRegistry {
    /// No providers at all.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every provider this crate contains, plus `local` (unavailable until a program registers
    /// crewai-local's factory with [`ProviderRegistry::set_factory`]).
    pub fn builtin() -> Self {
        BUILTIN.clone()
    }

    /// The built-in registry without copying it.
    pub(crate) fn builtin_ref() -> &'static ProviderRegistry {
        &BUILTIN
    }

    /// Adds `provider`, or replaces the one of the same name in its place. A later provider
    /// wins a name or alias an earlier one also answers to.
    pub fn register(&mut self, provider: Provider) {
        let provider = Arc::new(provider);
        match self
            .providers
            .iter_mut()
            .find(|p| p.descriptor.name == provider.descriptor.name)
        {
            Some(slot) => *slot = provider,
            None => self.providers.push(provider),
        }
    }

    /// [`ProviderRegistry::register`], by value.
    pub fn with(mut self, provider: Provider) -> Self {
        self.register(provider);
        self
    }

    /// Makes the provider called `name` (or answering to it) build with `factory`, keeping its
    /// descriptor; a name no provider answers to becomes a provider with a bare descriptor.
    pub fn set_factory(&mut self, name: &str, factory: ProviderFactory) {
        let descriptor = self
            .get(name)
            .cloned()
            .unwrap_or_else(|| ProviderDescriptor::new(name));
        self.register(Provider::from_factory(descriptor, factory));
    }

    /// The providers, in registration order.
    pub fn providers(&self) -> impl Iterator<Item = &Provider> {
        self.providers.iter().map(Arc::as_ref)
    }

    /// The descriptors, in registration order.
    pub fn descriptors(&self) -> impl Iterator<Item = &ProviderDescriptor> {
        self.providers().map(|p| &p.descriptor)
    }

    /// The provider called `name` or answering to it as an alias (any case).
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers
            .iter()
            .rev()
            .find(|p| p.descriptor.answers_to(name))
            .map(Arc::as_ref)
    }

    /// The descriptor of [`ProviderRegistry::provider`].
    pub fn get(&self, name: &str) -> Option<&ProviderDescriptor> {
        self.provider(name).map(|p| &p.descriptor)
    }

    /// True when a provider answers to `name` and this build can make its models.
    pub fn is_available(&self, name: &str) -> bool {
        self.provider(name).is_some_and(Provider::is_available)
    }

    /// Every name and alias, sorted (what an unknown prefix is told to use instead).
    pub fn prefixes(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .descriptors()
            .flat_map(|d| d.prefixes().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The provider that claims the bare model name `model`, if one does.
    pub fn infer(&self, model: &str) -> Option<&Provider> {
        self.providers
            .iter()
            .rev()
            .find(|p| p.descriptor.claims(model))
            .map(Arc::as_ref)
    }

    fn unknown(&self, name: &str, model: Option<&str>) -> LlmError {
        LlmError::UnknownProvider {
            name: name.to_string(),
            model: model.map(str::to_string),
            known: self.prefixes(),
        }
    }

    fn fallback(&self, model: &str) -> Result<&Provider, LlmError> {
        self.provider(FALLBACK_PROVIDER)
            .ok_or_else(|| self.unknown(FALLBACK_PROVIDER, Some(model)))
    }

    /// Resolves the config's model to a provider and the name it is sent, by the rules in the
    /// [module docs](self).
    pub fn route(&self, config: &LlmConfig) -> Result<Route<'_>, LlmError> {
        let model = config.model.trim();
        let explicit = config
            .provider
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty());
        let has_base_url = config
            .base_url
            .as_deref()
            .is_some_and(|b| !b.trim().is_empty());
        if let Some(name) = explicit {
            let provider = self
                .provider(name)
                .ok_or_else(|| self.unknown(name, None))?;
            let sent = match model.split_once('/') {
                Some((prefix, rest)) if provider.descriptor.answers_to(prefix) => rest,
                _ => model,
            };
            return Ok(Route::to(provider, sent));
        }
        if let Some((prefix, rest)) = model.split_once('/') {
            if let Some(provider) = self.provider(prefix) {
                return Ok(Route::to(provider, rest));
            }
            if has_base_url {
                return Ok(Route::to(self.fallback(model)?, model));
            }
            return Err(self.unknown(prefix, Some(model)));
        }
        match self.infer(model) {
            Some(provider) => Ok(Route::to(provider, model)),
            None => Ok(Route::to(self.fallback(model)?, model)),
        }
    }

    /// The OpenTelemetry `gen_ai.provider.name` of a model string: its prefix's provider, else
    /// the provider claiming the bare name, else the fallback provider's.
    pub fn gen_ai_system(&self, model: &str) -> &str {
        let model = model.trim();
        let by_prefix = model
            .split_once('/')
            .and_then(|(prefix, _)| self.get(prefix));
        by_prefix
            .or_else(|| self.infer(model).map(Provider::descriptor))
            .or_else(|| self.get(FALLBACK_PROVIDER))
            .map_or(FALLBACK_PROVIDER, ProviderDescriptor::gen_ai_system)
    }

    /// The context window any provider here declares for `model` (longest matching entry
    /// over all of them; a `provider/` prefix is ignored).
    pub fn known_context_window(&self, model: &str) -> Option<u64> {
        descriptor::longest_window(
            self.descriptors().flat_map(|d| d.context_windows.iter()),
            model,
        )
    }
}

#[cfg(test)]
mod tests;
