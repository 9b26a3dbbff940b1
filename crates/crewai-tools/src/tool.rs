//! The `Tool` trait and the values a tool run receives and returns.

use std::sync::Arc;

use async_trait::async_trait;
use crewai_llm::embeddings::Embedder;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::report::{ToolReport, ToolReporter};

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
    /// The run's accounting around an embedder: a tool that embeds (the knowledge search
    /// tools) wraps its embedder with it, so its embeddings count in the run's usage and budget.
    pub embedding_layer: Option<EmbeddingLayer>,
    /// Where the tool reports the work it does inside the call (a sandboxed execution); the
    /// run makes each report an event under this call's.
    pub reporter: Option<ToolReporter>,
}

/// A function wrapping an embedder in another.
type WrapEmbedder = dyn Fn(Arc<dyn Embedder>) -> Arc<dyn Embedder> + Send + Sync;

/// Wraps an embedder in the caller's accounting (see [`ToolContext::embedding_layer`]).
#[derive(Clone)]
pub struct EmbeddingLayer(Arc<WrapEmbedder>);

impl EmbeddingLayer {
    pub fn new(
        layer: impl Fn(Arc<dyn Embedder>) -> Arc<dyn Embedder> + Send + Sync + 'static,
    ) -> Self {
        EmbeddingLayer(Arc::new(layer))
    }

    pub fn apply(&self, embedder: Arc<dyn Embedder>) -> Arc<dyn Embedder> {
        (self.0)(embedder)
    }
}

impl std::fmt::Debug for EmbeddingLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EmbeddingLayer")
    }
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

    crewai_llm::setters! {
        /// The crew the call runs in.
        pub fn with_crew(crew_id: impl Into<String>) => crew_id = Some(crew_id.into());
        /// Ties the tool run to a caller's token (typically a child of the agent's run token).
        pub fn with_cancellation(cancellation: CancellationToken) => cancellation = cancellation;
        pub fn with_embedding_layer(layer: EmbeddingLayer) => embedding_layer = Some(layer);
        pub fn with_reporter(reporter: ToolReporter) => reporter = Some(reporter);
    }

    /// Hands `report` to the caller's [`ToolReporter`]; without one (a call outside a run) it
    /// goes nowhere.
    pub fn report(&self, report: ToolReport) {
        if let Some(reporter) = &self.reporter {
            reporter.report(report);
        }
    }

    /// `embedder` inside the caller's [`EmbeddingLayer`], or as it is when there is none.
    pub fn embedder(&self, embedder: Arc<dyn Embedder>) -> Arc<dyn Embedder> {
        match &self.embedding_layer {
            Some(layer) => layer.apply(embedder),
            None => embedder,
        }
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

/// A tool's failure. It goes back to the model as the observation, rendered with its causes
/// (`crewai_llm::error_chain`): the variants that wrap a lower-level error say only what failed
/// at the tool's level and keep the error itself as their source.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not match the schema.
    #[error("{0}")]
    InvalidArguments(String),
    /// The arguments failed validation against the tool's schema.
    #[error(transparent)]
    Arguments(#[from] crate::ArgumentError),
    /// Validated arguments do not deserialise into the tool's argument type.
    #[error("The arguments for the tool '{tool}' do not fit")]
    ArgumentsDoNotFit {
        tool: String,
        #[source]
        source: serde_json::Error,
    },
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// A file-system operation failed; `action` says which (`'notes.txt' cannot be read`).
    #[error("{action}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    /// An HTTP request failed; `action` says which (`GET https://example.com/ timed out`).
    #[error("{action}")]
    Http {
        action: String,
        #[source]
        source: reqwest::Error,
    },
    /// JSON the tool read or wrote is not what it expected; `action` says which.
    #[error("{action}")]
    Json {
        action: String,
        #[source]
        source: serde_json::Error,
    },
    /// Work the tool handed to another task did not finish (the task was cancelled or
    /// panicked); `action` says which.
    #[error("{action}")]
    Interrupted {
        action: String,
        #[source]
        source: tokio::task::JoinError,
    },
    /// A process or server the tool runs in (an MCP server, a Python worker) failed or did not
    /// answer in time; `action` says which call.
    #[error("{action}")]
    Service {
        action: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The tool's usage limit is used up.
    #[error(transparent)]
    UsageLimit(#[from] crate::UsageLimitReached),
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

impl ToolError {
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }

    /// A failure caused by a lower-level error, kept as the source: `action` says what could
    /// not be done (`'notes.txt' cannot be read`), the source says why.
    pub fn caused(action: impl Into<String>, source: impl CauseOfToolError) -> Self {
        source.into_tool_error(action.into())
    }
}

/// A lower-level error that [`ToolError::caused`] keeps as the source of a tool failure.
pub trait CauseOfToolError {
    fn into_tool_error(self, action: String) -> ToolError;
}

impl CauseOfToolError for std::io::Error {
    fn into_tool_error(self, action: String) -> ToolError {
        ToolError::Io {
            action,
            source: self,
        }
    }
}

impl CauseOfToolError for reqwest::Error {
    fn into_tool_error(self, action: String) -> ToolError {
        ToolError::Http {
            action,
            source: self,
        }
    }
}

impl CauseOfToolError for serde_json::Error {
    fn into_tool_error(self, action: String) -> ToolError {
        ToolError::Json {
            action,
            source: self,
        }
    }
}

impl CauseOfToolError for tokio::task::JoinError {
    fn into_tool_error(self, action: String) -> ToolError {
        ToolError::Interrupted {
            action,
            source: self,
        }
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
