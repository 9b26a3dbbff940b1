//! Tools a project can name in `tools:`: the built-in tools and the Rust tools a compiled
//! project registers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_knowledge::{KnowledgeSearchTool, SearchToolClass, SearchToolConfig};
use crewai_llm::embeddings::Embedder;
use crewai_memory::MemoryStore;
use crewai_tools::catalog::{CatalogError, name_key};
use crewai_tools::{Tool, ToolHandle};
use serde_json::{Map, Value};

use crate::spec::ToolRef;

/// The built-in tools every project can name: ours, and crewai-tools classes provided by
/// `crewai_tools::catalog` (their snake_case forms and our names find them too).
pub const BUILTIN_TOOLS: &[&str] = &[
    "file_read",
    "file_write",
    "directory_read",
    "http_get",
    "SerperDevTool",
    "ScrapeWebsiteTool",
];

/// CrewAI's crewai-tools class names for the built-ins, where they differ from ours by more than
/// case, separators and a `Tool` suffix.
const BUILTIN_ALIASES: &[(&str, &str)] = &[
    ("FileWriterTool", "file_write"),
    ("ReadFileTool", "file_read"),
    ("SerperTool", "SerperDevTool"),
];

/// crewai-tools classes that CrewAI projects name and that are not available here yet (the
/// knowledge search tools are told apart: see `crewai_tools::catalog::KNOWLEDGE_TOOLS_NOT_YET`).
const CREWAI_TOOLS_NOT_YET: &[&str] = &[
    "DallETool",
    "VisionTool",
    "EXASearchTool",
    "BraveSearchTool",
    "TavilySearchTool",
    "FirecrawlScrapeWebsiteTool",
    "FirecrawlSearchTool",
    "SeleniumScrapingTool",
    "ScrapeElementFromWebsiteTool",
    "SpiderTool",
    "BrowserbaseLoadTool",
    "ComposioTool",
    "NL2SQLTool",
];

/// Why a [`ToolFactory`] could not make its tool: any error, or a text (`Err("...".into())`).
pub type FactoryError = Box<dyn std::error::Error + Send + Sync>;

/// Makes a tool from the constructor arguments written beside its name in YAML.
pub type ToolFactory =
    Arc<dyn Fn(&Map<String, Value>) -> Result<ToolHandle, FactoryError> + Send + Sync>;

/// What the knowledge search tools (`PDFSearchTool`, ...) are made over: the store their
/// collections live in, the embedder, and the folder their files are read in.
#[derive(Clone)]
pub struct SearchToolBase {
    pub store: Arc<dyn MemoryStore>,
    pub embedder: Arc<dyn Embedder>,
    pub root: PathBuf,
}

#[derive(Clone)]
struct Registered {
    name: String,
    factory: ToolFactory,
}

/// What makes the tool a name finds.
enum Maker<'a> {
    Registered(&'a Registered),
    Search(SearchToolClass),
}

/// Why a named tool could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ToolLookupError {
    #[error("no tool is named '{name}'")]
    Unknown {
        name: String,
        /// The nearest known names, best first.
        nearest: Vec<String>,
    },
    #[error("tool '{name}' could not be created")]
    Construction {
        name: String,
        #[source]
        source: FactoryError,
    },
    /// A crewai-tools knowledge search tool: known, but it needs knowledge search.
    #[error(transparent)]
    NeedsKnowledge(CatalogError),
}

/// Named tools, looked up the forgiving way CrewAI users write them: `file_read`,
/// `FileReadTool`, `file-read-tool` and `custom:file_read` all find the same tool.
///
/// ```
/// use std::sync::Arc;
/// use crewai_project::{ToolRef, ToolRegistry};
/// # use crewai_tools::{async_trait, Tool, ToolContext, ToolError, ToolOutput};
/// # struct Echo;
/// # #[async_trait]
/// # impl Tool for Echo {
/// #     fn name(&self) -> &str { "echo" }
/// #     fn description(&self) -> &str { "repeats" }
/// #     fn parameters(&self) -> serde_json::Value { serde_json::json!({"type": "object"}) }
/// #     async fn run(&self, a: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> { Ok(a.to_string().into()) }
/// # }
/// let mut tools = ToolRegistry::new();
/// tools.register(Arc::new(Echo));
/// let tool = tools.resolve(&ToolRef { name: "EchoTool".into(), args: Default::default() }).unwrap();
/// assert_eq!(tool.name(), "echo");
/// ```
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Registered>,
    /// Where the knowledge search tools are made (`None`: naming one is an error saying so).
    search: Option<SearchToolBase>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

/// The comparison key of a tool name: lowercase, no separators, no `custom:` prefix, no `Tool`
/// suffix.
fn lookup_key(name: &str) -> String {
    let name = name.trim();
    name_key(name.strip_prefix("custom:").unwrap_or(name))
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools, with file tools working inside `root` (the project folder). Each
    /// takes the constructor arguments its crewai-tools class takes (`file_path`,
    /// `website_url`, `n_results`, ...).
    pub fn with_builtins(root: &Path) -> Self {
        let mut registry = Self::new();
        for name in BUILTIN_TOOLS {
            let root: PathBuf = root.to_path_buf();
            let tool_name = *name;
            registry.register_factory(
                name,
                Arc::new(move |args: &Map<String, Value>| {
                    match crewai_tools::catalog::build(tool_name, args, &root) {
                        Ok(Some(tool)) => Ok(ToolHandle::new(tool)),
                        Ok(None) => Err(format!(
                            "the built-in tool '{tool_name}' is not available in this build"
                        )
                        .into()),
                        Err(error) => Err(error.into()),
                    }
                }),
            );
        }
        for (alias, name) in BUILTIN_ALIASES {
            if let Some(found) = registry.tools.get(&lookup_key(name)).cloned() {
                registry.tools.insert(lookup_key(alias), found);
            }
        }
        registry
    }

    /// The knowledge search tools (`PDFSearchTool`, `WebsiteSearchTool`, ...) made over `base`.
    /// A project's build gives its registry one (the project's store and the crew's embedder)
    /// when its `tools:` name a search tool.
    pub fn with_search_base(mut self, base: SearchToolBase) -> Self {
        self.search = Some(base);
        self
    }

    /// Whether the registry makes knowledge search tools.
    pub fn has_search_base(&self) -> bool {
        self.search.is_some()
    }

    /// The search tool `class` (named `written`) from its constructor arguments.
    fn search_tool(
        &self,
        class: SearchToolClass,
        written: &str,
        args: &Map<String, Value>,
    ) -> Result<ToolHandle, ToolLookupError> {
        let config = SearchToolConfig::from_args(class, args).map_err(|why| {
            ToolLookupError::Construction {
                name: written.to_string(),
                source: why.into(),
            }
        })?;
        let base = self.search.as_ref().ok_or_else(|| {
            ToolLookupError::NeedsKnowledge(CatalogError::NeedsStore {
                class: written.to_string(),
            })
        })?;
        Ok(ToolHandle::new(Arc::new(KnowledgeSearchTool::new(
            config,
            base.store.clone(),
            base.embedder.clone(),
            base.root.clone(),
        ))))
    }

    /// Whether `name` is a crewai-tools class that is known but not provided here yet.
    pub fn is_crewai_tool_not_yet_available(name: &str) -> bool {
        let key = lookup_key(name);
        CREWAI_TOOLS_NOT_YET
            .iter()
            .any(|known| lookup_key(known) == key)
    }

    /// Adds a ready-made tool (any [`Tool`]); it takes no YAML arguments.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.register_handle(ToolHandle::new(tool))
    }

    /// Adds a tool with its usage options, such as what a `#[tool]` function's `*_tool()` returns.
    pub fn register_handle(&mut self, handle: ToolHandle) -> &mut Self {
        let name = handle.original_name().to_string();
        self.register_handle_as(&name, handle)
    }

    /// Adds a tool under a name of the caller's choosing rather than its own, such as the key a
    /// project's Python tool has in its `tools:` lists (`python:MarketDataTool`).
    pub fn register_handle_as(&mut self, name: &str, handle: ToolHandle) -> &mut Self {
        let factory: ToolFactory = Arc::new(move |args: &Map<String, Value>| {
            if args.is_empty() {
                Ok(handle.clone())
            } else {
                Err(format!(
                    "this tool takes no arguments in project files (given: {})",
                    args.keys().cloned().collect::<Vec<_>>().join(", ")
                )
                .into())
            }
        });
        self.register_factory(name, factory)
    }

    /// Adds a tool made from the arguments written beside its name.
    pub fn register_factory(&mut self, name: &str, factory: ToolFactory) -> &mut Self {
        self.tools.insert(
            lookup_key(name),
            Registered {
                name: name.to_string(),
                factory,
            },
        );
        self
    }

    /// Whether some tool answers to `name` (the knowledge search tools always do; making one
    /// needs [`ToolRegistry::with_search_base`]).
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(&lookup_key(name)) || SearchToolClass::from_name(name).is_some()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.values().map(|r| r.name.clone()).collect();
        names.sort();
        // Aliases share their tool's entry.
        names.dedup();
        names
    }

    /// Makes the tool a `tools:` entry names. `result_as_answer` and `max_usage_count` given
    /// beside the name apply to any tool, as they do to every CrewAI tool.
    pub fn resolve(&self, tool: &ToolRef) -> Result<ToolHandle, ToolLookupError> {
        let maker = match (
            self.tools.get(&lookup_key(&tool.name)),
            SearchToolClass::from_name(&tool.name),
        ) {
            (Some(found), _) => Maker::Registered(found),
            (None, Some(class)) => Maker::Search(class),
            (None, None) if crewai_tools::catalog::is_knowledge_tool(&tool.name) => {
                return Err(ToolLookupError::NeedsKnowledge(
                    CatalogError::NeedsKnowledge {
                        class: tool.name.clone(),
                    },
                ));
            }
            (None, None) => {
                return Err(ToolLookupError::Unknown {
                    name: tool.name.clone(),
                    nearest: self.nearest(&tool.name),
                });
            }
        };
        let construction = |source: FactoryError| ToolLookupError::Construction {
            name: tool.name.clone(),
            source,
        };
        let mut args = tool.args.clone();
        let result_as_answer = match args.remove("result_as_answer") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(b),
            Some(other) => {
                return Err(construction(
                    format!("`result_as_answer` must be true or false, not {other}").into(),
                ));
            }
        };
        let max_usage_count = match args.remove("max_usage_count") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)) => {
                n.as_u64().map(|n| n as u32)
            }
            Some(other) => {
                return Err(construction(
                    format!("`max_usage_count` must be a whole number, not {other}").into(),
                ));
            }
        };
        let mut handle = match maker {
            Maker::Registered(found) => (found.factory)(&args).map_err(construction)?,
            Maker::Search(class) => self.search_tool(class, &tool.name, &args)?,
        };
        if let Some(flag) = result_as_answer {
            handle = handle.with_result_as_answer(flag);
        }
        if let Some(limit) = max_usage_count {
            handle = handle.with_max_usage_count(limit);
        }
        Ok(handle)
    }

    /// Up to three known names close to `name`.
    fn nearest(&self, name: &str) -> Vec<String> {
        let key = lookup_key(name);
        let mut scored: Vec<(f64, &str)> = self
            .tools
            .iter()
            .map(|(k, r)| (strsim::jaro_winkler(&key, k), r.name.as_str()))
            .filter(|(score, _)| *score >= 0.7)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut nearest: Vec<String> = Vec::new();
        for (_, name) in scored {
            if !nearest.iter().any(|n| n == name) {
                nearest.push(name.to_string());
            }
        }
        nearest.truncate(3);
        nearest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_aliases_and_known_crewai_tools() {
        let registry = ToolRegistry::with_builtins(Path::new("."));
        assert!(registry.contains("FileWriterTool"));
        assert!(registry.contains("FileReadTool"));
        assert!(registry.contains("directory_read"));
        assert!(registry.contains("SerperDevTool"));
        assert!(registry.contains("serper_dev_tool"));
        assert!(registry.contains("scrape_website_tool"));
        assert!(ToolRegistry::is_crewai_tool_not_yet_available(
            "TavilySearchTool"
        ));
        assert!(ToolRegistry::is_crewai_tool_not_yet_available(
            "tavily_search_tool"
        ));
        assert!(!ToolRegistry::is_crewai_tool_not_yet_available("file_read"));
    }

    #[test]
    fn lookup_keys_ignore_case_separators_prefix_and_suffix() {
        assert_eq!(lookup_key("FileReadTool"), "fileread");
        assert_eq!(lookup_key("file_read"), "fileread");
        assert_eq!(lookup_key("custom:file-read"), "fileread");
        assert_eq!(lookup_key("Tool"), "tool");
    }
}
