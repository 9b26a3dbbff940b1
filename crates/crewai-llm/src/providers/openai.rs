//! OpenAI: chat completions, or the Responses API when the config asks for it (`api:
//! responses`) or the model exists only there (`o3-pro`, `codex-mini`). Also where a bare model
//! name no provider claims goes, and a model with an unknown prefix sent to an explicit
//! `base_url` (see the routing rules in [`super`]).

use std::sync::Arc;

use crate::config::OpenAiApi;
use crate::error::LlmError;
use crate::openai::{OPENAI_BASE_URL, OpenAiClient};
use crate::openai_responses::{OpenAiResponsesClient, only_on_responses_api};
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "openai";

/// Context windows of OpenAI's models (the longest matching prefix wins).
const CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3-mini", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .key_env(["OPENAI_API_KEY"])
        .base_url_env(["OPENAI_BASE_URL", "OPENAI_API_BASE"])
        .default_base_url(OPENAI_BASE_URL)
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::UnlessLocal,
            server_stop_words: false,
        })
        .otel_system("openai")
        .context_windows(CONTEXT_WINDOWS.iter().copied())
        .infer_prefixes(["gpt-", "chatgpt-"])
        // The reasoning families (`gpt-5` is already a `gpt-` name).
        .infer_families(["o1", "o3", "o4"])
        .default_model(crate::config::DEFAULT_MODEL)
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let base = cx.base_url().unwrap_or_else(|| OPENAI_BASE_URL.to_string());
    let auth = cx.bearer_auth(&base)?;
    let config = cx.config();
    let responses = config.api.map_or_else(
        || only_on_responses_api(cx.model()),
        |api| api == OpenAiApi::Responses,
    );
    if responses {
        let client = OpenAiResponsesClient::new(config, cx.model(), &base, auth)?;
        return Ok(cx.attach(client, OpenAiResponsesClient::with_transport));
    }
    let client = OpenAiClient::compatible(NAME, cx.model(), &base, auth, cx.key_hint(), config)?;
    Ok(cx.attach(client, OpenAiClient::with_transport))
}
