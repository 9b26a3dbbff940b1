//! `crewai-chaos --runs N --seed S`: the soak test (see the library docs). Progress, the fault
//! mix, the panics per site and the failures go to standard error; the last line on standard
//! output is the summary.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use crewai_chaos::{SoakConfig, soak_with_progress};
use crewai_testkit::fault::FaultMix;

/// Runs a three-task crew many times against fault-injecting model servers.
#[derive(Debug, Parser)]
#[command(name = "crewai-chaos", version)]
struct Args {
    /// How many runs.
    #[arg(long, default_value_t = 1000)]
    runs: usize,
    /// The seed of every run's faults (the same seed gives the same faults).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The model client's request timeout, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Every agent's max_execution_time, in milliseconds.
    #[arg(long, default_value_t = 20_000)]
    deadline_ms: u64,
    /// Multiplies every fault rate of the realistic mix (2 doubles the faults).
    #[arg(long, default_value_t = 1.0)]
    fault_scale: f64,
    /// Exit with status 1 unless 0 hangs, 0 panics caught (so 0 panicked runs), 0 lost and at
    /// least 99% succeeded.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = SoakConfig {
        runs: args.runs,
        seed: args.seed,
        concurrency: args.concurrency,
        request_timeout: Duration::from_millis(args.timeout_ms.max(1)),
        task_deadline: Duration::from_millis(args.deadline_ms.max(1)),
        mix: FaultMix::realistic().scaled(args.fault_scale),
        fallback_mix: FaultMix::realistic().scaled(args.fault_scale * 0.2),
        ..SoakConfig::default()
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("crewai-chaos: could not start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let every = (config.runs / 10).max(1);
    let summary = runtime.block_on(soak_with_progress(&config, |done, _| {
        if done % every == 0 {
            eprintln!("crewai-chaos: {done}/{} runs", config.runs);
        }
    }));

    eprintln!(
        "seed {}, concurrency {}, request timeout {} ms, task deadline {} ms; primary mix {:.1}% faults, fallback {:.1}%",
        config.seed,
        config.concurrency,
        config.request_timeout.as_millis(),
        config.task_deadline.as_millis(),
        100.0 * config.mix.total_rate(),
        100.0 * config.fallback_mix.total_rate()
    );
    eprint!("{}", summary.fault_report());
    eprint!("{}", summary.panic_report());
    if !summary.failures.is_empty() {
        eprintln!("failures:");
        for (index, error) in &summary.failures {
            eprintln!("  run {index}: {error}");
        }
    }
    println!("{}", summary.line());
    let met = summary.hangs == 0
        && summary.panics == 0
        && summary.caught_panics == 0
        && summary.lost == 0
        && summary.success_rate() >= 0.99;
    if args.check && !met {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
