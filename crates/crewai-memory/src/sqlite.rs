//! [`SqliteMemoryStore`]: the default [`MemoryStore`], one SQLite file holding records and their
//! vectors (cosine distance by sqlite-vec), searched through an in-memory record index
//! (`sqlite_index`: filter columns, int8 vectors, BM25 posting lists).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::error::MemoryError;
use crate::record::{CollectionInfo, MemoryRecord, RecordFilter, ScopeCount, ScopePath};
use crate::sqlite_index::{IndexEntry, RecordIndex, rerank_count, words as text_words};
use crate::store::{MemoryStore, VectorHit};

/// The folder, inside a project, that holds its databases (the same as crewai-store's).
pub const MEMORY_DIR: &str = ".crewai";
/// The memory database's file name inside [`MEMORY_DIR`].
pub const MEMORY_DB_FILE: &str = "memory.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memory_collections (
    name TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_records (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    collection TEXT NOT NULL,
    content TEXT NOT NULL,
    scope TEXT NOT NULL,
    categories JSON NOT NULL,
    metadata JSON NOT NULL,
    importance REAL NOT NULL,
    created_at TEXT NOT NULL,
    last_accessed TEXT NOT NULL,
    source TEXT,
    private INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_records_by_scope ON memory_records (collection, scope);
";

/// Databases written before the text search moved into the record index hold an FTS5 table
/// and the triggers that kept it: dropped, so writes stop maintaining what nothing reads.
const DROP_FULL_TEXT_TABLE: &str = "
DROP TRIGGER IF EXISTS memory_records_ai;
DROP TRIGGER IF EXISTS memory_records_ad;
DROP TRIGGER IF EXISTS memory_records_au;
DROP TABLE IF EXISTS memory_fts;
";

/// The record columns every read selects, in [`read_record`]'s order (`m` is the table's alias).
const RECORD_COLUMNS: &str = "m.id, m.content, m.scope, m.categories, m.metadata, m.importance, \
     m.created_at, m.last_accessed, m.source, m.private, m.embedding";

struct Inner {
    conn: Mutex<Connection>,
    /// Locked after `conn`, never before.
    index: Mutex<RecordIndex>,
    /// `None` for an in-memory database.
    path: Option<PathBuf>,
}

/// Memory in one SQLite file (WAL mode). Cheap to clone: clones share the connection. Every
/// trait call runs on tokio's blocking pool.
///
/// Vector search ranks only records the filter admits, so a scope's own records are always the
/// ones ranked, however many other scopes hold: an in-memory index of the filter columns and
/// int8 vectors (`sqlite_index`) picks the closest candidates, and SQL ranks them by exact
/// cosine distance (sqlite-vec's `vec_distance_cosine`) under the same filter. sqlite-vec's
/// `vec0` is brute force over the float vectors, and its KNN query cannot take a scope-prefix
/// filter.
#[derive(Clone)]
pub struct SqliteMemoryStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteMemoryStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl SqliteMemoryStore {
    /// Opens (creating if needed) `<project>/.crewai/memory.db`.
    pub fn open_project(project_dir: &Path) -> Result<Self, MemoryError> {
        let dir = project_dir.join(MEMORY_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| MemoryError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        Self::open(&dir.join(MEMORY_DB_FILE))
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, MemoryError> {
        let sql = |source| MemoryError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sql)?;
        // Another process (a second `crewai run`) may hold the write lock briefly.
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(sql)?;
        Self::init(conn, Some(path.to_path_buf()))
    }

    /// A database that lives as long as this value (tests, one-off runs).
    pub fn in_memory() -> Result<Self, MemoryError> {
        let conn = Connection::open_in_memory().map_err(|source| MemoryError::Sqlite {
            path: PathBuf::from(":memory:"),
            source,
        })?;
        Self::init(conn, None)
    }

    fn init(conn: Connection, path: Option<PathBuf>) -> Result<Self, MemoryError> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let sql = |source| MemoryError::Sqlite {
            path: shown.clone(),
            source,
        };
        load_sqlite_vec(&conn).map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        conn.execute_batch(DROP_FULL_TEXT_TABLE).map_err(sql)?;
        Ok(SqliteMemoryStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                index: Mutex::new(RecordIndex::default()),
                path,
            }),
        })
    }

    /// The database file (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    pub(crate) fn shown_path(&self) -> PathBuf {
        self.inner
            .path
            .clone()
            .unwrap_or_else(|| PathBuf::from(":memory:"))
    }

    pub(crate) fn sql(&self, source: rusqlite::Error) -> MemoryError {
        MemoryError::Sqlite {
            path: self.shown_path(),
            source,
        }
    }

    fn conn(&self) -> Result<MutexGuard<'_, Connection>, MemoryError> {
        self.inner.conn.lock().map_err(|_| MemoryError::Poisoned)
    }

    /// The record index, current with the database (taken while holding the connection).
    fn index(&self, conn: &Connection) -> Result<MutexGuard<'_, RecordIndex>, MemoryError> {
        let mut index = self.inner.index.lock().map_err(|_| MemoryError::Poisoned)?;
        index.check_version(conn).map_err(|e| self.sql(e))?;
        Ok(index)
    }

    /// The record index with `collection` loaded (read from the table on its first search).
    fn loaded_index(
        &self,
        conn: &Connection,
        collection: &str,
    ) -> Result<MutexGuard<'_, RecordIndex>, MemoryError> {
        let mut index = self.index(conn)?;
        if !index.is_loaded(collection) {
            let entries = self.index_entries(conn, collection)?;
            index.load(collection, entries);
        }
        Ok(index)
    }

    /// Runs `work` on tokio's blocking pool with the connection.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&SqliteMemoryStore, &mut Connection) -> Result<T, MemoryError>
        + Send
        + 'static,
    ) -> Result<T, MemoryError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = store.conn()?;
            work(&store, &mut conn)
        })
        .await
        .map_err(MemoryError::Background)?
    }

    /// The rows `query` selects with `values`, read as records.
    fn records(
        &self,
        conn: &Connection,
        query: &str,
        values: Vec<SqlValue>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let rows = self.keyed_records(conn, query, values, |row| Ok(((), read_record(row, 0))))?;
        Ok(rows.into_iter().map(|((), record)| record).collect())
    }

    /// The rows `query` selects with `values` (the row id, then [`RECORD_COLUMNS`]), by row id.
    fn records_by_rowid(
        &self,
        conn: &Connection,
        query: &str,
        values: Vec<SqlValue>,
    ) -> Result<HashMap<i64, MemoryRecord>, MemoryError> {
        let rows = self.keyed_records(conn, query, values, |row| {
            Ok((row.get::<_, i64>(0)?, read_record(row, 1)))
        })?;
        Ok(rows.into_iter().collect())
    }

    /// The rows `query` selects with `values`, each read by `read` as a key and a record.
    fn keyed_records<K>(
        &self,
        conn: &Connection,
        query: &str,
        values: Vec<SqlValue>,
        read: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<(K, Result<MemoryRecord, String>)>,
    ) -> Result<Vec<(K, MemoryRecord)>, MemoryError> {
        let mut statement = conn.prepare(query).map_err(|e| self.sql(e))?;
        let rows = statement
            .query_map(params_from_iter(values), read)
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, record) = row.map_err(|e| self.sql(e))?;
            let record = record.map_err(|message| MemoryError::Corrupt {
                path: self.shown_path(),
                message,
            })?;
            out.push((key, record));
        }
        Ok(out)
    }

    /// Inserts `record`, or replaces the stored one of its id; returns the row id written
    /// (`None`: no record of that id to replace).
    fn write_record(
        &self,
        tx: &rusqlite::Transaction<'_>,
        collection: &str,
        record: &MemoryRecord,
        replace: bool,
    ) -> Result<Option<i64>, MemoryError> {
        let categories =
            serde_json::to_string(&record.categories).map_err(|e| MemoryError::InvalidInput {
                field: "categories",
                reason: e.to_string(),
            })?;
        let metadata =
            serde_json::to_string(&record.metadata).map_err(|e| MemoryError::InvalidInput {
                field: "metadata",
                reason: e.to_string(),
            })?;
        let values = params![
            record.id,
            collection,
            record.content,
            record.scope.to_string(),
            categories,
            metadata,
            record.importance,
            time_text(record.created_at),
            time_text(record.last_accessed),
            record.source,
            record.private,
            vector_blob(&record.embedding),
        ];
        let query = if replace {
            "UPDATE memory_records SET content = ?3, scope = ?4, categories = ?5, metadata = ?6,
             importance = ?7, created_at = ?8, last_accessed = ?9, source = ?10, private = ?11,
             embedding = ?12 WHERE id = ?1 AND collection = ?2 RETURNING rowid"
        } else {
            "INSERT INTO memory_records (id, collection, content, scope, categories, metadata,
             importance, created_at, last_accessed, source, private, embedding)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING rowid"
        };
        tx.prepare_cached(query)
            .and_then(|mut statement| statement.query_row(values, |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }

    /// `record` as the vector index keeps it.
    fn index_entry(record: &MemoryRecord) -> IndexEntry {
        IndexEntry::new(
            record.scope.to_string(),
            record.categories.clone(),
            record.source.clone(),
            record.private,
            time_text(record.created_at),
            &record.embedding,
            &record.content,
        )
    }

    fn check_dimensions(
        &self,
        conn: &Connection,
        collection: &str,
        records: &[MemoryRecord],
    ) -> Result<(), MemoryError> {
        let info = read_collection(conn, collection).map_err(|e| self.sql(e))?;
        CollectionInfo::check_records(info.as_ref(), collection, records)
    }
}

/// Registers sqlite-vec's functions on this one connection (not process-wide, as an auto
/// extension would).
fn load_sqlite_vec(conn: &Connection) -> rusqlite::Result<()> {
    type Init =
        unsafe extern "C" fn(*mut rusqlite::ffi::sqlite3, *mut *mut c_char, *const c_void) -> c_int;
    // SAFETY: sqlite-vec declares its entry point without parameters; the C function is
    // `int sqlite3_vec_init(sqlite3*, char**, const sqlite3_api_routines*)`. It is compiled with
    // SQLITE_CORE, so it calls the SQLite linked into this process (rusqlite's bundled one) and
    // never reads the routines pointer, and it only registers functions on `db`.
    let rc = unsafe {
        let init: Init = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
        init(conn.handle(), std::ptr::null_mut(), std::ptr::null())
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rc),
            Some("sqlite-vec failed to register its functions".into()),
        ))
    }
}

fn read_collection(conn: &Connection, name: &str) -> rusqlite::Result<Option<CollectionInfo>> {
    conn.query_row(
        "SELECT name, model, dimensions FROM memory_collections WHERE name = ?1",
        [name],
        |row| {
            Ok(CollectionInfo {
                name: row.get(0)?,
                model: row.get(1)?,
                dimensions: row.get::<_, i64>(2)?.max(0) as usize,
            })
        },
    )
    .optional()
}

/// Times as fixed-width UTC text, so that text order is time order in SQL.
fn time_text(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn blob_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// One record from [`RECORD_COLUMNS`] starting at column `at`; the error says what is wrong.
fn read_record(row: &rusqlite::Row<'_>, at: usize) -> Result<MemoryRecord, String> {
    let text = |i: usize| row.get::<_, String>(at + i).map_err(|e| e.to_string());
    let id = text(0)?;
    let bad = |what: &str, detail: String| format!("record {id:?}: {what}: {detail}");
    let scope = ScopePath::parse(&text(2)?).map_err(|e| bad("scope", e.to_string()))?;
    let categories =
        serde_json::from_str(&text(3)?).map_err(|e| bad("categories", e.to_string()))?;
    let metadata = serde_json::from_str(&text(4)?).map_err(|e| bad("metadata", e.to_string()))?;
    let time = |i: usize, what: &str| {
        let value = text(i)?;
        DateTime::parse_from_rfc3339(&value)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| bad(what, e.to_string()))
    };
    Ok(MemoryRecord {
        content: text(1)?,
        scope,
        categories,
        metadata,
        importance: row
            .get(at + 5)
            .map_err(|e| bad("importance", e.to_string()))?,
        created_at: time(6, "created_at")?,
        last_accessed: time(7, "last_accessed")?,
        source: row.get(at + 8).map_err(|e| bad("source", e.to_string()))?,
        private: row.get(at + 9).map_err(|e| bad("private", e.to_string()))?,
        embedding: blob_vector(
            &row.get::<_, Vec<u8>>(at + 10)
                .map_err(|e| bad("embedding", e.to_string()))?,
        ),
        id,
    })
}

/// The `WHERE` conditions for `collection` and `filter` on the table aliased `m`, with their
/// values appended to `values`. Every value is a bound parameter and the scope test compares
/// whole strings (`=` and `substr`), never `LIKE`, so no character in a scope, a category or a
/// source has a meaning in SQL.
fn filter_sql(collection: &str, filter: &RecordFilter, values: &mut Vec<SqlValue>) -> String {
    let mut bind = |value: SqlValue| {
        values.push(value);
        format!("?{}", values.len())
    };
    let mut conditions = vec![format!(
        "m.collection = {}",
        bind(collection.to_string().into())
    )];
    if !filter.scope.is_root() {
        // Every path below `/a` lies in ["/a/", "/a0"): `0` follows `/` in byte order. A range
        // the (collection, scope) index can seek, where a prefix function reads every row.
        let scope = bind(filter.scope.to_string().into());
        let below = bind(format!("{}/", filter.scope).into());
        let after = bind(format!("{}0", filter.scope).into());
        conditions.push(format!(
            "(m.scope = {scope} OR (m.scope >= {below} AND m.scope < {after}))"
        ));
    }
    if !filter.categories.is_empty() {
        let list: Vec<String> = filter
            .categories
            .iter()
            .map(|c| bind(c.clone().into()))
            .collect();
        conditions.push(format!(
            "EXISTS (SELECT 1 FROM json_each(m.categories) c WHERE c.value IN ({}))",
            list.join(", ")
        ));
    }
    match (&filter.source, filter.include_private) {
        (Some(source), _) => {
            // Its own private records are visible to a source.
            conditions.push(format!("m.source = {}", bind(source.clone().into())));
        }
        (None, true) => {}
        (None, false) => conditions.push("m.private = 0".to_string()),
    }
    if let Some(after) = filter.created_after {
        conditions.push(format!("m.created_at >= {}", bind(time_text(after).into())));
    }
    conditions.join(" AND ")
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl MemoryStore for SqliteMemoryStore {
    async fn open_collection(
        &self,
        collection: &str,
        model: &str,
        dimensions: usize,
    ) -> Result<CollectionInfo, MemoryError> {
        let (collection, model) = (collection.to_string(), model.to_string());
        self.blocking(move |store, conn| {
            if let Some(info) = read_collection(conn, &collection).map_err(|e| store.sql(e))? {
                if info.dimensions != dimensions {
                    return Err(MemoryError::DimensionMismatch {
                        collection,
                        stored: info.dimensions,
                        stored_model: info.model,
                        found: dimensions,
                        model,
                    });
                }
                return Ok(info);
            }
            conn.execute(
                "INSERT INTO memory_collections (name, model, dimensions, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![collection, model, to_i64(dimensions), time_text(Utc::now())],
            )
            .map_err(|e| store.sql(e))?;
            Ok(CollectionInfo {
                name: collection,
                model,
                dimensions,
            })
        })
        .await
    }

    async fn collection(&self, collection: &str) -> Result<Option<CollectionInfo>, MemoryError> {
        let collection = collection.to_string();
        self.blocking(move |store, conn| {
            read_collection(conn, &collection).map_err(|e| store.sql(e))
        })
        .await
    }

    async fn insert(&self, collection: &str, records: &[MemoryRecord]) -> Result<(), MemoryError> {
        let (collection, records) = (collection.to_string(), records.to_vec());
        self.blocking(move |store, conn| {
            store.check_dimensions(conn, &collection, &records)?;
            let tx = conn.transaction().map_err(|e| store.sql(e))?;
            let mut written = Vec::with_capacity(records.len());
            for record in &records {
                if let Some(rowid) = store.write_record(&tx, &collection, record, false)? {
                    written.push((rowid, record));
                }
            }
            tx.commit().map_err(|e| store.sql(e))?;
            let mut index = store.index(conn)?;
            if index.is_loaded(&collection) {
                let entries = written
                    .into_iter()
                    .map(|(rowid, record)| (rowid, Self::index_entry(record)))
                    .collect();
                index.upsert(&collection, entries);
            }
            Ok(())
        })
        .await
    }

    async fn replace(
        &self,
        collection: &str,
        records: &[MemoryRecord],
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError> {
        let (collection, records, filter) =
            (collection.to_string(), records.to_vec(), filter.clone());
        self.blocking(move |store, conn| {
            store.check_dimensions(conn, &collection, &records)?;
            let tx = conn.transaction().map_err(|e| store.sql(e))?;
            let mut replaced = Vec::new();
            for record in &records {
                let mut values = Vec::new();
                let condition = filter_sql(&collection, &filter, &mut values);
                values.push(record.id.clone().into());
                let admitted: i64 = tx
                    .query_row(
                        &format!(
                            "SELECT count(*) FROM memory_records m WHERE {condition} AND m.id = ?{}",
                            values.len()
                        ),
                        params_from_iter(values),
                        |row| row.get(0),
                    )
                    .map_err(|e| store.sql(e))?;
                if admitted > 0
                    && let Some(rowid) = store.write_record(&tx, &collection, record, true)?
                {
                    replaced.push((rowid, record));
                }
            }
            tx.commit().map_err(|e| store.sql(e))?;
            let count = replaced.len();
            let mut index = store.index(conn)?;
            if index.is_loaded(&collection) {
                let entries = replaced
                    .into_iter()
                    .map(|(rowid, record)| (rowid, Self::index_entry(record)))
                    .collect();
                index.upsert(&collection, entries);
            }
            Ok(count)
        })
        .await
    }

    async fn delete(
        &self,
        collection: &str,
        ids: Option<&[String]>,
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError> {
        let (collection, ids, filter) = (
            collection.to_string(),
            ids.map(<[String]>::to_vec),
            filter.clone(),
        );
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let mut condition = filter_sql(&collection, &filter, &mut values);
            if let Some(ids) = &ids {
                if ids.is_empty() {
                    return Ok(0);
                }
                let start = values.len();
                values.extend(ids.iter().map(|id| SqlValue::from(id.clone())));
                let marks: Vec<String> = (start + 1..=values.len())
                    .map(|i| format!("?{i}"))
                    .collect();
                condition.push_str(&format!(" AND m.id IN ({})", marks.join(", ")));
            }
            let deleted: Vec<i64> = conn
                .prepare(&format!(
                    "DELETE FROM memory_records AS m WHERE {condition} RETURNING rowid"
                ))
                .and_then(|mut statement| {
                    statement
                        .query_map(params_from_iter(values), |row| row.get(0))?
                        .collect()
                })
                .map_err(|e| store.sql(e))?;
            store.index(conn)?.remove(&collection, &deleted);
            Ok(deleted.len())
        })
        .await
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
        let (collection, ids, filter) = (collection.to_string(), ids.to_vec(), filter.clone());
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            let start = values.len();
            values.extend(ids.iter().map(|id| SqlValue::from(id.clone())));
            let marks: Vec<String> = (start + 1..=values.len()).map(|i| format!("?{i}")).collect();
            store.records(
                conn,
                &format!(
                    "SELECT {RECORD_COLUMNS} FROM memory_records m WHERE {condition} AND m.id IN ({})",
                    marks.join(", ")
                ),
                values,
            )
        })
        .await
    }

    async fn vector_search(
        &self,
        collection: &str,
        embedding: &[f32],
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, MemoryError> {
        let (collection, query, filter) =
            (collection.to_string(), embedding.to_vec(), filter.clone());
        let dimensions = embedding.len();
        self.blocking(move |store, conn| {
            if let Some(info) = read_collection(conn, &collection).map_err(|e| store.sql(e))?
                && info.dimensions != dimensions
            {
                return Err(MemoryError::DimensionMismatch {
                    collection,
                    stored: info.dimensions,
                    stored_model: info.model,
                    found: dimensions,
                    model: "(the query's vector)".to_string(),
                });
            }
            let candidates = {
                let index = store.loaded_index(conn, &collection)?;
                let created_after = filter.created_after.map(time_text);
                index
                    .vector_candidates(
                        &collection,
                        &query,
                        &filter,
                        created_after.as_deref(),
                        rerank_count(limit),
                    )
                    .unwrap_or_default()
            };
            if candidates.is_empty() || limit == 0 {
                return Ok(Vec::new());
            }
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            values.push(SqlValue::Blob(vector_blob(&query)));
            let vector = values.len();
            values.push(serde_json::Value::from(candidates).to_string().into());
            let candidates = values.len();
            values.push(to_i64(limit).into());
            let mut statement = conn
                // The index's candidates, ranked exactly under the same filter; on the row id
                // alone, then joined for the columns. `CROSS JOIN` keeps SQLite's loop on the
                // candidates: given the choice, its planner seeks the (collection, scope) index
                // and reads every record of the collection (20 ms over 100,000).
                .prepare_cached(&format!(
                    "SELECT {RECORD_COLUMNS}, top.distance FROM (
                         SELECT m.rowid AS rowid, m.created_at AS created_at,
                                vec_distance_cosine(m.embedding, ?{vector}) AS distance
                         FROM json_each(?{candidates}) c
                         CROSS JOIN memory_records m ON m.rowid = c.value
                         WHERE {condition}
                         ORDER BY distance ASC, m.created_at DESC LIMIT ?{}
                     ) top JOIN memory_records m ON m.rowid = top.rowid
                     ORDER BY top.distance ASC, top.created_at DESC",
                    candidates + 1
                ))
                .map_err(|e| store.sql(e))?;
            let rows = statement
                .query_map(params_from_iter(values), |row| {
                    Ok((read_record(row, 0), row.get::<_, Option<f64>>(11)?))
                })
                .map_err(|e| store.sql(e))?;
            let mut hits = Vec::new();
            for row in rows {
                let (record, distance) = row.map_err(|e| store.sql(e))?;
                let record = record.map_err(|message| MemoryError::Corrupt {
                    path: store.shown_path(),
                    message,
                })?;
                // A zero vector has no direction: sqlite-vec gives no distance for it.
                let similarity = distance.filter(|d| d.is_finite()).map_or(0.0, |d| 1.0 - d);
                hits.push(VectorHit { record, similarity });
            }
            Ok(hits)
        })
        .await
    }

    async fn text_search(
        &self,
        collection: &str,
        query: &str,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        if limit == 0 || text_words(query).next().is_none() {
            return Ok(Vec::new());
        }
        let (collection, query, filter) =
            (collection.to_string(), query.to_string(), filter.clone());
        self.blocking(move |store, conn| {
            let candidates = {
                let index = store.loaded_index(conn, &collection)?;
                let created_after = filter.created_after.map(time_text);
                index
                    .text_candidates(
                        &collection,
                        &query,
                        &filter,
                        created_after.as_deref(),
                        limit,
                    )
                    .unwrap_or_default()
            };
            if candidates.is_empty() {
                return Ok(Vec::new());
            }
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            values.push(
                serde_json::Value::from(candidates.clone())
                    .to_string()
                    .into(),
            );
            // The index's ranking, read under the same filter (which enforces the scope), looked
            // up by row id (see `vector_search` for the `CROSS JOIN`).
            let mut found: HashMap<i64, MemoryRecord> = store.records_by_rowid(
                conn,
                &format!(
                    "SELECT m.rowid, {RECORD_COLUMNS}
                     FROM json_each(?{}) c CROSS JOIN memory_records m ON m.rowid = c.value
                     WHERE {condition}",
                    values.len()
                ),
                values,
            )?;
            Ok(candidates
                .iter()
                .filter_map(|rowid| found.remove(rowid))
                .collect())
        })
        .await
    }

    async fn list(
        &self,
        collection: &str,
        filter: &RecordFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let (collection, filter) = (collection.to_string(), filter.clone());
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            values.push(to_i64(limit).into());
            values.push(to_i64(offset).into());
            let n = values.len();
            let mut records = store.records(
                conn,
                &format!(
                    "SELECT {RECORD_COLUMNS} FROM memory_records m WHERE {condition}
                     ORDER BY m.created_at DESC, m.rowid DESC LIMIT ?{} OFFSET ?{n}",
                    n - 1
                ),
                values,
            )?;
            records.iter_mut().for_each(|r| r.embedding = Vec::new());
            Ok(records)
        })
        .await
    }

    async fn count(&self, collection: &str, filter: &RecordFilter) -> Result<usize, MemoryError> {
        let (collection, filter) = (collection.to_string(), filter.clone());
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            let n: i64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM memory_records m WHERE {condition}"),
                    params_from_iter(values),
                    |row| row.get(0),
                )
                .map_err(|e| store.sql(e))?;
            Ok(n.max(0) as usize)
        })
        .await
    }

    async fn touch(
        &self,
        collection: &str,
        ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<(), MemoryError> {
        let (collection, ids) = (collection.to_string(), ids.to_vec());
        self.blocking(move |store, conn| {
            let tx = conn.transaction().map_err(|e| store.sql(e))?;
            for id in &ids {
                tx.execute(
                    "UPDATE memory_records SET last_accessed = ?1 WHERE id = ?2 AND collection = ?3",
                    params![time_text(at), id, collection],
                )
                .map_err(|e| store.sql(e))?;
            }
            tx.commit().map_err(|e| store.sql(e))
        })
        .await
    }

    async fn scopes(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<ScopeCount>, MemoryError> {
        let (collection, filter) = (collection.to_string(), filter.clone());
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            let mut statement = conn
                .prepare(&format!(
                    "SELECT m.scope, count(*) FROM memory_records m WHERE {condition}
                     GROUP BY m.scope ORDER BY m.scope"
                ))
                .map_err(|e| store.sql(e))?;
            let rows = statement
                .query_map(params_from_iter(values), |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(|e| store.sql(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (scope, records) = row.map_err(|e| store.sql(e))?;
                let scope = ScopePath::parse(&scope).map_err(|e| MemoryError::Corrupt {
                    path: store.shown_path(),
                    message: e.to_string(),
                })?;
                out.push(ScopeCount {
                    scope,
                    records: records.max(0) as usize,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn categories(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<(String, usize)>, MemoryError> {
        let (collection, filter) = (collection.to_string(), filter.clone());
        self.blocking(move |store, conn| {
            let mut values = Vec::new();
            let condition = filter_sql(&collection, &filter, &mut values);
            let mut statement = conn
                .prepare(&format!(
                    "SELECT c.value, count(*) FROM memory_records m, json_each(m.categories) c
                     WHERE {condition} GROUP BY c.value ORDER BY c.value"
                ))
                .map_err(|e| store.sql(e))?;
            let rows = statement
                .query_map(params_from_iter(values), |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?.max(0) as usize,
                    ))
                })
                .map_err(|e| store.sql(e))?;
            rows.map(|row| row.map_err(|e| store.sql(e))).collect()
        })
        .await
    }

    async fn drop_collection(&self, collection: &str) -> Result<usize, MemoryError> {
        let collection = collection.to_string();
        self.blocking(move |store, conn| {
            let tx = conn.transaction().map_err(|e| store.sql(e))?;
            let deleted = tx
                .execute(
                    "DELETE FROM memory_records WHERE collection = ?1",
                    [&collection],
                )
                .map_err(|e| store.sql(e))?;
            tx.execute(
                "DELETE FROM memory_collections WHERE name = ?1",
                [&collection],
            )
            .map_err(|e| store.sql(e))?;
            tx.commit().map_err(|e| store.sql(e))?;
            store.index(conn)?.drop_collection(&collection);
            Ok(deleted)
        })
        .await
    }

    async fn collections(&self) -> Result<Vec<CollectionInfo>, MemoryError> {
        self.blocking(move |store, conn| {
            let mut statement = conn
                .prepare("SELECT name, model, dimensions FROM memory_collections ORDER BY name")
                .map_err(|e| store.sql(e))?;
            let rows = statement
                .query_map([], |row| {
                    Ok(CollectionInfo {
                        name: row.get(0)?,
                        model: row.get(1)?,
                        dimensions: row.get::<_, i64>(2)?.max(0) as usize,
                    })
                })
                .map_err(|e| store.sql(e))?;
            rows.map(|row| row.map_err(|e| store.sql(e))).collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_vec_is_registered_on_the_connection() {
        let store = SqliteMemoryStore::in_memory().unwrap();
        let conn = store.conn().unwrap();
        let version: String = conn
            .query_row("SELECT vec_version()", [], |row| row.get(0))
            .unwrap();
        assert!(version.starts_with('v'));
        let distance: f64 = conn
            .query_row(
                "SELECT vec_distance_cosine(?1, ?2)",
                params![vector_blob(&[1.0, 0.0]), vector_blob(&[0.0, 1.0])],
                |row| row.get(0),
            )
            .unwrap();
        assert!((distance - 1.0).abs() < 1e-6);
    }
}
