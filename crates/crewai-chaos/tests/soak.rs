//! The short soak CI runs: 50 runs of the chaos crew against the realistic fault mix.

use std::time::Duration;

use crewai_chaos::{SoakConfig, soak};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_runs_against_the_realistic_mix_neither_hang_panic_nor_lose_outputs() {
    let config = SoakConfig {
        runs: 50,
        seed: 1,
        concurrency: 8,
        request_timeout: Duration::from_secs(1),
        task_deadline: Duration::from_secs(10),
        ..SoakConfig::default()
    };
    let summary = soak(&config).await;
    eprintln!("{}\n{}", summary.fault_report(), summary.line());

    assert_eq!(summary.runs, 50);
    assert_eq!(
        (summary.hangs, summary.panics, summary.lost),
        (0, 0, 0),
        "{}: {:?}",
        summary.line(),
        summary.failures
    );
    // 99% of 50 runs leaves no room at all; one failed run is allowed so that a slow CI machine
    // (a request timing out under load on top of an injected fault) does not fail the build. The
    // release soak (`--runs 1000`) is where the 99% is measured.
    assert!(
        summary.succeeded >= 49,
        "{}: {:?}",
        summary.line(),
        summary.failures
    );
    assert!(
        summary.faults.len() >= 8,
        "most fault kinds were served: {}",
        summary.fault_report()
    );
}
