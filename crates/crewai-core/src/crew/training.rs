//! [`Crew::train`] (CrewAI's `crew.train`, `crewai train`): `n` kickoffs of a copy of the crew
//! in which every task asks for human feedback (through the crew's input provider) and no agent
//! delegates; each task's first answer, the feedback and the improved answer are kept in a
//! [`TrainingLog`] as they happen; then, for each agent, an evaluator on the agent's own model
//! turns its iterations into suggestions, a quality score and a summary ([`TrainedAgents`]).
//!
//! Cost: every kickoff as usual, plus one more agent run per task that got feedback, plus one
//! evaluator call per trained agent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::agent::{Agent, RunServices};
use crate::converter::OutputSchema;
use crate::events::EventKind;
use crate::interpolate::Inputs;
use crate::kickoff::KickoffOptions;
use crate::prompts::agent::task_prompt;
use crate::prompts::evaluation as prompts;
use crate::structured_task::StructuredTask;
use crate::training::{TrainedAgent, TrainedAgents, TrainingExample, TrainingLog, TrainingRun};
use crate::usage::UsageTracker;

use super::{Crew, CrewError};

/// The title of the training evaluator's schema (the `response_format` name).
pub const TRAINING_EVALUATION_SCHEMA_NAME: &str = "TrainingTaskEvaluation";

/// What [`Crew::train`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingReport {
    /// Every iteration of every task, in the order they happened.
    pub examples: Vec<TrainingExample>,
    /// What each agent (by role) was taught.
    pub trained: TrainedAgents,
}

fn evaluation_schema() -> OutputSchema {
    OutputSchema::pydantic(json!({
        "title": TRAINING_EVALUATION_SCHEMA_NAME,
        "type": "object",
        "properties": {
            "suggestions": {
                "title": "Suggestions",
                "description": "Short instructions the agent should follow from now on.",
                "type": "array",
                "items": {"type": "string"}
            },
            "quality": {
                "title": "Quality",
                "description": "The quality of the agent's first answers, from 0 to 10.",
                "type": "number"
            },
            "final_summary": {
                "title": "Final Summary",
                "description": "What the agent should do differently.",
                "type": "string"
            }
        },
        "required": ["suggestions", "quality", "final_summary"]
    }))
}

impl Crew {
    /// Trains the crew: `n_iterations` kickoffs with `inputs`, each task asking for feedback
    /// once through the crew's input provider (an empty reply accepts the answer), every
    /// iteration kept in `log`, then one evaluator call per agent that answered. The crew
    /// itself is not changed: give the returned [`TrainedAgents`] to later crews
    /// ([`super::CrewBuilder::trained_agents`]) or save them to the trained-agents file.
    ///
    /// Emits `crew_train_started` and `crew_train_completed`; the kickoffs' events hang under
    /// `crew_train_started`.
    pub async fn train(
        &self,
        n_iterations: u32,
        inputs: Inputs,
        log: Arc<dyn TrainingLog>,
    ) -> Result<TrainingReport, CrewError> {
        let spec = &self.spec;
        if n_iterations == 0 {
            return Err(CrewError::Config {
                crew: spec.name.clone(),
                message: "training needs at least one iteration".into(),
            });
        }
        let started = spec.events.emit(
            None,
            EventKind::CrewTrainStarted {
                crew_name: spec.name.clone(),
                n_iterations,
            },
        );
        let examples = Arc::new(Mutex::new(Vec::new()));
        for iteration in 1..=n_iterations {
            let run = TrainingRun {
                iteration,
                crew: spec.name.clone(),
                log: log.clone(),
                examples: examples.clone(),
            };
            let mut options = KickoffOptions::new().parent_event(started);
            options.training = Some(run);
            self.training_copy()
                .kickoff_with(inputs.clone(), options)
                .await?;
        }
        let examples = std::mem::take(&mut *examples.lock().unwrap_or_else(|p| p.into_inner()));

        let prepared = self.prepare(&self.apply_before_kickoff(inputs))?;
        let agents: Vec<&Agent> = prepared
            .agents
            .iter()
            .chain(prepared.manager.as_ref())
            .collect();
        let mut by_role: BTreeMap<&str, Vec<&TrainingExample>> = BTreeMap::new();
        for example in &examples {
            by_role
                .entry(&example.agent_role)
                .or_default()
                .push(example);
        }
        let services = RunServices {
            events: spec.events.clone(),
            hooks: spec.hooks.clone(),
            rate_limiter: spec.rate_limiter.clone(),
            crew_name: Some(spec.name.clone()),
            crew_id: Some(spec.id.to_string()),
            usage: UsageTracker::new().with_prices(spec.prices.clone()),
            ..RunServices::default()
        };
        let mut trained = TrainedAgents::default();
        for (role, iterations) in by_role {
            let Some(agent) = agents.iter().find(|a| a.role() == role) else {
                continue;
            };
            let taught = self
                .evaluate_training(agent, &iterations, &services, started)
                .await?;
            trained.agents.insert(role.to_string(), taught);
        }
        spec.events.emit(
            Some(started),
            EventKind::CrewTrainCompleted {
                crew_name: spec.name.clone(),
                n_iterations,
                trained_agents: trained.agents.keys().cloned().collect(),
            },
        );
        Ok(TrainingReport { examples, trained })
    }

    /// The crew as training runs it: every task asks for feedback, no agent delegates.
    fn training_copy(&self) -> Crew {
        let mut spec = self.respec(uuid::Uuid::new_v4(), None);
        spec.agents = spec
            .agents
            .iter()
            .map(|agent| agent.with_allow_delegation(false))
            .collect();
        spec.tasks = spec
            .tasks
            .iter()
            .map(|task| {
                let task = task.with_human_input(true);
                match task.agent() {
                    Some(agent) => task.with_agent(agent.with_allow_delegation(false)),
                    None => task,
                }
            })
            .collect();
        Crew {
            spec: Arc::new(spec),
        }
    }

    /// The evaluator's lesson from one agent's iterations, on the agent's own model.
    async fn evaluate_training(
        &self,
        agent: &Agent,
        iterations: &[&TrainingExample],
        services: &RunServices,
        parent: uuid::Uuid,
    ) -> Result<TrainedAgent, CrewError> {
        let failed = |source: crate::error::BoxedCause| CrewError::Evaluation {
            crew: self.spec.name.clone(),
            task: format!("the training of '{}'", agent.role()),
            source,
        };
        let mut evaluator = Agent::builder()
            .role(prompts::TRAINING_EVALUATOR_ROLE)
            .goal(prompts::TRAINING_EVALUATOR_GOAL)
            .backstory(prompts::TRAINING_EVALUATOR_BACKSTORY);
        evaluator = match agent.llm() {
            Ok(llm) => evaluator.llm(llm),
            Err(error) => return Err(failed(Box::new(error))),
        };
        let evaluator = evaluator.build().map_err(|e| failed(Box::new(e)))?;
        let texts: Vec<prompts::TrainingIterationText<'_>> = iterations
            .iter()
            .map(|it| prompts::TrainingIterationText {
                iteration: it.iteration,
                task: &it.task,
                initial_output: &it.initial_output,
                human_feedback: &it.human_feedback,
                improved_output: &it.improved_output,
            })
            .collect();
        let schema = evaluation_schema();
        let mut prompt = task_prompt(
            &prompts::training_evaluation_task(agent.role(), &texts),
            prompts::TRAINING_EVALUATION_EXPECTED_OUTPUT,
        );
        prompt.push('\n');
        prompt.push_str(&crate::prompts::crew::structured_output_instructions(
            &schema.pretty(),
        ));
        let value = StructuredTask {
            agent: &evaluator,
            prompt,
            schema: &schema,
            task_name: Some(format!("training of {}", agent.role())),
            parent: Some(parent),
        }
        .run(services)
        .await
        .map_err(|e| failed(Box::new(e)))?;
        serde_json::from_value(value).map_err(|e| failed(Box::new(e)))
    }
}
