//! Models on Google Cloud's Vertex AI (`vertex_ai/…`; LiteLLM's `vertex_ai_beta` means the
//! same), at
//! `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/…`
//! (`https://aiplatform.googleapis.com` for the `global` location):
//!
//! - Gemini (`vertex_ai/gemini-2.5-flash`): `publishers/google/models/{model}:generateContent`
//!   and `:streamGenerateContent`, in the Gemini body format the Gemini client speaks. A numeric
//!   model (`vertex_ai/1234567890`) is a tuned model deployed to that endpoint of the project.
//! - Claude (`vertex_ai/claude-sonnet-4-5@20250929`):
//!   `publishers/anthropic/models/{model}:rawPredict` and `:streamRawPredict`, in Anthropic's
//!   Messages format (the Anthropic client, without `model` in the body and with
//!   `anthropic_version: vertex-2023-10-16`).
//!
//! - **Credentials**, first found wins: the config's `api_key` taken as an OAuth access token
//!   (`gcloud auth print-access-token`); else the config's `vertex_credentials`,
//!   `VERTEXAI_CREDENTIALS` or `VERTEX_CREDENTIALS` (a service-account key as JSON or a path);
//!   else `GOOGLE_APPLICATION_CREDENTIALS`; else gcloud's application default credentials file.
//!   Keys and refresh tokens are exchanged for an access token, cached until a minute before it
//!   expires (see `google_auth.rs` and `access_token.rs`).
//! - **Project**: `vertex_project`, `VERTEXAI_PROJECT`, `VERTEX_PROJECT`,
//!   `GOOGLE_CLOUD_PROJECT`, else the credentials' own (`project_id`, `quota_project_id`).
//! - **Location**: `vertex_location`, `VERTEXAI_LOCATION`, `VERTEX_LOCATION`, else
//!   `us-central1`.
//! - **Endpoint**: `base_url`, `VERTEXAI_API_BASE` or `VERTEX_API_BASE` replaces the host (a
//!   Private Service Connect endpoint, a gateway) and the path above is appended; one that
//!   already ends in `/models/<model>` (LiteLLM's proxy form) is used as it is.
//!
//! The partner and open models Vertex AI serves in other formats (Llama, Mistral, DeepSeek,
//! Qwen, gpt-oss, Jamba) are refused by name.

use std::sync::Arc;

use crate::access_token::{Credential, Endpoint};
use crate::anthropic::AnthropicLlm;
use crate::error::LlmError;
use crate::gemini::GeminiLlm;
use crate::google_auth::{APPLICATION_CREDENTIALS_ENV, CREDENTIALS_ENV, GoogleCredentials};
use crate::http::ErrorContext;
use crate::traits::Llm;

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderContext, ProviderDescriptor};

pub const NAME: &str = "vertex_ai";

/// The region used when none is configured (LiteLLM's and Google's default).
pub const DEFAULT_LOCATION: &str = "us-central1";

const PROJECT_ENV: &[&str] = &["VERTEXAI_PROJECT", "VERTEX_PROJECT", "GOOGLE_CLOUD_PROJECT"];
const LOCATION_ENV: &[&str] = &["VERTEXAI_LOCATION", "VERTEX_LOCATION"];

/// Model-name prefixes of the partner and open models Vertex AI serves in other formats.
const PARTNER_PREFIXES: &[&str] = &[
    "llama",
    "meta",
    "mistral",
    "ministral",
    "codestral",
    "jamba",
    "deepseek",
    "qwen",
    "gpt-oss",
];

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .alias("vertex_ai_beta")
        // Not API keys: these say credentials are configured (the CLI's default-model choice).
        .key_env(
            CREDENTIALS_ENV
                .iter()
                .copied()
                .chain([APPLICATION_CREDENTIALS_ENV]),
        )
        .base_url_env(["VERTEXAI_API_BASE", "VERTEX_API_BASE"])
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::Required,
            server_stop_words: true,
        })
        .otel_system("gcp.vertex_ai")
        .context_windows(super::gemini::CONTEXT_WINDOWS.iter().copied())
        .context_windows(super::anthropic::CONTEXT_WINDOWS.iter().copied())
        .default_model("vertex_ai/gemini-2.5-flash")
}

pub fn provider() -> Provider {
    Provider::new(descriptor(), build)
}

fn build(cx: &ProviderContext<'_>) -> Result<Arc<dyn Llm>, LlmError> {
    let model = cx.model().trim();
    let target = Target::of(model)?;
    let access = Access::resolve(cx, model)?;
    let location = setting(cx.config().vertex_location.as_deref(), cx, LOCATION_ENV)
        .unwrap_or_else(|| DEFAULT_LOCATION.to_string());
    check_segment(
        "location",
        &location,
        "vertex_location or VERTEXAI_LOCATION",
    )?;
    let model_url = model_url(cx, &access.project, &location, target, model);
    let endpoint = Endpoint {
        provider: NAME,
        model_url,
        credential: access.credential,
        headers: access.quota_project.map_or_else(Vec::new, |project| {
            vec![("x-goog-user-project".to_string(), project)]
        }),
        key_hint: access.hint,
    };
    if target == Target::Claude {
        let client = AnthropicLlm::on_vertex(model, endpoint, cx.config())?;
        return Ok(cx.attach(client, AnthropicLlm::with_transport));
    }
    let client = GeminiLlm::at(model, endpoint, cx.config())?;
    Ok(cx.attach(client, GeminiLlm::with_transport))
}

/// What a model name is on Vertex AI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A model Google publishes (`publishers/google/models/{model}`).
    Published,
    /// A tuned model deployed to an endpoint of the project (`endpoints/{id}`).
    Endpoint,
    /// Anthropic's Claude (`publishers/anthropic/models/{model}`, `rawPredict`).
    Claude,
}

impl Target {
    fn of(model: &str) -> Result<Self, LlmError> {
        if model.is_empty() {
            return Err(LlmError::Config(
                "vertex_ai: no model given (for example `vertex_ai/gemini-2.5-flash`)".into(),
            ));
        }
        let lower = model.to_ascii_lowercase();
        if lower.contains('/') || PARTNER_PREFIXES.iter().any(|p| lower.starts_with(p)) {
            return Err(LlmError::Unsupported(format!(
                "vertex_ai model '{model}' is a partner or open model, which Vertex AI serves in \
                 another format; vertex_ai here runs Google's Gemini models, Anthropic's Claude \
                 and tuned models by their numeric endpoint id"
            )));
        }
        check_segment("model", model, "the model name")?;
        Ok(if lower.starts_with("claude") {
            Target::Claude
        } else if model.bytes().all(|b| b.is_ascii_digit()) {
            Target::Endpoint
        } else {
            Target::Published
        })
    }
}

/// How the calls authenticate, and which project they go to.
struct Access {
    credential: Credential,
    project: String,
    /// The project an authorized user's calls are billed to.
    quota_project: Option<String>,
    /// Where the credential comes from, named on authentication errors.
    hint: String,
}

impl Access {
    fn resolve(cx: &ProviderContext<'_>, model: &str) -> Result<Self, LlmError> {
        let config = cx.config();
        let configured_project = setting(config.vertex_project.as_deref(), cx, PROJECT_ENV);
        let token = config
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty());
        if let Some(token) = token {
            let project = configured_project.ok_or_else(|| missing_project(model))?;
            check_segment("project", &project, "vertex_project or VERTEXAI_PROJECT")?;
            return Ok(Access {
                credential: Credential::bearer(token),
                project,
                quota_project: None,
                hint: "api_key (an OAuth access token)".into(),
            });
        }
        let found = GoogleCredentials::discover(
            config.vertex_credentials.as_ref(),
            cx.env_lookup(),
        )?
        .ok_or_else(|| LlmError::Credentials {
            provider: NAME.into(),
            source: None,
            message: format!(
                "set VERTEXAI_CREDENTIALS (a service-account key, as JSON or the path of its \
                     file) or {APPLICATION_CREDENTIALS_ENV} (the path of a key file), put \
                     `vertex_credentials` in the LLM config, or run `gcloud auth \
                     application-default login`"
            ),
        })?;
        let project = configured_project
            .or_else(|| found.project().map(str::to_string))
            .ok_or_else(|| missing_project(model))?;
        check_segment("project", &project, "vertex_project or VERTEXAI_PROJECT")?;
        let quota_project = found.quota_project().map(str::to_string);
        let hint = format!("the credentials of {}", found.origin());
        let credential = found.into_credential(ErrorContext::new(NAME, model, ""), config)?;
        Ok(Access {
            credential,
            project,
            quota_project,
            hint,
        })
    }
}

/// The config's value, else the first of `env` that is set.
fn setting(configured: Option<&str>, cx: &ProviderContext<'_>, env: &[&str]) -> Option<String> {
    configured
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| cx.env(env))
}

fn missing_project(model: &str) -> LlmError {
    LlmError::Config(format!(
        "vertex_ai model '{model}' needs a Google Cloud project: set vertex_project in the LLM \
         config, or VERTEXAI_PROJECT (VERTEX_PROJECT, GOOGLE_CLOUD_PROJECT), or use a \
         service-account key that names its project_id"
    ))
}

/// Refuses a value that would change the URL's shape (a slash, a query, spaces).
fn check_segment(what: &str, value: &str, set_by: &str) -> Result<(), LlmError> {
    let bad = value
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, '/' | '?' | '#' | '%' | '\\'));
    match bad {
        None if !value.is_empty() => Ok(()),
        _ => Err(LlmError::Config(format!(
            "vertex_ai: the {what} '{value}' is not a valid path segment of Vertex AI's URL \
             (check {set_by})"
        ))),
    }
}

/// The model's URL without the method.
fn model_url(
    cx: &ProviderContext<'_>,
    project: &str,
    location: &str,
    target: Target,
    model: &str,
) -> String {
    let configured = cx.configured_base_url();
    if let Some(base) = configured
        .as_deref()
        .map(|b| b.trim().trim_end_matches('/'))
        && base.rsplit('/').nth(1) == Some("models")
    {
        return base.to_string();
    }
    let root = match configured {
        Some(base) => base.trim().trim_end_matches('/').to_string(),
        None if location == "global" => "https://aiplatform.googleapis.com".to_string(),
        None => format!("https://{location}-aiplatform.googleapis.com"),
    };
    let resource = match target {
        Target::Published => format!("publishers/google/models/{model}"),
        Target::Endpoint => format!("endpoints/{model}"),
        Target::Claude => format!("publishers/anthropic/models/{model}"),
    };
    format!("{root}/v1/projects/{project}/locations/{location}/{resource}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LlmConfig;

    fn url_of(base_url: Option<&str>, location: &str, target: Target, model: &str) -> String {
        let descriptor = descriptor();
        let mut config = LlmConfig::new(format!("vertex_ai/{model}"));
        config.base_url = base_url.map(str::to_string);
        let no_env = |_: &str| None;
        let cx = ProviderContext {
            descriptor: &descriptor,
            config: &config,
            model,
            env: &no_env,
            transport: None,
        };
        model_url(&cx, "proj", location, target, model)
    }

    #[test]
    fn urls_name_the_project_location_and_model_on_the_right_host() {
        assert_eq!(
            url_of(None, "europe-west4", Target::Published, "gemini-2.5-flash"),
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/proj/locations/europe-west4/publishers/google/models/gemini-2.5-flash"
        );
        assert_eq!(
            url_of(None, "global", Target::Published, "gemini-2.5-pro"),
            "https://aiplatform.googleapis.com/v1/projects/proj/locations/global/publishers/google/models/gemini-2.5-pro"
        );
        assert_eq!(
            url_of(None, "us-central1", Target::Endpoint, "4242"),
            "https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/endpoints/4242"
        );
        assert_eq!(
            url_of(
                Some("https://psc.example.internal/"),
                "us-east5",
                Target::Published,
                "gemini-2.0-flash"
            ),
            "https://psc.example.internal/v1/projects/proj/locations/us-east5/publishers/google/models/gemini-2.0-flash"
        );
        let proxied = "https://gateway.example/v1/acct/gw/google-vertex-ai/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-flash";
        assert_eq!(
            url_of(
                Some(proxied),
                "us-central1",
                Target::Published,
                "gemini-2.5-flash"
            ),
            proxied,
            "LiteLLM's proxy form is used as it is"
        );
    }

    #[test]
    fn models_are_gemini_claude_or_tuned_endpoints_and_others_are_refused() {
        assert_eq!(Target::of("gemini-2.5-flash").ok(), Some(Target::Published));
        assert_eq!(Target::of("1234567890").ok(), Some(Target::Endpoint));
        assert_eq!(
            Target::of("claude-sonnet-4-5@20250929").ok(),
            Some(Target::Claude)
        );
        for refused in ["meta/llama-4-maverick", "mistral-large", ""] {
            assert!(Target::of(refused).is_err(), "{refused}");
        }
        let partner = Target::of("deepseek-ai/deepseek-r1-0528-maas")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(partner.contains("partner or open model"), "{partner}");
        assert!(Target::of("gemini 2").is_err());
    }
}
