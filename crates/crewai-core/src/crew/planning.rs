//! Crew planning (CrewAI's `planning=True`): before the first task, a planner agent reads the
//! summary of every task (its number, description, expected output, agent, the agent's goal,
//! the task's and the agent's tools) and answers with one plan per task as a structured output
//! ([`CrewPlan`]); each plan is appended to its task's description for this run.
//!
//! The planner is an agent the crew makes for itself (role "Task Execution Planner", the crew's
//! `planning_llm`, else the default model), so its calls go through the run's layers: they are
//! counted in the run's usage, held to its budget and reported as `llm_call_*` events under the
//! crew's kickoff, between `crew_planning_started` and `crew_planning_completed` (or
//! `crew_planning_failed`, which fails the kickoff as CrewAI's planner failure does). The plan
//! is journaled with the run, so a resumed run appends the same plans and calls no planner.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::Agent;
use crate::converter::OutputSchema;
use crate::error::AgentError;
use crate::events::EventKind;
use crate::output::TaskOutput;
use crate::process::RunContext;
use crate::prompts::agent::task_prompt;
use crate::prompts::planning as prompts;
use crate::structured_task::StructuredTask;
use crate::task::Task;

use super::journal::TaskRecorder;
use super::kickoff::Prepared;
use super::{Crew, CrewError};

/// The planner's plan for one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskPlan {
    /// The task's position in the crew, from 1.
    pub task_number: usize,
    /// The task's name as the planner wrote it.
    pub task: String,
    pub plan: String,
}

/// The planner's answer (CrewAI's `PlannerTaskPydanticOutput`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CrewPlan {
    pub list_of_plans_per_task: Vec<TaskPlan>,
}

/// The title of the planner's schema: the `response_format` name a provider sees.
pub const PLANNER_SCHEMA_NAME: &str = "PlannerTaskPydanticOutput";

/// Why the planner gave no plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    #[error("the planner could not answer")]
    Planner(#[source] AgentError),
    #[error("the planner's answer is not a list of plans")]
    NotAPlan(#[source] serde_json::Error),
}

impl CrewPlan {
    /// The schema the planner answers in.
    pub fn schema() -> OutputSchema {
        OutputSchema::pydantic(json!({
            "title": PLANNER_SCHEMA_NAME,
            "type": "object",
            "properties": {
                "list_of_plans_per_task": {
                    "title": "List Of Plans Per Task",
                    "description": "One plan for each task, referring to the task by its number.",
                    "type": "array",
                    "items": {
                        "title": "PlanPerTask",
                        "type": "object",
                        "properties": {
                            "task_number": {
                                "title": "Task Number",
                                "description": "The number the task has in the summary, from 1.",
                                "type": "integer",
                                "minimum": 1
                            },
                            "task": {
                                "title": "Task",
                                "description": "The task's name.",
                                "type": "string"
                            },
                            "plan": {
                                "title": "Plan",
                                "description": "The steps the task's agent should follow, with the tools to use.",
                                "type": "string"
                            }
                        },
                        "required": ["task_number", "task", "plan"]
                    }
                }
            },
            "required": ["list_of_plans_per_task"]
        }))
    }

    /// The plan for each of `task_count` tasks, in task order: a task the planner gave several
    /// plans keeps the first; a number outside the crew's tasks is ignored (with a warning).
    pub fn per_task(&self, task_count: usize) -> Vec<Option<&str>> {
        let mut plans = vec![None; task_count];
        for entry in &self.list_of_plans_per_task {
            match entry
                .task_number
                .checked_sub(1)
                .and_then(|i| plans.get_mut(i))
            {
                Some(slot @ None) => *slot = Some(entry.plan.as_str()),
                Some(Some(_)) => tracing::warn!(
                    task_number = entry.task_number,
                    "the planner gave task {} more than one plan; the first is kept",
                    entry.task_number
                ),
                None => tracing::warn!(
                    task_number = entry.task_number,
                    "the planner gave a plan for task {}, but the crew has {task_count} task(s); it is ignored",
                    entry.task_number
                ),
            }
        }
        plans
    }

    /// Appends each task's plan to its description; returns the (1-based) numbers of the tasks
    /// without a plan, each also a warning.
    pub(super) fn apply(&self, tasks: &mut [Task]) -> Vec<usize> {
        let plans = self.per_task(tasks.len());
        let mut missing = Vec::new();
        for (index, (task, plan)) in tasks.iter_mut().zip(plans).enumerate() {
            match plan {
                Some(plan) => *task = task.with_plan(plan),
                None => {
                    tracing::warn!(
                        task = %task.key(),
                        "the planner gave no plan for task {}; it runs with its own description",
                        index + 1
                    );
                    missing.push(index + 1);
                }
            }
        }
        missing
    }
}

/// The planner agent of a crew with `planning: true`: `llm` is the crew's `planning_llm`, or
/// `None` for the default model (as an agent without `llm` gets).
pub(super) fn planner_agent(
    llm: Option<std::sync::Arc<dyn crewai_llm::Llm>>,
) -> Result<Agent, AgentError> {
    let builder = Agent::builder()
        .role(prompts::PLANNER_ROLE)
        .goal(prompts::PLANNER_GOAL)
        .backstory(prompts::PLANNER_BACKSTORY);
    match llm {
        Some(llm) => builder.llm(llm).build(),
        None => builder.build(),
    }
}

/// The planner's task prompt for these tasks (interpolated, in crew order).
pub fn planner_prompt(tasks: &[Task]) -> String {
    let summaries: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(index, task)| {
            let agent = task.agent();
            prompts::task_summary(&prompts::TaskSummary {
                number: index + 1,
                description: task.description(),
                expected_output: task.expected_output(),
                agent: agent.map(|a| (a.role(), a.goal())),
                task_tools: task.tools().iter().map(|t| t.name()).collect(),
                agent_tools: agent
                    .map(|a| a.tools().iter().map(|t| t.name()).collect())
                    .unwrap_or_default(),
            })
        })
        .collect();
    let mut prompt = task_prompt(
        &prompts::planner_task(&summaries),
        prompts::PLANNER_EXPECTED_OUTPUT,
    );
    prompt.push('\n');
    prompt.push_str(&crate::prompts::crew::structured_output_instructions(
        &CrewPlan::schema().pretty(),
    ));
    prompt
}

impl Crew {
    /// Plans the run (`planning: true`; a resumed run applies its journaled plan instead),
    /// then runs the tasks with their plans.
    pub(super) async fn plan_and_execute(
        &self,
        run: &RunContext,
        mut prepared: Prepared,
        parent: Uuid,
        restored: Vec<(usize, TaskOutput)>,
        journaled_plan: Option<CrewPlan>,
        recorder: &TaskRecorder,
    ) -> Result<Vec<TaskOutput>, CrewError> {
        if let Some(planner) = &self.spec.planner {
            let plan = match journaled_plan {
                Some(plan) => plan,
                None => match self.make_plan(planner, run, &prepared.tasks, parent).await {
                    Ok(plan) => plan,
                    Err(error) => return Err(self.keep_outputs_on_planning_stop(error, restored)),
                },
            };
            recorder.record_plan(&plan).await?;
            let missing = plan.apply(&mut prepared.tasks);
            run.services.events.emit(
                Some(parent),
                EventKind::CrewPlanningCompleted {
                    crew_name: self.spec.name.clone(),
                    planned: prepared.tasks.len() - missing.len(),
                    missing,
                },
            );
        }
        self.execute_tasks(run, &prepared, parent, restored, recorder)
            .await
    }

    /// A planner stopped by the budget stops the crew the way a task does, keeping the outputs
    /// a resumed or forked run started with.
    fn keep_outputs_on_planning_stop(
        &self,
        error: CrewError,
        restored: Vec<(usize, TaskOutput)>,
    ) -> CrewError {
        let CrewError::Planning { source, .. } = &error else {
            return error;
        };
        let PlanningError::Planner(AgentError::BudgetExceeded { exceeded, .. }) = source.as_ref()
        else {
            return error;
        };
        let mut restored = restored;
        restored.sort_by_key(|(index, _)| *index);
        CrewError::BudgetExceeded {
            crew: self.spec.name.clone(),
            task: Some(PLANNING_TASK_NAME.to_string()),
            exceeded: exceeded.clone(),
            completed: restored.into_iter().map(|(_, output)| output).collect(),
            usage: Box::default(),
        }
    }

    /// Asks the planner for this run's plans (under the kickoff's event `parent`), emitting the
    /// planning events; the plan is not applied here.
    pub(super) async fn make_plan(
        &self,
        planner: &Agent,
        run: &RunContext,
        tasks: &[Task],
        parent: Uuid,
    ) -> Result<CrewPlan, CrewError> {
        let events = &run.services.events;
        let crew_name = self.spec.name.clone();
        events.emit(
            Some(parent),
            EventKind::CrewPlanningStarted {
                crew_name: crew_name.clone(),
                tasks: tasks.len(),
            },
        );
        let schema = CrewPlan::schema();
        let ask = StructuredTask {
            agent: planner,
            prompt: planner_prompt(tasks),
            schema: &schema,
            task_name: Some(PLANNING_TASK_NAME.to_string()),
            parent: Some(parent),
        }
        .run(&run.services);
        let answer = match run.deadline_for(planner) {
            Some(limit) => tokio::time::timeout(limit, ask)
                .await
                .unwrap_or_else(|_| Err(planner_timeout(planner, limit))),
            None => ask.await,
        };
        let result = answer
            .map_err(PlanningError::Planner)
            .and_then(|value: Value| {
                serde_json::from_value::<CrewPlan>(value).map_err(PlanningError::NotAPlan)
            });
        match result {
            Ok(plan) => Ok(plan),
            Err(error) => {
                events.emit(
                    Some(parent),
                    EventKind::CrewPlanningFailed {
                        crew_name: crew_name.clone(),
                        error: crewai_llm::error_chain(&error),
                    },
                );
                Err(CrewError::Planning {
                    crew: crew_name,
                    source: Box::new(error),
                })
            }
        }
    }
}

/// What the planner's usage and events are filed under (it runs no task of the crew).
pub const PLANNING_TASK_NAME: &str = "crew planning";

fn planner_timeout(planner: &Agent, after: Duration) -> AgentError {
    AgentError::Timeout {
        role: planner.role().to_string(),
        task: PLANNING_TASK_NAME.to_string(),
        after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(entries: &[(usize, &str)]) -> CrewPlan {
        CrewPlan {
            list_of_plans_per_task: entries
                .iter()
                .map(|(number, text)| TaskPlan {
                    task_number: *number,
                    task: format!("task {number}"),
                    plan: text.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn duplicates_keep_the_first_and_unknown_numbers_are_ignored() {
        let plan = plan(&[(2, "second"), (1, "first"), (2, "again"), (7, "nowhere")]);
        assert_eq!(plan.per_task(3), vec![Some("first"), Some("second"), None]);
    }

    #[test]
    fn the_schema_accepts_a_plan_and_refuses_task_zero() {
        let schema = CrewPlan::schema();
        schema.check_schema().unwrap();
        let good =
            json!({"list_of_plans_per_task": [{"task_number": 1, "task": "a", "plan": "p"}]});
        schema.validate(&good).unwrap();
        let zero =
            json!({"list_of_plans_per_task": [{"task_number": 0, "task": "a", "plan": "p"}]});
        assert!(schema.validate(&zero).is_err());
        assert_eq!(schema.response_format().name, PLANNER_SCHEMA_NAME);
    }
}
