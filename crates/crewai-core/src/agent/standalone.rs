//! [`Agent::kickoff`]: the agent on its own, outside a crew (CrewAI's LiteAgent), with its
//! guardrail and an optional structured answer.

use crewai_llm::{LlmError, Message, ResponseFormat};
use crewai_tools::ToolSet;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentOutput, KickoffInput, RunServices};
use crate::converter::{ConversionError, OutputSchema};
use crate::error::AgentError;
use crate::events::{ConsoleListener, EventBus, EventKind};
use crate::executor::{Execution, LoopMode, LoopOutcome, RunKind};
use crate::guardrail::GuardrailContext;
use crate::kickoff::KickoffOptions;
use crate::llm_stack::CallPurpose;
use crate::prompts::agent as agent_prompts;
use crate::usage::UsageTracker;

impl Agent {
    /// Runs the agent on its own (CrewAI's `Agent.kickoff` / LiteAgent) with its own tools, hooks and
    /// event bus, applying its guardrail.
    pub async fn kickoff(&self, input: impl Into<KickoffInput>) -> Result<AgentOutput, AgentError> {
        self.kickoff_with(input, KickoffOptions::default()).await
    }

    /// [`Agent::kickoff`] asking for structured output: without tools the first call already asks the
    /// provider for the schema; with tools the final answer is parsed (or converted by one more call).
    pub async fn kickoff_with_format(
        &self,
        input: impl Into<KickoffInput>,
        format: ResponseFormat,
    ) -> Result<AgentOutput, AgentError> {
        self.kickoff_with(input, KickoffOptions::new().response_format(format))
            .await
    }

    /// A standalone run's services: the bus it is given, else the agent's bus, else a fresh one
    /// that prints to the console when the agent is verbose; a cancellation and a usage ledger
    /// of an enclosing run replace the run's own.
    fn kickoff_services(
        &self,
        events: Option<EventBus>,
        cancellation: Option<CancellationToken>,
        usage: Option<UsageTracker>,
    ) -> RunServices {
        let events = match events.or_else(|| self.config.event_bus.clone()) {
            Some(bus) => bus,
            None => {
                let bus = EventBus::new();
                if self.verbose() {
                    ConsoleListener::stdout().attach(&bus);
                }
                bus
            }
        };
        RunServices {
            events,
            cancellation: cancellation.unwrap_or_default(),
            usage: usage.unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The general kickoff (see [`KickoffOptions`]: the bus, cancellation, usage ledger, parent
    /// event and response format; a `run_id` is refused, as an agent's kickoff is not
    /// journaled).
    pub async fn kickoff_with(
        &self,
        input: impl Into<KickoffInput>,
        options: KickoffOptions,
    ) -> Result<AgentOutput, AgentError> {
        let input = input.into();
        if self.knowledge().is_some() {
            return Err(AgentError::Config {
                role: Some(self.role().to_string()),
                message: "an agent's own knowledge works in crews (and `run_task`) only: a \
                          standalone kickoff does not ingest or search it yet (crewai-core \
                          agent.rs kickoff_with); run it in a crew, or build the agent without \
                          `knowledge`"
                    .to_string(),
            });
        }
        if self.memory().is_some() {
            return Err(AgentError::Config {
                role: Some(self.role().to_string()),
                message:
                    "an agent's own memory works in crews (and `run_task`) only: a standalone \
                          kickoff does not recall or save yet (crewai-core agent.rs kickoff_with); \
                          run it in a crew, or build the agent without `memory`"
                        .to_string(),
            });
        }
        if let Some(message) = options.refused_by_an_agent() {
            return Err(AgentError::Config {
                role: Some(self.role().to_string()),
                message,
            });
        }
        let KickoffOptions {
            parent_event_id,
            cancellation,
            usage,
            events,
            response_format: format,
            run_id: _,
            // Only `Crew::train` sets it, for its own kickoffs.
            training: _,
        } = options;
        let services = self.kickoff_services(events, cancellation, usage);
        // The run's MCP sessions end with it: dropping the services kills and reaps them.
        let tools = self
            .with_outside_tools(
                ToolSet::from(self.tools().to_vec()),
                &services,
                None,
                parent_event_id,
            )
            .await?;
        let mut execution = self
            .execution(services, tools, RunKind::Kickoff, parent_event_id, None)
            .await?;
        let input = match (&input, &format) {
            (KickoffInput::Text(text), Some(format)) => KickoffInput::Text(format!(
                "{text}{}",
                agent_prompts::kickoff_format_hint(&schema_fields(&format.schema))
            )),
            _ => input,
        };
        if execution.mode == LoopMode::Direct {
            execution.response_format = format.clone();
        }
        let events = execution.services.events.clone();
        let started = events.emit(
            parent_event_id,
            EventKind::LiteAgentExecutionStarted {
                agent_role: self.role().to_string(),
                agent_id: self.id().to_string(),
                tools: execution.tool_names(),
                messages: serde_json::to_value(match &input {
                    KickoffInput::Text(text) => vec![Message::user(text.clone())],
                    KickoffInput::Messages(messages) => messages.clone(),
                })
                .unwrap_or(Value::Null),
            },
        );
        execution.event_id = Some(started);
        let request_text = match &input {
            KickoffInput::Text(text) => text.clone(),
            KickoffInput::Messages(messages) => messages
                .iter()
                .filter(|m| m.role == crewai_llm::Role::User)
                .map(Message::text)
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let label = execution.work_label(&request_text);
        let mut outcome = execution
            .run(&execution.opening_messages(&input), &label)
            .await?;
        let mut typed = self
            .structured_value(&execution, &outcome, format.as_ref())
            .await?;

        let mut retries = 0;
        if let Some(guardrail) = self.guardrail() {
            loop {
                let mut checked = crate::output::TaskOutput::new(
                    request_text.clone(),
                    String::new(),
                    outcome.output.clone(),
                    self.role(),
                );
                checked.pydantic = typed.clone();
                // The judge's call goes through the run's stack like the agent's own calls:
                // the same budget, rate limit, hooks and layers, counted in this kickoff's usage.
                let judge_llm = execution.side_call(
                    guardrail
                        .judge_llm()
                        .cloned()
                        .unwrap_or_else(|| execution.llm.clone()),
                    CallPurpose::Guardrail,
                );
                let judged = guardrail.judged_by(judge_llm.clone());
                let ctx = GuardrailContext {
                    llm: Some(&judge_llm),
                    events: &events,
                    parent_event_id: Some(started),
                    retry_count: retries,
                    agent_role: Some(self.role()),
                    task_name: None,
                };
                let verdict =
                    judged
                        .evaluate(&checked, ctx)
                        .await
                        .map_err(|e| match e.llm_error() {
                            Some(LlmError::BudgetExceeded(exceeded)) => {
                                execution.budget_error((**exceeded).clone())
                            }
                            _ => AgentError::Guardrail {
                                role: self.role().to_string(),
                                source: Box::new(e),
                            },
                        })?;
                match verdict.outcome {
                    Ok(pass) => {
                        pass.apply(&mut checked);
                        outcome.output = checked.raw;
                        typed = checked.pydantic;
                        break;
                    }
                    Err(feedback) => {
                        if retries >= self.guardrail_max_retries() {
                            let error = AgentError::GuardrailFailed {
                                role: self.role().to_string(),
                                retries,
                                last_error: feedback,
                            };
                            execution.emit_error(&error);
                            return Err(error);
                        }
                        retries += 1;
                        let mut messages = outcome.messages;
                        messages.push(Message::user(agent_prompts::guardrail_feedback(&feedback)));
                        outcome = execution.run(&messages, &label).await?;
                        typed = self
                            .structured_value(&execution, &outcome, format.as_ref())
                            .await?;
                    }
                }
            }
        }

        execution.emit_completed(parent_event_id, &outcome.output);
        Ok(AgentOutput {
            raw: outcome.output,
            typed,
            agent_role: self.role().to_string(),
            messages: outcome.messages,
            usage: execution.usage(),
        })
    }

    /// The kickoff's typed value: the direct loop's parsed reply, or the tool loops' answer parsed
    /// (and, when it is prose, converted by one more call).
    async fn structured_value(
        &self,
        execution: &Execution,
        outcome: &LoopOutcome,
        format: Option<&ResponseFormat>,
    ) -> Result<Option<Value>, AgentError> {
        let Some(format) = format else {
            return Ok(None);
        };
        if outcome.typed.is_some() {
            return Ok(outcome.typed.clone());
        }
        let schema = OutputSchema::json(format.schema.clone());
        if let Ok(value) = schema.parse_lenient(&outcome.output) {
            return Ok(Some(value));
        }
        let converter = execution.side_call(execution.llm.clone(), CallPurpose::Conversion);
        let (value, _usage) = schema
            .convert_with_llm(converter.as_ref(), &outcome.output, 1)
            .await
            .map_err(|e| match e {
                ConversionError::Llm(LlmError::BudgetExceeded(exceeded)) => {
                    execution.budget_error(*exceeded)
                }
                e => AgentError::InvalidStructuredOutput {
                    role: self.role().to_string(),
                    format: format.name.clone(),
                    source: Box::new(e),
                },
            })?;
        Ok(Some(value))
    }
}

/// The top-level property names of an object schema.
fn schema_fields(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}
