//! `crewai traces`: the runs recorded under `.crewai/traces/`, one run as a tree, or a run's
//! timeline as a self-contained HTML page; `status`, `enable` and `disable` answer CrewAI's
//! commands of those names for local traces.

use anyhow::{Context, anyhow};
use crewai_observe::local::{RunTrace, list_runs, render_run_list, traces_dir};
use serde_json::json;

use crate::cli::{TracesAction, TracesArgs};
use crate::observe::{LOCAL_TRACES_VAR, local_traces_enabled};
use crate::outcome::{Failure, print_out};

fn to_json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(value)
        .context("cannot encode the traces as JSON")
        .map_err(Failure::run)
}

pub fn traces(args: &TracesArgs) -> Result<(), Failure> {
    if let Some(action) = &args.action {
        return print_out(&answer(action)?);
    }
    let dir = traces_dir(&args.project);
    let Some(id) = &args.id else {
        if args.html.is_some() {
            return Err(Failure::config(anyhow!(
                "`--html` needs the id of a run: `crewai traces ID --html FILE`"
            )));
        }
        let runs = list_runs(&dir).map_err(|e| Failure::run(anyhow!(e)))?;
        if args.json {
            return print_out(&to_json(&runs)?);
        }
        return print_out(render_run_list(&runs).trim_end());
    };
    let trace = RunTrace::find(&dir, id).map_err(|e| Failure::config(anyhow!(e)))?;
    if args.json {
        let events: Vec<_> = trace.events.iter().map(|event| event.to_json()).collect();
        return print_out(&to_json(
            &json!({"run": trace.summary(), "events": events}),
        )?);
    }
    match &args.html {
        Some(file) => {
            std::fs::write(file, trace.render_html())
                .with_context(|| format!("cannot write {}", file.display()))
                .map_err(Failure::run)?;
            print_out(&format!(
                "wrote the timeline of run {} to {}",
                trace.id,
                file.display()
            ))
        }
        None => print_out(trace.render_tree().trim_end()),
    }
}

/// What `crewai traces status|enable|disable` say. CrewAI's switch tracing to its cloud; here
/// every run is traced to a local file, which an environment variable turns off.
fn answer(action: &TracesAction) -> Result<String, Failure> {
    let on = local_traces_enabled();
    Ok(match action {
        TracesAction::Status { project } => {
            let dir = traces_dir(project);
            let count = list_runs(&dir).map_err(|e| Failure::run(anyhow!(e)))?.len();
            format!(
                "local traces: {}\nfolder: {} ({count} run{} recorded)\nOpenTelemetry export: {}\nthere is no cloud tracing: nothing leaves this machine unless OTEL_EXPORTER_OTLP_ENDPOINT is set",
                if on {
                    "on"
                } else {
                    "off (CREWAI_LOCAL_TRACES)"
                },
                dir.display(),
                if count == 1 { "" } else { "s" },
                if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
                    "on (OTEL_EXPORTER_OTLP_ENDPOINT)"
                } else {
                    "off"
                },
            )
        }
        TracesAction::Enable => format!(
            "local traces are {}: every `crewai run` writes .crewai/traces/RUN_ID.jsonl{}; to send spans to a collector, set OTEL_EXPORTER_OTLP_ENDPOINT",
            if on { "on" } else { "off" },
            if on {
                String::new()
            } else {
                format!(" once {LOCAL_TRACES_VAR} is unset")
            }
        ),
        TracesAction::Disable => format!(
            "to stop recording local traces, set {LOCAL_TRACES_VAR}=0 (in the environment or the project's .env); they are {} now",
            if on { "on" } else { "already off" }
        ),
    })
}
