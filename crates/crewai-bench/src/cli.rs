//! Command-line arguments, as the benchmark contract spells them.

use std::path::PathBuf;

/// Runs the benchmark crew against the scripted server and prints one JSON line of figures.
#[derive(Debug, clap::Parser)]
#[command(name = "crewai-bench", version)]
pub struct Args {
    /// The folder holding `agents.yaml` and `tasks.yaml` (`shared/bench/crewai_py/config`), or
    /// the project folder above it.
    #[arg(long, required_unless_present = "mock_capacity")]
    pub config: Option<PathBuf>,
    /// Port of the mock server on 127.0.0.1.
    #[arg(long)]
    pub port: u16,
    /// Timed kickoffs (with --mock-capacity: kickoffs' worth of requests, four each).
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Kickoffs in flight at most; above 1 all kickoffs start together on the async runtime.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Free text copied into the JSON line.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Untimed kickoffs before the timed ones.
    #[arg(long, default_value_t = 0)]
    pub warmup: usize,
    /// Instead of the crew, send the recorded requests of this JSONL file (`fixtures/`) straight
    /// to the server: what the mock itself can serve at this concurrency.
    #[arg(long, value_name = "FIXTURES")]
    pub mock_capacity: Option<PathBuf>,
}
