//! `file_read`, `file_write` and `directory_read`, each confined to a root directory.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::sandbox::Sandbox;
use crate::tool::{ToolContext, ToolError};
use crate::typed::TypedTool;

/// The most text `file_read` returns by default.
pub const DEFAULT_MAX_READ_BYTES: usize = 512 * 1024;
/// The most entries `directory_read` lists by default.
pub const DEFAULT_MAX_ENTRIES: usize = 1000;

/// Runs blocking file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ToolError::caused("the file operation did not finish", error))?
}

/// Reads a text file (or a range of its lines) below a root directory.
///
/// ```
/// use crewai_tools::builtin::FileReadTool;
/// use crewai_tools::{Tool, ToolContext};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
/// let tool = FileReadTool::new(dir.path());
/// let args = serde_json::json!({"file_path": "notes.txt", "start_line": 2, "line_count": 1});
/// assert_eq!(tool.run(args, &ToolContext::default()).await.unwrap().to_text(), "two\n");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FileReadTool {
    sandbox: Sandbox,
    max_bytes: usize,
}

/// Arguments of `file_read`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileReadArgs {
    /// Path of the file to read, relative to the working directory.
    pub file_path: String,
    /// The first line to read (1 is the first line of the file). Default: 1.
    #[serde(default)]
    pub start_line: Option<u32>,
    /// How many lines to read. Default: all of them.
    #[serde(default)]
    pub line_count: Option<u32>,
}

impl FileReadTool {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileReadTool {
            sandbox: Sandbox::new(root),
            max_bytes: DEFAULT_MAX_READ_BYTES,
        }
    }

    crewai_llm::setters! {
        /// Caps the text returned; longer content is cut with a note telling the model how to
        /// read on.
        pub fn with_max_bytes(max_bytes: usize) => max_bytes = max_bytes;
    }

    /// The directory the tool is confined to.
    pub fn root(&self) -> &Path {
        self.sandbox.root()
    }
}

#[async_trait]
impl TypedTool for FileReadTool {
    type Args = FileReadArgs;
    type Output = String;

    fn name(&self) -> &str {
        "file_read"
    }

    fn description(&self) -> &str {
        "Reads the text of a file in the working directory. Give `file_path`; to read part of a \
         long file, also give `start_line` (1-based) and `line_count`."
    }

    async fn call(&self, args: FileReadArgs, _ctx: &ToolContext) -> Result<String, ToolError> {
        let sandbox = self.sandbox.clone();
        let max_bytes = self.max_bytes;
        blocking(move || {
            let path = sandbox.existing(&args.file_path)?;
            if path.is_dir() {
                return Err(ToolError::Failed(format!(
                    "'{}' is a directory, not a file: use directory_read to list it",
                    args.file_path
                )));
            }
            let start_line = args.start_line.unwrap_or(1).max(1);
            read_lines(
                &path,
                &args.file_path,
                start_line,
                args.line_count,
                max_bytes,
            )
        })
        .await
    }
}

fn read_lines(
    path: &Path,
    shown: &str,
    start_line: u32,
    line_count: Option<u32>,
    max_bytes: usize,
) -> Result<String, ToolError> {
    let file = fs::File::open(path)
        .map_err(|error| ToolError::caused(format!("'{shown}' cannot be opened"), error))?;
    let mut reader = BufReader::new(file);
    let mut text = String::new();
    let mut line = Vec::new();
    let mut number = 0u32;
    let mut taken = 0u32;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|error| ToolError::caused(format!("'{shown}' cannot be read"), error))?;
        if read == 0 {
            break;
        }
        if line.contains(&0) {
            return Err(ToolError::Failed(format!(
                "'{shown}' is a binary file, not text"
            )));
        }
        number += 1;
        if number < start_line {
            continue;
        }
        if line_count.is_some_and(|count| taken >= count) {
            break;
        }
        let piece = String::from_utf8_lossy(&line);
        if text.len() + piece.len() > max_bytes {
            text.push_str(&format!(
                "\n[Output cut at {max_bytes} bytes, before line {number}. Read on with start_line = {number}.]"
            ));
            return Ok(text);
        }
        text.push_str(&piece);
        taken += 1;
    }
    if number < start_line && number > 0 {
        return Err(ToolError::Failed(format!(
            "'{shown}' has {number} lines, so there is no line {start_line}"
        )));
    }
    Ok(text)
}

/// Writes a text file below a root directory, creating directories as needed.
///
/// ```
/// use crewai_tools::builtin::FileWriteTool;
/// use crewai_tools::{Tool, ToolContext};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let tool = FileWriteTool::new(dir.path());
/// let args = serde_json::json!({"filename": "out.md", "content": "# Hi", "directory": "reports"});
/// tool.run(args, &ToolContext::default()).await.unwrap();
/// assert_eq!(std::fs::read_to_string(dir.path().join("reports/out.md")).unwrap(), "# Hi");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FileWriteTool {
    sandbox: Sandbox,
}

/// Arguments of `file_write`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileWriteArgs {
    /// Name of the file to write.
    pub filename: String,
    /// The text to write.
    pub content: String,
    /// Directory for the file, relative to the working directory. Default: the working directory.
    #[serde(default)]
    pub directory: Option<String>,
    /// Replace the file if it already exists. Default: false.
    #[serde(default)]
    pub overwrite: Option<bool>,
}

impl FileWriteTool {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileWriteTool {
            sandbox: Sandbox::new(root),
        }
    }

    /// The directory the tool is confined to.
    pub fn root(&self) -> &Path {
        self.sandbox.root()
    }
}

#[async_trait]
impl TypedTool for FileWriteTool {
    type Args = FileWriteArgs;
    type Output = String;

    fn name(&self) -> &str {
        "file_write"
    }

    fn description(&self) -> &str {
        "Writes text to a file in the working directory. Give `filename` and `content`, optionally \
         a `directory` (created if missing) and `overwrite: true` to replace an existing file."
    }

    async fn call(&self, args: FileWriteArgs, _ctx: &ToolContext) -> Result<String, ToolError> {
        let sandbox = self.sandbox.clone();
        blocking(move || write_file(&sandbox, args)).await
    }

    fn cache_result(&self, _args: &serde_json::Value, _output: &crate::ToolOutput) -> bool {
        // Writing has an effect; a cached "written" would skip the write.
        false
    }
}

fn write_file(sandbox: &Sandbox, args: FileWriteArgs) -> Result<String, ToolError> {
    let requested = match args
        .directory
        .as_deref()
        .map(str::trim)
        .filter(|dir| !dir.is_empty() && *dir != ".")
    {
        Some(directory) => format!(
            "{}/{}",
            directory.trim_end_matches('/'),
            args.filename.trim()
        ),
        None => args.filename.trim().to_string(),
    };
    let path = sandbox.creatable(&requested)?;
    if path.is_dir() {
        return Err(ToolError::Failed(format!(
            "'{requested}' is a directory: give a file name"
        )));
    }
    let Some(parent) = path.parent() else {
        return Err(ToolError::InvalidArguments(format!(
            "'{requested}' has no parent directory"
        )));
    };
    fs::create_dir_all(parent).map_err(|error| {
        ToolError::caused(
            format!("the directory for '{requested}' cannot be created"),
            error,
        )
    })?;
    // The directories now exist; check again so a link raced in between cannot lead out.
    let path = sandbox.creatable(&requested)?;
    let overwrite = args.overwrite.unwrap_or(false);
    let mut options = fs::OpenOptions::new();
    options.write(true);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(&path).map_err(|error| match error.kind() {
        std::io::ErrorKind::AlreadyExists => ToolError::Failed(format!(
            "'{requested}' already exists; call again with overwrite set to true to replace it"
        )),
        _ => ToolError::caused(format!("'{requested}' cannot be written"), error),
    })?;
    file.write_all(args.content.as_bytes())
        .map_err(|error| ToolError::caused(format!("'{requested}' cannot be written"), error))?;
    Ok(format!(
        "Wrote {} bytes to {}.",
        args.content.len(),
        sandbox.display(&path)
    ))
}

/// Lists the files below a directory inside a root directory, recursively.
///
/// ```
/// use crewai_tools::builtin::DirectoryReadTool;
/// use crewai_tools::{Tool, ToolContext};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir(dir.path().join("src")).unwrap();
/// std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
/// let tool = DirectoryReadTool::new(dir.path());
/// let listing = tool.run(serde_json::json!({}), &ToolContext::default()).await.unwrap().to_text();
/// assert!(listing.contains("- src/main.rs"), "{listing}");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct DirectoryReadTool {
    sandbox: Sandbox,
    max_entries: usize,
}

/// Arguments of `directory_read`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DirectoryReadArgs {
    /// The directory to list, relative to the working directory. Default: the working directory.
    #[serde(default)]
    pub directory: Option<String>,
}

impl DirectoryReadTool {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirectoryReadTool {
            sandbox: Sandbox::new(root),
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }

    crewai_llm::setters! {
        /// Caps the listing; the rest is summarised in a note.
        pub fn with_max_entries(max_entries: usize) => max_entries = max_entries;
    }

    /// The directory the tool is confined to.
    pub fn root(&self) -> &Path {
        self.sandbox.root()
    }
}

#[async_trait]
impl TypedTool for DirectoryReadTool {
    type Args = DirectoryReadArgs;
    type Output = String;

    fn name(&self) -> &str {
        "directory_read"
    }

    fn description(&self) -> &str {
        "Lists every file below a directory of the working directory, recursively. Give \
         `directory`, or leave it out to list the working directory itself."
    }

    async fn call(&self, args: DirectoryReadArgs, _ctx: &ToolContext) -> Result<String, ToolError> {
        let sandbox = self.sandbox.clone();
        let max_entries = self.max_entries;
        blocking(move || {
            let requested = args
                .directory
                .as_deref()
                .map(str::trim)
                .filter(|dir| !dir.is_empty())
                .unwrap_or(".");
            let directory = sandbox.existing(requested)?;
            if !directory.is_dir() {
                return Err(ToolError::Failed(format!(
                    "'{requested}' is a file, not a directory: use file_read to read it"
                )));
            }
            let mut entries = Vec::new();
            let total = collect_files(&directory, &mut entries, max_entries)?;
            let shown_dir = sandbox.display(&directory);
            if entries.is_empty() {
                return Ok(format!("The directory {shown_dir} contains no files."));
            }
            entries.sort();
            let mut listing = format!("Files in {shown_dir}:\n");
            for entry in &entries {
                listing.push_str(&format!("- {}\n", sandbox.display(entry)));
            }
            if total > entries.len() {
                listing.push_str(&format!(
                    "[{} more entries not listed; list a subdirectory to see them.]\n",
                    total - entries.len()
                ));
            }
            Ok(listing)
        })
        .await
    }
}

/// Collects files (and links, which are listed but never followed) below `directory`, keeping at
/// most `limit`; returns how many there are in all.
fn collect_files(
    directory: &Path,
    found: &mut Vec<PathBuf>,
    limit: usize,
) -> Result<usize, ToolError> {
    let mut total = 0;
    let mut pending = vec![directory.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = fs::read_dir(&current)
            .map_err(|error| ToolError::caused("a directory cannot be listed", error))?;
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
                continue;
            }
            total += 1;
            if found.len() < limit {
                found.push(entry.path());
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tool, ToolHandle};
    use serde_json::json;

    fn ctx() -> ToolContext {
        ToolContext::default()
    }

    async fn run(tool: &dyn Tool, args: serde_json::Value) -> Result<String, ToolError> {
        tool.run(args, &ctx()).await.map(|output| output.to_text())
    }

    #[tokio::test]
    async fn file_read_reads_whole_files_and_ranges() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "1\n2\n3\n4\n").unwrap();
        let tool = FileReadTool::new(dir.path());
        assert_eq!(
            run(&tool, json!({"file_path": "a.txt"})).await.unwrap(),
            "1\n2\n3\n4\n"
        );
        assert_eq!(
            run(&tool, json!({"file_path": "a.txt", "start_line": 3}))
                .await
                .unwrap(),
            "3\n4\n"
        );
        assert_eq!(
            run(
                &tool,
                json!({"file_path": "a.txt", "start_line": 2, "line_count": 2})
            )
            .await
            .unwrap(),
            "2\n3\n"
        );
        let error = run(&tool, json!({"file_path": "a.txt", "start_line": 9}))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("has 4 lines"), "{error}");
    }

    #[tokio::test]
    async fn file_read_rejects_escapes_and_explains() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        let tool = FileReadTool::new(dir.path().join("sub"));
        for attempt in [
            "../secret.txt",
            "sub/../../secret.txt",
            outside.path().join("secret.txt").to_str().unwrap(),
        ] {
            let error = run(&tool, json!({"file_path": attempt})).await.unwrap_err();
            assert!(
                matches!(error, ToolError::InvalidArguments(_)),
                "{attempt}: {error:?}"
            );
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(
                outside.path().join("secret.txt"),
                dir.path().join("sub/link"),
            )
            .unwrap();
            let error = run(&tool, json!({"file_path": "link"})).await.unwrap_err();
            assert!(
                error.to_string().contains("outside the allowed directory"),
                "{error}"
            );
        }
        let error = run(&tool, json!({"file_path": "."})).await.unwrap_err();
        assert!(error.to_string().contains("directory_read"), "{error}");
        let error = run(&tool, json!({"file_path": "nope.txt"}))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("does not exist"), "{error}");
    }

    #[tokio::test]
    async fn file_read_caps_output_and_refuses_binary() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("big.txt"), "0123456789\n".repeat(100)).unwrap();
        fs::write(dir.path().join("bin"), [0u8, 1, 2, 3]).unwrap();
        let tool = FileReadTool::new(dir.path()).with_max_bytes(25);
        let text = run(&tool, json!({"file_path": "big.txt"})).await.unwrap();
        assert!(
            text.starts_with("0123456789\n0123456789\n\n[Output cut at 25 bytes, before line 3."),
            "{text}"
        );
        let error = run(&tool, json!({"file_path": "bin"})).await.unwrap_err();
        assert!(error.to_string().contains("binary"), "{error}");
    }

    #[tokio::test]
    async fn file_write_creates_refuses_clobbering_and_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let tool = FileWriteTool::new(dir.path());
        let text = run(
            &tool,
            json!({"filename": "a.txt", "content": "hello", "directory": "out/nested"}),
        )
        .await
        .unwrap();
        assert_eq!(text, "Wrote 5 bytes to out/nested/a.txt.");
        assert_eq!(
            fs::read_to_string(dir.path().join("out/nested/a.txt")).unwrap(),
            "hello"
        );
        let error = run(
            &tool,
            json!({"filename": "a.txt", "content": "x", "directory": "out/nested"}),
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("overwrite"), "{error}");
        run(&tool, json!({"filename": "a.txt", "content": "bye", "directory": "out/nested", "overwrite": true})).await.unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("out/nested/a.txt")).unwrap(),
            "bye"
        );
        run(
            &tool,
            json!({"filename": "top.txt", "content": "", "directory": null, "overwrite": null}),
        )
        .await
        .unwrap();
        assert!(dir.path().join("top.txt").exists());
    }

    #[tokio::test]
    async fn file_write_rejects_escapes() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let tool = FileWriteTool::new(dir.path());
        let error = run(
            &tool,
            json!({"filename": "x.txt", "content": "x", "directory": ".."}),
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("'..'"), "{error}");
        let absolute = outside.path().to_str().unwrap();
        let error = run(
            &tool,
            json!({"filename": "x.txt", "content": "x", "directory": absolute}),
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("outside"), "{error}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();
            let error = run(
                &tool,
                json!({"filename": "x.txt", "content": "x", "directory": "escape"}),
            )
            .await
            .unwrap_err();
            assert!(error.to_string().contains("outside"), "{error}");
        }
        assert_eq!(
            fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing was written outside"
        );
        assert!(!ToolHandle::from_tool(tool).should_cache(&json!({}), &"x".into()));
    }

    #[tokio::test]
    async fn directory_read_lists_recursively_without_following_links() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        fs::write(dir.path().join("a/b/c.txt"), "").unwrap();
        fs::write(dir.path().join("top.txt"), "").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let tool = DirectoryReadTool::new(dir.path());
        let listing = run(&tool, json!({"directory": null})).await.unwrap();
        assert!(listing.starts_with("Files in .:\n"), "{listing}");
        assert!(
            listing.contains("- a/b/c.txt\n") && listing.contains("- top.txt\n"),
            "{listing}"
        );
        assert!(!listing.contains("secret"), "{listing}");
        let sub = run(&tool, json!({"directory": "a"})).await.unwrap();
        assert_eq!(sub, "Files in a:\n- a/b/c.txt\n");
        let error = run(&tool, json!({"directory": "../"})).await.unwrap_err();
        assert!(error.to_string().contains("'..'"), "{error}");
        let capped = DirectoryReadTool::new(dir.path()).with_max_entries(1);
        let listing = run(&capped, json!({})).await.unwrap();
        assert!(listing.contains("more entries not listed"), "{listing}");
        fs::create_dir(dir.path().join("empty")).unwrap();
        assert_eq!(
            run(&tool, json!({"directory": "empty"})).await.unwrap(),
            "The directory empty contains no files."
        );
    }
}
