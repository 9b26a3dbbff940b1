//! One tool call: lookup, argument repair and validation, hooks, usage limit, cache, the run itself,
//! events and the failure policy. Problems become the observation the model reads; only a tool
//! failure under `tool_failure_policy: raise` stops the run.

use crewai_llm::{ToolCall, error_chain};
use std::sync::Arc;

use crewai_tools::{
    EmbeddingLayer, ToolContext, ToolError, ToolFailurePolicy, ToolHandle, ToolReporter,
    prepare_arguments, usage_limit_message,
};
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use uuid::Uuid;

use super::Execution;
use crate::agent::AgentStep;
use crate::embedder_stack;
use crate::error::AgentError;
use crate::events::{CaughtPanic, EventKind, PanicSite, panic_message};
use crate::hooks::{CallOrigin, HookDecision, ToolCallContext, blocked_tool_result};
use crate::llm_stack::{CallPurpose, CallScope};
use crate::prompts::agent as prompts;

/// Tool calls of one response run at most this many at once (CrewAI's thread-pool size).
const MAX_PARALLEL_TOOL_CALLS: usize = 8;

impl Execution {
    /// The run's accounting for the embeddings a tool makes (the knowledge search tools), so
    /// they count in its usage and budget under this agent and task, as memory's do.
    fn embedding_layer(&self) -> EmbeddingLayer {
        let scope = Arc::new(
            CallScope::new(&self.agent, &self.services, CallPurpose::Knowledge)
                .with_task(self.task_name.as_deref())
                .with_parent(self.event_id)
                .with_cancellation(self.cancellation.clone()),
        );
        EmbeddingLayer::new(move |embedder| embedder_stack::metered(embedder, scope.clone()))
    }

    /// Makes what a tool reports from inside a call (a sandboxed execution) events under the
    /// call's own `tool_usage_started`, attributed to this agent and task.
    fn tool_reporter(&self, call_event: Uuid) -> ToolReporter {
        let events = self.services.events.clone();
        let agent_role = self.role().to_string();
        let task_name = self.task_name.clone();
        ToolReporter::new(move |report| {
            events.emit_with(Some(call_event), || {
                EventKind::from_tool_report(report, Some(agent_role.clone()), task_name.clone())
            });
        })
    }
}

/// What a tool call gives back to the loop.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCallResult {
    /// What the model reads.
    pub(crate) text: String,
    /// The tool ran, succeeded and has `result_as_answer`: its output ends the run.
    pub(crate) is_answer: bool,
}

impl Execution {
    /// Runs the calls of one native response; results come back in call order.
    pub(crate) async fn run_native_calls(
        &self,
        calls: &[ToolCall],
    ) -> Result<Vec<ToolCallResult>, AgentError> {
        // A tool whose result ends the run or whose uses are counted must see the calls one by one.
        let one_by_one = calls.len() < 2
            || calls.iter().any(|call| {
                self.tools
                    .find(&call.name)
                    .is_some_and(|tool| tool.result_as_answer() || tool.max_usage_count().is_some())
            });
        if one_by_one {
            let mut results = Vec::with_capacity(calls.len());
            for call in calls {
                results.push(self.run_tool(&call.name, &call.arguments, None).await?);
            }
            return Ok(results);
        }
        // Futures collected first: a closure inside the stream type would make this future
        // non-`Send` (rustc's higher-ranked lifetime limitation), and crews spawn task runs.
        let runs: Vec<_> = calls
            .iter()
            .map(|call| self.run_tool(&call.name, &call.arguments, None))
            .collect();
        futures::stream::iter(runs)
            .buffered(MAX_PARALLEL_TOOL_CALLS)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    fn tool_error_event(&self, tool_name: &str, tool_args: &Value, error: &str) {
        self.count_tool_error();
        self.services.events.emit(
            self.event_id,
            EventKind::ToolUsageError {
                tool_name: tool_name.to_string(),
                tool_args: tool_args.clone(),
                agent_role: Some(self.role().to_string()),
                task_name: self.task_name.clone(),
                error: error.to_string(),
            },
        );
    }

    /// Runs one call by the name and raw arguments the model gave.
    pub(crate) async fn run_tool(
        &self,
        name: &str,
        raw_arguments: &Value,
        thought: Option<&str>,
    ) -> Result<ToolCallResult, AgentError> {
        let refused = |text: String| ToolCallResult {
            text,
            is_answer: false,
        };
        let Some(tool) = self.tools.find(name) else {
            let text = self.tools.unknown_tool_message(name);
            self.tool_error_event(name, raw_arguments, &text);
            return Ok(refused(text));
        };
        let arguments = match prepare_arguments(&tool.parameters(), raw_arguments) {
            Ok(arguments) => arguments,
            Err(problem) => {
                let text = prompts::invalid_arguments(tool.name(), &error_chain(&problem));
                self.tool_error_event(tool.name(), raw_arguments, &text);
                return Ok(refused(text));
            }
        };

        let mut hook_ctx = ToolCallContext {
            tool_name: tool.name().to_string(),
            tool_input: arguments,
            origin: CallOrigin {
                agent_role: Some(self.role().to_string()),
                task_name: self.task_name.clone(),
                crew_name: self.services.crew_name.clone(),
            },
            tool_result: None,
        };
        let decision = self
            .hooks
            .run_before_reporting(&mut hook_ctx, &mut self.panic_reporter());
        let arguments = hook_ctx.tool_input.clone();
        let (mut text, succeeded) = match decision {
            HookDecision::Block { reason } => {
                (blocked_tool_result(tool.name(), reason.as_deref()), false)
            }
            HookDecision::Continue => self.invoke(tool, &arguments).await?,
        };
        hook_ctx.tool_result = Some(text.clone());
        if let Some(replaced) = self
            .hooks
            .run_after_reporting(&mut hook_ctx, &mut self.panic_reporter())
        {
            text = replaced;
        }
        self.report_step(AgentStep::ToolCall {
            tool: tool.name().to_string(),
            input: arguments,
            result: text.clone(),
            thought: thought.map(str::to_string),
        });
        Ok(ToolCallResult {
            is_answer: succeeded && tool.result_as_answer(),
            text,
        })
    }

    /// The usage limit, the cache and the run; returns the text and whether the tool succeeded.
    async fn invoke(
        &self,
        tool: &ToolHandle,
        arguments: &Value,
    ) -> Result<(String, bool), AgentError> {
        if let Some(limit) = tool.max_usage_count()
            && tool.current_usage_count() >= limit
        {
            return Ok((usage_limit_message(tool.name(), limit), false));
        }
        let cache = self
            .services
            .tool_cache
            .as_ref()
            .filter(|_| self.agent.cache());
        let started = |events: &crate::events::EventBus| {
            events.emit(
                self.event_id,
                EventKind::ToolUsageStarted {
                    tool_name: tool.name().to_string(),
                    tool_args: arguments.clone(),
                    agent_role: Some(self.role().to_string()),
                    task_name: self.task_name.clone(),
                },
            )
        };
        let finished = |output: &str, from_cache: bool| EventKind::ToolUsageFinished {
            tool_name: tool.name().to_string(),
            tool_args: arguments.clone(),
            agent_role: Some(self.role().to_string()),
            task_name: self.task_name.clone(),
            output: output.to_string(),
            from_cache,
        };
        if let Some(hit) = cache.and_then(|cache| cache.get_for(tool, arguments)) {
            let text = hit.to_text();
            started(&self.services.events);
            self.services
                .events
                .emit(self.event_id, finished(&text, true));
            return Ok((text, true));
        }
        // Claimed only now: a blocked, refused or cached call does not use up the tool.
        if let Err(limit) = tool.try_claim_use() {
            return Ok((limit.to_string(), false));
        }
        let started_id = started(&self.services.events);
        let context = ToolContext {
            agent_id: Some(self.agent.id().to_string()),
            agent_role: Some(self.role().to_string()),
            task_id: self.task_id.clone(),
            task_name: self.task_name.clone(),
            crew_id: self.services.crew_id.clone(),
            cancellation: self.cancellation.clone(),
            parent_event_id: Some(started_id.to_string()),
            embedding_layer: Some(self.embedding_layer()),
            reporter: Some(self.tool_reporter(started_id)),
        };
        // A tool is user code: a panic in an async tool is caught here (a `#[tool]` function's
        // is caught on the blocking pool) and becomes a tool failure the model reads.
        let run = std::panic::AssertUnwindSafe(tool.tool().run(arguments.clone(), &context))
            .catch_unwind()
            .await
            .unwrap_or_else(|payload| {
                Err(ToolError::Panicked {
                    tool: tool.name().to_string(),
                    message: panic_message(payload.as_ref()),
                })
            });
        match run {
            Ok(output) => {
                if let Some(cache) = cache {
                    cache.put_for(tool, arguments, &output);
                }
                let text = output.to_text();
                self.services
                    .events
                    .emit(self.event_id, finished(&text, false));
                Ok((text, true))
            }
            Err(error) => {
                if let ToolError::Panicked {
                    tool: name,
                    message,
                } = &error
                {
                    self.report_panic(CaughtPanic::new(PanicSite::Tool, name, message));
                }
                let message = error_chain(&error);
                self.tool_error_event(tool.name(), arguments, &message);
                match self.tool_failure_policy() {
                    ToolFailurePolicy::Raise => {
                        return Err(AgentError::ToolFailed {
                            role: self.role().to_string(),
                            tool: tool.name().to_string(),
                            source: error,
                        });
                    }
                    ToolFailurePolicy::Warn => {
                        tracing::warn!(agent = self.role(), tool = tool.name(), %message, "a tool failed; the model is told")
                    }
                    ToolFailurePolicy::Ignore => {}
                }
                Ok((prompts::tool_error(tool.name(), &message), false))
            }
        }
    }
}
