//! The catalogue of tools a project names by their crewai-tools class, so existing projects name
//! them unchanged:
//! `SerperDevTool`, `ScrapeWebsiteTool`, `FileReadTool`, `FileWriterTool`, `DirectoryReadTool`,
//! with the constructor arguments the Python classes take (`website_url`, `file_path`,
//! `directory`, `n_results`, `country`, `locale`, ...), plus `allow_private_network: true` for a
//! `ScrapeWebsiteTool` meant to read internal addresses (refused by default). crewai-tools' knowledge
//! search tools (`PDFSearchTool`, `WebsiteSearchTool`, ... [`SEARCH_TOOLS`]) need a knowledge store
//! and an embedder, so they are made by crewai-knowledge's `KnowledgeSearchTool` (a project's
//! `tools:` get them through crewai-project's registry); [`build`] refuses them with an error saying
//! so, and the ones crewai-rs does not have ([`KNOWLEDGE_TOOLS_NOT_YET`]) with an error saying that,
//! so a project never runs with one silently missing.
//!
//! ```
//! use crewai_tools::catalog::{build, CatalogError};
//! let root = std::env::temp_dir();
//! let args = serde_json::json!({"website_url": "https://example.com/"});
//! let tool = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root).unwrap().unwrap();
//! assert_eq!(tool.name(), "Read website content");
//! assert!(build("serper_dev_tool", &Default::default(), &root).unwrap().is_some());
//! assert!(matches!(build("PDFSearchTool", &Default::default(), &root), Err(CatalogError::NeedsStore { .. })));
//! assert!(matches!(build("GithubSearchTool", &Default::default(), &root), Err(CatalogError::NeedsKnowledge { .. })));
//! assert!(build("NoSuchTool", &Default::default(), &root).unwrap().is_none());
//! ```

mod preset;
mod scrape;
mod serper;

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use preset::{PresetKind, PresetTool};
pub use scrape::{ScrapeWebsiteArgs, ScrapeWebsiteConfig, ScrapeWebsiteTool};
pub use serper::{
    SERPER_API_KEY_VAR, SERPER_BASE_URL, SearchType, SerperConfig, SerperDevTool, SerperSearchArgs,
};

use crate::builtin::{DirectoryReadTool, FileReadTool, FileWriteTool, HttpGetTool};
use crate::tool::{Tool, ToolError};

/// The crewai-tools class names provided here.
pub const TOOL_CLASSES: &[&str] = &[
    "SerperDevTool",
    "ScrapeWebsiteTool",
    "FileReadTool",
    "FileWriterTool",
    "DirectoryReadTool",
];

/// crewai-tools' knowledge (RAG) search tools that crewai-knowledge provides over a store.
pub const SEARCH_TOOLS: &[&str] = &[
    "JSONSearchTool",
    "CSVSearchTool",
    "WebsiteSearchTool",
    "PDFSearchTool",
    "DOCXSearchTool",
    "TXTSearchTool",
    "MDXSearchTool",
    "XMLSearchTool",
    "DirectorySearchTool",
    "CodeDocsSearchTool",
];

/// crewai-tools' knowledge (RAG) search tools that crewai-rs does not provide yet.
pub const KNOWLEDGE_TOOLS_NOT_YET: &[&str] = &[
    "GithubSearchTool",
    "YoutubeVideoSearchTool",
    "YoutubeChannelSearchTool",
    "RagTool",
];

/// Why a tool named in a project could not be made. The text says what is wrong with the
/// class or its arguments; the caller names the tool.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(
        "{class} is recognised (a crewai-tools knowledge search tool) but crewai-rs does not provide it yet; remove it, and give the agent `knowledge_sources:` with the same content (searched before each task) or a tool that reads the source directly (FileReadTool, ScrapeWebsiteTool)"
    )]
    NeedsKnowledge { class: String },
    /// A knowledge search tool crewai-knowledge provides: it needs a store and an embedder.
    #[error(
        "{class} is a knowledge search tool: it is made over a knowledge store and an embedder (crewai_knowledge::KnowledgeSearchTool; a project's tools: get one through crewai-project's ToolRegistry)"
    )]
    NeedsStore { class: String },
    /// The constructor arguments do not fit the class.
    #[error("bad constructor arguments")]
    BadArguments {
        tool: String,
        #[source]
        source: serde_json::Error,
    },
    /// The class takes no constructor arguments, and some were given.
    #[error("takes no constructor arguments (given: {})", .given.join(", "))]
    TakesNoArguments { tool: String, given: Vec<String> },
    /// The constructor arguments were read, and the tool refused them.
    #[error("the constructor arguments are refused")]
    Refused {
        tool: String,
        #[source]
        source: ToolError,
    },
}

/// How a tool name is compared: lowercase letters and digits only, without a `Tool` suffix, so
/// `SerperDevTool`, `serper_dev_tool` and `serper-dev` are the same.
///
/// ```
/// use crewai_tools::catalog::name_key;
/// assert_eq!(name_key("SerperDevTool"), name_key("serper-dev"));
/// ```
pub fn name_key(name: &str) -> String {
    let key: String = name
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    match key.strip_suffix("tool") {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => key,
    }
}

/// Whether `name` is one of crewai-tools' knowledge search tools (provided or not).
pub fn is_knowledge_tool(name: &str) -> bool {
    search_tool_class(name).is_some() || {
        let key = name_key(name);
        KNOWLEDGE_TOOLS_NOT_YET
            .iter()
            .any(|class| name_key(class) == key)
    }
}

/// The class name of the provided knowledge search tool `name` is spelt for
/// (`pdf_search_tool` → `PDFSearchTool`).
pub fn search_tool_class(name: &str) -> Option<&'static str> {
    let key = name_key(name);
    SEARCH_TOOLS
        .iter()
        .copied()
        .find(|class| name_key(class) == key)
}

fn config<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, CatalogError> {
    T::deserialize(Value::Object(args.clone())).map_err(|source| CatalogError::BadArguments {
        tool: tool.to_string(),
        source,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileReadConfig {
    file_path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectoryReadConfig {
    directory: Option<String>,
}

/// For the tools whose classes take no constructor arguments.
fn no_config(tool: &str, args: &Map<String, Value>) -> Result<(), CatalogError> {
    if args.is_empty() {
        return Ok(());
    }
    Err(CatalogError::TakesNoArguments {
        tool: tool.to_string(),
        given: args.keys().cloned().collect(),
    })
}

/// `inner` as it is, or, when the class was given the argument `(key, Some(value))`, with that
/// argument preset and the description `describe(value)`.
fn preset(
    inner: Arc<dyn Tool>,
    (key, value): (&str, Option<String>),
    kind: PresetKind,
    describe: impl FnOnce(&str) -> String,
) -> Arc<dyn Tool> {
    let Some(value) = value else {
        return inner;
    };
    let description = describe(&value);
    Arc::new(PresetTool::new(
        inner,
        Map::from_iter([(key.to_string(), Value::String(value))]),
        kind,
        description,
    ))
}

/// Makes the tool `name` (a crewai-tools class name, its snake_case form, or one of our
/// built-in names) from the constructor arguments written beside it; file tools are confined to
/// `root`. `Ok(None)` when no tool has that name.
pub fn build(
    name: &str,
    args: &Map<String, Value>,
    root: &Path,
) -> Result<Option<Arc<dyn Tool>>, CatalogError> {
    let tool: Arc<dyn Tool> = match name_key(name).as_str() {
        "serperdev" | "serper" => Arc::new(SerperDevTool::from_config(config(name, args)?)),
        "scrapewebsite" => Arc::new(ScrapeWebsiteTool::from_config(config(name, args)?).map_err(
            |source| CatalogError::Refused {
                tool: name.to_string(),
                source,
            },
        )?),
        "fileread" | "readfile" => {
            let FileReadConfig { file_path } = config(name, args)?;
            preset(
                Arc::new(FileReadTool::new(root)),
                ("file_path", file_path),
                PresetKind::Default,
                |path| {
                    format!(
                        "Reads the text of the file {path} in the working directory. Give \
                         `file_path` to read another file, and `start_line` (1-based) with \
                         `line_count` to read part of a long one."
                    )
                },
            )
        }
        "directoryread" => {
            let DirectoryReadConfig { directory } = config(name, args)?;
            preset(
                Arc::new(DirectoryReadTool::new(root)),
                ("directory", directory),
                PresetKind::Fixed,
                |directory| {
                    format!(
                        "Lists every file below the directory {directory} of the working \
                         directory, recursively."
                    )
                },
            )
        }
        "filewrite" | "filewriter" => {
            no_config(name, args)?;
            Arc::new(FileWriteTool::new(root))
        }
        "httpget" => {
            no_config(name, args)?;
            Arc::new(HttpGetTool::new())
        }
        _ if search_tool_class(name).is_some() => {
            return Err(CatalogError::NeedsStore {
                class: name.to_string(),
            });
        }
        _ if is_knowledge_tool(name) => {
            return Err(CatalogError::NeedsKnowledge {
                class: name.to_string(),
            });
        }
        _ => return Ok(None),
    };
    Ok(Some(tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_in_every_spelling() {
        let root = std::env::temp_dir();
        for name in ["SerperDevTool", "serper_dev_tool", "serper-dev", "SERPER"] {
            let tool = build(name, &Map::new(), &root).unwrap().unwrap();
            assert_eq!(tool.name(), "Search the internet with Serper", "{name}");
        }
        for class in TOOL_CLASSES {
            assert!(
                build(class, &Map::new(), &root).unwrap().is_some(),
                "{class}"
            );
        }
        for class in SEARCH_TOOLS {
            let Err(error) = build(class, &Map::new(), &root) else {
                panic!("{class} was built")
            };
            assert!(error.to_string().contains("knowledge store"), "{error}");
        }
        for class in KNOWLEDGE_TOOLS_NOT_YET {
            let Err(error) = build(class, &Map::new(), &root) else {
                panic!("{class} was built")
            };
            assert!(
                error.to_string().contains("does not provide it yet"),
                "{error}"
            );
        }
        assert!(is_knowledge_tool("json_search_tool"));
        assert!(is_knowledge_tool("YoutubeVideoSearchTool"));
        assert_eq!(search_tool_class("pdf_search_tool"), Some("PDFSearchTool"));
    }

    #[test]
    fn unknown_constructor_arguments_are_named() {
        let root = std::env::temp_dir();
        let args = serde_json::json!({"website": "https://x"});
        let Err(error) = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root) else {
            panic!("built with an unknown argument")
        };
        let text = crewai_llm::error_chain(&error);
        assert!(text.contains("unknown field `website`"), "{text}");
        let args = serde_json::json!({"website_url": "not a url"});
        let Err(error) = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root) else {
            panic!("built with a bad URL")
        };
        let text = crewai_llm::error_chain(&error);
        assert!(text.contains("not a valid URL"), "{text}");
        let args = serde_json::json!({"n_results": "ten"});
        assert!(build("SerperDevTool", args.as_object().unwrap(), &root).is_err());
    }
}
