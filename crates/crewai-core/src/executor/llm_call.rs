//! One model call of an execution: rate limit, hooks, events, usage, streaming, structured-output
//! validation and context-window recovery.

use crewai_llm::{
    LlmError, LlmRequest, LlmResponse, Message, RateLimiter, ReplyShape, StreamEvent, ToolChoice,
    ToolDefinition, collect_stream,
};
use serde_json::Value;

use super::Execution;
use crate::error::AgentError;
use crate::events::{EventBus, EventKind};
use crate::hooks::{HookDecision, LlmCallContext};
use crate::usage::BudgetExceeded;

/// Summaries in a row before an overflow is given up on (each one should shrink the history a lot).
const MAX_SUMMARIES: u32 = 3;

/// Times a streamed call whose stream broke after it opened (cut short, garbled) is made again.
/// The LLM layer's retries only cover opening a stream; a non-streamed call's garbled reply is
/// retried there already.
const MAX_STREAM_RESTARTS: u32 = 2;

/// Who waits on a rate limiter, and where that is reported: a `rate_limit_wait_started` event
/// and, for a verbose agent, a line on standard output.
pub(crate) struct RateLimitWaiter<'a> {
    pub(crate) events: &'a EventBus,
    pub(crate) parent: Option<uuid::Uuid>,
    pub(crate) agent_role: &'a str,
    pub(crate) task_name: Option<&'a str>,
    pub(crate) verbose: bool,
}

impl RateLimitWaiter<'_> {
    /// Takes a request slot from `limiter`, announcing the wait before it starts.
    pub(crate) async fn acquire(&self, limiter: &RateLimiter) {
        let max_rpm = limiter.max_rpm();
        limiter
            .acquire_notifying(|wait| {
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                if self.verbose {
                    println!("{}", rate_limit_notice(self.agent_role, max_rpm, wait));
                }
                tracing::info!(
                    agent = self.agent_role,
                    wait_ms,
                    "max RPM reached; waiting for the rate limit"
                );
                self.events.emit(
                    self.parent,
                    EventKind::RateLimitWaitStarted {
                        agent_role: self.agent_role.to_string(),
                        task_name: self.task_name.map(str::to_string),
                        max_rpm,
                        wait_ms,
                    },
                );
            })
            .await;
    }
}

/// The verbose line of an agent held back by its requests-per-minute limit.
pub(crate) fn rate_limit_notice(
    agent_role: &str,
    max_rpm: Option<u32>,
    wait: std::time::Duration,
) -> String {
    let limit = max_rpm
        .map(|rpm| format!(" ({rpm} per minute)"))
        .unwrap_or_default();
    format!(
        "⏳ Agent {agent_role}: max RPM reached{limit}; waiting {:.1} s for the next request slot.",
        wait.as_secs_f64()
    )
}

/// Why a call produced no usable response.
#[derive(Debug)]
pub(crate) enum CallFailure {
    Llm(LlmError),
    /// A structured-output reply that is not JSON.
    NotJson(String),
    /// The call would go over the run's budget, so it was not made.
    Budget(BudgetExceeded),
}

/// What a call asks for besides the messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallShape<'a> {
    pub(crate) tools: &'a [ToolDefinition],
    pub(crate) stop: &'a [String],
    /// Send the execution's response format and insist on JSON back.
    pub(crate) structured: bool,
    /// Tool rounds done so far (shown to hooks).
    pub(crate) iterations: u32,
    /// The tools a ReAct reply may name: sent as a [`ReplyShape::React`] hint (not as native
    /// tools) so a provider that can constrain its decoding writes a parseable step.
    pub(crate) react_tools: &'a [ToolDefinition],
}

/// Parses a structured-output reply: bare JSON, optionally inside one code fence.
pub(crate) fn parse_structured(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    let body = match trimmed.strip_prefix("```") {
        Some(rest) => {
            let rest = rest.split_once('\n').map(|(_, body)| body).unwrap_or(rest);
            rest.trim_end().strip_suffix("```").unwrap_or(rest)
        }
        None => trimmed,
    };
    serde_json::from_str(body.trim()).map_err(|e| format!("the reply is not valid JSON ({e})"))
}

impl Execution {
    /// A model call with hooks and context-window recovery: the before-hooks may rewrite
    /// `messages` (kept for the rest of the run) or block; on a context-length error the history is
    /// summarised and the call made again (or, with `respect_context_window: false`, the error says
    /// how to fix it); a streamed reply that breaks midway is asked for again (a new call with its
    /// own events); the after-hooks may replace the reply text.
    pub(crate) async fn call_model(
        &self,
        messages: &mut Vec<Message>,
        shape: CallShape<'_>,
    ) -> Result<LlmResponse, AgentError> {
        let mut summaries = 0;
        let mut stream_restarts = 0;
        loop {
            let mut hook_ctx = LlmCallContext {
                messages: std::mem::take(messages),
                model: Some(self.llm.model().to_string()),
                agent_role: Some(self.role().to_string()),
                task_name: self.task_name.clone(),
                crew_name: self.services.crew_name.clone(),
                iterations: shape.iterations,
                response: None,
            };
            let decision = self
                .hooks
                .run_before_llm_reporting(&mut hook_ctx, &mut self.panic_reporter());
            *messages = std::mem::take(&mut hook_ctx.messages);
            if let HookDecision::Block { reason } = decision {
                return Err(AgentError::LlmCallBlocked {
                    role: self.role().to_string(),
                    reason,
                });
            }

            let mut request = LlmRequest::new(messages.clone()).with_tools(shape.tools.to_vec());
            if !shape.tools.is_empty() {
                request.options.tool_choice = Some(ToolChoice::Auto);
            }
            request.options.stop = shape.stop.to_vec();
            if shape.structured {
                request.response_format = self.response_format.clone();
            }
            if !shape.react_tools.is_empty() {
                request.reply_shape = Some(ReplyShape::React {
                    tools: shape.react_tools.to_vec(),
                });
            }

            match self.send(request).await {
                Ok(mut response) => {
                    hook_ctx.messages = messages.clone();
                    hook_ctx.response = response.content.clone();
                    if let Some(text) = self
                        .hooks
                        .run_after_llm_reporting(&mut hook_ctx, &mut self.panic_reporter())
                    {
                        response.content = Some(text);
                    }
                    return Ok(response);
                }
                Err(CallFailure::NotJson(message)) => {
                    let format = self
                        .response_format
                        .as_ref()
                        .map(|f| f.name.clone())
                        .unwrap_or_default();
                    return Err(AgentError::InvalidStructuredOutput {
                        role: self.role().to_string(),
                        format,
                        message,
                    });
                }
                Err(CallFailure::Llm(error)) if error.is_context_length() => {
                    if !self.agent.respect_context_window() {
                        return Err(self.context_error(error.to_string()));
                    }
                    if summaries >= MAX_SUMMARIES {
                        return Err(self.context_error(format!("still too long after summarising the history {MAX_SUMMARIES} times: {error}")));
                    }
                    summaries += 1;
                    tracing::info!(
                        agent = self.role(),
                        "the conversation outgrew the context window; summarising it"
                    );
                    self.summarize(messages).await?;
                }
                Err(CallFailure::Llm(error))
                    if self.services.stream
                        && stream_restarts < MAX_STREAM_RESTARTS
                        && matches!(error, LlmError::MalformedResponse { .. }) =>
                {
                    stream_restarts += 1;
                    tracing::warn!(agent = self.role(), %error, "the reply stream broke; making the call again");
                }
                Err(CallFailure::Llm(source)) => {
                    return Err(AgentError::Llm {
                        role: self.role().to_string(),
                        source,
                    });
                }
                Err(CallFailure::Budget(exceeded)) => return Err(self.budget_error(exceeded)),
            }
        }
    }

    pub(crate) fn budget_error(&self, exceeded: BudgetExceeded) -> AgentError {
        AgentError::BudgetExceeded {
            role: self.role().to_string(),
            exceeded: Box::new(exceeded),
        }
    }

    pub(crate) fn context_error(&self, message: String) -> AgentError {
        AgentError::ContextWindowExceeded {
            role: self.role().to_string(),
            model: self.llm.model().to_string(),
            message,
        }
    }

    /// Waits for the rate limit (the agent's own, else the crew's), saying so when it has to wait.
    async fn wait_for_rate_limit(&self) {
        let limiter = self
            .agent
            .config
            .rate_limiter
            .as_ref()
            .or(self.services.rate_limiter.as_ref());
        if let Some(limiter) = limiter {
            let waiting = RateLimitWaiter {
                events: &self.services.events,
                parent: self.event_id,
                agent_role: self.role(),
                task_name: self.task_name.as_deref(),
                verbose: self.agent.verbose(),
            };
            waiting.acquire(limiter).await;
        }
    }

    /// The bare call: rate limit, `llm_call_*` events, usage, streaming chunks, JSON check.
    pub(crate) async fn send(&self, request: LlmRequest) -> Result<LlmResponse, CallFailure> {
        let model = self.llm.model().to_string();
        self.services
            .usage
            .check_request(&model, &request)
            .map_err(CallFailure::Budget)?;
        self.wait_for_rate_limit().await;
        let call_id = uuid::Uuid::new_v4().to_string();
        let structured = request.response_format.is_some();
        // The conversation as JSON is the costliest payload of a call: built only if heard.
        self.services
            .events
            .emit_with(self.event_id, || EventKind::LlmCallStarted {
                call_id: call_id.clone(),
                model: model.clone(),
                agent_role: Some(self.role().to_string()),
                task_name: self.task_name.clone(),
                messages: serde_json::to_value(&request.messages).unwrap_or(Value::Null),
                tools: request.tools.iter().map(|t| t.name.clone()).collect(),
            });
        let result = if self.services.stream {
            match self.llm.stream(request).await {
                Ok(stream) => {
                    collect_stream(stream, |event| {
                        if let StreamEvent::TextDelta(chunk) = event {
                            self.services.events.emit(
                                self.event_id,
                                EventKind::LlmStreamChunk {
                                    call_id: call_id.clone(),
                                    agent_role: Some(self.role().to_string()),
                                    task_name: self.task_name.clone(),
                                    chunk: chunk.clone(),
                                },
                            );
                        }
                    })
                    .await
                }
                Err(error) => Err(error),
            }
        } else {
            self.llm.call(request).await
        };
        let failed = |error: String| EventKind::LlmCallFailed {
            call_id: call_id.clone(),
            model: model.clone(),
            agent_role: Some(self.role().to_string()),
            task_name: self.task_name.clone(),
            error,
        };
        let mut response = match result {
            Ok(response) => response,
            Err(error) => {
                self.services
                    .events
                    .emit(self.event_id, failed(error.to_string()));
                return Err(CallFailure::Llm(error));
            }
        };
        response.usage = self.record_usage(&response.usage);
        if structured && response.tool_calls.is_empty() {
            let text = response.content.clone().unwrap_or_default();
            if let Err(problem) = parse_structured(&text) {
                self.services
                    .events
                    .emit(self.event_id, failed(problem.clone()));
                return Err(CallFailure::NotJson(problem));
            }
        }
        self.services
            .events
            .emit_with(self.event_id, || EventKind::LlmCallCompleted {
                call_id,
                model,
                agent_role: Some(self.role().to_string()),
                task_name: self.task_name.clone(),
                response: if response.tool_calls.is_empty() {
                    Value::String(response.content.clone().unwrap_or_default())
                } else {
                    serde_json::to_value(&response.tool_calls).unwrap_or(Value::Null)
                },
                usage: response.usage,
            });
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_structured, rate_limit_notice};

    #[test]
    fn the_rate_limit_notice_names_the_agent_the_limit_and_the_wait() {
        let line = rate_limit_notice("Writer", Some(2), std::time::Duration::from_secs(30));
        assert!(
            line.contains("Writer")
                && line.contains("max RPM reached")
                && line.contains("2 per minute")
                && line.contains("waiting 30.0 s"),
            "{line}"
        );
        assert!(
            !rate_limit_notice("Writer", None, std::time::Duration::from_millis(1500))
                .contains("per minute")
        );
    }

    #[test]
    fn structured_replies_may_be_fenced_but_must_be_json() {
        assert_eq!(parse_structured("{\"score\":4}").unwrap()["score"], 4);
        assert_eq!(
            parse_structured("```json\n{\"score\": 4}\n```").unwrap()["score"],
            4
        );
        assert!(
            parse_structured(
                "Thought: I now can give a great answer\nFinal Answer: {\"score\": 4}"
            )
            .is_err()
        );
    }
}
