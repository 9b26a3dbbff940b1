//! crewai-tools' classes under their CrewAI names, so existing projects name them unchanged:
//! `SerperDevTool`, `ScrapeWebsiteTool`, `FileReadTool`, `FileWriterTool`, `DirectoryReadTool`,
//! with the constructor arguments the Python classes take (`website_url`, `file_path`,
//! `directory`, `n_results`, `country`, `locale`, ...), plus `allow_private_network: true` for a
//! `ScrapeWebsiteTool` meant to read internal addresses (refused by default). crewai-tools' knowledge search tools
//! (`PDFSearchTool`, `WebsiteSearchTool`, ...) are recognised and refused with an error saying they
//! need the knowledge feature, so a project never runs with one silently missing.
//!
//! ```
//! use crewai_tools::crewai_compat::{build, CompatError};
//! let root = std::env::temp_dir();
//! let args = serde_json::json!({"website_url": "https://example.com/"});
//! let tool = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root).unwrap().unwrap();
//! assert_eq!(tool.name(), "Read website content");
//! assert!(build("serper_dev_tool", &Default::default(), &root).unwrap().is_some());
//! assert!(matches!(build("PDFSearchTool", &Default::default(), &root), Err(CompatError::NeedsKnowledge { .. })));
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
use crate::tool::Tool;

/// The crewai-tools class names provided here.
pub const TOOL_CLASSES: &[&str] = &[
    "SerperDevTool",
    "ScrapeWebsiteTool",
    "FileReadTool",
    "FileWriterTool",
    "DirectoryReadTool",
];

/// crewai-tools' knowledge (RAG) search tools: recognised, but they need knowledge search.
pub const KNOWLEDGE_TOOLS: &[&str] = &[
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
    "GithubSearchTool",
    "YoutubeVideoSearchTool",
    "YoutubeChannelSearchTool",
    "RagTool",
];

/// Why a tool named in a project could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompatError {
    #[error(
        "{class} is recognised (a crewai-tools knowledge search tool) but needs the knowledge feature, which crewai-rs does not have yet; remove it, or give the agent a tool that reads the source directly (FileReadTool, ScrapeWebsiteTool)"
    )]
    NeedsKnowledge { class: String },
    #[error("{tool}: {message}")]
    InvalidArguments { tool: String, message: String },
}

/// How a name is compared: lowercase letters and digits only, without a `Tool` suffix, so
/// `SerperDevTool`, `serper_dev_tool` and `serper-dev` are the same.
fn class_key(name: &str) -> String {
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

/// Whether `name` is one of crewai-tools' knowledge search tools.
pub fn is_knowledge_tool(name: &str) -> bool {
    let key = class_key(name);
    KNOWLEDGE_TOOLS.iter().any(|class| class_key(class) == key)
}

fn config<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, CompatError> {
    T::deserialize(Value::Object(args.clone())).map_err(|error| CompatError::InvalidArguments {
        tool: tool.to_string(),
        message: format!("bad constructor arguments: {error}"),
    })
}

fn invalid(tool: &str, error: impl std::fmt::Display) -> CompatError {
    CompatError::InvalidArguments {
        tool: tool.to_string(),
        message: error.to_string(),
    }
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
fn no_config(tool: &str, args: &Map<String, Value>) -> Result<(), CompatError> {
    if args.is_empty() {
        return Ok(());
    }
    Err(CompatError::InvalidArguments {
        tool: tool.to_string(),
        message: format!(
            "takes no constructor arguments (given: {})",
            args.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Makes the tool `name` (a crewai-tools class name, its snake_case form, or one of our
/// built-in names) from the constructor arguments written beside it; file tools are confined to
/// `root`. `Ok(None)` when no tool has that name.
pub fn build(
    name: &str,
    args: &Map<String, Value>,
    root: &Path,
) -> Result<Option<Arc<dyn Tool>>, CompatError> {
    let tool: Arc<dyn Tool> = match class_key(name).as_str() {
        "serperdev" | "serper" => Arc::new(SerperDevTool::from_config(config(name, args)?)),
        "scrapewebsite" => Arc::new(
            ScrapeWebsiteTool::from_config(config(name, args)?).map_err(|e| invalid(name, e))?,
        ),
        "fileread" | "readfile" => {
            let FileReadConfig { file_path } = config(name, args)?;
            let inner = Arc::new(FileReadTool::new(root));
            match file_path {
                None => inner,
                Some(path) => Arc::new(PresetTool::new(
                    inner,
                    Map::from_iter([("file_path".to_string(), Value::String(path.clone()))]),
                    PresetKind::Default,
                    format!(
                        "Reads the text of the file {path} in the working directory. Give \
                         `file_path` to read another file, and `start_line` (1-based) with \
                         `line_count` to read part of a long one."
                    ),
                )),
            }
        }
        "directoryread" => {
            let DirectoryReadConfig { directory } = config(name, args)?;
            let inner = Arc::new(DirectoryReadTool::new(root));
            match directory {
                None => inner,
                Some(directory) => Arc::new(PresetTool::new(
                    inner,
                    Map::from_iter([("directory".to_string(), Value::String(directory.clone()))]),
                    PresetKind::Fixed,
                    format!(
                        "Lists every file below the directory {directory} of the working \
                         directory, recursively."
                    ),
                )),
            }
        }
        "filewrite" | "filewriter" => {
            no_config(name, args)?;
            Arc::new(FileWriteTool::new(root))
        }
        "httpget" => {
            no_config(name, args)?;
            Arc::new(HttpGetTool::new())
        }
        _ if is_knowledge_tool(name) => {
            return Err(CompatError::NeedsKnowledge {
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
        for class in KNOWLEDGE_TOOLS {
            let Err(error) = build(class, &Map::new(), &root) else {
                panic!("{class} was built")
            };
            assert!(
                error.to_string().contains("needs the knowledge feature"),
                "{error}"
            );
        }
        assert!(is_knowledge_tool("json_search_tool"));
    }

    #[test]
    fn unknown_constructor_arguments_are_named() {
        let root = std::env::temp_dir();
        let args = serde_json::json!({"website": "https://x"});
        let Err(error) = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root) else {
            panic!("built with an unknown argument")
        };
        assert!(
            error.to_string().contains("unknown field `website`"),
            "{error}"
        );
        let args = serde_json::json!({"website_url": "not a url"});
        let Err(error) = build("ScrapeWebsiteTool", args.as_object().unwrap(), &root) else {
            panic!("built with a bad URL")
        };
        assert!(error.to_string().contains("not a valid URL"), "{error}");
        let args = serde_json::json!({"n_results": "ten"});
        assert!(build("SerperDevTool", args.as_object().unwrap(), &root).is_err());
    }
}
