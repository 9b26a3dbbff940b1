//! Amazon Bedrock's Converse and ConverseStream APIs, signed with SigV4 (credentials found the
//! way the AWS SDK finds them) or sent with a Bedrock API key.

use std::sync::Arc;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};
use crate::bedrock::{AwsCredentials, AwsEnvironment, BedrockAuth, BedrockLlm, BedrockRegion};
use crate::error::LlmError;
use crate::traits::Llm;

pub const NAME: &str = "bedrock";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("aws")
        // A Bedrock API key; without one, the AWS credential chain (read by the client).
        .key_env(["AWS_BEARER_TOKEN_BEDROCK"])
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Optional,
            server_stop_words: true,
        })
        .otel_system("aws.bedrock")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let env = AwsEnvironment::from_lookup(cx.env_lookup());
    let auth = match cx.api_key() {
        Some(key) => BedrockAuth::ApiKey(key),
        // Resolved at the first call, as the SDK does: the sources (a container endpoint,
        // instance metadata, a `credential_process`) are asked only when a request is signed.
        None => BedrockAuth::SigV4(AwsCredentials::default_chain(env.clone())),
    };
    let region = BedrockRegion::FromEnvironment(env);
    let base = cx.configured_base_url();
    let client = BedrockLlm::new(cx.model(), region, auth, base.as_deref(), cx.config())?;
    Ok(cx.attach(client, BedrockLlm::with_transport))
}
