//! [`KnowledgeSearchTool`]: crewai-tools' RAG search tools (`PDFSearchTool`, `TXTSearchTool`,
//! `CSVSearchTool`, `JSONSearchTool`, `MDXSearchTool`, `DOCXSearchTool`, `XMLSearchTool`,
//! `DirectorySearchTool`, `WebsiteSearchTool`, `CodeDocsSearchTool`) over a [`Knowledge`] with
//! [`KnowledgeOwner::Tool`].
//!
//! As in CrewAI, a tool made with its source (`pdf=...`, `website=...`) searches that source
//! and asks the model only for the query; one made without it asks for the source too, each
//! call. Each source has a collection of its own in the store, `knowledge:tool:<class>-<hash of
//! the source>`, so a tool's answer comes from the document it was asked about (CrewAI's
//! embedchain app answers from everything the tool was ever given). A document is ingested on
//! the first call that names it, and again only when its content changed (the content hash of
//! [`Knowledge::ingest`]). Files are read inside the tool's root (the project folder), as the
//! file tools are; pages go through the web tools' fetcher (private addresses refused unless
//! `allow_private_network: true`).
//!
//! Embeddings go through the caller's [`EmbeddingLayer`](crewai_tools::EmbeddingLayer) when the
//! [`ToolContext`] has one (a crew's run gives one), so they count in its usage and budget.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use crewai_llm::embeddings::Embedder;
use crewai_memory::MemoryStore;
use crewai_tools::builtin::HttpGetTool;
use crewai_tools::catalog::search_tool_class;
use crewai_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::KnowledgeError;
use crate::knowledge::{Knowledge, KnowledgeOwner, KnowledgeSnippet};
use crate::source::{KnowledgeSource, Reader};

/// How many passages a search returns unless `limit` says otherwise.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// The least similarity a passage needs unless `similarity_threshold` says otherwise.
pub const DEFAULT_SIMILARITY_THRESHOLD: f64 = 0.6;
/// The most files a `DirectorySearchTool` reads from its directory.
const MAX_DIRECTORY_FILES: usize = 10_000;

/// Which of crewai-tools' search tools, with the names CrewAI gives its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchToolClass {
    Pdf,
    Txt,
    Csv,
    Json,
    Mdx,
    Docx,
    Xml,
    Directory,
    Website,
    CodeDocs,
}

impl SearchToolClass {
    const ALL: [SearchToolClass; 10] = [
        SearchToolClass::Pdf,
        SearchToolClass::Txt,
        SearchToolClass::Csv,
        SearchToolClass::Json,
        SearchToolClass::Mdx,
        SearchToolClass::Docx,
        SearchToolClass::Xml,
        SearchToolClass::Directory,
        SearchToolClass::Website,
        SearchToolClass::CodeDocs,
    ];

    /// The class `name` is spelt for, in any of the spellings a project may use
    /// (`PDFSearchTool`, `pdf_search_tool`).
    ///
    /// ```
    /// use crewai_knowledge::SearchToolClass;
    /// assert_eq!(SearchToolClass::from_name("pdf_search_tool"), Some(SearchToolClass::Pdf));
    /// assert_eq!(SearchToolClass::from_name("FileReadTool"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<SearchToolClass> {
        let class = search_tool_class(name)?;
        Self::ALL.into_iter().find(|c| c.class_name() == class)
    }

    /// CrewAI's class name.
    pub fn class_name(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "PDFSearchTool",
            SearchToolClass::Txt => "TXTSearchTool",
            SearchToolClass::Csv => "CSVSearchTool",
            SearchToolClass::Json => "JSONSearchTool",
            SearchToolClass::Mdx => "MDXSearchTool",
            SearchToolClass::Docx => "DOCXSearchTool",
            SearchToolClass::Xml => "XMLSearchTool",
            SearchToolClass::Directory => "DirectorySearchTool",
            SearchToolClass::Website => "WebsiteSearchTool",
            SearchToolClass::CodeDocs => "CodeDocsSearchTool",
        }
    }

    /// The tool's name as the model sees it (CrewAI's).
    pub fn tool_name(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "Search a PDF's content",
            SearchToolClass::Txt => "Search a txt's content",
            SearchToolClass::Csv => "Search a CSV's content",
            SearchToolClass::Json => "Search a JSON's content",
            SearchToolClass::Mdx => "Search a MDX's content",
            SearchToolClass::Docx => "Search a DOCX's content",
            SearchToolClass::Xml => "Search a XML's content",
            SearchToolClass::Directory => "Search a directory's content",
            SearchToolClass::Website => "Search in a specific website",
            SearchToolClass::CodeDocs => "Search a Code Docs content",
        }
    }

    /// The argument naming the source, in the constructor and in a call (CrewAI's).
    pub fn source_argument(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "pdf",
            SearchToolClass::Txt => "txt",
            SearchToolClass::Csv => "csv",
            SearchToolClass::Json => "json_path",
            SearchToolClass::Mdx => "mdx",
            SearchToolClass::Docx => "docx",
            SearchToolClass::Xml => "xml",
            SearchToolClass::Directory => "directory",
            SearchToolClass::Website => "website",
            SearchToolClass::CodeDocs => "docs_url",
        }
    }

    /// The argument carrying the query (CrewAI's PDF tool calls it `query`, the others
    /// `search_query`).
    pub fn query_argument(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "query",
            _ => "search_query",
        }
    }

    /// What the source is, for descriptions and messages.
    fn source_kind(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "PDF file",
            SearchToolClass::Txt => "text file",
            SearchToolClass::Csv => "CSV file",
            SearchToolClass::Json => "JSON file",
            SearchToolClass::Mdx => "MDX file",
            SearchToolClass::Docx => "DOCX file",
            SearchToolClass::Xml => "XML file",
            SearchToolClass::Directory => "directory",
            SearchToolClass::Website => "web page",
            SearchToolClass::CodeDocs => "documentation page",
        }
    }

    fn is_web(self) -> bool {
        matches!(self, SearchToolClass::Website | SearchToolClass::CodeDocs)
    }

    /// The reader of a file source (`None` for directories and pages).
    fn file_reader(self) -> Option<Reader> {
        Some(match self {
            SearchToolClass::Pdf => Reader::Pdf,
            SearchToolClass::Txt => Reader::Text,
            SearchToolClass::Csv => Reader::Csv,
            SearchToolClass::Json => Reader::Json,
            SearchToolClass::Mdx => Reader::Markdown,
            SearchToolClass::Docx => Reader::Docx,
            SearchToolClass::Xml => Reader::Xml,
            SearchToolClass::Directory | SearchToolClass::Website | SearchToolClass::CodeDocs => {
                return None;
            }
        })
    }

    /// The class name in snake case, as its collections' names start.
    fn collection_stem(self) -> &'static str {
        match self {
            SearchToolClass::Pdf => "pdf_search_tool",
            SearchToolClass::Txt => "txt_search_tool",
            SearchToolClass::Csv => "csv_search_tool",
            SearchToolClass::Json => "json_search_tool",
            SearchToolClass::Mdx => "mdx_search_tool",
            SearchToolClass::Docx => "docx_search_tool",
            SearchToolClass::Xml => "xml_search_tool",
            SearchToolClass::Directory => "directory_search_tool",
            SearchToolClass::Website => "website_search_tool",
            SearchToolClass::CodeDocs => "code_docs_search_tool",
        }
    }
}

/// A search tool's constructor arguments, as CrewAI's class takes them: the source (`pdf`,
/// `txt`, ..., `website`, `docs_url`), and `limit` and `similarity_threshold`; `summarize:
/// false` and `config: None` are CrewAI's defaults and accepted as such.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchToolConfig {
    pub class: SearchToolClass,
    /// The source searched by every call; `None`: each call names it.
    pub source: Option<String>,
    pub limit: usize,
    pub similarity_threshold: f64,
    /// For the web tools: fetch loopback and private addresses too (`None`: the environment's
    /// `CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK` decides).
    pub allow_private_network: Option<bool>,
}

impl SearchToolConfig {
    /// A tool of `class` with CrewAI's defaults and no fixed source.
    pub fn new(class: SearchToolClass) -> Self {
        SearchToolConfig {
            class,
            source: None,
            limit: DEFAULT_SEARCH_LIMIT,
            similarity_threshold: DEFAULT_SIMILARITY_THRESHOLD,
            allow_private_network: None,
        }
    }

    crewai_llm::setters! {
        pub fn source(source: impl Into<String>) => source = Some(source.into());
        pub fn limit(limit: usize) => limit = limit;
        pub fn similarity_threshold(threshold: f64) => similarity_threshold = threshold;
    }

    /// Reads the constructor arguments written beside the class name; the message names the
    /// argument that is wrong and what it takes.
    ///
    /// ```
    /// use crewai_knowledge::{SearchToolClass, SearchToolConfig};
    /// let args = serde_json::json!({"pdf": "handbook.pdf", "limit": 3});
    /// let config = SearchToolConfig::from_args(SearchToolClass::Pdf, args.as_object().unwrap()).unwrap();
    /// assert_eq!(config.source.as_deref(), Some("handbook.pdf"));
    /// assert_eq!(config.limit, 3);
    /// let args = serde_json::json!({"website": "https://example.com"});
    /// let error = SearchToolConfig::from_args(SearchToolClass::Pdf, args.as_object().unwrap()).unwrap_err();
    /// assert!(error.contains("`website`"), "{error}");
    /// ```
    pub fn from_args(class: SearchToolClass, args: &Map<String, Value>) -> Result<Self, String> {
        let mut config = SearchToolConfig::new(class);
        let source_argument = class.source_argument();
        for (key, value) in args {
            match (key.as_str(), value) {
                (key, Value::String(source)) if key == source_argument => {
                    if source.trim().is_empty() {
                        return Err(format!(
                            "`{key}` is empty; give the {}",
                            class.source_kind()
                        ));
                    }
                    config.source = Some(source.trim().to_string());
                }
                (key, Value::Null) if key == source_argument => {}
                (key, other) if key == source_argument => {
                    return Err(format!(
                        "`{key}` must be the {} as a string, not {other}",
                        class.source_kind()
                    ));
                }
                ("limit", Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {
                    config.limit = n.as_u64().map_or(DEFAULT_SEARCH_LIMIT, |n| n as usize);
                }
                ("limit", other) => {
                    return Err(format!(
                        "`limit` must be a whole number above 0, not {other}"
                    ));
                }
                ("similarity_threshold", Value::Number(n))
                    if n.as_f64().is_some_and(|t| (-1.0..=1.0).contains(&t)) =>
                {
                    config.similarity_threshold =
                        n.as_f64().unwrap_or(DEFAULT_SIMILARITY_THRESHOLD);
                }
                ("similarity_threshold", other) => {
                    return Err(format!(
                        "`similarity_threshold` must be a cosine similarity from -1 to 1, not {other}"
                    ));
                }
                ("allow_private_network", Value::Bool(allow)) if class.is_web() => {
                    config.allow_private_network = Some(*allow);
                }
                ("summarize", Value::Bool(false)) | ("config", Value::Null) => {}
                ("summarize", _) => {
                    return Err(
                        "`summarize` (an LLM summary of the passages found) is not supported; remove it: the agent reads the passages itself"
                            .into(),
                    );
                }
                ("config", _) => {
                    return Err(
                        "a search tool's own `config` (its embedder, LLM or vector store) is not supported; remove it: the tool uses the project's store and the crew's embedder (`embedder:` in crew.yaml)"
                            .into(),
                    );
                }
                (other, _) => {
                    let mut accepted = vec![source_argument, "limit", "similarity_threshold"];
                    if class.is_web() {
                        accepted.push("allow_private_network");
                    }
                    return Err(format!(
                        "{} takes no argument `{other}`; it takes {}",
                        class.class_name(),
                        accepted
                            .iter()
                            .map(|a| format!("`{a}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        Ok(config)
    }
}

/// One of crewai-tools' RAG search tools (see the module documentation).
///
/// ```
/// use std::sync::Arc;
/// use crewai_knowledge::{KnowledgeSearchTool, SearchToolClass, SearchToolConfig};
/// use crewai_llm::embeddings::HashEmbedder;
/// use crewai_memory::SqliteMemoryStore;
/// use crewai_tools::{Tool, ToolContext};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let root = tempfile::tempdir().unwrap();
/// std::fs::write(root.path().join("faq.txt"), "Refunds are paid within five days.").unwrap();
/// let tool = KnowledgeSearchTool::new(
///     SearchToolConfig::new(SearchToolClass::Txt).source("faq.txt").similarity_threshold(0.1),
///     Arc::new(SqliteMemoryStore::in_memory().unwrap()),
///     Arc::new(HashEmbedder::new(256)),
///     root.path(),
/// );
/// let found = tool.run(serde_json::json!({"search_query": "when are refunds paid"}), &ToolContext::new()).await.unwrap();
/// assert!(found.to_text().contains("Refunds are paid within five days."));
/// # });
/// ```
pub struct KnowledgeSearchTool {
    config: SearchToolConfig,
    store: Arc<dyn MemoryStore>,
    embedder: Arc<dyn Embedder>,
    root: PathBuf,
    description: String,
    /// One [`Knowledge`] per source named so far, so each keeps its one-ingestion-at-a-time lock.
    knowledge: Mutex<HashMap<String, Knowledge>>,
}

impl std::fmt::Debug for KnowledgeSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeSearchTool")
            .field("config", &self.config)
            .field("root", &self.root)
            .field("embedder", &self.embedder.model())
            .finish()
    }
}

impl KnowledgeSearchTool {
    /// The tool `config` describes, storing in `store`, embedding with `embedder`, reading files
    /// inside `root`.
    pub fn new(
        config: SearchToolConfig,
        store: Arc<dyn MemoryStore>,
        embedder: Arc<dyn Embedder>,
        root: impl Into<PathBuf>,
    ) -> Self {
        let class = config.class;
        let description = match &config.source {
            Some(source) => format!(
                "Searches the {} {source} by meaning: give `{}`, and the passages closest to it are returned with their similarity.",
                class.source_kind(),
                class.query_argument()
            ),
            None => format!(
                "Searches a {} by meaning: give `{}` and the {} (`{}`), and the passages closest to the query are returned with their similarity.",
                class.source_kind(),
                class.query_argument(),
                class.source_kind(),
                class.source_argument()
            ),
        };
        KnowledgeSearchTool {
            config,
            store,
            embedder,
            root: root.into(),
            description,
            knowledge: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &SearchToolConfig {
        &self.config
    }

    /// The collection a source's chunks are stored in.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use crewai_knowledge::{KnowledgeSearchTool, SearchToolClass, SearchToolConfig};
    /// # let tool = KnowledgeSearchTool::new(SearchToolConfig::new(SearchToolClass::Pdf),
    /// #     Arc::new(crewai_memory::SqliteMemoryStore::in_memory().unwrap()),
    /// #     Arc::new(crewai_llm::embeddings::HashEmbedder::new(8)), ".");
    /// assert!(tool.collection("handbook.pdf").starts_with("knowledge:tool:pdf_search_tool-"));
    /// ```
    pub fn collection(&self, source: &str) -> String {
        self.owner(source).collection(None)
    }

    fn owner(&self, source: &str) -> KnowledgeOwner {
        let digest = hex::encode(Sha256::digest(source.as_bytes()));
        KnowledgeOwner::Tool(format!(
            "{}-{}",
            self.config.class.collection_stem(),
            &digest[..16]
        ))
    }

    /// The knowledge of `source`, made on its first use.
    async fn knowledge_of(&self, source: &str) -> Result<Knowledge, KnowledgeError> {
        if let Some(known) = self.cached(source) {
            return Ok(known);
        }
        let class = self.config.class;
        let knowledge_source = if class.is_web() {
            KnowledgeSource::urls([source])
        } else if let Some(reader) = class.file_reader() {
            KnowledgeSource::documents(reader, [source])
        } else {
            let root = self.root.clone();
            let directory = source.to_string();
            let files = tokio::task::spawn_blocking(move || directory_files(&root, &directory))
                .await
                .map_err(KnowledgeError::Background)??;
            KnowledgeSource::files(files)
        };
        let mut web = HttpGetTool::new();
        if let Some(allow) = self.config.allow_private_network {
            web = web.allow_private_network(allow);
        }
        let built = Knowledge::builder(
            self.store.clone(),
            self.embedder.clone(),
            self.owner(source),
        )
        .folder(self.root.clone())
        .source(knowledge_source)
        .web_fetcher(web)
        .build();
        let mut known = self
            .knowledge
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(known.entry(source.to_string()).or_insert(built).clone())
    }

    fn cached(&self, source: &str) -> Option<Knowledge> {
        self.knowledge
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(source)
            .cloned()
    }

    /// The passages of `source` closest to `query`, after ingesting what changed.
    pub async fn search(
        &self,
        source: &str,
        query: &str,
        context: &ToolContext,
    ) -> Result<Vec<KnowledgeSnippet>, KnowledgeError> {
        let knowledge = self
            .knowledge_of(source)
            .await?
            .with_embedder(context.embedder(self.embedder.clone()))?;
        knowledge.ingest().await?;
        knowledge
            .query(
                &[query.to_string()],
                self.config.limit,
                self.config.similarity_threshold,
            )
            .await
    }
}

/// The files below `directory` (inside `root`) that a reader reads, as paths relative to
/// `root`, sorted; symbolic links are not followed.
fn directory_files(root: &Path, directory: &str) -> Result<Vec<String>, KnowledgeError> {
    let relative = Path::new(directory);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes {
        return Err(KnowledgeError::OutsideFolder {
            path: directory.to_string(),
            folder: root.to_path_buf(),
        });
    }
    let mut files = Vec::new();
    let mut pending = vec![relative.to_path_buf()];
    while let Some(next) = pending.pop() {
        let entries =
            std::fs::read_dir(root.join(&next)).map_err(|source| KnowledgeError::Read {
                path: root.join(&next),
                source,
            })?;
        for entry in entries {
            let entry = entry.map_err(|source| KnowledgeError::Read {
                path: root.join(&next),
                source,
            })?;
            let kind = entry.file_type().map_err(|source| KnowledgeError::Read {
                path: entry.path(),
                source,
            })?;
            let path = next.join(entry.file_name());
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && Reader::for_extension(&path).is_some() {
                files.push(path.to_string_lossy().into_owned());
            }
            if files.len() > MAX_DIRECTORY_FILES {
                return Err(KnowledgeError::InvalidSource(format!(
                    "directory {directory} has more than {MAX_DIRECTORY_FILES} readable files; search a smaller one"
                )));
            }
        }
    }
    if files.is_empty() {
        return Err(KnowledgeError::InvalidSource(format!(
            "directory {directory} has no file a reader reads (.txt, .md, .mdx, .pdf, .csv, .xlsx, .json, .docx, .xml, ...)"
        )));
    }
    files.sort();
    Ok(files)
}

/// The string argument `name` of a call (`None` when missing or blank).
fn text_argument<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// What the model reads: the passages, closest first, each with its document and similarity.
fn format_passages(
    source: &str,
    query: &str,
    threshold: f64,
    found: &[KnowledgeSnippet],
) -> String {
    if found.is_empty() {
        return format!(
            "No passage of {source} is close enough to {query:?} (similarity {threshold} or more)."
        );
    }
    let mut text = format!("Passages of {source} closest to {query:?}:\n");
    for (i, snippet) in found.iter().enumerate() {
        text.push_str(&format!(
            "\n[{}] {} (similarity {:.2})\n{}\n",
            i + 1,
            snippet.source,
            snippet.score,
            snippet.content.trim()
        ));
    }
    text
}

#[async_trait]
impl Tool for KnowledgeSearchTool {
    fn name(&self) -> &str {
        self.config.class.tool_name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let class = self.config.class;
        let mut properties = Map::new();
        properties.insert(
            class.query_argument().into(),
            json!({"type": "string", "description": "What to look for, in a few words or a question"}),
        );
        let mut required = vec![class.query_argument()];
        if self.config.source.is_none() {
            let described = if class.is_web() {
                format!("The address of the {} to search", class.source_kind())
            } else {
                format!(
                    "The path of the {} to search, relative to the project folder",
                    class.source_kind()
                )
            };
            properties.insert(
                class.source_argument().into(),
                json!({"type": "string", "description": described}),
            );
            required.push(class.source_argument());
        }
        json!({"type": "object", "properties": properties, "required": required})
    }

    async fn run(&self, args: Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let class = self.config.class;
        let query = text_argument(&args, class.query_argument()).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "`{}` must be a non-empty string",
                class.query_argument()
            ))
        })?;
        let source = match &self.config.source {
            Some(fixed) => fixed.as_str(),
            None => text_argument(&args, class.source_argument()).ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "`{}` must name the {} to search",
                    class.source_argument(),
                    class.source_kind()
                ))
            })?,
        };
        let found =
            self.search(source, query, context)
                .await
                .map_err(|error| ToolError::Service {
                    action: format!("searching {source} failed"),
                    source: Box::new(error),
                })?;
        Ok(ToolOutput::Text(format_passages(
            source,
            query,
            self.config.similarity_threshold,
            &found,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_found_by_its_names() {
        for class in SearchToolClass::ALL {
            assert_eq!(SearchToolClass::from_name(class.class_name()), Some(class));
        }
        assert_eq!(SearchToolClass::Pdf.collection_stem(), "pdf_search_tool");
        assert_eq!(SearchToolClass::Docx.collection_stem(), "docx_search_tool");
        assert_eq!(
            SearchToolClass::CodeDocs.collection_stem(),
            "code_docs_search_tool"
        );
        assert_eq!(
            SearchToolClass::from_name("website_search_tool"),
            Some(SearchToolClass::Website)
        );
    }

    #[test]
    fn constructor_mistakes_are_named() {
        for (class, args, says) in [
            (SearchToolClass::Pdf, json!({"pdf": 3}), "`pdf` must be"),
            (SearchToolClass::Txt, json!({"limit": 0}), "`limit`"),
            (
                SearchToolClass::Csv,
                json!({"similarity_threshold": 2.0}),
                "-1 to 1",
            ),
            (
                SearchToolClass::Json,
                json!({"summarize": true}),
                "`summarize`",
            ),
            (
                SearchToolClass::Xml,
                json!({"config": {"embedder": {}}}),
                "own `config`",
            ),
            (
                SearchToolClass::Pdf,
                json!({"allow_private_network": true}),
                "takes no argument `allow_private_network`",
            ),
        ] {
            let error = SearchToolConfig::from_args(class, args.as_object().unwrap()).unwrap_err();
            assert!(error.contains(says), "{args}: {error}");
        }
        let fine = SearchToolConfig::from_args(
            SearchToolClass::Website,
            json!({"website": "https://example.com", "summarize": false, "config": null, "allow_private_network": true})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(fine.source.as_deref(), Some("https://example.com"));
        assert_eq!(fine.allow_private_network, Some(true));
    }

    #[test]
    fn a_directory_lists_its_readable_files_and_stays_inside_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("docs/deep")).unwrap();
        std::fs::write(root.path().join("docs/a.md"), "a").unwrap();
        std::fs::write(root.path().join("docs/deep/b.xml"), "<b/>").unwrap();
        std::fs::write(root.path().join("docs/c.bin"), "c").unwrap();
        let files = directory_files(root.path(), "docs").unwrap();
        assert_eq!(files, ["docs/a.md", "docs/deep/b.xml"]);
        assert!(matches!(
            directory_files(root.path(), "../"),
            Err(KnowledgeError::OutsideFolder { .. })
        ));
        assert!(matches!(
            directory_files(root.path(), "/etc"),
            Err(KnowledgeError::OutsideFolder { .. })
        ));
    }
}
