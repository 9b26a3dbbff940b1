//! [`DynamicTool`]: a tool assembled at run time from a name, a description, a JSON schema and a
//! closure (MCP servers, YAML projects, tests).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::handle::ToolHandle;
use crate::tool::{EnvVar, Tool, ToolContext, ToolError, ToolOutput};

type Handler = Arc<
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync,
>;

/// A tool built at run time.
///
/// The closure receives the validated arguments and an owned copy of the context.
///
/// ```
/// use crewai_tools::{DynamicTool, Tool, ToolContext, ToolOutput};
/// use serde_json::json;
///
/// # tokio_test_block(async {
/// let shout = DynamicTool::new(
///     "shout",
///     "Upper-cases a text.",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |args, _ctx| async move {
///         Ok(ToolOutput::Text(args["text"].as_str().unwrap_or_default().to_uppercase()))
///     },
/// );
/// let out = shout.run(json!({"text": "hi"}), &ToolContext::default()).await.unwrap();
/// assert_eq!(out.to_text(), "HI");
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct DynamicTool {
    name: String,
    description: String,
    parameters: Value,
    handler: Handler,
    env_vars: Vec<EnvVar>,
    result_as_answer: bool,
    max_usage_count: Option<u32>,
}

impl DynamicTool {
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        DynamicTool {
            name: name.into(),
            description: description.into(),
            parameters,
            handler: Arc::new(move |args, ctx| Box::pin(handler(args, ctx))),
            env_vars: Vec::new(),
            result_as_answer: false,
            max_usage_count: None,
        }
    }

    crewai_llm::setters! {
        /// Declares environment variables the tool needs.
        pub fn with_env_vars(env_vars: Vec<EnvVar>) => env_vars = env_vars;
        /// The default for [`ToolHandle::result_as_answer`].
        pub fn with_result_as_answer(result_as_answer: bool) => result_as_answer = result_as_answer;
        /// The default for [`ToolHandle::max_usage_count`].
        pub fn with_max_usage_count(max_usage_count: u32) => max_usage_count = Some(max_usage_count);
    }

    /// Wraps the tool in a [`ToolHandle`].
    pub fn into_handle(self) -> ToolHandle {
        ToolHandle::from_tool(self)
    }
}

impl fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicTool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for DynamicTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        (self.handler)(args, ctx.clone()).await
    }

    fn env_vars(&self) -> Vec<EnvVar> {
        self.env_vars.clone()
    }

    fn result_as_answer(&self) -> bool {
        self.result_as_answer
    }

    fn max_usage_count(&self) -> Option<u32> {
        self.max_usage_count
    }
}
