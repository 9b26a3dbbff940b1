//! `crewai test`: the crew run N times, each task's output scored from 1 to 10 by a judge
//! model; CrewAI's score table, or with `--json` the report with every run's per-task and
//! per-agent metrics.

use anyhow::anyhow;
use crewai_project::{BuildOptions, ToolRegistry};

use crate::cli::TestArgs;
use crate::models;
use crate::outcome::{Failure, print_out};
use crate::run::{self, JournaledRun};

pub async fn test(args: TestArgs) -> Result<(), Failure> {
    let dir = args.common.project.clone();
    let (project, given) = run::load_for_repeated_runs(
        "test",
        "test",
        &dir,
        args.n_iterations,
        &args.inputs,
        args.inputs_file.as_deref(),
    )?;
    // The judge: `-m`, else `--llm`, else the model agents without one get.
    let judge_flag = args.model.as_deref().or(args.common.llm.as_deref());
    let judge_options = models::with_chosen_default(
        BuildOptions::new(ToolRegistry::new()).with_llm_build(models::llm_build_options()),
        judge_flag,
    )
    .await?;
    let judge_config = judge_options
        .llm_override
        .clone()
        .or_else(|| judge_options.default_llm.clone())
        .unwrap_or_default();
    let judge = crewai_llm::build_llm_with(&judge_config, &judge_options.llm_build)
        .map_err(|e| Failure::config(anyhow!(e).context("cannot set up the judge's model")))?;

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
        "Testing crew '{}' over {} run(s), judged by {}",
        prepared.crew().name(),
        args.n_iterations,
        judge.model()
    );
    let inputs = project.effective_inputs(&given);
    let result = prepared.crew().test(args.n_iterations, judge, inputs).await;
    prepared.finish().await;
    let report = result.map_err(Failure::run)?;
    if args.common.json {
        let text = serde_json::to_string(&report)
            .map_err(|e| Failure::run(anyhow!(e).context("cannot encode the test report")))?;
        return print_out(&text);
    }
    print_out(&report.table())
}
