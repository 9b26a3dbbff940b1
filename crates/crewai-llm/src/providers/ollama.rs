//! Ollama through its OpenAI-compatible endpoint (`<OLLAMA_HOST>/v1`); no key unless the
//! server is behind a proxy that wants one.

use std::sync::Arc;

use crate::error::LlmError;
use crate::openai::OpenAiClient;
use crate::traits::Llm;

use super::openai_compatible::OPEN_WEIGHT_WINDOWS;
use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "ollama";

/// Where Ollama listens unless `OLLAMA_HOST` says otherwise.
pub const DEFAULT_HOST: &str = "http://localhost:11434";

/// The variables naming the server, first set wins.
const HOST_ENV: &[&str] = &["OLLAMA_HOST", "OLLAMA_API_BASE"];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("ollama_chat")
        .key_env(["OLLAMA_API_KEY"])
        .base_url_env(HOST_ENV.iter().copied())
        .default_base_url(DEFAULT_HOST)
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Optional,
            server_stop_words: true,
        })
        .otel_system("ollama")
        .context_windows(OPEN_WEIGHT_WINDOWS.iter().copied())
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

/// The Ollama server's root URL from `OLLAMA_HOST` (or `OLLAMA_API_BASE`), which is often
/// written without a scheme (`0.0.0.0:11434`) and sometimes with OpenAI's `/v1`.
pub fn host(env: &dyn Fn(&str) -> Option<String>) -> String {
    let configured = HOST_ENV.iter().find_map(|name| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    });
    let host = configured.unwrap_or_else(|| DEFAULT_HOST.to_string());
    let host = if host.contains("://") {
        host
    } else {
        format!("http://{host}")
    };
    let host = host.trim_end_matches('/');
    host.strip_suffix("/v1").unwrap_or(host).to_string()
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let base = match cx
        .config()
        .base_url
        .clone()
        .filter(|b| !b.trim().is_empty())
    {
        Some(base) => base,
        None => format!("{}/v1", host(cx.env_lookup())),
    };
    let auth = cx.bearer_auth(&base)?;
    let client =
        OpenAiClient::compatible(NAME, cx.model(), &base, auth, cx.key_hint(), cx.config())?;
    Ok(cx.attach(client, OpenAiClient::with_transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_get_a_scheme_and_lose_v1() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            host(&env(&[("OLLAMA_HOST", "0.0.0.0:11434")])),
            "http://0.0.0.0:11434"
        );
        assert_eq!(
            host(&env(&[("OLLAMA_API_BASE", "http://h:1/v1/")])),
            "http://h:1"
        );
        assert_eq!(host(&env(&[])), DEFAULT_HOST);
    }
}
