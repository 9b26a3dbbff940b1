//! A panic put on purpose into each part the engine guards shows up in the soak's own counts:
//! the run is classified as panicked (even when its kickoff then succeeded) and the panic is
//! counted at its site. Healthy servers, so the injected panic is the only thing that goes wrong.

use crewai_chaos::{InjectedPanic, RunOutcome, SoakConfig, SoakSummary, soak};
use crewai_core::events::PanicSite;
use crewai_testkit::fault::FaultMix;

const RUNS: usize = 2;

/// Soaks `RUNS` healthy runs with `injected`, and checks what every injection must show.
async fn soak_with(injected: InjectedPanic) -> SoakSummary {
    let config = SoakConfig {
        runs: RUNS,
        seed: 11,
        concurrency: RUNS,
        mix: FaultMix::healthy(),
        fallback_mix: FaultMix::healthy(),
        // No sloppy summaries: the guardrail's only rejection is the injected panic.
        sloppy_summary_share: 0.0,
        inject_panic: Some(injected),
        ..SoakConfig::default()
    };
    let summary = soak(&config).await;
    eprintln!(
        "{injected:?}: {}\n{}{:?}",
        summary.line(),
        summary.panic_report(),
        summary.failures
    );
    let site = injected.site();
    assert_eq!(summary.runs, RUNS);
    assert_eq!(
        (
            summary.panics,
            summary.succeeded,
            summary.failed,
            summary.hangs
        ),
        (RUNS, 0, 0, 0),
        "every run panicked and nothing else: {}",
        summary.line()
    );
    let at_site = summary.panics_by_site.get(&site).copied().unwrap_or(0);
    assert!(
        at_site >= RUNS as u64,
        "each run's panic is counted at {site}: {}",
        summary.panic_report()
    );
    assert!(summary.caught_panics >= at_site);
    assert!(
        summary.line().contains(&format!(
            "{RUNS} panicked ({} panics caught)",
            summary.caught_panics
        )),
        "{}",
        summary.line()
    );
    assert_eq!(summary.failures.len(), RUNS);
    for (_, failure) in &summary.failures {
        assert!(
            failure.contains(&format!("{site} '")) && failure.contains(&injected.message()),
            "the panic's site and text are reported: {failure}"
        );
    }
    summary
}

/// The run recovered: without the panic count it would have been a success.
fn recovered(summary: &SoakSummary) {
    for (_, failure) in &summary.failures {
        assert!(failure.ends_with("the kickoff then succeeded"), "{failure}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_is_counted() {
    let summary = soak_with(InjectedPanic::TOOL).await;
    recovered(&summary);
    // Both tool-using tasks call it once per run.
    assert_eq!(summary.panics_by_site[&PanicSite::Tool], 2 * RUNS as u64);
}

/// The parts that panic once per run (on their first call) and whose panic the engine catches
/// where it happens, so the run goes on and recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_guardrail_listener_hook_or_callback_is_counted_once_per_run() {
    for injected in [
        InjectedPanic::GUARDRAIL,
        InjectedPanic::LISTENER,
        InjectedPanic::HOOK,
        InjectedPanic::STEP_CALLBACK,
        InjectedPanic::TASK_CALLBACK,
    ] {
        let summary = soak_with(injected).await;
        recovered(&summary);
        assert_eq!(summary.caught_panics, RUNS as u64, "{injected:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_async_task_is_counted() {
    let summary = soak_with(InjectedPanic::ASYNC_TASK).await;
    // Nothing inside the task caught it: the kickoff fails with a typed error naming the task,
    // and the run still counts as panicked, not as a typed failure.
    for (_, failure) in &summary.failures {
        assert!(
            failure.contains("the kickoff then failed") && failure.contains("task 'research'"),
            "{failure}"
        );
    }
    assert_eq!(summary.caught_panics, RUNS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_injection_nothing_is_counted() {
    let config = SoakConfig {
        runs: RUNS,
        seed: 11,
        mix: FaultMix::healthy(),
        fallback_mix: FaultMix::healthy(),
        ..SoakConfig::default()
    };
    let summary = soak(&config).await;
    assert_eq!(
        (summary.succeeded, summary.panics, summary.caught_panics),
        (RUNS, 0, 0),
        "{}: {:?}",
        summary.line(),
        summary.failures
    );
    let report = crewai_chaos::run_once(&config, 0).await;
    assert_eq!(report.outcome, RunOutcome::Succeeded);
}

#[test]
fn every_injection_names_a_distinct_site() {
    let mut sites: Vec<PanicSite> = InjectedPanic::ALL.iter().map(|i| i.site()).collect();
    sites.sort();
    sites.dedup();
    assert_eq!(sites.len(), InjectedPanic::ALL.len());
}
