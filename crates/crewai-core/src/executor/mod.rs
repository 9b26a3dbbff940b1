//! The agent executor: the loops that take an agent from a prompt to a final answer.
//!
//! Which loop runs is decided per execution, as CrewAI decides it:
//! - **native tool calling** when the agent has tools and its model supports function calling: the
//!   tools go to the provider as schemas; any text reply is the final answer; all tool calls of one
//!   response run before the next call (concurrently, at most 8 at once, unless a called tool has
//!   `result_as_answer` or `max_usage_count`), and their results go back as tool messages in call
//!   order;
//! - **ReAct text** when the agent has tools but the model cannot call functions: the tools are
//!   described in the system prompt and replies are parsed by [`react`];
//! - **direct answer** when the agent has no tools: one call, with the response format when one is
//!   asked for.
//!
//! Around every loop: `max_iter` tool rounds then a forced final answer without tools,
//! `max_execution_time` as a deadline on the whole execution, `max_retry_limit` re-runs after an
//! error, context-window summarisation. Every model call goes through the execution's model stack
//! ([`crate::llm_stack`]): hooks, the user's layers, budget, rate limit, events and usage.

mod context;
mod llm_call;
mod loops;
mod messages;
pub mod react;
mod tool_call;

pub(crate) use llm_call::{RateLimitWaiter, parse_structured};

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crewai_llm::{Extensions, Llm, Message, ResponseFormat, Usage, error_chain};
use crewai_tools::{ToolFailurePolicy, ToolSet};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::{Agent, AgentStep, RunServices, StepCallback};
use crate::error::AgentError;
use crate::events::{CaughtPanic, EventKind, PanicSite, panic_message};
use crate::hooks::Hooks;
use crate::llm_stack::{self, CallPurpose, CallScope};
use crate::reasoning::PlanningConfig;

/// The loop an execution runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopMode {
    Native,
    React,
    Direct,
}

/// What kind of run the execution serves, for its error events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunKind {
    /// A task given by a crew or `execute_task` (`agent_execution_*` events).
    Task,
    /// `Agent::kickoff` (`lite_agent_execution_*` events).
    Kickoff,
}

/// The final answer of one loop run and the conversation that led to it.
#[derive(Debug, Clone)]
pub(crate) struct LoopOutcome {
    pub(crate) output: String,
    pub(crate) typed: Option<Value>,
    pub(crate) messages: Vec<Message>,
    pub(crate) result_as_answer: bool,
}

/// The execution's model stack, built on its first call (the task name and the execution's
/// event, which its scope carries, are set after [`Execution::new`]).
pub(crate) struct ExecutionStack {
    /// The agent's model under the run's layers.
    pub(crate) llm: Arc<dyn Llm>,
    /// The scope of the agent's own turns.
    pub(crate) scope: Arc<CallScope>,
    /// The extensions a summary call carries: a scope of its own, sharing the usage.
    pub(crate) summaries: Extensions,
}

impl ExecutionStack {
    /// `llm` under the run's layers for the turns `scope` describes, with a summaries' scope
    /// sharing its usage.
    fn over(llm: Arc<dyn Llm>, scope: CallScope) -> Self {
        let mut summaries = Extensions::new();
        summaries.insert(scope.derived(CallPurpose::Summary));
        let scope = Arc::new(scope);
        ExecutionStack {
            llm: llm_stack::stack(llm, scope.clone()),
            scope,
            summaries,
        }
    }
}

/// One execution of an agent: everything the loops share.
pub(crate) struct Execution {
    pub(crate) agent: Agent,
    /// The agent's model as configured (its own stack, without the run's layers).
    pub(crate) llm: Arc<dyn Llm>,
    pub(crate) services: RunServices,
    /// Crew hooks followed by the agent's.
    pub(crate) hooks: Hooks,
    pub(crate) tools: ToolSet,
    pub(crate) mode: LoopMode,
    pub(crate) kind: RunKind,
    /// Sent only by the direct loop (a model with tools is not held to a format, as in CrewAI).
    pub(crate) response_format: Option<ResponseFormat>,
    pub(crate) task_name: Option<String>,
    pub(crate) task_id: Option<String>,
    /// The task's tool failure policy, which wins over the agent's and the crew's.
    pub(crate) task_tool_failure_policy: Option<ToolFailurePolicy>,
    /// The agent's execution event: the parent of its LLM and tool events.
    pub(crate) event_id: Option<Uuid>,
    /// Cancelled when the execution ends by timeout or from outside, so tools can stop.
    pub(crate) cancellation: CancellationToken,
    /// The skills its system prompt discloses (their tools are in `tools`).
    pub(crate) skills: Option<crate::skills::ActiveSkills>,
    /// Tool rounds before the agent must answer: the agent's `max_iter`, or a plan step's
    /// `max_step_iterations`.
    pub(crate) max_iter: u32,
    /// Plan before acting (the agent's `planning_config`); `None` for a plan's own steps.
    pub(crate) planning: Option<Arc<PlanningConfig>>,
    stack: OnceLock<ExecutionStack>,
    tool_errors: AtomicU32,
}

impl Execution {
    pub(crate) fn new(
        agent: &Agent,
        llm: Arc<dyn Llm>,
        services: RunServices,
        tools: ToolSet,
        kind: RunKind,
    ) -> Self {
        let mode = if tools.is_empty() {
            LoopMode::Direct
        } else if llm.capabilities().function_calling {
            LoopMode::Native
        } else {
            LoopMode::React
        };
        Execution {
            agent: agent.clone(),
            hooks: services.hooks.merged(agent.hooks()),
            cancellation: services.cancellation.child_token(),
            llm,
            services,
            tools,
            mode,
            kind,
            response_format: None,
            task_name: None,
            task_id: None,
            task_tool_failure_policy: None,
            event_id: None,
            skills: None,
            max_iter: agent.max_iter(),
            planning: agent.planning_config().cloned(),
            stack: OnceLock::new(),
            tool_errors: AtomicU32::new(0),
        }
    }

    /// An execution for one step of this execution's plan: the same agent, tools, services and
    /// task, at most `max_iter` tool rounds, no plan of its own, its calls and tools reported
    /// under `step_event` and counted in this execution's usage.
    pub(crate) fn for_step(&self, step_event: Uuid, max_iter: u32) -> Execution {
        let cancellation = self.cancellation.child_token();
        let scope = self
            .stack()
            .scope
            .derived(CallPurpose::Agent)
            .with_parent(Some(step_event))
            .with_cancellation(cancellation.clone());
        let stack = OnceLock::new();
        // A fresh lock cannot be set already.
        let _ = stack.set(ExecutionStack::over(self.llm.clone(), scope));
        Execution {
            agent: self.agent.clone(),
            llm: self.llm.clone(),
            services: self.services.clone(),
            hooks: self.hooks.clone(),
            tools: self.tools.clone(),
            mode: self.mode,
            kind: self.kind,
            response_format: None,
            task_name: self.task_name.clone(),
            task_id: self.task_id.clone(),
            task_tool_failure_policy: self.task_tool_failure_policy,
            event_id: Some(step_event),
            cancellation,
            skills: self.skills.clone(),
            max_iter,
            planning: None,
            stack,
            tool_errors: AtomicU32::new(0),
        }
    }

    /// Adds a step's tool errors to this execution's.
    pub(crate) fn absorb_tool_errors(&self, step: &Execution) {
        self.tool_errors
            .fetch_add(step.tool_errors(), Ordering::SeqCst);
    }

    pub(crate) fn role(&self) -> &str {
        self.agent.role()
    }

    /// The model stack of this execution's calls (see [`crate::llm_stack`]).
    pub(crate) fn stack(&self) -> &ExecutionStack {
        self.stack.get_or_init(|| {
            let scope = CallScope::new(&self.agent, &self.services, CallPurpose::Agent)
                .with_task(self.task_name.as_deref())
                .with_parent(self.event_id)
                .with_cancellation(self.cancellation.clone());
            ExecutionStack::over(self.llm.clone(), scope)
        })
    }

    /// `llm` under the run's layers for calls other code makes on this execution's behalf (a
    /// standalone kickoff's guardrail judge and converter): held to the same budget and rate
    /// limit, reported under the execution, counted in its usage.
    pub(crate) fn side_call(&self, llm: Arc<dyn Llm>, purpose: CallPurpose) -> Arc<dyn Llm> {
        llm_stack::stack(llm, Arc::new(self.stack().scope.derived(purpose)))
    }

    /// Usage of every call made so far (priced), the summaries and side calls included.
    pub(crate) fn usage(&self) -> Usage {
        self.stack
            .get()
            .map_or_else(Usage::default, |stack| stack.scope.spent())
    }

    pub(crate) fn tool_errors(&self) -> u32 {
        self.tool_errors.load(Ordering::SeqCst)
    }

    fn count_tool_error(&self) {
        self.tool_errors.fetch_add(1, Ordering::SeqCst);
    }

    /// What a failing tool does: the task's policy, else the agent's, else the crew's, else
    /// `warn`.
    pub(crate) fn tool_failure_policy(&self) -> ToolFailurePolicy {
        self.task_tool_failure_policy
            .or(self.agent.tool_failure_policy())
            .or(self.services.tool_failure_policy)
            .unwrap_or_default()
    }

    fn step_callback(&self) -> Option<&StepCallback> {
        self.agent
            .step_callback()
            .or(self.services.step_callback.as_ref())
    }

    /// Reports a step to the step callback; a panicking callback is counted on the run's bus,
    /// not fatal.
    pub(crate) fn report_step(&self, step: AgentStep) {
        if let Some(callback) = self.step_callback()
            && let Err(payload) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&step)))
        {
            self.report_panic(CaughtPanic::new(
                PanicSite::StepCallback,
                "step_callback",
                panic_message(payload.as_ref()),
            ));
        }
    }

    /// Counts a panic caught during this execution on the run's bus and emits it under the
    /// execution's event, with the agent and task it happened in.
    pub(crate) fn report_panic(&self, panic: CaughtPanic) {
        let panic = panic.in_task(Some(self.role()), self.task_name.as_deref());
        self.services.events.report_panic(self.event_id, panic);
    }

    /// A reporter for the hooks' caught panics.
    pub(crate) fn panic_reporter(&self) -> impl FnMut(CaughtPanic) + '_ {
        move |panic| self.report_panic(panic)
    }

    /// A short name of the work for errors: the task name, or the start of the prompt.
    pub(crate) fn work_label(&self, prompt: &str) -> String {
        match &self.task_name {
            Some(name) => name.clone(),
            None => {
                let mut label: String = prompt.trim().chars().take(60).collect();
                if prompt.trim().chars().count() > 60 {
                    label.push('…');
                }
                label
            }
        }
    }

    /// The names of the execution's tools, as its started event lists them.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tools.names().iter().map(|n| n.to_string()).collect()
    }

    /// The execution's completed event (`agent_execution_completed`, or
    /// `lite_agent_execution_completed` for a kickoff) under `parent`.
    pub(crate) fn emit_completed(&self, parent: Option<Uuid>, output: &str) {
        self.emit_end(parent, Ok(output));
    }

    /// The execution's error event (`agent_execution_error`, or `lite_agent_execution_error` for
    /// a kickoff) with the error's whole chain.
    pub(crate) fn emit_error(&self, error: &AgentError) {
        self.emit_end(self.event_id, Err(error));
    }

    fn emit_end(&self, parent: Option<Uuid>, end: Result<&str, &AgentError>) {
        let agent_role = self.role().to_string();
        let agent_id = self.agent.id().to_string();
        let task_name = self.task_name.clone();
        let kind = match (
            self.kind,
            end.map(str::to_string).map_err(|e| error_chain(e)),
        ) {
            (RunKind::Task, Ok(output)) => EventKind::AgentExecutionCompleted {
                agent_role,
                agent_id,
                task_name,
                output,
            },
            (RunKind::Task, Err(error)) => EventKind::AgentExecutionError {
                agent_role,
                agent_id,
                task_name,
                error,
            },
            (RunKind::Kickoff, Ok(output)) => EventKind::LiteAgentExecutionCompleted {
                agent_role,
                agent_id,
                output,
            },
            (RunKind::Kickoff, Err(error)) => EventKind::LiteAgentExecutionError {
                agent_role,
                agent_id,
                error,
            },
        };
        self.services.events.emit(parent, kind);
    }

    /// Runs the loop from `messages`, re-running after retryable errors up to `max_retry_limit`
    /// times, within the agent's deadline, and stopping when the run is cancelled. Every failed
    /// attempt emits an execution error event.
    pub(crate) async fn run(
        &self,
        messages: &[Message],
        work_label: &str,
    ) -> Result<LoopOutcome, AgentError> {
        let attempts = async {
            let mut retries = 0;
            loop {
                match self.run_loop(messages.to_vec()).await {
                    Ok(outcome) => return Ok(outcome),
                    Err(error) => {
                        self.emit_error(&error);
                        if !error.is_retryable() || retries >= self.agent.max_retry_limit() {
                            return Err(error);
                        }
                        retries += 1;
                        tracing::info!(
                            agent = self.role(),
                            retries,
                            error = crewai_llm::error_chain(&error),
                            "retrying the agent's work after an error"
                        );
                    }
                }
            }
        };
        let deadline = self
            .agent
            .max_execution_time()
            .or(self.services.default_timeout);
        let bounded = async {
            match deadline {
                Some(limit) => match tokio::time::timeout(limit, attempts).await {
                    Ok(result) => result,
                    Err(_) => {
                        let error = AgentError::Timeout {
                            role: self.role().to_string(),
                            task: work_label.to_string(),
                            after: limit,
                        };
                        self.emit_error(&error);
                        Err(error)
                    }
                },
                None => attempts.await,
            }
        };
        let result = tokio::select! {
            biased;
            _ = self.cancellation.cancelled() => Err(AgentError::Cancelled { role: self.role().to_string() }),
            result = bounded => result,
        };
        if result.is_err() {
            // Work this execution started (tool tasks) must not outlive a failed or cancelled run.
            self.cancellation.cancel();
        }
        result
    }
}
