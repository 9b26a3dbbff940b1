//! One model call of an execution: the request, its way through the execution's model stack
//! (hooks, budget, rate limit, events and usage are layers there, see [`crate::llm_stack`]),
//! the failures the agent reacts to, streaming, and context-window recovery.

use crewai_llm::{
    LlmError, LlmRequest, LlmResponse, Message, RateLimiter, ReplyShape, ToolChoice,
    ToolDefinition, collect_stream,
};
use serde_json::Value;

use super::Execution;
use crate::error::AgentError;
use crate::events::{EventBus, EventKind};
use crate::hooks::BLOCKED_BY_HOOK;
use crate::usage::BudgetExceeded;

/// Summaries in a row before an overflow is given up on (each one should shrink the history a lot).
const MAX_SUMMARIES: u32 = 3;

/// Times a streamed call whose stream broke after it opened (cut short, garbled) is made again.
/// The LLM layer's retries only cover opening a stream; a non-streamed call's garbled reply is
/// retried there already.
const MAX_STREAM_RESTARTS: u32 = 2;

/// Who waits on a rate limiter, and where that is reported: a `rate_limit_wait_started` event
/// (the verbose console shows it, see [`crate::events::ConsoleListener`]) and a tracing line.
pub(crate) struct RateLimitWaiter<'a> {
    pub(crate) events: &'a EventBus,
    pub(crate) parent: Option<uuid::Uuid>,
    pub(crate) agent_role: &'a str,
    pub(crate) task_name: Option<&'a str>,
}

impl RateLimitWaiter<'_> {
    /// Takes a request slot from `limiter`, announcing the wait before it starts.
    pub(crate) async fn acquire(&self, limiter: &RateLimiter) {
        let max_rpm = limiter.max_rpm();
        limiter
            .acquire_notifying(|wait| {
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
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

/// Why a call produced no usable response.
#[derive(Debug)]
pub(crate) enum CallFailure {
    Llm(LlmError),
    /// A structured-output reply that is not JSON.
    NotJson(String),
    /// The call would go over the run's budget, so it was not made.
    Budget(BudgetExceeded),
    /// A before-LLM hook blocked the call (with its reason, when it gave one).
    Blocked(Option<String>),
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

impl From<LlmError> for CallFailure {
    /// The refusals and replies the run's layers report as errors, told apart by type.
    fn from(error: LlmError) -> Self {
        match error {
            LlmError::BudgetExceeded(exceeded) => CallFailure::Budget(*exceeded),
            LlmError::InvalidStructuredReply { message, .. } => CallFailure::NotJson(message),
            LlmError::Blocked { by, reason } if by == BLOCKED_BY_HOOK => {
                CallFailure::Blocked(reason)
            }
            other => CallFailure::Llm(other),
        }
    }
}

impl Execution {
    /// A model call with context-window recovery: on a context-length error the history is
    /// summarised and the call made again (or, with `respect_context_window: false`, the error
    /// says how to fix it); a streamed reply that breaks midway is asked for again (a new call
    /// with its own events). Hooks, budget, rate limit, events and usage are the stack's
    /// ([`crate::llm_stack`]); what the before-hooks did to the messages is kept in `messages`
    /// for the rest of the run.
    pub(crate) async fn call_model(
        &self,
        messages: &mut Vec<Message>,
        shape: CallShape<'_>,
    ) -> Result<LlmResponse, AgentError> {
        let mut summaries = 0;
        let mut stream_restarts = 0;
        loop {
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

            let scope = &self.stack().scope;
            scope.set_iterations(shape.iterations);
            scope.take_rewritten();
            let result = self.send(request).await;
            if let Some(rewritten) = scope.take_rewritten() {
                *messages = rewritten;
            }
            match result {
                Ok(response) => return Ok(response),
                Err(CallFailure::Llm(error)) if error.is_context_length() => {
                    if !self.agent.respect_context_window() {
                        return Err(
                            self.context_error("respect_context_window is off".into(), error)
                        );
                    }
                    if summaries >= MAX_SUMMARIES {
                        return Err(self.context_error(
                            format!(
                                "still too long after summarising the history {MAX_SUMMARIES} times"
                            ),
                            error,
                        ));
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
                    tracing::warn!(
                        agent = self.role(),
                        error = crewai_llm::error_chain(&error),
                        "the reply stream broke; making the call again"
                    );
                }
                Err(failure) => return Err(self.failure_error(failure)),
            }
        }
    }

    /// The error a failed call that cannot be recovered from ends the work with.
    pub(crate) fn failure_error(&self, failure: CallFailure) -> AgentError {
        match failure {
            CallFailure::NotJson(message) => self.not_json_error(message),
            CallFailure::Blocked(reason) => AgentError::LlmCallBlocked {
                role: self.role().to_string(),
                reason,
            },
            CallFailure::Llm(source) => AgentError::Llm {
                role: self.role().to_string(),
                source,
            },
            CallFailure::Budget(exceeded) => self.budget_error(exceeded),
        }
    }

    pub(crate) fn budget_error(&self, exceeded: BudgetExceeded) -> AgentError {
        AgentError::BudgetExceeded {
            role: self.role().to_string(),
            exceeded: Box::new(exceeded),
        }
    }

    /// A reply that should have been JSON in the execution's response format, and why it is not.
    pub(crate) fn not_json_error(&self, problem: String) -> AgentError {
        AgentError::InvalidStructuredOutput {
            role: self.role().to_string(),
            format: self
                .response_format
                .as_ref()
                .map(|f| f.name.clone())
                .unwrap_or_default(),
            source: problem.into(),
        }
    }

    /// The conversation does not fit: `detail` says at which point, `source` is the provider's
    /// context-length error.
    pub(crate) fn context_error(&self, detail: String, source: LlmError) -> AgentError {
        AgentError::ContextWindowExceeded {
            role: self.role().to_string(),
            model: self.llm.model().to_string(),
            detail,
            source: Box::new(source),
        }
    }

    /// The bare call through the execution's model stack, streamed when the run streams (the
    /// stack's events layer reports the pieces).
    pub(crate) async fn send(&self, request: LlmRequest) -> Result<LlmResponse, CallFailure> {
        let llm = &self.stack().llm;
        let result = if self.services.stream {
            match llm.stream(request).await {
                Ok(stream) => collect_stream(stream, |_| {}).await,
                Err(error) => Err(error),
            }
        } else {
            llm.call(request).await
        };
        result.map_err(CallFailure::from)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_structured;

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
