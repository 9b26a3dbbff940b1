//! The `Tool` trait and the values a tool run receives and returns.

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Who is calling a tool, and a token that is cancelled when the run is abandoned.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    pub agent_id: Option<String>,
    pub agent_role: Option<String>,
    pub task_id: Option<String>,
    pub task_name: Option<String>,
    pub crew_id: Option<String>,
    pub cancellation: CancellationToken,
    /// The id of the event that announced this call (`tool_usage_started`), so that work the tool
    /// causes (a delegated coworker's run) is reported under it.
    pub parent_event_id: Option<String>,
}

impl ToolContext {
    /// A context for a call outside any agent, with its own cancellation token.
    pub fn new() -> Self {
        ToolContext::default()
    }

    pub fn with_agent(mut self, id: impl Into<String>, role: impl Into<String>) -> Self {
        self.agent_id = Some(id.into());
        self.agent_role = Some(role.into());
        self
    }

    pub fn with_task(mut self, id: impl Into<String>, name: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self.task_name = Some(name.into());
        self
    }

    pub fn with_crew(mut self, id: impl Into<String>) -> Self {
        self.crew_id = Some(id.into());
        self
    }

    /// Ties the tool run to a caller's token (typically a child of the agent's run token).
    pub fn with_cancellation(mut self, cancellation: CancellationToken) -> Self {
        self.cancellation = cancellation;
        self
    }
}

/// What a tool returns.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    Text(String),
    Json(Value),
}

impl ToolOutput {
    /// The text the model sees.
    pub fn to_text(&self) -> String {
        match self {
            ToolOutput::Text(text) => text.clone(),
            ToolOutput::Json(Value::String(s)) => s.clone(),
            ToolOutput::Json(value) => value.to_string(),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(value: String) -> Self {
        ToolOutput::Text(value)
    }
}

impl From<&str> for ToolOutput {
    fn from(value: &str) -> Self {
        ToolOutput::Text(value.to_string())
    }
}

/// A tool's failure. Its text goes back to the model as the observation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not match the schema.
    #[error("{0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// A required environment variable is not set.
    #[error("tool '{tool}' needs the environment variable {var}: {description}")]
    MissingEnvVar {
        tool: String,
        var: String,
        description: String,
    },
    #[error("the tool run was cancelled")]
    Cancelled,
    /// The tool panicked; the panic was caught. The executor reports it on the run's event bus
    /// (a `panic_caught` event, counted by the bus), so a run that recovers still shows it.
    #[error("the tool '{tool}' crashed (it panicked): {message}")]
    Panicked { tool: String, message: String },
}

impl From<crate::ArgumentError> for ToolError {
    fn from(error: crate::ArgumentError) -> Self {
        ToolError::InvalidArguments(error.to_string())
    }
}

impl From<crate::UsageLimitReached> for ToolError {
    fn from(error: crate::UsageLimitReached) -> Self {
        ToolError::Failed(error.to_string())
    }
}

impl ToolError {
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }
}

/// An environment variable a tool needs (CrewAI's `EnvVar`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub description: String,
    pub required: bool,
    pub default: Option<String>,
}

/// Something an agent can call.
///
/// Implement it directly for full control, use [`crate::TypedTool`] for typed arguments, or put
/// `#[tool]` on a function.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// The JSON schema of its arguments (an object schema).
    fn parameters(&self) -> Value;
    /// The argument schema a model is held to by a provider that constrains its decoding (the
    /// embedded model in ReAct): [`Tool::parameters`] unless the tool knows the exact values it
    /// accepts where the schema sent to APIs stays general (an `enum` of coworker roles instead
    /// of a free string). Never sent to an API.
    fn decoding_parameters(&self) -> Value {
        self.parameters()
    }
    /// Runs the tool with arguments that have been validated against [`Tool::parameters`].
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
    /// Environment variables the tool needs; a missing required one fails before a crew starts.
    fn env_vars(&self) -> Vec<EnvVar> {
        Vec::new()
    }
    /// Whether the tool's output should end the agent's run as its final answer (the default of
    /// [`crate::ToolHandle::result_as_answer`]).
    fn result_as_answer(&self) -> bool {
        false
    }
    /// How many times the tool may run (the default of [`crate::ToolHandle::max_usage_count`]).
    fn max_usage_count(&self) -> Option<u32> {
        None
    }
    /// Whether a result may be cached when the crew caches tool results (CrewAI's
    /// `cache_function`; caching everything by default).
    fn cache_result(&self, _args: &Value, _output: &ToolOutput) -> bool {
        true
    }
}
