//! [`Knowledge`]: an owner's sources, ingested as chunks into collections of a
//! [`MemoryStore`] and searched by meaning.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use crewai_llm::embeddings::Embedder;
use crewai_memory::{MemoryError, MemoryRecord, MemoryStore, RecordFilter, ScopePath};
use crewai_tools::ToolContext;
use crewai_tools::builtin::HttpGetTool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::KnowledgeError;
use crate::read::read_text;
use crate::source::{Document, KnowledgeSource, Location, Reader};

/// Every knowledge collection's name starts with this, so the store's memory collections and
/// its knowledge ones are told apart.
pub const COLLECTION_PREFIX: &str = "knowledge:";
/// The folder, inside a project, that knowledge file paths are relative to (as CrewAI's).
pub const KNOWLEDGE_DIR: &str = "knowledge";
/// The metadata key of the content hash each chunk carries (what makes re-ingestion skip).
pub const CONTENT_HASH_KEY: &str = "content_hash";
/// How many chunks go to the embedder at once.
const EMBED_BATCH: usize = 64;

/// Who knowledge belongs to, which names its collection (CrewAI: the crew's is `crew`, an
/// agent's is its role) and the command that clears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KnowledgeOwner {
    Crew,
    /// An agent, by role.
    Agent(String),
    /// A search tool over its own files, by the tool's name.
    Tool(String),
}

/// The kind of owner a stored collection belongs to (read back from its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CollectionKind {
    Crew,
    Agent,
    Tool,
}

impl KnowledgeOwner {
    fn kind(&self) -> CollectionKind {
        match self {
            KnowledgeOwner::Crew => CollectionKind::Crew,
            KnowledgeOwner::Agent(_) => CollectionKind::Agent,
            KnowledgeOwner::Tool(_) => CollectionKind::Tool,
        }
    }

    /// The stored collection for this owner, or for a source's own `collection_name`:
    /// `knowledge:crew`, `knowledge:crew:<name>`, `knowledge:agent:<role or name>`,
    /// `knowledge:tool:<tool or name>` (names made safe by
    /// [`ScopePath::segment_from_name`]).
    ///
    /// ```
    /// use crewai_knowledge::KnowledgeOwner;
    /// assert_eq!(KnowledgeOwner::Crew.collection(None), "knowledge:crew");
    /// assert_eq!(KnowledgeOwner::Agent("Senior Analyst".into()).collection(None), "knowledge:agent:senior_analyst");
    /// assert_eq!(KnowledgeOwner::Crew.collection(Some("Sales")), "knowledge:crew:sales");
    /// ```
    pub fn collection(&self, name: Option<&str>) -> String {
        let segment = |name: &str| ScopePath::segment_from_name(name).segments().concat();
        let kind = collection_kind_name(self.kind());
        let named = match (self, name) {
            (_, Some(name)) => Some(segment(name)),
            (KnowledgeOwner::Crew, None) => None,
            (KnowledgeOwner::Agent(role), None) => Some(segment(role)),
            (KnowledgeOwner::Tool(tool), None) => Some(segment(tool)),
        };
        match named {
            Some(named) => format!("{COLLECTION_PREFIX}{kind}:{named}"),
            None => format!("{COLLECTION_PREFIX}{kind}"),
        }
    }

    /// The command that clears this owner's knowledge.
    pub fn reset_command(&self) -> &'static str {
        reset_command(self.kind())
    }
}

fn collection_kind_name(kind: CollectionKind) -> &'static str {
    match kind {
        CollectionKind::Crew => "crew",
        CollectionKind::Agent => "agent",
        CollectionKind::Tool => "tool",
    }
}

/// The command that clears collections of `kind` (a tool's files count as crew knowledge).
pub fn reset_command(kind: CollectionKind) -> &'static str {
    match kind {
        CollectionKind::Crew | CollectionKind::Tool => "crewai reset-memories -kn",
        CollectionKind::Agent => "crewai reset-memories -akn",
    }
}

/// Which owner a stored collection is knowledge of (`None`: not a knowledge collection).
///
/// ```
/// use crewai_knowledge::{CollectionKind, collection_kind};
/// assert_eq!(collection_kind("knowledge:agent:writer"), Some(CollectionKind::Agent));
/// assert_eq!(collection_kind("knowledge:crew"), Some(CollectionKind::Crew));
/// assert_eq!(collection_kind("memory"), None);
/// ```
pub fn collection_kind(collection: &str) -> Option<CollectionKind> {
    let rest = collection.strip_prefix(COLLECTION_PREFIX)?;
    let kind = rest.split(':').next()?;
    [
        CollectionKind::Crew,
        CollectionKind::Agent,
        CollectionKind::Tool,
    ]
    .into_iter()
    .find(|k| collection_kind_name(*k) == kind)
}

/// CrewAI's `KnowledgeConfig`: how many snippets a task's prompt gets, and how close (cosine
/// similarity, -1 to 1) a snippet must be to the query.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KnowledgeConfig {
    pub results_limit: usize,
    pub score_threshold: f64,
}

impl Default for KnowledgeConfig {
    fn default() -> Self {
        KnowledgeConfig {
            results_limit: 5,
            score_threshold: 0.6,
        }
    }
}

/// A chunk found by a query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeSnippet {
    pub content: String,
    /// Cosine similarity to the closest query.
    pub score: f64,
    /// The document it comes from: a path in the knowledge folder, an address, `string:<n>`.
    pub source: String,
    /// The chunk's metadata: the source's, plus `source`, `chunk_index` and `content_hash`.
    pub metadata: Map<String, Value>,
    pub collection: String,
}

/// Search queries embedded by one model ([`Knowledge::embed_queries`]), for every knowledge
/// that embeds with it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedQueries {
    model: String,
    dimensions: Option<usize>,
    vectors: Vec<Vec<f32>>,
}

impl EmbeddedQueries {
    /// The embedding model the vectors come from.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Whether `knowledge` embeds with the same model (and vector size) as these queries, so
    /// [`Knowledge::query_embedded`] can search it with them.
    pub fn fit(&self, knowledge: &Knowledge) -> bool {
        self.model == knowledge.embedder.model()
            && self.dimensions == knowledge.embedder.dimensions()
    }

    fn describe(model: &str, dimensions: Option<usize>) -> String {
        match dimensions {
            Some(dimensions) => format!("{model} ({dimensions} dimensions)"),
            None => model.to_string(),
        }
    }
}

/// What an ingestion did, document by document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// Documents read and stored (new, or changed since they were stored).
    pub ingested: Vec<String>,
    /// Documents whose content hash is unchanged, so nothing was read or embedded.
    pub unchanged: Vec<String>,
    /// Chunks stored.
    pub chunks: usize,
}

struct Inner {
    store: Arc<dyn MemoryStore>,
    owner: KnowledgeOwner,
    folder: PathBuf,
    sources: Vec<KnowledgeSource>,
    web: HttpGetTool,
    /// One ingestion at a time (concurrent kickoffs of one crew would otherwise both replace a
    /// changed document and store its chunks twice).
    ingesting: tokio::sync::Mutex<()>,
}

/// CrewAI's `Knowledge`: an owner's sources, chunked and embedded into the owner's collection
/// (and a source's own `collection_name`), searched together by [`Knowledge::query`].
///
/// Ingestion is incremental: every chunk records its document's content hash (of its bytes, its
/// chunk settings and metadata), an unchanged document is not read again, and a changed one
/// replaces all its old chunks. A document no longer listed keeps its chunks until the owner's
/// collections are reset (`crewai reset-memories -kn` / `-akn`), as in CrewAI.
///
/// ```
/// use std::sync::Arc;
/// use crewai_knowledge::{Knowledge, KnowledgeOwner, KnowledgeSource};
/// use crewai_llm::embeddings::HashEmbedder;
/// use crewai_memory::SqliteMemoryStore;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
/// let knowledge = Knowledge::builder(store, Arc::new(HashEmbedder::new(256)), KnowledgeOwner::Crew)
///     .source(KnowledgeSource::text("Refunds are paid within five days."))
///     .build();
/// assert_eq!(knowledge.ingest().await.unwrap().chunks, 1);
/// assert_eq!(knowledge.ingest().await.unwrap().unchanged, ["string:0"]);
/// let found = knowledge.query(&["when are refunds paid".into()], 3, 0.1).await.unwrap();
/// assert_eq!(found[0].content, "Refunds are paid within five days.");
/// # });
/// ```
#[derive(Clone)]
pub struct Knowledge {
    inner: Arc<Inner>,
    /// Outside `inner`, so a view can embed through a layer of the same model
    /// ([`Knowledge::with_embedder`]) and still share one ingestion lock.
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for Knowledge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knowledge")
            .field("owner", &self.inner.owner)
            .field("folder", &self.inner.folder)
            .field("sources", &self.inner.sources.len())
            .field("embedder", &self.embedder.model())
            .finish()
    }
}

/// Builds a [`Knowledge`].
pub struct KnowledgeBuilder {
    store: Arc<dyn MemoryStore>,
    embedder: Arc<dyn Embedder>,
    owner: KnowledgeOwner,
    folder: PathBuf,
    sources: Vec<KnowledgeSource>,
    web: HttpGetTool,
}

impl KnowledgeBuilder {
    crewai_llm::setters! {
        /// The folder file paths are relative to (default `knowledge`, from the working
        /// directory; a project's is `<project>/knowledge`).
        pub fn folder(folder: impl Into<PathBuf>) => folder = folder.into();
        pub fn source(source: KnowledgeSource) => |b| b.sources.push(source);
        pub fn sources(sources: impl IntoIterator<Item = KnowledgeSource>) => |b| b.sources.extend(sources);
        /// The fetcher of web sources (timeouts, size limit, private-address guard: the web
        /// tools' [`HttpGetTool`], which refuses internal addresses unless allowed).
        pub fn web_fetcher(web: HttpGetTool) => web = web;
    }

    pub fn build(self) -> Knowledge {
        Knowledge {
            embedder: self.embedder,
            inner: Arc::new(Inner {
                store: self.store,
                owner: self.owner,
                folder: self.folder,
                sources: self.sources,
                web: self.web,
                ingesting: tokio::sync::Mutex::new(()),
            }),
        }
    }
}

impl Knowledge {
    pub fn builder(
        store: Arc<dyn MemoryStore>,
        embedder: Arc<dyn Embedder>,
        owner: KnowledgeOwner,
    ) -> KnowledgeBuilder {
        KnowledgeBuilder {
            store,
            embedder,
            owner,
            folder: PathBuf::from(KNOWLEDGE_DIR),
            sources: Vec::new(),
            web: HttpGetTool::new(),
        }
    }

    pub fn owner(&self) -> &KnowledgeOwner {
        &self.inner.owner
    }

    pub fn sources(&self) -> &[KnowledgeSource] {
        &self.inner.sources
    }

    /// The embedder chunks and queries are embedded with.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The embedding model's name.
    pub fn embedder_model(&self) -> &str {
        self.embedder.model()
    }

    /// The same knowledge (sources, store, ingestion lock) embedding through `embedder`: a layer
    /// over its own model, such as a run's accounting. Another model is refused, since its
    /// vectors would not compare with the stored ones.
    pub fn with_embedder(&self, embedder: Arc<dyn Embedder>) -> Result<Knowledge, KnowledgeError> {
        if embedder.model() != self.embedder.model() {
            return Err(KnowledgeError::EmbedderModel {
                expected: self.embedder.model().to_string(),
                given: embedder.model().to_string(),
            });
        }
        Ok(Knowledge {
            inner: self.inner.clone(),
            embedder,
        })
    }

    /// The collections this knowledge writes and searches: the owner's first, then those of
    /// sources with their own `collection_name`.
    pub fn collections(&self) -> Vec<String> {
        let owner = &self.inner.owner;
        let mut names = vec![owner.collection(None)];
        for source in &self.inner.sources {
            let name = owner.collection(source.collection_name.as_deref());
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Reads, chunks, embeds and stores every source whose content changed since it was last
    /// stored (see the type's documentation).
    pub async fn ingest(&self) -> Result<IngestReport, KnowledgeError> {
        let _one_at_a_time = self.inner.ingesting.lock().await;
        let mut report = IngestReport::default();
        let owner = &self.inner.owner;
        if let Some(dimensions) = self.embedder.dimensions() {
            for collection in self.collections() {
                self.open(&collection, dimensions).await?;
            }
        }
        for (index, source) in self.inner.sources.iter().enumerate() {
            let collection = owner.collection(source.collection_name.as_deref());
            for document in source.documents_in(index, &self.inner.folder)? {
                self.ingest_document(&collection, source, document, &mut report)
                    .await?;
            }
        }
        Ok(report)
    }

    async fn ingest_document(
        &self,
        collection: &str,
        source: &KnowledgeSource,
        document: Document,
        report: &mut IngestReport,
    ) -> Result<(), KnowledgeError> {
        let Document { key, location } = document;
        let (reader, loaded) = match location {
            Location::Inline(text) => (None, Loaded::Text(text)),
            Location::Web(url) => (Some(Reader::Web), Loaded::Text(self.fetch(&url).await?)),
            Location::File { path, reader } => {
                let read_path = path.clone();
                let bytes = tokio::task::spawn_blocking(move || std::fs::read(&read_path))
                    .await
                    .map_err(KnowledgeError::Background)?
                    .map_err(|source| KnowledgeError::Read {
                        path: path.clone(),
                        source,
                    })?;
                (
                    Some(reader),
                    Loaded::File {
                        path,
                        reader,
                        bytes,
                    },
                )
            }
        };
        let hash = content_hash(source, reader, loaded.bytes());
        if self.stored_hash(collection, &key).await?.as_deref() == Some(hash.as_str()) {
            report.unchanged.push(key);
            return Ok(());
        }
        let text = match loaded {
            Loaded::Text(text) => text,
            Loaded::File {
                path,
                reader,
                bytes,
            } => tokio::task::spawn_blocking(move || read_text(reader, &path, bytes))
                .await
                .map_err(KnowledgeError::Background)??,
        };
        let chunks = source.chunking.chunk(&text);
        let vectors = self.embed(&chunks).await?;
        if let Some(first) = vectors.first() {
            self.open(collection, first.len()).await?;
        }
        let now = Utc::now();
        let records: Vec<MemoryRecord> = chunks
            .into_iter()
            .zip(vectors)
            .enumerate()
            .map(|(chunk_index, (content, embedding))| {
                let mut metadata = source.metadata.clone();
                metadata.insert("source".into(), Value::String(key.clone()));
                metadata.insert("chunk_index".into(), Value::from(chunk_index));
                metadata.insert(CONTENT_HASH_KEY.into(), Value::String(hash.clone()));
                MemoryRecord {
                    id: uuid::Uuid::new_v4().to_string(),
                    content,
                    scope: ScopePath::root(),
                    categories: Vec::new(),
                    metadata,
                    importance: 0.5,
                    created_at: now,
                    last_accessed: now,
                    source: Some(key.clone()),
                    private: false,
                    embedding,
                }
            })
            .collect();
        let store = &self.inner.store;
        store
            .delete(collection, None, &document_filter(&key))
            .await
            .map_err(|e| self.store_error(e))?;
        store
            .insert(collection, &records)
            .await
            .map_err(|e| self.store_error(e))?;
        report.chunks += records.len();
        report.ingested.push(key);
        Ok(())
    }

    async fn fetch(&self, url: &str) -> Result<String, KnowledgeError> {
        self.inner
            .web
            .fetch_text(url, &ToolContext::new())
            .await
            .map_err(|error| KnowledgeError::Web {
                url: url.to_string(),
                reason: error.to_string(),
            })
    }

    /// The content hash stored with a document's chunks, if it has any.
    async fn stored_hash(
        &self,
        collection: &str,
        key: &str,
    ) -> Result<Option<String>, KnowledgeError> {
        let stored = self
            .inner
            .store
            .list(collection, &document_filter(key), 1, 0)
            .await
            .map_err(|e| self.store_error(e))?;
        Ok(stored.first().and_then(|record| {
            record
                .metadata
                .get(CONTENT_HASH_KEY)
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
    }

    async fn open(&self, collection: &str, dimensions: usize) -> Result<(), KnowledgeError> {
        self.inner
            .store
            .open_collection(collection, self.embedder.model(), dimensions)
            .await
            .map(|_| ())
            .map_err(|e| self.store_error(e))
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, KnowledgeError> {
        let embedder = &self.embedder;
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(EMBED_BATCH) {
            let embedded =
                embedder
                    .embed(batch)
                    .await
                    .map_err(|source| KnowledgeError::Embedding {
                        model: embedder.model().to_string(),
                        source,
                    })?;
            if embedded.len() != batch.len() {
                return Err(KnowledgeError::EmbeddingCount {
                    model: embedder.model().to_string(),
                    expected: batch.len(),
                    got: embedded.len(),
                });
            }
            vectors.extend(embedded);
        }
        Ok(vectors)
    }

    /// The `limit` chunks of this knowledge's collections closest to any of `queries`, closest
    /// first, keeping those whose similarity is at least `score_threshold`. Collections not
    /// ingested yet contribute nothing.
    pub async fn query(
        &self,
        queries: &[String],
        limit: usize,
        score_threshold: f64,
    ) -> Result<Vec<KnowledgeSnippet>, KnowledgeError> {
        if limit == 0 || queries.is_empty() {
            return Ok(Vec::new());
        }
        let embedded = self.embed_queries(queries).await?;
        self.query_embedded(&embedded, limit, score_threshold).await
    }

    /// `queries` embedded once, to search this and every other knowledge of the same embedding
    /// model with [`Knowledge::query_embedded`] (an agent's and its crew's, say) without
    /// embedding them again for each.
    pub async fn embed_queries(
        &self,
        queries: &[String],
    ) -> Result<EmbeddedQueries, KnowledgeError> {
        Ok(EmbeddedQueries {
            model: self.embedder.model().to_string(),
            dimensions: self.embedder.dimensions(),
            vectors: self.embed(queries).await?,
        })
    }

    /// [`Knowledge::query`] with queries already embedded. Vectors of another embedding model
    /// (or size) than this knowledge's are refused ([`KnowledgeError::QueryEmbedder`]): they
    /// would not compare with the stored ones.
    pub async fn query_embedded(
        &self,
        queries: &EmbeddedQueries,
        limit: usize,
        score_threshold: f64,
    ) -> Result<Vec<KnowledgeSnippet>, KnowledgeError> {
        if !queries.fit(self) {
            return Err(KnowledgeError::QueryEmbedder {
                expected: EmbeddedQueries::describe(
                    self.embedder.model(),
                    self.embedder.dimensions(),
                ),
                given: EmbeddedQueries::describe(&queries.model, queries.dimensions),
            });
        }
        if limit == 0 || queries.vectors.is_empty() {
            return Ok(Vec::new());
        }
        let store = &self.inner.store;
        let mut snippets: Vec<KnowledgeSnippet> = Vec::new();
        let mut seen = HashSet::new();
        for collection in self.collections() {
            if store
                .collection(&collection)
                .await
                .map_err(|e| self.store_error(e))?
                .is_none()
            {
                continue;
            }
            for vector in &queries.vectors {
                let hits = store
                    .vector_search(
                        &collection,
                        vector,
                        &RecordFilter::everything_in(ScopePath::root()),
                        limit,
                    )
                    .await
                    .map_err(|e| self.store_error(e))?;
                for hit in hits {
                    if hit.similarity < score_threshold || !seen.insert(hit.record.id.clone()) {
                        continue;
                    }
                    snippets.push(KnowledgeSnippet {
                        source: hit.record.source.clone().unwrap_or_default(),
                        content: hit.record.content,
                        score: hit.similarity,
                        metadata: hit.record.metadata,
                        collection: collection.clone(),
                    });
                }
            }
        }
        snippets.sort_by(|a, b| b.score.total_cmp(&a.score));
        snippets.truncate(limit);
        Ok(snippets)
    }

    /// Deletes this knowledge's collections (chunks, recorded embedder); returns how many
    /// chunks were deleted.
    pub async fn reset(&self) -> Result<usize, KnowledgeError> {
        let mut deleted = 0;
        for collection in self.collections() {
            deleted += self
                .inner
                .store
                .drop_collection(&collection)
                .await
                .map_err(|e| self.store_error(e))?;
        }
        Ok(deleted)
    }

    /// The store's error, with a dimension mismatch naming the command that clears this
    /// owner's knowledge instead of memory's.
    fn store_error(&self, error: MemoryError) -> KnowledgeError {
        knowledge_store_error(error, self.inner.owner.kind())
    }
}

/// `error` from a knowledge collection of `kind`: a dimension mismatch names the reset command
/// of that kind.
pub fn knowledge_store_error(error: MemoryError, kind: CollectionKind) -> KnowledgeError {
    match error {
        MemoryError::DimensionMismatch {
            collection,
            stored,
            stored_model,
            found,
            model,
        } => KnowledgeError::DimensionMismatch {
            collection,
            stored,
            stored_model,
            found,
            model,
            reset_command: reset_command(kind),
        },
        other => KnowledgeError::Store(other),
    }
}

/// A document's content before it is read into text (a file's text is extracted only when
/// its hash says it changed).
enum Loaded {
    Text(String),
    File {
        path: PathBuf,
        reader: Reader,
        bytes: Vec<u8>,
    },
}

impl Loaded {
    fn bytes(&self) -> &[u8] {
        match self {
            Loaded::Text(text) => text.as_bytes(),
            Loaded::File { bytes, .. } => bytes,
        }
    }
}

/// Every chunk of one document.
fn document_filter(key: &str) -> RecordFilter {
    RecordFilter {
        source: Some(key.to_string()),
        ..RecordFilter::everything_in(ScopePath::root())
    }
}

/// What decides whether a document must be ingested again: its bytes, its reader, how it is
/// chunked and the metadata its chunks carry.
fn content_hash(source: &KnowledgeSource, reader: Option<Reader>, bytes: &[u8]) -> String {
    let mut hasher = Sha256::new();
    let settings = serde_json::json!({
        "reader": reader.map(Reader::name),
        "chunk_size": source.chunking.chunk_size,
        "chunk_overlap": source.chunking.chunk_overlap,
        "metadata": source.metadata,
    });
    hasher.update(settings.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(bytes);
    hex::encode(hasher.finalize())
}
