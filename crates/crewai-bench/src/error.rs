//! What can stop a benchmark run.
//!
//! Each variant says what failed at its level and keeps the cause as its `source()`; `main`
//! prints the whole chain ([`crewai_llm::error_chain`]).

use std::path::PathBuf;

/// A cause kept as a `source()` where it comes from several libraries (reqwest, the LLM
/// transport), or is a description of what the mock answered.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Engine errors are boxed: they are large and only travel up to `main`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the benchmark project in {path} could not be used")]
    Project {
        path: PathBuf,
        #[source]
        source: Box<crewai_project::ProjectError>,
    },
    #[error("kickoff {index} failed")]
    Kickoff {
        index: usize,
        #[source]
        source: Box<crewai::CrewError>,
    },
    #[error("a kickoff task stopped before it finished")]
    Join(#[from] tokio::task::JoinError),
    #[error("the mock server on port {port} did not answer {what} (is mock_llm.py running there?)")]
    Mock {
        port: u16,
        what: &'static str,
        #[source]
        source: BoxError,
    },
    #[error("could not read the request fixtures {path}")]
    FixturesRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the request fixtures {path}: line {line} is not JSON")]
    FixturesJson {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// The fixtures are JSON lines but not the expected records (`problem` says how).
    #[error("the request fixtures {path}: {problem}")]
    Fixtures { path: PathBuf, problem: String },
    #[error("--runs must be at least 1")]
    NoRuns,
}
