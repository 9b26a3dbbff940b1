//! Anthropic's messages API.

use std::sync::Arc;

use crate::anthropic::{AnthropicLlm, DEFAULT_BASE_URL};
use crate::error::LlmError;
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "anthropic";

/// Context windows of Claude models (the longest matching prefix wins); Vertex AI serves the
/// same models.
pub(crate) const CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("claude-3", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-", 200_000),
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("claude")
        .key_env(["ANTHROPIC_API_KEY"])
        .base_url_env(["ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"])
        .default_base_url(DEFAULT_BASE_URL)
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: true,
        })
        .otel_system("anthropic")
        .context_windows(CONTEXT_WINDOWS.iter().copied())
        .infer_prefixes(["claude-"])
        .default_model("anthropic/claude-sonnet-4-5")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    cx.keyed_client(AnthropicLlm::new, AnthropicLlm::with_transport)
}
