//! Request- and token-rate limits that several agents can share.
//!
//! A [`RateLimiter`] is [`governor`]'s GCRA with async waits: a caller over the limit sleeps
//! until its turn (no busy wait), and dropping the waiting future cancels the wait. Share one
//! `Arc` among the agents of a crew to give them one `max_rpm` budget. [`RateLimitLayer`] puts
//! one in front of a model's stack.
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
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};

use crate::error::LlmError;
use crate::layer::{LlmLayer, Next};
use crate::tokens::estimate_tokens;
use crate::traits::LlmStream;
use crate::types::{LlmRequest, LlmResponse, StreamEvent};

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

/// governor reads the time from the limiter's [`Clock`], so a [`VirtualClock`] (or tokio's
/// paused clock, through [`TokioClock`]) drives the rate arithmetic as well as the waits.
#[derive(Debug, Clone)]
struct ClockSource(Arc<dyn Clock>);

impl governor::clock::Clock for ClockSource {
    type Instant = Instant;
    fn now(&self) -> Instant {
        self.0.now()
    }
}

type Gcra = governor::RateLimiter<NotKeyed, InMemoryState, ClockSource, NoOpMiddleware<Instant>>;

/// One per-minute quota: a burst of `capacity`, refilled evenly over a minute (governor's GCRA,
/// which admits exactly what a token bucket of that size and rate would).
struct Quota {
    capacity: NonZeroU32,
    gcra: Gcra,
}

impl Quota {
    fn per_minute(capacity: u32, clock: &Arc<dyn Clock>) -> Self {
        let capacity = NonZeroU32::new(capacity).unwrap_or(NonZeroU32::MIN);
        Quota {
            capacity,
            gcra: governor::RateLimiter::direct_with_clock(
                governor::Quota::per_minute(capacity),
                ClockSource(clock.clone()),
            ),
        }
    }

    /// Takes `amount` (capped at the capacity, so one large call cannot wait forever); calls
    /// `on_wait` with the expected wait before the first sleep, if any. Returns the time slept.
    async fn take(
        &self,
        amount: u64,
        clock: &dyn Clock,
        on_wait: &mut Option<impl FnOnce(Duration)>,
    ) -> Duration {
        let capped = u32::try_from(amount)
            .unwrap_or(u32::MAX)
            .min(self.capacity.get());
        let Some(cells) = NonZeroU32::new(capped) else {
            return Duration::ZERO;
        };
        let mut slept = Duration::ZERO;
        loop {
            let wait = match self.gcra.check_n(cells) {
                Ok(Ok(())) => return slept,
                Ok(Err(not_until)) => not_until.wait_time_from(clock.now()),
                // Cannot happen: `cells` is capped at the burst size.
                Err(governor::InsufficientCapacity(_)) => return slept,
            };
            if let Some(notify) = on_wait.take() {
                notify(wait);
            }
            clock.sleep(wait).await;
            slept += wait;
        }
    }
}

/// The token quota and what calls used beyond (or short of) their estimate: a call is admitted
/// on an estimate of its tokens, and the difference to what it really used is settled by the
/// next call's admission (a call that used more delays the next one, as a debt).
struct TokenQuota {
    quota: Quota,
    /// Tokens owed (positive) or credited (negative) by earlier calls.
    owed: Mutex<i64>,
}

impl TokenQuota {
    fn settle(&self, estimated: u64) -> u64 {
        let mut owed = self
            .owed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = i64::try_from(estimated)
            .unwrap_or(i64::MAX)
            .saturating_add(*owed);
        let taken = due.clamp(0, i64::from(self.quota.capacity.get()));
        // What one admission cannot take (a debt over the capacity, a credit over the
        // estimate) carries to the next.
        *owed = due - taken;
        u64::try_from(taken).unwrap_or(0)
    }
}

/// A shared requests-per-minute limit, optionally with a tokens-per-minute limit, on
/// [`governor`].
pub struct RateLimiter {
    max_rpm: Option<u32>,
    max_tpm: Option<u32>,
    requests: Option<Quota>,
    tokens: Option<TokenQuota>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("max_rpm", &self.max_rpm)
            .field("max_tpm", &self.max_tpm)
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
        Arc::new(RateLimiter {
            max_rpm,
            max_tpm,
            requests: max_rpm.map(|rpm| Quota::per_minute(rpm, &clock)),
            tokens: max_tpm.map(|tpm| TokenQuota {
                quota: Quota::per_minute(tpm, &clock),
                owed: Mutex::new(0),
            }),
            clock,
        })
    }

    /// The requests-per-minute limit, if any.
    pub fn max_rpm(&self) -> Option<u32> {
        self.max_rpm
    }

    /// The tokens-per-minute limit, if any.
    pub fn max_tpm(&self) -> Option<u32> {
        self.max_tpm
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
            Some(quota) => quota.take(1, self.clock.as_ref(), &mut Some(on_wait)).await,
            None => Duration::ZERO,
        }
    }

    /// Waits for one request slot and `estimated_tokens` of the token budget (plus what earlier
    /// calls used beyond their estimates); returns how long it slept in all.
    pub async fn acquire_with_tokens(&self, estimated_tokens: u64) -> Duration {
        let for_request = self.acquire().await;
        let for_tokens = match &self.tokens {
            Some(tokens) => {
                let due = tokens.settle(estimated_tokens);
                tokens
                    .quota
                    .take(due, self.clock.as_ref(), &mut None::<fn(Duration)>)
                    .await
            }
            None => Duration::ZERO,
        };
        for_request + for_tokens
    }

    /// Corrects the token budget once the real usage is known; the next admission settles it.
    pub fn record_tokens(&self, estimated_tokens: u64, actual_tokens: u64) {
        if let Some(tokens) = &self.tokens {
            let difference = i64::try_from(actual_tokens)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(estimated_tokens).unwrap_or(i64::MAX));
            let mut owed = tokens
                .owed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *owed = owed.saturating_add(difference);
        }
    }

    /// True when a token limit is set.
    pub fn limits_tokens(&self) -> bool {
        self.tokens.is_some()
    }
}

/// The rate-limit layer: every call first waits on a (possibly shared) [`RateLimiter`], and
/// its real token usage is reported back to it.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: Arc<RateLimiter>,
}

impl RateLimitLayer {
    pub fn new(limiter: Arc<RateLimiter>) -> Self {
        RateLimitLayer { limiter }
    }

    pub fn limiter(&self) -> &Arc<RateLimiter> {
        &self.limiter
    }

    /// Waits for the call's slot; returns the tokens it was admitted on.
    async fn admit(&self, model: &str, request: &LlmRequest) -> u64 {
        let estimate = if self.limiter.limits_tokens() {
            estimate_tokens(model, request)
        } else {
            0
        };
        self.limiter.acquire_with_tokens(estimate).await;
        estimate
    }
}

#[async_trait]
impl LlmLayer for RateLimitLayer {
    fn name(&self) -> &str {
        "rate_limit"
    }

    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let estimate = self.admit(next.model().model(), &request).await;
        let response = next.call(request).await?;
        self.limiter
            .record_tokens(estimate, response.usage.total_tokens);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        use futures::StreamExt;
        let estimate = self.admit(next.model().model(), &request).await;
        let stream = next.stream(request).await?;
        if !self.limiter.limits_tokens() {
            return Ok(stream);
        }
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

    #[tokio::test(start_paused = true)]
    async fn tokens_a_call_did_not_use_are_given_back() {
        let limiter = RateLimiter::new(None, Some(600));
        limiter.acquire_with_tokens(600).await;
        limiter.record_tokens(600, 100);
        let start = Instant::now();
        // 500 of the 550 come from the credit: only 50 are waited for, at 10 a second.
        assert_eq!(limiter.acquire_with_tokens(550).await.as_secs(), 5);
        assert_eq!(start.elapsed().as_secs(), 5);
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
