//! `crewai-conformance --cases DIR [--case NAME] [--json FILE] [--allow-fail] [--verbose] [--notes]`
//!
//! Runs every case under DIR against the engine, prints `PASS name` / `FAIL name: reason` per
//! case and `N passed, M failed` at the end; exits 0 only when none failed (or with
//! `--allow-fail`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use crewai_conformance::runner::{RunOptions, json_report, run_all, select_cases, summary_line};

/// Replays CrewAI's recorded test runs against crewai-rs.
#[derive(Debug, Parser)]
#[command(name = "crewai-conformance", version)]
struct Args {
    /// The folder holding the case folders (each with case.yaml and cassette.yaml).
    #[arg(long)]
    cases: PathBuf,
    /// Run only this case (its folder name).
    #[arg(long)]
    case: Option<String>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Exit 0 even when cases fail.
    #[arg(long)]
    allow_fail: bool,
    /// Print every failed expectation and the request diff of failing cases.
    #[arg(long)]
    verbose: bool,
    /// Also print, for every case, how the structural check read older recordings.
    #[arg(long)]
    notes: bool,
    /// How many cases run at once.
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    /// The deadline of one case, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let dirs = match select_cases(&args.cases, args.case.as_deref()) {
        Ok(dirs) => dirs,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let options = RunOptions {
        timeout: Duration::from_secs(args.timeout),
        parallel: args.jobs,
        diff: args.verbose,
        rewrite_sent: None,
    };
    let (verbose, notes) = (args.verbose, args.notes);
    let reports = run_all(dirs, &options, |report| {
        println!("{}", report.line());
        if notes {
            for note in &report.structure_notes {
                println!("  note: {note}");
            }
        }
        if verbose && !report.passed() {
            for failure in report.failures.iter().skip(1) {
                println!("  also: {failure}");
            }
            if let Some(diff) = &report.diff {
                print!("{diff}");
            }
        }
    })
    .await;
    println!("{}", summary_line(&reports));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&json_report(&reports)).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if reports.iter().all(|r| r.passed()) || args.allow_fail {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
