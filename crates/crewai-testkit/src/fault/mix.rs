//! The random policy: which fault a request gets when the script is used up.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use super::{Fault, FaultKind};

/// The random policy: the probability of each fault kind per request, and the parameters of the
/// drawn faults. The rest of the probability (one minus the sum) is a healthy reply.
///
/// ```
/// use crewai_testkit::fault::{FaultKind, FaultMix};
/// let mix = FaultMix::realistic();
/// assert!(mix.total_rate() < 0.25, "most requests are fine");
/// assert!(FaultKind::FAULTS.iter().all(|kind| mix.rate(*kind) > 0.0), "every kind appears");
/// assert_eq!(mix.clone().scaled(0.5).rate(FaultKind::ServerError), mix.rate(FaultKind::ServerError) / 2.0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FaultMix {
    rates: BTreeMap<FaultKind, f64>,
    slow_min: Duration,
    slow_max: Duration,
    retry_after_seconds: u64,
    server_statuses: Vec<u16>,
}

impl Default for FaultMix {
    fn default() -> Self {
        Self::healthy()
    }
}

impl FaultMix {
    /// No faults at all.
    pub fn healthy() -> Self {
        FaultMix {
            rates: BTreeMap::new(),
            slow_min: Duration::from_millis(100),
            slow_max: Duration::from_millis(800),
            retry_after_seconds: 1,
            server_statuses: vec![500, 502, 503],
        }
    }

    /// A bad day at a provider: 15% of requests go wrong, every kind represented, transient
    /// failures (5xx, 429, slow and hung requests) more often than broken replies.
    pub fn realistic() -> Self {
        Self::healthy()
            .with_rate(FaultKind::NeverAnswer, 0.01)
            .with_rate(FaultKind::Slow, 0.03)
            .with_rate(FaultKind::RateLimited, 0.02)
            .with_rate(FaultKind::ServerError, 0.03)
            .with_rate(FaultKind::ResetMidBody, 0.01)
            .with_rate(FaultKind::MalformedJson, 0.01)
            .with_rate(FaultKind::TruncatedStream, 0.01)
            .with_rate(FaultKind::NoChoices, 0.01)
            .with_rate(FaultKind::UnknownTool, 0.01)
            .with_rate(FaultKind::InvalidArguments, 0.01)
    }

    /// Sets the probability of `kind` (clamped to 0..=1; `None` is ignored: it is the remainder).
    pub fn with_rate(mut self, kind: FaultKind, probability: f64) -> Self {
        if kind != FaultKind::None {
            self.rates.insert(kind, probability.clamp(0.0, 1.0));
        }
        self
    }

    /// Multiplies every rate by `factor` (a less faulty fallback server: `scaled(0.2)`).
    pub fn scaled(mut self, factor: f64) -> Self {
        for rate in self.rates.values_mut() {
            *rate = (*rate * factor).clamp(0.0, 1.0);
        }
        self
    }

    /// How long `Slow` faults wait: uniformly between `min` and `max`.
    pub fn with_slow_range(mut self, min: Duration, max: Duration) -> Self {
        self.slow_min = min.min(max);
        self.slow_max = max.max(min);
        self
    }

    /// The `retry-after` of `RateLimited` faults.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = seconds;
        self
    }

    /// The probability of `kind`.
    pub fn rate(&self, kind: FaultKind) -> f64 {
        match kind {
            FaultKind::None => (1.0 - self.total_rate()).max(0.0),
            kind => self.rates.get(&kind).copied().unwrap_or(0.0),
        }
    }

    /// The probability that a request goes wrong.
    pub fn total_rate(&self) -> f64 {
        self.rates.values().sum()
    }

    /// Draws the fault of one request.
    pub(super) fn draw(&self, rng: &mut StdRng, offers_tools: bool) -> Fault {
        let mut roll: f64 = rng.random();
        let mut drawn = FaultKind::None;
        for (kind, rate) in &self.rates {
            if roll < *rate {
                drawn = *kind;
                break;
            }
            roll -= rate;
        }
        if drawn.needs_tools() && !offers_tools {
            return Fault::None;
        }
        match drawn {
            FaultKind::None => Fault::None,
            FaultKind::NeverAnswer => Fault::NeverAnswer,
            FaultKind::Slow => Fault::Slow(if self.slow_min == self.slow_max {
                self.slow_min
            } else {
                rng.random_range(self.slow_min..=self.slow_max)
            }),
            FaultKind::RateLimited => Fault::RateLimited {
                retry_after_seconds: self.retry_after_seconds,
            },
            FaultKind::ServerError => Fault::ServerError(
                self.server_statuses
                    .get(rng.random_range(0..self.server_statuses.len().max(1)))
                    .copied()
                    .unwrap_or(500),
            ),
            FaultKind::ResetMidBody => Fault::ResetMidBody,
            FaultKind::MalformedJson => Fault::MalformedJson,
            FaultKind::TruncatedStream => Fault::TruncatedStream,
            FaultKind::NoChoices => Fault::NoChoices,
            FaultKind::UnknownTool => Fault::UnknownTool,
            FaultKind::InvalidArguments => Fault::InvalidArguments,
        }
    }
}
