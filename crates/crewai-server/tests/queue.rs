//! The kickoff queue's semantics, one suite run against every implementation: each test runs
//! once on [`SqliteQueue`] (a temp file) and once on [`PgQueue`] (a fresh database on the test
//! PostgreSQL; skipped locally and failed under CI when that server is missing).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crewai_server::{
    AttemptEnd, KickoffQueue, KickoffState, Lease, PgPoolConfig, PgQueue, QueueConfig, QueueError,
    SqliteQueue, Submitted, WorkerIdentity,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

/// Where one test's queue lives: a temp folder's file, or a database of its own.
struct Fixture {
    backend: Backend,
    _dir: tempfile::TempDir,
    /// The SQLite file, or the Postgres URL.
    location: String,
}

impl Fixture {
    async fn new(backend: Backend) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let location = match backend {
            Backend::Sqlite => dir.path().join("q/queue.db").display().to_string(),
            Backend::Postgres => crewai_testkit::postgres::fresh_database().await,
        };
        Fixture {
            backend,
            _dir: dir,
            location,
        }
    }

    async fn open(&self, config: QueueConfig) -> Result<Arc<dyn KickoffQueue>, QueueError> {
        Ok(match self.backend {
            Backend::Sqlite => Arc::new(SqliteQueue::open(self.location.as_ref(), config)?),
            Backend::Postgres => {
                let pool_config = PgPoolConfig::default();
                let pool = crewai_server::connect_pool(&self.location, &pool_config)?;
                Arc::new(PgQueue::open(pool, "test", config, pool_config.call_timeout).await?)
            }
        })
    }

    async fn queue(&self, config: QueueConfig) -> Arc<dyn KickoffQueue> {
        self.open(config).await.unwrap()
    }

    /// Runs one statement on the queue's database behind the queue's back.
    async fn execute(&self, sql: &'static str) -> i64 {
        match self.backend {
            Backend::Sqlite => {
                let conn = rusqlite::Connection::open(&self.location).unwrap();
                if sql.starts_with("SELECT") {
                    conn.query_row(sql, [], |row| row.get(0)).unwrap()
                } else {
                    conn.execute(sql, []).unwrap() as i64
                }
            }
            Backend::Postgres => {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(&self.location).await.unwrap();
                if sql.starts_with("SELECT") {
                    let (value,): (i64,) = sqlx::query_as(sql).fetch_one(&mut conn).await.unwrap();
                    value
                } else {
                    let done = sqlx::query(sql).execute(&mut conn).await.unwrap();
                    done.rows_affected() as i64
                }
            }
        }
    }
}

fn inputs(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn worker(pid: u32) -> WorkerIdentity {
    WorkerIdentity {
        host: "test-host".into(),
        pid,
    }
}

async fn an_idempotency_key_returns_the_first_kickoff_and_refuses_other_inputs(fixture: Fixture) {
    let queue = fixture.queue(QueueConfig::default()).await;
    let first = queue
        .submit(
            inputs(json!({"topic": "AI", "n": {"b": 1, "a": 2}})),
            Some("k1".into()),
        )
        .await
        .unwrap();
    assert!(matches!(first, Submitted::Created(_)));
    // The same inputs with the keys in another order are the same request.
    let again = queue
        .submit(
            inputs(json!({"n": {"a": 2, "b": 1}, "topic": "AI"})),
            Some("k1".into()),
        )
        .await
        .unwrap();
    assert_eq!(again, Submitted::Existing(first.kickoff_id().to_string()));
    let conflict = queue
        .submit(inputs(json!({"topic": "Rust"})), Some("k1".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(conflict, QueueError::IdempotencyConflict { .. }),
        "{conflict}"
    );
    let unkeyed = queue
        .submit(inputs(json!({"topic": "AI"})), None)
        .await
        .unwrap();
    assert_ne!(unkeyed.kickoff_id(), first.kickoff_id());
}

async fn a_kickoff_is_claimed_once_and_again_only_after_its_lease_lapses(fixture: Fixture) {
    let config = QueueConfig {
        lease: Duration::from_millis(300),
        ..QueueConfig::default()
    };
    let queue = fixture.queue(config).await;
    let id = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    let first = queue.claim(&worker(1)).await.unwrap().unwrap();
    assert_eq!((first.kickoff_id.as_str(), first.attempt), (id.as_str(), 1));
    assert!(queue.claim(&worker(2)).await.unwrap().is_none());
    let status = queue.status(&id).await.unwrap().unwrap();
    assert_eq!(status.state, KickoffState::Running);
    assert_eq!(status.worker.as_deref(), Some("test-host:1"));

    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = queue.claim(&worker(2)).await.unwrap().unwrap();
    assert_eq!(second.attempt, 2);
    // The first worker learns it lost the kickoff and cannot write into it any more.
    assert_eq!(
        queue.heartbeat(&id, &first.lease_token).await.unwrap(),
        Lease::Lost
    );
    let end = AttemptEnd::Completed {
        result: json!("late"),
        usage: json!({}),
    };
    assert_eq!(
        queue.finish(&id, &first.lease_token, end).await.unwrap(),
        Lease::Lost
    );
    queue
        .record_event(&id, &first.lease_token, "task_started", json!({}))
        .await
        .unwrap();
    assert_eq!(
        queue.heartbeat(&id, &second.lease_token).await.unwrap(),
        Lease::Held {
            cancel_requested: false
        }
    );
    let end = AttemptEnd::Completed {
        result: json!("done"),
        usage: json!({"total_tokens": 3}),
    };
    queue.finish(&id, &second.lease_token, end).await.unwrap();
    let status = queue.status(&id).await.unwrap().unwrap();
    assert_eq!(status.state, KickoffState::Completed);
    assert_eq!(status.result, Some(json!("done")));
    let kinds: Vec<String> = queue
        .events_after(&id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "kickoff_queued",
            "kickoff_claimed",
            "kickoff_lease_expired",
            "kickoff_claimed",
            "kickoff_completed"
        ]
    );
    let tail = queue.events_after(&id, 3).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
}

async fn infrastructure_failures_retry_with_backoff_then_dead_letter_and_task_errors_do_not(
    fixture: Fixture,
) {
    let config = QueueConfig {
        max_attempts: 2,
        retry_backoff: Duration::from_millis(200),
        ..QueueConfig::default()
    };
    let queue = fixture.queue(config).await;
    let id = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    let claim = queue.claim(&worker(1)).await.unwrap().unwrap();
    let end = AttemptEnd::Infrastructure {
        error: "journal unreachable".into(),
    };
    queue
        .finish(&id, &claim.lease_token, end.clone())
        .await
        .unwrap();
    assert_eq!(
        queue.status(&id).await.unwrap().unwrap().state,
        KickoffState::Queued
    );
    // Not before the backoff has passed.
    assert!(queue.claim(&worker(1)).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(250)).await;
    let claim = queue.claim(&worker(1)).await.unwrap().unwrap();
    assert_eq!(claim.attempt, 2);
    queue.finish(&id, &claim.lease_token, end).await.unwrap();
    let status = queue.status(&id).await.unwrap().unwrap();
    assert_eq!(status.state, KickoffState::DeadLettered);
    assert_eq!(status.error.as_deref(), Some("journal unreachable"));

    let failing = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    let claim = queue.claim(&worker(1)).await.unwrap().unwrap();
    let end = AttemptEnd::Failed {
        error: "task 'b' failed".into(),
        usage: json!({}),
    };
    queue
        .finish(&failing, &claim.lease_token, end)
        .await
        .unwrap();
    assert_eq!(
        queue.status(&failing).await.unwrap().unwrap().state,
        KickoffState::Failed
    );
    // Both can be resumed, with a fresh round of attempts.
    for id in [&id, &failing] {
        assert_eq!(queue.resume(id).await.unwrap(), Some(KickoffState::Queued));
        let claim = queue.claim(&worker(3)).await.unwrap().unwrap();
        assert_eq!((claim.kickoff_id.as_str(), claim.attempt), (id.as_str(), 1));
        let end = AttemptEnd::Completed {
            result: json!("ok"),
            usage: json!({}),
        };
        queue.finish(id, &claim.lease_token, end).await.unwrap();
    }
    let error = queue.resume(&id).await.unwrap_err();
    assert!(matches!(error, QueueError::NotResumable { .. }), "{error}");
    assert_eq!(queue.resume("no-such-id").await.unwrap(), None);
}

async fn a_worker_that_keeps_dying_is_dead_lettered_when_its_last_lease_lapses(fixture: Fixture) {
    let config = QueueConfig {
        lease: Duration::from_millis(100),
        max_attempts: 2,
        ..QueueConfig::default()
    };
    let queue = fixture.queue(config).await;
    let id = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    for _ in 0..2 {
        queue.claim(&worker(1)).await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(queue.claim(&worker(2)).await.unwrap().is_none());
    let status = queue.status(&id).await.unwrap().unwrap();
    assert_eq!(status.state, KickoffState::DeadLettered);
    assert!(status.error.unwrap().contains("test-host:1"));
}

async fn cancel_stops_a_queued_kickoff_at_once_and_asks_a_running_one(fixture: Fixture) {
    let queue = fixture.queue(QueueConfig::default()).await;
    let queued = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    assert_eq!(
        queue.cancel(&queued).await.unwrap(),
        Some(KickoffState::Cancelled)
    );
    let running = queue
        .submit(Map::new(), None)
        .await
        .unwrap()
        .kickoff_id()
        .to_string();
    let claim = queue.claim(&worker(1)).await.unwrap().unwrap();
    assert_eq!(claim.kickoff_id, running);
    assert_eq!(
        queue.cancel(&running).await.unwrap(),
        Some(KickoffState::Running)
    );
    assert_eq!(
        queue.heartbeat(&running, &claim.lease_token).await.unwrap(),
        Lease::Held {
            cancel_requested: true
        }
    );
    assert_eq!(queue.cancel("unknown").await.unwrap(), None);
}

async fn concurrent_workers_each_claim_a_different_kickoff(fixture: Fixture) {
    let queue = fixture.queue(QueueConfig::default()).await;
    let mut submitted = BTreeSet::new();
    for n in 0..24 {
        let id = queue.submit(inputs(json!({"n": n})), None).await.unwrap();
        submitted.insert(id.kickoff_id().to_string());
    }
    let mut claimers = tokio::task::JoinSet::new();
    for pid in 0..6 {
        let queue = Arc::clone(&queue);
        claimers.spawn(async move {
            let mut mine = Vec::new();
            while let Some(claim) = queue.claim(&worker(pid)).await.unwrap() {
                mine.push(claim.kickoff_id);
            }
            mine
        });
    }
    let mut claimed = Vec::new();
    while let Some(mine) = claimers.join_next().await {
        claimed.extend(mine.unwrap());
    }
    assert_eq!(
        claimed.len(),
        submitted.len(),
        "a kickoff was claimed twice"
    );
    assert_eq!(claimed.into_iter().collect::<BTreeSet<_>>(), submitted);
}

/// A worker waiting for work is woken by a submission long before its poll is due: on SQLite by
/// one made through the same queue, on Postgres by one from another process (another pool).
async fn a_submission_wakes_a_waiting_worker_before_its_poll(fixture: Fixture) {
    let queue = fixture.queue(QueueConfig::default()).await;
    let submitter = match fixture.backend {
        Backend::Sqlite => Arc::clone(&queue),
        Backend::Postgres => fixture.queue(QueueConfig::default()).await,
    };
    let waiting = {
        let queue = Arc::clone(&queue);
        tokio::spawn(async move {
            loop {
                if let Some(claim) = queue.claim(&worker(1)).await.unwrap() {
                    return claim.kickoff_id;
                }
                queue.wait_for_work(Duration::from_secs(60)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let submitted = submitter
        .submit(inputs(json!({"n": 1})), None)
        .await
        .unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the worker is woken, not left for its 60 s poll")
        .unwrap();
    assert_eq!(claimed, submitted.kickoff_id());
}

async fn concurrent_submissions_under_one_idempotency_key_make_one_kickoff(fixture: Fixture) {
    let queue = fixture.queue(QueueConfig::default()).await;
    let mut submitters = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let queue = Arc::clone(&queue);
        submitters.spawn(async move {
            queue
                .submit(inputs(json!({"topic": "AI"})), Some("same".into()))
                .await
                .unwrap()
        });
    }
    let mut outcomes = Vec::new();
    while let Some(outcome) = submitters.join_next().await {
        outcomes.push(outcome.unwrap());
    }
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, Submitted::Created(_)))
        .count();
    assert_eq!(created, 1, "{outcomes:?}");
    let ids: BTreeSet<&str> = outcomes.iter().map(Submitted::kickoff_id).collect();
    assert_eq!(ids.len(), 1, "{outcomes:?}");
}

async fn reopening_applies_no_migration_twice_and_a_newer_schema_is_refused(fixture: Fixture) {
    drop(fixture.queue(QueueConfig::default()).await);
    drop(fixture.queue(QueueConfig::default()).await);
    let versions = fixture
        .execute("SELECT COUNT(*) FROM crewai_queue_schema")
        .await;
    assert_eq!(versions, 1);
    fixture
        .execute("INSERT INTO crewai_queue_schema (version) VALUES (99)")
        .await;
    let Err(error) = fixture.open(QueueConfig::default()).await else {
        panic!("a schema newer than the build was opened");
    };
    assert!(
        matches!(error, QueueError::SchemaTooNew { found: 99, .. }),
        "{error}"
    );
}

type Test = fn(Fixture) -> BoxFuture<'static, ()>;

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|fixture| Box::pin($name(fixture))) as Test)),*]
    };
}

fn main() -> std::process::ExitCode {
    let postgres: Prerequisite = crewai_testkit::postgres::prerequisite();
    let tests = tests![
        an_idempotency_key_returns_the_first_kickoff_and_refuses_other_inputs,
        a_kickoff_is_claimed_once_and_again_only_after_its_lease_lapses,
        infrastructure_failures_retry_with_backoff_then_dead_letter_and_task_errors_do_not,
        a_worker_that_keeps_dying_is_dead_lettered_when_its_last_lease_lapses,
        cancel_stops_a_queued_kickoff_at_once_and_asks_a_running_one,
        concurrent_workers_each_claim_a_different_kickoff,
        concurrent_submissions_under_one_idempotency_key_make_one_kickoff,
        a_submission_wakes_a_waiting_worker_before_its_poll,
        reopening_applies_no_migration_twice_and_a_newer_schema_is_refused,
    ];
    let mut suite = Suite::new();
    for (name, test) in tests {
        for (backend, needs) in [
            (Backend::Sqlite, Vec::new()),
            (Backend::Postgres, vec![&postgres]),
        ] {
            let label = format!("{}::{name}", format!("{backend:?}").to_lowercase());
            suite = suite.test_needing(label, &needs, move || {
                crewai_testkit::prereq::block_on_multi_thread(2, async move {
                    test(Fixture::new(backend).await).await
                })
            });
        }
    }
    suite.run()
}
