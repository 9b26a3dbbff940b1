//! Groq's API (OpenAI's wire format) serving open-weight models.

use super::openai_compatible::OPEN_WEIGHT_WINDOWS;
use super::{Provider, ProviderDescriptor};

pub const NAME: &str = "groq";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .key_env(["GROQ_API_KEY"])
        .base_url_env(["GROQ_API_BASE"])
        .default_base_url("https://api.groq.com/openai/v1")
        .otel_system("groq")
        .context_windows(OPEN_WEIGHT_WINDOWS.iter().copied())
}

pub fn provider() -> Provider {
    Provider::openai_compatible(descriptor())
}
