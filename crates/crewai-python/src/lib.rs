//! # crewai-python
//!
//! Runs a CrewAI project's own Python tools — `BaseTool` subclasses with `args_schema` and
//! `_run`, `@tool` functions — in a worker process started with the project's interpreter, and
//! hands them to agents as crewai tools.
//!
//! The worker (`src/worker.py`, standard library only) speaks MCP over stdio, so the client is
//! [`crewai_mcp`]'s: bounded starts and calls, cancellation, one restart after a crash, the
//! process group killed and reaped on every exit path. It imports the tool modules with the
//! project's `src/` on `sys.path`; when CrewAI is not installed it provides a small stand-in
//! for `crewai.tools` (`BaseTool`, `tool`, `EnvVar`) so that the modules import unchanged.
//! A tool's exception reaches the agent as a [`crewai_tools::ToolError::Failed`] holding the
//! traceback of the project's frames.
//!
//! ```no_run
//! # async fn example() -> Result<(), crewai_python::PythonError> {
//! use std::path::Path;
//! use std::time::Duration;
//! use crewai_python::{find_python, PythonToolConfig, PythonToolSpec, PythonTools};
//!
//! let root = Path::new("my_crew");
//! let python = find_python(None, root, &["MyCustomTool".to_string()])?;
//! let tools = PythonTools::start(PythonToolConfig {
//!     python,
//!     project_root: root.to_path_buf(),
//!     tools: vec![PythonToolSpec {
//!         key: "MyCustomTool".into(),
//!         module: "my_crew.tools.custom_tool".into(),
//!         module_file: None,
//!         attr: "MyCustomTool".into(),
//!         kwargs: Default::default(),
//!         is_function: false,
//!     }],
//!     start_timeout: Duration::from_secs(30),
//!     call_timeout: Duration::from_secs(60),
//! })
//! .await?;
//! for (key, handle) in tools.handles() {
//!     println!("{key}: {}", handle.name());
//! }
//! tools.shutdown().await;
//! # Ok(()) }
//! ```

mod error;
mod find;
mod tools;

pub use error::{PythonError, ToolLoadFailure};
pub use find::find_python;
pub use tools::{PythonToolConfig, PythonToolSpec, PythonTools};
