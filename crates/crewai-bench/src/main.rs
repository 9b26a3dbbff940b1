//! `crewai-bench`: the crewai-rs side of the side-by-side benchmark with CrewAI.
//!
//! Follows the workload contract of `shared/bench/README.md`: reads the benchmark crew's
//! `agents.yaml`/`tasks.yaml`, builds the crew through the public API for every kickoff, runs
//! it against the scripted OpenAI-compatible server (`mock_llm.py`) and prints one JSON line
//! of figures as the last line on stdout. Everything else goes to stderr.
//!
//! ```text
//! crewai-bench --config ../shared/bench/crewai_py/config --port 8765 --runs 20 --concurrency 1
//! crewai-bench --mock-capacity ../shared/bench/fixtures/crewai-1.15.30_requests.jsonl --port 8765 --runs 50 --concurrency 10
//! ```
//!
//! The second form measures what the mock server itself can serve: the recorded CrewAI requests
//! sent raw, with no framework in between, at the same concurrency.

mod capacity;
mod cli;
mod error;
mod mock;
mod report;
mod rusage;
mod workload;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use crate::cli::Args;
use crate::error::BenchError;

fn main() -> ExitCode {
    let process_start = Instant::now();
    let args = Args::parse();
    let runtime = match runtime_for(args.concurrency).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("crewai-bench: could not start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, process_start)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("crewai-bench: {}", crewai_llm::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}

/// One thread for kickoffs one after another (nothing runs in parallel, and every hand-off
/// between worker threads is a wake-up that waits for a core on a busy machine); the
/// multi-threaded scheduler when kickoffs run concurrently.
fn runtime_for(concurrency: usize) -> tokio::runtime::Builder {
    if concurrency <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
}

async fn run(args: Args, process_start: Instant) -> Result<String, BenchError> {
    let stats = mock::StatsClient::new(args.port)?;
    match &args.mock_capacity {
        Some(fixtures) => capacity::run(&args, fixtures, &stats).await,
        None => workload::run(&args, &stats, process_start).await,
    }
}
