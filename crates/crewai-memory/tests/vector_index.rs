//! The SQLite store's vector search through its in-memory pre-filter: the same hits as an
//! exact scan over more records than the rerank takes, and a cache that follows the store's
//! own writes and another connection's (a second process on the same file).

use chrono::Utc;
use crewai_memory::{MemoryRecord, MemoryStore, RecordFilter, ScopePath, SqliteMemoryStore};

const DIMENSIONS: usize = 32;

/// A dense pseudo-random vector (a linear congruential sequence), the same for the same seed.
fn vector(seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..DIMENSIONS)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        })
        .collect()
}

fn record(i: u64, scope: &str) -> MemoryRecord {
    let now = Utc::now();
    MemoryRecord {
        id: format!("r{i}"),
        content: format!("record {i}"),
        scope: ScopePath::parse(scope).unwrap(),
        categories: Vec::new(),
        metadata: Default::default(),
        importance: 0.5,
        created_at: now,
        last_accessed: now,
        source: None,
        private: false,
        embedding: vector(i),
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    f64::from(dot / (norm(a) * norm(b)))
}

async fn ids(store: &SqliteMemoryStore, query: &[f32], scope: &str, limit: usize) -> Vec<String> {
    store
        .vector_search(
            "memory",
            query,
            &RecordFilter::scope(ScopePath::parse(scope).unwrap()),
            limit,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|hit| hit.record.id)
        .collect()
}

#[tokio::test]
async fn hits_are_the_exact_scans_over_more_records_than_the_rerank_takes() {
    let store = SqliteMemoryStore::in_memory().unwrap();
    store
        .open_collection("memory", "test", DIMENSIONS)
        .await
        .unwrap();
    let records: Vec<MemoryRecord> = (0..3000)
        .map(|i| {
            record(
                i,
                if i % 3 == 0 {
                    "/tenant/1"
                } else {
                    "/tenant/10"
                },
            )
        })
        .collect();
    store.insert("memory", &records).await.unwrap();
    for seed in 10_000..10_020 {
        let query = vector(seed);
        for (scope, admitted) in [("/", 0..3), ("/tenant/1", 0..1)] {
            let mut exact: Vec<(f64, &str)> = records
                .iter()
                .enumerate()
                .filter(|(i, _)| admitted.contains(&(i % 3)))
                .map(|(_, r)| (cosine(&query, &r.embedding), r.id.as_str()))
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let expected: Vec<&str> = exact.iter().take(10).map(|(_, id)| *id).collect();
            assert_eq!(ids(&store, &query, scope, 10).await, expected, "{scope}");
        }
    }
}

#[tokio::test]
async fn the_index_follows_this_stores_writes_and_another_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let mine = SqliteMemoryStore::open(&path).unwrap();
    let other = SqliteMemoryStore::open(&path).unwrap();
    mine.open_collection("memory", "test", DIMENSIONS)
        .await
        .unwrap();
    mine.insert("memory", &[record(1, "/a"), record(2, "/a")])
        .await
        .unwrap();
    let target = vector(7);
    assert_eq!(ids(&mine, &target, "/a", 5).await.len(), 2);

    // Another connection's insert: a record at the query itself, so it ranks first.
    let mut closest = record(3, "/a");
    closest.embedding = target.clone();
    other.insert("memory", &[closest]).await.unwrap();
    assert_eq!(ids(&mine, &target, "/a", 1).await, ["r3"]);

    // This store's own replace (moved out of the scope) and delete.
    let mut moved = record(3, "/b");
    moved.embedding = target.clone();
    assert_eq!(
        mine.replace(
            "memory",
            &[moved],
            &RecordFilter::everything_in(ScopePath::root())
        )
        .await
        .unwrap(),
        1
    );
    assert!(
        !ids(&mine, &target, "/a", 5)
            .await
            .contains(&"r3".to_string())
    );
    assert_eq!(ids(&mine, &target, "/b", 5).await, ["r3"]);
    mine.delete(
        "memory",
        Some(&["r1".to_string()]),
        &RecordFilter::everything_in(ScopePath::root()),
    )
    .await
    .unwrap();
    assert_eq!(ids(&mine, &target, "/a", 5).await, ["r2"]);

    // Another connection's delete, and a dropped collection.
    other
        .delete(
            "memory",
            None,
            &RecordFilter::everything_in(ScopePath::root()),
        )
        .await
        .unwrap();
    assert!(ids(&mine, &target, "/", 5).await.is_empty());
    mine.insert("memory", &[record(4, "/a")]).await.unwrap();
    assert_eq!(ids(&mine, &target, "/", 5).await, ["r4"]);
    assert_eq!(mine.drop_collection("memory").await.unwrap(), 1);
    assert!(ids(&mine, &target, "/", 5).await.is_empty());
}
