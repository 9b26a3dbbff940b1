//! Running tasks: one task through its agent with structured output, guardrails, human feedback,
//! callbacks and its output file ([`execute_task`]); the delegation runner that lets an agent
//! hand work to a coworker; the hierarchical manager ([`hierarchical`]); and the consensual
//! panel ([`consensual`]).

pub mod consensual;
pub mod hierarchical;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use crewai_llm::{Llm, LlmError};
use crewai_tools::{ToolContext, ToolFailurePolicy, ToolHandle, ToolSet};
use uuid::Uuid;

use crate::agent::{Agent, AgentTaskRequest, AgentTaskResult, RunServices};
use crate::converter::ConversionError;
use crate::delegation::{CoworkerRunner, DelegationRequest, DelegationScope};
use crate::error::AgentError;
use crate::events::{CaughtPanic, EventKind, PanicSite, panic_message};
use crate::guardrail::{GuardrailContext, GuardrailPass};
use crate::llm_stack::{self, CallPurpose, CallScope};
use crate::output::{OutputFormat, TaskOutput};
use crate::prompts::crew as prompts;
use crate::task::{ConsoleInputProvider, InputProvider, Task, TaskCallback, TaskError};

/// What every task of one kickoff shares: the agent run services (events, hooks, usage, limits,
/// cache), the crew's agents (for delegation), and the crew-level task settings.
#[derive(Clone)]
pub struct RunContext {
    pub services: RunServices,
    /// All agents of the crew, in crew order (the coworkers delegation may reach).
    pub agents: Vec<Agent>,
    pub task_callback: Option<TaskCallback>,
    pub input_provider: Arc<dyn InputProvider>,
    /// The deadline of a task whose agent has no `max_execution_time`.
    pub task_timeout: Option<Duration>,
    /// Set by `Crew::train`: one round of human feedback per task, kept in the training log.
    pub(crate) training: Option<crate::training::TrainingRun>,
}

impl RunContext {
    /// A context for a task run outside any crew.
    pub fn standalone() -> Self {
        RunContext {
            services: RunServices::default(),
            agents: Vec::new(),
            task_callback: None,
            input_provider: Arc::new(ConsoleInputProvider),
            task_timeout: None,
            training: None,
        }
    }

    /// The deadline for a task run by `agent`.
    pub fn deadline_for(&self, agent: &Agent) -> Option<Duration> {
        agent.max_execution_time().or(self.task_timeout)
    }

    /// The delegation tools `agent` gets in this run, if it may delegate and has coworkers.
    /// `coworkers` are the candidates; the agent itself is never one of them.
    pub fn delegation_tools(
        &self,
        agent: &Agent,
        coworkers: &[Agent],
        from: DelegatedFrom,
        parent: Option<Uuid>,
    ) -> Vec<ToolHandle> {
        let others: Vec<Agent> = coworkers
            .iter()
            .filter(|c| c.role() != agent.role())
            .cloned()
            .collect();
        let chain = self.services.delegation.extended(agent.role());
        // Tools that could only be refused are not offered; the others stay reachable so that a
        // model naming an agent up the chain is told why it cannot.
        if others
            .iter()
            .all(|c| chain.chain.iter().any(|on| on == c.role()))
        {
            return Vec::new();
        }
        DelegationScope {
            coworkers: others.iter().map(|a| a.role().to_string()).collect(),
            chain: chain.chain.clone(),
            max_depth: chain.max_depth,
            runner: Arc::new(CrewCoworkers {
                run: self.clone(),
                coworkers: others,
                from,
                parent,
            }),
        }
        .tools()
    }
}

/// What work delegated during a task inherits from that task.
#[derive(Clone, Default)]
pub struct DelegatedFrom {
    /// The task's name: the coworker's usage counts toward it.
    pub task_name: Option<String>,
    /// The task's own tools, given to the coworker instead of its own (a hierarchical crew's
    /// manager has only delegation tools, so the task's tools go to whoever does the work).
    pub task_tools: Vec<ToolHandle>,
    /// The task's tool failure policy: the coworker's tools fail the way the task asks.
    pub tool_failure_policy: Option<ToolFailurePolicy>,
}

impl DelegatedFrom {
    /// Work delegated during `task`, with `task_tools` for the coworker (empty: its own).
    pub fn task(task: &Task, task_tools: Vec<ToolHandle>) -> Self {
        DelegatedFrom {
            task_name: task.name().map(str::to_string),
            task_tools,
            tool_failure_policy: task.tool_failure_policy(),
        }
    }
}

/// Merges tool lists by sanitised name (later ones replace earlier ones), as CrewAI does.
pub fn merge_tools(base: Vec<ToolHandle>, extra: Vec<ToolHandle>) -> Vec<ToolHandle> {
    let mut set = ToolSet::from(base);
    for tool in extra {
        set.replace(tool);
    }
    set.to_vec()
}

/// Runs one task with `agent`: emits `task_started`, runs the agent (within the deadline), shapes
/// structured output, applies guardrails and human feedback, calls the callbacks, writes the
/// output file, and emits `task_completed` or `task_failed`.
pub async fn execute_task(
    run: &RunContext,
    task: &Task,
    agent: &Agent,
    context: Option<String>,
    tools: Vec<ToolHandle>,
    parent: Option<Uuid>,
) -> Result<TaskOutput, TaskError> {
    let started = run.services.events.emit(
        parent,
        EventKind::TaskStarted {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: Some(agent.role().to_string()),
            context: context.clone(),
        },
    );
    let task_run = TaskRun {
        run,
        task,
        agent,
        tools,
        started,
        consensus: None,
    };
    let work = task_run.steps(context);
    let result = match run.deadline_for(agent) {
        Some(limit) => match tokio::time::timeout(limit, work).await {
            Ok(result) => result,
            Err(_) => Err(TaskError::Timeout {
                task: task.key(),
                agent: agent.role().to_string(),
                after: limit,
            }),
        },
        None => work.await,
    };
    let kind = match &result {
        Ok(output) => EventKind::TaskCompleted {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: Some(agent.role().to_string()),
            output: output.raw.clone(),
        },
        Err(error) => EventKind::TaskFailed {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: Some(agent.role().to_string()),
            error: crewai_llm::error_chain(error),
        },
    };
    run.services.events.emit(Some(started), kind);
    result
}

/// One task's run by its agent: what its steps share.
struct TaskRun<'a> {
    run: &'a RunContext,
    task: &'a Task,
    agent: &'a Agent,
    tools: Vec<ToolHandle>,
    /// The `task_started` event: the parent of the run's events.
    started: Uuid,
    /// A consensual task's record, kept on every output this run makes.
    consensus: Option<&'a crate::consensus::ConsensusRecord>,
}

impl TaskRun<'_> {
    /// The agent's attempts (again after human feedback and failed guardrails), the callbacks and
    /// the output file.
    async fn steps(&self, context: Option<String>) -> Result<TaskOutput, TaskError> {
        let output = self.attempt(context.clone()).await?;
        self.finish(output, context).await
    }

    /// What follows a task's first answer `output`: human feedback and guardrails (each retry
    /// an attempt by this run's agent), the callbacks and the output file.
    async fn finish(
        &self,
        mut output: TaskOutput,
        context: Option<String>,
    ) -> Result<TaskOutput, TaskError> {
        let (run, task, agent, started) = (self.run, self.task, self.agent, self.started);
        let attempt = |extra: Option<String>| {
            let context = match (&context, extra) {
                (Some(base), Some(extra)) => {
                    Some(prompts::join_context([base.as_str(), extra.as_str()]))
                }
                (base, extra) => extra.or_else(|| base.clone()),
            };
            self.attempt(context)
        };

        if let (true, Some(training)) = (task.human_input(), &run.training) {
            // Training: one round of feedback, and the iteration kept (CrewAI's training mode).
            let question = prompts::human_feedback_request(task.description(), &output.raw);
            let feedback = run.input_provider.ask(&question).await.map_err(|source| {
                TaskError::HumanInput {
                    task: task.key(),
                    source,
                }
            })?;
            let initial_output = output.raw.clone();
            if !feedback.trim().is_empty() {
                output = attempt(Some(prompts::human_feedback_context(
                    feedback.trim(),
                    &output.raw,
                )))
                .await?;
            }
            let example = crate::training::TrainingExample {
                iteration: training.iteration,
                agent_role: agent.role().to_string(),
                task: task.key(),
                initial_output,
                human_feedback: feedback.trim().to_string(),
                improved_output: output.raw.clone(),
            };
            training
                .record(example)
                .await
                .map_err(|source| TaskError::TrainingLog {
                    task: task.key(),
                    source,
                })?;
        } else if task.human_input() {
            loop {
                let question = prompts::human_feedback_request(task.description(), &output.raw);
                let feedback = run.input_provider.ask(&question).await.map_err(|source| {
                    TaskError::HumanInput {
                        task: task.key(),
                        source,
                    }
                })?;
                if feedback.trim().is_empty() {
                    break;
                }
                output = attempt(Some(prompts::human_feedback_context(
                    feedback.trim(),
                    &output.raw,
                )))
                .await?;
            }
        }

        let several = task.guardrails().len() > 1;
        for (index, guardrail) in task.guardrails().iter().enumerate() {
            let mut retries = 0;
            loop {
                // The judge (the guardrail's own model, else the agent's) is a side call of the task.
                let judge_llm = guardrail
                    .judge_llm()
                    .cloned()
                    .or_else(|| agent.llm().ok())
                    .map(|llm| self.side_call(llm, CallPurpose::Guardrail));
                let guardrail = match &judge_llm {
                    Some(llm) if guardrail.is_llm() => guardrail.judged_by(llm.clone()),
                    _ => guardrail.clone(),
                };
                let ctx = GuardrailContext {
                    llm: judge_llm.as_ref(),
                    events: &run.services.events,
                    parent_event_id: Some(started),
                    retry_count: retries,
                    agent_role: Some(agent.role()),
                    task_name: task.name(),
                };
                let verdict = guardrail.evaluate(&output, ctx).await.map_err(|e| {
                    e.llm_error()
                        .and_then(|error| self.budget_stop(error))
                        .unwrap_or_else(|| TaskError::Guardrail {
                            task: task.key(),
                            source: Box::new(e),
                        })
                })?;
                match verdict.outcome {
                    Ok(pass) => {
                        let replaced_raw = matches!(pass, GuardrailPass::Raw(_));
                        pass.apply(&mut output);
                        // A replaced text is exported again, as CrewAI does, so the structured value matches it.
                        if let (true, Some(schema)) = (replaced_raw, task.output_schema())
                            && let Ok(value) = schema.parse_lenient(&output.raw)
                        {
                            output.set_structured(schema.format(), value);
                        }
                        break;
                    }
                    Err(feedback) => {
                        if retries >= task.guardrail_max_retries() {
                            let label = if several {
                                format!("guardrail {index}")
                            } else {
                                format!("guardrail '{}'", guardrail.name())
                            };
                            return Err(TaskError::GuardrailFailed {
                                task: task.key(),
                                guardrail: label,
                                retries,
                                last_error: feedback,
                            });
                        }
                        retries += 1;
                        output = attempt(Some(prompts::guardrail_retry_context(
                            &feedback,
                            &output.raw,
                        )))
                        .await?;
                    }
                }
            }
        }

        for callback in [task.callback(), run.task_callback.as_ref()]
            .into_iter()
            .flatten()
        {
            // User code: a panicking callback keeps the task's output and is counted on the bus.
            if let Err(payload) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&output)))
            {
                let panic = CaughtPanic::new(
                    PanicSite::TaskCallback,
                    task.key(),
                    panic_message(payload.as_ref()),
                )
                .in_task(Some(agent.role()), task.name());
                run.services.events.report_panic(Some(started), panic);
            }
        }
        write_output_file(task, &output).await?;
        Ok(output)
    }

    /// One agent run for the task, and the structured output made from its answer.
    async fn attempt(&self, context: Option<String>) -> Result<TaskOutput, TaskError> {
        let (run, task, agent, tools) = (self.run, self.task, self.agent, &self.tools);
        let schema = task.output_schema();
        // Native structured output only without tools: a tool-calling turn cannot also be held to a format.
        let native = schema.filter(|_| tools.is_empty());
        let mut request = AgentTaskRequest::new(task.prompt())
            .with_tools(tools.clone())
            .with_parent_event(self.started)
            .with_services(run.services.clone());
        request.context = context;
        request.task_name = task.name().map(str::to_string);
        request.task_id = Some(task.id().to_string());
        request.tool_failure_policy = task.tool_failure_policy();
        if let Some(schema) = native {
            request = request.with_response_format(schema.response_format());
        }
        let result: AgentTaskResult = agent
            .run_task(request)
            .await
            .map_err(|source| self.agent_failed(source))?;
        self.shape(result).await
    }

    /// The task's output from an answer of this run's agent: the text, and the structured
    /// value made from it when the task has a schema (the typed reply, else JSON in the text,
    /// else a conversion call).
    async fn shape(&self, result: AgentTaskResult) -> Result<TaskOutput, TaskError> {
        let (task, agent) = (self.task, self.agent);
        let schema = task.output_schema();
        let mut output = TaskOutput::new(
            task.description(),
            task.expected_output(),
            result.raw.clone(),
            agent.role(),
        );
        output.name = task.name().map(str::to_string);
        output.messages = result.messages;
        output.consensus = self.consensus.cloned();
        let Some(schema) = schema else {
            return Ok(output);
        };
        output.output_format = schema.format();
        let conversion_failed = |source| TaskError::Conversion {
            task: task.key(),
            source: Box::new(source),
            raw: result.raw.clone(),
        };

        let value = match result
            .typed
            .as_ref()
            .map(|typed| schema.validate(typed).map(|_| typed.clone()))
        {
            Some(Ok(value)) => value,
            _ => match schema.parse_lenient(&result.raw) {
                Ok(value) => value,
                Err(_) => {
                    let llm = agent
                        .function_calling_llm()
                        .cloned()
                        .map(Ok)
                        .unwrap_or_else(|| agent.llm())
                        .map_err(|source| self.agent_failed(source))?;
                    let converter = self.side_call(llm, CallPurpose::Conversion);
                    let (value, _usage) = schema
                        .convert_with_llm(
                            converter.as_ref(),
                            &result.raw,
                            agent.max_retry_limit() + 1,
                        )
                        .await
                        .map_err(|source| match &source {
                            ConversionError::Llm(error) => self
                                .budget_stop(error)
                                .unwrap_or_else(|| conversion_failed(source)),
                            _ => conversion_failed(source),
                        })?;
                    value
                }
            },
        };
        output.set_structured(schema.format(), value);
        Ok(output)
    }

    /// `llm` for a model call the task layer makes itself (structured-output conversion, an LLM
    /// guardrail's judge): under the run's layers like the agent's own calls (hooks, the user's
    /// layers, the budget, the agent's or else the crew's rate limit, `llm_call_*` events under
    /// the task, the run's usage).
    fn side_call(&self, llm: Arc<dyn Llm>, purpose: CallPurpose) -> Arc<dyn Llm> {
        let scope = CallScope::new(self.agent, &self.run.services, purpose)
            .with_task(self.task.name())
            .with_parent(Some(self.started));
        llm_stack::stack(llm, Arc::new(scope))
    }

    /// The task's error when a side call was refused by the budget: the same typed stop as when
    /// one of the agent's own calls is refused, so the crew keeps its finished outputs.
    fn budget_stop(&self, error: &LlmError) -> Option<TaskError> {
        let LlmError::BudgetExceeded(exceeded) = error else {
            return None;
        };
        Some(self.agent_failed(AgentError::BudgetExceeded {
            role: self.agent.role().to_string(),
            exceeded: exceeded.clone(),
        }))
    }

    fn agent_failed(&self, source: AgentError) -> TaskError {
        TaskError::Agent {
            task: self.task.key(),
            source: Box::new(source),
        }
    }
}

/// Who works a task: one agent with its tools, or a consensual crew's panel of voters.
#[derive(Clone)]
pub enum TaskWorker {
    Agent {
        agent: Agent,
        tools: Vec<ToolHandle>,
    },
    Panel(consensual::Panel),
}

impl TaskWorker {
    /// Runs `task` with this worker (see [`execute_task`] and
    /// [`consensual::execute_consensual_task`]).
    pub async fn execute(
        &self,
        run: &RunContext,
        task: &Task,
        context: Option<String>,
        parent: Option<Uuid>,
    ) -> Result<TaskOutput, TaskError> {
        match self {
            TaskWorker::Agent { agent, tools } => {
                execute_task(run, task, agent, context, tools.clone(), parent).await
            }
            TaskWorker::Panel(panel) => {
                consensual::execute_consensual_task(run, task, panel, context, parent).await
            }
        }
    }
}

/// Writes the output where `output_file` says: the JSON object indented, the typed value compact,
/// otherwise the raw text (CrewAI's choices).
async fn write_output_file(task: &Task, output: &TaskOutput) -> Result<(), TaskError> {
    let Some(file) = task.output_file() else {
        return Ok(());
    };
    let path = PathBuf::from(file);
    let failed = |source: std::io::Error| TaskError::OutputFile {
        task: task.key(),
        path: path.clone(),
        source,
    };
    let text = match (output.output_format, &output.json_dict, &output.pydantic) {
        (OutputFormat::Json, Some(value), _) => {
            serde_json::to_string_pretty(value).map_err(|e| failed(e.into()))?
        }
        (OutputFormat::Pydantic, _, Some(value)) => value.to_string(),
        _ => output.raw.clone(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if task.create_directory() {
            tokio::fs::create_dir_all(dir).await.map_err(failed)?;
        } else if !dir.exists() {
            return Err(failed(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "the directory {} does not exist and create_directory is false",
                    dir.display()
                ),
            )));
        }
    }
    tokio::fs::write(&path, text).await.map_err(failed)
}

/// Runs delegated work on a coworker within the crew's run.
struct CrewCoworkers {
    run: RunContext,
    coworkers: Vec<Agent>,
    from: DelegatedFrom,
    parent: Option<Uuid>,
}

#[async_trait]
impl CoworkerRunner for CrewCoworkers {
    async fn run_coworker(
        &self,
        request: DelegationRequest,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let coworker = self
            .coworkers
            .iter()
            .find(|a| a.role() == request.coworker)
            .ok_or_else(|| format!("no coworker '{}' in this crew", request.coworker))?;
        let from = request.chain.last().cloned().unwrap_or_default();
        let events = &self.run.services.events;
        // Under the tool call that asked for it, when the executor says which one it was.
        let parent = ctx
            .parent_event_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
            .or(self.parent);
        let delegation = events.emit(
            parent,
            EventKind::AgentDelegationStarted {
                from_agent: from.clone(),
                to_agent: coworker.role().to_string(),
                kind: request.kind.as_str().into(),
                task: request.work.clone(),
            },
        );

        // One level down the chain: the coworker may delegate on only to agents not yet on it.
        let mut run = self.run.clone();
        run.services.delegation.chain = request.chain.clone();
        let onward = DelegatedFrom {
            task_tools: Vec::new(),
            ..self.from.clone()
        };
        let tools = if coworker.allow_delegation() {
            run.delegation_tools(coworker, &run.agents.clone(), onward, Some(delegation))
        } else {
            Vec::new()
        };
        let own = if self.from.task_tools.is_empty() {
            coworker.tools().to_vec()
        } else {
            self.from.task_tools.clone()
        };
        let tools = merge_tools(own, tools);

        let mut task_request = AgentTaskRequest::new(crate::prompts::agent::task_prompt(
            &request.work,
            prompts::DELEGATED_EXPECTED_OUTPUT,
        ))
        .with_tools(tools)
        .with_parent_event(delegation)
        .with_services(run.services.clone());
        task_request.task_name = self.from.task_name.clone();
        task_request.tool_failure_policy = self.from.tool_failure_policy;
        if !request.context.trim().is_empty() {
            task_request = task_request.with_context(request.context.clone());
        }
        let work = coworker.run_task(task_request);
        let result = match run.deadline_for(coworker) {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .map_err(|_| format!("no answer within {}s", limit.as_secs_f64()))?,
            None => work.await,
        };
        // The delegating agent reads the whole chain as the tool's observation.
        let answer = result
            .map(|r| r.raw)
            .map_err(|e| crewai_llm::error_chain(&e));
        events.emit(
            Some(delegation),
            EventKind::AgentDelegationCompleted {
                from_agent: from,
                to_agent: coworker.role().to_string(),
                kind: request.kind.as_str().into(),
                output: answer.clone().unwrap_or_else(|e| e.clone()),
            },
        );
        answer
    }
}
