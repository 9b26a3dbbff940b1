//! What one execution in the WASI sandbox costs, printed as a table:
//! `cargo bench -p crewai-sandbox --bench startup`.
//!
//! - **load, cached module**: `WasiSandbox::load` when the compiled interpreter is already in
//!   the cache (what a process pays once, at its first `CodeInterpreterTool` call).
//! - **first execution**: `print(1)` right after the load (the instance's first page faults).
//! - **warm `print(1)`**: each later execution on the loaded sandbox: a fresh store, scratch
//!   folder and interpreter start, so this is CPython's own start-up inside wasmtime.
//! - **`import numpy, pandas`**: one execution importing both.
//! - **matplotlib**: one execution drawing a line plot and saving it as a PNG (its font cache
//!   is rebuilt each time: the guest's temporary folder is fresh per execution).
//! - **host `python3 -c 'print(1)'`**: the anchor, the host interpreter's start (unconfined).
//! - **compile** (only with `BENCH_COMPILE=1`, about a minute): the interpreter compiled into an
//!   empty cache, what a machine pays once.
//!
//! `BENCH_RUNS` (default 20) sets the repeated rows' count. The interpreter must be pulled
//! (`cargo run -q -p crewai-cli -- models pull python-wasm`). Run on a quiet machine: the
//! figures are wall-clock times on whatever cores are free.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use crewai_local::cache::{PYTHON_WASM, PYTHON_WASM_SHA256};
use crewai_sandbox::{Execution, ExitStatus, InterpreterFiles, WasiSandbox};
use tokio_util::sync::CancellationToken;

fn interpreter_dir() -> PathBuf {
    PYTHON_WASM.path_in(&crewai_local::models_dir())
}

fn runs() -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|value| value.parse().ok())
        .filter(|&runs| runs > 0)
        .unwrap_or(20)
}

/// p50 and p99 of `samples` (sorted here).
fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn row(what: &str, samples: &mut [Duration]) {
    let (p50, p99) = percentiles(samples);
    println!(
        "| {what} | {} | {:.1} | {:.1} |",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
}

fn execute(runtime: &tokio::runtime::Runtime, sandbox: &WasiSandbox, code: &str) -> Duration {
    let started = Instant::now();
    let outcome = runtime
        .block_on(sandbox.run(Execution::new(code), &CancellationToken::new()))
        .unwrap_or_else(|error| panic!("the execution could not run: {error}"));
    let elapsed = started.elapsed();
    assert_eq!(
        outcome.status,
        ExitStatus::Exited(0),
        "{code}: {}",
        outcome.stderr
    );
    elapsed
}

fn main() -> ExitCode {
    let files = InterpreterFiles::in_dir(&interpreter_dir(), PYTHON_WASM_SHA256);
    if !files.wasm.is_file() {
        eprintln!(
            "{} is missing: run `cargo run -q -p crewai-cli -- models pull python-wasm`",
            files.wasm.display()
        );
        return ExitCode::FAILURE;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("tokio: {error}"));
    let cache = interpreter_dir().join("compiled");
    println!("| step | runs | p50 ms | p99 ms |");
    println!("|---|---|---|---|");

    if std::env::var_os("BENCH_COMPILE").is_some() {
        let empty = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let started = Instant::now();
        WasiSandbox::load(&files, empty.path()).unwrap_or_else(|error| panic!("{error}"));
        row("compile into an empty cache", &mut [started.elapsed()]);
    }
    // Makes sure the cache holds the compiled module before the cached loads are timed.
    WasiSandbox::load(&files, &cache).unwrap_or_else(|error| panic!("{error}"));

    let mut loads = Vec::new();
    let mut firsts = Vec::new();
    let mut sandbox = None;
    for _ in 0..runs().min(5) {
        let started = Instant::now();
        let loaded = WasiSandbox::load(&files, &cache).unwrap_or_else(|error| panic!("{error}"));
        loads.push(started.elapsed());
        firsts.push(execute(&runtime, &loaded, "print(1)"));
        sandbox = Some(loaded);
    }
    row("load, cached module", &mut loads);
    row("first execution after the load", &mut firsts);
    let Some(sandbox) = sandbox else {
        return ExitCode::FAILURE;
    };

    let mut warm: Vec<Duration> = (0..runs())
        .map(|_| execute(&runtime, &sandbox, "print(1)"))
        .collect();
    row("warm `print(1)`", &mut warm);
    let mut imports: Vec<Duration> = (0..runs().min(5))
        .map(|_| execute(&runtime, &sandbox, "import numpy, pandas\nprint(1)"))
        .collect();
    row("`import numpy, pandas`", &mut imports);
    let plot = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('plot.png')";
    let mut plots: Vec<Duration> = (0..runs().min(5))
        .map(|_| execute(&runtime, &sandbox, plot))
        .collect();
    row("matplotlib: one line plot saved as PNG", &mut plots);

    let mut host: Vec<Duration> = (0..runs())
        .filter_map(|_| {
            let started = Instant::now();
            let status = Command::new("python3").args(["-c", "print(1)"]).output();
            status
                .ok()
                .filter(|out| out.status.success())
                .map(|_| started.elapsed())
        })
        .collect();
    if host.is_empty() {
        println!("| host `python3 -c 'print(1)'` (anchor) | not run: no python3 | | |");
    } else {
        row("host `python3 -c 'print(1)'` (anchor)", &mut host);
    }
    ExitCode::SUCCESS
}
