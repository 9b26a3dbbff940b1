//! The short soak CI runs: 50 runs of the chaos crew against the realistic fault mix.

use std::time::Duration;

use crewai_chaos::{SoakConfig, soak};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_runs_against_the_realistic_mix_all_succeed_and_meet_every_fault() {
    let config = SoakConfig {
        runs: 50,
        seed: 1,
        concurrency: 8,
        request_timeout: Duration::from_secs(1),
        task_deadline: Duration::from_secs(10),
        ..SoakConfig::default()
    };
    let summary = soak(&config).await;
    // The per-kind counts, the per-site panics and the result line, for the CI log.
    eprintln!(
        "{}{}{}",
        summary.fault_report(),
        summary.panic_report(),
        summary.line()
    );

    assert_eq!(summary.runs, 50);
    assert_eq!(
        (
            summary.hangs,
            summary.panics,
            summary.caught_panics,
            summary.lost
        ),
        (0, 0, 0, 0),
        "no hang, no panic anywhere (caught ones included), no lost output: {}: {:?}",
        summary.line(),
        summary.failures
    );
    assert_eq!(
        summary.failed,
        0,
        "every run succeeds at the default fault rate: {}: {:?}",
        summary.line(),
        summary.failures
    );
    assert_eq!(summary.succeeded, 50);
    assert!(
        summary.kinds_never_served().is_empty(),
        "every fault kind was served at least once; missing {:?}:\n{}",
        summary.kinds_never_served(),
        summary.fault_report()
    );
}
