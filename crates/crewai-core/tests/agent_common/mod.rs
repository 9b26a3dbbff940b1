//! Shared setup of the agent integration tests: a scripted OpenAI-compatible server and the real
//! OpenAI client pointed at it.
#![allow(dead_code)] // each test file uses a different part of the kit

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crewai_core::AgentError;
use crewai_core::agent::{Agent, AgentBuilder, AgentTaskRequest, AgentTaskResult};
use crewai_llm::{
    Capabilities, Llm, LlmConfig, LlmError, LlmRequest, LlmResponse, LlmStream, async_trait,
    build_llm,
};
use crewai_testkit::scripted::ScriptedServer;
use crewai_tools::{DynamicTool, ToolError, ToolHandle, ToolOutput, ToolSet};
use serde_json::{Value, json};

pub async fn server() -> ScriptedServer {
    ScriptedServer::start().await
}

/// The real OpenAI chat-completions client against the scripted server (no client retries, so
/// scripted errors reach the agent as they are).
pub fn openai(server: &ScriptedServer) -> Arc<dyn Llm> {
    let mut config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test")
        .with_timeout(30.0);
    config.max_retries = Some(0);
    build_llm(&config).expect("an OpenAI client for the scripted server")
}

/// The same client with a context window of `tokens`.
pub fn openai_with_window(server: &ScriptedServer, tokens: u64) -> Arc<dyn Llm> {
    let mut config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test")
        .with_timeout(30.0);
    config.max_retries = Some(0);
    config.context_window_size = Some(tokens);
    build_llm(&config).expect("an OpenAI client for the scripted server")
}

/// A real client that reports no function calling, so the agent runs the ReAct text loop over the
/// same wire.
pub struct TextOnly(pub Arc<dyn Llm>);

#[async_trait]
impl Llm for TextOnly {
    fn model(&self) -> &str {
        self.0.model()
    }
    fn provider(&self) -> &str {
        self.0.provider()
    }
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.0.call(request).await
    }
    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        self.0.stream(request).await
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            function_calling: false,
            ..self.0.capabilities()
        }
    }
}

pub fn agent_with(llm: Arc<dyn Llm>) -> AgentBuilder {
    Agent::builder()
        .role("test role")
        .goal("test goal")
        .backstory("test backstory")
        .llm(llm)
}

/// `agent`'s run of the task `prompt` with `tools`.
pub async fn run_with(
    agent: &Agent,
    prompt: impl Into<String>,
    tools: Vec<ToolHandle>,
) -> Result<AgentTaskResult, AgentError> {
    let request = AgentTaskRequest::new(prompt).with_tools(ToolSet::from(tools));
    agent.run_task(request).await
}

/// A tool that multiplies `a` and `b` and counts its runs.
pub fn multiplier(runs: Arc<AtomicU32>) -> ToolHandle {
    DynamicTool::new(
        "multiplier",
        "Multiplies two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        move |args: Value, _ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let product = args["a"].as_i64().unwrap_or(0) * args["b"].as_i64().unwrap_or(0);
                Ok::<ToolOutput, ToolError>(ToolOutput::Text(product.to_string()))
            }
        },
    )
    .into_handle()
}

/// A tool that always fails with `message`.
pub fn failing(message: &'static str) -> ToolHandle {
    DynamicTool::new(
        "failing_tool",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        move |_args: Value, _ctx| async move {
            Err::<ToolOutput, ToolError>(ToolError::failed(message))
        },
    )
    .into_handle()
}

/// The text of message `index` of recorded request `request`.
pub fn message_text(request: &crewai_testkit::scripted::RecordedRequest, index: usize) -> String {
    request.messages()[index]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
