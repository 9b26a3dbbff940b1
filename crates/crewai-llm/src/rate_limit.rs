//! Request- and token-rate limits that several agents can share.
//!
//! A [`RateLimiter`] is an async token bucket: a caller over the limit sleeps until the bucket
//! refills (no busy wait), and dropping the waiting future cancels the wait. Share one `Arc` among
//! the agents of a crew to give them one `max_rpm` budget.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use crewai_llm::RateLimiter;
//! let limiter = RateLimiter::per_minute(60);
//! limiter.acquire().await; // returns at once: the bucket starts full
//! # }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::LlmError;
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse, StreamEvent};

#[derive(Debug)]
struct Bucket {
    capacity: f64,
    per_second: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// May go below zero when a call used more tokens than estimated (a debt paid by waiting).
    available: f64,
    refreshed: Instant,
}

impl Bucket {
    fn per_minute(capacity: u32) -> Self {
        let capacity = f64::from(capacity.max(1));
        Bucket { capacity, per_second: capacity / 60.0, state: Mutex::new(BucketState { available: capacity, refreshed: Instant::now() }) }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut BucketState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(state.refreshed).as_secs_f64();
        state.available = (state.available + elapsed * self.per_second).min(self.capacity);
        state.refreshed = now;
        f(&mut state)
    }

    /// Takes `amount` (capped at the capacity, so one large call cannot wait forever).
    async fn take(&self, amount: f64) {
        let amount = amount.min(self.capacity);
        loop {
            let wait = self.with_state(|state| {
                if state.available >= amount {
                    state.available -= amount;
                    None
                } else {
                    Some(Duration::from_secs_f64((amount - state.available) / self.per_second))
                }
            });
            match wait {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    fn adjust(&self, delta: f64) {
        self.with_state(|state| state.available = (state.available - delta).min(self.capacity));
    }
}

/// A shared requests-per-minute limit, optionally with a tokens-per-minute limit.
#[derive(Debug)]
pub struct RateLimiter {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
}

impl RateLimiter {
    /// At most `max_rpm` requests per minute (a burst of `max_rpm`, then an even pace).
    pub fn per_minute(max_rpm: u32) -> Arc<Self> {
        Arc::new(RateLimiter { requests: Some(Bucket::per_minute(max_rpm)), tokens: None })
    }

    /// Request and/or token limits; `None` leaves that dimension unlimited.
    pub fn new(max_rpm: Option<u32>, max_tpm: Option<u32>) -> Arc<Self> {
        Arc::new(RateLimiter { requests: max_rpm.map(Bucket::per_minute), tokens: max_tpm.map(Bucket::per_minute) })
    }

    /// Waits for one request slot.
    pub async fn acquire(&self) {
        if let Some(bucket) = &self.requests {
            bucket.take(1.0).await;
        }
    }

    /// Waits for one request slot and `estimated_tokens` of the token budget.
    pub async fn acquire_with_tokens(&self, estimated_tokens: u64) {
        self.acquire().await;
        if let Some(bucket) = &self.tokens {
            bucket.take(estimated_tokens as f64).await;
        }
    }

    /// Corrects the token budget once the real usage is known.
    pub fn record_tokens(&self, estimated_tokens: u64, actual_tokens: u64) {
        if let Some(bucket) = &self.tokens {
            bucket.adjust(actual_tokens as f64 - estimated_tokens as f64);
        }
    }

    /// True when a token limit is set.
    pub fn limits_tokens(&self) -> bool {
        self.tokens.is_some()
    }
}

/// A rough token count of a request (four characters a token), used before the call.
pub fn estimate_tokens(request: &LlmRequest) -> u64 {
    let chars: usize = request.messages.iter().map(|m| m.text().len()).sum::<usize>()
        + request.tools.iter().map(|t| t.description.len() + t.parameters.to_string().len()).sum::<usize>();
    (chars as u64).div_ceil(4) + request.options.max_tokens.map(u64::from).unwrap_or(0)
}

/// Wraps a model so every call first waits on a (possibly shared) [`RateLimiter`].
pub struct RateLimitedLlm {
    inner: Arc<dyn Llm>,
    limiter: Arc<RateLimiter>,
}

impl RateLimitedLlm {
    pub fn new(inner: Arc<dyn Llm>, limiter: Arc<RateLimiter>) -> Self {
        RateLimitedLlm { inner, limiter }
    }

    pub fn limiter(&self) -> &Arc<RateLimiter> {
        &self.limiter
    }

    async fn admit(&self, request: &LlmRequest) -> u64 {
        let estimate = if self.limiter.limits_tokens() { estimate_tokens(request) } else { 0 };
        self.limiter.acquire_with_tokens(estimate).await;
        estimate
    }
}

#[async_trait]
impl Llm for RateLimitedLlm {
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let estimate = self.admit(&request).await;
        let response = self.inner.call(request).await?;
        self.limiter.record_tokens(estimate, response.usage.total_tokens);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        use futures::StreamExt;
        let estimate = self.admit(&request).await;
        let stream = self.inner.stream(request).await?;
        let limiter = self.limiter.clone();
        Ok(Box::pin(stream.inspect(move |event| {
            if let Ok(StreamEvent::Done(response)) = event {
                limiter.record_tokens(estimate, response.usage.total_tokens);
            }
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_when_the_bucket_is_empty() {
        let limiter = RateLimiter::per_minute(2);
        let start = Instant::now();
        limiter.acquire().await;
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        limiter.acquire().await;
        // The paused clock advances exactly as far as the limiter slept: one slot refills in 30 s.
        assert_eq!(start.elapsed().as_secs(), 30);
    }

    #[tokio::test(start_paused = true)]
    async fn token_debt_delays_the_next_call() {
        let limiter = RateLimiter::new(None, Some(600));
        limiter.acquire_with_tokens(100).await;
        limiter.record_tokens(100, 600);
        let start = Instant::now();
        limiter.acquire_with_tokens(60).await;
        assert_eq!(start.elapsed().as_secs(), 6);
    }
}
