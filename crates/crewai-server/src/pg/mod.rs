//! The PostgreSQL side of the server (feature `postgres`): one pool per process, shared by the
//! kickoff queue ([`PgQueue`]) and the run journal ([`PgJournal`]), so a worker on
//! `--database postgres://…` keeps both in the one database every other process shares.
//! Each keeps its own schema version, migrated at open under an advisory lock (every process
//! applies them at start, so two starting at once must not both apply one).

mod journal;
mod queue;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::error::QueueError;

pub use journal::PgJournal;
pub use queue::PgQueue;

/// How the connection pool behaves.
#[derive(Debug, Clone, Copy)]
pub struct PgPoolConfig {
    pub max_connections: u32,
    /// How long a call waits for a connection (the database down answers 503 after this).
    pub acquire_timeout: Duration,
    /// The longest one call may take, connection included.
    pub call_timeout: Duration,
}

impl Default for PgPoolConfig {
    fn default() -> Self {
        PgPoolConfig {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// A pool for `url` that connects when first used (so a process starts while the database is
/// briefly away, and reconnects after it comes back). Shared by the queue and the run journal.
pub fn connect_pool(url: &str, config: &PgPoolConfig) -> Result<PgPool, QueueError> {
    let options = PgConnectOptions::from_str(url).map_err(|source| QueueError::Database {
        location: crate::redact_url(url),
        source: Box::new(source),
    })?;
    let statement_timeout = format!("{}ms", config.call_timeout.as_millis());
    let options = options
        .application_name("crewai")
        .options([("statement_timeout", statement_timeout.as_str())]);
    Ok(PgPoolOptions::new()
        .max_connections(config.max_connections.max(1))
        .acquire_timeout(config.acquire_timeout)
        .connect_lazy_with(options))
}

/// Connection failures, timeouts and the server going away are worth retrying (503); a query
/// the database refuses is not.
pub(crate) fn classify(location: &str, source: sqlx::Error) -> QueueError {
    let transient = is_transient(&source);
    let location = location.to_string();
    let source = Box::new(source);
    if transient {
        QueueError::Unavailable { location, source }
    } else {
        QueueError::Database { location, source }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the call took longer than {0:?}")]
pub(crate) struct CallTimedOut(pub Duration);

/// A database error worth retrying: the connection failed or timed out, or the server is going
/// away or starting.
pub(crate) fn is_transient(source: &sqlx::Error) -> bool {
    match source {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(error) => error.code().is_some_and(|code| {
            // 08: connection exception; 57P: the server shutting down or starting;
            // 53300: too many connections; 40001/40P01: serialization failure, deadlock.
            code.starts_with("08")
                || code.starts_with("57P")
                || matches!(code.as_ref(), "53300" | "40001" | "40P01")
        }),
        _ => false,
    }
}

/// One component's tables and their versions.
pub(crate) struct Schema {
    /// The table recording the versions applied.
    pub version_table: &'static str,
    /// The advisory lock taken while migrating (any constant no other application uses).
    pub lock: i64,
    /// Applied in order; version N is `migrations[N - 1]`.
    pub migrations: &'static [&'static str],
}

/// Why a schema could not be brought to this build's version.
#[derive(Debug)]
pub(crate) enum MigrateFailure {
    Sql(sqlx::Error),
    TooNew { found: i64, known: i64 },
}

impl From<sqlx::Error> for MigrateFailure {
    fn from(error: sqlx::Error) -> Self {
        MigrateFailure::Sql(error)
    }
}

/// Applies the migrations of `schema` the database lacks, in one transaction; a database at a
/// newer version than this build knows is refused.
pub(crate) async fn migrate(pool: &PgPool, schema: &Schema) -> Result<(), MigrateFailure> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(schema.lock)
        .execute(&mut *tx)
        .await?;
    let table = schema.version_table;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version BIGINT NOT NULL)"
    )))
    .execute(&mut *tx)
    .await?;
    let (applied,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT COALESCE(MAX(version), 0)::bigint FROM {table}"
    )))
    .fetch_one(&mut *tx)
    .await?;
    let known = i64::try_from(schema.migrations.len()).unwrap_or(i64::MAX);
    if applied > known {
        return Err(MigrateFailure::TooNew {
            found: applied,
            known,
        });
    }
    let record = format!("INSERT INTO {table} (version) VALUES ($1)");
    for (version, migration) in (1..)
        .zip(schema.migrations)
        .skip_while(|(v, _)| *v <= applied)
    {
        sqlx::raw_sql(*migration).execute(&mut *tx).await?;
        sqlx::query(sqlx::AssertSqlSafe(record.clone()))
            .bind(version)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}
