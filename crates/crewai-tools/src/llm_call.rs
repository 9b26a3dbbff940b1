//! [`LlmCall`]: CrewAI's `LLM.call(messages, tools=..., available_functions=...)`, one model
//! call outside any agent, which runs the function the model asks for and returns its result.
//!
//! It lives here rather than in crewai-llm because the functions are tools: a [`ToolHandle`]
//! (a `#[tool]` function, a [`TypedTool`](crate::TypedTool), or a closure as a
//! [`DynamicTool`](crate::DynamicTool)) carries the name, description and schema the model is
//! offered, and its arguments are checked with [`prepare_arguments`](crate::prepare_arguments),
//! as an agent's are.

use crewai_llm::{
    Llm, LlmError, LlmRequest, LlmResponse, Message, ResponseFormat, ToolCall, ToolDefinition,
};
use serde_json::Value;

use crate::args::ArgumentError;
use crate::handle::ToolHandle;
use crate::set::ToolSet;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// One model call with tools, as CrewAI's `LLM.call` makes it.
///
/// - [`LlmCall::available_functions`] offers tools *and* runs them: when the model answers with
///   calls to them, each runs with its arguments checked against its schema, and the reply is
///   their results ([`CallOutcome::Ran`]).
/// - [`LlmCall::tools`] offers definitions only: calls to them come back as they are
///   ([`CallOutcome::ToolCalls`]) for the caller to run. When one call of a reply names such a
///   tool, nothing runs and every call of the reply is returned, so no half-run reply is lost.
/// - A text answer is [`CallOutcome::Text`].
///
/// A call naming a tool that was never offered, arguments that do not fit the schema, and a
/// function that fails are [`CallError`]s; nothing runs when any call of the reply is unknown
/// or has bad arguments.
///
/// ```
/// use crewai_llm::ScriptedLlm;
/// use crewai_tools::{CallOutcome, LlmCall, tool};
/// use serde_json::json;
///
/// /// The temperature in a city, in °C.
/// ///
/// /// # Arguments
/// /// * `city` - The city.
/// #[tool]
/// fn get_weather(city: String) -> String {
///     format!("18 °C in {city}")
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let llm = ScriptedLlm::new("scripted").then_tool_call("get_weather", json!({"city": "Oslo"}));
/// let reply = LlmCall::prompt("How warm is it in Oslo?")
///     .available_functions([get_weather_tool()])
///     .send(&llm)
///     .await
///     .unwrap();
/// let CallOutcome::Ran(runs) = &reply.outcome else { panic!("{:?}", reply.outcome) };
/// assert_eq!(runs[0].output.to_text(), "18 °C in Oslo");
/// assert_eq!(reply.outcome.text(), "18 °C in Oslo");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct LlmCall {
    request: LlmRequest,
    functions: ToolSet,
    context: ToolContext,
}

/// What a [`LlmCall`] gave back: the outcome, and the model's reply itself (usage, finish
/// reason, the text the model wrote beside its calls).
#[derive(Debug, Clone)]
pub struct CallReply {
    pub outcome: CallOutcome,
    pub response: LlmResponse,
}

/// What the model's answer came to.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The model answered in text (with a response format: the JSON text).
    Text(String),
    /// The model called tools that have no function here (or no functions were given): the
    /// calls, for the caller to run.
    ToolCalls(Vec<ToolCall>),
    /// Every call of the reply ran its function: the results, in the order of the calls.
    Ran(Vec<FunctionRun>),
}

impl CallOutcome {
    /// The text CrewAI's `LLM.call` returns: the answer, or the function's result (the results
    /// one per line when several ran); the calls as JSON when none ran.
    pub fn text(&self) -> String {
        match self {
            CallOutcome::Text(text) => text.clone(),
            CallOutcome::Ran(runs) => runs
                .iter()
                .map(|run| run.output.to_text())
                .collect::<Vec<_>>()
                .join("\n"),
            CallOutcome::ToolCalls(calls) => serde_json::to_string(calls).unwrap_or_default(),
        }
    }
}

/// One function the model called, and what it returned.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionRun {
    /// The call as the model made it.
    pub call: ToolCall,
    /// The name of the function that ran (the model may have spelled it loosely).
    pub function: String,
    /// The arguments the function got: the model's, repaired and checked against the schema.
    pub arguments: Value,
    pub output: ToolOutput,
}

/// Why a [`LlmCall`] gave no outcome.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The model call itself failed.
    #[error("the model call failed")]
    Llm(#[source] LlmError),
    /// The model called a tool that was not offered.
    #[error(
        "the model called '{name}', which is not one of the tools offered to it ({offered}); \
         give it with `available_functions` or `tools`"
    )]
    UnknownFunction { name: String, offered: String },
    /// The model's arguments for a function do not fit its schema.
    #[error("the model's arguments for '{function}' do not fit its schema")]
    BadArguments {
        function: String,
        #[source]
        source: ArgumentError,
    },
    /// A function ran and failed (or its usage limit is used up).
    #[error("the function '{function}' failed")]
    FunctionFailed {
        function: String,
        #[source]
        source: ToolError,
    },
}

impl LlmCall {
    /// A call with one user message.
    pub fn prompt(text: impl Into<String>) -> Self {
        LlmCall::messages(vec![Message::user(text)])
    }

    /// A call with these messages.
    pub fn messages(messages: Vec<Message>) -> Self {
        LlmCall {
            request: LlmRequest::new(messages),
            functions: ToolSet::new(),
            context: ToolContext::default(),
        }
    }

    /// Tools the model is offered whose calls are returned, not run: CrewAI's `tools=` without
    /// a matching `available_functions` entry. A definition named like an available function is
    /// that function's.
    pub fn tools(mut self, definitions: Vec<ToolDefinition>) -> Self {
        self.request.tools.extend(definitions);
        self
    }

    /// Tools the model is offered and that run when it calls them: CrewAI's
    /// `available_functions` together with their `tools=` schemas, which a handle carries.
    pub fn available_functions(mut self, functions: impl IntoIterator<Item = ToolHandle>) -> Self {
        for function in functions {
            self.functions.insert(function);
        }
        self
    }

    crewai_llm::setters! {
        /// The reply's JSON schema (CrewAI's `response_format`).
        pub fn response_format(format: ResponseFormat) => request.response_format = Some(format);
        /// Where the model's reply is cut (CrewAI's `stop`).
        pub fn stop(stop: Vec<String>) => request.options.stop = stop;
        /// The context the functions run with (cancellation, the agent and task they act for).
        pub fn context(context: ToolContext) => context = context;
    }

    /// The request as the model receives it: the messages, and every offered tool once.
    pub fn request(&self) -> LlmRequest {
        let mut request = self.request.clone();
        let mut tools = self.functions.definitions();
        tools.extend(
            request
                .tools
                .drain(..)
                .filter(|tool| self.functions.find(&tool.name).is_none()),
        );
        request.tools = tools;
        request
    }

    /// Calls `llm`, then runs the functions its answer asks for.
    pub async fn send(self, llm: &dyn Llm) -> Result<CallReply, CallError> {
        let response = llm.call(self.request()).await.map_err(CallError::Llm)?;
        let outcome = self.outcome(&response).await?;
        Ok(CallReply { outcome, response })
    }

    async fn outcome(&self, response: &LlmResponse) -> Result<CallOutcome, CallError> {
        if response.tool_calls.is_empty() {
            return Ok(CallOutcome::Text(
                response.content.clone().unwrap_or_default(),
            ));
        }
        let returned_only = |call: &ToolCall| {
            self.request.tools.iter().any(|tool| tool.name == call.name)
                && self.functions.find(&call.name).is_none()
        };
        if response.tool_calls.iter().any(returned_only) {
            return Ok(CallOutcome::ToolCalls(response.tool_calls.clone()));
        }
        // Every call is checked before any runs, so a bad one leaves nothing half done.
        let mut checked = Vec::with_capacity(response.tool_calls.len());
        for call in &response.tool_calls {
            let function =
                self.functions
                    .find(&call.name)
                    .ok_or_else(|| CallError::UnknownFunction {
                        name: call.name.clone(),
                        offered: self.offered_names(),
                    })?;
            let arguments = function
                .prepare_arguments(&call.arguments)
                .map_err(|source| CallError::BadArguments {
                    function: function.name().to_string(),
                    source,
                })?;
            checked.push((call, function, arguments));
        }
        let mut runs = Vec::with_capacity(checked.len());
        for (call, function, arguments) in checked {
            let failed = |source: ToolError| CallError::FunctionFailed {
                function: function.name().to_string(),
                source,
            };
            function
                .try_claim_use()
                .map_err(|limit| failed(limit.into()))?;
            let output = function
                .run(arguments.clone(), &self.context)
                .await
                .map_err(failed)?;
            runs.push(FunctionRun {
                call: call.clone(),
                function: function.name().to_string(),
                arguments,
                output,
            });
        }
        Ok(CallOutcome::Ran(runs))
    }

    fn offered_names(&self) -> String {
        let names: Vec<String> = self.request().tools.into_iter().map(|t| t.name).collect();
        match names.is_empty() {
            true => "none".to_string(),
            false => names.join(", "),
        }
    }
}
