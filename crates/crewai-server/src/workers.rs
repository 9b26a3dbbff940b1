//! Workers: claim a kickoff, run it under a heartbeated lease, record how it ended.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::queue::{AttemptEnd, Claimed, KickoffQueue, Lease, WorkerIdentity};
use crate::runner::{KickoffJob, KickoffRunner, ProgressSink};

/// How a worker process drains the queue.
#[derive(Debug, Clone, Copy)]
pub struct WorkerConfig {
    /// Kickoffs run at once.
    pub concurrency: usize,
    /// The longest wait between claims when the queue is empty (a submission the queue hears of
    /// ends the wait at once, see [`KickoffQueue::wait_for_work`]), and the wait after a database
    /// error.
    pub poll_interval: Duration,
    /// How often a running kickoff's lease is extended and its cancel flag read; well under
    /// the queue's lease.
    pub heartbeat_interval: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: 4,
            poll_interval: Duration::from_millis(100),
            heartbeat_interval: Duration::from_secs(1),
        }
    }
}

/// Claims and runs kickoffs until `shutdown` is cancelled; running ones are then cancelled
/// (journaled as such, resumable) and awaited.
pub async fn run_workers(
    queue: Arc<dyn KickoffQueue>,
    runner: Arc<dyn KickoffRunner>,
    config: WorkerConfig,
    shutdown: CancellationToken,
) {
    let identity = WorkerIdentity::this_process();
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut running = tokio::task::JoinSet::new();
    // Claims that failed in a row (the database down or refusing): each waits longer.
    let mut failed_claims = 0u32;
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
        let claimed = tokio::select! {
            claimed = queue.claim(&identity) => claimed,
            () = shutdown.cancelled() => break,
        };
        if claimed.is_ok() {
            failed_claims = 0;
        }
        match claimed {
            Ok(Some(claimed)) => {
                let queue = Arc::clone(&queue);
                let runner = Arc::clone(&runner);
                let stop = shutdown.child_token();
                running.spawn(async move {
                    attempt(queue, runner, claimed, config, stop).await;
                    drop(permit);
                });
            }
            Ok(None) => {
                drop(permit);
                tokio::select! {
                    () = queue.wait_for_work(config.poll_interval) => {}
                    () = shutdown.cancelled() => {}
                }
            }
            Err(error) => {
                drop(permit);
                failed_claims = failed_claims.saturating_add(1);
                let wait = claim_retry_wait(config.poll_interval, failed_claims);
                tracing::warn!(
                    "cannot claim a kickoff: {}; retrying in {:.1}s",
                    error_chain(&error),
                    wait.as_secs_f64()
                );
                idle(wait, &shutdown).await;
            }
        }
        // Reap finished attempts so the set does not grow.
        while running.try_join_next().is_some() {}
    }
    while running.join_next().await.is_some() {}
}

/// The longest wait between claim retries while the database keeps failing.
const MAX_CLAIM_RETRY_WAIT: Duration = Duration::from_secs(30);

/// The wait after the `failures`-th claim in a row failed: half a second (or the poll interval,
/// if longer), doubling with each failure up to [`MAX_CLAIM_RETRY_WAIT`], so a fleet does not
/// hammer a database that is down.
fn claim_retry_wait(poll_interval: Duration, failures: u32) -> Duration {
    let first = poll_interval.max(Duration::from_millis(500));
    first
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
        .min(MAX_CLAIM_RETRY_WAIT.max(first))
}

async fn idle(wait: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = shutdown.cancelled() => {}
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One attempt: the run, its progress forwarded into the queue, its lease heartbeated.
async fn attempt(
    queue: Arc<dyn KickoffQueue>,
    runner: Arc<dyn KickoffRunner>,
    claimed: Claimed,
    config: WorkerConfig,
    cancellation: CancellationToken,
) {
    let Claimed {
        kickoff_id,
        inputs,
        attempt,
        lease_token,
    } = claimed;
    let (progress, mut reports) = ProgressSink::channel();
    let job = KickoffJob {
        kickoff_id: kickoff_id.clone(),
        inputs,
        attempt,
        progress,
        cancellation: cancellation.clone(),
    };
    let mut run = runner.run(job);
    let mut heartbeat = tokio::time::interval(config.heartbeat_interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut lost = false;
    let mut requested = false;
    let end = loop {
        tokio::select! {
            end = &mut run => break end,
            Some((kind, data)) = reports.recv() => {
                forward(&*queue, &kickoff_id, &lease_token, &kind, data).await;
            }
            _ = heartbeat.tick() => match queue.heartbeat(&kickoff_id, &lease_token).await {
                Ok(Lease::Held { cancel_requested: true }) => {
                    requested = true;
                    cancellation.cancel();
                }
                Ok(Lease::Held { cancel_requested: false }) => {}
                Ok(Lease::Lost) => {
                    // Another worker has it now: stop, and leave the journal to that attempt.
                    lost = true;
                    cancellation.cancel();
                }
                // The lease is still ours until it lapses; the next tick tries again.
                Err(error) => tracing::warn!(
                    "kickoff {kickoff_id}: heartbeat failed: {}", error_chain(&error)
                ),
            },
        }
    };
    reports.close();
    while let Some((kind, data)) = reports.recv().await {
        forward(&*queue, &kickoff_id, &lease_token, &kind, data).await;
    }
    if lost {
        return;
    }
    let end = match end {
        // Cancelled by the worker's own shutdown, not by a request: another worker resumes it.
        AttemptEnd::Cancelled { .. } if !requested => AttemptEnd::Infrastructure {
            error: "the worker shut down during the run".to_string(),
        },
        other => other,
    };
    if let Err(error) = queue.finish(&kickoff_id, &lease_token, end).await {
        // The lease lapses and another worker resumes the run from its journal.
        tracing::warn!(
            "kickoff {kickoff_id}: cannot record how it ended: {}",
            error_chain(&error)
        );
    }
}

async fn forward(
    queue: &dyn KickoffQueue,
    kickoff_id: &str,
    lease_token: &str,
    kind: &str,
    data: Value,
) {
    if let Err(error) = queue
        .record_event(kickoff_id, lease_token, kind, data)
        .await
    {
        tracing::warn!(
            "kickoff {kickoff_id}: cannot record its progress: {}",
            error_chain(&error)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_retries_back_off_exponentially_up_to_a_ceiling() {
        let poll = Duration::from_millis(100);
        let waits: Vec<u64> = (1..=9)
            .map(|n| claim_retry_wait(poll, n).as_millis() as u64)
            .collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(claim_retry_wait(poll, u32::MAX), MAX_CLAIM_RETRY_WAIT);
        // A long poll interval is never shortened.
        assert_eq!(
            claim_retry_wait(Duration::from_secs(60), 1),
            Duration::from_secs(60)
        );
        assert_eq!(
            claim_retry_wait(Duration::from_secs(60), 5),
            Duration::from_secs(60)
        );
    }
}
