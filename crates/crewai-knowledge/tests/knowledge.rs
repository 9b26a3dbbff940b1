//! Knowledge over real files (the committed fixtures), a real SQLite store and a real local web
//! server: every reader, chunking, the hash skip, replacement of a changed file, the embedder
//! size check, malformed files and the private-address guard.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_knowledge::{
    ChunkSettings, Knowledge, KnowledgeError, KnowledgeOwner, KnowledgeSource, Reader,
};
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{MemoryStore, RecordFilter, ScopePath, SqliteMemoryStore};
use crewai_tools::builtin::HttpGetTool;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn store() -> Arc<SqliteMemoryStore> {
    Arc::new(SqliteMemoryStore::in_memory().unwrap())
}

fn knowledge(
    store: &Arc<SqliteMemoryStore>,
    folder: &Path,
    sources: Vec<KnowledgeSource>,
) -> Knowledge {
    Knowledge::builder(
        store.clone(),
        Arc::new(HashEmbedder::new(256)),
        KnowledgeOwner::Crew,
    )
    .folder(folder)
    .sources(sources)
    .build()
}

/// Every stored chunk of `collection`, in chunk order.
async fn chunks(store: &SqliteMemoryStore, collection: &str) -> Vec<(String, String, u64)> {
    let mut records = store
        .list(
            collection,
            &RecordFilter::everything_in(ScopePath::root()),
            1000,
            0,
        )
        .await
        .unwrap();
    records.sort_by_key(|r| (r.source.clone(), r.metadata["chunk_index"].as_u64()));
    records
        .into_iter()
        .map(|r| {
            let index = r.metadata["chunk_index"].as_u64().unwrap();
            (r.source.unwrap(), r.content, index)
        })
        .collect()
}

async fn text_of(file: &str) -> String {
    let store = store();
    let knowledge = knowledge(&store, &fixtures(), vec![KnowledgeSource::files([file])]);
    let report = knowledge.ingest().await.unwrap();
    assert_eq!(report.ingested, [file]);
    chunks(&store, "knowledge:crew")
        .await
        .into_iter()
        .map(|(_, content, _)| content)
        .collect::<Vec<_>>()
        .join("")
}

#[tokio::test]
async fn each_reader_reads_its_fixture() {
    let pdf = text_of("orbital-tea.pdf").await;
    for paragraph in [
        "founded in 2019 by three botanists in Porto",
        "return unopened tins within 30 days",
        "Lisbon warehouse dispatches orders every Tuesday",
    ] {
        assert!(pdf.contains(paragraph), "{pdf:?}");
    }
    assert_eq!(
        text_of("orders.csv").await,
        "order city status\n1001 Lisbon, PT shipped\n1002 Porto pending\n"
    );
    let xlsx = text_of("teas.xlsx").await;
    assert!(xlsx.starts_with("Sheet: Teas\n"), "{xlsx:?}");
    assert!(xlsx.contains("Nebula Oolong,12.5,Taiwan"), "{xlsx:?}");
    let json = text_of("catalog.json").await;
    assert!(
        json.contains(
            "company: Orbital Tea\nteas:\n  -\n    name: Nebula Oolong\n    caffeine: medium\n"
        ),
        "{json:?}"
    );
    assert!(
        text_of("faq.md")
            .await
            .contains("orders to the Azores take five working days")
    );
    assert_eq!(
        text_of("brewing.docx").await,
        "Brew Nebula Oolong at 90 degrees for three minutes.\nTea & biscuits: serve with almond shortbread.\n"
    );
    assert_eq!(
        text_of("notes.txt").await,
        "The tasting room opens at 10:00 on Saturdays.\n"
    );
}

#[tokio::test]
async fn a_named_reader_wins_over_the_extension() {
    let store = store();
    let as_text = knowledge(
        &store,
        &fixtures(),
        vec![KnowledgeSource::documents(Reader::Text, ["orders.csv"])],
    );
    as_text.ingest().await.unwrap();
    let stored = chunks(&store, "knowledge:crew").await;
    assert!(stored[0].1.starts_with("order,city,status\n"), "{stored:?}");
}

#[tokio::test]
async fn chunks_carry_their_source_index_and_metadata() {
    let store = store();
    let text = "abcdefghij".repeat(3);
    let source = KnowledgeSource::text(text)
        .chunking(ChunkSettings::new(12, 2).unwrap())
        .metadata("team", "ops".into());
    knowledge(&store, &fixtures(), vec![source])
        .ingest()
        .await
        .unwrap();
    let stored = chunks(&store, "knowledge:crew").await;
    let contents: Vec<&str> = stored.iter().map(|(_, c, _)| c.as_str()).collect();
    assert_eq!(contents, ["abcdefghijab", "abcdefghijab", "abcdefghij"]);
    assert_eq!(
        stored.iter().map(|(_, _, i)| *i).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let records = store
        .list(
            "knowledge:crew",
            &RecordFilter::everything_in(ScopePath::root()),
            10,
            0,
        )
        .await
        .unwrap();
    assert!(
        records
            .iter()
            .all(|r| r.metadata["team"] == "ops" && r.metadata["source"] == "string:0")
    );
}

#[tokio::test]
async fn unchanged_files_are_skipped_and_changed_ones_replaced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.txt"), "Returns within 30 days.").unwrap();
    let store = store();
    let knowledge = knowledge(
        &store,
        dir.path(),
        vec![KnowledgeSource::files(["policy.txt"])],
    );
    assert_eq!(knowledge.ingest().await.unwrap().ingested, ["policy.txt"]);
    let second = knowledge.ingest().await.unwrap();
    assert_eq!(second.unchanged, ["policy.txt"]);
    assert_eq!(second.chunks, 0);

    std::fs::write(dir.path().join("policy.txt"), "Returns within 14 days.").unwrap();
    assert_eq!(knowledge.ingest().await.unwrap().ingested, ["policy.txt"]);
    let stored = chunks(&store, "knowledge:crew").await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].1, "Returns within 14 days.");

    // Other chunk settings make the same bytes new content.
    let rechunked = knowledge_with(
        &store,
        dir.path(),
        KnowledgeSource::files(["policy.txt"]).chunking(ChunkSettings::new(10, 0).unwrap()),
    );
    assert_eq!(rechunked.ingest().await.unwrap().chunks, 3);
    assert_eq!(chunks(&store, "knowledge:crew").await.len(), 3);
}

fn knowledge_with(
    store: &Arc<SqliteMemoryStore>,
    folder: &Path,
    source: KnowledgeSource,
) -> Knowledge {
    knowledge(store, folder, vec![source])
}

#[tokio::test]
async fn queries_rank_by_meaning_keep_the_threshold_and_search_own_collections() {
    let store = store();
    let knowledge = Knowledge::builder(
        store.clone(),
        Arc::new(HashEmbedder::new(256)),
        KnowledgeOwner::Agent("Tea Expert".into()),
    )
    .folder(fixtures())
    .source(KnowledgeSource::text(
        "Nebula Oolong is roasted over cherry wood.",
    ))
    .source(KnowledgeSource::text("The office cat is called Miso.").collection_name("trivia"))
    .build();
    assert_eq!(
        knowledge.collections(),
        ["knowledge:agent:tea_expert", "knowledge:agent:trivia"]
    );
    knowledge.ingest().await.unwrap();
    let found = knowledge
        .query(&["what is the office cat called".into()], 5, 0.2)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].content, "The office cat is called Miso.");
    assert_eq!(found[0].collection, "knowledge:agent:trivia");
    let both = knowledge
        .query(&["oolong".into(), "cat".into()], 5, 0.0)
        .await
        .unwrap();
    assert_eq!(both.len(), 2);
    assert!(both[0].score >= both[1].score);
    assert_eq!(knowledge.reset().await.unwrap(), 2);
    assert!(
        knowledge
            .query(&["cat".into()], 5, -1.0)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn queries_embedded_once_search_every_knowledge_of_their_model() {
    let store = store();
    let of = |owner, text: &str, dims| {
        Knowledge::builder(store.clone(), Arc::new(HashEmbedder::new(dims)), owner)
            .source(KnowledgeSource::text(text))
            .build()
    };
    let agent = of(
        KnowledgeOwner::Agent("Tea Expert".into()),
        "Nebula Oolong is roasted over cherry wood.",
        256,
    );
    let crew = of(
        KnowledgeOwner::Crew,
        "The Lisbon warehouse ships on Tuesdays.",
        256,
    );
    agent.ingest().await.unwrap();
    crew.ingest().await.unwrap();
    let queries = ["which days does the warehouse ship".to_string()];
    let embedded = agent.embed_queries(&queries).await.unwrap();
    assert_eq!(embedded.model(), "feature-hash");
    assert!(embedded.fit(&crew));
    for knowledge in [&agent, &crew] {
        assert_eq!(
            knowledge.query_embedded(&embedded, 3, 0.0).await.unwrap(),
            knowledge.query(&queries, 3, 0.0).await.unwrap()
        );
    }
    assert_eq!(
        crew.query_embedded(&embedded, 3, 0.2).await.unwrap()[0].content,
        "The Lisbon warehouse ships on Tuesdays."
    );

    // Vectors of another size would not compare with the stored ones.
    let wider = of(KnowledgeOwner::Tool("wide".into()), "Anything.", 512);
    assert!(!embedded.fit(&wider));
    let error = wider.query_embedded(&embedded, 3, 0.0).await.unwrap_err();
    assert!(
        matches!(error, KnowledgeError::QueryEmbedder { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "queries embedded with feature-hash (256 dimensions) cannot search knowledge embedded with feature-hash (512 dimensions)"
    );
}

#[tokio::test]
async fn another_embedder_on_a_collection_names_the_reset_command() {
    let store = store();
    let source = || KnowledgeSource::text("Shipping is free over 40 euros.");
    knowledge(&store, &fixtures(), vec![source()])
        .ingest()
        .await
        .unwrap();
    let wider = Knowledge::builder(
        store.clone(),
        Arc::new(HashEmbedder::new(512)),
        KnowledgeOwner::Crew,
    )
    .source(source())
    .build();
    let error = wider.ingest().await.unwrap_err();
    assert!(
        matches!(
            error,
            KnowledgeError::DimensionMismatch {
                stored: 256,
                found: 512,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("crewai reset-memories -kn"),
        "{error}"
    );
    let error = wider.query(&["shipping".into()], 3, 0.0).await.unwrap_err();
    assert!(
        error.to_string().contains("crewai reset-memories -kn"),
        "{error}"
    );

    let agent = |dims| {
        Knowledge::builder(
            store.clone(),
            Arc::new(HashEmbedder::new(dims)),
            KnowledgeOwner::Agent("Writer".into()),
        )
        .source(source())
        .build()
    };
    agent(256).ingest().await.unwrap();
    let error = agent(128).ingest().await.unwrap_err();
    assert!(
        error.to_string().contains("crewai reset-memories -akn"),
        "{error}"
    );
}

#[tokio::test]
async fn malformed_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.pdf"),
        b"%PDF-1.4\nthis is not a pdf at all",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("broken.xlsx"),
        b"PK\x03\x04 not really a workbook",
    )
    .unwrap();
    std::fs::write(dir.path().join("broken.json"), b"{\"a\": ").unwrap();
    std::fs::write(dir.path().join("broken.docx"), b"plain text").unwrap();
    let store = store();
    for (file, says) in [
        ("broken.pdf", "is not a readable PDF"),
        ("broken.xlsx", "is not a readable spreadsheet"),
        ("broken.json", "is not valid JSON"),
        ("broken.docx", "is not a readable DOCX document"),
        ("missing.txt", "cannot be read"),
    ] {
        let error = knowledge(&store, dir.path(), vec![KnowledgeSource::files([file])])
            .ingest()
            .await
            .unwrap_err();
        let shown = error.to_string();
        assert!(
            shown.contains(file) && shown.contains(says),
            "{file}: {shown}"
        );
    }
}

async fn serve_page() -> String {
    use axum::response::Html;
    let app = axum::Router::new().route(
        "/pricing",
        axum::routing::get(|| async {
            Html("<html><body><h1>Pricing</h1><p>Tins cost 12 euros.</p></body></html>")
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/pricing")
}

#[tokio::test]
async fn web_pages_to_private_addresses_are_refused_unless_allowed() {
    let url = serve_page().await;
    let store = store();
    let refused = knowledge(
        &store,
        &fixtures(),
        vec![KnowledgeSource::urls([url.clone()])],
    )
    .ingest()
    .await
    .unwrap_err();
    let shown = refused.to_string();
    assert!(matches!(refused, KnowledgeError::Web { .. }), "{refused:?}");
    assert!(
        shown.contains(&url) && shown.contains("loopback"),
        "{shown}"
    );

    let allowed = Knowledge::builder(
        store.clone(),
        Arc::new(HashEmbedder::new(256)),
        KnowledgeOwner::Crew,
    )
    .source(KnowledgeSource::files([url.clone()]))
    .web_fetcher(HttpGetTool::new().allow_private_network(true))
    .build();
    assert_eq!(allowed.ingest().await.unwrap().ingested, [url]);
    let stored = chunks(&store, "knowledge:crew").await;
    assert!(stored[0].1.contains("Tins cost 12 euros."), "{stored:?}");
    assert!(!stored[0].1.contains("<p>"), "{stored:?}");
}
