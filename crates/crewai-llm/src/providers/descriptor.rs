//! What a provider declares about itself: its names, the variables its key and endpoint are read
//! from, its default endpoint, what its API needs, its OpenTelemetry name, the context windows of
//! the models it serves, which bare model names are its own, and the model a program picks when
//! only this provider is configured.
//!
//! A descriptor is plain data; the code that turns a config into a client is the provider's
//! factory, registered beside it (see [`super::Provider`]).

/// How a provider's API key is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyRequirement {
    /// Always: building fails without one (Anthropic, Gemini, Azure).
    Required,
    /// Unless the base URL is on this machine or a private network, where servers usually take
    /// none (OpenAI and hosted OpenAI-compatible APIs).
    #[default]
    UnlessLocal,
    /// Sent when set, never required (Ollama, self-hosted OpenAI-compatible servers).
    Optional,
    /// The provider takes no key (the embedded model).
    None,
}

/// What a provider's API needs and accepts, as far as building a client goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderCapabilities {
    /// Whether a request may go out without an API key.
    pub api_key: KeyRequirement,
    /// Stop words go in the request body too. They are always cut on the client as well
    /// ([`crate::stop_words`]); OpenAI and Azure get none in the body, as CrewAI sends them.
    pub server_stop_words: bool,
}

impl Default for ProviderCapabilities {
    /// A hosted OpenAI-compatible API: a key unless local, stop words in the body.
    fn default() -> Self {
        ProviderCapabilities {
            api_key: KeyRequirement::UnlessLocal,
            server_stop_words: true,
        }
    }
}

/// A rule saying a bare model name (no `provider/` prefix) belongs to a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelPattern {
    /// Names that start with this, ignoring case (`claude-`).
    Prefix(String),
    /// This family name alone or followed by `-` or `.`, ignoring case (`o3` claims `o3` and
    /// `o3-mini`, not `o30b`).
    Family(String),
}

impl ModelPattern {
    /// Whether `name` (already lowercase) matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            ModelPattern::Prefix(prefix) => name.starts_with(prefix.as_str()),
            ModelPattern::Family(family) => name
                .strip_prefix(family.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.'])),
        }
    }
}

/// The model a program picks when this provider's key is the only thing configured (the CLI's
/// default-model choice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultModel {
    /// The model string (`anthropic/claude-sonnet-4-5`).
    pub model: String,
    /// A variable naming the model instead, without the prefix (Azure's
    /// `AZURE_DEPLOYMENT_NAME`: a deployment is only known to its owner).
    pub model_env: Option<String>,
}

/// Everything the router, the default-model choice and the telemetry need to know about one
/// provider.
///
/// ```
/// use crewai_llm::providers::{KeyRequirement, ProviderCapabilities, ProviderDescriptor};
/// let descriptor = ProviderDescriptor::new("MyProv")
///     .alias("my_provider")
///     .key_env(["MYPROV_API_KEY"])
///     .base_url_env(["MYPROV_API_BASE"])
///     .default_base_url("https://api.myprov.example/v1")
///     .capabilities(ProviderCapabilities { api_key: KeyRequirement::Required, server_stop_words: true })
///     .context_windows([("myprov-large", 65_536)])
///     .infer_prefixes(["myprov-"]);
/// assert_eq!(descriptor.name, "myprov");
/// assert!(descriptor.answers_to("MY_PROVIDER"));
/// assert!(descriptor.claims("myprov-large-2"));
/// assert_eq!(descriptor.context_window("myprov-large-2"), Some(65_536));
/// assert_eq!(descriptor.gen_ai_system(), "myprov");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProviderDescriptor {
    /// The canonical name, also the model-string prefix (`anthropic`), lowercase.
    pub name: String,
    /// Other prefixes (or `provider:` values) that mean this provider, lowercase.
    pub aliases: Vec<String>,
    /// Variables the API key is read from, first set wins (after the config's `api_key`).
    pub key_env: Vec<String>,
    /// Variables the base URL is read from, first set wins (after the config's `base_url`).
    pub base_url_env: Vec<String>,
    /// The endpoint used when neither the config nor a variable names one.
    pub default_base_url: Option<String>,
    pub capabilities: ProviderCapabilities,
    /// The OpenTelemetry provider name; see [`ProviderDescriptor::gen_ai_system`].
    pub otel_system: Option<String>,
    /// Context windows of the provider's models, by lowercase model-name prefix.
    pub context_windows: Vec<(String, u64)>,
    /// Which bare model names are this provider's.
    pub patterns: Vec<ModelPattern>,
    /// The model picked when only this provider is configured.
    pub default_model: Option<DefaultModel>,
}

fn lower(name: impl Into<String>) -> String {
    name.into().trim().to_ascii_lowercase()
}

impl ProviderDescriptor {
    /// A provider called `name` (its model-string prefix, lowercased) that declares nothing else
    /// yet: no key or endpoint variables, the default capabilities, its own name as its
    /// OpenTelemetry name.
    pub fn new(name: impl Into<String>) -> Self {
        ProviderDescriptor {
            name: lower(name),
            aliases: Vec::new(),
            key_env: Vec::new(),
            base_url_env: Vec::new(),
            default_base_url: None,
            capabilities: ProviderCapabilities::default(),
            otel_system: None,
            context_windows: Vec::new(),
            patterns: Vec::new(),
            default_model: None,
        }
    }

    /// Another prefix (or `provider:` value) that means this provider (CrewAI's `claude` for
    /// Anthropic, `google` for Gemini).
    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        self.aliases.push(lower(alias));
        self
    }

    /// Several aliases.
    pub fn aliases<S: Into<String>>(mut self, aliases: impl IntoIterator<Item = S>) -> Self {
        self.aliases.extend(aliases.into_iter().map(lower));
        self
    }

    /// The variables the API key is read from, first set wins (after the config's `api_key`).
    pub fn key_env<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.key_env = names.into_iter().map(Into::into).collect();
        self
    }

    /// The variables the base URL is read from, first set wins (after the config's `base_url`).
    pub fn base_url_env<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.base_url_env = names.into_iter().map(Into::into).collect();
        self
    }

    setters! {
        /// The endpoint used when neither the config nor a variable names one.
        pub fn default_base_url(url: impl Into<String>) => default_base_url = Some(url.into());
        pub fn capabilities(capabilities: ProviderCapabilities) => capabilities = capabilities;
        /// The `gen_ai.provider.name` (formerly `gen_ai.system`) value of the OpenTelemetry GenAI
        /// conventions; the provider's name when not set.
        pub fn otel_system(system: impl Into<String>) => otel_system = Some(system.into());
    }

    /// Context windows of the provider's models, by model-name prefix (the longest match wins).
    pub fn context_windows<S: Into<String>>(
        mut self,
        windows: impl IntoIterator<Item = (S, u64)>,
    ) -> Self {
        self.context_windows
            .extend(windows.into_iter().map(|(m, size)| (lower(m), size)));
        self
    }

    /// Bare model names starting with one of these belong to this provider.
    pub fn infer_prefixes<S: Into<String>>(self, prefixes: impl IntoIterator<Item = S>) -> Self {
        self.infer(prefixes, ModelPattern::Prefix)
    }

    /// Bare model names of these families (the name alone or followed by `-` or `.`) belong to
    /// this provider.
    pub fn infer_families<S: Into<String>>(self, families: impl IntoIterator<Item = S>) -> Self {
        self.infer(families, ModelPattern::Family)
    }

    fn infer<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
        pattern: fn(String) -> ModelPattern,
    ) -> Self {
        self.patterns
            .extend(names.into_iter().map(|name| pattern(lower(name))));
        self
    }

    /// The model picked when this provider's key is set and nothing else names a model.
    pub fn default_model(mut self, model: impl Into<String>) -> Self {
        self.default_model = Some(DefaultModel {
            model: model.into(),
            model_env: None,
        });
        self
    }

    /// The default model, or the one a variable names (prefixed with this provider's name).
    pub fn default_model_from_env(
        mut self,
        model: impl Into<String>,
        variable: impl Into<String>,
    ) -> Self {
        self.default_model = Some(DefaultModel {
            model: model.into(),
            model_env: Some(variable.into()),
        });
        self
    }

    /// The name and the aliases.
    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.aliases.iter().map(String::as_str))
    }

    /// True when `name` (any case, surrounding spaces ignored) is this provider's name or alias.
    pub fn answers_to(&self, name: &str) -> bool {
        let name = name.trim();
        self.prefixes().any(|p| p.eq_ignore_ascii_case(name))
    }

    /// The default base URL moved onto another origin, keeping its path
    /// (`https://api.openai.com/v1` on `http://127.0.0.1:9` is `http://127.0.0.1:9/v1`): where a
    /// local test server that speaks this provider's API is reached.
    pub fn base_url_at(&self, origin: &str) -> String {
        let origin = origin.trim_end_matches('/');
        let path = self
            .default_base_url
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok())
            .map(|url| url.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        format!("{origin}{path}")
    }

    /// The `gen_ai.provider.name` value of the OpenTelemetry GenAI conventions (`gcp.gemini`,
    /// `aws.bedrock`): [`ProviderDescriptor::otel_system`], else the provider's name.
    pub fn gen_ai_system(&self) -> &str {
        self.otel_system.as_deref().unwrap_or(&self.name)
    }

    /// The context window this provider declares for `model` (a `provider/` prefix and case are
    /// ignored; the longest matching entry wins).
    pub fn context_window(&self, model: &str) -> Option<u64> {
        longest_window(self.context_windows.iter(), model)
    }

    /// True when the bare model name `model` belongs to this provider by its patterns.
    pub fn claims(&self, model: &str) -> bool {
        let name = model.trim().to_ascii_lowercase();
        self.patterns.iter().any(|p| p.matches(&name))
    }
}

/// The longest entry of `windows` that `model` (without its `provider/` prefixes) starts with.
pub(crate) fn longest_window<'a>(
    windows: impl Iterator<Item = &'a (String, u64)>,
    model: &str,
) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    windows
        .filter(|(prefix, _)| name.starts_with(prefix.as_str()))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, size)| *size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_end_at_a_separator() {
        let o3 = ModelPattern::Family("o3".into());
        assert!(o3.matches("o3"));
        assert!(o3.matches("o3-mini"));
        assert!(o3.matches("o3.1"));
        assert!(!o3.matches("o30b"));
        assert!(ModelPattern::Prefix("claude-".into()).matches("claude-3-opus"));
    }

    #[test]
    fn base_urls_move_to_a_test_origin_with_their_path() {
        let openai =
            ProviderDescriptor::new("openai").default_base_url("https://api.openai.com/v1");
        assert_eq!(
            openai.base_url_at("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/v1"
        );
        let root =
            ProviderDescriptor::new("anthropic").default_base_url("https://api.anthropic.com");
        assert_eq!(root.base_url_at("http://127.0.0.1:9"), "http://127.0.0.1:9");
        assert_eq!(
            ProviderDescriptor::new("azure").base_url_at("http://h"),
            "http://h"
        );
    }

    #[test]
    fn names_are_lowercase_and_windows_ignore_prefixes() {
        let d = ProviderDescriptor::new(" Groq ")
            .alias("GROQ_CLOUD")
            .context_windows([("Llama-3.1", 131_072), ("llama", 8_192)]);
        assert_eq!(d.prefixes().collect::<Vec<_>>(), ["groq", "groq_cloud"]);
        assert_eq!(d.context_window("groq/llama-3.1-8b-instant"), Some(131_072));
        assert_eq!(d.context_window("llama-2"), Some(8_192));
        assert_eq!(d.context_window("mixtral"), None);
    }
}
