//! Commands that read or clear the project's `.crewai/` store.

use std::path::Path;

use anyhow::Context;
use crewai_core::store::TaskOutputStore;
use crewai_store::Store;

use crate::cli::{ResetArgs, RunsArgs};
use crate::outcome::{Failure, print_out};

/// Opens the store of the project in `dir`.
pub fn open(dir: &Path) -> Result<Store, Failure> {
    Store::open_project(dir)
        .with_context(|| format!("cannot open the store of {}", dir.display()))
        .map_err(Failure::config)
}

fn one_line(text: &str, width: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= width {
        flat
    } else {
        format!(
            "{}…",
            flat.chars()
                .take(width.saturating_sub(1))
                .collect::<String>()
        )
    }
}

/// `crewai log-tasks-outputs`: the latest kickoff's tasks, with the ids `replay -t` takes.
pub async fn log_tasks_outputs(dir: &Path, json: bool) -> Result<(), Failure> {
    let store = open(dir)?;
    let rows = TaskOutputStore::load(&store)
        .await
        .context("cannot read the stored task outputs")
        .map_err(Failure::run)?;
    if json {
        let text = serde_json::to_string(&rows)
            .context("cannot encode the task outputs")
            .map_err(Failure::run)?;
        return print_out(&text);
    }
    if rows.is_empty() {
        return print_out("No task outputs stored yet; run the crew with `crewai run` first.");
    }
    let mut listing = String::from("Task outputs of the latest kickoff:");
    for row in rows {
        listing.push_str(&format!(
            "\n{:>2}. {}  {}  (agent: {}{}, {})",
            row.task_index + 1,
            row.task_id,
            row.task_name.as_deref().unwrap_or("-"),
            row.output.agent.trim(),
            if row.was_replayed { ", replayed" } else { "" },
            row.timestamp.format("%Y-%m-%d %H:%M:%S UTC"),
        ));
        listing.push_str(&format!(
            "\n    task: {}",
            one_line(&row.output.description, 100)
        ));
        listing.push_str(&format!("\n    output: {}", one_line(&row.output.raw, 100)));
    }
    print_out(&listing)
}

/// `crewai runs`: the journaled runs, newest first, with what `run --resume` / `--fork` take.
pub async fn runs(args: &RunsArgs) -> Result<(), Failure> {
    let store = open(&args.project)?;
    let runs = store
        .runs_async(args.limit)
        .await
        .context("cannot read the journaled runs")
        .map_err(Failure::run)?;
    if args.json {
        let text = serde_json::to_string(&runs)
            .context("cannot encode the runs")
            .map_err(Failure::run)?;
        return print_out(&text);
    }
    if runs.is_empty() {
        return print_out("No runs recorded yet; start one with `crewai run`.");
    }
    let mut listing = format!(
        "{:<36}  {:<14}  {:>5}  {:<19}  crew",
        "run id", "status", "tasks", "started (UTC)"
    );
    for run in &runs {
        let tasks = if run.task_count == 0 {
            "-".to_string()
        } else {
            format!("{}/{}", run.tasks_finished, run.task_count)
        };
        listing.push_str(&format!(
            "\n{:<36}  {:<14}  {:>5}  {:<19}  {}",
            run.id,
            run.status.as_str(),
            tasks,
            run.started_at.format("%Y-%m-%d %H:%M:%S"),
            run.crew,
        ));
        if let Some(parent) = &run.parent {
            listing.push_str(&format!(
                "\n    forked from {} at task {}",
                parent.run_id,
                parent.from_task_index + 1
            ));
        }
        if let Some(owner) = &run.owner {
            listing.push_str(&if owner.is_alive(chrono::Utc::now()) {
                format!(
                    "\n    in process {}, last heartbeat {}",
                    owner.pid,
                    owner.heartbeat_at.format("%H:%M:%S UTC")
                )
            } else {
                format!(
                    "\n    its process ({}) is gone; resume with: crewai run --resume {}",
                    owner.pid, run.id
                )
            });
        }
        if let Some(error) = run.error.as_deref().filter(|_| run.status.is_resumable()) {
            listing.push_str(&format!("\n    {}", one_line(error, 100)));
        }
    }
    print_out(&listing)
}

/// `crewai reset-memories`: clears the kickoff outputs, memory, and the crew's or agents'
/// knowledge.
pub async fn reset_memories(args: &ResetArgs) -> Result<(), Failure> {
    if !(args.all || args.memory || args.knowledge || args.agent_knowledge || args.kickoff_outputs)
    {
        return Err(Failure::config(anyhow::anyhow!(
            "say what to reset: -m/--memory, --knowledge, --agent-knowledge, -k/--kickoff-outputs or -a/--all"
        )));
    }
    if args.all || args.kickoff_outputs {
        let store = open(&args.project)?;
        TaskOutputStore::reset(&store)
            .await
            .context("cannot clear the stored task outputs")
            .map_err(Failure::run)?;
        println!("Latest kickoff outputs reset.");
    }
    if args.all || args.memory {
        crate::memory_cmd::reset(&args.project).await?;
    }
    if args.all || args.knowledge || args.agent_knowledge {
        crate::knowledge_cmd::reset(
            &args.project,
            args.all || args.knowledge,
            args.all || args.agent_knowledge,
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_flattens_and_shortens() {
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
    }
}
