//! What can stop a benchmark run.

use std::path::PathBuf;

/// Engine errors are boxed: they are large and only travel up to `main`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the benchmark project in {path} could not be used: {source}")]
    Project {
        path: PathBuf,
        #[source]
        source: Box<crewai_project::ProjectError>,
    },
    #[error("kickoff {index} failed: {source}")]
    Kickoff {
        index: usize,
        #[source]
        source: Box<crewai::CrewError>,
    },
    #[error("a kickoff task stopped before it finished: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error(
        "the mock server on port {port} did not answer {what}: {message} (is mock_llm.py running there?)"
    )]
    Mock {
        port: u16,
        what: &'static str,
        message: String,
    },
    #[error("could not read the request fixtures {path}: {message}")]
    Fixtures { path: PathBuf, message: String },
    #[error("--runs must be at least 1")]
    NoRuns,
}
