//! What the engine returned, read into the checker's [`Output`].
//!
//! The result type comes from the Rust type the engine handed back, through [`Returned`]: a
//! `CrewOutput` is CrewAI's CrewOutput, an `AgentOutput` its LiteAgentOutput, and only a
//! [`Streamed`] (which [`consume`] makes from the `CrewStream` that `Crew::kickoff_stream`
//! returns, and nothing else can) a CrewStreamingOutput. The runner never picks the type from
//! the case's mode.

use crewai_core::agent::AgentOutput;
use crewai_core::crew::{CrewError, CrewStream, StreamChunkType};
use crewai_core::output::{CrewOutput, TaskOutput};
use crewai_llm::{LlmResponse, Usage};
use futures::StreamExt;

use crate::outcome::{Output, ResultKind, TaskView, UsageView};

/// A value the engine returned, as the checker reads it.
pub trait Returned {
    fn to_output(&self) -> Output;
}

pub fn usage_view(usage: &Usage) -> UsageView {
    UsageView {
        total_tokens: usage.total_tokens,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        successful_requests: usage.successful_requests,
    }
}

fn task_view(output: &TaskOutput) -> TaskView {
    TaskView {
        raw: output.raw.clone(),
        agent: output.agent.clone(),
    }
}

impl Returned for CrewOutput {
    fn to_output(&self) -> Output {
        Output {
            kind: ResultKind::CrewOutput,
            raw: self.raw.clone(),
            json_dict: self.json_dict.clone(),
            json_text: self.json().map_err(|e| e.to_string()),
            pydantic: self.pydantic.clone(),
            tasks_output: self.tasks_output.iter().map(task_view).collect(),
            usage: Some(usage_view(&self.token_usage)),
            chunks: None,
        }
    }
}

impl Returned for AgentOutput {
    fn to_output(&self) -> Output {
        Output {
            kind: ResultKind::AgentOutput,
            raw: self.raw.clone(),
            pydantic: self.typed.clone(),
            json_dict: self.typed.clone(),
            usage: Some(usage_view(&self.usage)),
            ..Default::default()
        }
    }
}

/// Tasks run one by one: the list, read through its last output (as a crew's result is).
impl Returned for [TaskOutput] {
    fn to_output(&self) -> Output {
        let last = self.last();
        Output {
            kind: ResultKind::TaskOutputs,
            raw: last.map(|t| t.raw.clone()).unwrap_or_default(),
            json_dict: last.and_then(|t| t.json_dict.clone()),
            json_text: last
                .map(|t| t.json().map_err(|e| e.to_string()))
                .unwrap_or_else(|| Err("no task ran".into())),
            pydantic: last.and_then(|t| t.pydantic.clone()),
            tasks_output: self.iter().map(task_view).collect(),
            usage: None,
            chunks: None,
        }
    }
}

/// A `CrewStream` iterated to its end: its result and how many text chunks it yielded.
#[derive(Debug, Clone)]
pub struct Streamed {
    output: CrewOutput,
    text_chunks: usize,
}

/// Iterates `stream` to its end, counting the chunks CrewAI counts: one per non-empty content
/// delta (tool-call announcements are chunks of the stream too, but not text).
pub async fn consume(mut stream: CrewStream) -> Result<Streamed, CrewError> {
    let mut text_chunks = 0;
    while let Some(chunk) = stream.next().await {
        if chunk.chunk_type == StreamChunkType::Text && !chunk.content.is_empty() {
            text_chunks += 1;
        }
    }
    let output = stream.result().await?;
    Ok(Streamed {
        output,
        text_chunks,
    })
}

impl Returned for Streamed {
    fn to_output(&self) -> Output {
        Output {
            kind: ResultKind::CrewStreamingOutput,
            chunks: Some(self.text_chunks),
            ..self.output.to_output()
        }
    }
}

/// A bare LLM call's reply, with the text deltas when it was streamed.
#[derive(Debug, Clone)]
pub struct LlmReply {
    pub response: LlmResponse,
    pub text_deltas: Option<usize>,
}

impl Returned for LlmReply {
    fn to_output(&self) -> Output {
        Output {
            kind: ResultKind::Text,
            raw: self.response.content.clone().unwrap_or_default(),
            usage: Some(usage_view(&self.response.usage)),
            chunks: self.text_deltas,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crewai_core::agent::Agent;
    use crewai_core::crew::Crew;
    use crewai_core::task::Task;
    use crewai_llm::ScriptedLlm;
    use crewai_tools::{DynamicTool, ToolOutput};
    use serde_json::json;

    use super::*;

    fn streaming_crew() -> Crew {
        let llm = ScriptedLlm::new("scripted")
            .then_tool_call("lookup", json!({}))
            .then_text("The answer is 42.");
        let tool = DynamicTool::new(
            "lookup",
            "Looks the answer up.",
            json!({"type": "object", "properties": {}}),
            |_, _| async { Ok(ToolOutput::Text("42".into())) },
        );
        let agent = Agent::builder()
            .role("Looker")
            .goal("Find the answer")
            .backstory("You look things up.")
            .llm(Arc::new(llm))
            .tools(vec![tool.into_handle()])
            .build()
            .unwrap();
        let task = Task::builder()
            .description("What is the answer?")
            .expected_output("A number")
            .agent(agent.clone())
            .build()
            .unwrap();
        Crew::builder()
            .agents(vec![agent])
            .tasks(vec![task])
            .stream(true)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_stream_counts_its_text_chunks_only() {
        // The stream itself yields the tool call's announcement and the text.
        let all: Vec<_> = streaming_crew()
            .kickoff_stream(Default::default())
            .collect()
            .await;
        let kinds: Vec<StreamChunkType> = all.iter().map(|c| c.chunk_type).collect();
        assert!(kinds.contains(&StreamChunkType::ToolCall), "{kinds:?}");
        let text = kinds
            .iter()
            .filter(|k| **k == StreamChunkType::Text)
            .count();
        assert!(text >= 1 && text < all.len(), "{kinds:?}");

        let streamed = consume(streaming_crew().kickoff_stream(Default::default()))
            .await
            .unwrap();
        let output = streamed.to_output();
        assert_eq!(output.kind, ResultKind::CrewStreamingOutput);
        assert_eq!(output.chunks, Some(text), "only the text chunks count");
        assert_eq!(output.raw, "The answer is 42.");
    }

    #[test]
    fn the_kind_is_the_returned_types() {
        let task = TaskOutput::new("d", "e", "raw", "R");
        assert_eq!(
            [task.clone()].as_slice().to_output().kind,
            ResultKind::TaskOutputs
        );
        assert_eq!(ResultKind::TaskOutputs.result_type(), None);
        let reply = LlmReply {
            response: LlmResponse::default(),
            text_deltas: None,
        };
        assert_eq!(reply.to_output().kind, ResultKind::Text);
    }
}
