//! `crewai traces`: the runs recorded under `.crewai/traces/`, one run as a tree, or a run's
//! timeline as a self-contained HTML page.

use anyhow::{Context, anyhow};
use crewai_observe::local::{RunTrace, list_runs, render_run_list, traces_dir};

use crate::cli::TracesArgs;
use crate::outcome::{Failure, print_out};

pub fn traces(args: &TracesArgs) -> Result<(), Failure> {
    let dir = traces_dir(&args.project);
    let Some(id) = &args.id else {
        if args.html.is_some() {
            return Err(Failure::config(anyhow!(
                "`--html` needs the id of a run: `crewai traces ID --html FILE`"
            )));
        }
        let runs = list_runs(&dir).map_err(|e| Failure::run(anyhow!(e)))?;
        return print_out(render_run_list(&runs).trim_end());
    };
    let trace = RunTrace::find(&dir, id).map_err(|e| Failure::config(anyhow!(e)))?;
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
