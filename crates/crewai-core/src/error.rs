//! Errors of agent runs.

use std::time::Duration;

use crewai_llm::LlmError;
use crewai_tools::ToolError;

/// A cause of any type, kept for its chain ([`crewai_llm::error_chain`]); a plain message
/// becomes one with `.into()`.
pub type BoxedCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can stop an agent from finishing its work.
///
/// A variant that wraps another error keeps it as its [`source`](std::error::Error::source) and
/// says only what failed at the agent's level; show the whole chain with
/// [`crewai_llm::error_chain`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent was built wrong (a required field missing, a value out of range).
    #[error("invalid agent configuration{}: {message}", role.as_ref().map(|r| format!(" for '{r}'")).unwrap_or_default())]
    Config {
        role: Option<String>,
        message: String,
    },

    /// No model was given and none could be created from the environment.
    #[error("agent '{role}' has no LLM")]
    NoLlm {
        role: String,
        source: std::sync::Arc<LlmError>,
    },

    /// An MCP server of the agent's `mcps:` could not be reached or did not list its tools.
    #[error("agent '{role}': its MCP server could not be used")]
    Mcp {
        role: String,
        #[source]
        source: Box<crewai_mcp::McpError>,
    },

    /// A remote A2A agent of the agent's `a2a:` (with `fail_fast`) could not be reached.
    #[error("agent '{role}': its remote A2A agent could not be reached")]
    A2a {
        role: String,
        #[source]
        source: Box<crewai_a2a::A2aError>,
    },

    /// The model call failed (after the LLM layer's own retries and fallbacks).
    #[error("agent '{role}': the LLM call failed")]
    Llm { role: String, source: LlmError },

    /// A before-LLM hook blocked the call.
    #[error("agent '{role}': {}{}", crate::hooks::LLM_CALL_BLOCKED, reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    LlmCallBlocked {
        role: String,
        reason: Option<String>,
    },

    /// The conversation outgrew the model's window: `respect_context_window` is off, or the
    /// history is still too long after summarising it. `detail` says which; `source` is the
    /// provider's context-length error.
    #[error(
        "agent '{role}': the conversation no longer fits the context window of {model} ({detail}). \
         Set `respect_context_window: true` on the agent to summarise the history automatically, \
         use a model with a larger window, or give the task less context"
    )]
    ContextWindowExceeded {
        role: String,
        model: String,
        detail: String,
        source: Box<LlmError>,
    },

    /// `max_execution_time` passed.
    #[error(
        "agent '{role}' timed out after {}s on task '{task}'; raise the agent's max_execution_time or make the task smaller",
        .after.as_secs_f64()
    )]
    Timeout {
        role: String,
        task: String,
        after: Duration,
    },

    /// A tool failed and the tool failure policy is `raise`.
    #[error("agent '{role}': tool '{tool}' failed and tool_failure_policy is raise")]
    ToolFailed {
        role: String,
        tool: String,
        source: ToolError,
    },

    /// The model's reply should have been JSON matching the response format but was not
    /// (`source` says how it is not: a parse message, or the conversion call's error).
    #[error("agent '{role}': the reply does not match the requested response format '{format}'")]
    InvalidStructuredOutput {
        role: String,
        format: String,
        source: BoxedCause,
    },

    /// The model gave an empty final answer.
    #[error("agent '{role}': the model returned an empty final answer")]
    EmptyAnswer { role: String },

    /// `Agent::kickoff`'s guardrail kept rejecting the answer. The text starts the way CrewAI's does.
    #[error(
        "Agent's guardrail failed validation after {retries} retries. Last error: {last_error}"
    )]
    GuardrailFailed {
        role: String,
        retries: u32,
        last_error: String,
    },

    /// A guardrail could not be evaluated (an LLM guardrail's judge call failed).
    #[error("agent '{role}': the guardrail could not be evaluated")]
    Guardrail {
        role: String,
        source: Box<crate::guardrail::GuardrailError>,
    },

    /// The agent's skills could not be loaded (a skill path that does not exist, a `SKILL.md`
    /// that breaks the format, two skills of one name).
    #[error("agent '{role}': its skills could not be loaded")]
    Skills {
        role: String,
        source: crewai_skills::SkillError,
    },

    /// A step of the agent's plan (`planning_config`) failed, a later step needed its result,
    /// and no replan was left to route around it.
    #[error(
        "agent '{role}': step {step} of its plan failed and the plan could not change again (max_replans {max_replans}): {error}"
    )]
    PlanStepFailed {
        role: String,
        step: u32,
        max_replans: u32,
        error: String,
    },

    /// The run was cancelled from outside.
    #[error("agent '{role}': the run was cancelled")]
    Cancelled { role: String },

    /// The next LLM call would have gone over the run's budget (`max_cost_usd`, `max_tokens`).
    #[error("agent '{role}' stopped")]
    BudgetExceeded {
        role: String,
        #[source]
        exceeded: Box<crate::usage::BudgetExceeded>,
    },
}

impl AgentError {
    /// Whether `max_retry_limit` should run the work again after this error.
    ///
    /// Retried: replies that could not be used (not JSON when JSON was asked for, empty, garbled)
    /// and guardrail judges that failed. Not retried, as in CrewAI: timeouts, tool failures under
    /// `raise`, cancellation, and provider errors (the LLM layer already retried those that can
    /// pass, and the rest, like bad credentials or a request the provider rejects, would fail
    /// the same way again); nor configuration problems, blocked calls and context-window errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            AgentError::Llm { source, .. } => matches!(source, LlmError::MalformedResponse { .. }),
            AgentError::InvalidStructuredOutput { .. }
            | AgentError::EmptyAnswer { .. }
            | AgentError::Guardrail { .. } => true,
            _ => false,
        }
    }

    /// The role of the agent the error is about, when known.
    pub fn agent_role(&self) -> Option<&str> {
        match self {
            AgentError::Config { role, .. } => role.as_deref(),
            AgentError::NoLlm { role, .. }
            | AgentError::Llm { role, .. }
            | AgentError::Mcp { role, .. }
            | AgentError::A2a { role, .. }
            | AgentError::LlmCallBlocked { role, .. }
            | AgentError::ContextWindowExceeded { role, .. }
            | AgentError::Timeout { role, .. }
            | AgentError::ToolFailed { role, .. }
            | AgentError::InvalidStructuredOutput { role, .. }
            | AgentError::EmptyAnswer { role }
            | AgentError::GuardrailFailed { role, .. }
            | AgentError::Guardrail { role, .. }
            | AgentError::Cancelled { role }
            | AgentError::Skills { role, .. }
            | AgentError::PlanStepFailed { role, .. }
            | AgentError::BudgetExceeded { role, .. } => Some(role),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_agent_and_task() {
        let timeout = AgentError::Timeout {
            role: "Researcher".into(),
            task: "research".into(),
            after: Duration::from_secs(2),
        };
        let text = timeout.to_string();
        assert!(
            text.contains("Researcher") && text.contains("research") && text.contains("timed out"),
            "{text}"
        );
        assert!(!timeout.is_retryable());
    }

    #[test]
    fn a_wrapped_cause_is_the_source_and_is_shown_once_in_the_chain() {
        let error = AgentError::Llm {
            role: "Writer".into(),
            source: LlmError::MissingApiKey {
                provider: "openai".into(),
                env_var: "OPENAI_API_KEY".into(),
            },
        };
        assert_eq!(error.to_string(), "agent 'Writer': the LLM call failed");
        let chain = crewai_llm::error_chain(&error);
        assert!(
            chain.starts_with("agent 'Writer': the LLM call failed: "),
            "{chain}"
        );
        assert_eq!(chain.matches("OPENAI_API_KEY").count(), 1, "{chain}");
    }

    #[test]
    fn guardrail_failure_reads_like_crewai() {
        let error = AgentError::GuardrailFailed {
            role: "a".into(),
            retries: 2,
            last_error: "no".into(),
        };
        assert_eq!(
            error.to_string(),
            "Agent's guardrail failed validation after 2 retries. Last error: no"
        );
    }

    #[test]
    fn only_unusable_replies_are_retried() {
        let auth = AgentError::Llm {
            role: "a".into(),
            source: LlmError::MissingApiKey {
                provider: "openai".into(),
                env_var: "OPENAI_API_KEY".into(),
            },
        };
        assert!(!auth.is_retryable());
        let garbled = AgentError::Llm {
            role: "a".into(),
            source: LlmError::malformed("openai", "x"),
        };
        assert!(garbled.is_retryable());
        assert!(AgentError::EmptyAnswer { role: "a".into() }.is_retryable());
    }
}
