//! The kickoff queue: what `POST /kickoff` writes and workers claim.
//!
//! A kickoff is claimed under a lease that names the worker (host and process) and expires unless
//! heartbeated, so a kickoff whose worker died goes back to the queue once its lease runs out
//! and the next worker resumes it from the run journal. Failures of the infrastructure (the
//! worker could not start the run, the journal failed) are retried with backoff up to
//! [`QueueConfig::max_attempts`], then the kickoff is dead-lettered; a task's own error is final.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::QueueError;

/// Where a kickoff stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KickoffState {
    /// Waiting for a worker (new, retried after an infrastructure failure, or resumed).
    Queued,
    /// A worker holds its lease.
    Running,
    Completed,
    /// A task failed; `POST /runs/{id}/resume` runs the unfinished tasks again.
    Failed,
    Cancelled,
    /// Every attempt failed on infrastructure; kept for inspection and resume.
    DeadLettered,
}

impl KickoffState {
    pub fn as_str(self) -> &'static str {
        match self {
            KickoffState::Queued => "queued",
            KickoffState::Running => "running",
            KickoffState::Completed => "completed",
            KickoffState::Failed => "failed",
            KickoffState::Cancelled => "cancelled",
            KickoffState::DeadLettered => "dead_lettered",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            KickoffState::Queued,
            KickoffState::Running,
            KickoffState::Completed,
            KickoffState::Failed,
            KickoffState::Cancelled,
            KickoffState::DeadLettered,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }

    /// Whether the kickoff has ended (no worker will pick it up unless resumed).
    pub fn is_final(self) -> bool {
        !matches!(self, KickoffState::Queued | KickoffState::Running)
    }
}

/// Who holds a lease: the host and process, so an operator can find a stuck worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerIdentity {
    pub host: String,
    pub pid: u32,
}

impl WorkerIdentity {
    /// This process on this host (`HOSTNAME`, else `/etc/hostname`, else `localhost`).
    pub fn this_process() -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "localhost".to_string());
        WorkerIdentity {
            host,
            pid: std::process::id(),
        }
    }

    /// `host:pid`, as stored with the lease.
    pub fn label(&self) -> String {
        format!("{}:{}", self.host, self.pid)
    }
}

/// A submission's outcome: a new kickoff, or the one an earlier request with the same
/// `Idempotency-Key` (and the same body) created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    Created(String),
    Existing(String),
}

impl Submitted {
    pub fn kickoff_id(&self) -> &str {
        match self {
            Submitted::Created(id) | Submitted::Existing(id) => id,
        }
    }
}

/// A kickoff a worker claimed.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub kickoff_id: String,
    pub inputs: Map<String, Value>,
    /// 1 for the first claim; more after a lost lease, a retry or a resume.
    pub attempt: u32,
    /// Proves the lease in heartbeats and the final write.
    pub lease_token: String,
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Still ours; `cancel_requested` says whether `POST /runs/{id}/cancel` asked it to stop.
    Held { cancel_requested: bool },
    /// Another worker took the kickoff over (ours expired): stop without writing.
    Lost,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptEnd {
    Completed {
        result: Value,
        usage: Value,
    },
    /// The crew failed (a task's error): final.
    Failed {
        error: String,
        usage: Value,
    },
    Cancelled {
        error: String,
    },
    /// The worker or the journal failed: retried after a backoff, dead-lettered after the
    /// last attempt.
    Infrastructure {
        error: String,
    },
}

/// One line of a kickoff's progress, in order (`seq` starts at 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KickoffEvent {
    pub seq: u64,
    pub kind: String,
    pub data: Value,
}

/// What `GET /status/{id}` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KickoffRecord {
    pub kickoff_id: String,
    pub state: KickoffState,
    pub inputs: Map<String, Value>,
    pub attempts: u32,
    /// `host:pid` of the worker holding the lease, while running.
    pub worker: Option<String>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub usage: Option<Value>,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// How leases, retries and dead-lettering behave.
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// A claim lapses this long after its last heartbeat (the visibility timeout).
    pub lease: Duration,
    /// Attempts before a kickoff failing on infrastructure is dead-lettered.
    pub max_attempts: u32,
    /// The first retry's wait; each further retry doubles it (capped at 5 minutes).
    pub retry_backoff: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            lease: Duration::from_secs(30),
            max_attempts: 3,
            retry_backoff: Duration::from_secs(2),
        }
    }
}

impl QueueConfig {
    /// The wait before attempt `attempt + 1` after attempt `attempt` failed on infrastructure.
    pub fn backoff_after(&self, attempt: u32) -> Duration {
        let doubled = self
            .retry_backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        doubled.min(Duration::from_secs(300))
    }
}

/// The durable queue behind the API and the workers (object-safe: `Arc<dyn KickoffQueue>`).
pub trait KickoffQueue: Send + Sync + 'static {
    /// Queues a kickoff; with `idempotency_key`, a repeat of the same body returns the first
    /// kickoff and a different body under the same key is refused.
    fn submit(
        &self,
        inputs: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> BoxFuture<'_, Result<Submitted, QueueError>>;

    /// Claims the oldest due kickoff (queued, or running under an expired lease).
    fn claim<'a>(
        &'a self,
        worker: &'a WorkerIdentity,
    ) -> BoxFuture<'a, Result<Option<Claimed>, QueueError>>;

    /// Extends the lease of a claimed kickoff.
    fn heartbeat<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
    ) -> BoxFuture<'a, Result<Lease, QueueError>>;

    /// Appends a progress event (only while the lease is held).
    fn record_event<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        kind: &'a str,
        data: Value,
    ) -> BoxFuture<'a, Result<(), QueueError>>;

    /// Ends an attempt; `Lease::Lost` when the lease had passed to another worker (nothing is
    /// written then).
    fn finish<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        end: AttemptEnd,
    ) -> BoxFuture<'a, Result<Lease, QueueError>>;

    /// `None` for an unknown id.
    fn status<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffRecord>, QueueError>>;

    /// The events after `after_seq`, in order.
    fn events_after<'a>(
        &'a self,
        kickoff_id: &'a str,
        after_seq: u64,
    ) -> BoxFuture<'a, Result<Vec<KickoffEvent>, QueueError>>;

    /// Cancels a queued kickoff at once, or asks its worker to stop a running one. Returns the
    /// state after the request (`None`: unknown id).
    fn cancel<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>>;

    /// Queues a failed, cancelled or dead-lettered kickoff again; its worker resumes the run
    /// from the journal. `Err(QueueError::NotResumable)` for a queued, running or completed one.
    fn resume<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>>;

    /// Returns when a kickoff may have become claimable (one was submitted or resumed) or after
    /// `at_most`, whichever comes first. Workers wait on it when a claim found nothing, so a new
    /// kickoff is claimed at once instead of at the next poll; the poll still finds what no
    /// signal announces (a lapsed lease, a retry whose backoff ended). Which submissions it
    /// hears depends on the queue: [`crate::SqliteQueue`] those made through the same value
    /// (`crewai serve`'s own workers), [`crate::PgQueue`] those of any process (`LISTEN`).
    fn wait_for_work(&self, at_most: Duration) -> BoxFuture<'_, ()>;
}

/// Wakes this process's waiting worker loop when a kickoff becomes claimable. One stored
/// wake-up covers a submission made between an empty claim and the wait that follows it.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkSignal(Arc<tokio::sync::Notify>);

impl WorkSignal {
    pub(crate) fn notify(&self) {
        self.0.notify_one();
    }

    pub(crate) async fn wait(&self, at_most: Duration) {
        // Either end is fine: woken, or the poll is due.
        let _woken = tokio::time::timeout(at_most, self.0.notified()).await;
    }
}
