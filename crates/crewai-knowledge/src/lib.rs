//! # crewai-knowledge
//!
//! CrewAI's knowledge: sources (inline text, text and Markdown files, PDF, CSV, Excel
//! workbooks, JSON, DOCX, XML, web pages) read into text, cut into overlapping character windows
//! (CrewAI's 4,000 / 200 by default), embedded, and stored as a collection of the memory store,
//! then searched by meaning.
//!
//! One job, one type: [`Knowledge`] holds an owner's [`KnowledgeSource`]s (the crew's, an
//! agent's, or a search tool's), [`Knowledge::ingest`] stores what changed (a document whose
//! content hash is unchanged is not read again; a changed one replaces its chunks), and
//! [`Knowledge::query`] returns the closest [`KnowledgeSnippet`]s above a similarity threshold
//! ([`Knowledge::embed_queries`] and [`Knowledge::query_embedded`] split it, so several
//! knowledges of one embedder are searched with one embedding of the query).
//!
//! Storage is crewai-memory's [`MemoryStore`](crewai_memory::MemoryStore): by default the same
//! `<project>/.crewai/memory.db` as memory, in collections named `knowledge:crew`,
//! `knowledge:agent:<role>` (CrewAI's "crew" and role collections) and `knowledge:tool:<name>`,
//! each recording its embedder's model and vector size; another embedder on an existing
//! collection is [`KnowledgeError::DimensionMismatch`], naming `crewai reset-memories -kn`
//! (or `-akn` for an agent's).
//!
//! crewai-tools' RAG search tools (`PDFSearchTool`, `WebsiteSearchTool`, ...) are
//! [`KnowledgeSearchTool`]: a [`Knowledge`] with [`KnowledgeOwner::Tool`] per source searched,
//! ingested on first use and queried with the model's question.
//!
//! Modules: `source` (sources and their project-file form), `read` (file readers), `chunk`,
//! `knowledge` (ingestion and search), `search_tool` (the RAG search tools), `error`.

mod chunk;
mod error;
mod knowledge;
mod read;
mod search_tool;
mod source;

pub use chunk::{ChunkSettings, DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE};
pub use error::{DocxError, KnowledgeError};
pub use knowledge::{
    COLLECTION_PREFIX, CONTENT_HASH_KEY, CollectionKind, EmbeddedQueries, IngestReport,
    KNOWLEDGE_DIR, Knowledge, KnowledgeBuilder, KnowledgeConfig, KnowledgeOwner, KnowledgeSnippet,
    collection_kind, knowledge_store_error, reset_command,
};
pub use search_tool::{
    DEFAULT_SEARCH_LIMIT, DEFAULT_SIMILARITY_THRESHOLD, KnowledgeSearchTool, SearchToolClass,
    SearchToolConfig,
};
pub use source::{KnowledgeSource, Reader, SourceContent};
