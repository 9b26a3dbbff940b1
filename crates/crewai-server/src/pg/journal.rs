//! [`RunJournal`] on PostgreSQL: the journal of the kickoffs' runs next to the queue, so a
//! kickoff re-claimed on any machine resumes where its dead worker's run stopped.
//!
//! A run's owner is named by host as well as process: an owner on this host is alive while its
//! process exists and its heartbeat is fresh (as in the SQLite journal); one on another host,
//! whose processes cannot be seen from here, while its heartbeat is fresher than
//! [`LEASE_TIMEOUT`]. A claim is a row lock (`FOR UPDATE`) followed by the owner's update, so of
//! two workers starting the same run one wins.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use crewai_core::crew::CrewPlan;
use crewai_core::store::{
    LEASE_TIMEOUT, RunEnd, RunJournal, RunOwner, RunParent, RunStart, RunStatus, StoreError,
    StoredRun, StoredTaskOutput,
};
use crewai_llm::Usage;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Connection as _, PgExecutor};

use super::{MigrateFailure, Schema, is_transient};

const SCHEMA: Schema = Schema {
    version_table: "crewai_journal_schema",
    lock: 0x6372_6577_6169_0002,
    migrations: &["
CREATE TABLE crewai_runs (
    run_id TEXT PRIMARY KEY,
    crew TEXT NOT NULL,
    inputs TEXT NOT NULL,
    task_keys TEXT NOT NULL,
    parent_run_id TEXT,
    fork_task_index BIGINT,
    status TEXT NOT NULL,
    output TEXT,
    error TEXT,
    usage TEXT,
    plan TEXT,
    owner_host TEXT,
    owner_pid BIGINT,
    owner_token TEXT,
    owner_since TEXT,
    owner_heartbeat TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE crewai_run_tasks (
    run_id TEXT NOT NULL REFERENCES crewai_runs (run_id),
    task_index BIGINT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, task_index)
);
"],
};

/// What went wrong in the journal's database, kept as the core error's source.
#[derive(Debug, thiserror::Error)]
enum JournalError {
    #[error("the run journal's database at {location} failed")]
    Database {
        location: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("the run journal's database at {location} did not answer within {timeout:?}")]
    TimedOut { location: String, timeout: Duration },
    #[error(
        "the run journal's database at {location} is at schema version {found}, newer than this build knows ({known}); upgrade crewai"
    )]
    SchemaTooNew {
        location: String,
        found: i64,
        known: i64,
    },
    #[error("run {run_id}: the journaled {what} is not valid")]
    Corrupt {
        run_id: String,
        what: &'static str,
        #[source]
        source: Option<serde_json::Error>,
    },
    #[error("run {run_id} is not in the journal")]
    UnknownRun { run_id: String },
    #[error("run {run_id} is not running (unknown or ended); there is no attempt to keep alive")]
    NotRunning { run_id: String },
    #[error("cannot {what} for the run journal")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("the run journal's closing write could not run")]
    Thread(#[source] std::io::Error),
}

impl From<JournalError> for StoreError {
    fn from(error: JournalError) -> Self {
        match error {
            JournalError::Corrupt { .. } => StoreError::Corrupt(Box::new(error)),
            other => StoreError::Backend(Box::new(other)),
        }
    }
}

/// The run journal in a PostgreSQL database (cheap to clone; clones share the pool).
#[derive(Clone)]
pub struct PgJournal {
    pool: PgPool,
    location: String,
    /// This process's host, recorded with the owners it claims runs for.
    host: String,
    call_timeout: Duration,
}

impl std::fmt::Debug for PgJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgJournal")
            .field("location", &self.location)
            .field("host", &self.host)
            .finish()
    }
}

fn to_json(what: &'static str, value: &impl Serialize) -> Result<String, JournalError> {
    serde_json::to_string(value).map_err(|source| JournalError::Encode { what, source })
}

fn from_json<T: DeserializeOwned>(
    run_id: &str,
    what: &'static str,
    text: &str,
) -> Result<T, JournalError> {
    serde_json::from_str(text).map_err(|source| JournalError::Corrupt {
        run_id: run_id.to_string(),
        what,
        source: Some(source),
    })
}

fn parse_time(run_id: &str, what: &'static str, text: &str) -> Result<DateTime<Utc>, JournalError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| JournalError::Corrupt {
            run_id: run_id.to_string(),
            what,
            source: None,
        })
}

/// The owner columns of a run: host, pid, token, since, heartbeat.
type OwnerRow = (
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn owner_of(run_id: &str, row: OwnerRow) -> Result<Option<(String, RunOwner)>, JournalError> {
    let (Some(host), Some(pid), Some(token), Some(since), Some(heartbeat)) = row else {
        return Ok(None);
    };
    let owner = RunOwner {
        pid: u32::try_from(pid).map_err(|_| JournalError::Corrupt {
            run_id: run_id.to_string(),
            what: "owner pid",
            source: None,
        })?,
        token,
        since: parse_time(run_id, "owner start", &since)?,
        heartbeat_at: parse_time(run_id, "owner heartbeat", &heartbeat)?,
    };
    Ok(Some((host, owner)))
}

const FINISH: &str =
    "UPDATE crewai_runs SET status = $2, output = $3, usage = COALESCE($4, usage), error = $5,
     finished_at = $6, owner_host = NULL, owner_pid = NULL, owner_token = NULL, owner_since = NULL,
     owner_heartbeat = NULL
 WHERE run_id = $1";

impl PgJournal {
    /// The journal in the database `pool` reaches, applying its migrations (a newer schema is
    /// refused). `host` names this machine in the owners it records (the queue's
    /// `WorkerIdentity::host`); `location` names the database in messages, without a password.
    pub async fn open(
        pool: PgPool,
        location: impl Into<String>,
        host: impl Into<String>,
        call_timeout: Duration,
    ) -> Result<PgJournal, StoreError> {
        let journal = PgJournal {
            pool,
            location: location.into(),
            host: host.into(),
            call_timeout,
        };
        journal
            .guarded(async {
                super::migrate(&journal.pool, &SCHEMA)
                    .await
                    .map_err(|failure| match failure {
                        MigrateFailure::Sql(source) => journal.sql(source),
                        MigrateFailure::TooNew { found, known } => JournalError::SchemaTooNew {
                            location: journal.location.clone(),
                            found,
                            known,
                        },
                    })
                    .map_err(StoreError::from)
            })
            .await?;
        Ok(journal)
    }

    fn sql(&self, source: sqlx::Error) -> JournalError {
        JournalError::Database {
            location: self.location.clone(),
            source,
        }
    }

    async fn guarded<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.call_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(JournalError::TimedOut {
                location: self.location.clone(),
                timeout: self.call_timeout,
            }
            .into()),
        }
    }

    /// Whether the recorded owner still runs the run.
    fn owner_alive(&self, host: &str, owner: &RunOwner) -> bool {
        let now = Utc::now();
        if host == self.host {
            return owner.is_alive(now);
        }
        chrono::Duration::from_std(LEASE_TIMEOUT)
            .is_ok_and(|timeout| now.signed_duration_since(owner.heartbeat_at) < timeout)
    }

    async fn owner_row<'e>(
        &self,
        executor: impl PgExecutor<'e>,
        run_id: &str,
        lock: bool,
    ) -> Result<Option<OwnerRow>, JournalError> {
        let sql = if lock {
            "SELECT owner_host, owner_pid, owner_token, owner_since, owner_heartbeat
             FROM crewai_runs WHERE run_id = $1 FOR UPDATE"
        } else {
            "SELECT owner_host, owner_pid, owner_token, owner_since, owner_heartbeat
             FROM crewai_runs WHERE run_id = $1"
        };
        sqlx::query_as(sql)
            .bind(run_id)
            .fetch_optional(executor)
            .await
            .map_err(|e| self.sql(e))
    }

    async fn save_task<'e>(
        &self,
        executor: impl PgExecutor<'e>,
        run_id: &str,
        task: &StoredTaskOutput,
    ) -> Result<(), JournalError> {
        sqlx::query(
            "INSERT INTO crewai_run_tasks (run_id, task_index, record) VALUES ($1, $2, $3)
             ON CONFLICT (run_id, task_index) DO UPDATE SET record = excluded.record",
        )
        .bind(run_id)
        .bind(i64::try_from(task.task_index).unwrap_or(i64::MAX))
        .bind(to_json("write a task's output", task)?)
        .execute(executor)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn start_now(&self, start: &RunStart) -> Result<(), StoreError> {
        let owner = &start.owner;
        let mut tx = self.pool.begin().await.map_err(|e| self.sql(e))?;
        let inserted = sqlx::query(
            "INSERT INTO crewai_runs (run_id, crew, inputs, task_keys, parent_run_id, fork_task_index, status,
                                      started_at, owner_host, owner_pid, owner_token, owner_since, owner_heartbeat)
             VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9, $10, $11, $12)
             ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(&start.run_id)
        .bind(&start.crew)
        .bind(to_json("write the run's inputs", &start.inputs)?)
        .bind(to_json("write the run's task keys", &start.task_keys)?)
        .bind(start.parent.as_ref().map(|p| p.run_id.clone()))
        .bind(
            start
                .parent
                .as_ref()
                .map(|p| i64::try_from(p.from_task_index).unwrap_or(i64::MAX)),
        )
        .bind(Utc::now().to_rfc3339())
        .bind(&self.host)
        .bind(i64::from(owner.pid))
        .bind(&owner.token)
        .bind(owner.since.to_rfc3339())
        .bind(owner.heartbeat_at.to_rfc3339())
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?
        .rows_affected();
        if inserted == 0 {
            // A run the journal has: claim it unless a live attempt holds it (the row stays
            // locked until the claim commits, so a concurrent claim waits and then sees ours).
            let row = self.owner_row(&mut *tx, &start.run_id, true).await?;
            let seen = match row {
                Some(row) => owner_of(&start.run_id, row)?,
                None => None,
            };
            if let Some((host, seen)) = seen
                && seen.token != owner.token
                && self.owner_alive(&host, &seen)
            {
                return Err(StoreError::RunOwned {
                    run_id: start.run_id.clone(),
                    owner: Box::new(seen),
                });
            }
            sqlx::query(
                "UPDATE crewai_runs SET status = 'running', error = NULL, finished_at = NULL,
                     owner_host = $2, owner_pid = $3, owner_token = $4, owner_since = $5, owner_heartbeat = $6
                 WHERE run_id = $1",
            )
            .bind(&start.run_id)
            .bind(&self.host)
            .bind(i64::from(owner.pid))
            .bind(&owner.token)
            .bind(owner.since.to_rfc3339())
            .bind(owner.heartbeat_at.to_rfc3339())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        }
        for task in &start.carried_over {
            self.save_task(&mut *tx, &start.run_id, task).await?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn heartbeat_now(&self, run_id: &str, token: &str) -> Result<(), StoreError> {
        let changed = sqlx::query(
            "UPDATE crewai_runs SET owner_heartbeat = $3 WHERE run_id = $1 AND owner_token = $2",
        )
        .bind(run_id)
        .bind(token)
        .bind(Utc::now().to_rfc3339())
        .execute(&self.pool)
        .await
        .map_err(|e| self.sql(e))?
        .rows_affected();
        if changed == 1 {
            return Ok(());
        }
        let owner = match self.owner_row(&self.pool, run_id, false).await? {
            Some(row) => owner_of(run_id, row)?,
            None => None,
        };
        Err(match owner {
            Some((_, other)) => StoreError::RunOwned {
                run_id: run_id.to_string(),
                owner: Box::new(other),
            },
            None => JournalError::NotRunning {
                run_id: run_id.to_string(),
            }
            .into(),
        })
    }

    async fn task_finished_now(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.sql(e))?;
        let known = sqlx::query("UPDATE crewai_runs SET usage = $2 WHERE run_id = $1")
            .bind(run_id)
            .bind(to_json("write the run's usage", usage)?)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        if known == 0 {
            return Err(JournalError::UnknownRun {
                run_id: run_id.to_string(),
            }
            .into());
        }
        self.save_task(&mut *tx, run_id, task).await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn plan_made_now(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let known = sqlx::query("UPDATE crewai_runs SET plan = $2, usage = $3 WHERE run_id = $1")
            .bind(run_id)
            .bind(to_json("write the run's plan", plan)?)
            .bind(to_json("write the run's usage", usage)?)
            .execute(&self.pool)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        if known == 0 {
            return Err(JournalError::UnknownRun {
                run_id: run_id.to_string(),
            }
            .into());
        }
        Ok(())
    }

    async fn finish_on<'e>(
        &self,
        executor: impl PgExecutor<'e>,
        run_id: &str,
        end: &RunEnd,
    ) -> Result<(), StoreError> {
        let usage = end
            .usage
            .map(|usage| to_json("write the run's usage", &usage))
            .transpose()?;
        let known = sqlx::query(FINISH)
            .bind(run_id)
            .bind(end.status.as_str())
            .bind(&end.output)
            .bind(usage)
            .bind(&end.error)
            .bind(Utc::now().to_rfc3339())
            .execute(executor)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        if known == 0 {
            return Err(JournalError::UnknownRun {
                run_id: run_id.to_string(),
            }
            .into());
        }
        Ok(())
    }

    async fn load_now(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        type Row = (
            String,
            String,
            String,
            Option<String>,
            Option<i64>,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            String,
            Option<String>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT crew, inputs, task_keys, parent_run_id, fork_task_index, status, output, error, usage, plan,
                    started_at, finished_at
             FROM crewai_runs WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        let Some((
            crew,
            inputs,
            task_keys,
            parent_run_id,
            fork_task_index,
            status,
            output,
            error,
            usage,
            plan,
            started_at,
            finished_at,
        )) = row
        else {
            return Ok(None);
        };
        let owner = match self.owner_row(&self.pool, run_id, false).await? {
            Some(row) => owner_of(run_id, row)?.map(|(_, owner)| owner),
            None => None,
        };
        let records: Vec<(String,)> = sqlx::query_as(
            "SELECT record FROM crewai_run_tasks WHERE run_id = $1 ORDER BY task_index",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        let mut tasks = BTreeMap::new();
        for (record,) in records {
            let task: StoredTaskOutput = from_json(run_id, "task output", &record)?;
            tasks.insert(task.task_index, task);
        }
        let parent = match (parent_run_id, fork_task_index) {
            (Some(run_id), Some(index)) => Some(RunParent {
                run_id,
                from_task_index: usize::try_from(index).unwrap_or(0),
            }),
            _ => None,
        };
        let status = RunStatus::parse(&status).ok_or_else(|| JournalError::Corrupt {
            run_id: run_id.to_string(),
            what: "status",
            source: None,
        })?;
        Ok(Some(StoredRun {
            run_id: run_id.to_string(),
            crew,
            inputs: from_json(run_id, "inputs", &inputs)?,
            task_keys: from_json(run_id, "task keys", &task_keys)?,
            parent,
            status,
            tasks,
            output,
            error,
            usage: usage
                .map(|text| from_json(run_id, "usage", &text))
                .transpose()?,
            plan: plan
                .map(|text| from_json(run_id, "plan", &text))
                .transpose()?,
            owner,
            started_at: parse_time(run_id, "start time", &started_at)?,
            finished_at: finished_at
                .map(|text| parse_time(run_id, "end time", &text))
                .transpose()?,
        }))
    }

    /// `finish` on a connection of its own, on a thread of its own with its own runtime: the
    /// pool's connections belong to the runtime that opened them, and the caller (a dropped
    /// kickoff's guard) may be on any thread, inside a runtime or not.
    fn finish_on_own_thread(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        let options = self.pool.connect_options();
        std::thread::scope(|scope| {
            let writer = std::thread::Builder::new()
                .name("crewai-journal-finish".into())
                .spawn_scoped(scope, || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| StoreError::from(JournalError::Thread(e)))?;
                    runtime.block_on(self.guarded(async {
                        let mut connection = PgConnection::connect_with(&options)
                            .await
                            .map_err(|e| self.sql(e))?;
                        let done = self.finish_on(&mut connection, run_id, end).await;
                        let _ = connection.close().await;
                        done
                    }))
                })
                .map_err(|e| StoreError::from(JournalError::Thread(e)))?;
            writer.join().unwrap_or_else(|_| {
                Err(StoreError::Backend(
                    "the run journal's closing write panicked".into(),
                ))
            })
        })
    }

    /// Whether `error` is the database being away for a moment (worth retrying the attempt).
    pub fn is_unavailable(error: &StoreError) -> bool {
        let StoreError::Backend(cause) = error else {
            return false;
        };
        match cause.downcast_ref::<JournalError>() {
            Some(JournalError::TimedOut { .. }) => true,
            Some(JournalError::Database { source, .. }) => is_transient(source),
            _ => false,
        }
    }
}

#[async_trait]
impl RunJournal for PgJournal {
    async fn start(&self, run: &RunStart) -> Result<(), StoreError> {
        self.guarded(self.start_now(run)).await
    }

    async fn heartbeat(&self, run_id: &str, owner_token: &str) -> Result<(), StoreError> {
        self.guarded(self.heartbeat_now(run_id, owner_token)).await
    }

    async fn task_finished(
        &self,
        run_id: &str,
        task: &StoredTaskOutput,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        self.guarded(self.task_finished_now(run_id, task, usage))
            .await
    }

    async fn plan_made(
        &self,
        run_id: &str,
        plan: &CrewPlan,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        self.guarded(self.plan_made_now(run_id, plan, usage)).await
    }

    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        self.guarded(self.finish_on(&self.pool, run_id, end)).await
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        self.guarded(self.load_now(run_id)).await
    }

    fn finish_blocking(&self, run_id: &str, end: &RunEnd) -> Result<(), StoreError> {
        self.finish_on_own_thread(run_id, end)
    }
}
