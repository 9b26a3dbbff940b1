//! Access tokens a provider's credential is exchanged for (Vertex AI's Google credentials, IBM
//! watsonx.ai's API key), and how a request carries its credential.
//!
//! - [`TokenEndpoint`]: one OAuth-style token request (a form POST) over its own network
//!   transport with a connect timeout and a total timeout, never through a cassette recorder
//!   (the form holds the credential and the reply the token). The reply's `access_token` and
//!   `expires_in` become an [`IssuedToken`]; a refusal is an authentication error naming where
//!   the credential comes from.
//! - [`TokenCache`]: a client's token, handed out until shortly before it expires; concurrent
//!   calls that find it stale wait for one exchange instead of making one each.
//! - [`Credential`]: a fixed header (an API key, a token given as is) or an exchanged token;
//!   [`Credential::send`] makes a request with it and, when the server refuses an exchanged
//!   token before its time (revoked, rotated), exchanges once more and repeats the request.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::config::LlmConfig;
use crate::error::{BoxError, LlmError};
use crate::http::{
    ErrorContext, HttpClient, HttpRequest, NetworkTransport, SseStream, Transport,
    parse_retry_after,
};

/// The longest a token request may take; a token server answers in well under a second, so a
/// slow one fails the call long before its own (much longer) model timeout would.
pub(crate) const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long before its expiry a token is exchanged again (a quarter of its lifetime for tokens
/// shorter than four of these), so a call never goes out with one about to lapse.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);
/// How long a token whose reply said nothing of its lifetime is reused.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(300);

/// A token as an exchange returned it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct IssuedToken {
    pub(crate) value: String,
    /// `expires_in` of the reply.
    pub(crate) lifetime: Option<Duration>,
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// Obtains a fresh token (signs and sends a JWT, trades an API key, refreshes a grant).
#[async_trait]
pub(crate) trait TokenExchange: Send + Sync + fmt::Debug {
    async fn exchange(&self) -> Result<IssuedToken, LlmError>;
}

/// A token in use and when to replace it.
struct Current {
    value: String,
    refresh_at: Instant,
}

/// One client's token: exchanged on first use, reused until shortly before it expires.
pub(crate) struct TokenCache {
    exchange: Box<dyn TokenExchange>,
    current: Mutex<Option<Current>>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("exchange", &self.exchange)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    pub(crate) fn new(exchange: impl TokenExchange + 'static) -> Self {
        TokenCache {
            exchange: Box::new(exchange),
            current: Mutex::new(None),
        }
    }

    /// The token to send now: the cached one while it is fresh, else a new one. The lock is held
    /// across the exchange, so callers arriving meanwhile get its result.
    pub(crate) async fn token(&self) -> Result<String, LlmError> {
        let mut current = self.current.lock().await;
        if let Some(token) = current.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(token.value.clone());
        }
        let issued = self.exchange.exchange().await?;
        *current = Some(Current {
            value: issued.value.clone(),
            refresh_at: Instant::now() + usable_for(issued.lifetime),
        });
        Ok(issued.value)
    }

    /// Drops `rejected` if it is still the cached token (a server refused it before its time),
    /// so the next [`TokenCache::token`] exchanges again.
    pub(crate) async fn forget(&self, rejected: &str) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|t| t.value == rejected) {
            *current = None;
        }
    }
}

/// How long a token with `lifetime` is handed out.
fn usable_for(lifetime: Option<Duration>) -> Duration {
    let lifetime = lifetime.unwrap_or(UNSTATED_LIFETIME);
    lifetime.saturating_sub(EXPIRY_MARGIN.min(lifetime / 4))
}

/// How a request proves who it is.
#[derive(Clone)]
pub(crate) enum Credential {
    /// One fixed header: an API key (`x-goog-api-key`), a token given as it is
    /// (`authorization: Bearer …`, `authorization: ZenApiKey …`).
    Fixed { name: &'static str, value: String },
    /// `authorization: Bearer <token>` with a token exchanged for and cached.
    Exchanged(Arc<TokenCache>),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Fixed { name, .. } => write!(f, "Fixed({name})"),
            Credential::Exchanged(cache) => write!(f, "Exchanged({cache:?})"),
        }
    }
}

impl Credential {
    /// `authorization: Bearer <token>` with a token given as it is.
    pub(crate) fn bearer(token: impl fmt::Display) -> Self {
        Credential::Fixed {
            name: "authorization",
            value: format!("Bearer {token}"),
        }
    }

    /// Exchanges with `exchange` when a request needs a token, caching it.
    pub(crate) fn exchanged(exchange: impl TokenExchange + 'static) -> Self {
        Credential::Exchanged(Arc::new(TokenCache::new(exchange)))
    }

    /// The header, and the exchanged token it carries (`None` for a fixed one).
    async fn header(&self) -> Result<((String, String), Option<String>), LlmError> {
        match self {
            Credential::Fixed { name, value } => Ok(((name.to_string(), value.clone()), None)),
            Credential::Exchanged(cache) => {
                let token = cache.token().await?;
                let header = ("authorization".to_string(), format!("Bearer {token}"));
                Ok((header, Some(token)))
            }
        }
    }

    /// Runs `send` with the credential's header. An exchanged token the server refuses as
    /// unauthenticated (401) is forgotten and `send` runs once more with a new one: tokens are
    /// revoked and keys rotated before the expiry the exchange stated.
    pub(crate) async fn send<T, F, Fut>(&self, send: F) -> Result<T, LlmError>
    where
        F: Fn((String, String)) -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let (header, token) = self.header().await?;
        let result = send(header).await;
        match (result, token, self) {
            (
                Err(LlmError::Authentication { .. }),
                Some(rejected),
                Credential::Exchanged(cache),
            ) => {
                cache.forget(&rejected).await;
                let (header, _) = self.header().await?;
                send(header).await
            }
            (result, _, _) => result,
        }
    }
}

/// Where a client sends a model's calls and how it authenticates there (the Vertex AI
/// provider builds one for its Gemini and Claude clients).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The provider named in errors, events and spans.
    pub(crate) provider: &'static str,
    /// The model's URL without the method (`…/models/{model}`).
    pub(crate) model_url: String,
    pub(crate) credential: Credential,
    /// Headers besides the credential.
    pub(crate) headers: Vec<(String, String)>,
    /// Where the credential comes from, named on authentication errors.
    pub(crate) key_hint: String,
}

impl Credential {
    /// [`HttpClient::post_bytes`] with the credential, retried as [`Credential::send`] says;
    /// `headers` makes the request's headers from the credential's.
    pub(crate) async fn post_bytes<B, H>(
        &self,
        http: &HttpClient,
        url: &str,
        headers: H,
        body: &B,
    ) -> Result<Bytes, LlmError>
    where
        B: Serialize + ?Sized + Sync,
        H: Fn((String, String)) -> Vec<(String, String)> + Send + Sync,
    {
        self.send(|credential| {
            let headers = headers(credential);
            async move { http.post_bytes(url, &headers, body).await }
        })
        .await
    }

    /// [`HttpClient::post_sse`] with the credential, as [`Credential::post_bytes`].
    pub(crate) async fn post_sse<B, H>(
        &self,
        http: &HttpClient,
        url: &str,
        headers: H,
        body: &B,
    ) -> Result<SseStream, LlmError>
    where
        B: Serialize + ?Sized + Sync,
        H: Fn((String, String)) -> Vec<(String, String)> + Send + Sync,
    {
        self.send(|credential| {
            let headers = headers(credential);
            async move { http.post_sse(url, &headers, body).await }
        })
        .await
    }
}

/// A token request failed on its way; the model call it was for names the provider, this says
/// which endpoint.
#[derive(Debug, thiserror::Error)]
#[error("the token request to {url}")]
pub(crate) struct TokenRequestFailed {
    url: String,
    #[source]
    source: Option<BoxError>,
}

/// A token endpoint and how to reach it.
#[derive(Clone)]
pub(crate) struct TokenEndpoint {
    url: String,
    transport: NetworkTransport,
    /// The provider, and in `key_hint` where the credential comes from (named on a refusal).
    context: ErrorContext,
}

impl fmt::Debug for TokenEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// A token endpoint's reply (OAuth 2's shape, which IBM's IAM answers in too).
#[derive(Deserialize)]
struct TokenReply {
    access_token: Option<String>,
    /// Seconds; a number, though some servers write it as a string.
    #[serde(default, deserialize_with = "crate::wire::lenient_code")]
    expires_in: Option<String>,
}

/// A token endpoint's refusal: OAuth 2's `error` and `error_description` (Google), or IBM IAM's
/// `errorCode` and `errorMessage`.
#[derive(Deserialize, Default)]
struct TokenRefusal {
    error: Option<String>,
    error_description: Option<String>,
    #[serde(rename = "errorCode")]
    error_code: Option<String>,
    #[serde(rename = "errorMessage")]
    error_message: Option<String>,
}

impl TokenRefusal {
    /// What the server said, in a sentence: description (code).
    fn text(self, body: &str) -> String {
        let code = self.error.or(self.error_code);
        match (self.error_description.or(self.error_message), code) {
            (Some(message), Some(code)) => format!("{message} ({code})"),
            (Some(message), None) => message,
            (None, Some(code)) => code,
            (None, None) => crate::http::snippet(body),
        }
    }
}

impl TokenEndpoint {
    /// The endpoint at `url`, reached with `config`'s connect timeout and at most
    /// [`TOKEN_REQUEST_TIMEOUT`] per request (less when the config's own timeout is shorter).
    pub(crate) fn new(
        url: impl Into<String>,
        context: ErrorContext,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let timeout = config.request_timeout().min(TOKEN_REQUEST_TIMEOUT);
        Ok(TokenEndpoint {
            url: url.into(),
            transport: NetworkTransport::new(config.connect_timeout(), timeout)?,
            context,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// POSTs `form` (URL-encoded) and reads the token from the reply. `secrets` are the form's
    /// credential values, kept out of any error message.
    pub(crate) async fn request(
        &self,
        form: &[(&str, &str)],
        secrets: &[&str],
    ) -> Result<IssuedToken, LlmError> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let request = HttpRequest {
            method: "POST".into(),
            url: self.url.clone(),
            headers: vec![
                (
                    "content-type".into(),
                    "application/x-www-form-urlencoded".into(),
                ),
                ("accept".into(), "application/json".into()),
            ],
            body: Bytes::from(body),
            streaming: false,
        };
        let response = self
            .transport
            .send(request, &self.context)
            .await
            .map_err(|e| self.failed_on_the_way(e))?;
        let status = response.status;
        let retry_after = parse_retry_after(&response.headers);
        let bytes = response
            .body
            .into_bytes()
            .await
            .map_err(|e| self.failed_on_the_way(e))?;
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        let text = crate::error::redact_credentials(&String::from_utf8_lossy(&bytes), &secrets);
        if status >= 400 {
            let said = serde_json::from_str::<TokenRefusal>(&text)
                .unwrap_or_default()
                .text(&text);
            return Err(self.refused(status, retry_after, said));
        }
        // Not `wire::decode`: its message quotes the reply, and this one holds the token.
        let reply: TokenReply = serde_json::from_str(&text).map_err(|e| {
            LlmError::malformed_because(
                self.context.provider.clone(),
                format!("the token reply of {} is not the documented JSON", self.url),
                e,
            )
        })?;
        let value = reply
            .access_token
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| {
                LlmError::malformed(
                    self.context.provider.clone(),
                    format!("the token reply of {} has no access_token", self.url),
                )
            })?;
        let lifetime = reply
            .expires_in
            .and_then(|seconds| seconds.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        Ok(IssuedToken { value, lifetime })
    }

    /// The error for a refusal with `status`: a credential the server does not accept (any 4xx
    /// but a rate limit) is an authentication error naming where it comes from.
    fn refused(&self, status: u16, retry_after: Option<Duration>, said: String) -> LlmError {
        let provider = self.context.provider.clone();
        let message = format!("the token endpoint {} refused: {said}", self.url);
        match status {
            429 => LlmError::RateLimited {
                provider,
                retry_after,
                message,
            },
            400..=499 => LlmError::Authentication {
                provider,
                message,
                hint: self.context.key_hint.clone(),
            },
            _ => LlmError::Server {
                provider,
                status,
                message,
                retry_after,
            },
        }
    }

    /// A transport failure, with this endpoint named in its causes.
    fn failed_on_the_way(&self, error: LlmError) -> LlmError {
        let named = |source: Option<BoxError>| -> BoxError {
            Box::new(TokenRequestFailed {
                url: self.url.clone(),
                source,
            })
        };
        match error {
            LlmError::Connection { provider, source } => LlmError::Connection {
                provider,
                source: named(Some(source)),
            },
            LlmError::Timeout {
                provider,
                after,
                source,
            } => LlmError::Timeout {
                provider,
                after,
                source: Some(named(source)),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Hands out `token-1`, `token-2`, … each living `lifetime`.
    #[derive(Debug)]
    struct Counting {
        made: Arc<AtomicUsize>,
        lifetime: Option<Duration>,
    }

    #[async_trait]
    impl TokenExchange for Counting {
        async fn exchange(&self) -> Result<IssuedToken, LlmError> {
            let n = self.made.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(IssuedToken {
                value: format!("token-{n}"),
                lifetime: self.lifetime,
            })
        }
    }

    fn counting(lifetime: Option<Duration>) -> (Arc<AtomicUsize>, TokenCache) {
        let made = Arc::new(AtomicUsize::new(0));
        let cache = TokenCache::new(Counting {
            made: made.clone(),
            lifetime,
        });
        (made, cache)
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_reused_until_a_minute_before_it_expires() {
        let (made, cache) = counting(Some(Duration::from_secs(3600)));
        assert_eq!(cache.token().await.ok().as_deref(), Some("token-1"));
        tokio::time::advance(Duration::from_secs(3600 - 61)).await;
        assert_eq!(cache.token().await.ok().as_deref(), Some("token-1"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(cache.token().await.ok().as_deref(), Some("token-2"));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn short_and_unstated_lifetimes_keep_a_margin_of_their_own() {
        assert_eq!(
            usable_for(Some(Duration::from_secs(100))),
            Duration::from_secs(75)
        );
        assert_eq!(usable_for(None), Duration::from_secs(240));
        assert_eq!(usable_for(Some(Duration::ZERO)), Duration::ZERO);
        let (made, cache) = counting(Some(Duration::ZERO));
        let _ = cache.token().await;
        let _ = cache.token().await;
        assert_eq!(
            made.load(Ordering::SeqCst),
            2,
            "an expired token is never reused"
        );
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_exchange() {
        let (made, cache) = counting(Some(Duration::from_secs(3600)));
        let cache = Arc::new(cache);
        let calls = (0..8).map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.token().await.ok() })
        });
        for call in calls {
            assert_eq!(call.await.ok().flatten().as_deref(), Some("token-1"));
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_refused_exchanged_token_is_replaced_once() {
        let (made, cache) = counting(Some(Duration::from_secs(3600)));
        let credential = Credential::Exchanged(Arc::new(cache));
        let seen = std::sync::Mutex::new(Vec::new());
        let refuse_all = |header: (String, String)| {
            seen.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(header.1);
            async {
                Err::<(), _>(LlmError::Authentication {
                    provider: "p".into(),
                    message: "expired".into(),
                    hint: "P_KEY".into(),
                })
            }
        };
        assert!(matches!(
            credential.send(refuse_all).await,
            Err(LlmError::Authentication { .. })
        ));
        assert_eq!(
            *seen.lock().unwrap_or_else(|p| p.into_inner()),
            ["Bearer token-1", "Bearer token-2"],
            "one new exchange, one repeat, then the refusal stands"
        );
        assert_eq!(made.load(Ordering::SeqCst), 2);
        let fixed = Credential::bearer("given");
        let tries = AtomicUsize::new(0);
        let result = fixed
            .send(|_| {
                tries.fetch_add(1, Ordering::SeqCst);
                async {
                    Err::<(), _>(LlmError::Authentication {
                        provider: "p".into(),
                        message: "no".into(),
                        hint: "P_TOKEN".into(),
                    })
                }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(
            tries.load(Ordering::SeqCst),
            1,
            "a given token cannot be renewed"
        );
    }

    #[test]
    fn refusals_read_both_oauth_and_ibm_shapes() {
        let google: TokenRefusal = serde_json::from_str(
            r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#,
        )
        .unwrap_or_default();
        assert_eq!(google.text(""), "Invalid JWT Signature. (invalid_grant)");
        let ibm: TokenRefusal = serde_json::from_str(
            r#"{"errorCode":"BXNIM0415E","errorMessage":"Provided API key could not be found."}"#,
        )
        .unwrap_or_default();
        assert_eq!(
            ibm.text(""),
            "Provided API key could not be found. (BXNIM0415E)"
        );
        assert_eq!(
            TokenRefusal::default().text("<html>busy</html>"),
            "<html>busy</html>"
        );
    }
}
