//! Request- and token-rate limits that several agents can share.
//!
//! A [`RateLimiter`] is an async token bucket: a caller over the limit sleeps until the bucket
//! refills (no busy wait), and dropping the waiting future cancels the wait. Share one `Arc` among
//! the agents of a crew to give them one `max_rpm` budget.
//!
//! Time comes from a [`Clock`]: [`TokioClock`] by default, or a [`VirtualClock`] whose sleeps
//! return at once and move its time forward, so a test can run a minute of rate limiting in no
//! time and see every wait.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use crewai_llm::{RateLimiter, VirtualClock};
//!
//! let limiter = RateLimiter::per_minute(60);
//! assert_eq!(limiter.acquire().await, Duration::ZERO); // the bucket starts full
//!
//! let clock = VirtualClock::new();
//! let limited = RateLimiter::with_clock(Some(1), None, clock.clone());
//! limited.acquire().await;
//! let waited = limited.acquire_notifying(|wait| println!("waiting {wait:?} for the rate limit")).await;
//! assert_eq!(waited, Duration::from_secs(60));
//! assert_eq!(clock.sleeps(), [Duration::from_secs(60)]);
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::error::LlmError;
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse, StreamEvent};

/// Where a [`RateLimiter`] reads the time and how it waits.
#[async_trait]
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant (monotonic).
    fn now(&self) -> Instant;
    /// Waits `duration`; dropping the future cancels the wait.
    async fn sleep(&self, duration: Duration);
}

/// Real time through tokio (which also honours tokio's paused test clock).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

#[async_trait]
impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// A clock that stands still until slept on: `sleep` returns at once and moves the time forward by
/// the duration asked for. It keeps every sleep, so a test can check that (and how long) a rate
/// limit made a caller wait.
#[derive(Debug)]
pub struct VirtualClock {
    origin: Instant,
    state: Mutex<VirtualTime>,
}

#[derive(Debug, Default)]
struct VirtualTime {
    elapsed: Duration,
    sleeps: Vec<Duration>,
}

impl VirtualClock {
    /// A clock at its own time zero.
    pub fn new() -> Arc<Self> {
        Arc::new(VirtualClock {
            origin: Instant::now(),
            state: Mutex::default(),
        })
    }

    fn time(&self) -> std::sync::MutexGuard<'_, VirtualTime> {
        // Plain numbers: a panic elsewhere cannot leave them half-written.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves the time forward without recording a sleep (time passing between calls).
    pub fn advance(&self, duration: Duration) {
        self.time().elapsed += duration;
    }

    /// Every sleep so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.time().sleeps.clone()
    }

    /// How far the time has moved since the clock was made.
    pub fn elapsed(&self) -> Duration {
        self.time().elapsed
    }
}

#[async_trait]
impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.origin + self.time().elapsed
    }
    async fn sleep(&self, duration: Duration) {
        let mut time = self.time();
        time.elapsed += duration;
        time.sleeps.push(duration);
    }
}

/// Slack in the bucket arithmetic (in requests or tokens).
const REFILL_TOLERANCE: f64 = 1e-6;

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
    fn per_minute(capacity: u32, now: Instant) -> Self {
        let capacity = f64::from(capacity.max(1));
        Bucket {
            capacity,
            per_second: capacity / 60.0,
            state: Mutex::new(BucketState {
                available: capacity,
                refreshed: now,
            }),
        }
    }

    fn with_state<T>(&self, now: Instant, f: impl FnOnce(&mut BucketState) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let elapsed = now.saturating_duration_since(state.refreshed).as_secs_f64();
        state.available = (state.available + elapsed * self.per_second).min(self.capacity);
        state.refreshed = now;
        f(&mut state)
    }

    /// Takes `amount` (capped at the capacity, so one large call cannot wait forever); calls
    /// `on_wait` with the expected wait before the first sleep, if any. Returns the time slept.
    async fn take(
        &self,
        amount: f64,
        clock: &dyn Clock,
        on_wait: &mut Option<impl FnOnce(Duration)>,
    ) -> Duration {
        let amount = amount.min(self.capacity);
        let mut slept = Duration::ZERO;
        loop {
            let wait = self.with_state(clock.now(), |state| {
                // A sleep of exactly the computed wait may refill a hair less than `amount` (the
                // duration is rounded to nanoseconds): that counts as refilled.
                if state.available + REFILL_TOLERANCE >= amount {
                    state.available -= amount;
                    None
                } else {
                    Some(Duration::from_secs_f64(
                        (amount - state.available) / self.per_second,
                    ))
                }
            });
            match wait {
                None => return slept,
                Some(wait) => {
                    if let Some(notify) = on_wait.take() {
                        notify(wait);
                    }
                    clock.sleep(wait).await;
                    slept += wait;
                }
            }
        }
    }

    fn adjust(&self, now: Instant, delta: f64) {
        self.with_state(now, |state| {
            state.available = (state.available - delta).min(self.capacity)
        });
    }
}

/// A shared requests-per-minute limit, optionally with a tokens-per-minute limit.
pub struct RateLimiter {
    max_rpm: Option<u32>,
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("max_rpm", &self.max_rpm)
            .field("max_tpm", &self.tokens.as_ref().map(|b| b.capacity))
            .field("clock", &self.clock)
            .finish()
    }
}

impl RateLimiter {
    /// At most `max_rpm` requests per minute (a burst of `max_rpm`, then an even pace).
    pub fn per_minute(max_rpm: u32) -> Arc<Self> {
        Self::new(Some(max_rpm), None)
    }

    /// Request and/or token limits; `None` leaves that dimension unlimited.
    pub fn new(max_rpm: Option<u32>, max_tpm: Option<u32>) -> Arc<Self> {
        Self::with_clock(max_rpm, max_tpm, Arc::new(TokioClock))
    }

    /// [`RateLimiter::new`] reading the time from `clock` (a [`VirtualClock`] in tests).
    pub fn with_clock(
        max_rpm: Option<u32>,
        max_tpm: Option<u32>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        let now = clock.now();
        Arc::new(RateLimiter {
            max_rpm,
            requests: max_rpm.map(|rpm| Bucket::per_minute(rpm, now)),
            tokens: max_tpm.map(|tpm| Bucket::per_minute(tpm, now)),
            clock,
        })
    }

    /// The requests-per-minute limit, if any.
    pub fn max_rpm(&self) -> Option<u32> {
        self.max_rpm
    }

    /// The clock the limiter waits on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Waits for one request slot; returns how long it slept for one (zero when a slot was free).
    pub async fn acquire(&self) -> Duration {
        self.acquire_notifying(|_| {}).await
    }

    /// [`RateLimiter::acquire`], calling `on_wait` with the expected wait just before it starts
    /// waiting (not at all when a slot is free), so the caller can say that it is held back.
    pub async fn acquire_notifying(&self, on_wait: impl FnOnce(Duration)) -> Duration {
        match &self.requests {
            Some(bucket) => {
                bucket
                    .take(1.0, self.clock.as_ref(), &mut Some(on_wait))
                    .await
            }
            None => Duration::ZERO,
        }
    }

    /// Waits for one request slot and `estimated_tokens` of the token budget; returns how long it
    /// slept in all.
    pub async fn acquire_with_tokens(&self, estimated_tokens: u64) -> Duration {
        let for_request = self.acquire().await;
        let for_tokens = match &self.tokens {
            Some(bucket) => {
                bucket
                    .take(
                        estimated_tokens as f64,
                        self.clock.as_ref(),
                        &mut None::<fn(Duration)>,
                    )
                    .await
            }
            None => Duration::ZERO,
        };
        for_request + for_tokens
    }

    /// Corrects the token budget once the real usage is known.
    pub fn record_tokens(&self, estimated_tokens: u64, actual_tokens: u64) {
        if let Some(bucket) = &self.tokens {
            bucket.adjust(
                self.clock.now(),
                actual_tokens as f64 - estimated_tokens as f64,
            );
        }
    }

    /// True when a token limit is set.
    pub fn limits_tokens(&self) -> bool {
        self.tokens.is_some()
    }
}

/// A rough token count of a request (four characters a token), used before the call.
pub fn estimate_tokens(request: &LlmRequest) -> u64 {
    let chars: usize = request
        .messages
        .iter()
        .map(|m| m.text().len())
        .sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
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
        let estimate = if self.limiter.limits_tokens() {
            estimate_tokens(request)
        } else {
            0
        };
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
        self.limiter
            .record_tokens(estimate, response.usage.total_tokens);
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
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn waits_when_the_bucket_is_empty() {
        let limiter = RateLimiter::per_minute(2);
        let start = Instant::now();
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The paused clock advances exactly as far as the limiter slept: one slot refills in 30 s.
        assert_eq!(limiter.acquire().await.as_secs(), 30);
        assert_eq!(start.elapsed().as_secs(), 30);
    }

    #[tokio::test(start_paused = true)]
    async fn token_debt_delays_the_next_call() {
        let limiter = RateLimiter::new(None, Some(600));
        limiter.acquire_with_tokens(100).await;
        limiter.record_tokens(100, 600);
        let start = Instant::now();
        assert_eq!(limiter.acquire_with_tokens(60).await.as_secs(), 6);
        assert_eq!(start.elapsed().as_secs(), 6);
    }

    #[tokio::test]
    async fn a_virtual_clock_makes_the_wait_instant_and_records_it() {
        let clock = VirtualClock::new();
        let limiter = RateLimiter::with_clock(Some(1), None, clock.clone());
        assert_eq!(limiter.max_rpm(), Some(1));
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        assert!(clock.sleeps().is_empty());

        let waited = limiter.acquire().await;

        assert_eq!(waited, Duration::from_secs(60));
        assert_eq!(clock.sleeps(), [Duration::from_secs(60)]);
        assert_eq!(clock.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn time_passing_on_its_own_refills_the_bucket() {
        let clock = VirtualClock::new();
        let limiter = RateLimiter::with_clock(Some(2), None, clock.clone());
        limiter.acquire().await;
        limiter.acquire().await;
        clock.advance(Duration::from_secs(30));
        assert_eq!(
            limiter.acquire().await,
            Duration::ZERO,
            "one slot refilled in 30 s"
        );
        assert!(clock.sleeps().is_empty());
    }

    #[tokio::test]
    async fn the_wait_is_announced_before_it_starts_and_only_when_there_is_one() {
        let clock = VirtualClock::new();
        let limiter = RateLimiter::with_clock(Some(1), None, clock.clone());
        let announced = Mutex::new(Vec::new());
        let note = |wait: Duration| announced.lock().unwrap().push((wait, clock.sleeps().len()));

        limiter.acquire_notifying(note).await;
        assert!(
            announced.lock().unwrap().is_empty(),
            "a free slot is not announced"
        );
        let waited = limiter.acquire_notifying(note).await;

        assert_eq!(waited, Duration::from_secs(60));
        // Announced once, with the expected wait, before the clock slept.
        assert_eq!(*announced.lock().unwrap(), [(Duration::from_secs(60), 0)]);
    }

    #[tokio::test]
    async fn dropping_a_waiting_acquire_cancels_it() {
        let limiter = RateLimiter::per_minute(1);
        limiter.acquire().await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), limiter.acquire()).await;
        assert!(waiting.is_err(), "the second slot is a minute away");
    }
}
