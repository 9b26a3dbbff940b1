//! What memory does around one task (CrewAI's `memory=True`): before it, the memories closest
//! to the task are recalled into its prompt; during it, the agent has `search_memory` and
//! `save_to_memory`; after it, what the result is worth remembering is saved in the background,
//! under `agent/<role>` of the crew's memory or at the root of the agent's own (the crew drains
//! those writes before its kickoff returns).
//!
//! The memory's model calls (extraction, analysis, consolidation) are the agent's model under
//! the run's layers ([`CallPurpose::Memory`]) and its embedding calls go through
//! [`embedder_stack::metered`], so both count in the run's usage and budget; its events go to
//! the run's bus as `memory_*` events under the task.

use std::sync::Arc;

use async_trait::async_trait;
use crewai_llm::{LayeredLlm, Llm, LlmError, LlmLayer, LlmRequest, LlmResponse, Next, error_chain};
use crewai_memory::{
    Memory, MemoryError, MemoryEvent, MemoryObserver, RecallQuery, RememberOptions, ScopePath,
    memory_tools,
};
use crewai_tools::ToolHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::Agent;
use crate::agent_task::RunServices;
use crate::embedder_stack::{self, RunMeter};
use crate::events::{EventBus, EventKind};
use crate::llm_stack::{self, CallPurpose, CallScope};
use crate::prompts::memory as prompts;
use crate::usage::UsageTracker;

/// How many memories a task's prompt gets (CrewAI recalls five, shallow).
pub(crate) const RECALL_LIMIT: usize = 5;

/// The memory one task works with: the agent's own, else its crew's, reporting on the run's bus
/// and thinking with the agent's model.
pub(crate) struct TaskMemory {
    memory: Memory,
    /// The agent's own memory keeps its results at its root; a crew's, under `agent/<role>`.
    own: bool,
    role: String,
    /// A delegated answer is not saved (the delegating agent's result holds what matters).
    delegated: bool,
}

/// Puts a memory's events on the run's bus, under the task, naming the agent and task.
struct BusObserver {
    events: EventBus,
    parent: Option<Uuid>,
    agent_role: Option<String>,
    task_name: Option<String>,
}

impl MemoryObserver for BusObserver {
    fn on_event(&self, event: &MemoryEvent) {
        let agent_role = self.agent_role.clone();
        let task_name = self.task_name.clone();
        let millis =
            |elapsed: &std::time::Duration| elapsed.as_millis().try_into().unwrap_or(u64::MAX);
        let kind = match event.clone() {
            MemoryEvent::SaveStarted { scope, statements } => EventKind::MemorySaveStarted {
                agent_role,
                task_name,
                scope,
                statements,
            },
            MemoryEvent::SaveCompleted {
                scope,
                saved,
                elapsed,
            } => EventKind::MemorySaveCompleted {
                agent_role,
                task_name,
                scope,
                saved,
                elapsed_ms: millis(&elapsed),
            },
            MemoryEvent::SaveFailed { scope, error } => EventKind::MemorySaveFailed {
                agent_role,
                task_name,
                scope,
                error,
            },
            MemoryEvent::QueryStarted {
                query,
                scope,
                limit,
            } => EventKind::MemoryQueryStarted {
                agent_role,
                task_name,
                query,
                scope,
                limit,
            },
            MemoryEvent::QueryCompleted {
                query,
                scope,
                results,
                elapsed,
            } => EventKind::MemoryQueryCompleted {
                agent_role,
                task_name,
                query,
                scope,
                results,
                elapsed_ms: millis(&elapsed),
            },
            MemoryEvent::QueryFailed {
                query,
                scope,
                error,
            } => EventKind::MemoryQueryFailed {
                agent_role,
                task_name,
                query,
                scope,
                error,
            },
        };
        self.events.emit(self.parent, kind);
    }
}

impl TaskMemory {
    /// The task's memory, or `None` when neither the agent nor its crew has one.
    pub(crate) fn prepare(
        agent: &Agent,
        llm: &Arc<dyn Llm>,
        services: &RunServices,
        parent: Option<Uuid>,
        task_name: Option<&str>,
    ) -> Option<TaskMemory> {
        let (memory, own) = match agent.memory() {
            Some(own) => (own, true),
            None => (services.memory.as_ref()?, false),
        };
        let scope = CallScope::new(agent, services, CallPurpose::Memory)
            .with_task(task_name)
            .with_parent(parent)
            .with_cancellation(services.cancellation.clone());
        let observer = BusObserver {
            events: services.events.clone(),
            parent,
            agent_role: Some(agent.role().to_string()),
            task_name: task_name.map(str::to_string),
        };
        let scope = Arc::new(scope);
        let embedder = embedder_stack::metered(memory.embedder().clone(), scope.clone());
        let memory = match memory.with_embedder(embedder) {
            Ok(metered) => metered,
            Err(error) => {
                // The layer keeps the model's name, so this cannot fail; if it ever did, the
                // task would run without memory rather than with uncounted embeddings.
                tracing::warn!(error = error_chain(&error), "memory is off for this task");
                return None;
            }
        };
        let memory = memory
            .with_llm(llm_stack::stack(llm.clone(), scope))
            .with_observer(Arc::new(observer));
        Some(TaskMemory {
            memory,
            own,
            role: agent.role().to_string(),
            delegated: services.delegation.depth() > 0,
        })
    }

    /// `search_memory` and `save_to_memory` for the agent (its saves carry its role).
    pub(crate) fn tools(&self) -> Vec<ToolHandle> {
        memory_tools(&self.memory, Some(self.role.clone()))
    }

    /// The task prompt with what memory recalls for `query` (the task's description) after
    /// it. A failed recall is reported on the bus (`memory_query_failed`) and the task runs
    /// without memories, as CrewAI does.
    pub(crate) async fn with_recalled(&self, task_prompt: &str, query: &str) -> String {
        let recalled = self
            .memory
            .recall(RecallQuery::new(query).shallow().limit(RECALL_LIMIT))
            .await;
        match recalled {
            Ok(matches) => {
                let lines: Vec<String> = matches.iter().map(|m| m.format()).collect();
                format!("{task_prompt}{}", prompts::recalled_block(&lines))
            }
            Err(error) => {
                tracing::warn!(
                    agent = %self.role,
                    error = error_chain(&error),
                    "memory recall failed; the task runs without memories"
                );
                task_prompt.to_string()
            }
        }
    }

    /// Saves what `result` is worth remembering (under `agent/<role>` of a crew's memory, at the
    /// root of the agent's own), in the background:
    /// the statements the agent's model extracts, or the whole result as one when extraction
    /// fails.
    /// A delegated answer is not saved.
    pub(crate) async fn save_result(&self, result: &str) {
        if self.delegated || result.trim().is_empty() {
            return;
        }
        let statements = match self.memory.extract_memories(result).await {
            // The model found nothing worth keeping.
            Ok(statements) if statements.is_empty() => return,
            Ok(statements) => statements,
            Err(error) => {
                tracing::warn!(
                    agent = %self.role,
                    error = error_chain(&error),
                    "memory extraction failed; the whole result is saved as one memory"
                );
                vec![result.to_string()]
            }
        };
        let scope = if self.own {
            Ok(ScopePath::root())
        } else {
            ScopePath::parse("agent")
                .map(|agent| agent.join(&ScopePath::segment_from_name(&self.role)))
        };
        let options = match scope {
            Ok(scope) => RememberOptions::default()
                .scope(scope)
                .source(self.role.clone()),
            Err(error) => {
                tracing::warn!(error = error_chain(&error), "memory scope refused");
                return;
            }
        };
        if let Err(error) = self.memory.remember_background(statements, options) {
            tracing::warn!(
                agent = %self.role,
                error = error_chain(&error),
                "the task's result could not be queued for memory"
            );
        }
    }
}

/// Where a memory used outside an agent's task reports and counts its work: a flow's methods
/// (`FlowContext::remember` and `recall` in crewai-flow). Its `memory_*` events go to `events`
/// under `parent`; its embeddings and its model's calls (extraction, analysis, consolidation)
/// count in `usage` under `owner` and are refused past its budget, as a task's memory's are.
#[derive(Debug, Clone)]
pub struct MemoryAccounting {
    pub events: EventBus,
    pub parent: Option<Uuid>,
    pub usage: UsageTracker,
    pub cancellation: CancellationToken,
    /// The name its usage is counted under (`(flow memory)`, say).
    pub owner: String,
}

impl MemoryAccounting {
    /// The same memory (store, background writes) doing its work under this accounting.
    pub fn apply(&self, memory: &Memory) -> Result<Memory, MemoryError> {
        let meter = Arc::new(RunMeter {
            usage: self.usage.clone(),
            owner: self.owner.clone(),
            cancellation: self.cancellation.clone(),
        });
        let counted = memory.with_embedder(embedder_stack::metered(
            memory.embedder().clone(),
            meter.clone(),
        ))?;
        let counted = match memory.llm() {
            Some(llm) => counted.with_llm(Arc::new(
                LayeredLlm::builder(llm.clone())
                    .layer(MeteredCalls(meter))
                    .build(),
            )),
            None => counted,
        };
        Ok(counted.with_observer(Arc::new(BusObserver {
            events: self.events.clone(),
            parent: self.parent,
            agent_role: None,
            task_name: None,
        })))
    }
}

/// A model's calls counted by a [`RunMeter`]: refused past its budget, recorded under its
/// owner, stopped by its cancellation.
struct MeteredCalls(Arc<RunMeter>);

#[async_trait]
impl LlmLayer for MeteredCalls {
    fn name(&self) -> &str {
        "run usage"
    }

    async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let model = next.model().model().to_string();
        self.0
            .usage
            .check_request(&model, &request)
            .map_err(|exceeded| LlmError::BudgetExceeded(Box::new(exceeded)))?;
        let response = tokio::select! {
            biased;
            _ = self.0.cancellation.cancelled() => Err(LlmError::Cancelled),
            response = next.call(request) => response,
        }?;
        self.0
            .usage
            .record_call(&model, &self.0.owner, None, &response.usage);
        Ok(response)
    }
}
