//! [`ScriptedLlm`]: a model that answers from a script and remembers what it was asked, for
//! testing agents and crews without a network.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use crate::error::LlmError;
use crate::traits::Llm;
use crate::types::{Capabilities, FinishReason, LlmRequest, LlmResponse, ToolCall, Usage};

/// A queue of responses and errors, handed out one per call, in order; every request is recorded.
///
/// ```
/// # futures::executor::block_on(async {
/// use crewai_llm::{Llm, LlmRequest, Message, ScriptedLlm};
/// let llm = ScriptedLlm::new("scripted")
///     .then_tool_call("calculator", serde_json::json!({"expression": "2+2"}))
///     .then_text("Final Answer: 4");
/// let first = llm.call(LlmRequest::new(vec![Message::user("2+2?")])).await.unwrap();
/// assert_eq!(first.tool_calls[0].name, "calculator");
/// let second = llm.call(LlmRequest::new(vec![Message::user("and?")])).await.unwrap();
/// assert_eq!(second.content.as_deref(), Some("Final Answer: 4"));
/// assert_eq!(llm.requests().len(), 2);
/// assert!(llm.call(LlmRequest::default()).await.is_err()); // the script ran out
/// # });
/// ```
#[derive(Clone)]
pub struct ScriptedLlm {
    model: String,
    capabilities: Capabilities,
    script: Arc<Mutex<VecDeque<Result<LlmResponse, LlmError>>>>,
    requests: Arc<Mutex<Vec<LlmRequest>>>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("model", &self.model)
            .field("remaining", &self.remaining())
            .finish()
    }
}

fn usage_of_one() -> Usage {
    Usage {
        successful_requests: 1,
        ..Default::default()
    }
}

impl ScriptedLlm {
    pub fn new(model: impl Into<String>) -> Self {
        ScriptedLlm {
            model: model.into(),
            capabilities: Capabilities::default(),
            script: Arc::default(),
            requests: Arc::default(),
        }
    }

    /// Reports these capabilities (for example `function_calling: false` to test the text ReAct path).
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    fn push(self, entry: Result<LlmResponse, LlmError>) -> Self {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(entry);
        self
    }

    /// Queues a complete response.
    pub fn then_response(self, response: LlmResponse) -> Self {
        self.push(Ok(response))
    }

    /// Queues a text reply.
    pub fn then_text(self, text: impl Into<String>) -> Self {
        self.then_response(LlmResponse {
            content: Some(text.into()),
            usage: usage_of_one(),
            ..Default::default()
        })
    }

    /// Queues a reply calling one tool.
    pub fn then_tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        let index = self.remaining() + self.requests().len();
        let name = name.into();
        self.then_tool_calls(vec![ToolCall {
            id: format!("call_{index}"),
            name,
            arguments,
            signature: None,
        }])
    }

    /// Queues a reply calling several tools at once.
    pub fn then_tool_calls(self, calls: Vec<ToolCall>) -> Self {
        self.then_response(LlmResponse {
            content: None,
            tool_calls: calls,
            finish_reason: FinishReason::ToolCalls,
            usage: usage_of_one(),
            ..Default::default()
        })
    }

    /// Queues a failure.
    pub fn then_error(self, error: LlmError) -> Self {
        self.push(Err(error))
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Scripted entries not yet handed out.
    pub fn remaining(&self) -> usize {
        self.script.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn model(&self) -> &str {
        &self.model
    }
    fn provider(&self) -> &str {
        "scripted"
    }
    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let served = {
            let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
            requests.push(request);
            requests.len()
        };
        self.script.lock().unwrap_or_else(|p| p.into_inner()).pop_front().unwrap_or_else(|| {
            Err(LlmError::Config(format!(
                "ScriptedLlm '{}' has no response left for call {served}; queue more with then_text/then_tool_call",
                self.model
            )))
        })
    }
}
