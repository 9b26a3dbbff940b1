//! What a provider's factory is handed: the config, the routed model name, the provider's own
//! descriptor, the environment and the transport, with the lookups every provider repeats
//! (key, base URL, auth) done the one way the descriptor declares.

use std::sync::Arc;

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::Transport;
use crate::openai::Auth;
use crate::router::{EnvLookup, first_env, is_local_url};
use crate::traits::Llm;

use super::descriptor::{KeyRequirement, ProviderDescriptor};

/// One build of one model by one provider's factory.
pub struct ProviderContext<'a> {
    pub(crate) descriptor: &'a ProviderDescriptor,
    pub(crate) config: &'a LlmConfig,
    pub(crate) model: &'a str,
    pub(crate) env: EnvLookup<'a>,
    pub(crate) transport: Option<&'a Arc<dyn Transport>>,
}

impl std::fmt::Debug for ProviderContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderContext")
            .field("provider", &self.descriptor.name)
            .field("model", &self.model)
            .field("transport", &self.transport.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a> ProviderContext<'a> {
    /// The provider being built.
    pub fn descriptor(&self) -> &'a ProviderDescriptor {
        self.descriptor
    }

    /// The config, with `model` as the user wrote it (prefix still on; `MODEL` filled in when
    /// the config named none).
    pub fn config(&self) -> &'a LlmConfig {
        self.config
    }

    /// The model name the provider expects (the routed name: prefix removed, or the whole name
    /// when it was passed through).
    pub fn model(&self) -> &'a str {
        self.model
    }

    /// The first of `names` that is set and not blank in the build's environment.
    pub fn env(&self, names: &[&str]) -> Option<String> {
        first_env(self.env, names)
    }

    /// The build's environment lookup, for helpers that take one.
    pub fn env_lookup(&self) -> EnvLookup<'a> {
        self.env
    }

    /// The config's `api_key`, else the first of the descriptor's key variables that is set.
    pub fn api_key(&self) -> Option<String> {
        self.config
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| self.env(&names(&self.descriptor.key_env)))
    }

    /// The error for a missing key, naming the descriptor's key variables.
    pub fn missing_key(&self) -> LlmError {
        self.missing_key_named(&self.descriptor.key_env.join(" or "))
    }

    /// The error for a missing key, naming `env_var` (when the variables to suggest are not
    /// simply the ones read).
    pub fn missing_key_named(&self, env_var: &str) -> LlmError {
        LlmError::MissingApiKey {
            provider: self.descriptor.name.clone(),
            env_var: env_var.to_string(),
        }
    }

    /// The key, or the missing-key error.
    pub fn require_api_key(&self) -> Result<String, LlmError> {
        self.api_key().ok_or_else(|| self.missing_key())
    }

    /// The config's `base_url`, else the first of the descriptor's base-URL variables that is
    /// set, else its default base URL.
    pub fn base_url(&self) -> Option<String> {
        self.configured_base_url()
            .or_else(|| self.descriptor.default_base_url.clone())
    }

    /// The config's `base_url` or a base-URL variable, without the default.
    pub fn configured_base_url(&self) -> Option<String> {
        self.config
            .base_url
            .clone()
            .filter(|b| !b.trim().is_empty())
            .or_else(|| self.env(&names(&self.descriptor.base_url_env)))
    }

    /// `Authorization: Bearer` with the key, or no auth, as the descriptor's
    /// [`KeyRequirement`] allows for a server at `base_url`.
    pub fn bearer_auth(&self, base_url: &str) -> Result<Auth, LlmError> {
        match (self.api_key(), self.descriptor.capabilities.api_key) {
            (_, KeyRequirement::None) => Ok(Auth::None),
            (Some(key), _) => Ok(Auth::Bearer(key)),
            (None, KeyRequirement::Optional) => Ok(Auth::None),
            (None, KeyRequirement::UnlessLocal) if is_local_url(base_url) => Ok(Auth::None),
            (None, _) => Err(self.missing_key()),
        }
    }

    /// The variable named in a client's authentication errors: the first key variable.
    pub fn key_hint(&self) -> &'a str {
        self.descriptor
            .key_env
            .first()
            .map(String::as_str)
            .unwrap_or("")
    }

    /// The transport the build asked for (a cassette recorder or replayer), if any.
    pub fn transport(&self) -> Option<&'a Arc<dyn Transport>> {
        self.transport
    }

    /// The client `new` makes from the model, the required API key, the base URL and the
    /// config (the constructor shape of the Anthropic and Gemini clients), with the transport
    /// attached by `set`.
    pub fn keyed_client<T: Llm + 'static>(
        &self,
        new: fn(&str, String, Option<&str>, &LlmConfig) -> Result<T, LlmError>,
        set: fn(T, Arc<dyn Transport>) -> T,
    ) -> Result<Arc<dyn Llm>, LlmError> {
        let api_key = self.require_api_key()?;
        let base = self.base_url();
        let client = new(self.model(), api_key, base.as_deref(), self.config())?;
        Ok(self.attach(client, set))
    }

    /// `client` behind the build's transport when there is one (`set` is the client's
    /// `with_transport`).
    pub fn attach<T: Llm + 'static>(
        &self,
        client: T,
        set: fn(T, Arc<dyn Transport>) -> T,
    ) -> Arc<dyn Llm> {
        match self.transport {
            Some(transport) => Arc::new(set(client, transport.clone())),
            None => Arc::new(client),
        }
    }
}

fn names(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}
