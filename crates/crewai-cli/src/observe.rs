//! What the CLI records of a run besides its output: the local trace
//! (`.crewai/traces/<run id>.jsonl`), OpenTelemetry export when the `OTEL_*` variables ask for
//! it, and, with `--verbose`, each model call's tokens and cost.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use crewai_core::events::{EventBus, EventKind};
use crewai_llm::{PriceTable, Usage, error_chain};
use crewai_observe::local::{TraceWriter, format_cost, format_usage, traces_dir};
use crewai_observe::otel::{OtelConfig, OtelExport};

use crate::outcome::Failure;

/// How long the last spans may take to reach the collector when a run ends.
const EXPORT_GRACE: Duration = Duration::from_secs(5);

/// The observers of one kickoff; [`RunObservers::finish`] flushes them.
pub struct RunObservers {
    trace: Option<TraceWriter>,
    otel: Option<OtelExport>,
}

/// Local traces are recorded unless this is `0`, `false` or `off`.
pub const LOCAL_TRACES_VAR: &str = "CREWAI_LOCAL_TRACES";

/// Whether local traces are recorded, by [`LOCAL_TRACES_VAR`].
pub fn local_traces_enabled() -> bool {
    !matches!(
        std::env::var(LOCAL_TRACES_VAR).map(|v| v.trim().to_ascii_lowercase()),
        Ok(v) if v == "0" || v == "false" || v == "off"
    )
}

/// The trace id of a run: the run id `crewai run` printed, so `crewai traces ID` and
/// `crewai run --resume ID` take the same id. A resumed run keeps its first trace and records
/// the rest as `ID+resume1`, `ID+resume2`, ...
fn trace_id(dir: &Path, run_id: &str) -> String {
    let taken = |id: &str| dir.join(format!("{id}.jsonl")).exists();
    if !taken(run_id) {
        return run_id.to_string();
    }
    (1..)
        .map(|n| format!("{run_id}+resume{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| run_id.to_string())
}

impl RunObservers {
    /// Starts the trace file of run `run_id` and, when configured, OpenTelemetry export on
    /// `bus`. A trace that cannot be written only warns; a broken `OTEL_*` configuration is an
    /// error.
    pub fn start(project_root: &Path, bus: &EventBus, run_id: &str) -> Result<Self, Failure> {
        let dir = traces_dir(project_root);
        let trace = if local_traces_enabled() {
            match TraceWriter::attach(bus, &dir, &trace_id(&dir, run_id)) {
                Ok(writer) => Some(writer),
                Err(error) => {
                    eprintln!(
                        "warning: no trace is recorded for this run: {}",
                        error_chain(&error)
                    );
                    None
                }
            }
        } else {
            None
        };
        let otel = match OtelConfig::from_env().map_err(|e| Failure::config(anyhow!(e)))? {
            Some(config) => {
                Some(OtelExport::start(bus, &config).map_err(|e| Failure::config(anyhow!(e)))?)
            }
            None => None,
        };
        Ok(RunObservers { trace, otel })
    }

    /// Sends the last spans and closes the trace file. Both work off the run (a task, a thread),
    /// so this is where the run waits for them: when it returns, the trace file holds every
    /// event of the run (or a warning said which part is missing).
    pub async fn finish(self) {
        if let Some(otel) = self.otel {
            otel.shutdown(EXPORT_GRACE).await;
        }
        if let Some(trace) = self.trace
            && let Err(error) = trace.finish()
        {
            eprintln!("warning: the trace is incomplete: {}", error_chain(&error));
        }
    }
}

/// Prints each model call's tokens and cost, and the run's total so far, to stderr. A plain
/// (synchronous) listener like the console: one short line per call, in step with the rest of
/// the verbose output.
pub fn print_call_costs(bus: &EventBus) {
    let total = Arc::new(Mutex::new(Usage::default()));
    let prices = PriceTable::builtin();
    bus.subscribe(move |event| {
        if let EventKind::LlmCallCompleted {
            model,
            agent_role,
            usage,
            ..
        } = &event.kind
        {
            let mut total = total.lock().unwrap_or_else(|p| p.into_inner());
            total.add(usage);
            // A price from the project's `pricing:` shows as a cost; only a model no table knows is unpriced.
            let priced = usage.cost_usd > 0.0 || prices.lookup(model).is_some();
            eprintln!(
                "{}",
                call_cost_line(agent_role.as_deref(), model, usage, priced, &total)
            );
        }
    });
}

/// One `--verbose` line for a model call: who called which model, the call's tokens and cost,
/// and the run's total so far. A model without a known price says so instead of passing its
/// calls off as free.
pub fn call_cost_line(
    agent_role: Option<&str>,
    model: &str,
    call: &Usage,
    priced: bool,
    run_so_far: &Usage,
) -> String {
    let who = agent_role.map(str::trim).unwrap_or("agent");
    let unpriced = if priced {
        ""
    } else {
        " (no price known for this model: counted as $0)"
    };
    format!(
        "  [{who} · {model}] {}{unpriced} · run so far {} tokens, {}",
        format_usage(call),
        run_so_far.total_tokens,
        format_cost(run_so_far.cost_usd)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: u64, completion: u64, cost_usd: f64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            cached_prompt_tokens: cached,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            successful_requests: 1,
            cost_usd,
            ..Default::default()
        }
    }

    #[test]
    fn a_priced_call_shows_its_tokens_cost_and_the_running_total() {
        let call = usage(1200, 0, 80, 0.000228);
        let total = usage(15_300, 0, 1_100, 0.012_345_6);
        assert_eq!(
            call_cost_line(Some(" Researcher "), "gpt-4o-mini", &call, true, &total),
            "  [Researcher · gpt-4o-mini] 1200 in / 80 out tokens · $0.000228 · run so far 16400 tokens, $0.012346"
        );
        let cached = usage(3000, 1000, 400, 0.000123);
        assert_eq!(
            call_cost_line(None, "gpt-4o-mini", &cached, true, &cached),
            "  [agent · gpt-4o-mini] 3000 in (1000 cached) / 400 out tokens · $0.000123 · run so far 3400 tokens, $0.000123"
        );
    }

    #[test]
    fn a_trace_takes_the_run_id_and_a_resumed_run_adds_a_part() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(trace_id(dir.path(), "r1"), "r1");
        std::fs::write(dir.path().join("r1.jsonl"), "").unwrap();
        assert_eq!(trace_id(dir.path(), "r1"), "r1+resume1");
        std::fs::write(dir.path().join("r1+resume1.jsonl"), "").unwrap();
        assert_eq!(trace_id(dir.path(), "r1"), "r1+resume2");
    }

    #[test]
    fn an_unpriced_model_is_not_passed_off_as_free() {
        let call = usage(10, 0, 5, 0.0);
        assert_eq!(
            call_cost_line(Some("Writer"), "my-own-model", &call, false, &call),
            "  [Writer · my-own-model] 10 in / 5 out tokens · $0.000000 (no price known for this model: counted as $0) · run so far 15 tokens, $0.000000"
        );
    }
}
