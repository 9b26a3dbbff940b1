//! What the CLI records of a run besides its output: the local trace
//! (`.crewai/traces/<run id>.jsonl`), OpenTelemetry export when the `OTEL_*` variables ask for
//! it, and, with `--verbose`, each model call's tokens and cost.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use crewai_core::events::{EventBus, EventKind};
use crewai_llm::Usage;
use crewai_observe::local::{TraceWriter, format_usage, traces_dir};
use crewai_observe::otel::{OtelConfig, OtelExport};

use crate::outcome::Failure;

/// How long the last spans may take to reach the collector when a run ends.
const EXPORT_GRACE: Duration = Duration::from_secs(5);

/// The observers of one kickoff; [`RunObservers::finish`] flushes them.
pub struct RunObservers {
    trace: Option<TraceWriter>,
    otel: Option<OtelExport>,
}

/// A fresh run id: sortable by time, unique enough for one project.
fn new_run_id() -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ"),
        &suffix[..8]
    )
}

impl RunObservers {
    /// Starts the trace file and, when configured, OpenTelemetry export on `bus`. A trace that
    /// cannot be written only warns; a broken `OTEL_*` configuration is an error.
    pub fn start(project_root: &Path, bus: &EventBus) -> Result<Self, Failure> {
        let trace = match TraceWriter::attach(bus, &traces_dir(project_root), &new_run_id()) {
            Ok(writer) => Some(writer),
            Err(error) => {
                eprintln!("warning: no trace is recorded for this run: {error}");
                None
            }
        };
        let otel = match OtelConfig::from_env().map_err(|e| Failure::config(anyhow!(e)))? {
            Some(config) => {
                Some(OtelExport::start(bus, &config).map_err(|e| Failure::config(anyhow!(e)))?)
            }
            None => None,
        };
        Ok(RunObservers { trace, otel })
    }

    /// Sends the last spans and closes the trace file.
    pub async fn finish(self) {
        if let Some(otel) = self.otel {
            otel.shutdown(EXPORT_GRACE).await;
        }
        if let Some(trace) = self.trace
            && let Err(error) = trace.finish()
        {
            eprintln!("warning: the trace is incomplete: {error}");
        }
    }
}

/// Prints each model call's tokens and cost, and the run's total so far, to stderr.
pub fn print_call_costs(bus: &EventBus) {
    let total = Arc::new(Mutex::new(Usage::default()));
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
            let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
            eprintln!(
                "  [{who} · {model}] {} · run so far {} tokens, ${:.6}",
                format_usage(usage),
                total.total_tokens,
                total.cost_usd
            );
        }
    });
}
