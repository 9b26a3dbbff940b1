//! A kickoff from start to end: the public entry points, interpolation, and the run itself
//! (events, services, cancellation, the journal's start and end).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crewai_llm::Usage;
use futures::StreamExt;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::{Agent, DelegationChain, RunServices};
use crate::events::EventKind;
use crate::interpolate::{Filler, Inputs, InterpolationError};
use crate::mcp::McpSessions;
use crate::output::{CrewOutput, TaskOutput};
use crate::process::RunContext;
use crate::store::{RunEnd, RunParent, RunStatus, StoreError};
use crate::task::Task;
use crate::usage::{UsageSummary, UsageTracker};

use super::journal::{RunSpending, TaskRecorder};
use super::stream::StreamClaim;
use super::{Crew, CrewError, KickoffOptions};

/// One run of the crew, as the public entry points ask for it.
pub(super) struct RunRequest {
    pub(super) inputs: Inputs,
    pub(super) plan: RunPlan,
    pub(super) stream: bool,
    pub(super) claim: Option<Arc<Mutex<StreamClaim>>>,
    pub(super) options: KickoffOptions,
}

/// What a run starts from: a fresh kickoff restores nothing; a replay, resume or fork restores
/// the outputs of tasks that are not run again.
#[derive(Default)]
pub(super) struct RunPlan {
    /// Outputs by task index, in index order. Not necessarily a prefix: async tasks of a killed
    /// run may have finished out of order.
    pub(super) restored: Vec<(usize, TaskOutput)>,
    pub(super) origin: RunOrigin,
    /// What earlier attempts of a resumed run used.
    pub(super) prior_usage: Usage,
    /// The journaled plan of a resumed run (`planning: true`): applied again, not asked again.
    pub(super) crew_plan: Option<super::CrewPlan>,
}

#[derive(Default)]
pub(super) enum RunOrigin {
    #[default]
    Kickoff,
    /// `Crew::replay`: the latest-kickoff store already holds the restored outputs.
    Replay,
    /// `Crew::resume`: the journal already holds the restored outputs, under the same run id.
    Resume,
    /// `Crew::fork`: a new run whose restored outputs are copies from `parent`.
    Fork(RunParent),
}

/// The agents and tasks of one kickoff, interpolated.
pub(super) struct Prepared {
    pub(super) agents: Vec<Agent>,
    pub(super) tasks: Vec<Task>,
    pub(super) manager: Option<Agent>,
    /// A consensual crew's voters, in label order.
    pub(super) voters: Vec<Agent>,
}

impl Crew {
    /// Runs the crew. `inputs` fill the `{placeholders}` of agents and tasks (empty: nothing is
    /// interpolated); every placeholder is checked before anything runs.
    pub async fn kickoff(&self, inputs: Inputs) -> Result<CrewOutput, CrewError> {
        self.kickoff_with(inputs, KickoffOptions::default()).await
    }

    /// [`Crew::kickoff`] inside a larger run (a flow method): the kickoff's events hang under
    /// `options.parent_event_id`, and cancelling `options.cancellation` abandons it.
    pub async fn kickoff_with(
        &self,
        inputs: Inputs,
        options: KickoffOptions,
    ) -> Result<CrewOutput, CrewError> {
        self.run(RunRequest {
            inputs,
            plan: RunPlan::default(),
            stream: self.spec.stream,
            claim: None,
            options,
        })
        .await
    }

    /// Starts a kickoff in the background (on the current tokio runtime).
    pub fn kickoff_async(&self, inputs: Inputs) -> JoinHandle<Result<CrewOutput, CrewError>> {
        let crew = self.clone();
        tokio::spawn(async move { crew.kickoff(inputs).await })
    }

    /// Runs one kickoff per input set, concurrently (at most `kickoff_concurrency` at once), each on
    /// its own copy of the crew; outputs come back in input order, each with its own usage, and
    /// [`Crew::usage`] afterwards is their sum. All inputs are checked before any run starts.
    pub async fn kickoff_for_each(
        &self,
        inputs: Vec<Inputs>,
    ) -> Result<Vec<CrewOutput>, CrewError> {
        for set in &inputs {
            self.prepare(&self.apply_before_kickoff(set.clone()))?;
        }
        // Each run owns its copy, so the future borrows nothing from here and stays `Send`.
        let runs = futures::stream::iter(inputs.into_iter().map(|set| {
            let copy = self.copy();
            async move {
                let output = copy.kickoff(set).await;
                (output, copy.usage())
            }
        }))
        .buffered(self.spec.kickoff_concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
        let mut total = UsageSummary::default();
        for (_, usage) in &runs {
            total.add(usage);
        }
        self.record().usage = total;
        runs.into_iter().map(|(output, _)| output).collect()
    }

    pub(super) fn apply_before_kickoff(&self, mut inputs: Inputs) -> Inputs {
        for callback in &self.spec.before_kickoff {
            inputs = callback(inputs);
        }
        inputs
    }

    pub(super) async fn run(&self, request: RunRequest) -> Result<CrewOutput, CrewError> {
        let RunRequest {
            inputs: given,
            plan,
            stream,
            claim,
            options,
        } = request;
        let spec = &self.spec;
        if let Some(message) = options.refused_by_a_crew() {
            return Err(CrewError::Config {
                crew: spec.name.clone(),
                message,
            });
        }
        let inputs = self.apply_before_kickoff(given.clone());
        let prepared = self.prepare(&inputs)?;
        let run_id = options
            .run_id
            .clone()
            .unwrap_or_else(|| Uuid::new_v4().to_string());
        self.record().run_id = Some(run_id.clone());
        // A budget is the run's: a resumed run counts what its earlier attempts spent.
        let usage = UsageTracker::new()
            .with_prices(spec.prices.clone())
            .with_budget(spec.budget)
            .with_prior_spending(plan.prior_usage)
            .with_parent(options.usage.clone());
        let spending = RunSpending {
            attempt: usage.clone(),
            prior: plan.prior_usage,
        };
        let recorder = TaskRecorder {
            store: spec.store.clone(),
            journal: spec
                .journal
                .clone()
                .map(|journal| (journal, run_id.clone())),
            inputs: inputs.clone(),
            replaying: matches!(plan.origin, RunOrigin::Replay | RunOrigin::Fork(_)),
            spending: spending.clone(),
        };
        let journaled = self
            .start_run(&run_id, given, &plan, &prepared, &recorder, spending)
            .await?;

        let inputs_json =
            (!inputs.is_empty()).then(|| serde_json::to_value(&inputs).unwrap_or(Value::Null));
        let started = spec.events.emit(
            options.parent_event_id,
            EventKind::CrewKickoffStarted {
                crew_name: spec.name.clone(),
                crew_id: Some(spec.id.to_string()),
                inputs: inputs_json,
            },
        );
        if let Some(claim) = claim {
            claim.lock().unwrap_or_else(|p| p.into_inner()).armed_on = None;
        }

        let cancellation = options
            .cancellation
            .as_ref()
            .map(CancellationToken::child_token)
            .unwrap_or_default();
        let services = RunServices {
            events: spec.events.clone(),
            hooks: spec.hooks.clone(),
            tool_cache: spec.tool_cache.clone(),
            rate_limiter: spec.rate_limiter.clone(),
            crew_name: Some(spec.name.clone()),
            crew_id: Some(spec.id.to_string()),
            cancellation: cancellation.clone(),
            delegation: DelegationChain {
                chain: Vec::new(),
                max_depth: spec.max_delegation_depth,
            },
            usage: usage.clone(),
            step_callback: spec.step_callback.clone(),
            tool_failure_policy: spec.tool_failure_policy,
            stream,
            default_timeout: spec.task_timeout,
            skills: spec.skills.clone(),
            mcp: McpSessions::default(),
            a2a: crate::a2a::A2aSessions::default(),
            memory: spec.memory.clone(),
            knowledge: spec.knowledge.clone(),
        };
        let run = RunContext {
            services,
            agents: prepared.agents.clone(),
            task_callback: spec.task_callback.clone(),
            input_provider: spec.input_provider.clone(),
            task_timeout: spec.task_timeout,
            training: options.training.clone(),
        };

        let result = tokio::select! {
            result = async {
                self.ingest_knowledge_counted(&usage, &cancellation).await?;
                self.plan_and_execute(&run, prepared, started, plan.restored, plan.crew_plan, &recorder).await
            } => result,
            _ = cancellation.cancelled() => Err(CrewError::Cancelled { crew: spec.name.clone() }),
            taken_over = journaled.keep_alive() => Err(CrewError::Store(taken_over)),
        };
        // An agent may notice the cancellation first and fail with its own error: it is still a cancellation.
        let result = match result {
            Err(CrewError::BudgetExceeded {
                crew,
                task,
                exceeded,
                completed,
                ..
            }) => Err(CrewError::BudgetExceeded {
                crew,
                task,
                exceeded,
                completed,
                usage: Box::new(usage.total()),
            }),
            Err(_) if cancellation.is_cancelled() => Err(CrewError::Cancelled {
                crew: spec.name.clone(),
            }),
            other => other,
        };
        // The next task or kickoff must see every memory this one saved, not half of them: the
        // crew's, and those of agents with their own (the manager's too).
        let memories = spec
            .memory
            .iter()
            .chain(spec.agents.iter().filter_map(Agent::memory))
            .chain(spec.tasks.iter().filter_map(|t| t.agent()?.memory()))
            .chain(spec.manager.as_ref().and_then(Agent::memory));
        for memory in memories {
            if let Err(error) = memory.drain_writes().await {
                // Each failed write was reported on the bus (`memory_save_failed`).
                tracing::warn!(
                    crew = %spec.name,
                    error = crewai_llm::error_chain(&error),
                    "some memories of this run could not be saved"
                );
            }
        }
        // Whatever still runs for this kickoff (a coworker, a pending call) stops now.
        cancellation.cancel();
        run.services.mcp.shutdown().await;
        self.record().usage = usage.summary();
        let total_usage = journaled.run_total();
        match result {
            Ok(outputs) => {
                let mut output = CrewOutput::from_tasks(outputs, usage.total());
                for callback in &spec.after_kickoff {
                    output = callback(output);
                }
                output.run_id = Some(run_id);
                journaled
                    .finish(&RunEnd::completed(output.raw.clone(), total_usage))
                    .await?;
                spec.events.emit(
                    Some(started),
                    EventKind::CrewKickoffCompleted {
                        crew_name: spec.name.clone(),
                        crew_id: Some(spec.id.to_string()),
                        output: output.raw.clone(),
                        total_tokens: output.token_usage.total_tokens,
                    },
                );
                Ok(output)
            }
            Err(error) => {
                let status = match &error {
                    CrewError::Cancelled { .. } => RunStatus::Cancelled,
                    CrewError::BudgetExceeded { .. } => RunStatus::BudgetStopped,
                    _ => RunStatus::Failed,
                };
                // The run's own error is what the caller needs; a journal that cannot record it
                // leaves the run `running`, which a resume handles the same way.
                if matches!(error, CrewError::Store(StoreError::RunOwned { .. })) {
                    // Another attempt owns the run now: its end is that attempt's to record.
                    journaled.release();
                } else if let Err(journal) = journaled
                    .finish(&RunEnd::stopped(
                        status,
                        crewai_llm::error_chain(&error),
                        Some(total_usage),
                    ))
                    .await
                {
                    tracing::warn!(
                        run_id = %run_id,
                        error = crewai_llm::error_chain(&journal),
                        "the run's end could not be journaled"
                    );
                }
                spec.events.emit(
                    Some(started),
                    EventKind::CrewKickoffFailed {
                        crew_name: spec.name.clone(),
                        crew_id: Some(spec.id.to_string()),
                        error: crewai_llm::error_chain(&error),
                    },
                );
                Err(error)
            }
        }
    }

    /// Interpolates `inputs` into copies of the agents and tasks (checking every placeholder).
    pub(super) fn prepare(&self, inputs: &Inputs) -> Result<Prepared, CrewError> {
        let spec = &self.spec;
        let adapt = |agent: &Agent| -> Result<Agent, InterpolationError> {
            let mut agent = interpolate_agent(agent, inputs)?;
            if let Some(suggestions) = spec.trained.suggestions_for(agent.role()) {
                agent = agent.with_trained_suggestions(suggestions.to_vec());
            }
            if agent.function_calling_llm().is_none()
                && let Some(llm) = &spec.function_calling_llm
            {
                agent = agent.with_function_calling_llm(llm.clone());
            }
            Ok(agent)
        };
        let mut by_id: BTreeMap<Uuid, Agent> = BTreeMap::new();
        let mut agents = Vec::with_capacity(spec.agents.len());
        for agent in &spec.agents {
            let ready = adapt(agent)?;
            by_id.insert(agent.id(), ready.clone());
            agents.push(ready);
        }
        let mut tasks = Vec::with_capacity(spec.tasks.len());
        for task in &spec.tasks {
            let mut ready = task.interpolated(inputs)?;
            if let Some(agent) = task.agent() {
                let agent = match by_id.get(&agent.id()) {
                    Some(known) => known.clone(),
                    None => {
                        let made = adapt(agent)?;
                        by_id.insert(agent.id(), made.clone());
                        made
                    }
                };
                ready = ready.with_agent(agent);
            }
            tasks.push(ready);
        }
        let manager = spec.manager.as_ref().map(adapt).transpose()?;
        let voters = spec
            .consensus
            .as_ref()
            .map(|setup| setup.voters_of(&agents))
            .unwrap_or_default();
        Ok(Prepared {
            agents,
            tasks,
            manager,
            voters,
        })
    }
}

fn interpolate_agent(agent: &Agent, inputs: &Inputs) -> Result<Agent, InterpolationError> {
    if inputs.is_empty() {
        return Ok(agent.clone());
    }
    let fill = Filler::new(inputs, format!("agent '{}'", agent.role()));
    let role = fill.field(agent.role(), "role")?;
    let goal = fill.field(agent.goal(), "goal")?;
    let backstory = fill.field(agent.backstory(), "backstory")?;
    if role == agent.role() && goal == agent.goal() && backstory == agent.backstory() {
        return Ok(agent.clone());
    }
    Ok(agent.with_identity(role, goal, backstory))
}
