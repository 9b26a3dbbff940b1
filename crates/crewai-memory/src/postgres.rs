//! [`PgMemoryStore`] (feature `postgres`): memory in a PostgreSQL database with pgvector, so
//! every `crewai serve` and `crewai worker` sharing the database shares memory too.
//!
//! The tables follow the SQLite store's design: `memory_collections` (name, model, dimensions)
//! and `memory_records` (id, collection, content, scope, categories, metadata, importance,
//! timestamps, source, private, embedding), plus a generated `tsvector` of the content for text
//! search. Every [`RecordFilter`] becomes part of the statement's `WHERE`, with every value a
//! bound parameter; vector search is `ORDER BY embedding <=> $1` (pgvector's cosine distance)
//! over the rows that filter admits, so it is exact and a scope's own records are always the
//! ones ranked. The schema is versioned: migrations are applied at open, in one transaction under
//! an advisory lock (processes starting at once never both apply one), and a database migrated
//! by a newer build is refused.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pgvector::Vector;
use serde_json::{Map, Value};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Postgres, Row};

use crate::error::MemoryError;
use crate::record::{CollectionInfo, MemoryRecord, RecordFilter, ScopeCount, ScopePath};
use crate::store::{MemoryStore, VectorHit};

/// The table recording which migrations were applied.
const VERSION_TABLE: &str = "crewai_memory_schema";
/// The advisory lock held while migrating (`crewai_m` in ASCII; the server's queue and journal
/// use other keys).
const MIGRATION_LOCK: i64 = 0x6372_6577_6169_5f6d;

/// Applied in order; version N is `MIGRATIONS[N - 1]`. Never edit one that shipped: add one.
const MIGRATIONS: &[&str] = &["
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE memory_collections (
    name TEXT COLLATE \"C\" PRIMARY KEY,
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE memory_records (
    seq BIGSERIAL NOT NULL UNIQUE,
    id TEXT PRIMARY KEY,
    collection TEXT COLLATE \"C\" NOT NULL,
    content TEXT NOT NULL,
    scope TEXT COLLATE \"C\" NOT NULL,
    categories TEXT[] NOT NULL,
    metadata JSONB NOT NULL,
    importance DOUBLE PRECISION NOT NULL,
    -- Microseconds since the Unix epoch (the SQLite store keeps microseconds too).
    created_at BIGINT NOT NULL,
    last_accessed BIGINT NOT NULL,
    source TEXT,
    private BOOLEAN NOT NULL,
    embedding vector NOT NULL,
    content_words tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);
CREATE INDEX memory_records_by_scope ON memory_records (collection, scope);
CREATE INDEX memory_records_by_time ON memory_records (collection, created_at DESC, seq DESC);
CREATE INDEX memory_records_words ON memory_records USING GIN (content_words);
CREATE INDEX memory_records_categories ON memory_records USING GIN (categories);
"];

/// The record columns every read selects, in [`PgMemoryStore::read_record`]'s order (`m` is
/// the table's alias).
const RECORD_COLUMNS: &str = "m.id, m.content, m.scope, m.categories, m.metadata::text, \
     m.importance, m.created_at, m.last_accessed, m.source, m.private, m.embedding";
/// The same without the vector (listings).
const LISTED_COLUMNS: &str = "m.id, m.content, m.scope, m.categories, m.metadata::text, \
     m.importance, m.created_at, m.last_accessed, m.source, m.private, NULL::vector AS embedding";

/// The most words of a text search's query that are matched.
const MAX_QUERY_WORDS: usize = 64;

/// How the store's connection pool behaves.
#[derive(Debug, Clone, Copy)]
pub struct PgMemoryConfig {
    pub max_connections: u32,
    /// How long a call waits for a connection (the database being down fails after this).
    pub acquire_timeout: Duration,
    /// The longest one statement may run (the server's `statement_timeout`).
    pub statement_timeout: Duration,
}

impl Default for PgMemoryConfig {
    fn default() -> Self {
        PgMemoryConfig {
            max_connections: 8,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
        }
    }
}

/// Memory in PostgreSQL with pgvector. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PgMemoryStore {
    pool: PgPool,
    /// Where the database is, without credentials (for errors).
    location: String,
}

impl std::fmt::Debug for PgMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemoryStore")
            .field("location", &self.location)
            .finish()
    }
}

/// `host:port/database` of a connection's options: the URL without its user and password.
fn location_of(options: &PgConnectOptions) -> String {
    format!(
        "postgres://{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

/// Connection failures, timeouts and the server going away or starting are worth retrying; a
/// statement the database refuses is not.
fn classify(location: &str, source: sqlx::Error) -> MemoryError {
    let transient = match &source {
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
    };
    let location = location.to_string();
    if transient {
        MemoryError::PostgresUnavailable { location, source }
    } else {
        MemoryError::Postgres { location, source }
    }
}

impl PgMemoryStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`) with
    /// [`PgMemoryConfig::default`] and brings its memory tables to this build's version.
    pub async fn connect(url: &str) -> Result<Self, MemoryError> {
        Self::connect_with(url, &PgMemoryConfig::default()).await
    }

    /// [`connect`](Self::connect) with a pool configured by `config`. A database that does not
    /// answer fails after `config.acquire_timeout`.
    pub async fn connect_with(url: &str, config: &PgMemoryConfig) -> Result<Self, MemoryError> {
        let options = PgConnectOptions::from_str(url).map_err(|source| MemoryError::Postgres {
            location: "(the memory database URL)".to_string(),
            source,
        })?;
        let location = location_of(&options);
        let statement_timeout = format!("{}ms", config.statement_timeout.as_millis());
        let options = options
            .application_name("crewai-memory")
            .options([("statement_timeout", statement_timeout.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections.max(1))
            .acquire_timeout(config.acquire_timeout)
            .connect_lazy_with(options);
        Self::with_pool(pool, location).await
    }

    /// The store on an existing pool (one a process shares with its queue and journal);
    /// `location` names the database in errors and must hold no password. Migrates as
    /// [`connect`](Self::connect) does.
    pub async fn with_pool(pool: PgPool, location: impl Into<String>) -> Result<Self, MemoryError> {
        let store = PgMemoryStore {
            pool,
            location: location.into(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Where the database is (its URL without user and password).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The schema version this build writes.
    pub fn schema_version() -> i64 {
        i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
    }

    fn sql(&self, source: sqlx::Error) -> MemoryError {
        classify(&self.location, source)
    }

    fn corrupt(&self, message: String) -> MemoryError {
        MemoryError::PostgresCorrupt {
            location: self.location.clone(),
            message,
        }
    }

    /// Applies the migrations the database lacks, in one transaction under the advisory lock.
    async fn migrate(&self) -> Result<(), MemoryError> {
        let sql = |e| self.sql(e);
        let mut tx = self.pool.begin().await.map_err(sql)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)"
        )))
        .execute(&mut *tx)
        .await
        .map_err(sql)?;
        let (applied,): (i64,) = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT COALESCE(MAX(version), 0)::bigint FROM {VERSION_TABLE}"
        )))
        .fetch_one(&mut *tx)
        .await
        .map_err(sql)?;
        let known = Self::schema_version();
        if applied > known {
            return Err(MemoryError::SchemaTooNew {
                location: self.location.clone(),
                found: applied,
                known,
            });
        }
        for (version, migration) in (1..).zip(MIGRATIONS).skip_while(|(v, _)| *v <= applied) {
            sqlx::raw_sql(AssertSqlSafe(*migration))
                .execute(&mut *tx)
                .await
                .map_err(sql)?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {VERSION_TABLE} (version) VALUES ($1)"
            )))
            .bind(version)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        }
        tx.commit().await.map_err(sql)
    }

    /// One record from a row of [`RECORD_COLUMNS`] (or [`LISTED_COLUMNS`]).
    fn read_record(&self, row: &PgRow) -> Result<MemoryRecord, MemoryError> {
        let id: String = row.try_get(0).map_err(|e| self.sql(e))?;
        let field =
            |what: &str, e: sqlx::Error| self.corrupt(format!("record {id:?}: {what}: {e}"));
        let scope: String = row.try_get(2).map_err(|e| field("scope", e))?;
        let scope = ScopePath::parse(&scope)
            .map_err(|e| self.corrupt(format!("record {id:?}: scope: {e}")))?;
        let metadata: String = row.try_get(4).map_err(|e| field("metadata", e))?;
        let metadata: Map<String, Value> = serde_json::from_str(&metadata)
            .map_err(|e| self.corrupt(format!("record {id:?}: metadata: {e}")))?;
        let time = |at: usize, what: &str| {
            let micros: i64 = row.try_get(at).map_err(|e| field(what, e))?;
            DateTime::from_timestamp_micros(micros).ok_or_else(|| {
                self.corrupt(format!("record {id:?}: {what}: {micros} is out of range"))
            })
        };
        let embedding: Option<Vector> = row.try_get(10).map_err(|e| field("embedding", e))?;
        Ok(MemoryRecord {
            content: row.try_get(1).map_err(|e| field("content", e))?,
            scope,
            categories: row.try_get(3).map_err(|e| field("categories", e))?,
            metadata,
            importance: row.try_get(5).map_err(|e| field("importance", e))?,
            created_at: time(6, "created_at")?,
            last_accessed: time(7, "last_accessed")?,
            source: row.try_get(8).map_err(|e| field("source", e))?,
            private: row.try_get(9).map_err(|e| field("private", e))?,
            embedding: embedding.map(|v| v.to_vec()).unwrap_or_default(),
            id,
        })
    }

    /// The rows `query` selects, read as records.
    async fn records(&self, statement: Statement) -> Result<Vec<MemoryRecord>, MemoryError> {
        let rows = statement
            .query()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.sql(e))?;
        rows.iter().map(|row| self.read_record(row)).collect()
    }

    /// The collection's model and size, read through `executor`.
    async fn read_collection<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
        name: &str,
    ) -> Result<Option<CollectionInfo>, MemoryError> {
        let row: Option<(String, String, i32)> = sqlx::query_as(
            "SELECT name, model, dimensions FROM memory_collections WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(executor)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row.map(|(name, model, dimensions)| CollectionInfo {
            name,
            model,
            dimensions: usize::try_from(dimensions).unwrap_or(0),
        }))
    }

    /// Refuses `records` unless `collection` was opened with their vectors' size.
    async fn check_dimensions(
        &self,
        tx: &mut sqlx::PgConnection,
        collection: &str,
        records: &[MemoryRecord],
    ) -> Result<(), MemoryError> {
        let info = self.read_collection(tx, collection).await?;
        CollectionInfo::check_records(info.as_ref(), collection, records)
    }
}

/// One bound value of a statement built at run time.
enum Arg {
    Text(String),
    OptionalText(Option<String>),
    Texts(Vec<String>),
    Time(DateTime<Utc>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Json(Value),
    Vector(Vector),
}

/// A statement and its bound values, each written into the text as `$N`.
#[derive(Default)]
struct Statement {
    text: String,
    args: Vec<Arg>,
}

impl Statement {
    /// Adds `value` and returns its placeholder.
    fn bind(&mut self, value: Arg) -> String {
        self.args.push(value);
        format!("${}", self.args.len())
    }

    fn query(self) -> Query<'static, Postgres, PgArguments> {
        let mut query = sqlx::query(AssertSqlSafe(self.text));
        for arg in self.args {
            query = match arg {
                Arg::Text(v) => query.bind(v),
                Arg::OptionalText(v) => query.bind(v),
                Arg::Texts(v) => query.bind(v),
                Arg::Time(v) => query.bind(v.timestamp_micros()),
                Arg::Int(v) => query.bind(v),
                Arg::Float(v) => query.bind(v),
                Arg::Bool(v) => query.bind(v),
                Arg::Json(v) => query.bind(v.to_string()),
                Arg::Vector(v) => query.bind(v),
            };
        }
        query
    }

    /// The `WHERE` conditions for `collection` and `filter` on the table aliased `m` (the
    /// SQLite store's rule). The scope test compares whole strings in byte order (the column's
    /// collation is `C`), never `LIKE`, so no character in a scope has a meaning in SQL.
    fn filter(&mut self, collection: &str, filter: &RecordFilter) -> String {
        let mut conditions = vec![format!(
            "m.collection = {}",
            self.bind(Arg::Text(collection.to_string()))
        )];
        if !filter.scope.is_root() {
            // Every path below `/a` lies in ["/a/", "/a0"): `0` follows `/` in byte order. A
            // range the (collection, scope) index can seek.
            let scope = self.bind(Arg::Text(filter.scope.to_string()));
            let below = self.bind(Arg::Text(format!("{}/", filter.scope)));
            let after = self.bind(Arg::Text(format!("{}0", filter.scope)));
            conditions.push(format!(
                "(m.scope = {scope} OR (m.scope >= {below} AND m.scope < {after}))"
            ));
        }
        if !filter.categories.is_empty() {
            let categories = self.bind(Arg::Texts(filter.categories.clone()));
            conditions.push(format!("m.categories && {categories}::text[]"));
        }
        match (&filter.source, filter.include_private) {
            (Some(source), _) => {
                // Its own private records are visible to a source.
                let source = self.bind(Arg::Text(source.clone()));
                conditions.push(format!("m.source = {source}"));
            }
            (None, true) => {}
            (None, false) => conditions.push("NOT m.private".to_string()),
        }
        if let Some(after) = filter.created_after {
            let after = self.bind(Arg::Time(after));
            conditions.push(format!("m.created_at >= {after}"));
        }
        conditions.join(" AND ")
    }
}

/// `query`'s words (letters and digits), at most [`MAX_QUERY_WORDS`]: everything else in it,
/// operators and quotes included, only separates words.
fn query_words(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(MAX_QUERY_WORDS)
        .map(str::to_string)
        .collect()
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_usize(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

#[async_trait]
impl MemoryStore for PgMemoryStore {
    async fn open_collection(
        &self,
        collection: &str,
        model: &str,
        dimensions: usize,
    ) -> Result<CollectionInfo, MemoryError> {
        let stored_dimensions =
            i32::try_from(dimensions).map_err(|_| MemoryError::InvalidInput {
                field: "dimensions",
                reason: format!("{dimensions} is too large for a vector"),
            })?;
        // Two processes opening a new collection at once: one row wins, both read it.
        sqlx::query(
            "INSERT INTO memory_collections (name, model, dimensions) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(collection)
        .bind(model)
        .bind(stored_dimensions)
        .execute(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        let info = self
            .read_collection(&self.pool, collection)
            .await?
            .ok_or_else(|| {
                self.corrupt(format!("collection {collection:?} vanished while opened"))
            })?;
        if info.dimensions != dimensions {
            return Err(MemoryError::DimensionMismatch {
                collection: collection.to_string(),
                stored: info.dimensions,
                stored_model: info.model,
                found: dimensions,
                model: model.to_string(),
            });
        }
        Ok(info)
    }

    async fn collection(&self, collection: &str) -> Result<Option<CollectionInfo>, MemoryError> {
        self.read_collection(&self.pool, collection).await
    }

    async fn insert(&self, collection: &str, records: &[MemoryRecord]) -> Result<(), MemoryError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.sql(e))?;
        self.check_dimensions(&mut tx, collection, records).await?;
        for record in records {
            write_statement(collection, record, None)
                .query()
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        }
        tx.commit().await.map_err(|e| self.sql(e))
    }

    async fn replace(
        &self,
        collection: &str,
        records: &[MemoryRecord],
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.sql(e))?;
        self.check_dimensions(&mut tx, collection, records).await?;
        let mut replaced = 0u64;
        for record in records {
            replaced += write_statement(collection, record, Some(filter))
                .query()
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?
                .rows_affected();
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(usize::try_from(replaced).unwrap_or(usize::MAX))
    }

    async fn delete(
        &self,
        collection: &str,
        ids: Option<&[String]>,
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError> {
        let mut statement = Statement::default();
        let mut condition = statement.filter(collection, filter);
        if let Some(ids) = ids {
            if ids.is_empty() {
                return Ok(0);
            }
            let ids = statement.bind(Arg::Texts(ids.to_vec()));
            condition.push_str(&format!(" AND m.id = ANY({ids}::text[])"));
        }
        statement.text = format!("DELETE FROM memory_records m WHERE {condition}");
        let deleted = statement
            .query()
            .execute(&self.pool)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    async fn get(
        &self,
        collection: &str,
        ids: &[String],
        filter: &RecordFilter,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        let ids = statement.bind(Arg::Texts(ids.to_vec()));
        statement.text = format!(
            "SELECT {RECORD_COLUMNS} FROM memory_records m
             WHERE {condition} AND m.id = ANY({ids}::text[])"
        );
        self.records(statement).await
    }

    async fn vector_search(
        &self,
        collection: &str,
        embedding: &[f32],
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, MemoryError> {
        let Some(info) = self.read_collection(&self.pool, collection).await? else {
            // Never opened: it holds no records.
            return Ok(Vec::new());
        };
        if info.dimensions != embedding.len() {
            return Err(MemoryError::DimensionMismatch {
                collection: collection.to_string(),
                stored: info.dimensions,
                stored_model: info.model,
                found: embedding.len(),
                model: "(the query's vector)".to_string(),
            });
        }
        if limit == 0 || embedding.is_empty() {
            return Ok(Vec::new());
        }
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        let vector = statement.bind(Arg::Vector(Vector::from(embedding.to_vec())));
        let limit = statement.bind(Arg::Int(to_i64(limit)));
        // A zero vector has no direction: its distance is NaN, which sorts last.
        statement.text = format!(
            "SELECT {RECORD_COLUMNS}, (m.embedding <=> {vector})::float8 AS distance
             FROM memory_records m WHERE {condition}
             ORDER BY distance ASC, m.created_at DESC, m.seq DESC LIMIT {limit}"
        );
        let rows = statement
            .query()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.sql(e))?;
        let mut hits = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = self.read_record(row)?;
            let distance: Option<f64> = row
                .try_get(11)
                .map_err(|e| self.corrupt(format!("record {:?}: distance: {e}", record.id)))?;
            let similarity = distance.filter(|d| d.is_finite()).map_or(0.0, |d| 1.0 - d);
            hits.push(VectorHit { record, similarity });
        }
        Ok(hits)
    }

    async fn text_search(
        &self,
        collection: &str,
        query: &str,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let words = query_words(query);
        if words.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        // Any of the words: one `plainto_tsquery` per word (which reads its text as words,
        // never as operators), joined by `||`.
        let matching: Vec<String> = words
            .into_iter()
            .map(|word| {
                let word = statement.bind(Arg::Text(word));
                format!("plainto_tsquery('simple', {word})")
            })
            .collect();
        let matching = matching.join(" || ");
        let limit = statement.bind(Arg::Int(to_i64(limit)));
        statement.text = format!(
            "SELECT {RECORD_COLUMNS} FROM memory_records m
             WHERE {condition} AND m.content_words @@ ({matching})
             ORDER BY ts_rank(m.content_words, ({matching})) DESC, m.created_at DESC, m.seq DESC
             LIMIT {limit}"
        );
        self.records(statement).await
    }

    async fn list(
        &self,
        collection: &str,
        filter: &RecordFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        let limit = statement.bind(Arg::Int(to_i64(limit)));
        let offset = statement.bind(Arg::Int(to_i64(offset)));
        statement.text = format!(
            "SELECT {LISTED_COLUMNS} FROM memory_records m WHERE {condition}
             ORDER BY m.created_at DESC, m.seq DESC LIMIT {limit} OFFSET {offset}"
        );
        self.records(statement).await
    }

    async fn count(&self, collection: &str, filter: &RecordFilter) -> Result<usize, MemoryError> {
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        statement.text = format!("SELECT count(*) FROM memory_records m WHERE {condition}");
        let row = statement
            .query()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.sql(e))?;
        let count: i64 = row.try_get(0).map_err(|e| self.sql(e))?;
        Ok(to_usize(count))
    }

    async fn touch(
        &self,
        collection: &str,
        ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<(), MemoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE memory_records SET last_accessed = $1
             WHERE collection = $2 AND id = ANY($3::text[])",
        )
        .bind(at.timestamp_micros())
        .bind(collection)
        .bind(ids)
        .execute(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn scopes(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<ScopeCount>, MemoryError> {
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        statement.text = format!(
            "SELECT m.scope, count(*) FROM memory_records m WHERE {condition}
             GROUP BY m.scope ORDER BY m.scope"
        );
        let rows = statement
            .query()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let scope: String = row.try_get(0).map_err(|e| self.sql(e))?;
            let records: i64 = row.try_get(1).map_err(|e| self.sql(e))?;
            let scope = ScopePath::parse(&scope)
                .map_err(|e| self.corrupt(format!("scope {scope:?}: {e}")))?;
            out.push(ScopeCount {
                scope,
                records: to_usize(records),
            });
        }
        Ok(out)
    }

    async fn categories(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<(String, usize)>, MemoryError> {
        let mut statement = Statement::default();
        let condition = statement.filter(collection, filter);
        statement.text = format!(
            "SELECT c.category, count(*) FROM memory_records m,
                 unnest(m.categories) AS c(category)
             WHERE {condition} GROUP BY c.category ORDER BY c.category COLLATE \"C\""
        );
        let rows = statement
            .query()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.sql(e))?;
        rows.iter()
            .map(|row| {
                let category: String = row.try_get(0).map_err(|e| self.sql(e))?;
                let count: i64 = row.try_get(1).map_err(|e| self.sql(e))?;
                Ok((category, to_usize(count)))
            })
            .collect()
    }

    async fn drop_collection(&self, collection: &str) -> Result<usize, MemoryError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.sql(e))?;
        let deleted = sqlx::query("DELETE FROM memory_records WHERE collection = $1")
            .bind(collection)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        sqlx::query("DELETE FROM memory_collections WHERE name = $1")
            .bind(collection)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    async fn collections(&self) -> Result<Vec<CollectionInfo>, MemoryError> {
        let rows: Vec<(String, String, i32)> =
            sqlx::query_as("SELECT name, model, dimensions FROM memory_collections ORDER BY name")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .map(|(name, model, dimensions)| CollectionInfo {
                name,
                model,
                dimensions: usize::try_from(dimensions).unwrap_or(0),
            })
            .collect())
    }
}

/// The statement writing `record`: an insert, or (with `filter`) an update of the stored record
/// of its id, only when the stored one passes `filter`.
fn write_statement(
    collection: &str,
    record: &MemoryRecord,
    filter: Option<&RecordFilter>,
) -> Statement {
    let mut statement = Statement::default();
    let id = statement.bind(Arg::Text(record.id.clone()));
    let collection_value = statement.bind(Arg::Text(collection.to_string()));
    let values = [
        statement.bind(Arg::Text(record.content.clone())),
        statement.bind(Arg::Text(record.scope.to_string())),
        statement.bind(Arg::Texts(record.categories.clone())),
        statement.bind(Arg::Json(Value::Object(record.metadata.clone()))),
        statement.bind(Arg::Float(record.importance)),
        statement.bind(Arg::Time(record.created_at)),
        statement.bind(Arg::Time(record.last_accessed)),
        statement.bind(Arg::OptionalText(record.source.clone())),
        statement.bind(Arg::Bool(record.private)),
        statement.bind(Arg::Vector(Vector::from(record.embedding.clone()))),
    ];
    let [
        content,
        scope,
        categories,
        metadata,
        importance,
        created_at,
        last_accessed,
        source,
        private,
        embedding,
    ] = &values;
    statement.text = match filter {
        None => format!(
            "INSERT INTO memory_records (id, collection, content, scope, categories, metadata,
             importance, created_at, last_accessed, source, private, embedding)
             VALUES ({id}, {collection_value}, {content}, {scope}, {categories}, {metadata}::jsonb,
             {importance}, {created_at}, {last_accessed}, {source}, {private}, {embedding})"
        ),
        Some(filter) => {
            let condition = statement.filter(collection, filter);
            format!(
                "UPDATE memory_records m SET content = {content}, scope = {scope},
                 categories = {categories}, metadata = {metadata}::jsonb, importance = {importance},
                 created_at = {created_at}, last_accessed = {last_accessed}, source = {source},
                 private = {private}, embedding = {embedding}
                 WHERE {condition} AND m.id = {id}"
            )
        }
    };
    statement
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_drop_every_operator() {
        assert_eq!(
            query_words("rust & !crates | \"x\":* <-> (y)"),
            ["rust", "crates", "x", "y"]
        );
        assert!(query_words("  %%% ").is_empty());
        assert_eq!(query_words(&"w ".repeat(100)).len(), MAX_QUERY_WORDS);
    }

    #[test]
    fn the_location_holds_no_password() {
        let options = PgConnectOptions::from_str("postgres://ann:secret@db.local:6543/crew")
            .unwrap_or_else(|e| panic!("{e}"));
        let location = location_of(&options);
        assert_eq!(location, "postgres://db.local:6543/crew");
    }
}
