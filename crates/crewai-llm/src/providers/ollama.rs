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

/// How long an Ollama server may take to accept a connection, and to list its models, before
/// it counts as absent: the probe runs before every run that needs a default model.
const PROBE_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(300);
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The first model the Ollama server at `host` (see [`host`]) has installed (`GET /api/tags`),
/// or `None` when nothing answers quickly, the answer is not a success or it lists no model.
pub async fn first_installed_model(host: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Tags {
        models: Vec<Installed>,
    }
    #[derive(serde::Deserialize)]
    struct Installed {
        name: String,
    }
    let client = reqwest::Client::builder()
        .connect_timeout(PROBE_CONNECT_TIMEOUT)
        .timeout(PROBE_TIMEOUT)
        .no_proxy()
        .build()
        .ok()?;
    let response = client
        .get(format!("{}/api/tags", host.trim_end_matches('/')))
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .ok()?
        .error_for_status()
        .ok()?;
    let tags: Tags = response.json().await.ok()?;
    tags.models.into_iter().next().map(|model| model.name)
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

    #[tokio::test]
    async fn the_probe_finds_the_first_installed_model_and_silence_is_none() {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/api/tags"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "models": [{"name": "qwen3:0.6b"}, {"name": "llama3"}]
            })))
            .mount(&server)
            .await;
        assert_eq!(
            first_installed_model(&server.uri()).await.as_deref(),
            Some("qwen3:0.6b")
        );

        let failing = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(500))
            .mount(&failing)
            .await;
        assert_eq!(first_installed_model(&failing.uri()).await, None);

        let address = failing.address().to_string();
        drop(failing);
        // Nothing listens there any more.
        assert_eq!(
            first_installed_model(&format!("http://{address}")).await,
            None
        );
    }
}
