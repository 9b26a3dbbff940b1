//! [`KickoffQueue`] on SQLite: one file (by default `<project>/.crewai/queue.db`) shared by
//! `crewai serve`'s in-process workers and any `crewai worker` on the same machine.
//!
//! Every call is one short transaction on tokio's blocking pool. A claim takes SQLite's write
//! lock first (`BEGIN IMMEDIATE`), so two workers never claim the same kickoff; the lease
//! (worker `host:pid`, a token, an expiry) is what lets a dead worker's kickoff be claimed again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value, json};

use crate::error::QueueError;
use crate::queue::{
    AttemptEnd, Claimed, KickoffEvent, KickoffQueue, KickoffRecord, KickoffState, Lease,
    QueueConfig, Submitted, WorkSignal, WorkerIdentity,
};
use crate::settle::{
    CANCELLED_BEFORE_CLAIM, Settlement, lapsed_on_every_attempt, millis, parse_inputs, parse_json,
    parse_state, request_hash, settle,
};

/// The schema's versions, applied in order at open; the database records the last one applied.
const MIGRATIONS: &[&str] = &["
CREATE TABLE kickoffs (
    id TEXT PRIMARY KEY,
    idempotency_key TEXT UNIQUE,
    request_hash TEXT NOT NULL,
    inputs TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before_ms INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_token TEXT,
    lease_until_ms INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error TEXT,
    usage TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE INDEX kickoffs_due ON kickoffs (state, not_before_ms, created_at_ms);
CREATE TABLE kickoff_events (
    kickoff_id TEXT NOT NULL REFERENCES kickoffs (id),
    seq INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (kickoff_id, seq)
);
"];

/// The kickoff queue in a SQLite file (cheap to clone; clones share the connection).
#[derive(Clone)]
pub struct SqliteQueue {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    config: QueueConfig,
    /// Submissions and resumes through this value (and its clones) wake its workers.
    new_work: WorkSignal,
}

impl std::fmt::Debug for SqliteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQueue")
            .field("path", &self.path)
            .finish()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl SqliteQueue {
    /// Opens (creating if needed) the queue at `path`, applying the schema's migrations.
    pub fn open(path: &Path, config: QueueConfig) -> Result<SqliteQueue, QueueError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| QueueError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let location = path.display().to_string();
        let sql = |source: rusqlite::Error| classify(&location, source);
        let mut conn = Connection::open(path).map_err(sql)?;
        // Another process's claim holds the write lock for a moment.
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(sql)?;
        migrate(&mut conn, &location)?;
        Ok(SqliteQueue {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
            config,
            new_work: WorkSignal::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `work` on the blocking pool with the connection.
    fn call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection, &Ctx) -> Result<T, QueueError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, QueueError>> {
        let conn = Arc::clone(&self.conn);
        let ctx = Ctx {
            location: self.path.display().to_string(),
            config: self.config,
        };
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // A panic while holding the lock leaves the connection usable (every change is
                // a transaction that rolled back), so a poisoned lock is taken over.
                let mut conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                work(&mut conn, &ctx)
            })
            .await
            .map_err(QueueError::Join)?
        })
    }
}

/// What a database call needs besides the connection.
struct Ctx {
    location: String,
    config: QueueConfig,
}

impl Ctx {
    fn sql(&self, source: rusqlite::Error) -> QueueError {
        classify(&self.location, source)
    }
}

/// A busy or locked database is worth retrying (503); anything else is not.
fn classify(location: &str, source: rusqlite::Error) -> QueueError {
    let busy = matches!(
        source.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    let location = location.to_string();
    if busy {
        QueueError::Unavailable {
            location,
            source: Box::new(source),
        }
    } else {
        QueueError::Database {
            location,
            source: Box::new(source),
        }
    }
}

fn migrate(conn: &mut Connection, location: &str) -> Result<(), QueueError> {
    let sql = |source| classify(location, source);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS crewai_queue_schema (version INTEGER NOT NULL)")
        .map_err(sql)?;
    let applied: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM crewai_queue_schema",
            [],
            |row| row.get(0),
        )
        .map_err(sql)?;
    let known = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
    if applied > known {
        return Err(QueueError::SchemaTooNew {
            found: applied,
            known,
        });
    }
    for (version, migration) in (1..).zip(MIGRATIONS).skip_while(|(v, _)| *v <= applied) {
        tx.execute_batch(migration).map_err(sql)?;
        tx.execute(
            "INSERT INTO crewai_queue_schema (version) VALUES (?1)",
            [version],
        )
        .map_err(sql)?;
    }
    tx.commit().map_err(sql)
}

fn append_event(
    conn: &Connection,
    ctx: &Ctx,
    kickoff_id: &str,
    kind: &str,
    data: &Value,
) -> Result<(), QueueError> {
    conn.execute(
        "INSERT INTO kickoff_events (kickoff_id, seq, at_ms, kind, data)
         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM kickoff_events WHERE kickoff_id = ?1), ?2, ?3, ?4)",
        params![kickoff_id, now_ms(), kind, data.to_string()],
    )
    .map_err(|e| ctx.sql(e))?;
    Ok(())
}

fn state_of(conn: &Connection, ctx: &Ctx, id: &str) -> Result<Option<KickoffState>, QueueError> {
    let text: Option<String> = conn
        .query_row("SELECT state FROM kickoffs WHERE id = ?1", [id], |row| {
            row.get(0)
        })
        .optional()
        .map_err(|e| ctx.sql(e))?;
    text.map(|text| parse_state(id, &text)).transpose()
}

/// Whether `lease_token` holds the running kickoff's lease.
fn holds_lease(conn: &Connection, ctx: &Ctx, id: &str, token: &str) -> Result<bool, QueueError> {
    conn.query_row(
        "SELECT COUNT(*) FROM kickoffs WHERE id = ?1 AND state = 'running' AND lease_token = ?2",
        params![id, token],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(|e| ctx.sql(e))
}

impl KickoffQueue for SqliteQueue {
    fn submit(
        &self,
        inputs: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> BoxFuture<'_, Result<Submitted, QueueError>> {
        let submitted = self.call(move |conn, ctx| {
            let inputs = Value::Object(inputs);
            let hash = request_hash(&inputs);
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| ctx.sql(e))?;
            if let Some(key) = &idempotency_key {
                let earlier: Option<(String, String)> = tx
                    .query_row(
                        "SELECT id, request_hash FROM kickoffs WHERE idempotency_key = ?1",
                        [key],
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )
                    .optional()
                    .map_err(|e| ctx.sql(e))?;
                if let Some((kickoff_id, earlier_hash)) = earlier {
                    return if earlier_hash == hash {
                        Ok(Submitted::Existing(kickoff_id))
                    } else {
                        Err(QueueError::IdempotencyConflict {
                            key: key.clone(),
                            kickoff_id,
                        })
                    };
                }
            }
            let id = uuid::Uuid::new_v4().to_string();
            let now = now_ms();
            tx.execute(
                "INSERT INTO kickoffs (id, idempotency_key, request_hash, inputs, state, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?5)",
                params![id, idempotency_key, hash, inputs.to_string(), now],
            )
            .map_err(|e| ctx.sql(e))?;
            append_event(&tx, ctx, &id, "kickoff_queued", &json!({}))?;
            tx.commit().map_err(|e| ctx.sql(e))?;
            Ok(Submitted::Created(id))
        });
        Box::pin(async move {
            let submitted = submitted.await;
            if let Ok(Submitted::Created(_)) = &submitted {
                self.new_work.notify();
            }
            submitted
        })
    }

    fn claim<'a>(
        &'a self,
        worker: &'a WorkerIdentity,
    ) -> BoxFuture<'a, Result<Option<Claimed>, QueueError>> {
        let label = worker.label();
        self.call(move |conn, ctx| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| ctx.sql(e))?;
            let now = now_ms();
            loop {
                let due: Option<(String, String, u32, String, Option<String>)> = tx
                    .query_row(
                        "SELECT id, inputs, attempts, state, lease_owner FROM kickoffs
                         WHERE (state = 'queued' AND not_before_ms <= ?1)
                            OR (state = 'running' AND lease_until_ms < ?1)
                         ORDER BY created_at_ms LIMIT 1",
                        [now],
                        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
                    )
                    .optional()
                    .map_err(|e| ctx.sql(e))?;
                let Some((id, inputs, attempts, state, previous_owner)) = due else {
                    tx.commit().map_err(|e| ctx.sql(e))?;
                    return Ok(None);
                };
                if state == "running" {
                    // Its worker stopped heartbeating: that attempt failed on infrastructure.
                    let lapsed = json!({"worker": previous_owner, "attempt": attempts});
                    append_event(&tx, ctx, &id, "kickoff_lease_expired", &lapsed)?;
                    if attempts >= ctx.config.max_attempts {
                        let error = lapsed_on_every_attempt(attempts, previous_owner.as_deref());
                        tx.execute(
                            "UPDATE kickoffs SET state = 'dead_lettered', error = ?2, lease_owner = NULL,
                             lease_token = NULL, lease_until_ms = NULL, updated_at_ms = ?3 WHERE id = ?1",
                            params![id, error, now],
                        )
                        .map_err(|e| ctx.sql(e))?;
                        append_event(&tx, ctx, &id, "kickoff_dead_lettered", &json!({"error": error}))?;
                        continue;
                    }
                }
                let token = uuid::Uuid::new_v4().to_string();
                let attempt = attempts + 1;
                tx.execute(
                    "UPDATE kickoffs SET state = 'running', attempts = ?2, lease_owner = ?3, lease_token = ?4,
                     lease_until_ms = ?5, updated_at_ms = ?6 WHERE id = ?1",
                    params![id, attempt, label, token, now + millis(ctx.config.lease), now],
                )
                .map_err(|e| ctx.sql(e))?;
                append_event(&tx, ctx, &id, "kickoff_claimed", &json!({"worker": label, "attempt": attempt}))?;
                tx.commit().map_err(|e| ctx.sql(e))?;
                return Ok(Some(Claimed {
                    inputs: parse_inputs(&id, &inputs)?,
                    kickoff_id: id,
                    attempt,
                    lease_token: token,
                }));
            }
        })
    }

    fn heartbeat<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
    ) -> BoxFuture<'a, Result<Lease, QueueError>> {
        let (id, token) = (kickoff_id.to_string(), lease_token.to_string());
        self.call(move |conn, ctx| {
            let now = now_ms();
            let cancel: Option<bool> = conn
                .query_row(
                    "UPDATE kickoffs SET lease_until_ms = ?3 WHERE id = ?1 AND state = 'running' AND lease_token = ?2
                     RETURNING cancel_requested",
                    params![id, token, now + millis(ctx.config.lease)],
                    |row| row.get(0),
                )
                .optional()
                .map_err(|e| ctx.sql(e))?;
            Ok(match cancel {
                Some(cancel_requested) => Lease::Held { cancel_requested },
                None => Lease::Lost,
            })
        })
    }

    fn record_event<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        kind: &'a str,
        data: Value,
    ) -> BoxFuture<'a, Result<(), QueueError>> {
        let (id, token, kind) = (
            kickoff_id.to_string(),
            lease_token.to_string(),
            kind.to_string(),
        );
        self.call(move |conn, ctx| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| ctx.sql(e))?;
            // A worker that lost its lease must not write into the new attempt's progress.
            if holds_lease(&tx, ctx, &id, &token)? {
                append_event(&tx, ctx, &id, &kind, &data)?;
            }
            tx.commit().map_err(|e| ctx.sql(e))
        })
    }

    fn finish<'a>(
        &'a self,
        kickoff_id: &'a str,
        lease_token: &'a str,
        end: AttemptEnd,
    ) -> BoxFuture<'a, Result<Lease, QueueError>> {
        let (id, token) = (kickoff_id.to_string(), lease_token.to_string());
        self.call(move |conn, ctx| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| ctx.sql(e))?;
            if !holds_lease(&tx, ctx, &id, &token)? {
                return Ok(Lease::Lost);
            }
            let attempts: u32 = tx
                .query_row("SELECT attempts FROM kickoffs WHERE id = ?1", [&id], |row| row.get(0))
                .map_err(|e| ctx.sql(e))?;
            let now = now_ms();
            let Settlement { state, result, error, usage, retry_in, event_kind, event } =
                settle(end, attempts, &ctx.config);
            let not_before = if retry_in.is_zero() { 0 } else { now + millis(retry_in) };
            tx.execute(
                "UPDATE kickoffs SET state = ?2, result = ?3, error = ?4, usage = COALESCE(?5, usage),
                 not_before_ms = ?6, lease_owner = NULL, lease_token = NULL, lease_until_ms = NULL,
                 cancel_requested = 0, updated_at_ms = ?7 WHERE id = ?1",
                params![id, state.as_str(), result, error, usage, not_before, now],
            )
            .map_err(|e| ctx.sql(e))?;
            append_event(&tx, ctx, &id, &event_kind, &event)?;
            tx.commit().map_err(|e| ctx.sql(e))?;
            Ok(Lease::Held { cancel_requested: false })
        })
    }

    fn status<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffRecord>, QueueError>> {
        let id = kickoff_id.to_string();
        self.call(move |conn, ctx| {
            type Row = (String, String, u32, Option<String>, Option<String>, Option<String>, Option<String>, i64, i64);
            let row: Option<Row> = conn
                .query_row(
                    "SELECT state, inputs, attempts, lease_owner, result, error, usage, created_at_ms, updated_at_ms
                     FROM kickoffs WHERE id = ?1",
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?)),
                )
                .optional()
                .map_err(|e| ctx.sql(e))?;
            let Some((state, inputs, attempts, worker, result, error, usage, created, updated)) = row else {
                return Ok(None);
            };
            let state = parse_state(&id, &state)?;
            Ok(Some(KickoffRecord {
                inputs: parse_inputs(&id, &inputs)?,
                state,
                attempts,
                worker: worker.filter(|_| state == KickoffState::Running),
                result: parse_json(&id, "result", result)?,
                error,
                usage: parse_json(&id, "usage", usage)?,
                created_at_ms: created,
                updated_at_ms: updated,
                kickoff_id: id,
            }))
        })
    }

    fn events_after<'a>(
        &'a self,
        kickoff_id: &'a str,
        after_seq: u64,
    ) -> BoxFuture<'a, Result<Vec<KickoffEvent>, QueueError>> {
        let id = kickoff_id.to_string();
        self.call(move |conn, ctx| {
            let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
            let mut statement = conn
                .prepare_cached(
                    "SELECT seq, kind, data FROM kickoff_events WHERE kickoff_id = ?1 AND seq > ?2 ORDER BY seq",
                )
                .map_err(|e| ctx.sql(e))?;
            let rows = statement
                .query_map(params![id, after], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?))
                })
                .map_err(|e| ctx.sql(e))?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, kind, data) = row.map_err(|e| ctx.sql(e))?;
                events.push(KickoffEvent {
                    seq: u64::try_from(seq).unwrap_or(0),
                    kind,
                    data: parse_json(&id, "event", Some(data))?.unwrap_or(Value::Null),
                });
            }
            Ok(events)
        })
    }

    fn cancel<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>> {
        let id = kickoff_id.to_string();
        self.call(move |conn, ctx| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| ctx.sql(e))?;
            let state = state_of(&tx, ctx, &id)?;
            let now = now_ms();
            match state {
                Some(KickoffState::Queued) => {
                    tx.execute(
                        "UPDATE kickoffs SET state = 'cancelled', error = ?3, updated_at_ms = ?2 WHERE id = ?1",
                        params![id, now, CANCELLED_BEFORE_CLAIM],
                    )
                    .map_err(|e| ctx.sql(e))?;
                    append_event(&tx, ctx, &id, "kickoff_cancelled", &json!({"error": CANCELLED_BEFORE_CLAIM}))?;
                    tx.commit().map_err(|e| ctx.sql(e))?;
                    Ok(Some(KickoffState::Cancelled))
                }
                Some(KickoffState::Running) => {
                    tx.execute(
                        "UPDATE kickoffs SET cancel_requested = 1, updated_at_ms = ?2 WHERE id = ?1",
                        params![id, now],
                    )
                    .map_err(|e| ctx.sql(e))?;
                    append_event(&tx, ctx, &id, "kickoff_cancel_requested", &json!({}))?;
                    tx.commit().map_err(|e| ctx.sql(e))?;
                    Ok(Some(KickoffState::Running))
                }
                other => Ok(other),
            }
        })
    }

    fn resume<'a>(
        &'a self,
        kickoff_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>> {
        let id = kickoff_id.to_string();
        let resumed = self.call(move |conn, ctx| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| ctx.sql(e))?;
            match state_of(&tx, ctx, &id)? {
                None => Ok(None),
                Some(KickoffState::Failed | KickoffState::Cancelled | KickoffState::DeadLettered) => {
                    // A fresh round of attempts: the run continues from its journal.
                    tx.execute(
                        "UPDATE kickoffs SET state = 'queued', attempts = 0, not_before_ms = 0, error = NULL,
                         cancel_requested = 0, updated_at_ms = ?2 WHERE id = ?1",
                        params![id, now_ms()],
                    )
                    .map_err(|e| ctx.sql(e))?;
                    append_event(&tx, ctx, &id, "kickoff_resumed", &json!({}))?;
                    tx.commit().map_err(|e| ctx.sql(e))?;
                    Ok(Some(KickoffState::Queued))
                }
                Some(state) => Err(QueueError::NotResumable {
                    kickoff_id: id,
                    state: state.as_str().to_string(),
                }),
            }
        });
        Box::pin(async move {
            let resumed = resumed.await;
            if let Ok(Some(KickoffState::Queued)) = &resumed {
                self.new_work.notify();
            }
            resumed
        })
    }

    fn wait_for_work(&self, at_most: Duration) -> BoxFuture<'_, ()> {
        Box::pin(self.new_work.wait(at_most))
    }
}
