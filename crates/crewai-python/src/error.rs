//! [`PythonError`]: why a project's Python tools could not be started.

use std::fmt;
use std::path::PathBuf;

use crewai_mcp::McpError;

/// A project's Python tools could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// No interpreter was given and none was found.
    #[error(
        "the Python tools {} need a Python interpreter, and none was found (tried {}); create the project's virtual environment (`uv venv` or `python3 -m venv .venv`), install python3, or pass --python PATH",
        needed_by.join(", "),
        tried.join(", ")
    )]
    NoPython {
        needed_by: Vec<String>,
        tried: Vec<String>,
    },
    /// The interpreter given with `--python` cannot be run.
    #[error("--python {}: {problem}", path.display())]
    ExplicitPythonUnusable { path: PathBuf, problem: String },
    /// The worker script could not be written to a temporary directory.
    #[error("the Python tool worker's files could not be written")]
    WorkerFiles {
        #[source]
        source: std::io::Error,
    },
    /// The worker's spec could not be encoded (a kwargs value JSON cannot hold).
    #[error("the Python tool worker's spec could not be written as JSON")]
    Spec {
        #[source]
        source: serde_json::Error,
    },
    /// Writing the worker's files was interrupted (the blocking task did not finish).
    #[error("writing the Python tool worker's files was interrupted")]
    Interrupted {
        #[source]
        source: tokio::task::JoinError,
    },
    /// One or more tools failed to import or to be instantiated.
    #[error("{}", ToolLoadFailures(failures))]
    ToolLoad { failures: Vec<ToolLoadFailure> },
    /// The worker did not start or did not answer the MCP handshake.
    #[error("the Python tool worker (`{}`) did not start", python.display())]
    Start {
        python: PathBuf,
        #[source]
        source: Box<McpError>,
    },
    /// The worker started but does not list a requested tool (a bug in the worker).
    #[error("the Python tool worker does not list the tool '{key}' it was asked to load")]
    NotListed { key: String },
}

/// A tool the worker could not load.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ToolLoadFailure {
    /// The tool's key in the spec.
    pub key: String,
    /// The dotted module it was imported from.
    pub module: String,
    /// The class or function looked up in it.
    pub attr: String,
    /// Python's error, with the traceback of the project's own frames.
    pub error: String,
}

struct ToolLoadFailures<'a>(&'a [ToolLoadFailure]);

impl fmt::Display for ToolLoadFailures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, failure) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(
                f,
                "the Python tool '{}' (`{}` from module `{}`) could not be loaded:\n{}",
                failure.key,
                failure.attr,
                failure.module,
                failure.error.trim_end()
            )?;
        }
        Ok(())
    }
}
