//! Runs cases: each one isolated (its own replay server, event bus, tool counters, hooks and
//! working directory), several at once, each under a deadline.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crewai_core::events::{Event, EventBus};
use crewai_llm::error_chain;
use crewai_testkit::replay::{Cassette, ReceivedRequest, ReplayServer};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

use crate::build::{self, RunError};
use crate::case::{CaseDir, discover};
use crate::catalog::{HookLog, RateLimits, ToolRuns};
use crate::outcome::{EventRecord, Outcome};

/// How cases are run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The deadline of one case (the engine's own timeouts should fire well before).
    pub timeout: Duration,
    /// How many cases run at once.
    pub parallel: usize,
    /// Build the diff report for failing cases.
    pub diff: bool,
    /// Rewrites each request we sent before it is compared with the recorded one. Only for
    /// tests that show a structural difference fails a case: what the engine really sent is
    /// what every ordinary run compares.
    pub rewrite_sent: Option<RewriteSent>,
}

/// A rewrite of the requests we sent (see [`RunOptions::rewrite_sent`]).
#[derive(Clone)]
pub struct RewriteSent(pub Arc<dyn Fn(&mut ReceivedRequest) + Send + Sync>);

impl RewriteSent {
    pub fn new(rewrite: impl Fn(&mut ReceivedRequest) + Send + Sync + 'static) -> RewriteSent {
        RewriteSent(Arc::new(rewrite))
    }
}

impl std::fmt::Debug for RewriteSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RewriteSent(..)")
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(60),
            parallel: 4,
            diff: true,
            rewrite_sent: None,
        }
    }
}

/// Pass or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
}

/// The verdict on one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub name: String,
    pub status: Status,
    /// The first failure (empty when passing).
    pub reason: String,
    /// Every expectation that did not hold.
    #[serde(skip)]
    pub failures: Vec<String>,
    pub requests_consumed: usize,
    pub requests_recorded: usize,
    pub duration_ms: u128,
    /// Our requests against the recorded ones (failing cases, when asked for).
    #[serde(skip)]
    pub diff: Option<String>,
    /// How the structural check read older recordings (`request N: note`), pass or fail.
    pub structure_notes: Vec<String>,
}

impl CaseReport {
    fn failed(name: String, reason: String, started: Instant) -> CaseReport {
        CaseReport {
            name,
            status: Status::Fail,
            failures: vec![reason.clone()],
            reason,
            requests_consumed: 0,
            requests_recorded: 0,
            duration_ms: started.elapsed().as_millis(),
            diff: None,
            structure_notes: Vec::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }

    /// `PASS name` or `FAIL name: reason`.
    pub fn line(&self) -> String {
        match self.status {
            Status::Pass => format!("PASS {}", self.name),
            Status::Fail => format!("FAIL {}: {}", self.name, self.reason),
        }
    }
}

/// What one case's run shares with the code that builds it: where the provider is, the event
/// bus, the tool counters and the hook log, the working directory.
#[derive(Clone)]
pub struct RunEnv {
    /// `http://127.0.0.1:PORT` of the replay server.
    pub server_url: String,
    pub bus: EventBus,
    pub tool_runs: ToolRuns,
    /// The `max_rpm` limiters, on virtual clocks.
    pub rate_limits: RateLimits,
    pub hook_log: HookLog,
    pub workdir: PathBuf,
}

fn event_record(event: &Event) -> EventRecord {
    let attributes = match event.to_json() {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    EventRecord {
        name: event.type_name().to_string(),
        event_id: event.event_id.to_string(),
        parent_event_id: event.parent_event_id.map(|id| id.to_string()),
        attributes,
    }
}

/// Loads, runs and checks the case in `dir`.
pub async fn run_case(dir: &Path, options: &RunOptions) -> CaseReport {
    let started = Instant::now();
    let fallback_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let case_dir = match CaseDir::load(dir) {
        Ok(c) => c,
        Err(e) => {
            return CaseReport::failed(
                fallback_name,
                format!("invalid case: {}", error_chain(&e)),
                started,
            );
        }
    };
    let name = case_dir.case.name.clone();
    let cassette = match Cassette::load(&case_dir.cassette) {
        Ok(c) => c,
        Err(e) => return CaseReport::failed(name, format!("invalid cassette: {e}"), started),
    };
    let server = match ReplayServer::start(cassette).await {
        Ok(s) => s,
        Err(e) => return CaseReport::failed(name, error_chain(&e), started),
    };
    let workdir = match tempfile::Builder::new()
        .prefix(&format!("conformance-{name}-"))
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            return CaseReport::failed(
                name,
                format!("cannot create a working directory: {e}"),
                started,
            );
        }
    };
    let bus = EventBus::new();
    let events: Arc<Mutex<Vec<EventRecord>>> = Arc::default();
    let sink = events.clone();
    bus.subscribe(move |event| {
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event_record(event))
    });
    let env = RunEnv {
        server_url: server.base_url(),
        bus,
        tool_runs: ToolRuns::default(),
        rate_limits: RateLimits::default(),
        hook_log: HookLog::default(),
        workdir: workdir.path().to_path_buf(),
    };

    // The engine runs on a task of its own, as a user's spawned kickoff would: a panic fails
    // this case only, and the deadline aborts the run.
    let (case, run_env) = (case_dir.case.clone(), env.clone());
    let mut run = tokio::spawn(async move { build::execute(&case, &run_env).await });
    let executed = match tokio::time::timeout(options.timeout, &mut run).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(RunError::Failed(join_failure(join))),
        Err(_) => {
            run.abort();
            Err(RunError::Timeout(options.timeout))
        }
    };

    let mut outcome = Outcome {
        workdir: env.workdir.clone(),
        tool_runs: env.tool_runs.snapshot(),
        rate_limits: env.rate_limits.snapshot(),
        hook_calls: env.hook_log.snapshot(),
        events: events.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        requests_consumed: server.played(),
        requests_recorded: server.recorded(),
        unmatched: server.failures(),
        ..Default::default()
    };
    let mut received = server.requests();
    if let Some(rewrite) = &options.rewrite_sent {
        received.iter_mut().for_each(|request| (rewrite.0)(request));
    }
    let interactions = server.interactions();
    let structural = crate::structure::compare(&case_dir.case, &received, &interactions);
    let mut failures = match executed {
        Ok(execution) => {
            outcome.result = execution.outputs;
            outcome.manager_tools = execution.manager_tools;
            crate::expect::check(&case_dir.case.expect, &outcome)
        }
        // Running out of recordings usually is why the engine gave up: say that first.
        Err(RunError::Unsupported(what)) => vec![format!("unsupported: {what}")],
        Err(RunError::Invalid(what)) => vec![format!("invalid case: {what}")],
        Err(other) => outcome
            .unmatched
            .iter()
            .cloned()
            .chain(std::iter::once(error_chain(&other)))
            .collect(),
    };
    // What we sent must have CrewAI's structure whatever the expectations say.
    failures.extend(
        structural
            .differences
            .iter()
            .map(|d| format!("structure: {d}")),
    );
    let status = if failures.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    let diff = (status == Status::Fail && options.diff)
        .then(|| crate::diff::report(&received, &interactions, &structural));
    server.shutdown().await;
    CaseReport {
        name,
        status,
        reason: failures.first().cloned().unwrap_or_default(),
        failures,
        requests_consumed: outcome.requests_consumed,
        requests_recorded: outcome.requests_recorded,
        duration_ms: started.elapsed().as_millis(),
        diff,
        structure_notes: structural
            .notes
            .iter()
            .map(|n| format!("request {}: {}", n.request, n.note))
            .collect(),
    }
}

/// Why a spawned run ended without a result.
fn join_failure(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => format!(
            "the engine panicked: {}",
            crewai_core::events::panic_message(payload.as_ref())
        ),
        Err(join) => format!("the run was abandoned: {join}"),
    }
}

/// The case folders to run: every case under `root`, or only the one named `only`.
pub fn select_cases(root: &Path, only: Option<&str>) -> Result<Vec<PathBuf>, String> {
    let all = discover(root).map_err(|e| error_chain(&e))?;
    if all.is_empty() {
        return Err(format!(
            "no cases under {} (a case is a folder holding case.yaml and cassette.yaml)",
            root.display()
        ));
    }
    match only {
        None => Ok(all),
        Some(name) => {
            let hit: Vec<PathBuf> = all
                .iter()
                .filter(|d| d.file_name().is_some_and(|n| n == name))
                .cloned()
                .collect();
            if hit.is_empty() {
                Err(format!("no case named `{name}` under {}", root.display()))
            } else {
                Ok(hit)
            }
        }
    }
}

/// Runs every case, `options.parallel` at a time; `on_done` sees each report as it finishes.
/// Returns the reports sorted by name.
pub async fn run_all(
    dirs: Vec<PathBuf>,
    options: &RunOptions,
    mut on_done: impl FnMut(&CaseReport),
) -> Vec<CaseReport> {
    // Each case on a task of its own, so cases use every worker thread.
    let mut reports: Vec<CaseReport> = futures::stream::iter(dirs)
        .map(|dir| {
            let options = options.clone();
            async move {
                let started = Instant::now();
                let name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| dir.display().to_string());
                match tokio::spawn(async move { run_case(&dir, &options).await }).await {
                    Ok(report) => report,
                    Err(join) => CaseReport::failed(
                        name,
                        format!("the runner failed: {}", join_failure(join)),
                        started,
                    ),
                }
            }
        })
        .buffer_unordered(options.parallel.max(1))
        .inspect(|report| on_done(report))
        .collect()
        .await;
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    reports
}

/// `N passed, M failed`.
pub fn summary_line(reports: &[CaseReport]) -> String {
    let passed = reports.iter().filter(|r| r.passed()).count();
    format!("{passed} passed, {} failed", reports.len() - passed)
}

/// The `--json` document.
pub fn json_report(reports: &[CaseReport]) -> Value {
    serde_json::json!({ "cases": reports })
}
