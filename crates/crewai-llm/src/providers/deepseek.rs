//! DeepSeek's API (OpenAI's wire format).

use super::{Provider, ProviderDescriptor};

pub const NAME: &str = "deepseek";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .key_env(["DEEPSEEK_API_KEY"])
        .base_url_env(["DEEPSEEK_API_BASE"])
        .default_base_url("https://api.deepseek.com/v1")
        .otel_system("deepseek")
        .context_windows([("deepseek-chat", 128_000), ("deepseek-reasoner", 128_000)])
}

pub fn provider() -> Provider {
    Provider::openai_compatible(descriptor())
}
