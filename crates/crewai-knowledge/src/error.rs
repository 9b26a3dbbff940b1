//! [`KnowledgeError`]: everything knowledge can fail at, naming the source file or page, with the
//! cause kept as the error's source.

use std::path::PathBuf;

/// A failure of knowledge. Variants that wrap a lower-level error say what failed at this level
/// and keep the cause as their source (render the chain with `crewai_llm::error_chain`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KnowledgeError {
    /// A source as written cannot be used (no files, an unknown type, a bad chunk size).
    #[error("invalid knowledge source: {0}")]
    InvalidSource(String),
    /// A file path that leaves the knowledge folder (`../secrets.txt`, an absolute path).
    #[error(
        "knowledge file {path:?} is outside the knowledge folder {}; give a path inside it",
        folder.display()
    )]
    OutsideFolder { path: String, folder: PathBuf },
    #[error("knowledge file {} cannot be read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file whose extension names no reader.
    #[error(
        "knowledge file {} has no reader for its extension: use .txt, .md, .mdx, .pdf, .csv, .xlsx, .xlsm, .xls, .ods, .json, .docx or .xml, or give `type:`",
        path.display()
    )]
    UnknownExtension { path: PathBuf },
    #[error("knowledge file {} is not a readable PDF", path.display())]
    Pdf {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("knowledge file {} is not a readable spreadsheet", path.display())]
    Spreadsheet {
        path: PathBuf,
        #[source]
        source: calamine::Error,
    },
    #[error("knowledge file {} is not readable CSV", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("knowledge file {} is not valid JSON", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("knowledge file {} is not a readable DOCX document", path.display())]
    Docx {
        path: PathBuf,
        #[source]
        source: DocxError,
    },
    #[error("knowledge file {} is not well-formed XML", path.display())]
    Xml {
        path: PathBuf,
        #[source]
        source: quick_xml::Error,
    },
    /// A file whose text is not UTF-8 (text, Markdown, CSV and JSON sources are read as UTF-8).
    #[error("knowledge file {} is not UTF-8 text", path.display())]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A web page that could not be fetched (a refused private address among the reasons).
    #[error("knowledge page {url} could not be fetched: {reason}")]
    Web { url: String, reason: String },
    /// The collection holds vectors of another size (written with another embedder).
    #[error(
        "knowledge collection {collection:?} holds {stored}-dimensional vectors from {stored_model:?}, \
         but the embedder {model:?} produces {found}; clear it with `{reset_command}` \
         (or use the embedder it was written with)"
    )]
    DimensionMismatch {
        collection: String,
        stored: usize,
        stored_model: String,
        found: usize,
        model: String,
        /// `crewai reset-memories -kn` for crew knowledge, `-akn` for an agent's.
        reset_command: &'static str,
    },
    #[error("the knowledge embedder {model:?} failed")]
    Embedding {
        model: String,
        #[source]
        source: crewai_llm::LlmError,
    },
    #[error("the knowledge embedder {model:?} returned {got} vectors for {expected} texts")]
    EmbeddingCount {
        model: String,
        expected: usize,
        got: usize,
    },
    /// The store under the knowledge collections failed.
    #[error("the knowledge store failed")]
    Store(#[source] crewai_memory::MemoryError),
    /// A view of a knowledge with an embedder of another model than its own.
    #[error(
        "knowledge embeds with {expected:?}; a layer over {given:?} would mix two models' vectors"
    )]
    EmbedderModel { expected: String, given: String },
    /// Queries embedded by another model than the knowledge searched with them.
    #[error("queries embedded with {given} cannot search knowledge embedded with {expected}")]
    QueryEmbedder { expected: String, given: String },
    #[error("a knowledge background task failed")]
    Background(#[source] tokio::task::JoinError),
}

/// Why a DOCX file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocxError {
    #[error("it is not a zip archive, or word/document.xml is missing from it")]
    Zip(#[source] zip::result::ZipError),
    #[error("word/document.xml cannot be read")]
    Io(#[source] std::io::Error),
    #[error("word/document.xml is not well-formed XML")]
    Xml(#[source] quick_xml::Error),
}
