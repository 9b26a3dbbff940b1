//! Typed errors of the LLM layer.

use std::time::Duration;

/// The lower-level error an [`LlmError`] keeps as its `source()`: reqwest's, hyper's, serde's, an
/// I/O error. Boxed rather than one enum because the causes come from several libraries, and
/// downcastable (`error.source()?.downcast_ref::<reqwest::Error>()`) where a caller needs the type.
/// A plain string converts into one (`"connection reset".into()`) for test doubles.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in a model call.
///
/// Not `Clone`: the variants that wrap a lower-level failure keep it as their `source()`
/// ([`BoxError`]), and their own text says only what failed at this level; render an error with
/// [`error_chain`] to show its causes.
#[derive(Debug, thiserror::Error)]
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
    /// No reply within `after`. `source` is the HTTP library's timeout error when it was the
    /// one that noticed (`None` when the client's own deadline fired).
    #[error("{provider}: request timed out after {}s", .after.as_secs_f64())]
    Timeout {
        provider: String,
        after: Duration,
        #[source]
        source: Option<BoxError>,
    },
    /// The request did not reach the server or its reply did not arrive (refused, reset, TLS,
    /// DNS): `source` says how.
    #[error("{provider}: connection failed")]
    Connection {
        provider: String,
        #[source]
        source: BoxError,
    },
    /// A reply that cannot be read: `message` says what was wrong with it (and shows its start),
    /// `source` is the decoder's error when there was one.
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse {
        provider: String,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    #[error("{provider} needs an API key: set {env_var}")]
    MissingApiKey { provider: String, env_var: String },
    /// The provider's credential sources gave none that work (Bedrock's: the AWS SDK's chain of
    /// environment, shared files, SSO, container and instance roles; Vertex AI's: Google's
    /// service-account keys and ADC file): `message` says what was looked for and what to set,
    /// `source` what the failing source said.
    #[error("{provider}: no usable credentials: {message}")]
    Credentials {
        provider: String,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    #[error("invalid LLM configuration: {0}")]
    Config(String),
    /// A configuration value a library refused (a URL, a header, an `extra_body` that does not
    /// serialise) or a client that could not be set up from it (TLS, proxy): `message` says
    /// which, `source` why.
    #[error("invalid LLM configuration: {message}")]
    InvalidConfig {
        message: String,
        #[source]
        source: BoxError,
    },
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
    /// Every model of a fallback chain failed: `attempts` are the failures before the last
    /// (`provider/model: error`), `last` the last model's error (the source).
    #[error("all models failed; last error")]
    AllFallbacksFailed {
        #[source]
        last: Box<LlmError>,
        attempts: Vec<String>,
    },
    /// The call was not made: it would have gone over the run's budget (`max_cost_usd`,
    /// `max_tokens`). The budget layer of a run's stack refuses it before anything is sent.
    #[error(transparent)]
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
    /// A [`LlmError::MalformedResponse`] without a lower-level cause.
    pub fn malformed(provider: impl Into<String>, message: impl Into<String>) -> Self {
        LlmError::MalformedResponse {
            provider: provider.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A [`LlmError::MalformedResponse`] caused by `source` (a decoder's error).
    pub fn malformed_because(
        provider: impl Into<String>,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        LlmError::MalformedResponse {
            provider: provider.into(),
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A [`LlmError::Connection`] failure of `provider`, caused by `source`.
    pub fn connection(provider: impl Into<String>, source: impl Into<BoxError>) -> Self {
        LlmError::Connection {
            provider: provider.into(),
            source: source.into(),
        }
    }

    /// A [`LlmError::InvalidConfig`]: `message` names the value, `source` why it was refused.
    pub fn invalid_config(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        LlmError::InvalidConfig {
            message: message.into(),
            source: source.into(),
        }
    }

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

/// An error and its causes as one line, `outer: cause: root cause`.
///
/// Errors across the workspace follow one rule: a variant that wraps another error keeps it as
/// its `source()` and its own `Display` says only what failed at its level. Whoever shows an
/// error to a person or a model renders the whole chain with this (the CLI, tool observations,
/// event payloads), so no cause is printed twice and none is lost.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
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
    mentions_any(message, PHRASES)
}

/// Whether `message` contains one of `phrases` (written lowercase), ignoring case: how the
/// adapters read servers that say what went wrong only in words.
pub(crate) fn mentions_any(message: &str, phrases: &[&str]) -> bool {
    let lower = message.to_lowercase();
    phrases.iter().any(|phrase| lower.contains(phrase))
}

/// Request headers whose values are credentials.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "x-amz-security-token",
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
        let refused = || LlmError::ToolsUnsupported {
            provider: "ollama".into(),
            model: "gemma".into(),
            message: "registry.ollama.ai/library/gemma does not support tools".into(),
        };
        let chain = LlmError::AllFallbacksFailed {
            last: Box::new(refused()),
            attempts: vec!["ollama/gemma".into()],
        };
        let refused = refused();
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
            error_chain(&filtered),
            "azure: the request was refused by the content filter: filtered"
        );
        assert_eq!(
            error_chain(&chain),
            "all models failed; last error: ollama: model 'gemma' does not support native tool calling: \
             registry.ollama.ai/library/gemma does not support tools"
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

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store")]
    struct Outer {
        #[source]
        cause: std::io::Error,
    }

    #[test]
    fn renders_every_cause_once_in_order() {
        let error = Outer {
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        };
        assert_eq!(error_chain(&error), "cannot open the store: no such file");
        let reset = LlmError::connection("openai", error);
        assert_eq!(
            error_chain(&reset),
            "openai: connection failed: cannot open the store: no such file"
        );
    }
}
