//! # crewai-chaos
//!
//! The soak test: the same small crew run many times against OpenAI-compatible servers that fail
//! at random ([`crewai_testkit::fault`]), to show that no run hangs, panics or loses a finished
//! task's output, and that retries, fallbacks and the executor's own recovery turn a bad day at
//! the provider into successful runs.
//!
//! Each run builds a fresh crew through the public API:
//! - one model client (`build_llm_with`, an OpenAI config with `base_url` at the run's *primary*
//!   fault server, a short request `timeout`, `max_retries: 2`) with a fallback model at a second,
//!   less faulty server;
//! - three tasks: `research` (async, with the `word_count` tool), `analysis` (the same tool) and
//!   `summary` (a function guardrail: the summary must end with a sign-off word);
//! - every agent with `max_execution_time`, and the crew with one SQLite store (in memory) as
//!   its task output store and its run journal; every task that finished (a `task_completed`
//!   event) must have its output in both: the latest-kickoff outputs and the journaled run.
//!
//! Each run is exactly one of:
//! - a *hang* when it outlives its deadline (every task's `max_execution_time`, one after the
//!   other) by more than a second (any panics it had still count in `panics caught`);
//! - a *panic* when anything panicked during it: the kickoff's own task, or any part whose panic
//!   the engine caught (a tool, a guardrail, a listener, a hook, a step or task callback, an
//!   async task; see [`crewai_core::events::PanicSite`]), even when the run then succeeded or
//!   failed with a typed error. The engine counts each caught panic on the crew's event bus
//!   ([`crewai_core::events::EventBus::caught_panics`]), and the soak reads that count, so a
//!   panic nobody listened for still counts;
//! - a *success* when the kickoff returns three task outputs and a guarded summary;
//! - a *typed failure* when it returns an error (or an output missing either).
//!
//! A *lost* output is a `task_completed` event whose output is missing from the store or from the
//! journaled run. Besides the runs, the summary counts every panic (`panics caught`, per site in
//! [`SoakSummary::panic_report`]).
//!
//! [`SoakConfig::inject_panic`] makes each run panic at one place on purpose, to show that the
//! classification above sees it (the tests in `tests/injected_panics.rs`).
//!
//! Every run draws its faults from its own seed (the soak seed and the run's number), so a seed
//! gives the same fault sequence whatever the concurrency.
//!
//! ```no_run
//! # async fn demo() {
//! use crewai_chaos::{SoakConfig, soak};
//! let summary = soak(&SoakConfig { runs: 100, seed: 1, ..SoakConfig::default() }).await;
//! println!("{}", summary.line());
//! assert_eq!(summary.hangs + summary.panics + summary.lost, 0);
//! assert_eq!(summary.caught_panics, 0);
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crewai::prelude::*;
use crewai::tool;
use crewai_core::crew::KickoffOptions;
use crewai_core::events::PanicSite;
use crewai_core::hooks::{HookDecision, Hooks};
use crewai_core::interpolate::Inputs;
use crewai_core::store::{RunJournal, StoredTaskOutput, TaskOutputStore};
use crewai_llm::router::BuildOptions;
use crewai_llm::{RetryPolicy, error_chain};
use crewai_store::Store;
use crewai_testkit::fault::{FaultKind, FaultMix, FaultServer};
use crewai_testkit::scripted::{RecordedRequest, Reply};
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

mod inject;

pub use inject::InjectedPanic;
use inject::{Armed, PanickingLlm, panicking_word_count_tool};

/// The word the summary must end with (checked by the guardrail).
pub const SIGN_OFF: &str = "VERIFIED";

/// What the guardrail tells the model when the sign-off is missing.
const GUARDRAIL_FEEDBACK: &str = "The summary must end with the word VERIFIED.";

/// The sentence the tools count.
const SENTENCE: &str = "the quick brown fox jumps over the lazy dog";

/// Counts the words in a text.
///
/// # Arguments
/// * `text` - The text whose words to count.
#[tool]
fn word_count(text: String) -> usize {
    text.split_whitespace().count()
}

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    pub runs: usize,
    pub seed: u64,
    /// Runs in flight at once.
    pub concurrency: usize,
    /// The model client's total request timeout.
    pub request_timeout: Duration,
    /// Every agent's `max_execution_time`.
    pub task_deadline: Duration,
    /// The faults of the primary model's server.
    pub mix: FaultMix,
    /// The faults of the fallback model's server.
    pub fallback_mix: FaultMix,
    /// The share of runs whose crew streams replies (server-sent events).
    pub streaming_share: f64,
    /// The share of summaries the model first writes without the sign-off (the guardrail sends
    /// them back).
    pub sloppy_summary_share: f64,
    /// Backoff of the model client's retries (its `max_retries` is the config's).
    pub retry: RetryPolicy,
    /// A part of every run that panics on purpose (`None`: nothing does).
    pub inject_panic: Option<InjectedPanic>,
}

impl Default for SoakConfig {
    /// The figures of the README: the realistic mix on the primary, a fifth of it on the fallback.
    fn default() -> Self {
        SoakConfig {
            runs: 1000,
            seed: 1,
            concurrency: 16,
            request_timeout: Duration::from_secs(2),
            task_deadline: Duration::from_secs(20),
            mix: FaultMix::realistic(),
            fallback_mix: FaultMix::realistic().scaled(0.2),
            streaming_share: 0.3,
            sloppy_summary_share: 0.2,
            retry: RetryPolicy::default()
                .with_delays(Duration::from_millis(100), Duration::from_secs(1))
                .with_max_retry_after(Duration::from_secs(2)),
            inject_panic: None,
        }
    }
}

impl SoakConfig {
    /// The deadline of a whole run: its tasks' deadlines one after the other.
    pub fn run_deadline(&self) -> Duration {
        self.task_deadline * TASKS as u32
    }
}

const TASKS: usize = 3;

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Succeeded,
    /// The kickoff returned an error (or an output that is not what the crew must produce).
    Failed {
        error: String,
    },
    /// The run outlived its deadline by more than a second and was aborted.
    Hang,
    /// Something panicked: the kickoff's own task, or a part whose panic the engine caught (the
    /// message lists them and says how the kickoff ended).
    Panicked {
        message: String,
    },
}

/// One run's result.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub index: usize,
    /// The run's own seed (its faults and its model's choices).
    pub seed: u64,
    pub streaming: bool,
    pub outcome: RunOutcome,
    /// `task_completed` events seen.
    pub completed: usize,
    /// `task_completed` events whose output the store or the journaled run does not hold.
    pub lost: usize,
    /// Requests per fault kind, primary and fallback servers together.
    pub faults: BTreeMap<FaultKind, usize>,
    /// Panics per site: those the crew's bus counted, and the kickoff's own task under
    /// [`PanicSite::Kickoff`].
    pub caught_panics: BTreeMap<PanicSite, u64>,
    pub elapsed: Duration,
}

/// The totals of a soak.
#[derive(Debug, Clone, Default)]
pub struct SoakSummary {
    pub runs: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub hangs: usize,
    /// Runs in which anything panicked (see [`RunOutcome::Panicked`]).
    pub panics: usize,
    pub lost: usize,
    /// Every panic of every run, at every site (a run may have several).
    pub caught_panics: u64,
    /// [`SoakSummary::caught_panics`] per site.
    pub panics_by_site: BTreeMap<PanicSite, u64>,
    /// Requests per fault kind over every run.
    pub faults: BTreeMap<FaultKind, usize>,
    /// Failure messages (typed errors, hangs, panics) with their run numbers.
    pub failures: Vec<(usize, String)>,
    pub elapsed: Duration,
}

impl SoakSummary {
    fn add(&mut self, report: RunReport) {
        self.runs += 1;
        self.lost += report.lost;
        for (kind, count) in report.faults {
            *self.faults.entry(kind).or_insert(0) += count;
        }
        for (site, count) in report.caught_panics {
            self.caught_panics += count;
            *self.panics_by_site.entry(site).or_insert(0) += count;
        }
        match report.outcome {
            RunOutcome::Succeeded => self.succeeded += 1,
            RunOutcome::Failed { error } => {
                self.failed += 1;
                self.failures.push((report.index, error));
            }
            RunOutcome::Hang => {
                self.hangs += 1;
                self.failures.push((report.index, "hang".into()));
            }
            RunOutcome::Panicked { message } => {
                self.panics += 1;
                self.failures
                    .push((report.index, format!("panic: {message}")));
            }
        }
    }

    /// `N runs: S succeeded, F failed with a typed error, H hangs, P panicked (C panics caught),
    /// L lost`: the four run counts add up to N; C counts every panic at every site.
    pub fn line(&self) -> String {
        format!(
            "{} runs: {} succeeded, {} failed with a typed error, {} hangs, {} panicked ({} panics caught), {} lost",
            self.runs,
            self.succeeded,
            self.failed,
            self.hangs,
            self.panics,
            self.caught_panics,
            self.lost
        )
    }

    /// The panics per site, one per line (every site, zeros included).
    pub fn panic_report(&self) -> String {
        let mut out = format!("{} panics caught:\n", self.caught_panics);
        for site in PanicSite::ALL {
            let count = self.panics_by_site.get(&site).copied().unwrap_or(0);
            out.push_str(&format!("  {:<18} {:>7}\n", site.name(), count));
        }
        out
    }

    /// The fault kinds (healthy replies not counted) that no request of the soak was served.
    pub fn kinds_never_served(&self) -> Vec<FaultKind> {
        FaultKind::FAULTS
            .into_iter()
            .filter(|kind| self.faults.get(kind).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// Succeeded runs over all runs (1.0 for no runs).
    pub fn success_rate(&self) -> f64 {
        if self.runs == 0 {
            1.0
        } else {
            self.succeeded as f64 / self.runs as f64
        }
    }

    /// Every request served, faults included.
    pub fn requests(&self) -> usize {
        self.faults.values().sum()
    }

    /// The fault mix as served: each kind's count and share of all requests, one per line.
    pub fn fault_report(&self) -> String {
        let total = self.requests().max(1) as f64;
        let mut out = format!(
            "{} requests served in {:.1} s:\n",
            self.requests(),
            self.elapsed.as_secs_f64()
        );
        let kinds = std::iter::once(FaultKind::None).chain(FaultKind::FAULTS);
        for kind in kinds {
            let count = self.faults.get(&kind).copied().unwrap_or(0);
            out.push_str(&format!(
                "  {:<18} {:>7}  {:>6.2}%\n",
                kind.name(),
                count,
                100.0 * count as f64 / total
            ));
        }
        out
    }
}

/// Runs the soak: `config.runs` runs, `config.concurrency` at a time.
pub async fn soak(config: &SoakConfig) -> SoakSummary {
    soak_with_progress(config, |_, _| {}).await
}

/// [`soak`], calling `progress(done, report)` after each run.
pub async fn soak_with_progress(
    config: &SoakConfig,
    mut progress: impl FnMut(usize, &RunReport),
) -> SoakSummary {
    let started = Instant::now();
    let mut summary = SoakSummary::default();
    let mut reports = futures::stream::iter(0..config.runs)
        .map(|index| run_once(config, index))
        .buffer_unordered(config.concurrency.max(1));
    while let Some(report) = reports.next().await {
        progress(summary.runs + 1, &report);
        summary.add(report);
    }
    summary.failures.sort();
    summary.elapsed = started.elapsed();
    summary
}

/// The seed of run `index` of a soak seeded `seed` (splitmix64 of both).
pub fn run_seed(seed: u64, index: usize) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index as u64)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One run: fresh servers, a fresh crew, a kickoff bounded by the run's deadline plus a second.
pub async fn run_once(config: &SoakConfig, index: usize) -> RunReport {
    let started = Instant::now();
    let seed = run_seed(config.seed, index);
    let mut rng = StdRng::seed_from_u64(seed);
    let streaming = rng.random_bool(config.streaming_share.clamp(0.0, 1.0));
    let model = Arc::new(Model {
        rng: Mutex::new(StdRng::seed_from_u64(rng.random())),
        sloppy_share: config.sloppy_summary_share.clamp(0.0, 1.0),
    });
    let responder = |model: Arc<Model>| move |request: &RecordedRequest| model.reply(request);
    let primary = FaultServer::builder()
        .mix(config.mix.clone())
        .seed(rng.random())
        .responder(responder(model.clone()))
        .start()
        .await;
    let fallback = FaultServer::builder()
        .mix(config.fallback_mix.clone())
        .seed(rng.random())
        .responder(responder(model))
        .start()
        .await;

    let kicked = match kick_off(config, &primary, &fallback, streaming).await {
        Ok(kicked) => kicked,
        Err(error) => Kicked {
            outcome: RunOutcome::Failed { error },
            completed: 0,
            lost: 0,
            caught_panics: BTreeMap::new(),
        },
    };
    let mut faults = primary.fault_counts();
    for (kind, count) in fallback.fault_counts() {
        *faults.entry(kind).or_insert(0) += count;
    }
    RunReport {
        index,
        seed,
        streaming,
        outcome: kicked.outcome,
        completed: kicked.completed,
        lost: kicked.lost,
        faults,
        caught_panics: kicked.caught_panics,
        elapsed: started.elapsed(),
    }
}

/// What [`kick_off`] found.
struct Kicked {
    outcome: RunOutcome,
    completed: usize,
    lost: usize,
    caught_panics: BTreeMap<PanicSite, u64>,
}

/// Builds the crew, runs it, and compares its `task_completed` events with its store: the
/// outcome, the tasks completed, the outputs lost and the panics.
async fn kick_off(
    config: &SoakConfig,
    primary: &FaultServer,
    fallback: &FaultServer,
    streaming: bool,
) -> Result<Kicked, String> {
    let store = Arc::new(Store::in_memory().map_err(|e| error_chain(&e))?);
    let crew = build_crew(config, primary, fallback, streaming, store.clone())?;
    let run_id = format!("chaos-{}", primary.address().port());
    let completed: Arc<Mutex<Vec<CompletedTask>>> = Arc::default();
    let seen = completed.clone();
    let panic_texts: Arc<Mutex<Vec<String>>> = Arc::default();
    let heard = panic_texts.clone();
    crew.event_bus().subscribe(move |event| match &event.kind {
        EventKind::TaskCompleted {
            task_name, output, ..
        } => seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((task_name.clone(), output.clone())),
        EventKind::PanicCaught {
            site,
            name,
            message,
            ..
        } => heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{site} '{name}': {message}")),
        _ => {}
    });
    if config.inject_panic == Some(InjectedPanic::LISTENER) {
        let armed = Armed::new();
        crew.event_bus().subscribe(move |_| {
            if armed.fire() {
                panic!("{}", InjectedPanic::LISTENER.message());
            }
        });
    }
    // The bus outlives the crew, which moves into the kickoff's task; clones share the counts.
    let bus = crew.event_bus().clone();
    let options = KickoffOptions::new().run_id(run_id.clone());
    let kickoff = tokio::spawn(async move { crew.kickoff_with(Inputs::new(), options).await });
    let abort = kickoff.abort_handle();
    let outcome =
        match tokio::time::timeout(config.run_deadline() + Duration::from_secs(1), kickoff).await {
            Err(_) => {
                abort.abort();
                RunOutcome::Hang
            }
            Ok(Err(join)) if join.is_panic() => RunOutcome::Panicked {
                message: crewai_core::events::panic_message(join.into_panic().as_ref()),
            },
            Ok(Err(join)) => RunOutcome::Failed {
                error: format!("the kickoff task was cancelled: {join}"),
            },
            Ok(Ok(Err(error))) => RunOutcome::Failed {
                error: error_chain(&error),
            },
            Ok(Ok(Ok(output))) => check_output(&output),
        };
    // A finished task must be in both records: the latest-kickoff store (for `replay`) and the
    // journaled run (for `resume`).
    let latest = TaskOutputStore::load(store.as_ref())
        .await
        .map_err(|e| error_chain(&e))?;
    let journaled: Vec<StoredTaskOutput> = RunJournal::load(store.as_ref(), &run_id)
        .await
        .map_err(|e| error_chain(&e))?
        .map(|run| run.tasks.into_values().collect())
        .unwrap_or_default();
    let completed = completed.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut caught_panics = bus.caught_panics_by_site();
    if matches!(outcome, RunOutcome::Panicked { .. }) {
        *caught_panics.entry(PanicSite::Kickoff).or_insert(0) += 1;
    }
    let panic_texts = panic_texts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(Kicked {
        outcome: classify(outcome, bus.caught_panics(), &panic_texts),
        completed: completed.len(),
        lost: count_lost(&completed, &latest, &journaled),
        caught_panics,
    })
}

/// A run whose kickoff ended (with outputs or a typed error) but in which the engine caught
/// `caught` panics is a panicked run: the panic is what went wrong, however it was absorbed. A
/// hang stays a hang (its panics are still counted), and so does a panicked kickoff.
fn classify(outcome: RunOutcome, caught: u64, texts: &[String]) -> RunOutcome {
    if caught == 0 {
        return outcome;
    }
    let ended = match outcome {
        RunOutcome::Hang | RunOutcome::Panicked { .. } => return outcome,
        RunOutcome::Succeeded => "the kickoff then succeeded".to_string(),
        RunOutcome::Failed { error } => format!("the kickoff then failed: {error}"),
    };
    // The texts come from the `panic_caught` events; the count from the bus, which also counts
    // what no listener heard.
    let listed = if texts.is_empty() {
        String::new()
    } else {
        format!(" ({})", texts.join("; "))
    };
    RunOutcome::Panicked {
        message: format!("{caught} caught{listed}; {ended}"),
    }
}

/// A `task_completed` event's task name and raw output.
type CompletedTask = (Option<String>, String);

/// How many of the completed tasks miss from either record.
fn count_lost(
    completed: &[CompletedTask],
    latest: &[StoredTaskOutput],
    journaled: &[StoredTaskOutput],
) -> usize {
    let holds = |rows: &[StoredTaskOutput], name: &Option<String>, raw: &String| {
        rows.iter()
            .any(|row| &row.task_name == name && &row.output.raw == raw)
    };
    completed
        .iter()
        .filter(|(name, raw)| !holds(latest, name, raw) || !holds(journaled, name, raw))
        .count()
}

/// A returned output must have every task's output and the guarded summary.
fn check_output(output: &CrewOutput) -> RunOutcome {
    if output.tasks_output.len() != TASKS {
        return RunOutcome::Failed {
            error: format!(
                "the crew returned {} task outputs instead of {TASKS}",
                output.tasks_output.len()
            ),
        };
    }
    if !output.raw.trim_end().ends_with(SIGN_OFF) {
        return RunOutcome::Failed {
            error: format!("the summary passed without its sign-off: {:?}", output.raw),
        };
    }
    RunOutcome::Succeeded
}

/// The crew of one run, built as a user would build it.
fn build_crew(
    config: &SoakConfig,
    primary: &FaultServer,
    fallback: &FaultServer,
    streaming: bool,
    store: Arc<Store>,
) -> Result<Crew, String> {
    let timeout = config.request_timeout.as_secs_f64();
    let backup = LlmConfig::new("openai/gpt-4.1-mini")
        .with_base_url(fallback.base_url())
        .with_api_key("sk-chaos")
        .with_timeout(timeout)
        .with_max_retries(1);
    let llm_config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(primary.base_url())
        .with_api_key("sk-chaos")
        .with_timeout(timeout)
        .with_max_retries(2)
        .with_fallback(backup);
    let options = BuildOptions::new()
        .with_env_vars(std::iter::empty::<(String, String)>())
        .with_retry_policy(config.retry.clone());
    let llm = crewai_llm::build_llm_with(&llm_config, &options).map_err(|e| error_chain(&e))?;
    let injected = config.inject_panic;

    let agent = |role: &str, goal: &str, tools: bool, llm: Arc<dyn Llm>| {
        let mut builder = Agent::builder()
            .role(role)
            .goal(goal)
            .backstory(format!("You are a careful {role}."))
            .llm(llm)
            .max_execution_time(config.task_deadline);
        if tools {
            let tool = if injected == Some(InjectedPanic::TOOL) {
                panicking_word_count_tool()
            } else {
                word_count_tool()
            };
            builder = builder.tools(vec![tool]);
        }
        builder.build().map_err(|e| error_chain(&e))
    };
    // The async task's model is the one place a panic is left to the task itself.
    let research_llm: Arc<dyn Llm> = if injected == Some(InjectedPanic::ASYNC_TASK) {
        Arc::new(PanickingLlm {
            inner: llm.clone(),
            armed: Armed::new(),
        })
    } else {
        llm.clone()
    };
    let researcher = agent("Researcher", "Count words accurately", true, research_llm)?;
    let analyst = agent("Analyst", "Check the researcher's count", true, llm.clone())?;
    let editor = agent("Editor", "Write short, signed summaries", false, llm)?;

    let research = Task::builder()
        .name("research")
        .description(format!("Count the words in: '{SENTENCE}'."))
        .expected_output("The number of words")
        .agent(researcher.clone())
        .async_execution(true)
        .build()
        .map_err(|e| error_chain(&e))?;
    let analysis = Task::builder()
        .name("analysis")
        .description(format!(
            "Count the words in '{SENTENCE}' again and compare."
        ))
        .expected_output("Whether the counts agree")
        .agent(analyst.clone())
        .build()
        .map_err(|e| error_chain(&e))?;
    let summary = Task::builder()
        .name("summary")
        .description(format!(
            "Summarise the findings in one sentence and end with the word {SIGN_OFF}."
        ))
        .expected_output(format!("One sentence ending with {SIGN_OFF}"))
        .agent(editor.clone())
        .guardrail(Guardrail::named("ends_with_sign_off", {
            let armed = (injected == Some(InjectedPanic::GUARDRAIL)).then(Armed::new);
            move |output| {
                if armed.as_ref().is_some_and(|armed| armed.fire()) {
                    panic!("{}", InjectedPanic::GUARDRAIL.message());
                }
                if output.raw.trim_end().ends_with(SIGN_OFF) {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err(GUARDRAIL_FEEDBACK.to_string())
                }
            }
        }))
        .build()
        .map_err(|e| error_chain(&e))?;

    let mut crew = Crew::builder()
        .name("chaos")
        .agents(vec![researcher, analyst, editor])
        .tasks(vec![research, analysis, summary])
        .stream(streaming)
        .task_output_store(store.clone())
        .run_journal(store);
    let armed = Armed::new();
    crew = match injected {
        Some(InjectedPanic::HOOK) => crew.hooks(Hooks::new().before_tool_call(move |_| {
            if armed.fire() {
                panic!("{}", InjectedPanic::HOOK.message());
            }
            HookDecision::Continue
        })),
        Some(InjectedPanic::STEP_CALLBACK) => crew.step_callback(move |_| {
            if armed.fire() {
                panic!("{}", InjectedPanic::STEP_CALLBACK.message());
            }
        }),
        Some(InjectedPanic::TASK_CALLBACK) => crew.task_callback(move |_| {
            if armed.fire() {
                panic!("{}", InjectedPanic::TASK_CALLBACK.message());
            }
        }),
        // The others are put in above (tool, guardrail, model) or on the bus (listener).
        _ => crew,
    };
    crew.build().map_err(|e| error_chain(&e))
}

/// The "model" behind both servers: it calls the offered tool until a tool result is in the
/// conversation, then answers; summaries sometimes forget the sign-off until reminded.
struct Model {
    rng: Mutex<StdRng>,
    sloppy_share: f64,
}

impl Model {
    fn reply(&self, request: &RecordedRequest) -> Reply {
        let tools = request.tool_names();
        let messages = request.messages();
        let has_tool_result = messages.iter().any(|m| m["role"] == "tool");
        if let Some(tool) = tools.first()
            && !has_tool_result
        {
            return Reply::tool_call(tool.clone(), json!({"text": SENTENCE}));
        }
        let conversation: String = messages
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if conversation.contains(&format!("end with the word {SIGN_OFF}")) {
            let reminded = conversation.contains(GUARDRAIL_FEEDBACK);
            let sloppy = !reminded
                && self
                    .rng
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .random_bool(self.sloppy_share);
            return Reply::text(if sloppy {
                "The sentence has nine words and both counts agree.".to_string()
            } else {
                format!("The sentence has nine words and both counts agree. {SIGN_OFF}")
            });
        }
        Reply::text("The sentence has 9 words.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_seeds_differ_per_run_and_repeat_per_seed() {
        assert_eq!(run_seed(1, 5), run_seed(1, 5));
        assert_ne!(run_seed(1, 5), run_seed(1, 6));
        assert_ne!(run_seed(1, 5), run_seed(2, 5));
    }

    #[test]
    fn the_summary_line_has_the_agreed_shape() {
        let mut summary = SoakSummary::default();
        summary.add(RunReport {
            index: 0,
            seed: 0,
            streaming: false,
            outcome: RunOutcome::Succeeded,
            completed: 3,
            lost: 0,
            faults: BTreeMap::from([(FaultKind::None, 4), (FaultKind::ResetMidBody, 1)]),
            caught_panics: BTreeMap::new(),
            elapsed: Duration::ZERO,
        });
        summary.add(RunReport {
            index: 1,
            seed: 0,
            streaming: true,
            outcome: RunOutcome::Failed {
                error: "agent 'Editor' timed out".into(),
            },
            completed: 2,
            lost: 0,
            faults: BTreeMap::from([(FaultKind::None, 3)]),
            caught_panics: BTreeMap::new(),
            elapsed: Duration::ZERO,
        });
        summary.add(RunReport {
            index: 2,
            seed: 0,
            streaming: false,
            outcome: RunOutcome::Panicked {
                message: "2 caught; the kickoff then succeeded".into(),
            },
            completed: 3,
            lost: 0,
            faults: BTreeMap::from([(FaultKind::None, 1)]),
            caught_panics: BTreeMap::from([(PanicSite::Tool, 1), (PanicSite::Hook, 1)]),
            elapsed: Duration::ZERO,
        });
        assert_eq!(
            summary.line(),
            "3 runs: 1 succeeded, 1 failed with a typed error, 0 hangs, 1 panicked (2 panics caught), 0 lost"
        );
        assert_eq!(summary.requests(), 9);
        assert!(summary.fault_report().contains("reset_mid_body"));
        let per_site: Vec<Vec<String>> = summary
            .panic_report()
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().map(str::to_string).collect())
            .collect();
        assert_eq!(per_site.len(), PanicSite::ALL.len());
        assert!(per_site.contains(&vec!["tool".to_string(), "1".to_string()]));
        assert!(per_site.contains(&vec!["guardrail".to_string(), "0".to_string()]));
        assert_eq!(
            summary.kinds_never_served().len(),
            FaultKind::FAULTS.len() - 1
        );
        assert_eq!(
            summary.failures,
            vec![
                (1, "agent 'Editor' timed out".into()),
                (2, "panic: 2 caught; the kickoff then succeeded".into())
            ]
        );
    }

    #[test]
    fn a_caught_panic_makes_a_finished_run_a_panicked_one() {
        let texts = vec!["tool 'word_count': boom".to_string()];
        assert_eq!(
            classify(RunOutcome::Succeeded, 1, &texts),
            RunOutcome::Panicked {
                message: "1 caught (tool 'word_count': boom); the kickoff then succeeded".into()
            }
        );
        let failed = RunOutcome::Failed {
            error: "task crashed".into(),
        };
        assert!(matches!(
            classify(failed.clone(), 1, &[]),
            RunOutcome::Panicked { message } if message == "1 caught; the kickoff then failed: task crashed"
        ));
        assert_eq!(classify(failed.clone(), 0, &texts), failed);
        assert_eq!(classify(RunOutcome::Hang, 3, &texts), RunOutcome::Hang);
    }

    #[test]
    fn an_output_missing_from_either_record_is_lost() {
        let row = |name: &str, raw: &str| StoredTaskOutput {
            task_id: name.into(),
            task_name: Some(name.into()),
            task_index: 0,
            output: crewai_core::output::TaskOutput::new("d", "e", raw, "agent"),
            inputs: Inputs::new(),
            was_replayed: false,
            timestamp: chrono::Utc::now(),
        };
        let completed = vec![
            (Some("a".to_string()), "one".to_string()),
            (Some("b".to_string()), "two".to_string()),
        ];
        let both = [row("a", "one"), row("b", "two")];
        assert_eq!(count_lost(&completed, &both, &both), 0);
        assert_eq!(count_lost(&completed, &both, &[row("a", "one")]), 1);
        assert_eq!(count_lost(&completed, &[row("b", "changed")], &both), 2);
    }

    #[tokio::test]
    async fn a_healthy_run_succeeds_and_stores_every_task() {
        let config = SoakConfig {
            mix: FaultMix::healthy(),
            fallback_mix: FaultMix::healthy(),
            ..SoakConfig::default()
        };
        let report = run_once(&config, 0).await;
        assert_eq!(report.outcome, RunOutcome::Succeeded);
        assert_eq!((report.completed, report.lost), (3, 0));
        assert_eq!(report.faults.keys().collect::<Vec<_>>(), [&FaultKind::None]);
        assert!(
            report.caught_panics.is_empty(),
            "{:?}",
            report.caught_panics
        );
    }
}
