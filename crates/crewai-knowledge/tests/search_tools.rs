//! The knowledge search tools over the committed fixtures, a real SQLite store and a real local
//! web server: a fixed source and a source given per call, one collection per source, the XML
//! reader, a directory, a web page behind the private-address guard, re-ingestion skipped, and
//! the caller's embedding layer wrapping every embedding call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use crewai_knowledge::{KnowledgeSearchTool, SearchToolClass, SearchToolConfig};
use crewai_llm::LlmError;
use crewai_llm::embeddings::{Embedder, HashEmbedder};
use crewai_memory::{MemoryStore, SqliteMemoryStore};
use crewai_tools::{EmbeddingLayer, Tool, ToolContext, ToolError};
use serde_json::json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn tool(store: &Arc<SqliteMemoryStore>, config: SearchToolConfig) -> KnowledgeSearchTool {
    KnowledgeSearchTool::new(
        config.similarity_threshold(0.05),
        store.clone(),
        Arc::new(HashEmbedder::new(256)),
        fixtures(),
    )
}

async fn run(tool: &KnowledgeSearchTool, args: serde_json::Value) -> String {
    tool.run(args, &ToolContext::new())
        .await
        .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)))
        .to_text()
}

#[tokio::test]
async fn a_fixed_source_asks_only_for_the_query_and_answers_from_it() {
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let xml = tool(
        &store,
        SearchToolConfig::new(SearchToolClass::Xml).source("stock.xml"),
    );
    assert_eq!(xml.name(), "Search a XML's content");
    assert_eq!(xml.parameters()["required"], json!(["search_query"]));
    assert!(xml.description().contains("stock.xml"));
    let found = run(&xml, json!({"search_query": "when is sencha in stock"})).await;
    assert!(
        found.contains("Sencha is back in stock on Monday & ships from Porto."),
        "{found}"
    );
    assert!(found.contains("[1] stock.xml"), "{found}");
    let collections = store.collections().await.unwrap();
    assert_eq!(collections.len(), 1);
    assert_eq!(collections[0].name, xml.collection("stock.xml"));
}

#[tokio::test]
async fn without_a_source_each_call_names_its_document_in_a_collection_of_its_own() {
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let csv = tool(&store, SearchToolConfig::new(SearchToolClass::Csv));
    assert_eq!(csv.parameters()["required"], json!(["search_query", "csv"]));
    let found = run(
        &csv,
        json!({"search_query": "Porto pending", "csv": "orders.csv"}),
    )
    .await;
    assert!(found.contains("1002 Porto pending"), "{found}");
    let txt = tool(&store, SearchToolConfig::new(SearchToolClass::Txt));
    let found = run(
        &txt,
        json!({"search_query": "tasting room", "txt": "notes.txt"}),
    )
    .await;
    assert!(found.contains("tasting room opens"), "{found}");
    assert!(!found.contains("Porto"), "{found}");
    assert_eq!(store.collections().await.unwrap().len(), 2);

    let missing = csv
        .run(json!({"search_query": "x"}), &ToolContext::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&missing, ToolError::InvalidArguments(why) if why.contains("`csv`")),
        "{missing:?}"
    );
    let outside = csv
        .run(
            json!({"search_query": "x", "csv": "../../Cargo.toml"}),
            &ToolContext::new(),
        )
        .await
        .unwrap_err();
    assert!(
        crewai_llm::error_chain(&outside).contains("outside the knowledge folder"),
        "{}",
        crewai_llm::error_chain(&outside)
    );
}

#[tokio::test]
async fn a_directory_is_searched_across_its_files() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("docs/deep")).unwrap();
    std::fs::write(
        root.path().join("docs/a.md"),
        "# Shipping\nParcels leave on Tuesdays.",
    )
    .unwrap();
    std::fs::write(
        root.path().join("docs/deep/b.txt"),
        "Gift wrapping costs two euros.",
    )
    .unwrap();
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let directory = KnowledgeSearchTool::new(
        SearchToolConfig::new(SearchToolClass::Directory)
            .source("docs")
            .similarity_threshold(0.05),
        store.clone(),
        Arc::new(HashEmbedder::new(256)),
        root.path(),
    );
    let found = run(&directory, json!({"search_query": "gift wrapping cost"})).await;
    assert!(found.contains("docs/deep/b.txt"), "{found}");
    assert!(found.contains("Gift wrapping costs two euros."), "{found}");
}

/// Counts the texts embedded through it.
struct Counting {
    inner: Arc<dyn Embedder>,
    texts: Arc<AtomicUsize>,
}

#[async_trait]
impl Embedder for Counting {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).await
    }

    fn dimensions(&self) -> Option<usize> {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}

#[tokio::test]
async fn every_embedding_goes_through_the_callers_layer_and_unchanged_files_are_not_embedded_again()
{
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let txt = tool(
        &store,
        SearchToolConfig::new(SearchToolClass::Txt).source("notes.txt"),
    );
    let texts = Arc::new(AtomicUsize::new(0));
    let counted = texts.clone();
    let context = ToolContext::new().with_embedding_layer(EmbeddingLayer::new(move |inner| {
        Arc::new(Counting {
            inner,
            texts: counted.clone(),
        })
    }));
    for _ in 0..2 {
        txt.run(json!({"search_query": "tasting room"}), &context)
            .await
            .unwrap();
    }
    // The file's one chunk once, then one query per call.
    assert_eq!(texts.load(Ordering::SeqCst), 3);
}

async fn serve_docs() -> String {
    use axum::response::Html;
    let app = axum::Router::new().route(
        "/docs",
        axum::routing::get(|| async {
            Html("<html><body><h1>API</h1><p>Call brew() with a temperature in Celsius.</p></body></html>")
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/docs")
}

#[tokio::test]
async fn web_tools_read_pages_through_the_private_address_guard() {
    let url = serve_docs().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let guarded = tool(&store, SearchToolConfig::new(SearchToolClass::Website));
    let refused = guarded
        .run(
            json!({"search_query": "brew temperature", "website": url}),
            &ToolContext::new(),
        )
        .await
        .unwrap_err();
    assert!(
        crewai_llm::error_chain(&refused).contains("loopback"),
        "{}",
        crewai_llm::error_chain(&refused)
    );
    let args = json!({"docs_url": url, "allow_private_network": true});
    let config =
        SearchToolConfig::from_args(SearchToolClass::CodeDocs, args.as_object().unwrap()).unwrap();
    let docs = tool(&store, config);
    let found = run(&docs, json!({"search_query": "brew temperature"})).await;
    assert!(
        found.contains("Call brew() with a temperature in Celsius."),
        "{found}"
    );
}
