//! OpenRouter: OpenAI's wire format; its model names carry their own slash
//! (`openrouter/meta-llama/llama-3-70b` sends `meta-llama/llama-3-70b`).

use super::{Provider, ProviderDescriptor};

pub const NAME: &str = "openrouter";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .key_env(["OPENROUTER_API_KEY"])
        .base_url_env(["OPENROUTER_API_BASE"])
        .default_base_url("https://openrouter.ai/api/v1")
}

pub fn provider() -> Provider {
    Provider::openai_compatible(descriptor())
}
