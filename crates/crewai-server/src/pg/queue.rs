//! [`KickoffQueue`] on PostgreSQL (feature `postgres`): one database shared by any number of
//! `crewai serve` and `crewai worker` processes on any number of machines.
//!
//! A claim is `SELECT … FOR UPDATE SKIP LOCKED`: concurrent workers each lock a different due
//! kickoff instead of queueing behind one another. Leases are judged on the database's clock
//! (`clock_timestamp()`), so hosts whose clocks disagree still agree on when a lease lapsed.
//! A kickoff's event numbers come from a counter on its row, which its `UPDATE` locks, so events
//! appended at once by a worker and by `POST /runs/{id}/cancel` never collide.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use sqlx::postgres::{PgListener, PgPool};
use sqlx::{Postgres, Transaction};

use super::{CallTimedOut, MigrateFailure, Schema, classify};

use crate::error::QueueError;
use crate::queue::{
    AttemptEnd, Claimed, KickoffEvent, KickoffQueue, KickoffRecord, KickoffState, Lease,
    QueueConfig, Submitted, WorkSignal, WorkerIdentity,
};
use crate::settle::{
    CANCELLED_BEFORE_CLAIM, Settlement, lapsed_on_every_attempt, millis, parse_inputs, parse_json,
    parse_state, request_hash, settle,
};

/// The queue's tables, versioned apart from the run journal's.
const SCHEMA: Schema = Schema {
    version_table: "crewai_queue_schema",
    lock: 0x6372_6577_6169_0001,
    migrations: MIGRATIONS,
};

/// The schema's versions, applied in order at open; the database records the last one applied.
const MIGRATIONS: &[&str] = &["
-- Milliseconds since the epoch on the database's clock.
CREATE FUNCTION crewai_now_ms() RETURNS BIGINT LANGUAGE SQL VOLATILE
    AS 'SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint';
CREATE TABLE crewai_kickoffs (
    id TEXT PRIMARY KEY,
    idempotency_key TEXT UNIQUE,
    request_hash TEXT NOT NULL,
    inputs TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before_ms BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_token TEXT,
    lease_until_ms BIGINT,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    result TEXT,
    error TEXT,
    usage TEXT,
    last_seq BIGINT NOT NULL DEFAULT 0,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE INDEX crewai_kickoffs_due ON crewai_kickoffs (state, not_before_ms, created_at_ms);
CREATE TABLE crewai_kickoff_events (
    kickoff_id TEXT NOT NULL REFERENCES crewai_kickoffs (id),
    seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (kickoff_id, seq)
);
"];

/// The kickoff queue in a PostgreSQL database (cheap to clone; clones share the pool).
#[derive(Clone)]
pub struct PgQueue {
    pool: PgPool,
    location: String,
    config: QueueConfig,
    call_timeout: Duration,
    /// Woken by the `LISTEN` task on every kickoff any process submits or resumes.
    new_work: WorkSignal,
    /// That task, started by the first wait for work and stopped with the last clone.
    listener: Arc<OnceLock<ListenerTask>>,
}

/// The channel a submission or resume is announced on (`NOTIFY`, delivered at commit).
const NEW_WORK_CHANNEL: &str = "crewai_kickoffs";

/// The `LISTEN` task of a queue; aborted when dropped.
struct ListenerTask(tokio::task::JoinHandle<()>);

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Hears every announcement of new work and wakes `signal`; reconnects after a lost connection
/// (a submission announced meanwhile is found by the workers' poll).
async fn listen_for_work(pool: PgPool, signal: WorkSignal) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen(NEW_WORK_CHANNEL).await {
                // What was announced before this connection listened is claimable now.
                Ok(()) => {
                    signal.notify();
                    loop {
                        match listener.recv().await {
                            Ok(_) => signal.notify(),
                            Err(error) => {
                                tracing::warn!(%error, "lost the queue's LISTEN connection; reconnecting");
                                break;
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot LISTEN for new kickoffs; retrying"),
            },
            Err(error) => {
                tracing::warn!(%error, "cannot connect to LISTEN for new kickoffs; retrying")
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

impl std::fmt::Debug for PgQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgQueue")
            .field("location", &self.location)
            .finish()
    }
}

impl PgQueue {
    /// The queue in the database `pool` reaches, applying the schema's migrations (a schema
    /// newer than this build is refused). `location` names the database in messages (no
    /// password: see [`crate::redact_url`]).
    pub async fn open(
        pool: PgPool,
        location: impl Into<String>,
        config: QueueConfig,
        call_timeout: Duration,
    ) -> Result<PgQueue, QueueError> {
        let queue = PgQueue {
            pool,
            location: location.into(),
            config,
            call_timeout,
            new_work: WorkSignal::default(),
            listener: Arc::default(),
        };
        queue
            .guarded(async {
                super::migrate(&queue.pool, &SCHEMA)
                    .await
                    .map_err(|failure| match failure {
                        MigrateFailure::Sql(source) => queue.sql(source),
                        MigrateFailure::TooNew { found, known } => {
                            QueueError::SchemaTooNew { found, known }
                        }
                    })
            })
            .await?;
        Ok(queue)
    }

    fn sql(&self, source: sqlx::Error) -> QueueError {
        classify(&self.location, source)
    }

    /// `work`, failing as unavailable when it outlasts the call timeout.
    async fn guarded<T>(
        &self,
        work: impl Future<Output = Result<T, QueueError>>,
    ) -> Result<T, QueueError> {
        match tokio::time::timeout(self.call_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(QueueError::Unavailable {
                location: self.location.clone(),
                source: Box::new(CallTimedOut(self.call_timeout)),
            }),
        }
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>, QueueError> {
        self.pool.begin().await.map_err(|e| self.sql(e))
    }

    /// Appends an event to a kickoff whose row the caller may or may not have locked (the
    /// counter's update locks it).
    async fn append_event(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        kickoff_id: &str,
        kind: &str,
        data: &Value,
    ) -> Result<(), QueueError> {
        let (seq,): (i64,) = sqlx::query_as(
            "UPDATE crewai_kickoffs SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq",
        )
        .bind(kickoff_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        self.insert_event(tx, kickoff_id, seq, kind, data).await
    }

    async fn insert_event(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        kickoff_id: &str,
        seq: i64,
        kind: &str,
        data: &Value,
    ) -> Result<(), QueueError> {
        sqlx::query(
            "INSERT INTO crewai_kickoff_events (kickoff_id, seq, at_ms, kind, data)
             VALUES ($1, $2, crewai_now_ms(), $3, $4)",
        )
        .bind(kickoff_id)
        .bind(seq)
        .bind(kind)
        .bind(data.to_string())
        .execute(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The kickoff's state, its row locked until the transaction ends.
    async fn lock_state(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        id: &str,
    ) -> Result<Option<KickoffState>, QueueError> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT state FROM crewai_kickoffs WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(&mut **tx)
                .await
                .map_err(|e| self.sql(e))?;
        row.map(|(state,)| parse_state(id, &state)).transpose()
    }

    async fn submit_now(
        &self,
        inputs: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> Result<Submitted, QueueError> {
        let inputs = Value::Object(inputs);
        let hash = request_hash(&inputs);
        let id = uuid::Uuid::new_v4().to_string();
        let mut tx = self.begin().await?;
        // A concurrent submission under the same key waits here for the first one's commit,
        // then inserts nothing.
        let inserted = sqlx::query(
            "INSERT INTO crewai_kickoffs (id, idempotency_key, request_hash, inputs, state, created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, 'queued', crewai_now_ms(), crewai_now_ms())
             ON CONFLICT (idempotency_key) DO NOTHING"
        )
        .bind(&id)
        .bind(&idempotency_key)
        .bind(&hash)
        .bind(inputs.to_string())
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?
        .rows_affected();
        if inserted == 0
            && let Some(key) = idempotency_key
        {
            let (kickoff_id, earlier_hash): (String, String) = sqlx::query_as(
                "SELECT id, request_hash FROM crewai_kickoffs WHERE idempotency_key = $1",
            )
            .bind(&key)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
            return if earlier_hash == hash {
                Ok(Submitted::Existing(kickoff_id))
            } else {
                Err(QueueError::IdempotencyConflict { key, kickoff_id })
            };
        }
        self.append_event(&mut tx, &id, "kickoff_queued", &json!({}))
            .await?;
        self.announce_new_work(&mut tx).await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(Submitted::Created(id))
    }

    async fn claim_now(&self, label: String) -> Result<Option<Claimed>, QueueError> {
        let mut tx = self.begin().await?;
        loop {
            type Due = (String, String, i32, String, Option<String>);
            let due: Option<Due> = sqlx::query_as(
                "SELECT id, inputs, attempts, state, lease_owner FROM crewai_kickoffs
                 WHERE (state = 'queued' AND not_before_ms <= crewai_now_ms())
                    OR (state = 'running' AND lease_until_ms < crewai_now_ms())
                 ORDER BY created_at_ms LIMIT 1
                 FOR UPDATE SKIP LOCKED",
            )
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
            let Some((id, inputs, attempts, state, previous_owner)) = due else {
                tx.commit().await.map_err(|e| self.sql(e))?;
                return Ok(None);
            };
            let attempts = u32::try_from(attempts).map_err(|_| QueueError::Corrupt {
                kickoff_id: id.clone(),
                field: "attempts",
            })?;
            if state == "running" {
                // Its worker stopped heartbeating: that attempt failed on infrastructure.
                let lapsed = json!({"worker": previous_owner, "attempt": attempts});
                self.append_event(&mut tx, &id, "kickoff_lease_expired", &lapsed)
                    .await?;
                if attempts >= self.config.max_attempts {
                    let error = lapsed_on_every_attempt(attempts, previous_owner.as_deref());
                    sqlx::query(
                        "UPDATE crewai_kickoffs SET state = 'dead_lettered', error = $2, lease_owner = NULL,
                         lease_token = NULL, lease_until_ms = NULL, updated_at_ms = crewai_now_ms() WHERE id = $1"
                    )
                    .bind(&id)
                    .bind(&error)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.sql(e))?;
                    self.append_event(
                        &mut tx,
                        &id,
                        "kickoff_dead_lettered",
                        &json!({"error": error}),
                    )
                    .await?;
                    continue;
                }
            }
            let token = uuid::Uuid::new_v4().to_string();
            let attempt = attempts + 1;
            sqlx::query(
                "UPDATE crewai_kickoffs SET state = 'running', attempts = $2, lease_owner = $3, lease_token = $4,
                 lease_until_ms = crewai_now_ms() + $5, updated_at_ms = crewai_now_ms() WHERE id = $1"
            )
            .bind(&id)
            .bind(i32::try_from(attempt).unwrap_or(i32::MAX))
            .bind(&label)
            .bind(&token)
            .bind(millis(self.config.lease))
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
            self.append_event(
                &mut tx,
                &id,
                "kickoff_claimed",
                &json!({"worker": label, "attempt": attempt}),
            )
            .await?;
            tx.commit().await.map_err(|e| self.sql(e))?;
            return Ok(Some(Claimed {
                inputs: parse_inputs(&id, &inputs)?,
                kickoff_id: id,
                attempt,
                lease_token: token,
            }));
        }
    }

    async fn heartbeat_now(&self, id: &str, token: &str) -> Result<Lease, QueueError> {
        let row: Option<(bool,)> = sqlx::query_as(
            "UPDATE crewai_kickoffs SET lease_until_ms = crewai_now_ms() + $3
             WHERE id = $1 AND state = 'running' AND lease_token = $2
             RETURNING cancel_requested",
        )
        .bind(id)
        .bind(token)
        .bind(millis(self.config.lease))
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(match row {
            Some((cancel_requested,)) => Lease::Held { cancel_requested },
            None => Lease::Lost,
        })
    }

    async fn record_event_now(
        &self,
        id: &str,
        token: &str,
        kind: &str,
        data: Value,
    ) -> Result<(), QueueError> {
        let mut tx = self.begin().await?;
        // A worker that lost its lease must not write into the new attempt's progress: the
        // counter only moves for the lease's holder.
        let seq: Option<(i64,)> = sqlx::query_as(
            "UPDATE crewai_kickoffs SET last_seq = last_seq + 1
             WHERE id = $1 AND state = 'running' AND lease_token = $2 RETURNING last_seq",
        )
        .bind(id)
        .bind(token)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        if let Some((seq,)) = seq {
            self.insert_event(&mut tx, id, seq, kind, &data).await?;
        }
        tx.commit().await.map_err(|e| self.sql(e))
    }

    async fn finish_now(
        &self,
        id: &str,
        token: &str,
        end: AttemptEnd,
    ) -> Result<Lease, QueueError> {
        let mut tx = self.begin().await?;
        let held: Option<(i32,)> = sqlx::query_as(
            "SELECT attempts FROM crewai_kickoffs
             WHERE id = $1 AND state = 'running' AND lease_token = $2 FOR UPDATE",
        )
        .bind(id)
        .bind(token)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let Some((attempts,)) = held else {
            return Ok(Lease::Lost);
        };
        let attempts = u32::try_from(attempts).unwrap_or(0);
        let Settlement {
            state,
            result,
            error,
            usage,
            retry_in,
            event_kind,
            event,
        } = settle(end, attempts, &self.config);
        sqlx::query(
            "UPDATE crewai_kickoffs SET state = $2, result = $3, error = $4, usage = COALESCE($5, usage),
             not_before_ms = CASE WHEN $6 = 0 THEN 0 ELSE crewai_now_ms() + $6 END, lease_owner = NULL, lease_token = NULL, lease_until_ms = NULL,
             cancel_requested = FALSE, updated_at_ms = crewai_now_ms() WHERE id = $1"
        )
        .bind(id)
        .bind(state.as_str())
        .bind(result)
        .bind(error)
        .bind(usage)
        .bind(millis(retry_in))
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        self.append_event(&mut tx, id, &event_kind, &event).await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(Lease::Held {
            cancel_requested: false,
        })
    }

    async fn status_now(&self, id: &str) -> Result<Option<KickoffRecord>, QueueError> {
        type Row = (
            String,
            String,
            i32,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            i64,
            i64,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT state, inputs, attempts, lease_owner, result, error, usage, created_at_ms, updated_at_ms
             FROM crewai_kickoffs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        let Some((state, inputs, attempts, worker, result, error, usage, created, updated)) = row
        else {
            return Ok(None);
        };
        let state = parse_state(id, &state)?;
        Ok(Some(KickoffRecord {
            inputs: parse_inputs(id, &inputs)?,
            state,
            attempts: u32::try_from(attempts).unwrap_or(0),
            worker: worker.filter(|_| state == KickoffState::Running),
            result: parse_json(id, "result", result)?,
            error,
            usage: parse_json(id, "usage", usage)?,
            created_at_ms: created,
            updated_at_ms: updated,
            kickoff_id: id.to_string(),
        }))
    }

    async fn events_after_now(
        &self,
        id: &str,
        after_seq: u64,
    ) -> Result<Vec<KickoffEvent>, QueueError> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, kind, data FROM crewai_kickoff_events
             WHERE kickoff_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(id)
        .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|(seq, kind, data)| {
                Ok(KickoffEvent {
                    seq: u64::try_from(seq).unwrap_or(0),
                    kind,
                    data: parse_json(id, "event", Some(data))?.unwrap_or(Value::Null),
                })
            })
            .collect()
    }

    async fn cancel_now(&self, id: &str) -> Result<Option<KickoffState>, QueueError> {
        let mut tx = self.begin().await?;
        let state = self.lock_state(&mut tx, id).await?;
        let (kind, data, after) = match state {
            Some(KickoffState::Queued) => {
                sqlx::query(
                    "UPDATE crewai_kickoffs SET state = 'cancelled', error = $2, updated_at_ms = crewai_now_ms()
                     WHERE id = $1"
                )
                .bind(id)
                .bind(CANCELLED_BEFORE_CLAIM)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
                let data = json!({"error": CANCELLED_BEFORE_CLAIM});
                ("kickoff_cancelled", data, KickoffState::Cancelled)
            }
            Some(KickoffState::Running) => {
                sqlx::query(
                    "UPDATE crewai_kickoffs SET cancel_requested = TRUE, updated_at_ms = crewai_now_ms()
                     WHERE id = $1"
                )
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
                ("kickoff_cancel_requested", json!({}), KickoffState::Running)
            }
            other => return Ok(other),
        };
        self.append_event(&mut tx, id, kind, &data).await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(Some(after))
    }

    /// Tells every listening process that a kickoff is claimable, when `tx` commits.
    async fn announce_new_work(
        &self,
        tx: &mut Transaction<'_, Postgres>,
    ) -> Result<(), QueueError> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(NEW_WORK_CHANNEL)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn resume_now(&self, id: &str) -> Result<Option<KickoffState>, QueueError> {
        let mut tx = self.begin().await?;
        match self.lock_state(&mut tx, id).await? {
            None => Ok(None),
            Some(KickoffState::Failed | KickoffState::Cancelled | KickoffState::DeadLettered) => {
                // A fresh round of attempts: the run continues from its journal.
                sqlx::query(
                    "UPDATE crewai_kickoffs SET state = 'queued', attempts = 0, not_before_ms = 0, error = NULL,
                     cancel_requested = FALSE, updated_at_ms = crewai_now_ms() WHERE id = $1"
                )
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
                self.append_event(&mut tx, id, "kickoff_resumed", &json!({}))
                    .await?;
                self.announce_new_work(&mut tx).await?;
                tx.commit().await.map_err(|e| self.sql(e))?;
                Ok(Some(KickoffState::Queued))
            }
            Some(state) => Err(QueueError::NotResumable {
                kickoff_id: id.to_string(),
                state: state.as_str().to_string(),
            }),
        }
    }
}

impl KickoffQueue for PgQueue {
    fn submit(
        &self,
        inputs: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> BoxFuture<'_, Result<Submitted, QueueError>> {
        Box::pin(self.guarded(self.submit_now(inputs, idempotency_key)))
    }

    fn claim<'a>(
        &'a self,
        worker: &'a WorkerIdentity,
    ) -> BoxFuture<'a, Result<Option<Claimed>, QueueError>> {
        Box::pin(self.guarded(self.claim_now(worker.label())))
    }

    fn heartbeat<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
    ) -> BoxFuture<'a, Result<Lease, QueueError>> {
        Box::pin(self.guarded(self.heartbeat_now(kickoff_id, lease_token)))
    }

    fn record_event<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        kind: &'a str,
        data: Value,
    ) -> BoxFuture<'a, Result<(), QueueError>> {
        Box::pin(self.guarded(self.record_event_now(kickoff_id, lease_token, kind, data)))
    }

    fn finish<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        end: AttemptEnd,
    ) -> BoxFuture<'a, Result<Lease, QueueError>> {
        Box::pin(self.guarded(self.finish_now(kickoff_id, lease_token, end)))
    }

    fn status<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffRecord>, QueueError>> {
        Box::pin(self.guarded(self.status_now(kickoff_id)))
    }

    fn events_after<'a>(
        &'a self,
        kickoff_id: &'a str,
        after_seq: u64,
    ) -> BoxFuture<'a, Result<Vec<KickoffEvent>, QueueError>> {
        Box::pin(self.guarded(self.events_after_now(kickoff_id, after_seq)))
    }

    fn cancel<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>> {
        Box::pin(self.guarded(self.cancel_now(kickoff_id)))
    }

    fn resume<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>> {
        Box::pin(self.guarded(self.resume_now(kickoff_id)))
    }

    fn wait_for_work(&self, at_most: Duration) -> BoxFuture<'_, ()> {
        self.listener.get_or_init(|| {
            ListenerTask(tokio::spawn(listen_for_work(
                self.pool.clone(),
                self.new_work.clone(),
            )))
        });
        Box::pin(self.new_work.wait(at_most))
    }
}
