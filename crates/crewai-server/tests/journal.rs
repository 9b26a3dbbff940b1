//! The run journal's semantics on PostgreSQL ([`PgJournal`]), each test run on the SQLite
//! journal (`crewai_store::Store`) as well, so both keep runs the same way.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
use crewai_core::store::{
    RunEnd, RunJournal, RunOwner, RunStart, RunStatus, StoreError, StoredTaskOutput,
};
use crewai_llm::Usage;
use crewai_server::{PgJournal, PgPoolConfig};
use crewai_testkit::prereq::{Prerequisite, Suite};
use futures::future::BoxFuture;
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

/// One test's journal: a SQLite file in a temp folder, or a database of its own.
struct Fixture {
    backend: Backend,
    _dir: tempfile::TempDir,
    location: String,
}

impl Fixture {
    async fn new(backend: Backend) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let location = match backend {
            Backend::Sqlite => dir.path().join("store.db").display().to_string(),
            Backend::Postgres => crewai_testkit::postgres::fresh_database().await,
        };
        Fixture {
            backend,
            _dir: dir,
            location,
        }
    }

    /// The journal as a process on `host` sees it.
    async fn journal_on(&self, host: &str) -> Arc<dyn RunJournal> {
        match self.backend {
            Backend::Sqlite => Arc::new(crewai_store::Store::open(self.location.as_ref()).unwrap()),
            Backend::Postgres => {
                let config = PgPoolConfig::default();
                let pool = crewai_server::connect_pool(&self.location, &config).unwrap();
                Arc::new(
                    PgJournal::open(pool, "test", host, config.call_timeout)
                        .await
                        .unwrap(),
                )
            }
        }
    }

    async fn journal(&self) -> Arc<dyn RunJournal> {
        self.journal_on("this-host").await
    }
}

fn record(index: usize, raw: &str) -> StoredTaskOutput {
    StoredTaskOutput {
        task_id: format!("t{index}"),
        task_name: Some(format!("task{index}")),
        task_index: index,
        output: TaskOutput::new("Describe it", "A text", raw, "Writer"),
        inputs: Inputs::new(),
        was_replayed: false,
        timestamp: Utc::now(),
    }
}

fn start(run_id: &str, owner: RunOwner) -> RunStart {
    let mut inputs = Inputs::new();
    inputs.insert("topic".into(), json!("AI"));
    RunStart {
        run_id: run_id.into(),
        crew: "crew".into(),
        inputs,
        task_keys: vec!["task0".into(), "task1".into(), "task2".into()],
        parent: None,
        carried_over: Vec::new(),
        owner,
    }
}

fn spent(tokens: u64) -> Usage {
    Usage {
        total_tokens: tokens,
        ..Usage::default()
    }
}

/// An owner whose process does not exist: beyond Linux's largest pid (2^22).
fn dead_owner() -> RunOwner {
    RunOwner {
        pid: 4_194_304 + 11,
        ..RunOwner::this_process()
    }
}

async fn a_run_keeps_its_finished_tasks_and_ends_released(fixture: Fixture) {
    let journal = fixture.journal().await;
    let owner = RunOwner::this_process();
    journal.start(&start("r1", owner.clone())).await.unwrap();
    journal.heartbeat("r1", &owner.token).await.unwrap();
    journal
        .task_finished("r1", &record(1, "second"), &spent(5))
        .await
        .unwrap();
    journal
        .task_finished("r1", &record(0, "first"), &spent(9))
        .await
        .unwrap();
    let run = journal.load("r1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.owner.as_ref().map(|o| &o.token), Some(&owner.token));
    assert_eq!(run.tasks.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert_eq!(run.tasks[&0].output.raw, "first");
    assert_eq!(run.usage, Some(spent(9)));
    assert_eq!(run.inputs.get("topic"), Some(&json!("AI")));

    journal
        .finish("r1", &RunEnd::completed("all done", spent(12)))
        .await
        .unwrap();
    let run = journal.load("r1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.output.as_deref(), Some("all done"));
    assert!(run.owner.is_none() && run.finished_at.is_some());
    assert!(journal.load("unknown").await.unwrap().is_none());
}

async fn a_live_owner_keeps_its_run_and_a_dead_ones_run_is_taken_over(fixture: Fixture) {
    let journal = fixture.journal().await;
    let live = RunOwner::this_process();
    journal.start(&start("r1", live.clone())).await.unwrap();
    journal
        .task_finished("r1", &record(0, "kept"), &spent(3))
        .await
        .unwrap();
    let error = journal
        .start(&start("r1", RunOwner::this_process()))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::RunOwned { .. }), "{error}");

    journal.start(&start("r2", dead_owner())).await.unwrap();
    journal
        .task_finished("r2", &record(0, "done before the kill"), &spent(4))
        .await
        .unwrap();
    let next = RunOwner::this_process();
    journal.start(&start("r2", next.clone())).await.unwrap();
    let run = journal.load("r2").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.tasks[&0].output.raw, "done before the kill");
    assert_eq!(run.usage, Some(spent(4)));
    // The dead attempt learns it lost the run.
    let error = journal.heartbeat("r2", "the-dead-token").await.unwrap_err();
    assert!(matches!(error, StoreError::RunOwned { .. }), "{error}");
}

/// A dropped kickoff's guard records the end from `Drop`, inside the runtime.
async fn the_blocking_finish_records_the_end_from_inside_a_runtime(fixture: Fixture) {
    let journal = fixture.journal().await;
    journal
        .start(&start("r1", RunOwner::this_process()))
        .await
        .unwrap();
    journal
        .finish_blocking(
            "r1",
            &RunEnd::stopped(RunStatus::Cancelled, "dropped", None),
        )
        .unwrap();
    let run = journal.load("r1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert!(run.owner.is_none());
    assert!(run.status.is_resumable());
}

/// Another host's processes cannot be seen: its owner is alive while it heartbeats.
async fn an_owner_on_another_host_counts_as_alive_while_its_heartbeat_is_fresh(fixture: Fixture) {
    let there = fixture.journal_on("host-a").await;
    let here = fixture.journal_on("host-b").await;
    // A pid that exists nowhere: on host-a's own view it would be dead.
    there.start(&start("r1", dead_owner())).await.unwrap();
    let error = here
        .start(&start("r1", RunOwner::this_process()))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::RunOwned { .. }), "{error}");
    // host-a itself sees its dead process and takes the run over.
    there
        .start(&start("r1", RunOwner::this_process()))
        .await
        .unwrap();
    // A stale heartbeat from another host is not alive either.
    let stale = RunOwner {
        heartbeat_at: Utc::now() - chrono::Duration::hours(1),
        ..RunOwner::this_process()
    };
    there.start(&start("r2", stale)).await.unwrap();
    here.start(&start("r2", RunOwner::this_process()))
        .await
        .unwrap();
}

async fn a_newer_journal_schema_is_refused(fixture: Fixture) {
    drop(fixture.journal().await);
    {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&fixture.location)
            .await
            .unwrap();
        sqlx::query("INSERT INTO crewai_journal_schema (version) VALUES (42)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let config = PgPoolConfig {
        call_timeout: Duration::from_secs(10),
        ..PgPoolConfig::default()
    };
    let pool = crewai_server::connect_pool(&fixture.location, &config).unwrap();
    let error = PgJournal::open(pool, "test", "this-host", config.call_timeout)
        .await
        .unwrap_err();
    let text = crewai_llm::error_chain(&error);
    assert!(text.contains("schema version 42"), "{text}");
}

type Test = fn(Fixture) -> BoxFuture<'static, ()>;

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|fixture| Box::pin($name(fixture))) as Test)),*]
    };
}

fn main() -> std::process::ExitCode {
    let postgres: Prerequisite = crewai_testkit::postgres::prerequisite();
    let both = tests![
        a_run_keeps_its_finished_tasks_and_ends_released,
        a_live_owner_keeps_its_run_and_a_dead_ones_run_is_taken_over,
        the_blocking_finish_records_the_end_from_inside_a_runtime,
    ];
    let postgres_only = tests![
        an_owner_on_another_host_counts_as_alive_while_its_heartbeat_is_fresh,
        a_newer_journal_schema_is_refused,
    ];
    let runs = both
        .into_iter()
        .flat_map(|test| [(Backend::Sqlite, test), (Backend::Postgres, test)])
        .chain(
            postgres_only
                .into_iter()
                .map(|test| (Backend::Postgres, test)),
        );
    let mut suite = Suite::new();
    for (backend, (name, test)) in runs {
        let needs = match backend {
            Backend::Sqlite => Vec::new(),
            Backend::Postgres => vec![&postgres],
        };
        let label = format!("{}::{name}", format!("{backend:?}").to_lowercase());
        suite = suite.test_needing(label, &needs, move || {
            crewai_testkit::prereq::block_on_multi_thread(2, async move {
                test(Fixture::new(backend).await).await
            })
        });
    }
    suite.run()
}
