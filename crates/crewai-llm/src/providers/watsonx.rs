//! IBM watsonx.ai's chat API (`watsonx/ibm/granite-4-h-small`, `watsonx/deployment/<id>`), with
//! LiteLLM's names for its settings:
//!
//! - **URL**: `base_url`, else `WATSONX_API_BASE`, `WATSONX_URL`, `WX_URL` or `WML_URL` (the
//!   region's, `https://us-south.ml.cloud.ibm.com`); required.
//! - **Credential**, first found wins, in LiteLLM's order: a bearer token in `WATSONX_TOKEN`,
//!   used as it is; a Cloud Pak for Data key in `WATSONX_ZENAPIKEY` (sent as `ZenApiKey`); an
//!   IBM Cloud API key in the config's `api_key`, `WATSONX_APIKEY`, `WATSONX_API_KEY` or
//!   `WX_API_KEY`.
//!   API keys are exchanged at IBM Cloud IAM (`WATSONX_IAM_URL`, else
//!   `https://iam.cloud.ibm.com/identity/token`) for a token, cached until shortly before it
//!   expires.
//! - **Where the calls run**: the config's `project_id` or `space_id`, else
//!   `WATSONX_PROJECT_ID` (`WX_PROJECT_ID`), else `WATSONX_DEPLOYMENT_SPACE_ID`
//!   (`WATSONX_SPACE_ID`, `WX_SPACE_ID`); a deployment needs neither.
//! - **API version**: `api_version`, else `2024-03-13` (LiteLLM's).
//!
//! `watsonx_text/` (LiteLLM's prefix for the text-generation endpoint, which needs a prompt
//! template per model) is known but refused, pointing at `watsonx/`.

use std::sync::Arc;

use crate::access_token::{Credential, TokenEndpoint};
use crate::error::LlmError;
use crate::http::ErrorContext;
use crate::traits::Llm;
use crate::watsonx::{
    DEFAULT_API_VERSION, IAM_TOKEN_URL, IamApiKey, PROVIDER, Scope, Settings, WatsonxLlm,
};

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = PROVIDER;

/// LiteLLM's prefix for watsonx.ai's text-generation endpoint, refused with a pointer to `watsonx/`.
pub const TEXT_NAME: &str = "watsonx_text";

const URL_ENV: &[&str] = &["WATSONX_API_BASE", "WATSONX_URL", "WX_URL", "WML_URL"];
const API_KEY_ENV: &[&str] = &["WATSONX_APIKEY", "WATSONX_API_KEY", "WX_API_KEY"];
const TOKEN_ENV: &str = "WATSONX_TOKEN";
const ZEN_API_KEY_ENV: &str = "WATSONX_ZENAPIKEY";
const IAM_URL_ENV: &str = "WATSONX_IAM_URL";
const PROJECT_ENV: &[&str] = &["WATSONX_PROJECT_ID", "WX_PROJECT_ID"];
const SPACE_ENV: &[&str] = &[
    "WATSONX_DEPLOYMENT_SPACE_ID",
    "WATSONX_SPACE_ID",
    "WX_SPACE_ID",
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        // Every variable that configures a credential (the CLI's default-model choice).
        .key_env(
            API_KEY_ENV
                .iter()
                .copied()
                .chain([TOKEN_ENV, ZEN_API_KEY_ENV]),
        )
        .base_url_env(URL_ENV.iter().copied())
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: true,
        })
        .otel_system("ibm.watsonx.ai")
        .default_model("watsonx/ibm/granite-4-h-small")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

/// `watsonx_text`: known, so its models get a clear refusal rather than "unknown prefix".
pub fn text_provider() -> Provider {
    Provider::unavailable(
        ProviderDescriptor::new(TEXT_NAME).otel_system("ibm.watsonx.ai"),
        "uses watsonx.ai's text-generation endpoint, which needs a prompt template per model and \
         is not supported here: use the chat endpoint instead (watsonx/<model>)",
    )
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let model = cx.model().trim();
    if model.is_empty() {
        return Err(LlmError::Config(
            "watsonx: no model given (for example `watsonx/ibm/granite-4-h-small`)".into(),
        ));
    }
    let base_url = cx.configured_base_url().ok_or_else(|| {
        LlmError::Config(format!(
            "watsonx needs the URL of its region: set WATSONX_URL (for example \
             https://us-south.ml.cloud.ibm.com) or base_url (also read: {})",
            URL_ENV.join(", ")
        ))
    })?;
    let config = cx.config();
    let scope = scope(cx, model)?;
    let (credential, key_hint) = credential(cx, model)?;
    let settings = Settings {
        base_url,
        api_version: config
            .api_version
            .clone()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_VERSION.to_string()),
        scope,
        credential,
        key_hint,
    };
    let client = WatsonxLlm::new(model, settings, config)?;
    Ok(cx.attach(client, WatsonxLlm::with_transport))
}

/// The project or space of a foundation model's calls; `None` for a deployment.
fn scope(cx: &ProviderContext<'_>, model: &str) -> Result<Option<Scope>, LlmError> {
    let config = cx.config();
    let given = |value: &Option<String>| value.clone().filter(|v| !v.trim().is_empty());
    let scope = given(&config.project_id)
        .map(Scope::Project)
        .or_else(|| given(&config.space_id).map(Scope::Space))
        .or_else(|| cx.env(PROJECT_ENV).map(Scope::Project))
        .or_else(|| cx.env(SPACE_ENV).map(Scope::Space));
    if scope.is_none() && !model.starts_with("deployment/") {
        return Err(LlmError::Config(format!(
            "watsonx model '{model}' needs a project or a deployment space to run in: set \
             WATSONX_PROJECT_ID (or project_id in the LLM config), or WATSONX_SPACE_ID (space_id)"
        )));
    }
    Ok(scope)
}

/// The credential, in the module's order, and where it comes from.
fn credential(cx: &ProviderContext<'_>, model: &str) -> Result<(Credential, String), LlmError> {
    let configured_key = cx.config().api_key.clone().filter(|k| !k.trim().is_empty());
    let exchange = |api_key: String, hint: String| -> Result<(Credential, String), LlmError> {
        let url = cx
            .env(&[IAM_URL_ENV])
            .unwrap_or_else(|| IAM_TOKEN_URL.to_string());
        let context = ErrorContext::new(NAME, model, hint.clone());
        let endpoint = TokenEndpoint::new(url, context, cx.config())?;
        Ok((Credential::exchanged(IamApiKey { endpoint, api_key }), hint))
    };
    if let Some(token) = cx.env(&[TOKEN_ENV]) {
        return Ok((Credential::bearer(token), TOKEN_ENV.into()));
    }
    if let Some(key) = cx.env(&[ZEN_API_KEY_ENV]) {
        let credential = Credential::Fixed {
            name: "authorization",
            value: format!("ZenApiKey {key}"),
        };
        return Ok((credential, ZEN_API_KEY_ENV.into()));
    }
    if let Some(key) = configured_key {
        return exchange(key, "api_key".into());
    }
    for name in API_KEY_ENV {
        if let Some(key) = cx.env(&[name]) {
            return exchange(key, (*name).to_string());
        }
    }
    Err(cx.missing_key_named(&format!(
        "{} (an IBM Cloud API key), or {TOKEN_ENV} (a bearer token)",
        API_KEY_ENV[0]
    )))
}
