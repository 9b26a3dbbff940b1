//! The run journal (`runs`, `run_task_outputs`): claiming a run, its heartbeat, each finished
//! task, its end, and loading it back for a resume.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::Utc;
use crewai_core::crew::CrewPlan;
use crewai_core::store::{
    RunEnd, RunJournal, RunOwner, RunStart, RunStatus, StoreError as CoreStoreError, StoredRun,
    StoredTaskOutput,
};
use crewai_llm::Usage;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{StoreError, to_core};
use crate::runs::{RUN_COLUMNS, RunRow};
use crate::task_outputs::{TASK_COLUMNS, TaskColumns};
use crate::{Store, parse_time};

impl Store {
    /// Writes one finished task of a run (inside the caller's transaction).
    fn insert_run_task(
        &self,
        conn: &Connection,
        run_id: &str,
        record: &StoredTaskOutput,
    ) -> Result<(), StoreError> {
        let (output, inputs) = self.task_output_columns(record)?;
        conn.execute(
            "INSERT OR REPLACE INTO run_task_outputs
             (run_id, task_index, task_id, task_name, output, inputs, was_replayed, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run_id,
                record.task_index as i64,
                record.task_id,
                record.task_name,
                output,
                inputs,
                record.was_replayed,
                record.timestamp.to_rfc3339(),
            ],
        )
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records a run starting (or, for an id already stored, running again) and claims it for
    /// `start.owner`; fails with [`StoreError::RunOwned`] when another live attempt owns it.
    ///
    /// The claim is one compare-and-set: the upsert only replaces the owner it saw dead, so of
    /// two processes claiming at once exactly one changes the row.
    pub fn start_run(&self, start: &RunStart) -> Result<(), StoreError> {
        let inputs = self.to_json("inputs", &start.inputs)?;
        let keys = self.to_json("task keys", &start.task_keys)?;
        let mut conn = self.conn()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        let seen = self.owner_of(&tx, &start.run_id)?;
        if let Some(owner) = &seen
            && owner.token != start.owner.token
            && owner.is_alive(Utc::now())
        {
            return Err(self.owned(&start.run_id, owner.clone()));
        }
        let owner = &start.owner;
        let changed = tx
            .execute(
                "INSERT INTO runs (run_id, crew, inputs, status, task_keys, parent_run_id, fork_task_index, started_at,
                                   owner_pid, owner_token, owner_since, owner_heartbeat)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, error = NULL, finished_at = NULL,
                     owner_pid = excluded.owner_pid, owner_token = excluded.owner_token,
                     owner_since = excluded.owner_since, owner_heartbeat = excluded.owner_heartbeat
                 WHERE runs.owner_token IS ?13",
                params![
                    start.run_id,
                    start.crew,
                    inputs,
                    RunStatus::Running.as_str(),
                    keys,
                    start.parent.as_ref().map(|p| p.run_id.clone()),
                    start.parent.as_ref().map(|p| p.from_task_index as i64),
                    Utc::now().to_rfc3339(),
                    i64::from(owner.pid),
                    owner.token,
                    owner.since.to_rfc3339(),
                    owner.heartbeat_at.to_rfc3339(),
                    seen.as_ref().map(|seen| seen.token.clone()),
                ],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            // Claimed by someone else between our read and our write.
            return Err(match self.owner_of(&tx, &start.run_id)? {
                Some(winner) => self.owned(&start.run_id, winner),
                None => self.corrupt(format!("run {}: the claim changed no row", start.run_id)),
            });
        }
        for record in &start.carried_over {
            self.insert_run_task(&tx, &start.run_id, record)?;
        }
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(())
    }

    fn owned(&self, run_id: &str, owner: RunOwner) -> StoreError {
        StoreError::RunOwned(CoreStoreError::RunOwned {
            run_id: run_id.to_string(),
            owner: Box::new(owner),
        })
    }

    /// The recorded owner of a run (`None`: no such run, or it ended).
    pub(crate) fn owner_of(
        &self,
        conn: &Connection,
        run_id: &str,
    ) -> Result<Option<RunOwner>, StoreError> {
        let row = conn
            .query_row(
                "SELECT owner_pid, owner_token, owner_since, owner_heartbeat FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| {
                    Ok((
                        r.get::<_, Option<i64>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((Some(pid), Some(token), Some(since), Some(heartbeat))) = row else {
            return Ok(None);
        };
        let bad =
            |what: &str, value: &str| self.corrupt(format!("run {run_id}: owner {what} {value:?}"));
        Ok(Some(RunOwner {
            pid: u32::try_from(pid).map_err(|_| bad("pid", &pid.to_string()))?,
            token,
            since: parse_time(&since).ok_or_else(|| bad("since", &since))?,
            heartbeat_at: parse_time(&heartbeat).ok_or_else(|| bad("heartbeat", &heartbeat))?,
        }))
    }

    /// Records that the attempt holding `owner_token` is alive.
    pub fn heartbeat_run(&self, run_id: &str, owner_token: &str) -> Result<(), StoreError> {
        let conn = self.conn()?;
        let changed = conn
            .execute(
                "UPDATE runs SET owner_heartbeat = ?1 WHERE run_id = ?2 AND owner_token = ?3",
                params![Utc::now().to_rfc3339(), run_id, owner_token],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 1 {
            return Ok(());
        }
        Err(match self.owner_of(&conn, run_id)? {
            Some(other) => self.owned(run_id, other),
            None => self.corrupt(format!(
                "run {run_id} is not running (unknown or ended); there is no attempt to keep alive"
            )),
        })
    }

    /// Records one finished task of a started run, and what the run has used so far.
    pub fn record_run_task(
        &self,
        run_id: &str,
        record: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let usage = self.to_json("usage", usage)?;
        let mut conn = self.conn()?;
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        let known = tx
            .execute(
                "UPDATE runs SET token_usage = ?1 WHERE run_id = ?2",
                params![usage, run_id],
            )
            .map_err(|e| self.sql(e))?;
        if known == 0 {
            return Err(self.corrupt(format!("no run with id {run_id}")));
        }
        self.insert_run_task(&tx, run_id, record)?;
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records the crew planner's answer for a started run, and what the run has used so far.
    pub fn record_run_plan(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let plan = self.to_json("plan", plan)?;
        let usage = self.to_json("usage", usage)?;
        let changed = self
            .conn()?
            .execute(
                "UPDATE runs SET plan = ?1, token_usage = ?2 WHERE run_id = ?3",
                params![plan, usage, run_id],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            return Err(self.corrupt(format!("no run with id {run_id}")));
        }
        Ok(())
    }

    /// The journaled plan of a run, if it has one.
    fn run_plan(&self, conn: &Connection, run_id: &str) -> Result<Option<CrewPlan>, StoreError> {
        let text: Option<String> = conn
            .query_row(
                "SELECT plan FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))?;
        text.map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| self.corrupt_json(format!("run {run_id}: its journaled plan"), e))
        })
        .transpose()
    }

    /// Records how a run ended and releases its owner; an end without usage keeps the usage its
    /// tasks journaled.
    pub fn finish_run(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        let usage = end
            .usage
            .map(|usage| self.to_json("usage", &usage))
            .transpose()?;
        let changed = self
            .conn()?
            .execute(
                "UPDATE runs SET status = ?1, output = ?2, token_usage = COALESCE(?3, token_usage), error = ?4,
                     finished_at = ?5, owner_pid = NULL, owner_token = NULL, owner_since = NULL,
                     owner_heartbeat = NULL
                 WHERE run_id = ?6",
                params![end.status.as_str(), end.output, usage, end.error, Utc::now().to_rfc3339(), run_id],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            return Err(self.corrupt(format!("no run with id {run_id}")));
        }
        Ok(())
    }

    /// The run with this id and its finished tasks.
    pub fn load_run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        let conn = self.conn()?;
        let row = conn
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
                params![run_id],
                RunRow::read,
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner = self.owner_of(&conn, run_id)?;
        let plan = self.run_plan(&conn, run_id)?;
        let sql = format!(
            "SELECT {TASK_COLUMNS}, finished_at AS at FROM run_task_outputs
             WHERE run_id = ?1 ORDER BY task_index"
        );
        let place = format!("run {}: ", row.shown_id());
        let mut finished = BTreeMap::new();
        for columns in self.select(&conn, &sql, params![run_id], TaskColumns::read)? {
            let task = self.stored_task(columns, &place)?;
            finished.insert(task.task_index, task);
        }
        Ok(Some(StoredRun {
            run_id: run_id.to_string(),
            crew: row.crew.clone(),
            inputs: self.parse_json(&row, "inputs", &row.inputs)?,
            task_keys: self.parse_task_keys(&row)?,
            parent: row.parent(),
            status: self.parse_status(&row)?,
            tasks: finished,
            output: row.output.clone(),
            error: row.error.clone(),
            usage: row
                .usage
                .as_deref()
                .map(|usage| self.parse_json::<Usage>(&row, "token_usage", usage))
                .transpose()?,
            plan,
            owner,
            started_at: self.parse_started(&row)?,
            finished_at: row.finished_at.as_deref().and_then(parse_time),
        }))
    }
}

/// Each call but [`RunJournal::finish_blocking`] runs on tokio's blocking pool, so SQLite never
/// holds up a runtime worker; the work is copied in, as the pool needs `'static` closures.
#[async_trait]
impl RunJournal for Store {
    async fn start(&self, run: &RunStart) -> Result<(), CoreStoreError> {
        let run = run.clone();
        self.for_engine(move |store| store.start_run(&run)).await
    }

    async fn heartbeat(&self, run_id: &str, owner_token: &str) -> Result<(), CoreStoreError> {
        let (run_id, owner_token) = (run_id.to_string(), owner_token.to_string());
        self.for_engine(move |store| store.heartbeat_run(&run_id, &owner_token))
            .await
    }

    async fn task_finished(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), CoreStoreError> {
        let (run_id, task, usage) = (run_id.to_string(), task.clone(), *usage);
        self.for_engine(move |store| store.record_run_task(&run_id, &task, &usage))
            .await
    }

    async fn plan_made(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), CoreStoreError> {
        let (run_id, plan, usage) = (run_id.to_string(), plan.clone(), *usage);
        self.for_engine(move |store| store.record_run_plan(&run_id, &plan, &usage))
            .await
    }

    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), CoreStoreError> {
        let (run_id, end) = (run_id.to_string(), end.clone());
        self.for_engine(move |store| store.finish_run(&run_id, &end))
            .await
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, CoreStoreError> {
        let run_id = run_id.to_string();
        self.for_engine(move |store| store.load_run(&run_id)).await
    }

    /// One `UPDATE` on the calling thread: the trait's documented exception, for a dropped
    /// kickoff's guard.
    fn finish_blocking(&self, run_id: &str, end: &RunEnd) -> Result<(), CoreStoreError> {
        self.finish_run(run_id, end).map_err(to_core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{dead_owner, record, spent, start};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A write that has to wait for another process's lock waits on the blocking pool: the
    /// runtime's only worker thread goes on running other tasks meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_write_waiting_for_the_lock_leaves_the_runtime_free() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let path = store.path().unwrap().to_path_buf();
        let (locked, lock_taken) = std::sync::mpsc::channel();
        // Another process holds the write lock for a while (within the 5 s busy timeout).
        let holder = std::thread::spawn(move || {
            let other = Connection::open(&path).unwrap();
            other.execute_batch("BEGIN IMMEDIATE").unwrap();
            locked.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(600));
            other.execute_batch("COMMIT").unwrap();
        });
        lock_taken.recv().unwrap();
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    ticks.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let journal: Arc<dyn RunJournal> = Arc::new(store.clone());
        journal.start(&start("r", Vec::new())).await.unwrap();
        ticker.abort();
        holder.join().unwrap();
        let ticked = ticks.load(Ordering::SeqCst);
        assert!(
            ticked >= 5,
            "the runtime ran only {ticked} ticks while the write waited for the lock"
        );
        assert_eq!(
            journal.load("r").await.unwrap().unwrap().status,
            RunStatus::Running
        );
    }

    #[tokio::test]
    async fn a_plan_is_journaled_with_the_run_and_read_back() {
        use crewai_core::crew::TaskPlan;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let journal: Arc<dyn RunJournal> = Arc::new(store.clone());
        journal.start(&start("r", Vec::new())).await.unwrap();
        assert_eq!(journal.load("r").await.unwrap().unwrap().plan, None);
        let plan = CrewPlan {
            list_of_plans_per_task: vec![TaskPlan {
                task_number: 1,
                task: "research".into(),
                plan: "Look it up.".into(),
            }],
        };
        journal.plan_made("r", &plan, &spent(4)).await.unwrap();
        assert!(journal.plan_made("nope", &plan, &spent(4)).await.is_err());
        drop((journal, store));
        let run = Store::open_project(dir.path())
            .unwrap()
            .load_run("r")
            .unwrap()
            .unwrap();
        assert_eq!(run.plan, Some(plan));
        assert_eq!(
            run.usage.unwrap().total_tokens,
            4,
            "the planner's spending counts"
        );
    }

    #[test]
    fn the_blocking_finish_records_the_end_at_once() {
        let store = Store::in_memory().unwrap();
        store.start_run(&start("r", Vec::new())).unwrap();
        let end = RunEnd::stopped(RunStatus::Cancelled, "dropped", Some(spent(3)));
        RunJournal::finish_blocking(&store, "r", &end).unwrap();
        let run = store.load_run("r").unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Cancelled);
        assert_eq!(run.owner, None);
        assert_eq!(run.usage.unwrap().total_tokens, 3);
        assert!(RunJournal::finish_blocking(&store, "missing", &end).is_err());
    }

    #[tokio::test]
    async fn the_journal_survives_reopening_the_file_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let mode: String = store
            .conn()
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let journal: Arc<dyn RunJournal> = Arc::new(store.clone());
        journal
            .start(&start("r1", vec![record(0, "a", "first")]))
            .await
            .unwrap();
        // Out of order: the async task 2 finished before task 1.
        journal
            .task_finished("r1", &record(2, "c", "third"), &spent(5))
            .await
            .unwrap();
        assert!(
            journal
                .task_finished("nope", &record(1, "b", "x"), &spent(5))
                .await
                .is_err()
        );
        drop((journal, store));

        let reopened = Store::open_project(dir.path()).unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.inputs["topic"], "AI");
        assert_eq!(run.task_keys, ["task0", "task1", "task2"]);
        assert_eq!(run.tasks.keys().copied().collect::<Vec<_>>(), [0, 2]);
        assert_eq!(run.tasks[&2].output.raw, "third");
        assert_eq!(run.tasks[&0].task_name.as_deref(), Some("task0"));
        assert_eq!(
            run.usage.unwrap().total_tokens,
            5,
            "journaled with the task"
        );
        assert_eq!(run.owner.unwrap().pid, std::process::id());

        let usage = spent(7);
        reopened
            .finish_run(
                "r1",
                &RunEnd::stopped(RunStatus::BudgetStopped, "over budget", Some(usage)),
            )
            .unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.owner, None, "an ended run is released");
        // A resume marks it running again and keeps what finished.
        reopened.start_run(&start("r1", Vec::new())).unwrap();
        reopened
            .record_run_task("r1", &record(1, "b", "second"), &usage)
            .unwrap();
        reopened
            .finish_run("r1", &RunEnd::completed("third", usage))
            .unwrap();
        let run = reopened.load_run("r1").unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.error, None);
        assert_eq!(run.tasks.len(), 3);
        assert_eq!(run.usage.unwrap().total_tokens, 7);
        assert!(reopened.load_run("other").unwrap().is_none());
        assert!(
            reopened
                .finish_run("other", &RunEnd::completed("x", usage))
                .is_err()
        );
    }

    #[test]
    fn a_run_is_claimed_by_one_live_attempt_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        let first = start("r", Vec::new());
        store.start_run(&first).unwrap();
        store
            .record_run_task("r", &record(0, "a", "x"), &spent(30))
            .unwrap();

        // Another process's resume while this one is alive and heartbeating.
        let other = Store::open_project(dir.path()).unwrap();
        let refused = other.start_run(&start("r", Vec::new())).unwrap_err();
        let message = refused.to_string();
        assert!(matches!(refused, StoreError::RunOwned(_)), "{message}");
        assert!(
            message.contains(&format!(
                "run r is still running in process {}",
                std::process::id()
            )),
            "{message}"
        );
        store.heartbeat_run("r", &first.owner.token).unwrap();
        let run = other.load_run("r").unwrap().unwrap();
        assert_eq!(run.owner.as_ref().unwrap().token, first.owner.token);
        assert_eq!(
            run.usage.unwrap().total_tokens,
            30,
            "the refusal changed nothing"
        );
    }

    #[test]
    fn a_run_whose_owner_is_gone_or_stale_is_claimed_and_the_old_owner_learns_it() {
        let store = Store::in_memory().unwrap();
        let killed = RunStart {
            owner: dead_owner(),
            ..start("r", Vec::new())
        };
        store.start_run(&killed).unwrap();
        let resume = start("r", Vec::new());
        store.start_run(&resume).unwrap();
        assert_eq!(
            store.load_run("r").unwrap().unwrap().owner.unwrap().token,
            resume.owner.token
        );
        // The old attempt, were it still going, finds the run taken over.
        let taken = store.heartbeat_run("r", &killed.owner.token).unwrap_err();
        assert!(matches!(taken, StoreError::RunOwned(_)), "{taken}");

        // A live pid with a heartbeat older than the lease (a pid reused after a reboot).
        let stale = RunOwner {
            heartbeat_at: Utc::now()
                - chrono::Duration::from_std(crewai_core::store::LEASE_TIMEOUT).unwrap(),
            ..RunOwner::this_process()
        };
        store
            .start_run(&RunStart {
                owner: stale,
                ..start("s", Vec::new())
            })
            .unwrap();
        store.start_run(&start("s", Vec::new())).unwrap();
        assert!(
            store
                .heartbeat_run("ended", "token")
                .unwrap_err()
                .to_string()
                .contains("not running")
        );
    }

    #[test]
    fn of_concurrent_claims_exactly_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_project(dir.path()).unwrap();
        store
            .start_run(&RunStart {
                owner: dead_owner(),
                ..start("r", Vec::new())
            })
            .unwrap();
        let path = store.path().unwrap().to_path_buf();
        let barrier = std::sync::Barrier::new(8);
        let won = std::thread::scope(|scope| {
            let claims: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let mine = Store::open(&path).unwrap();
                        barrier.wait();
                        mine.start_run(&start("r", Vec::new()))
                    })
                })
                .collect();
            claims
                .into_iter()
                .map(|claim| claim.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(
            won.iter().filter(|claim| claim.is_ok()).count(),
            1,
            "{won:?}"
        );
        assert!(
            won.iter()
                .filter_map(|claim| claim.as_ref().err())
                .all(|error| matches!(error, StoreError::RunOwned(_)))
        );
    }
}
