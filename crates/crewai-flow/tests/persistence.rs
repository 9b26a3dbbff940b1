//! Durable runs: resume after a crash (in-process and a killed child process), two connections on
//! one database, fork, and restarting a finished run from its saved state.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{Log, no_inputs};
use crewai_flow::{
    Flow, FlowContext, FlowPersistence, FlowState, Kickoff, RunStatus, SqliteFlowPersistence, on,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Steps {
    #[serde(default)]
    id: String,
    #[serde(default)]
    steps: Vec<String>,
}

/// What method `two` does on its first run.
#[derive(Clone)]
enum Two {
    Work,
    /// Waits until the snapshot after `one` is on disk, signals, then hangs (the test drops the run).
    HangAfterSave(Arc<Notify>),
    /// Waits until the snapshot after `one` is on disk, then ends the process.
    ExitAfterSave,
}

fn pipeline(store: SqliteFlowPersistence, log: Log, two: Two, persist_all: bool) -> Flow<Steps> {
    let step = |log: &Log, name: &'static str| {
        let log = log.clone();
        move |ctx: FlowContext<Steps>| {
            let log = log.clone();
            async move {
                log.push(name);
                ctx.update_state(|s| s.steps.push(name.to_string()));
                Ok(format!("{name} done"))
            }
        }
    };
    let builder = Flow::typed_builder::<Steps>()
        .name("pipeline")
        .persistence(Arc::new(store.clone()))
        .start("one", step(&log, "one"));
    let builder = if persist_all {
        builder.persist()
    } else {
        builder.persist_method()
    };
    let two_log = log.clone();
    builder
        .listen("two", on("one"), move |ctx: FlowContext<Steps>| {
            let (log, two, store) = (two_log.clone(), two.clone(), store.clone());
            async move {
                if !matches!(two, Two::Work) {
                    wait_for_snapshot(&store, ctx.state_id(), "one").await;
                }
                match two {
                    Two::Work => {}
                    Two::HangAfterSave(notify) => {
                        notify.notify_one();
                        std::future::pending::<()>().await;
                    }
                    Two::ExitAfterSave => std::process::exit(3),
                }
                log.push("two");
                ctx.update_state(|s| s.steps.push("two".into()));
                Ok("two done".to_string())
            }
        })
        .listen("three", on("two"), step(&log, "three"))
        .build()
        .unwrap()
}

async fn wait_for_snapshot(store: &SqliteFlowPersistence, id: &str, method: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(snapshot)) = store.load_state(id).await
            && snapshot.method_name == method
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshot after `{method}` within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `flow` as state `id` until `notify` says its method `method` is under way, then drops the
/// run as a killed process would; returns how the run's task ended.
async fn crash_at<S: FlowState>(
    flow: Flow<S>,
    id: &str,
    notify: &Notify,
    method: &str,
) -> tokio::task::JoinError {
    let id = id.to_string();
    let run = tokio::spawn(async move { flow.kickoff_with(Kickoff::new().resume(id)).await });
    tokio::time::timeout(Duration::from_secs(10), notify.notified())
        .await
        .unwrap_or_else(|_| panic!("method {method} did not start"));
    run.abort();
    match run.await {
        Err(ended) => ended,
        Ok(_) => panic!("the run finished instead of being dropped"),
    }
}

/// The SQLite persistence of the flows under `dir` (a new connection on each call).
fn sqlite(dir: &Path) -> SqliteFlowPersistence {
    SqliteFlowPersistence::open(database(dir)).unwrap()
}

fn database(dir: &Path) -> std::path::PathBuf {
    dir.join("flow_states.db")
}

#[tokio::test]
async fn resume_after_the_run_is_dropped_between_methods() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let notify = Arc::new(Notify::new());
    let first_log = Log::default();
    let crashing = pipeline(
        sqlite(dir.path()),
        first_log.clone(),
        Two::HangAfterSave(notify.clone()),
        true,
    );
    assert!(crash_at(crashing, &id, &notify, "two").await.is_cancelled());
    assert_eq!(first_log.entries(), vec!["one"]);

    // A new flow value on a new connection: as if the process had been restarted.
    let second_log = Log::default();
    let store = sqlite(dir.path());
    let resumed = pipeline(store.clone(), second_log.clone(), Two::Work, true);
    let output = resumed.kickoff([("id", json!(id))]).await.unwrap();
    assert_eq!(
        second_log.entries(),
        vec!["two", "three"],
        "completed methods are not re-run"
    );
    assert_eq!(output.id, id);
    assert_eq!(output.state.steps, vec!["one", "two", "three"]);
    assert_eq!(
        output
            .method_outputs
            .iter()
            .map(|r| r.method.as_str())
            .collect::<Vec<_>>(),
        vec!["one", "two", "three"]
    );
    assert_eq!(output.result, Some(json!("three done")));
    let saved = store.load_state(&id).await.unwrap().unwrap();
    assert_eq!(saved.progress.status, RunStatus::Completed);
    assert_eq!(saved.state["steps"], json!(["one", "two", "three"]));
}

const CHILD_DB: &str = "CREWAI_FLOW_TEST_CHILD_DB";
const CHILD_ID: &str = "CREWAI_FLOW_TEST_CHILD_ID";

/// Runs only when started by `resume_after_the_process_is_killed`: kicks off the pipeline, whose
/// method `two` ends the process once the state after `one` is saved.
#[test]
fn child_process_part() {
    let (Ok(db), Ok(id)) = (std::env::var(CHILD_DB), std::env::var(CHILD_ID)) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let flow = pipeline(
            SqliteFlowPersistence::open(db).unwrap(),
            Log::default(),
            Two::ExitAfterSave,
            false,
        );
        let _ = flow.kickoff_with(Kickoff::new().resume(id)).await;
    });
    panic!("the child flow should have ended the process in method `two`");
}

#[tokio::test]
async fn resume_after_the_process_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_part",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, database(dir.path()))
        .env(CHILD_ID, &id)
        .status();
    let status = tokio::time::timeout(Duration::from_secs(60), status)
        .await
        .expect("child process hung")
        .unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "the child should exit inside method `two`"
    );

    let log = Log::default();
    let flow = pipeline(sqlite(dir.path()), log.clone(), Two::Work, false);
    let output = flow.resume(&id).await.unwrap();
    assert_eq!(log.entries(), vec!["two", "three"]);
    assert_eq!(output.state.steps, vec!["one", "two", "three"]);
}

#[tokio::test]
async fn two_connections_see_each_others_runs() {
    let dir = tempfile::tempdir().unwrap();
    let first = pipeline(sqlite(dir.path()), Log::default(), Two::Work, true);
    let second = pipeline(sqlite(dir.path()), Log::default(), Two::Work, true);
    // Both write at once to one file.
    let (a, b) = tokio::join!(first.kickoff(no_inputs()), second.kickoff(no_inputs()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        second.saved_state(&a.id).await.unwrap().unwrap().steps,
        vec!["one", "two", "three"]
    );
    assert_eq!(first.saved_state(&b.id).await.unwrap().unwrap().id, b.id);
}

#[tokio::test]
async fn a_finished_run_kicked_off_again_starts_over_from_its_saved_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::default();
    let flow = pipeline(sqlite(dir.path()), log.clone(), Two::Work, true);
    let first = flow.kickoff(no_inputs()).await.unwrap();
    let again = flow.resume(&first.id).await.unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(again.state.steps.len(), 6);
    assert_eq!(log.count("one"), 2);
}

#[tokio::test]
async fn fork_starts_a_new_id_and_leaves_the_original_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let flow = pipeline(sqlite(dir.path()), Log::default(), Two::Work, true);
    let original = flow.kickoff(no_inputs()).await.unwrap();
    let forked = flow.fork(&original.id, no_inputs()).await.unwrap();
    assert_ne!(forked.id, original.id);
    assert_eq!(forked.state.id, forked.id);
    assert_eq!(
        forked.state.steps,
        vec!["one", "two", "three", "one", "two", "three"]
    );
    let untouched = flow.saved_state(&original.id).await.unwrap().unwrap();
    assert_eq!(untouched.steps, vec!["one", "two", "three"]);
    assert_eq!(untouched.id, original.id);
}

#[tokio::test]
async fn fork_of_an_unknown_id_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let flow = pipeline(sqlite(dir.path()), Log::default(), Two::Work, true);
    let error = flow.fork("no-such-id", no_inputs()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "flow `pipeline`: no saved state with id `no-such-id` to fork from"
    );
}

/// `left` completes and is saved; `right` hangs on the first run, so the join is half done.
fn join_flow(
    store: SqliteFlowPersistence,
    log: Log,
    hang_right: Option<Arc<Notify>>,
) -> Flow<Steps> {
    let left_log = log.clone();
    let right_log = log.clone();
    let join_log = log;
    let right_store = store.clone();
    Flow::typed_builder::<Steps>()
        .persistence(Arc::new(store))
        .persist()
        .start("left", move |_ctx: FlowContext<Steps>| {
            let log = left_log.clone();
            async move {
                log.push("left");
                Ok("L")
            }
        })
        .start("right", move |ctx: FlowContext<Steps>| {
            let (log, hang, store) = (right_log.clone(), hang_right.clone(), right_store.clone());
            async move {
                if let Some(notify) = hang {
                    wait_for_snapshot(&store, ctx.state_id(), "left").await;
                    notify.notify_one();
                    std::future::pending::<()>().await;
                }
                log.push("right");
                Ok("R")
            }
        })
        .listen(
            "joined",
            crewai_flow::and(["left", "right"]),
            move |ctx: FlowContext<Steps>| {
                let log = join_log.clone();
                async move {
                    log.push("joined");
                    Ok(json!([
                        ctx.method_output("left"),
                        ctx.method_output("right")
                    ]))
                }
            },
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_half_completed_join_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let notify = Arc::new(Notify::new());
    let crashing = join_flow(sqlite(dir.path()), Log::default(), Some(notify.clone()));
    crash_at(crashing, &id, &notify, "right").await;

    let store = sqlite(dir.path());
    let saved = store.load_state(&id).await.unwrap().unwrap();
    assert_eq!(
        saved.progress.joins.get("joined").map(|j| j.len()),
        Some(1),
        "the join's progress is saved: {:?}",
        saved.progress
    );

    let log = Log::default();
    let output = join_flow(store, log.clone(), None)
        .resume(&id)
        .await
        .unwrap();
    assert_eq!(log.entries(), vec!["right", "joined"]);
    assert_eq!(output.result, Some(json!(["L", "R"])));
}
