//! Ingest and recall on crewai-memory's SQLite store (a file in a temporary folder, WAL, as a
//! project's `.crewai/memory.db`), printed as a table:
//! `cargo bench -p crewai-memory --bench ingest_recall`.
//!
//! 1. **Store only** (embeddings computed before the clock starts): `BENCH_RECORDS` records
//!    (100,000) inserted in batches of 1,000, then `BENCH_QUERIES` shallow recalls (200) over
//!    all of them and under one tenant's scope, each query's vector looked up, not computed:
//!    what the store costs, excluding embedding.
//! 2. **Offline embedder** (all-MiniLM-L6-v2 in process; skipped with a note when it is not
//!    pulled): `BENCH_CHUNKS` chunks (10,000) remembered through `Memory::remember_many` in
//!    batches of 100 (embedding, batch dedup, the consolidation search, the insert), then
//!    shallow recalls, the query's embedding included.
//!
//! `BENCH_CHUNKS=0` skips the offline rows. Run it on a quiet machine: the figures are wall-clock times on whatever cores are free.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crewai_llm::embeddings::{Embedder, HashEmbedder};
use crewai_llm::{LlmError, async_trait};
use crewai_local::{ALL_MINILM_L6_V2, LocalEmbedder, models_dir};
use crewai_memory::{
    DEFAULT_COLLECTION, Memory, MemoryConfig, MemoryRecord, MemoryStore, RecallQuery, RecordFilter,
    RememberOptions, ScopePath, SqliteMemoryStore,
};

/// MiniLM's size, so the store-only run moves the same bytes as the offline one.
const DIMENSIONS: usize = 384;
const TENANTS: usize = 100;

const SUBJECTS: &[&str] = &[
    "invoice",
    "launch",
    "deployment",
    "budget",
    "customer",
    "contract",
    "roadmap",
    "incident",
    "survey",
    "hiring",
    "migration",
    "backup",
    "review",
    "release",
    "audit",
    "forecast",
];
const VERBS: &[&str] = &[
    "moved to",
    "is due on",
    "was approved for",
    "needs sign-off by",
    "slipped to",
    "closes on",
];
const WHENS: &[&str] = &[
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "the end of March",
    "next quarter",
    "week 12",
    "the first of May",
    "the spring offsite",
];

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `i`-th statement: a few words from fixed lists, so statements share words and meaning
/// the way a project's memories do.
fn statement(i: usize) -> String {
    let subject = SUBJECTS[i % SUBJECTS.len()];
    let verb = VERBS[(i / SUBJECTS.len()) % VERBS.len()];
    let when = WHENS[(i / 7) % WHENS.len()];
    format!(
        "The {subject} of project {} {verb} {when} (note {i}).",
        i % 997
    )
}

fn scope_of(i: usize) -> ScopePath {
    ScopePath::parse(&format!("/tenant/{}/agent/{}", i % TENANTS, i % 7))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn query(i: usize) -> String {
    let subject = SUBJECTS[(i * 5) % SUBJECTS.len()];
    let when = WHENS[(i * 3) % WHENS.len()];
    format!("when is the {subject} due, {when}?")
}

/// Serves vectors computed before the clock started, so a recall's time is the store's.
struct Precomputed {
    vectors: HashMap<String, Vec<f32>>,
}

#[async_trait]
impl Embedder for Precomputed {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        texts
            .iter()
            .map(|t| {
                self.vectors
                    .get(t)
                    .cloned()
                    .ok_or_else(|| LlmError::Config(format!("no precomputed vector for {t:?}")))
            })
            .collect()
    }
    fn dimensions(&self) -> Option<usize> {
        Some(DIMENSIONS)
    }
    fn model(&self) -> &str {
        "feature-hash"
    }
}

/// p50 and p99 of `times`.
fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| {
        let index = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1;
        times[index]
    };
    (at(0.50), at(0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

struct Row {
    phase: String,
    count: usize,
    total: Duration,
    p50: Option<Duration>,
    p99: Option<Duration>,
}

impl Row {
    fn print(&self) {
        let rate = self.count as f64 / self.total.as_secs_f64().max(1e-9);
        let (p50, p99) = match (self.p50, self.p99) {
            (Some(a), Some(b)) => (ms(a), ms(b)),
            _ => ("".to_string(), "".to_string()),
        };
        println!(
            "| {} | {} | {:.2} s | {rate:.0}/s | {p50} | {p99} |",
            self.phase,
            self.count,
            self.total.as_secs_f64()
        );
    }
}

async fn timed_recalls(
    memory: &Memory,
    queries: &[String],
    scope: Option<ScopePath>,
) -> (Duration, Duration, Duration) {
    let mut times = Vec::with_capacity(queries.len());
    let started = Instant::now();
    for text in queries {
        let mut recall = RecallQuery::new(text.clone()).shallow().limit(5);
        recall.scope = scope.clone();
        let began = Instant::now();
        let found = memory
            .recall(recall)
            .await
            .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
        times.push(began.elapsed());
        assert!(!found.is_empty(), "a recall found nothing for {text:?}");
    }
    let total = started.elapsed();
    let (p50, p99) = percentiles(&mut times);
    (total, p50, p99)
}

async fn store_only(records: usize, queries: usize) -> Vec<Row> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(
        SqliteMemoryStore::open(&dir.path().join("memory.db")).unwrap_or_else(|e| panic!("{e}")),
    );
    let hashing = HashEmbedder::new(DIMENSIONS);
    let now = chrono::Utc::now();
    let all: Vec<MemoryRecord> = (0..records)
        .map(|i| MemoryRecord {
            id: format!("r{i}"),
            content: statement(i),
            scope: scope_of(i),
            categories: vec![SUBJECTS[i % SUBJECTS.len()].to_string()],
            metadata: Default::default(),
            importance: 0.5,
            created_at: now,
            last_accessed: now,
            source: None,
            private: false,
            embedding: hashing.embed_one(&statement(i)),
        })
        .collect();
    let texts: Vec<String> = (0..queries).map(query).collect();
    let vectors: HashMap<String, Vec<f32>> = texts
        .iter()
        .map(|t| (t.clone(), hashing.embed_one(t)))
        .collect();
    store
        .open_collection(DEFAULT_COLLECTION, "feature-hash", DIMENSIONS)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    for batch in all.chunks(1000) {
        store
            .insert(DEFAULT_COLLECTION, batch)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let inserted = started.elapsed();
    let breakdown = search_breakdown(&store, &texts, &vectors).await;
    let memory = Memory::builder(store, Arc::new(Precomputed { vectors }))
        .config(MemoryConfig::default().read_only(true))
        .build();
    let (total, p50, p99) = timed_recalls(&memory, &texts, None).await;
    let tenant = ScopePath::parse("/tenant/42").ok();
    let (tenant_total, tenant_p50, tenant_p99) = timed_recalls(&memory, &texts, tenant).await;
    let mut rows = vec![
        Row {
            phase: format!("store: insert {records} precomputed records (batches of 1,000)"),
            count: records,
            total: inserted,
            p50: None,
            p99: None,
        },
        Row {
            phase: format!("store: shallow recall over {records} records, no embedding"),
            count: queries,
            total,
            p50: Some(p50),
            p99: Some(p99),
        },
        Row {
            phase: format!(
                "store: shallow recall under one tenant ({} records), no embedding",
                records / TENANTS
            ),
            count: queries,
            total: tenant_total,
            p50: Some(tenant_p50),
            p99: Some(tenant_p99),
        },
    ];
    rows.extend(breakdown);
    rows
}

/// Where a shallow recall's store time goes: its vector search and its full-text search alone,
/// over every record, with the recall's candidate count (5 × the default oversampling of 3).
async fn search_breakdown(
    store: &SqliteMemoryStore,
    texts: &[String],
    vectors: &HashMap<String, Vec<f32>>,
) -> Vec<Row> {
    const CANDIDATES: usize = 15;
    let filter = RecordFilter::scope(ScopePath::root());
    let mut by_vector = Vec::with_capacity(texts.len());
    let mut by_text = Vec::with_capacity(texts.len());
    for text in texts {
        let began = Instant::now();
        store
            .vector_search(DEFAULT_COLLECTION, &vectors[text], &filter, CANDIDATES)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        by_vector.push(began.elapsed());
        let began = Instant::now();
        store
            .text_search(DEFAULT_COLLECTION, text, &filter, CANDIDATES)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        by_text.push(began.elapsed());
    }
    [("vector", by_vector), ("full-text", by_text)]
        .into_iter()
        .map(|(what, mut times)| {
            let total = times.iter().sum();
            let (p50, p99) = percentiles(&mut times);
            Row {
                phase: format!("store: its {what} search alone, {CANDIDATES} candidates"),
                count: texts.len(),
                total,
                p50: Some(p50),
                p99: Some(p99),
            }
        })
        .collect()
}

async fn offline(chunks: usize, queries: usize) -> Vec<Row> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(
        SqliteMemoryStore::open(&dir.path().join("memory.db")).unwrap_or_else(|e| panic!("{e}")),
    );
    let embedder =
        LocalEmbedder::new(&ALL_MINILM_L6_V2, &models_dir()).unwrap_or_else(|e| panic!("{e}"));
    embedder
        .preload()
        .await
        .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
    let memory = Memory::builder(store, Arc::new(embedder)).build();
    let texts: Vec<String> = (0..chunks).map(statement).collect();
    let started = Instant::now();
    for (n, batch) in texts.chunks(100).enumerate() {
        memory
            .remember_many(batch, RememberOptions::default().scope(scope_of(n)))
            .await
            .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
    }
    let ingested = started.elapsed();
    let questions: Vec<String> = (0..queries).map(query).collect();
    let (total, p50, p99) = timed_recalls(&memory, &questions, None).await;
    vec![
        Row {
            phase: format!(
                "offline: remember {chunks} chunks (MiniLM embedding, dedup, consolidation search, insert)"
            ),
            count: chunks,
            total: ingested,
            p50: None,
            p99: None,
        },
        Row {
            phase: format!(
                "offline: shallow recall over {chunks} chunks, query embedding included"
            ),
            count: queries,
            total,
            p50: Some(p50),
            p99: Some(p99),
        },
    ]
}

fn main() {
    let records = env_count("BENCH_RECORDS", 100_000);
    let chunks = env_count("BENCH_CHUNKS", 10_000);
    let queries = env_count("BENCH_QUERIES", 200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    println!("| phase | n | total | rate | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    for row in runtime.block_on(store_only(records, queries)) {
        row.print();
    }
    if chunks == 0 {
        eprintln!("BENCH_CHUNKS=0: the offline rows are skipped");
    } else if ALL_MINILM_L6_V2.is_pulled(&models_dir()) {
        for row in runtime.block_on(offline(chunks, queries)) {
            row.print();
        }
    } else {
        eprintln!(
            "the offline rows need all-MiniLM-L6-v2: run `cargo run -q -p crewai-cli -- models pull minilm`"
        );
    }
}
