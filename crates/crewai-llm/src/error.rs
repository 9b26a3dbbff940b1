//! Typed errors of the LLM layer.

use std::time::Duration;

/// Everything that can go wrong in a model call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    #[error("{provider}: authentication failed ({message}); check {hint}")]
    Authentication {
        provider: String,
        message: String,
        hint: String,
    },
    #[error("{provider}: permission denied: {message}")]
    PermissionDenied { provider: String, message: String },
    #[error("{provider}: model '{model}' not found: {message}")]
    ModelNotFound {
        provider: String,
        model: String,
        message: String,
    },
    #[error("{provider}: rate limited{}: {message}", retry_after.map(|d| format!(" (retry after {:.1}s)", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        provider: String,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("{provider}: context length exceeded: {message}")]
    ContextLengthExceeded { provider: String, message: String },
    /// The model (or the server in front of it) does not take native tools: the provider's
    /// error said so. A caller can go on without tools (crewai-core moves the run to ReAct text).
    #[error("{provider}: model '{model}' does not support native tool calling: {message}")]
    ToolsUnsupported {
        provider: String,
        model: String,
        message: String,
    },
    /// The provider's content policy refused the request (Azure's content management policy,
    /// OpenAI's `content_filter` error code). Replies the filter cut short are not errors: they
    /// come back with [`crate::FinishReason::ContentFilter`].
    #[error("{provider}: the request was refused by the content filter: {message}")]
    ContentFiltered { provider: String, message: String },
    #[error("{provider}: invalid request: {message}")]
    InvalidRequest {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: server error {status}: {message}")]
    Server {
        provider: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{provider}: request timed out after {}s", .after.as_secs_f64())]
    Timeout { provider: String, after: Duration },
    #[error("{provider}: connection failed: {message}")]
    Connection { provider: String, message: String },
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse { provider: String, message: String },
    #[error("{provider} needs an API key: set {env_var}")]
    MissingApiKey { provider: String, env_var: String },
    #[error("invalid LLM configuration: {0}")]
    Config(String),
    /// A `provider:` value or a model-string prefix no registered provider answers to.
    #[error("{}", unknown_provider_message(name, model.as_deref(), known))]
    UnknownProvider {
        /// The unknown name or prefix.
        name: String,
        /// The model string it was the prefix of (`None` for a `provider:` value).
        model: Option<String>,
        /// Every name and alias the registry knows, sorted.
        known: Vec<String>,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("all models failed; last error: {last}")]
    AllFallbacksFailed {
        last: Box<LlmError>,
        attempts: Vec<String>,
    },
    /// The call was not made: it would have gone over the run's budget (`max_cost_usd`,
    /// `max_tokens`). The budget layer of a run's stack refuses it before anything is sent.
    #[error("{0}")]
    BudgetExceeded(Box<crate::budget::BudgetExceeded>),
    /// A layer of the stack refused the call before it was sent: `by` names what refused it
    /// (`before_llm_call hook` for a blocking hook), `reason` says why when it was given.
    #[error("LLM call blocked by {by}{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    Blocked { by: String, reason: Option<String> },
    /// A reply the caller asked to be JSON in its `response_format` came back as something
    /// else (an agent's structured-output call). The reply was received and counted; it just
    /// cannot be used.
    #[error("{model}: the reply does not match the requested response format: {message}")]
    InvalidStructuredReply { model: String, message: String },
}

fn unknown_provider_message(name: &str, model: Option<&str>, known: &[String]) -> String {
    let known = known.join(", ");
    // Worded like `Config`: it is a configuration mistake, and callers show it as one.
    match model {
        Some(model) => format!(
            "invalid LLM configuration: unknown provider prefix '{name}' in model '{model}'; known prefixes: {known}. \
             To send the whole name to an OpenAI-compatible server, set `base_url` or `provider`, \
             or write `openai/{model}`"
        ),
        None => format!("invalid LLM configuration: unknown provider '{name}'; use one of {known}"),
    }
}

impl LlmError {
    /// Worth trying again (same model after a backoff, or a fallback model).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::Timeout { .. }
                | LlmError::Connection { .. }
        )
    }

    /// The wait the provider asked for, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } | LlmError::Server { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// True for a context-window overflow. The adapters decide it from their provider's error
    /// body (its code, or the phrase it uses when it has no code), so this is a match on the
    /// variant, through a fallback chain's last error.
    pub fn is_context_length(&self) -> bool {
        match self {
            LlmError::ContextLengthExceeded { .. } => true,
            LlmError::AllFallbacksFailed { last, .. } => last.is_context_length(),
            _ => false,
        }
    }

    /// True when the provider said the model takes no native tools (see
    /// [`LlmError::ToolsUnsupported`]), through a fallback chain's last error.
    pub fn is_tools_unsupported(&self) -> bool {
        match self {
            LlmError::ToolsUnsupported { .. } => true,
            LlmError::AllFallbacksFailed { last, .. } => last.is_tools_unsupported(),
            _ => false,
        }
    }
}

/// Recognises a provider's context-overflow message (the phrases CrewAI matches, and a few more).
pub fn looks_like_context_overflow(message: &str) -> bool {
    const PHRASES: &[&str] = &[
        "maximum context length",
        "context length exceeded",
        "context_length_exceeded",
        "context window full",
        "too many tokens",
        "input is too long",
        "exceeds token limit",
        "expected a string with maximum length",
        "prompt is too long",
        "exceeds the context window",
        "input token count",
        "exceeds the available context size",
    ];
    let lower = message.to_lowercase();
    PHRASES.iter().any(|p| lower.contains(p))
}

/// Request headers whose values are credentials.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
];

/// Shorter values are not redacted: they cannot be told apart from ordinary words.
const MIN_REDACTED_LEN: usize = 8;

/// The credentials a request carries in its headers: each credential header's value and, for
/// `Authorization: Bearer <key>`, the bare key too (providers echo the key alone).
pub(crate) fn credentials_in(headers: &[(String, String)]) -> Vec<String> {
    let mut credentials: Vec<String> = Vec::new();
    for (name, value) in headers {
        if !CREDENTIAL_HEADERS
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        let token = value
            .split_once(' ')
            .map_or(value.as_str(), |(_, token)| token);
        for secret in [value.trim(), token.trim()] {
            if secret.len() >= MIN_REDACTED_LEN && !credentials.iter().any(|c| c == secret) {
                credentials.push(secret.to_string());
            }
        }
    }
    // The longest first, so `Bearer <key>` goes whole rather than leaving `Bearer [redacted]`.
    credentials.sort_by_key(|c| std::cmp::Reverse(c.len()));
    credentials
}

/// `text` with every one of `credentials` replaced by `[redacted]`: a provider's error body can
/// repeat the key it rejected, and error messages end up on the console, in events and traces.
pub(crate) fn redact_credentials(text: &str, credentials: &[String]) -> String {
    credentials.iter().fold(text.to_string(), |text, secret| {
        text.replace(secret.as_str(), "[redacted]")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_in_credential_headers_are_redacted_with_or_without_their_scheme() {
        let credentials = credentials_in(&headers(&[
            ("content-type", "application/json"),
            ("Authorization", "Bearer sk-live-1234567890"),
            ("x-api-key", "ant-key-abcdefgh"),
        ]));
        let body = "Incorrect API key provided: sk-live-1234567890 (sent as Bearer sk-live-1234567890); ant-key-abcdefgh";
        assert_eq!(
            redact_credentials(body, &credentials),
            "Incorrect API key provided: [redacted] (sent as [redacted]); [redacted]"
        );
    }

    #[test]
    fn typed_variants_are_seen_through_a_fallback_chain() {
        let refused = LlmError::ToolsUnsupported {
            provider: "ollama".into(),
            model: "gemma".into(),
            message: "registry.ollama.ai/library/gemma does not support tools".into(),
        };
        let chain = LlmError::AllFallbacksFailed {
            last: Box::new(refused.clone()),
            attempts: vec!["ollama/gemma".into()],
        };
        assert!(refused.is_tools_unsupported() && chain.is_tools_unsupported());
        assert!(!refused.is_retryable() && !refused.is_context_length());
        // The words alone no longer decide: the adapters turn them into the typed variant.
        let worded = LlmError::InvalidRequest {
            provider: "p".into(),
            status: 400,
            message: "prompt is too long".into(),
        };
        assert!(!worded.is_context_length() && !worded.is_tools_unsupported());
        let filtered = LlmError::ContentFiltered {
            provider: "azure".into(),
            message: "filtered".into(),
        };
        assert!(!filtered.is_retryable());
        assert_eq!(
            filtered.to_string(),
            "azure: the request was refused by the content filter: filtered"
        );
    }

    #[test]
    fn short_values_and_other_headers_are_left_alone() {
        let credentials = credentials_in(&headers(&[
            ("authorization", "Bearer test"),
            ("accept", "text/event-stream-long"),
        ]));
        assert_eq!(credentials, vec!["Bearer test".to_string()]);
        assert_eq!(
            redact_credentials("a test of text/event-stream-long", &credentials),
            "a test of text/event-stream-long"
        );
    }
}
