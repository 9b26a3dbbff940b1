//! The record index of [`SqliteMemoryStore`](crate::SqliteMemoryStore): per collection, every
//! record's filter columns, an int8 copy of its vector and its words (`text`), held in memory.
//!
//! A vector search over the table alone reads every row the filter admits (each carries its
//! 1.5 KB vector and its text), which at 100,000 records is most of a second. With this index the
//! filter and a quantised similarity run over compact entries in memory, and SQL computes the
//! exact cosine distance for the closest [`rerank_count`] candidates only, with the same filter,
//! so the hits are those of the exact search unless quantisation pushed one of them out of that
//! candidate set (when the filter admits no more records than that, the search is exact).
//!
//! A text search ranks the records holding the query's words by BM25 over the index's posting
//! lists (`text.rs`, which says why not FTS5), with the same filter, and SQL reads the top ones
//! under the filter again.
//!
//! The index is a cache of the table: loaded per collection on the first search, kept in step
//! by the store's own writes (after they commit), and dropped whole when `PRAGMA data_version`
//! says another connection (another `crewai run`) committed.

use std::collections::HashMap;

use rusqlite::Connection;

mod text;
pub(crate) use text::words;
use text::{TermIndex, WordCounts};

use crate::error::MemoryError;
use crate::record::RecordFilter;
use crate::sqlite::{SqliteMemoryStore, blob_vector};

/// How many candidates the exact rerank gets for a search of `limit`.
pub(crate) fn rerank_count(limit: usize) -> usize {
    limit.saturating_mul(10).max(200)
}

/// One record as the index takes it in.
#[derive(Debug, Clone)]
pub(crate) struct IndexEntry {
    scope: String,
    meta: EntryMeta,
    quantized: Box<[i8]>,
    /// Turns the int8 dot product with a query into a cosine (the quantisation scale over the
    /// vector's norm); 0 for a vector with no direction.
    factor: f32,
    words: WordCounts,
}

/// The filter columns other than the scope.
#[derive(Debug, Clone)]
struct EntryMeta {
    categories: Vec<String>,
    source: Option<String>,
    private: bool,
    /// Fixed-width UTC text, compared as the SQL filter compares it.
    created_at: String,
}

impl IndexEntry {
    pub(crate) fn new(
        scope: String,
        categories: Vec<String>,
        source: Option<String>,
        private: bool,
        created_at: String,
        vector: &[f32],
        content: &str,
    ) -> IndexEntry {
        let (quantized, factor) = quantize(vector);
        IndexEntry {
            scope,
            meta: EntryMeta {
                categories,
                source,
                private,
                created_at,
            },
            quantized,
            factor,
            words: WordCounts::of(content),
        }
    }
}

/// Whether `scope` (a stored record's) is `filter_scope` or below it: the SQL filter's rule.
fn in_scope(scope: &str, filter: &RecordFilter, filter_scope: &str) -> bool {
    filter.scope.is_root()
        || scope == filter_scope
        || (scope.len() > filter_scope.len()
            && scope.starts_with(filter_scope)
            && scope.as_bytes()[filter_scope.len()] == b'/')
}

impl EntryMeta {
    /// The SQL filter's rule (`filter_sql`) on the columns other than the scope;
    /// `created_after` is the filter's time as the same fixed-width text.
    fn admitted_by(&self, filter: &RecordFilter, created_after: Option<&str>) -> bool {
        let categories = filter.categories.is_empty()
            || self
                .categories
                .iter()
                .any(|c| filter.categories.contains(c));
        let visible = match (&filter.source, filter.include_private) {
            (Some(source), _) => self.source.as_ref() == Some(source),
            (None, true) => true,
            (None, false) => !self.private,
        };
        let recent = created_after.is_none_or(|after| self.created_at.as_str() >= after);
        categories && visible && recent
    }
}

/// One collection's entries, column by column: the int8 vectors side by side in one buffer
/// and each scope stored once, so a search reads memory in order instead of chasing a
/// pointer per record.
///
/// Positions are only appended: a replaced record is forgotten at its old position and
/// appended at a new one, a deleted one is forgotten, and the columns are compacted once the
/// forgotten positions are half of them. The text index's posting lists refer to positions,
/// and appending keeps them valid without rewriting a list per write.
#[derive(Debug, Default)]
struct CollectionIndex {
    dimensions: usize,
    rowids: Vec<i64>,
    live: Vec<bool>,
    forgotten: usize,
    positions: HashMap<i64, usize>,
    scope_of: Vec<u32>,
    /// Each entry's private flag again, densely: a plain recall's filter reads only this and
    /// the scope, not the whole `meta`.
    private: Vec<bool>,
    meta: Vec<EntryMeta>,
    vectors: Vec<i8>,
    factors: Vec<f32>,
    text: TermIndex,
    scopes: Vec<String>,
    scope_ids: HashMap<String, u32>,
}

/// Compaction waits for this many forgotten positions at least, so a small collection's
/// deletes do not rebuild it each time.
const COMPACT_AFTER: usize = 1024;

impl CollectionIndex {
    fn upsert(&mut self, rowid: i64, entry: IndexEntry) {
        if self.rowids.is_empty() {
            self.dimensions = entry.quantized.len();
        }
        let scope = match self.scope_ids.get(&entry.scope) {
            Some(id) => *id,
            None => {
                let id = u32::try_from(self.scopes.len()).unwrap_or(u32::MAX);
                self.scopes.push(entry.scope.clone());
                self.scope_ids.insert(entry.scope, id);
                id
            }
        };
        // A vector of another size than the collection's cannot be compared: it ranks as one
        // with no direction (the exact rerank still measures it).
        let (quantized, factor) = if entry.quantized.len() == self.dimensions {
            (entry.quantized, entry.factor)
        } else {
            (vec![0; self.dimensions].into_boxed_slice(), 0.0)
        };
        if let Some(at) = self.positions.remove(&rowid) {
            self.forget(at);
        }
        self.positions.insert(rowid, self.rowids.len());
        self.rowids.push(rowid);
        self.live.push(true);
        self.scope_of.push(scope);
        self.private.push(entry.meta.private);
        self.meta.push(entry.meta);
        self.vectors.extend_from_slice(&quantized);
        self.factors.push(factor);
        self.text.push(entry.words);
    }

    fn remove(&mut self, rowid: i64) {
        if let Some(at) = self.positions.remove(&rowid) {
            self.forget(at);
        }
    }

    fn forget(&mut self, at: usize) {
        self.live[at] = false;
        self.forgotten += 1;
        self.text.forget(at);
    }

    /// Drops the forgotten positions once they are half of all.
    fn compact_if_sparse(&mut self) {
        if self.forgotten < COMPACT_AFTER || self.forgotten * 2 < self.rowids.len() {
            return;
        }
        let kept: Vec<usize> = (0..self.rowids.len()).filter(|at| self.live[*at]).collect();
        let dimensions = self.dimensions;
        let mut vectors = Vec::with_capacity(kept.len() * dimensions);
        for at in &kept {
            vectors.extend_from_slice(&self.vectors[at * dimensions..(at + 1) * dimensions]);
        }
        self.text = self.text.rebuilt(&kept);
        self.vectors = vectors;
        self.rowids = kept.iter().map(|at| self.rowids[*at]).collect();
        self.scope_of = kept.iter().map(|at| self.scope_of[*at]).collect();
        self.private = kept.iter().map(|at| self.private[*at]).collect();
        self.meta = kept.iter().map(|at| self.meta[*at].clone()).collect();
        self.factors = kept.iter().map(|at| self.factors[*at]).collect();
        self.live = vec![true; kept.len()];
        self.forgotten = 0;
        self.positions = self
            .rowids
            .iter()
            .enumerate()
            .map(|(at, rowid)| (*rowid, at))
            .collect();
    }

    /// Which positions `filter` admits (live ones only).
    fn admission<'a>(
        &'a self,
        filter: &'a RecordFilter,
        created_after: Option<&'a str>,
    ) -> impl Fn(usize) -> bool + 'a {
        let filter_scope = filter.scope.to_string();
        let scope_admitted: Vec<bool> = self
            .scopes
            .iter()
            .map(|scope| in_scope(scope, filter, &filter_scope))
            .collect();
        // A plain recall sets none of these, so its records are admitted by scope and the
        // private flag alone.
        let plain =
            filter.categories.is_empty() && filter.source.is_none() && created_after.is_none();
        move |at| {
            self.live[at]
                && scope_admitted[self.scope_of[at] as usize]
                && if plain {
                    filter.include_private || !self.private[at]
                } else {
                    self.meta[at].admitted_by(filter, created_after)
                }
        }
    }
}

impl SqliteMemoryStore {
    /// `collection`'s index entries, read from the table (the first search of a collection).
    pub(crate) fn index_entries(
        &self,
        conn: &Connection,
        collection: &str,
    ) -> Result<Vec<(i64, IndexEntry)>, MemoryError> {
        let mut statement = conn
            .prepare(
                "SELECT rowid, scope, categories, source, private, created_at, embedding, content
                 FROM memory_records WHERE collection = ?1",
            )
            .map_err(|e| self.sql(e))?;
        let rows = statement
            .query_map([collection], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, bool>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, Vec<u8>>(6)?,
                    row.get::<_, String>(7)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut entries = Vec::new();
        for row in rows {
            let (rowid, scope, categories, source, private, created_at, blob, content) =
                row.map_err(|e| self.sql(e))?;
            let categories: Vec<String> =
                serde_json::from_str(&categories).map_err(|e| MemoryError::Corrupt {
                    path: self.shown_path(),
                    message: format!("record {rowid}: categories: {e}"),
                })?;
            let entry = IndexEntry::new(
                scope,
                categories,
                source,
                private,
                created_at,
                &blob_vector(&blob),
                &content,
            );
            entries.push((rowid, entry));
        }
        Ok(entries)
    }
}

/// `vector` scaled into int8 by its largest component, and the factor that makes the int8 dot
/// product a cosine.
fn quantize(vector: &[f32]) -> (Box<[i8]>, f32) {
    let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if largest == 0.0 || !largest.is_finite() || norm == 0.0 || !norm.is_finite() {
        return (vec![0; vector.len()].into_boxed_slice(), 0.0);
    }
    let scale = largest / 127.0;
    let quantized = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (quantized, scale / norm)
}

// Inlined into `dot_on_avx2`, so the loop is compiled for AVX2 there.
#[inline(always)]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

/// The int8 dot product for this CPU: [`dot`] compiled with AVX2 where the CPU has it (twice
/// the lanes of the baseline x86-64 build; the same code, autovectorised), else as built.
/// Chosen once per search, since a search calls it once per record.
fn dot_kernel() -> fn(&[i8], &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return dot_on_avx2;
    }
    dot
}

#[cfg(target_arch = "x86_64")]
fn dot_on_avx2(a: &[i8], b: &[i8]) -> i32 {
    #[target_feature(enable = "avx2")]
    fn vectorised(a: &[i8], b: &[i8]) -> i32 {
        dot(a, b)
    }
    // SAFETY: `dot_kernel` hands this out only after detecting AVX2 on the CPU.
    unsafe { vectorised(a, b) }
}

/// The loaded collections, by name, and the database version they were read at.
#[derive(Debug, Default)]
pub(crate) struct RecordIndex {
    data_version: Option<i64>,
    collections: HashMap<String, CollectionIndex>,
}

impl RecordIndex {
    /// Forgets everything when another connection committed since the index was read.
    pub(crate) fn check_version(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let version: i64 = conn.query_row("PRAGMA data_version", [], |row| row.get(0))?;
        if self.data_version != Some(version) {
            self.collections.clear();
            self.data_version = Some(version);
        }
        Ok(())
    }

    pub(crate) fn is_loaded(&self, collection: &str) -> bool {
        self.collections.contains_key(collection)
    }

    pub(crate) fn load(&mut self, collection: &str, entries: Vec<(i64, IndexEntry)>) {
        let mut loaded = CollectionIndex::default();
        for (rowid, entry) in entries {
            loaded.upsert(rowid, entry);
        }
        self.collections.insert(collection.to_string(), loaded);
    }

    /// Records written (inserted or replaced) by the store, once committed.
    pub(crate) fn upsert(&mut self, collection: &str, written: Vec<(i64, IndexEntry)>) {
        if let Some(loaded) = self.collections.get_mut(collection) {
            for (rowid, entry) in written {
                loaded.upsert(rowid, entry);
            }
            loaded.compact_if_sparse();
        }
    }

    /// Records deleted by the store, once committed.
    pub(crate) fn remove(&mut self, collection: &str, rowids: &[i64]) {
        if let Some(loaded) = self.collections.get_mut(collection) {
            for rowid in rowids {
                loaded.remove(*rowid);
            }
            loaded.compact_if_sparse();
        }
    }

    pub(crate) fn drop_collection(&mut self, collection: &str) {
        self.collections.remove(collection);
    }

    /// The row ids of the records `filter` admits whose quantised similarity to `query` is
    /// among the `count` highest (all admitted ones when there are no more than `count`). `None`
    /// when the collection is not loaded.
    pub(crate) fn vector_candidates(
        &self,
        collection: &str,
        query: &[f32],
        filter: &RecordFilter,
        created_after: Option<&str>,
        count: usize,
    ) -> Option<Vec<i64>> {
        let loaded = self.collections.get(collection)?;
        let admitted = loaded.admission(filter, created_after);
        let (query, query_factor) = quantize(query);
        let comparable = query.len() == loaded.dimensions;
        let dimensions = loaded.dimensions.max(1);
        let dot = dot_kernel();
        let mut scored: Vec<(f32, i64)> = Vec::new();
        for (at, rowid) in loaded.rowids.iter().enumerate() {
            if !admitted(at) {
                continue;
            }
            let similarity = if comparable {
                let vector = &loaded.vectors[at * dimensions..(at + 1) * dimensions];
                dot(vector, &query) as f32 * loaded.factors[at] * query_factor
            } else {
                0.0
            };
            scored.push((similarity, *rowid));
        }
        if scored.len() > count && count > 0 {
            scored.select_nth_unstable_by(count - 1, |a, b| b.0.total_cmp(&a.0));
            scored.truncate(count);
        }
        Some(scored.into_iter().map(|(_, rowid)| rowid).collect())
    }

    /// The row ids of the `count` records `filter` admits that best match any word of `query`
    /// by BM25, best first (ties: the later written first). `None` when the collection is not
    /// loaded.
    pub(crate) fn text_candidates(
        &self,
        collection: &str,
        query: &str,
        filter: &RecordFilter,
        created_after: Option<&str>,
        count: usize,
    ) -> Option<Vec<i64>> {
        let loaded = self.collections.get(collection)?;
        let mut scored = loaded
            .text
            .scores(query, loaded.admission(filter, created_after));
        // Equal scores are common (records that share only common words), so the tie-break
        // must be cheap: the row id, which grows with every write.
        let newer_first = |a: &(usize, f32), b: &(usize, f32)| {
            b.1.total_cmp(&a.1)
                .then_with(|| loaded.rowids[b.0].cmp(&loaded.rowids[a.0]))
        };
        if scored.len() > count && count > 0 {
            scored.select_nth_unstable_by(count - 1, newer_first);
            scored.truncate(count);
        }
        scored.sort_by(newer_first);
        Some(
            scored
                .into_iter()
                .map(|(at, _)| loaded.rowids[at])
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ScopePath;

    fn entry(scope: &str, vector: &[f32]) -> IndexEntry {
        said(scope, vector, "")
    }

    fn said(scope: &str, vector: &[f32], content: &str) -> IndexEntry {
        IndexEntry::new(
            scope.into(),
            vec!["ops".into()],
            Some("writer".into()),
            false,
            "2026-01-01T00:00:00.000000Z".into(),
            vector,
            content,
        )
    }

    #[test]
    fn the_quantised_cosine_is_close_to_the_exact_one() {
        let a = [0.3f32, -0.7, 0.1, 0.9, -0.2];
        let b = [0.2f32, -0.5, 0.4, 0.8, 0.1];
        let exact = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
            / (a.iter().map(|x| x * x).sum::<f32>().sqrt()
                * b.iter().map(|x| x * x).sum::<f32>().sqrt());
        let (qa, fa) = quantize(&a);
        let (qb, fb) = quantize(&b);
        let approximate = dot(&qa, &qb) as f32 * fa * fb;
        assert!(
            (exact - approximate).abs() < 0.01,
            "{exact} vs {approximate}"
        );
        assert_eq!(quantize(&[0.0, 0.0]).1, 0.0);
    }

    #[test]
    fn the_cpu_s_dot_kernel_agrees_with_the_portable_one() {
        let a: Vec<i8> = (0..384)
            .map(|i| ((i * 37 % 255) as i16 - 127) as i8)
            .collect();
        let b: Vec<i8> = (0..384)
            .map(|i| ((i * 91 % 255) as i16 - 127) as i8)
            .collect();
        let extreme = vec![-127i8; 384];
        for (x, y) in [(&a, &b), (&extreme, &extreme), (&a, &extreme)] {
            assert_eq!(dot_kernel()(x, y), dot(x, y));
        }
    }

    #[test]
    fn the_filter_is_the_sql_rule() {
        let filter = RecordFilter::scope(ScopePath::parse("/tenant/1").unwrap());
        let scope = filter.scope.to_string();
        assert!(in_scope("/tenant/1", &filter, &scope));
        assert!(in_scope("/tenant/1/agent", &filter, &scope));
        assert!(!in_scope("/tenant/10", &filter, &scope));
        assert!(!in_scope("/tenant", &filter, &scope));
        let mut private = entry("/tenant/1", &[1.0]).meta;
        private.private = true;
        assert!(!private.admitted_by(&filter, None));
        let by_source = RecordFilter {
            source: Some("writer".into()),
            ..filter.clone()
        };
        assert!(private.admitted_by(&by_source, None));
        let other_category = RecordFilter {
            categories: vec!["sales".into()],
            ..by_source.clone()
        };
        assert!(!private.admitted_by(&other_category, None));
        assert!(
            !entry("/tenant/1", &[1.0])
                .meta
                .admitted_by(&filter, Some("2026-02-01T00:00:00.000000Z"))
        );
    }

    #[test]
    fn candidates_keep_the_closest_admitted_records() {
        let mut index = RecordIndex::default();
        let entries = [
            (1, entry("/a", &[1.0, 0.0])),
            (2, entry("/a", &[0.0, 1.0])),
            (3, entry("/a", &[0.9, 0.1])),
            (4, entry("/b", &[1.0, 0.0])),
        ];
        index.load("memory", entries.into_iter().collect());
        // A replaced record moves (here: out of the scope).
        index.upsert("memory", vec![(2, entry("/b", &[0.0, 1.0]))]);
        let filter = RecordFilter::scope(ScopePath::parse("/a").unwrap());
        let mut found = index
            .vector_candidates("memory", &[1.0, 0.0], &filter, None, 2)
            .unwrap();
        found.sort();
        assert_eq!(found, [1, 3]);
        let mut all = index
            .vector_candidates("memory", &[1.0, 0.0], &filter, None, 10)
            .unwrap();
        all.sort();
        assert_eq!(all, [1, 3]);
        index.remove("memory", &[1]);
        assert_eq!(
            index
                .vector_candidates("memory", &[1.0, 0.0], &filter, None, 1)
                .unwrap(),
            [3]
        );
        assert!(
            index
                .vector_candidates("other", &[1.0], &filter, None, 1)
                .is_none()
        );
    }

    #[test]
    fn text_candidates_rank_admitted_records_and_follow_writes() {
        let mut index = RecordIndex::default();
        index.load(
            "memory",
            vec![
                (1, said("/a", &[1.0], "the budget is due on Friday")),
                (2, said("/a", &[1.0], "the roadmap moved")),
                (3, said("/b", &[1.0], "the budget of the other tenant")),
            ],
        );
        let a = RecordFilter::scope(ScopePath::parse("/a").unwrap());
        let text = |index: &RecordIndex, query: &str| {
            index
                .text_candidates("memory", query, &a, None, 10)
                .unwrap()
        };
        assert_eq!(text(&index, "budget"), [1]);
        assert_eq!(text(&index, "the budget"), [1, 2]);
        // A replaced record is found by its new words only.
        index.upsert("memory", vec![(1, said("/a", &[1.0], "an invoice"))]);
        assert_eq!(text(&index, "budget"), Vec::<i64>::new());
        assert_eq!(text(&index, "invoice"), [1]);
        index.remove("memory", &[2]);
        assert_eq!(text(&index, "roadmap"), Vec::<i64>::new());
    }

    #[test]
    fn compaction_keeps_every_live_record_findable() {
        let mut index = RecordIndex::default();
        let records: Vec<(i64, IndexEntry)> = (0..3000)
            .map(|i| {
                (
                    i,
                    said("/a", &[1.0, i as f32], &format!("note {i} word{}", i % 7)),
                )
            })
            .collect();
        index.load("memory", records);
        let gone: Vec<i64> = (0..2000).collect();
        index.remove("memory", &gone);
        let loaded = &index.collections["memory"];
        assert_eq!((loaded.rowids.len(), loaded.forgotten), (1000, 0));
        let filter = RecordFilter::scope(ScopePath::root());
        for i in [2000i64, 2500, 2999] {
            let found = index
                .text_candidates("memory", &format!("note {i}"), &filter, None, 1)
                .unwrap();
            assert_eq!(found, [i]);
        }
        assert!(
            index
                .text_candidates("memory", "1999", &filter, None, 5)
                .unwrap()
                .is_empty()
        );
        let all = index
            .vector_candidates("memory", &[1.0, 0.0], &filter, None, 5000)
            .unwrap();
        assert_eq!(all.len(), 1000);
    }
}
