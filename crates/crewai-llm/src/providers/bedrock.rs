//! Amazon Bedrock's Converse API, signed with SigV4 or a Bedrock API key. The client is behind
//! the crate's `bedrock` feature; without it the prefix is still known, and building says which
//! feature to turn on.

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderDescriptor};

pub const NAME: &str = "bedrock";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("aws")
        // A Bedrock API key; otherwise the AWS access key pair (read by the factory).
        .key_env(["AWS_BEARER_TOKEN_BEDROCK"])
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: true,
        })
        .otel_system("aws.bedrock")
}

#[cfg(feature = "bedrock")]
pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

#[cfg(not(feature = "bedrock"))]
pub fn provider() -> Provider {
    Provider::unavailable(
        descriptor(),
        "needs Bedrock support: build crewai-llm with the `bedrock` feature",
    )
}

#[cfg(feature = "bedrock")]
fn build(
    cx: &super::ProviderContext<'_>,
) -> Result<std::sync::Arc<dyn crate::traits::Llm>, crate::error::LlmError> {
    use crate::bedrock::{AwsCredentials, BedrockAuth, BedrockLlm};
    let auth = match cx.api_key() {
        Some(key) => BedrockAuth::ApiKey(key),
        None => match (
            cx.env(&["AWS_ACCESS_KEY_ID"]),
            cx.env(&["AWS_SECRET_ACCESS_KEY"]),
        ) {
            (Some(access_key_id), Some(secret_access_key)) => BedrockAuth::SigV4(AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token: cx.env(&["AWS_SESSION_TOKEN"]),
            }),
            _ => {
                return Err(cx.missing_key_named(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_BEARER_TOKEN_BEDROCK)",
                ));
            }
        },
    };
    let region = cx
        .env(&["AWS_REGION", "AWS_REGION_NAME", "AWS_DEFAULT_REGION"])
        .unwrap_or_else(|| "us-east-1".to_string());
    let base = cx.configured_base_url();
    let client = BedrockLlm::new(cx.model(), &region, auth, base.as_deref(), cx.config())?;
    Ok(cx.attach(client, BedrockLlm::with_transport))
}
