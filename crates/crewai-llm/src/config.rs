//! `LlmConfig`: CrewAI's LLM parameters, from Rust or from YAML.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// CrewAI's model used when none is configured (overridable with `MODEL`).
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// Which OpenAI API a client speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenAiApi {
    /// `/v1/chat/completions`
    #[default]
    #[serde(alias = "chat", alias = "chat_completions")]
    Completions,
    /// `/v1/responses`
    Responses,
}

/// The configuration of one model client, with CrewAI's field names.
///
/// Deserialises from both forms CrewAI accepts in `agents.yaml`:
///
/// ```
/// use crewai_llm::LlmConfig;
/// let short: LlmConfig = yaml_serde::from_str("openai/gpt-4o-mini").unwrap();
/// assert_eq!(short.model, "openai/gpt-4o-mini");
/// let long: LlmConfig = yaml_serde::from_str("model: gpt-4o\ntemperature: 0.2").unwrap();
/// assert_eq!(long.temperature, Some(0.2));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LlmConfig {
    /// `provider/model` or a bare model name.
    pub model: String,
    /// Explicit provider, overriding the prefix of `model`.
    pub provider: Option<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    /// Total time one HTTP request may take, in seconds (finite by default).
    pub timeout: Option<f64>,
    /// Time to establish a connection, in seconds.
    pub connect_timeout: Option<f64>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub api_version: Option<String>,
    /// A JSON schema (or `{"type": "json_object"}`) every call asks for.
    pub response_format: Option<Value>,
    /// `none | minimal | low | medium | high` (o-series and reasoning models).
    pub reasoning_effort: Option<String>,
    pub stream: bool,
    /// Extra HTTP headers sent with every request.
    pub extra_headers: BTreeMap<String, String>,
    /// Extra top-level JSON fields merged into every request body (CrewAI's `additional_params`).
    pub extra_body: serde_json::Map<String, Value>,
    /// Which OpenAI API to speak (`completions` or `responses`).
    pub api: Option<OpenAiApi>,
    /// Retries of a retryable error (default 2, as the OpenAI SDK CrewAI uses).
    pub max_retries: Option<u32>,
    /// Models tried in order when this one still fails with a retryable error.
    pub fallback_llms: Vec<LlmConfig>,
    /// Requests per minute this client may make.
    pub max_rpm: Option<u32>,
    /// Tokens per minute this client may use (estimated before, corrected after each call).
    pub max_tpm: Option<u32>,
    /// Overrides the built-in context window size.
    pub context_window_size: Option<u64>,
    /// Anthropic extended thinking: `{type: enabled, budget_tokens: N}`.
    pub thinking: Option<Value>,
    /// Vertex AI's credentials: a service-account key (its JSON as text, or as a mapping) or the
    /// path of a credentials file; see [`crate::providers::vertex`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vertex_credentials: Option<Value>,
    /// Vertex AI's Google Cloud project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vertex_project: Option<String>,
    /// Vertex AI's region (`us-central1`, `europe-west4`, `global`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vertex_location: Option<String>,
    /// watsonx.ai's project the calls run in; see [`crate::providers::watsonx`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// watsonx.ai's deployment space, instead of a project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space_id: Option<String>,
}

impl LlmConfig {
    /// A config for `model` with every other field at its default.
    pub fn new(model: impl Into<String>) -> Self {
        LlmConfig {
            model: model.into(),
            ..Default::default()
        }
    }

    /// The total request timeout (600 s unless set, like the OpenAI SDK; never infinite).
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs_f64(
            self.timeout
                .filter(|t| t.is_finite() && *t > 0.0)
                .unwrap_or(600.0),
        )
    }

    /// The connect timeout (10 s unless set).
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs_f64(
            self.connect_timeout
                .filter(|t| t.is_finite() && *t > 0.0)
                .unwrap_or(10.0),
        )
    }

    setters! {
        pub fn with_base_url(url: impl Into<String>) => base_url = Some(url.into());
        pub fn with_api_key(key: impl Into<String>) => api_key = Some(key.into());
        pub fn with_temperature(t: f64) => temperature = Some(t);
        pub fn with_max_tokens(n: u32) => max_tokens = Some(n);
        pub fn with_stop(stop: Vec<String>) => stop = stop;
        pub fn with_timeout(seconds: f64) => timeout = Some(seconds);
        /// Names the provider explicitly (overrides the prefix of `model`).
        pub fn with_provider(provider: impl Into<String>) => provider = Some(provider.into());
        pub fn with_max_retries(retries: u32) => max_retries = Some(retries);
        pub fn with_max_rpm(rpm: u32) => max_rpm = Some(rpm);
        pub fn with_reasoning_effort(effort: impl Into<String>) => reasoning_effort = Some(effort.into());
        /// A JSON schema every call asks for (see [`LlmConfig::response_format`]).
        pub fn with_response_format(format: Value) => response_format = Some(format);
        /// Speak OpenAI's Responses API instead of chat completions.
        pub fn with_api(api: OpenAiApi) => api = Some(api);
        pub fn with_stream(stream: bool) => stream = stream;
    }

    pub fn with_fallback(mut self, fallback: LlmConfig) -> Self {
        self.fallback_llms.push(fallback);
        self
    }
}

/// The mapping form, with CrewAI's aliases.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmConfigMap {
    #[serde(alias = "model_name")]
    model: Option<String>,
    provider: Option<String>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    #[serde(default, deserialize_with = "one_or_many")]
    stop: Vec<String>,
    seed: Option<i64>,
    frequency_penalty: Option<f64>,
    presence_penalty: Option<f64>,
    timeout: Option<f64>,
    connect_timeout: Option<f64>,
    #[serde(alias = "api_base")]
    base_url: Option<String>,
    api_key: Option<String>,
    api_version: Option<String>,
    response_format: Option<Value>,
    reasoning_effort: Option<String>,
    #[serde(default)]
    stream: bool,
    #[serde(default, alias = "default_headers", alias = "headers")]
    extra_headers: BTreeMap<String, String>,
    #[serde(default, alias = "additional_params", alias = "extra_body_params")]
    extra_body: serde_json::Map<String, Value>,
    api: Option<OpenAiApi>,
    max_retries: Option<u32>,
    #[serde(default, alias = "fallbacks")]
    fallback_llms: Vec<LlmConfig>,
    max_rpm: Option<u32>,
    max_tpm: Option<u32>,
    context_window_size: Option<u64>,
    thinking: Option<Value>,
    #[serde(alias = "vertex_ai_credentials")]
    vertex_credentials: Option<Value>,
    #[serde(alias = "vertex_ai_project")]
    vertex_project: Option<String>,
    #[serde(alias = "vertex_ai_location")]
    vertex_location: Option<String>,
    #[serde(alias = "watsonx_project")]
    project_id: Option<String>,
    space_id: Option<String>,
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

impl<'de> Deserialize<'de> for LlmConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Model(String),
            Map(Box<LlmConfigMap>),
        }
        match Form::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "an LLM is a model string like `openai/gpt-4o-mini` or a mapping with `model:` and CrewAI's LLM fields (temperature, max_tokens, base_url, ...); check for a misspelt field",
            )
        })? {
            Form::Model(model) => Ok(LlmConfig::new(model)),
            Form::Map(m) => {
                let m = *m;
                Ok(LlmConfig {
                    model: m.model.unwrap_or_default(),
                    provider: m.provider,
                    temperature: m.temperature,
                    top_p: m.top_p,
                    max_tokens: m.max_tokens,
                    max_completion_tokens: m.max_completion_tokens,
                    stop: m.stop,
                    seed: m.seed,
                    frequency_penalty: m.frequency_penalty,
                    presence_penalty: m.presence_penalty,
                    timeout: m.timeout,
                    connect_timeout: m.connect_timeout,
                    base_url: m.base_url,
                    api_key: m.api_key,
                    api_version: m.api_version,
                    response_format: m.response_format,
                    reasoning_effort: m.reasoning_effort,
                    stream: m.stream,
                    extra_headers: m.extra_headers,
                    extra_body: m.extra_body,
                    api: m.api,
                    max_retries: m.max_retries,
                    fallback_llms: m.fallback_llms,
                    max_rpm: m.max_rpm,
                    max_tpm: m.max_tpm,
                    context_window_size: m.context_window_size,
                    thinking: m.thinking,
                    vertex_credentials: m.vertex_credentials,
                    vertex_project: m.vertex_project,
                    vertex_location: m.vertex_location,
                    project_id: m.project_id,
                    space_id: m.space_id,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertex_and_watsonx_settings_read_with_litellm_s_names() {
        let vertex: LlmConfig = yaml_serde::from_str(
            "model: vertex_ai/gemini-2.5-flash\nvertex_ai_project: p\nvertex_location: europe-west4\nvertex_credentials: {type: service_account, client_email: a@b}",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(vertex.vertex_project.as_deref(), Some("p"));
        assert_eq!(vertex.vertex_location.as_deref(), Some("europe-west4"));
        assert_eq!(
            vertex
                .vertex_credentials
                .as_ref()
                .and_then(|c| c.get("type"))
                .and_then(Value::as_str),
            Some("service_account")
        );
        let watsonx: LlmConfig =
            yaml_serde::from_str("model: watsonx/ibm/granite-4-h-small\nwatsonx_project: p1")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(watsonx.project_id.as_deref(), Some("p1"));
        let space: LlmConfig = yaml_serde::from_str("model: watsonx/x\nspace_id: s1")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(space.space_id.as_deref(), Some("s1"));
        let shown = serde_json::to_value(LlmConfig::new("gpt-4o")).unwrap_or_default();
        assert!(
            shown.get("vertex_credentials").is_none(),
            "unset provider settings are left out"
        );
    }
}
