//! Carrying out a plan: [`Execution::plan_and_execute`] and its phases (see the module above).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crewai_llm::{Llm, LlmRequest, LlmResponse, Message, Role, ToolChoice};
use futures::future::join_all;

use super::PlanningConfig;
use super::plan::{ForcedFunction, PlanStep, ReasoningPlan, StepObservation};
use crate::agent::KickoffInput;
use crate::error::AgentError;
use crate::events::EventKind;
use crate::executor::{Execution, LoopOutcome};
use crate::llm_stack::CallPurpose;
use crate::prompts::reasoning::{self as prompts, StepResult};

/// What one step came to.
struct StepRecord {
    description: String,
    outcome: Result<String, String>,
}

/// The results so far, by step number.
#[derive(Default)]
struct Progress {
    records: BTreeMap<u32, StepRecord>,
}

impl Progress {
    /// Steps that ran and succeeded.
    fn done(&self) -> BTreeSet<u32> {
        self.records
            .iter()
            .filter(|(_, record)| record.outcome.is_ok())
            .map(|(number, _)| *number)
            .collect()
    }

    /// Steps that ran, successfully or not.
    fn ran(&self) -> BTreeSet<u32> {
        self.records.keys().copied().collect()
    }

    fn results(&self, only: Option<&[u32]>) -> Vec<StepResult<'_>> {
        self.records
            .iter()
            .filter(|(number, _)| only.is_none_or(|only| only.contains(number)))
            .map(|(number, record)| StepResult {
                number: *number,
                description: &record.description,
                outcome: record.outcome.as_deref().map_err(String::as_str),
            })
            .collect()
    }
}

/// Errors that end the whole execution rather than one step: the budget, a hook's block, the
/// run's cancellation.
fn ends_the_run(error: &AgentError) -> bool {
    matches!(
        error,
        AgentError::BudgetExceeded { .. }
            | AgentError::LlmCallBlocked { .. }
            | AgentError::Cancelled { .. }
            | AgentError::ToolFailed { .. }
    )
}

impl Execution {
    /// Plans the work in `messages` (the opening of the execution), carries the plan out step by
    /// step, and answers.
    pub(crate) async fn plan_and_execute(
        &self,
        config: &PlanningConfig,
        messages: Vec<Message>,
    ) -> Result<LoopOutcome, AgentError> {
        let task = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(Message::text)
            .unwrap_or_default();
        let planner = self.side_call(
            config.llm.clone().unwrap_or_else(|| self.llm.clone()),
            CallPurpose::Reasoning,
        );
        let mut plan = match self.make_plan(config, &planner, &task).await {
            Ok(plan) => plan,
            Err(error) => {
                self.emit_reasoning(EventKind::AgentReasoningFailed {
                    agent_role: self.role().to_string(),
                    task_name: self.task_name.clone(),
                    error: crewai_llm::error_chain(&error),
                });
                return Err(error);
            }
        };
        let mut progress = Progress::default();
        let mut replans = 0;
        let mut answer_is_last: Option<u32> = None;
        loop {
            let done = progress.done();
            let runnable: Vec<PlanStep> = plan
                .runnable(&done, &progress.ran())
                .into_iter()
                .take(config.concurrent_steps())
                .cloned()
                .collect();
            if runnable.is_empty() {
                let blocked = plan
                    .steps
                    .iter()
                    .find(|step| !progress.records.contains_key(&step.step_number));
                match blocked {
                    // Every step ran: the work is done.
                    None => break,
                    // A step waits on a failed one: the plan must change, or the work fails.
                    Some(step) => {
                        let reason = format!(
                            "step {} cannot run: a step it depends on failed",
                            step.step_number
                        );
                        if replans >= config.max_replans {
                            return Err(self.plan_step_error(&progress, config));
                        }
                        replans += 1;
                        plan = self
                            .replan(config, &planner, &task, &progress, &reason, replans)
                            .await?;
                        continue;
                    }
                }
            }
            let outcomes = join_all(
                runnable
                    .iter()
                    .map(|step| self.run_step(config, &task, &plan.plan, step, &progress)),
            )
            .await;
            let mut failed = Vec::new();
            for (step, outcome) in runnable.iter().zip(outcomes) {
                let outcome = match outcome {
                    Ok(text) => Ok(text),
                    Err(error) if ends_the_run(&error) => return Err(error),
                    Err(error) => {
                        failed.push(step.step_number);
                        Err(crewai_llm::error_chain(&error))
                    }
                };
                progress.records.insert(
                    step.step_number,
                    StepRecord {
                        description: step.description.clone(),
                        outcome,
                    },
                );
            }
            let numbers: Vec<u32> = runnable.iter().map(|s| s.step_number).collect();
            if config.observes() {
                let observation = self
                    .observe(config, &planner, &task, &plan, &progress, &numbers)
                    .await?;
                if observation.goal_achieved && failed.is_empty() {
                    if observation.last_result_is_answer {
                        answer_is_last = numbers.last().copied();
                    }
                    break;
                }
                if (observation.replan || !failed.is_empty()) && replans < config.max_replans {
                    replans += 1;
                    plan = self
                        .replan(
                            config,
                            &planner,
                            &task,
                            &progress,
                            &observation.reason,
                            replans,
                        )
                        .await?;
                }
            } else if !failed.is_empty() && replans < config.max_replans {
                replans += 1;
                let reason = format!("step(s) {failed:?} failed");
                plan = self
                    .replan(config, &planner, &task, &progress, &reason, replans)
                    .await?;
            }
        }
        if progress.done().is_empty() {
            // Nothing to answer from: the work failed.
            return Err(self.plan_step_error(&progress, config));
        }
        self.answer(messages, &task, &plan, &progress, answer_is_last)
            .await
    }

    /// The final answer: the last result as it stands when the observer said it is the answer
    /// (or the plan was one step) and no response format is asked for, else one more call of the
    /// agent over every result.
    async fn answer(
        &self,
        messages: Vec<Message>,
        task: &str,
        plan: &ReasoningPlan,
        progress: &Progress,
        answer_is_last: Option<u32>,
    ) -> Result<LoopOutcome, AgentError> {
        let single = (plan.steps.len() == 1 && progress.records.len() == 1)
            .then(|| progress.records.keys().next().copied())
            .flatten();
        if self.response_format.is_none()
            && let Some(number) = answer_is_last.or(single)
            && let Some(StepRecord {
                outcome: Ok(text), ..
            }) = progress.records.get(&number)
        {
            return self.finish(messages, text.clone(), None);
        }
        let mut opening: Vec<Message> = messages
            .into_iter()
            .filter(|m| m.role == Role::System)
            .collect();
        opening.push(Message::user(prompts::synthesis_request(
            task,
            &progress.results(None),
        )));
        self.direct_answer(opening).await
    }

    /// Makes the plan, refining it until the planner calls it ready or the attempts run out.
    async fn make_plan(
        &self,
        config: &PlanningConfig,
        planner: &Arc<dyn Llm>,
        task: &str,
    ) -> Result<ReasoningPlan, AgentError> {
        let tools: Vec<(String, String)> = self
            .tools
            .definitions()
            .into_iter()
            .map(|d| (d.name, d.description))
            .collect();
        let mut conversation = vec![
            self.planner_system(config),
            Message::user(prompts::plan_request(
                config.plan_prompt.as_deref(),
                task,
                &prompts::tool_lines(&tools),
                config.max_steps,
            )),
        ];
        let function = ForcedFunction::plan();
        let attempts = config.plan_attempts();
        let mut attempt = 1;
        loop {
            self.emit_reasoning(EventKind::AgentReasoningStarted {
                agent_role: self.role().to_string(),
                task_name: self.task_name.clone(),
                attempt,
            });
            let response = self
                .forced_call(planner, &function, conversation.clone())
                .await?;
            let plan = ReasoningPlan::from_reply(&response);
            if plan.ready || attempt >= attempts {
                let plan = plan.normalized(1, &BTreeSet::new(), config.max_steps, task);
                self.emit_reasoning(EventKind::AgentReasoningCompleted {
                    agent_role: self.role().to_string(),
                    task_name: self.task_name.clone(),
                    plan: plan.plan.clone(),
                    steps: plan.descriptions(),
                    ready: plan.ready,
                    attempts: attempt,
                });
                return Ok(plan);
            }
            let written = serde_json::to_string_pretty(&plan).unwrap_or_else(|_| plan.plan.clone());
            conversation.push(Message::assistant(written.clone()));
            conversation.push(Message::user(prompts::refine_request(
                config.refine_prompt.as_deref(),
                &written,
            )));
            attempt += 1;
        }
    }

    /// A new plan for the work still to do, after `replans - 1` earlier ones.
    async fn replan(
        &self,
        config: &PlanningConfig,
        planner: &Arc<dyn Llm>,
        task: &str,
        progress: &Progress,
        reason: &str,
        replans: u32,
    ) -> Result<ReasoningPlan, AgentError> {
        let first = progress.records.keys().max().copied().unwrap_or(0) + 1;
        let conversation = vec![
            self.planner_system(config),
            Message::user(prompts::replan_request(
                task,
                &progress.results(None),
                reason,
                first,
                config.max_steps,
            )),
        ];
        let response = self
            .forced_call(planner, &ForcedFunction::plan(), conversation)
            .await?;
        let remaining = ReasoningPlan::from_reply(&response).normalized(
            first,
            &progress.done(),
            config.max_steps,
            task,
        );
        self.emit_reasoning(EventKind::PlanReplanned {
            agent_role: self.role().to_string(),
            task_name: self.task_name.clone(),
            replan_count: replans,
            reason: reason.to_string(),
            steps: remaining.descriptions(),
        });
        Ok(remaining)
    }

    /// The observer's judgement after the steps `numbers` ran.
    async fn observe(
        &self,
        config: &PlanningConfig,
        planner: &Arc<dyn Llm>,
        task: &str,
        plan: &ReasoningPlan,
        progress: &Progress,
        numbers: &[u32],
    ) -> Result<StepObservation, AgentError> {
        let ran = progress.ran();
        let remaining: Vec<String> = plan
            .steps
            .iter()
            .filter(|s| !ran.contains(&s.step_number))
            .map(|s| format!("{}. {}", s.step_number, s.description))
            .collect();
        let conversation = vec![
            self.planner_system(config),
            Message::user(prompts::observe_request(
                task,
                &plan.plan,
                &remaining,
                &progress.results(None),
            )),
        ];
        let response = self
            .forced_call(planner, &ForcedFunction::observation(), conversation)
            .await?;
        let observation = StepObservation::from_reply(&response).unwrap_or_else(|problem| {
            tracing::warn!(
                agent = self.role(),
                problem,
                "the observer's reply is not an observation; the plan goes on as it is"
            );
            StepObservation {
                reason: format!("the observer's reply could not be read ({problem})"),
                ..StepObservation::default()
            }
        });
        self.emit_reasoning(EventKind::PlanStepObserved {
            agent_role: self.role().to_string(),
            task_name: self.task_name.clone(),
            step_numbers: numbers.to_vec(),
            goal_achieved: observation.goal_achieved,
            replan: observation.replan,
            reason: observation.reason.clone(),
        });
        Ok(observation)
    }

    /// Runs one step as its own small execution, within `step_timeout`.
    async fn run_step(
        &self,
        config: &PlanningConfig,
        task: &str,
        plan: &str,
        step: &PlanStep,
        progress: &Progress,
    ) -> Result<String, AgentError> {
        let started = self.services.events.emit(
            self.event_id,
            EventKind::PlanStepStarted {
                agent_role: self.role().to_string(),
                task_name: self.task_name.clone(),
                step_number: step.step_number,
                description: step.description.clone(),
                tool_to_use: step.tool_to_use.clone(),
            },
        );
        let execution = self.for_step(started, config.max_step_iterations);
        let inputs = progress.results(Some(&step.depends_on));
        let prompt = prompts::step_task(task, plan, step, &inputs);
        let messages = execution.opening_messages(&KickoffInput::Text(prompt));
        let work = execution.act(messages);
        let result = match config.step_timeout {
            Some(limit) => match tokio::time::timeout(limit, work).await {
                Ok(result) => result,
                Err(_) => {
                    execution.cancellation.cancel();
                    Err(AgentError::Timeout {
                        role: self.role().to_string(),
                        task: format!("step {} of its plan", step.step_number),
                        after: limit,
                    })
                }
            },
            None => work.await,
        };
        self.absorb_tool_errors(&execution);
        let kind = match &result {
            Ok(outcome) => EventKind::PlanStepCompleted {
                agent_role: self.role().to_string(),
                task_name: self.task_name.clone(),
                step_number: step.step_number,
                result: outcome.output.clone(),
            },
            Err(error) => EventKind::PlanStepFailed {
                agent_role: self.role().to_string(),
                task_name: self.task_name.clone(),
                step_number: step.step_number,
                error: crewai_llm::error_chain(error),
            },
        };
        self.services.events.emit(Some(started), kind);
        result.map(|outcome| outcome.output)
    }

    /// One call of the planner that must answer through `function`: forced as a function call
    /// when the model can call functions, else asked for as a structured output in its schema.
    async fn forced_call(
        &self,
        planner: &Arc<dyn Llm>,
        function: &ForcedFunction,
        messages: Vec<Message>,
    ) -> Result<LlmResponse, AgentError> {
        let mut request = LlmRequest::new(messages);
        if planner.capabilities().function_calling {
            request = request.with_tools(vec![function.definition.clone()]);
            request.options.tool_choice = Some(ToolChoice::Tool(function.definition.name.clone()));
        } else {
            request.response_format = Some(function.response_format());
        }
        planner
            .call(request)
            .await
            .map_err(|error| self.failure_error(error.into()))
    }

    /// The planner's system message: the user's `system_prompt`, else the agent as a planner.
    /// Every planner call (plan, refinement, observation, replan) gets the same one.
    fn planner_system(&self, config: &PlanningConfig) -> Message {
        Message::system(match &config.system_prompt {
            Some(custom) => custom.clone(),
            None => prompts::planner_system(
                self.agent.role(),
                self.agent.goal(),
                self.agent.backstory(),
            ),
        })
    }

    fn emit_reasoning(&self, kind: EventKind) {
        self.services.events.emit(self.event_id, kind);
    }

    /// The error of a plan that cannot go on: its first failed step's.
    fn plan_step_error(&self, progress: &Progress, config: &PlanningConfig) -> AgentError {
        let (step, error) = progress
            .records
            .iter()
            .find_map(|(number, record)| {
                record.outcome.as_ref().err().map(|e| (*number, e.clone()))
            })
            .unwrap_or((0, "a step could not run".to_string()));
        AgentError::PlanStepFailed {
            role: self.role().to_string(),
            step,
            max_replans: config.max_replans,
            error,
        }
    }
}
