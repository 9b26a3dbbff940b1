//! Hosted services that speak OpenAI's chat-completions wire format, one row each: the prefix
//! CrewAI users write (LiteLLM's provider name) and its aliases, the key and endpoint variables
//! LiteLLM reads (first set wins), and the service's endpoint. A row is all such a provider
//! needs; one with quirks of its own gets a module (see `groq.rs`, `deepseek.rs`).

use super::{Provider, ProviderDescriptor};

/// One hosted OpenAI-compatible service.
struct Hosted {
    name: &'static str,
    aliases: &'static [&'static str],
    key_env: &'static [&'static str],
    base_url_env: &'static [&'static str],
    base_url: &'static str,
    /// `gen_ai.system` in OpenTelemetry spans.
    otel_system: &'static str,
}

const HOSTED: &[Hosted] = &[
    Hosted {
        name: "mistral",
        aliases: &[],
        key_env: &["MISTRAL_API_KEY"],
        base_url_env: &["MISTRAL_API_BASE"],
        base_url: "https://api.mistral.ai/v1",
        otel_system: "mistral_ai",
    },
    Hosted {
        name: "together_ai",
        aliases: &["together"],
        key_env: &[
            "TOGETHERAI_API_KEY",
            "TOGETHER_API_KEY",
            "TOGETHER_AI_API_KEY",
        ],
        base_url_env: &["TOGETHERAI_API_BASE", "TOGETHER_API_BASE"],
        base_url: "https://api.together.xyz/v1",
        otel_system: "together_ai",
    },
    Hosted {
        name: "fireworks_ai",
        aliases: &["fireworks"],
        key_env: &[
            "FIREWORKS_AI_API_KEY",
            "FIREWORKS_API_KEY",
            "FIREWORKSAI_API_KEY",
        ],
        base_url_env: &["FIREWORKS_AI_API_BASE", "FIREWORKS_API_BASE"],
        base_url: "https://api.fireworks.ai/inference/v1",
        otel_system: "fireworks_ai",
    },
    Hosted {
        name: "cerebras",
        aliases: &[],
        key_env: &["CEREBRAS_API_KEY"],
        base_url_env: &["CEREBRAS_API_BASE"],
        base_url: "https://api.cerebras.ai/v1",
        otel_system: "cerebras",
    },
    Hosted {
        name: "xai",
        aliases: &[],
        key_env: &["XAI_API_KEY"],
        base_url_env: &["XAI_API_BASE"],
        base_url: "https://api.x.ai/v1",
        otel_system: "xai",
    },
    Hosted {
        name: "perplexity",
        aliases: &[],
        key_env: &["PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"],
        base_url_env: &["PERPLEXITY_API_BASE"],
        base_url: "https://api.perplexity.ai",
        otel_system: "perplexity",
    },
    Hosted {
        name: "nvidia_nim",
        aliases: &[],
        key_env: &["NVIDIA_NIM_API_KEY", "NVIDIA_API_KEY"],
        base_url_env: &["NVIDIA_NIM_API_BASE"],
        base_url: "https://integrate.api.nvidia.com/v1",
        otel_system: "nvidia_nim",
    },
    Hosted {
        name: "sambanova",
        aliases: &[],
        key_env: &["SAMBANOVA_API_KEY"],
        base_url_env: &["SAMBANOVA_API_BASE"],
        base_url: "https://api.sambanova.ai/v1",
        otel_system: "sambanova",
    },
    Hosted {
        name: "dashscope",
        aliases: &[],
        key_env: &["DASHSCOPE_API_KEY"],
        base_url_env: &["DASHSCOPE_API_BASE"],
        base_url: "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        otel_system: "dashscope",
    },
    Hosted {
        name: "huggingface",
        aliases: &[],
        key_env: &["HF_TOKEN", "HUGGINGFACE_API_KEY", "HUGGINGFACE_API_TOKEN"],
        base_url_env: &["HUGGINGFACE_API_BASE", "HF_API_BASE"],
        base_url: "https://router.huggingface.co/v1",
        otel_system: "huggingface",
    },
    Hosted {
        name: "deepinfra",
        aliases: &[],
        key_env: &["DEEPINFRA_API_KEY"],
        base_url_env: &["DEEPINFRA_API_BASE"],
        base_url: "https://api.deepinfra.com/v1/openai",
        otel_system: "deepinfra",
    },
    Hosted {
        name: "cohere",
        aliases: &["cohere_chat"],
        key_env: &["COHERE_API_KEY", "CO_API_KEY"],
        base_url_env: &["COHERE_API_BASE"],
        // Cohere's OpenAI-compatible endpoint (its native v2 chat API is another format).
        base_url: "https://api.cohere.ai/compatibility/v1",
        otel_system: "cohere",
    },
];

fn descriptor(hosted: &Hosted) -> ProviderDescriptor {
    ProviderDescriptor::new(hosted.name)
        .aliases(hosted.aliases.iter().copied())
        .key_env(hosted.key_env.iter().copied())
        .base_url_env(hosted.base_url_env.iter().copied())
        .default_base_url(hosted.base_url)
        .otel_system(hosted.otel_system)
}

/// Every hosted OpenAI-compatible provider of the table, in its order.
pub fn providers() -> impl Iterator<Item = Provider> {
    HOSTED
        .iter()
        .map(|hosted| Provider::openai_compatible(descriptor(hosted)))
}
