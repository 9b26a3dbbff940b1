//! Retries of retryable failures: exponential backoff with full jitter, honouring `Retry-After`,
//! with a bounded number of attempts and a bounded total time.
//!
//! ```
//! use std::time::Duration;
//! use crewai_llm::retry::RetryPolicy;
//! let policy = RetryPolicy::default();
//! assert_eq!(policy.max_retries, 2);
//! // A server's Retry-After wins over the computed backoff (capped at `max_retry_after`).
//! assert_eq!(policy.delay_for(0, Some(Duration::from_secs(3))), Duration::from_secs(3));
//! assert!(policy.delay_for(5, None) <= policy.max_delay);
//! ```

use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;
use tokio::time::Instant;

use crate::error::LlmError;
use crate::layer::{LlmLayer, Next};
use crate::traits::LlmStream;
use crate::types::{LlmRequest, LlmResponse};

/// When and how often to try again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (2 by default, like the OpenAI SDK).
    pub max_retries: u32,
    /// The first backoff's upper bound; doubled per retry.
    pub base_delay: Duration,
    /// The largest computed backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured.
    pub max_retry_after: Duration,
    /// All attempts and waits together; no retry starts past it and the running attempt is cut at it.
    pub max_total: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: crate::http::MAX_RETRY_AFTER,
            max_total: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Default::default()
        }
    }

    setters! {
        pub fn with_max_retries(retries: u32) => max_retries = retries;
        pub fn with_max_retry_after(cap: Duration) => max_retry_after = cap;
        pub fn with_max_total(total: Duration) => max_total = total;
    }

    /// Scales every wait (tests use milliseconds).
    pub fn with_delays(mut self, base: Duration, max: Duration) -> Self {
        self.base_delay = base;
        self.max_delay = max;
        self
    }

    /// The wait before retry number `retry` (0-based): the server's `Retry-After` when given,
    /// else a uniformly random time up to `min(max_delay, base_delay * 2^retry)`.
    pub fn delay_for(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let ceiling = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(20)))
            .min(self.max_delay);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }

    /// Runs `attempt` until it succeeds, fails with an error that is not retryable, or the retries
    /// or the total time run out (the running attempt is cut at the deadline). `provider` and
    /// `model` name what is retried, in the logs and in the timeout error.
    pub async fn run<T, F, Fut>(
        &self,
        provider: &str,
        model: &str,
        attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, LlmError>> + Send,
        T: Send,
    {
        self.run_when(provider, model, LlmError::is_retryable, attempt)
            .await
    }

    /// [`RetryPolicy::run`] with its own rule of which errors are worth another attempt.
    pub async fn run_when<T, F, Fut>(
        &self,
        provider: &str,
        model: &str,
        worth_retrying: fn(&LlmError) -> bool,
        mut attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, LlmError>> + Send,
        T: Send,
    {
        let deadline = Instant::now() + self.max_total;
        let mut retry = 0;
        loop {
            let error = match tokio::time::timeout_at(deadline, attempt()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error)) => error,
                Err(_) => {
                    return Err(LlmError::Timeout {
                        provider: provider.to_string(),
                        after: self.max_total,
                        source: None,
                    });
                }
            };
            if !worth_retrying(&error) || retry >= self.max_retries {
                return Err(error);
            }
            let wait = self.delay_for(retry, error.retry_after());
            if Instant::now() + wait >= deadline {
                return Err(error);
            }
            tracing::warn!(provider, model, retry = retry + 1, wait_ms = wait.as_millis() as u64, error = %crate::error_chain(&error), "retrying a failed request");
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }
}

/// Whether a model call is worth making again: a retryable error, or a reply that arrived
/// garbled (not JSON, no choices, cut off while its body was read). Garbled replies are transient
/// in practice (a proxy or a connection failing mid-reply), and trying the one call again is far
/// cheaper than the executor re-running the agent's whole work, tools included.
fn worth_calling_again(error: &LlmError) -> bool {
    error.is_retryable() || matches!(error, LlmError::MalformedResponse { .. })
}

/// The retry layer: retryable failures (and garbled replies) are tried again under a
/// [`RetryPolicy`], each attempt through the rest of the stack.
#[derive(Debug, Clone, Default)]
pub struct RetryLayer {
    policy: RetryPolicy,
}

impl RetryLayer {
    pub fn new(policy: RetryPolicy) -> Self {
        RetryLayer { policy }
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

#[async_trait]
impl LlmLayer for RetryLayer {
    fn name(&self) -> &str {
        "retry"
    }

    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let model = next.model();
        self.policy
            .run_when(model.provider(), model.model(), worth_calling_again, || {
                next.call(request.clone())
            })
            .await
    }

    /// Retries opening the stream; once events flow, a failure is passed on (the caller has
    /// already shown part of the reply).
    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let model = next.model();
        self.policy
            .run(model.provider(), model.model(), || {
                next.stream(request.clone())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::layer::LayeredLlm;
    use crate::traits::Llm;
    use crate::types::Message;

    fn retrying(model: Arc<dyn Llm>, policy: RetryPolicy) -> LayeredLlm {
        LayeredLlm::builder(model)
            .layer(RetryLayer::new(policy))
            .build()
    }

    /// A model whose every call fails with a connection error, or never answers.
    struct Unreachable {
        hang: bool,
        calls: std::sync::atomic::AtomicU32,
    }

    #[async_trait]
    impl Llm for Unreachable {
        fn model(&self) -> &str {
            "unreachable"
        }
        async fn call(&self, _request: LlmRequest) -> Result<LlmResponse, LlmError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.hang {
                futures::future::pending::<()>().await;
            }
            Err(LlmError::connection("test", "refused"))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn total_time_is_bounded() {
        let hanging = Arc::new(Unreachable {
            hang: true,
            calls: Default::default(),
        });
        let policy = RetryPolicy::default().with_max_total(Duration::from_secs(5));
        let error = retrying(hanging, policy)
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .err();
        assert!(
            matches!(error, Some(LlmError::Timeout { after, .. }) if after == Duration::from_secs(5)),
            "{error:?}"
        );

        // Backoff that would overrun the budget is not started: the last error comes back.
        let failing = Arc::new(Unreachable {
            hang: false,
            calls: Default::default(),
        });
        let policy = RetryPolicy::default()
            .with_max_retries(10)
            .with_delays(Duration::from_secs(4), Duration::from_secs(4))
            .with_max_total(Duration::from_secs(1));
        let llm = retrying(failing.clone(), policy);
        let error = llm
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .err();
        assert!(
            matches!(error, Some(LlmError::Connection { .. })),
            "{error:?}"
        );
        assert!(failing.calls.load(std::sync::atomic::Ordering::SeqCst) < 10);
    }

    #[tokio::test(start_paused = true)]
    async fn garbled_replies_are_called_again_but_not_past_the_retries() {
        let garbled = || {
            LlmError::malformed_because(
                "test",
                "reading the response body failed",
                "connection reset",
            )
        };
        let policy = RetryPolicy::default().with_max_retries(2);
        let flaky = Arc::new(
            crate::ScriptedLlm::new("flaky")
                .then_error(garbled())
                .then_text("fine"),
        );
        let reply = retrying(flaky.clone(), policy.clone())
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(reply.content.as_deref(), Some("fine"));

        let broken = Arc::new(
            crate::ScriptedLlm::new("broken")
                .then_error(garbled())
                .then_error(garbled())
                .then_error(garbled())
                .then_text("never reached"),
        );
        let error = retrying(broken, policy)
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .err();
        assert!(
            matches!(error, Some(LlmError::MalformedResponse { .. })),
            "{error:?}"
        );

        // What is wrong with the request itself is not worth another call.
        let rejected = Arc::new(
            crate::ScriptedLlm::new("rejected")
                .then_error(LlmError::InvalidRequest {
                    provider: "test".into(),
                    status: 400,
                    message: "bad".into(),
                })
                .then_text("never reached"),
        );
        let error = retrying(rejected, RetryPolicy::default())
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .err();
        assert!(
            matches!(error, Some(LlmError::InvalidRequest { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let policy = RetryPolicy::default();
        for retry in 0..10 {
            let wait = policy.delay_for(retry, None);
            assert!(wait <= Duration::from_secs(8));
            assert!(wait <= Duration::from_millis(500) * 2u32.pow(retry));
        }
        assert_eq!(
            policy.delay_for(0, Some(Duration::from_secs(600))),
            policy.max_retry_after
        );
        let zero = RetryPolicy::default().with_delays(Duration::ZERO, Duration::ZERO);
        assert_eq!(zero.delay_for(3, None), Duration::ZERO);
    }
}
