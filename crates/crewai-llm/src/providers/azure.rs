//! Azure OpenAI: chat completions of a deployment (`azure/<deployment>`) on the resource's
//! endpoint, with the `api-key` header and an `api-version`.

use std::sync::Arc;

use crate::error::LlmError;
use crate::openai::{AZURE_DEFAULT_API_VERSION, OpenAiClient};
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "azure";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("azure_openai")
        .key_env(["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"])
        .base_url_env(["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT", "AZURE_ENDPOINT"])
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: false,
        })
        .otel_system("azure.ai.openai")
        // A deployment's name is its owner's: `AZURE_DEPLOYMENT_NAME` says which.
        .default_model_from_env("azure/gpt-4.1-mini", "AZURE_DEPLOYMENT_NAME")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    // The second key variable is an alias; the error names the one CrewAI documents.
    let api_key = cx
        .api_key()
        .ok_or_else(|| cx.missing_key_named("AZURE_API_KEY"))?;
    let base = cx.base_url().ok_or_else(|| {
        LlmError::Config(
            "azure needs an endpoint: set AZURE_API_BASE (https://<resource>.openai.azure.com) or base_url"
                .into(),
        )
    })?;
    let version = cx
        .config()
        .api_version
        .clone()
        .or_else(|| cx.env(&["AZURE_API_VERSION", "OPENAI_API_VERSION"]))
        .unwrap_or_else(|| AZURE_DEFAULT_API_VERSION.to_string());
    let client = OpenAiClient::azure(cx.config(), cx.model(), &base, &version, api_key)?;
    Ok(cx.attach(client, OpenAiClient::with_transport))
}
