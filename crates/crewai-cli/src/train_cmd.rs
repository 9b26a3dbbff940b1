//! `crewai train`: the crew run N times asking for feedback on every task (on stdin), each
//! iteration kept in the project's store (`.crewai/crewai.db`), then every agent's lessons
//! saved under its role in the trained-agents file, which `crewai run` reads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_core::training::{
    DEFAULT_TRAINED_AGENTS_FILE, TRAINED_AGENTS_FILE_ENV, TrainedAgents, TrainedAgentsError,
};
use serde_json::json;

use crate::cli::TrainArgs;
use crate::outcome::{Failure, print_out};
use crate::run::{self, JournaledRun};

/// The trained-agents file: `-f`, else `CREWAI_TRAINED_AGENTS_FILE`, else the project's
/// `trained_agents_data.json`.
pub(crate) fn trained_agents_path(project_root: &Path, flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os(TRAINED_AGENTS_FILE_ENV).map(PathBuf::from))
        .unwrap_or_else(|| project_root.join(DEFAULT_TRAINED_AGENTS_FILE))
}

/// What `crewai run` (and every command that builds the crew) gives its agents: the
/// trained-agents file's entries, when it has any. A CrewAI pickle named by
/// `CREWAI_TRAINED_AGENTS_FILE` is an error; one left in the project beside no JSON file is a
/// warning that says how to convert it.
pub(crate) async fn trained_agents_for_run(
    project_root: &Path,
) -> Result<Option<TrainedAgents>, Failure> {
    let path = trained_agents_path(project_root, None);
    let trained = TrainedAgents::load(&path).await.map_err(Failure::config)?;
    if trained.agents.is_empty() {
        let pickle = project_root.join("trained_agents_data.pkl");
        if !path.exists() && pickle.is_file() {
            eprintln!(
                "warning: {} is not used: {}",
                pickle.display(),
                TrainedAgentsError::Pickle {
                    path: pickle.clone()
                }
            );
        }
        return Ok(None);
    }
    let roles: Vec<&str> = trained.agents.keys().map(String::as_str).collect();
    eprintln!("Trained agents ({}): {}", path.display(), roles.join(", "));
    Ok(Some(trained))
}

pub async fn train(args: TrainArgs) -> Result<(), Failure> {
    let dir = args.common.project.clone();
    let (project, given) = run::load_for_repeated_runs(
        "train",
        "train",
        &dir,
        args.n_iterations,
        &args.inputs,
        args.inputs_file.as_deref(),
    )?;
    let file = trained_agents_path(&project.root, args.filename.as_deref());
    // Before any model is called: a file that cannot be read (a pickle) stops here.
    let earlier = TrainedAgents::load(&file).await.map_err(Failure::config)?;
    let prepared = JournaledRun::prepare_unjournaled(
        &project,
        &given,
        run::registry_for(&project, &dir),
        &args.common,
        uuid::Uuid::new_v4().to_string(),
        true,
    )
    .await?;
    eprintln!(
        "Training crew '{}' over {} run(s): give feedback on each answer (Enter accepts it).",
        prepared.crew().name(),
        args.n_iterations
    );
    let inputs = project.effective_inputs(&given);
    let log = Arc::new(prepared.store().clone());
    let result = prepared.crew().train(args.n_iterations, inputs, log).await;
    let store = prepared.finish().await;
    let report = result.map_err(Failure::run)?;
    let iterations = report.examples.len();
    let trained = earlier.merged(report.trained.clone());
    trained.save(&file).await.map_err(Failure::run)?;
    if args.common.json {
        let value = json!({
            "file": file.display().to_string(),
            "iterations": iterations,
            "trained_agents": report.trained,
        });
        return print_out(&value.to_string());
    }
    let mut text = format!(
        "Kept {iterations} iteration(s) in {}.\nSaved the trained agents to {}:",
        store
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "the project's store".into()),
        file.display()
    );
    for (role, agent) in &report.trained.agents {
        text.push_str(&format!(
            "\n\n{role} (quality {:.1}/10): {}",
            agent.quality, agent.final_summary
        ));
        for suggestion in &agent.suggestions {
            text.push_str(&format!("\n  - {suggestion}"));
        }
    }
    print_out(&text)
}
