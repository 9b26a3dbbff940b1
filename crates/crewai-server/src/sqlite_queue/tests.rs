use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;

fn inputs(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn queue(dir: &tempfile::TempDir, config: QueueConfig) -> SqliteQueue {
    SqliteQueue::open(&dir.path().join("q/queue.db"), config).unwrap()
}

fn worker(pid: u32) -> WorkerIdentity {
    WorkerIdentity {
        host: "test-host".into(),
        pid,
    }
}

#[tokio::test]
async fn an_idempotency_key_returns_the_first_kickoff_and_refuses_other_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let queue = queue(&dir, QueueConfig::default());
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

#[tokio::test]
async fn a_kickoff_is_claimed_once_and_again_only_after_its_lease_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let config = QueueConfig {
        lease: Duration::from_millis(300),
        ..QueueConfig::default()
    };
    let queue = queue(&dir, config);
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

#[tokio::test]
async fn infrastructure_failures_retry_with_backoff_then_dead_letter_and_task_errors_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = QueueConfig {
        max_attempts: 2,
        retry_backoff: Duration::from_millis(200),
        ..QueueConfig::default()
    };
    let queue = queue(&dir, config);
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

#[tokio::test]
async fn a_worker_that_keeps_dying_is_dead_lettered_when_its_last_lease_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let config = QueueConfig {
        lease: Duration::from_millis(100),
        max_attempts: 2,
        ..QueueConfig::default()
    };
    let queue = queue(&dir, config);
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

#[tokio::test]
async fn cancel_stops_a_queued_kickoff_at_once_and_asks_a_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let queue = queue(&dir, QueueConfig::default());
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

#[test]
fn reopening_applies_no_migration_twice_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    drop(SqliteQueue::open(&path, QueueConfig::default()).unwrap());
    drop(SqliteQueue::open(&path, QueueConfig::default()).unwrap());
    let conn = Connection::open(&path).unwrap();
    let versions: i64 = conn
        .query_row("SELECT COUNT(*) FROM crewai_queue_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(versions, i64::try_from(MIGRATIONS.len()).unwrap());
    conn.execute("INSERT INTO crewai_queue_schema (version) VALUES (99)", [])
        .unwrap();
    drop(conn);
    let error = SqliteQueue::open(&path, QueueConfig::default()).unwrap_err();
    assert!(
        matches!(error, QueueError::SchemaTooNew { found: 99, .. }),
        "{error}"
    );
}
