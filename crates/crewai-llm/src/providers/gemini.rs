//! Google's Gemini API (`generateContent`).

use std::sync::Arc;

use crate::error::LlmError;
use crate::gemini::{DEFAULT_BASE_URL, GeminiLlm};
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "gemini";

/// Context windows of Gemini models (the longest matching prefix wins); Vertex AI serves the
/// same models.
pub(crate) const CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("gemini-2.5", 1_048_576),
    ("gemini-2.0", 1_048_576),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-flash", 1_048_576),
    ("gemini-", 1_048_576),
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .aliases(["google", "google_genai"])
        .key_env(["GEMINI_API_KEY", "GOOGLE_API_KEY"])
        .base_url_env(["GEMINI_API_BASE"])
        .default_base_url(DEFAULT_BASE_URL)
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: true,
        })
        .otel_system("gcp.gemini")
        .context_windows(CONTEXT_WINDOWS.iter().copied())
        .infer_prefixes(["gemini-", "gemma-"])
        .default_model("gemini/gemini-2.5-flash")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    cx.keyed_client(GeminiLlm::new, GeminiLlm::with_transport)
}
