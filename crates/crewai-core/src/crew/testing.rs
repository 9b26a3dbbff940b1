//! [`Crew::test`] (CrewAI's `crew.test`, `crewai test`): `n` kickoffs, each task's output scored
//! from 1 to 10 by a judge, CrewAI's score table, and the metrics of every run from its events
//! ([`crate::evaluate`]).
//!
//! The judge is an agent the crew makes for itself (role "Task Execution Evaluator", the model
//! given) that sees the task's description, its expected output and the output, and answers with
//! `{"quality": <number>}` as a structured output. Each run costs what a kickoff costs, plus one
//! judge call per task (more when its answer needs repairing).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crewai_llm::{Llm, Usage};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::agent::{Agent, RunServices};
use crate::converter::OutputSchema;
use crate::evaluate::{EvaluationMetrics, average};
use crate::events::{Event, EventKind};
use crate::interpolate::Inputs;
use crate::kickoff::KickoffOptions;
use crate::output::TaskOutput;
use crate::prompts::agent::task_prompt;
use crate::prompts::evaluation as prompts;
use crate::structured_task::StructuredTask;
use crate::usage::UsageTracker;

use super::{Crew, CrewError};

/// The title of the test judge's schema (the `response_format` name).
pub const TEST_EVALUATION_SCHEMA_NAME: &str = "TaskEvaluationPydanticOutput";

/// One task's scores over the runs of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskScores {
    /// The task's name (else the start of its description).
    pub task: String,
    /// The role of the agent that ran it (the manager's, in a hierarchical crew).
    pub agent: String,
    /// The judge's score in each run; `None` for a run that skipped the task (a conditional
    /// task whose condition did not hold).
    pub scores: Vec<Option<f64>>,
    pub average: Option<f64>,
}

/// What [`Crew::test`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    pub crew: String,
    /// The judge's model.
    pub model: String,
    pub n_iterations: u32,
    /// One entry per task of the crew, in task order.
    pub tasks: Vec<TaskScores>,
    /// The average score of each run's tasks (CrewAI's "Crew" row).
    pub crew_scores: Vec<Option<f64>>,
    pub crew_average: Option<f64>,
    /// Each run's kickoff time in seconds (judging excluded).
    pub execution_times: Vec<f64>,
    /// The metrics of every run's tasks (in run order) and agents, with the judge's scores.
    pub metrics: EvaluationMetrics,
    /// What the kickoffs used.
    pub crew_usage: Usage,
    /// What the judge's calls used.
    pub judge_usage: Usage,
}

impl TestReport {
    /// CrewAI's score table: a row per task (its score in each run, its average and its agent),
    /// the crew's row and the execution times.
    pub fn table(&self) -> String {
        let score = |s: &Option<f64>| s.map(|s| format!("{s:.1}")).unwrap_or_else(|| "-".into());
        let mut header = vec!["Tasks/Crew/Agents".to_string()];
        header.extend((1..=self.n_iterations).map(|run| format!("Run {run}")));
        header.extend(["Avg. Total".to_string(), "Agents".to_string()]);
        let mut rows = vec![header];
        for (index, task) in self.tasks.iter().enumerate() {
            let mut row = vec![format!("Task {}", index + 1)];
            row.extend(task.scores.iter().map(score));
            row.extend([score(&task.average), task.agent.trim().to_string()]);
            rows.push(row);
        }
        let mut crew = vec!["Crew".to_string()];
        crew.extend(self.crew_scores.iter().map(score));
        crew.extend([score(&self.crew_average), String::new()]);
        rows.push(crew);
        let mut times = vec!["Execution Time (s)".to_string()];
        times.extend(
            self.execution_times
                .iter()
                .map(|t| format!("{}", t.round())),
        );
        let total = average(&self.execution_times).unwrap_or_default();
        times.extend([format!("{}", total.round()), String::new()]);
        rows.push(times);

        let columns = rows[0].len();
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                rows.iter()
                    .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |row: &[String]| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            format!("│ {} │", cells.join(" │ "))
        };
        let rule = |left: &str, mid: &str, right: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{left}{}{right}", parts.join(mid))
        };
        let mut out = vec![
            "Tasks Scores".to_string(),
            "(1-10 Higher is better)".to_string(),
            rule("┌", "┬", "┐"),
            line(&rows[0]),
            rule("├", "┼", "┤"),
        ];
        for row in &rows[1..] {
            out.push(line(row));
        }
        out.push(rule("└", "┴", "┘"));
        out.join("\n")
    }
}

/// The judge's answer.
#[derive(Debug, Deserialize)]
struct TaskEvaluation {
    quality: f64,
}

fn evaluation_schema() -> OutputSchema {
    OutputSchema::pydantic(json!({
        "title": TEST_EVALUATION_SCHEMA_NAME,
        "type": "object",
        "properties": {
            "quality": {
                "title": "Quality",
                "description": "How well the output does what the task asked, from 1 to 10.",
                "type": "number"
            }
        },
        "required": ["quality"]
    }))
}

impl Crew {
    /// Runs the crew `n_iterations` times with `inputs` (each run on its own copy, one after
    /// the other) and has a judge on `eval_llm` score every task's output from 1 to 10.
    ///
    /// Emits `crew_test_started`, one `crew_test_result` per judged task (quality, the task's
    /// duration, the judge's model) and `crew_test_completed` on the crew's bus; the runs'
    /// own events hang under `crew_test_started`. A run that fails stops the test with its error.
    /// The metrics are computed from the events of the runs alone, so another kickoff reporting
    /// to the same bus meanwhile would be counted too.
    pub async fn test(
        &self,
        n_iterations: u32,
        eval_llm: Arc<dyn Llm>,
        inputs: Inputs,
    ) -> Result<TestReport, CrewError> {
        let spec = &self.spec;
        let model = eval_llm.model().to_string();
        let config = |message: String| CrewError::Config {
            crew: spec.name.clone(),
            message,
        };
        if n_iterations == 0 {
            return Err(config("a test needs at least one iteration".into()));
        }
        let judge = Agent::builder()
            .role(prompts::TEST_EVALUATOR_ROLE)
            .goal(prompts::TEST_EVALUATOR_GOAL)
            .backstory(prompts::TEST_EVALUATOR_BACKSTORY)
            .llm(eval_llm)
            .build()
            .map_err(|e| config(format!("cannot set up the judge: {e}")))?;
        let started = spec.events.emit(
            None,
            EventKind::CrewTestStarted {
                crew_name: spec.name.clone(),
                n_iterations,
                model: model.clone(),
            },
        );
        let judge_usage = UsageTracker::new().with_prices(spec.prices.clone());
        let services = RunServices {
            events: spec.events.clone(),
            hooks: spec.hooks.clone(),
            rate_limiter: spec.rate_limiter.clone(),
            crew_name: Some(spec.name.clone()),
            crew_id: Some(spec.id.to_string()),
            usage: judge_usage.clone(),
            ..RunServices::default()
        };
        let schema = evaluation_schema();
        let mut tasks: Vec<TaskScores> = spec
            .tasks
            .iter()
            .map(|task| TaskScores {
                task: task.key(),
                agent: String::new(),
                scores: Vec::new(),
                average: None,
            })
            .collect();
        let mut report = TestReport {
            crew: spec.name.clone(),
            model: model.clone(),
            n_iterations,
            tasks: Vec::new(),
            crew_scores: Vec::new(),
            crew_average: None,
            execution_times: Vec::new(),
            metrics: EvaluationMetrics::default(),
            crew_usage: Usage::default(),
            judge_usage: Usage::default(),
        };
        for iteration in 1..=n_iterations {
            let copy = self.copy();
            let recorded = Arc::new(Mutex::new(Vec::<Event>::new()));
            let sink = recorded.clone();
            let listener = spec.events.subscribe(move |event| {
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(event.clone())
            });
            let clock = Instant::now();
            let output = copy
                .kickoff_with(inputs.clone(), KickoffOptions::new().parent_event(started))
                .await;
            let elapsed = clock.elapsed().as_secs_f64();
            spec.events.unsubscribe(listener);
            let output = output?;
            report.execution_times.push(elapsed);
            report.crew_usage.add(&output.token_usage);
            let events = std::mem::take(&mut *recorded.lock().unwrap_or_else(|p| p.into_inner()));
            let mut metrics = EvaluationMetrics::from_events(&events);

            let mut run_scores = Vec::new();
            for (index, (task, task_output)) in
                spec.tasks.iter().zip(&output.tasks_output).enumerate()
            {
                let measured = metrics
                    .tasks
                    .iter()
                    .position(|m| m.task_id.as_deref() == Some(task.id().to_string().as_str()));
                let quality = match task.is_conditional() && is_skipped(task_output) {
                    true => None,
                    false => Some(
                        self.judge_output(&judge, &schema, &services, task_output, started)
                            .await?,
                    ),
                };
                if let Some(quality) = quality {
                    run_scores.push(quality);
                    let duration = measured
                        .map(|at| metrics.tasks[at].work.duration_ms as f64 / 1000.0)
                        .unwrap_or_default();
                    if let Some(at) = measured {
                        metrics.set_quality(at, quality);
                    }
                    spec.events.emit(
                        Some(started),
                        EventKind::CrewTestResult {
                            crew_name: spec.name.clone(),
                            agent_role: Some(task_output.agent.clone()),
                            task_name: task.name().map(str::to_string),
                            iteration,
                            quality,
                            execution_duration: duration,
                            model: model.clone(),
                        },
                    );
                }
                tasks[index].agent = task_output.agent.clone();
                tasks[index].scores.push(quality);
            }
            report.crew_scores.push(average(&run_scores));
            report.metrics.extend(metrics);
        }
        for task in &mut tasks {
            let given: Vec<f64> = task.scores.iter().flatten().copied().collect();
            task.average = average(&given);
        }
        let run_averages: Vec<f64> = report.crew_scores.iter().flatten().copied().collect();
        report.crew_average = average(&run_averages);
        report.tasks = tasks;
        report.judge_usage = judge_usage.total();
        spec.events.emit(
            Some(started),
            EventKind::CrewTestCompleted {
                crew_name: spec.name.clone(),
                n_iterations,
                quality: report.crew_average.unwrap_or_default(),
            },
        );
        Ok(report)
    }

    /// The judge's score of one output.
    async fn judge_output(
        &self,
        judge: &Agent,
        schema: &OutputSchema,
        services: &RunServices,
        output: &TaskOutput,
        parent: uuid::Uuid,
    ) -> Result<f64, CrewError> {
        let mut prompt = task_prompt(
            &prompts::test_evaluation_task(
                &output.description,
                &output.expected_output,
                &output.raw,
            ),
            prompts::TEST_EVALUATION_EXPECTED_OUTPUT,
        );
        prompt.push('\n');
        prompt.push_str(&crate::prompts::crew::structured_output_instructions(
            &schema.pretty(),
        ));
        let failed = |source: crate::error::BoxedCause| CrewError::Evaluation {
            crew: self.spec.name.clone(),
            task: output
                .name
                .clone()
                .unwrap_or_else(|| crate::output::summarize_description(&output.description)),
            source,
        };
        let value = StructuredTask {
            agent: judge,
            prompt,
            schema,
            task_name: output.name.clone(),
            parent: Some(parent),
        }
        .run(services)
        .await
        .map_err(|e| failed(Box::new(e)))?;
        let evaluation: TaskEvaluation =
            serde_json::from_value(value).map_err(|e| failed(Box::new(e)))?;
        Ok(evaluation.quality)
    }
}

/// Whether a conditional task was skipped in the run (nothing to judge).
fn is_skipped(output: &TaskOutput) -> bool {
    output.raw.is_empty() && output.messages.is_empty()
}
