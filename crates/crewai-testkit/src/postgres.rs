//! A PostgreSQL for tests (feature `postgres`): the server `.ci/postgres.sh` starts (its URL in
//! [`URL_VAR`]), and a fresh database in it per test so tests running at once never see each
//! other's rows.

use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::prereq::Prerequisite;

/// The test server's URL: `postgres://USER@127.0.0.1:PORT/postgres`.
pub const URL_VAR: &str = "CREWAI_TEST_POSTGRES_URL";

/// The command that provides the server.
pub const PROVIDED_BY: &str = "apt-get install postgresql, then `source .ci/postgres.sh && start_test_postgres` (.ci/run does)";

/// The server's URL, when [`URL_VAR`] is set.
pub fn server_url() -> Option<String> {
    std::env::var(URL_VAR)
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// The test PostgreSQL: [`URL_VAR`] set and its server accepting a connection.
pub fn prerequisite() -> Prerequisite {
    Prerequisite::new("a PostgreSQL server for the tests", PROVIDED_BY, || {
        let url = server_url().ok_or_else(|| format!("{URL_VAR} is not set"))?;
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| format!("{URL_VAR}={url} is not a Postgres URL: {e}"))?;
        crate::prereq::block_on(async {
            let connect = PgConnection::connect_with(&options);
            match tokio::time::timeout(Duration::from_secs(5), connect).await {
                Ok(Ok(connection)) => {
                    let _ = connection.close().await;
                    Ok(())
                }
                Ok(Err(e)) => Err(format!("cannot connect to {url}: {e}")),
                Err(_) => Err(format!("{url} did not answer within 5 s")),
            }
        })
    })
}

/// A new, empty database on the test server; returns its URL. Panics (failing the test) when
/// the server is not there: check [`prerequisite`] first.
pub async fn fresh_database() -> String {
    let url = server_url().unwrap_or_else(|| panic!("{URL_VAR} is not set: {PROVIDED_BY}"));
    let options: PgConnectOptions = url
        .parse()
        .unwrap_or_else(|e| panic!("{URL_VAR}={url}: {e}"));
    let mut admin = PgConnection::connect_with(&options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    let name = format!("crewai_test_{}", rand::random::<u64>());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
    let _ = admin.close().await;
    match url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => panic!("{URL_VAR}={url} has no database part"),
    }
}
