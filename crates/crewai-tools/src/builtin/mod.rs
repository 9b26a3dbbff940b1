//! Built-in tools every project can name: `file_read`, `file_write`, `directory_read` (all
//! confined to a root directory: no `..`, no absolute path outside it, no symbolic link leading
//! out) and `http_get` (timeouts, a size limit, HTML reduced to text, private-network addresses
//! refused unless allowed).
//!
//! ```
//! let root = std::env::temp_dir();
//! let tool = crewai_tools::builtin::by_name("file_read", &root).expect("a built-in tool");
//! assert_eq!(tool.name(), "file_read");
//! assert!(crewai_tools::builtin::by_name("FileReadTool", &root).is_some());
//! assert!(crewai_tools::builtin::by_name("no_such_tool", &root).is_none());
//! ```

mod files;
mod html;
pub(crate) mod http;
mod network;
mod sandbox;

use std::path::Path;
use std::sync::Arc;

pub use files::{
    DEFAULT_MAX_ENTRIES, DEFAULT_MAX_READ_BYTES, DirectoryReadArgs, DirectoryReadTool,
    FileReadArgs, FileReadTool, FileWriteArgs, FileWriteTool,
};
pub use html::html_to_text;
pub use http::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TOTAL_TIMEOUT, HttpGetArgs,
    HttpGetTool,
};
pub use network::{ALLOW_PRIVATE_NETWORK_ENV, PrivateAddressRefused};

use crate::name::sanitize_tool_name;
use crate::tool::Tool;

/// The names of the built-in tools.
pub const NAMES: &[&str] = &["file_read", "file_write", "directory_read", "http_get"];

/// A built-in tool by name; file tools are confined to `root`. CrewAI's class names
/// (`FileReadTool`, `FileWriterTool`, `DirectoryReadTool`, `SerperDevTool`,
/// `ScrapeWebsiteTool`) are accepted too, built without constructor arguments (see
/// [`crate::catalog::build`] for those).
pub fn by_name(name: &str, root: &Path) -> Option<Arc<dyn Tool>> {
    let tool: Arc<dyn Tool> = match sanitize_tool_name(name).as_str() {
        "file_read" | "file_read_tool" => Arc::new(FileReadTool::new(root)),
        "file_write" | "file_writer_tool" | "file_write_tool" => Arc::new(FileWriteTool::new(root)),
        "directory_read" | "directory_read_tool" => Arc::new(DirectoryReadTool::new(root)),
        "http_get" | "http_get_tool" => Arc::new(HttpGetTool::new()),
        _ => return crate::catalog::build(name, &serde_json::Map::new(), root).ok()?,
    };
    Some(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_builds_its_tool() {
        let root = std::env::temp_dir();
        for name in NAMES {
            let tool = by_name(name, &root).unwrap_or_else(|| panic!("{name} is not built"));
            assert_eq!(tool.name(), *name);
            assert!(!tool.description().is_empty());
            assert_eq!(tool.parameters()["type"], "object");
        }
        assert_eq!(
            by_name("FileWriterTool", &root)
                .map(|tool| tool.name().to_string())
                .as_deref(),
            Some("file_write")
        );
    }
}
