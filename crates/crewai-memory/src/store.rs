//! [`MemoryStore`]: what memory needs from its storage.
//!
//! The trait is shaped for a server database as much as for the embedded file: every call is
//! async and batched (records, ids), every read and delete carries a [`RecordFilter`] that the
//! storage applies itself (a Postgres implementation puts it in its `WHERE`, next to a pgvector
//! `ORDER BY embedding <=> $1`), and a collection is named on each call, so one database can hold
//! the memories of several embedders side by side.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::MemoryError;
use crate::record::{CollectionInfo, MemoryRecord, RecordFilter, ScopeCount};

/// A record found by vector search, with its cosine similarity to the query (-1.0 to 1.0).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    pub record: MemoryRecord,
    pub similarity: f64,
}

/// The storage of memory records.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Records `collection`'s embedding model and vector size the first time, and checks them on
    /// every later call: a different size is [`MemoryError::DimensionMismatch`].
    async fn open_collection(
        &self,
        collection: &str,
        model: &str,
        dimensions: usize,
    ) -> Result<CollectionInfo, MemoryError>;

    /// The collection's model and size, if it was opened before.
    async fn collection(&self, collection: &str) -> Result<Option<CollectionInfo>, MemoryError>;

    /// Adds records (ids must be new), all or none.
    async fn insert(&self, collection: &str, records: &[MemoryRecord]) -> Result<(), MemoryError>;

    /// Replaces the stored records with these (matched by id, and only when the stored one
    /// passes `filter`), all or none; returns how many were replaced.
    async fn replace(
        &self,
        collection: &str,
        records: &[MemoryRecord],
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError>;

    /// Deletes the records passing `filter` (and, when `ids` is given, having one of those ids);
    /// returns how many.
    async fn delete(
        &self,
        collection: &str,
        ids: Option<&[String]>,
        filter: &RecordFilter,
    ) -> Result<usize, MemoryError>;

    /// The records with these ids that pass `filter` (with embeddings), in no set order.
    async fn get(
        &self,
        collection: &str,
        ids: &[String],
        filter: &RecordFilter,
    ) -> Result<Vec<MemoryRecord>, MemoryError>;

    /// The `limit` records passing `filter` closest to `embedding`, closest first.
    async fn vector_search(
        &self,
        collection: &str,
        embedding: &[f32],
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, MemoryError>;

    /// The `limit` records passing `filter` whose text best matches any word of `query`, best
    /// first. The query is words, never a query language: operators and quotes in it are text.
    async fn text_search(
        &self,
        collection: &str,
        query: &str,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError>;

    /// Records passing `filter`, newest first, without embeddings.
    async fn list(
        &self,
        collection: &str,
        filter: &RecordFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<MemoryRecord>, MemoryError>;

    /// How many records pass `filter`.
    async fn count(&self, collection: &str, filter: &RecordFilter) -> Result<usize, MemoryError>;

    /// Sets `last_accessed` of these records (recalled ones).
    async fn touch(
        &self,
        collection: &str,
        ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<(), MemoryError>;

    /// Every scope holding records that pass `filter`, with its own record count, sorted.
    async fn scopes(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<ScopeCount>, MemoryError>;

    /// Every category of the records passing `filter`, with how many records carry it, sorted by
    /// name.
    async fn categories(
        &self,
        collection: &str,
        filter: &RecordFilter,
    ) -> Result<Vec<(String, usize)>, MemoryError>;

    /// Deletes the collection: its records and its recorded model and size (so another embedder
    /// may be used). Returns how many records were deleted.
    async fn drop_collection(&self, collection: &str) -> Result<usize, MemoryError>;

    /// Every collection's name, model and size.
    async fn collections(&self) -> Result<Vec<CollectionInfo>, MemoryError>;
}
