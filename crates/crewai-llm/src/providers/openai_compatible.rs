//! Any server speaking OpenAI's chat completions (vLLM, LM Studio, llama.cpp's server, a LiteLLM
//! proxy): the endpoint is required, the key optional. [`build`] is also the factory of every
//! provider that is only a descriptor over OpenAI's wire format
//! ([`super::Provider::openai_compatible`]: OpenRouter, DeepSeek, Groq, or one of your own).

use std::sync::Arc;

use crate::error::LlmError;
use crate::openai::OpenAiClient;
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "openai_compatible";

/// Context windows of open-weight models commonly served by OpenAI-compatible servers (Ollama,
/// vLLM, Groq); the descriptors of those providers share this table.
pub(crate) const OPEN_WEIGHT_WINDOWS: &[(&str, u64)] = &[
    ("llama-3.1", 131_072),
    ("llama-3.3", 131_072),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3", 8_192),
    ("mixtral-8x7b", 32_768),
    ("qwen2.5", 32_768),
    ("qwen3", 40_960),
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .aliases([
            "custom_openai",
            "hosted_vllm",
            "vllm",
            "lm_studio",
            "lmstudio",
        ])
        .key_env(["OPENAI_API_KEY"])
        .base_url_env(["OPENAI_BASE_URL", "OPENAI_API_BASE"])
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Optional,
            server_stop_words: true,
        })
        .otel_system("openai")
        .context_windows(OPEN_WEIGHT_WINDOWS.iter().copied())
}

pub fn provider() -> Provider {
    Provider::openai_compatible(descriptor())
}

/// Builds an OpenAI chat-completions client for whatever provider `cx` describes.
pub fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let descriptor = cx.descriptor();
    let base = cx.base_url().ok_or_else(|| {
        let variables = if descriptor.base_url_env.is_empty() {
            String::new()
        } else {
            format!(" (or set {})", descriptor.base_url_env.join(" or "))
        };
        LlmError::Config(format!(
            "model '{}' needs `base_url` pointing at an OpenAI-compatible server{variables}",
            cx.config().model.trim()
        ))
    })?;
    let auth = cx.bearer_auth(&base)?;
    let client = OpenAiClient::compatible(
        &descriptor.name,
        cx.model(),
        &base,
        auth,
        cx.key_hint(),
        cx.config(),
    )?
    .with_server_stop(descriptor.capabilities.server_stop_words);
    Ok(cx.attach(client, OpenAiClient::with_transport))
}
