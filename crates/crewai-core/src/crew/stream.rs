//! [`Crew::kickoff_stream`]: a kickoff as a stream of text chunks and tool calls.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::events::{CaughtPanic, Event, EventBus, EventKind, PanicSite};
use crate::interpolate::Inputs;
use crate::output::CrewOutput;

use super::execute::{AbortOnDrop, join_failure};
use super::kickoff::{RunPlan, RunRequest};
use super::{Crew, CrewError, KickoffOptions};

impl Crew {
    /// Runs the crew and streams text chunks (from the model's streamed replies) and tool calls as
    /// they happen; the [`CrewStream`] ends with the kickoff's result. The kickoff runs on the
    /// current tokio runtime and is abandoned if the stream is dropped.
    pub fn kickoff_stream(&self, inputs: Inputs) -> CrewStream {
        let (sender, chunks) = mpsc::unbounded_channel();
        let claim = Arc::new(Mutex::new(StreamClaim::default()));
        let listener_claim = claim.clone();
        let listener = self.spec.events.subscribe(move |event| {
            if let Some(chunk) = listener_claim
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .chunk_for(event)
            {
                let _ = sender.send(chunk);
            }
        });
        let crew = self.clone();
        let result = tokio::spawn(async move {
            let outcome = crew.run_claimed(inputs, claim).await;
            crew.spec.events.unsubscribe(listener);
            outcome
        });
        CrewStream {
            crew: self.spec.name.clone(),
            events: self.spec.events.clone(),
            chunks,
            result: AbortOnDrop(result),
        }
    }

    async fn run_claimed(
        &self,
        inputs: Inputs,
        claim: Arc<Mutex<StreamClaim>>,
    ) -> Result<CrewOutput, CrewError> {
        claim.lock().unwrap_or_else(|p| p.into_inner()).armed_on =
            Some(std::thread::current().id());
        self.run(RunRequest {
            inputs,
            plan: RunPlan::default(),
            stream: true,
            claim: Some(claim),
            options: KickoffOptions::default(),
        })
        .await
    }
}

/// What a chunk of a streamed kickoff carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamChunkType {
    Text,
    ToolCall,
}

/// A tool call announced in the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamToolCall {
    pub tool_name: String,
    pub arguments: Value,
}

/// One piece of a streamed kickoff (CrewAI's `StreamChunk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    /// Reply text (empty for tool calls).
    pub content: String,
    pub chunk_type: StreamChunkType,
    pub task_name: Option<String>,
    pub agent_role: Option<String>,
    pub tool_call: Option<StreamToolCall>,
}

/// Picks this kickoff's events off a bus other kickoffs may share: the kickoff's start event is
/// recognised while armed (it is emitted on the arming thread, synchronously), and from then on
/// every descendant of it.
#[derive(Default)]
pub(super) struct StreamClaim {
    pub(super) armed_on: Option<std::thread::ThreadId>,
    ours: std::collections::HashSet<Uuid>,
}

impl StreamClaim {
    fn chunk_for(&mut self, event: &Event) -> Option<StreamChunk> {
        let mine = if self.ours.is_empty() {
            matches!(event.kind, EventKind::CrewKickoffStarted { .. })
                && self.armed_on == Some(std::thread::current().id())
        } else {
            event
                .parent_event_id
                .is_some_and(|parent| self.ours.contains(&parent))
        };
        if !mine {
            return None;
        }
        self.ours.insert(event.event_id);
        match &event.kind {
            EventKind::LlmStreamChunk {
                agent_role,
                task_name,
                chunk,
                ..
            } if !chunk.is_empty() => Some(StreamChunk {
                content: chunk.clone(),
                chunk_type: StreamChunkType::Text,
                task_name: task_name.clone(),
                agent_role: agent_role.clone(),
                tool_call: None,
            }),
            EventKind::ToolUsageStarted {
                tool_name,
                tool_args,
                agent_role,
                task_name,
            } => Some(StreamChunk {
                content: String::new(),
                chunk_type: StreamChunkType::ToolCall,
                task_name: task_name.clone(),
                agent_role: agent_role.clone(),
                tool_call: Some(StreamToolCall {
                    tool_name: tool_name.clone(),
                    arguments: tool_args.clone(),
                }),
            }),
            _ => None,
        }
    }
}

/// A streamed kickoff: iterate the chunks, then take the result with [`CrewStream::result`].
pub struct CrewStream {
    crew: String,
    /// The crew's bus, where a panic of the kickoff's own task is counted.
    events: EventBus,
    chunks: mpsc::UnboundedReceiver<StreamChunk>,
    /// Dropping the stream abandons the kickoff: nothing keeps running unobserved.
    result: AbortOnDrop<Result<CrewOutput, CrewError>>,
}

impl CrewStream {
    /// Waits for the kickoff to finish (chunks not yet read are dropped).
    pub async fn result(self) -> Result<CrewOutput, CrewError> {
        let CrewStream {
            crew,
            events,
            mut result,
            ..
        } = self;
        (&mut result.0).await.map_err(|join| {
            let (message, panicked) = join_failure(join);
            if panicked {
                events.report_panic(
                    None,
                    CaughtPanic::new(PanicSite::Kickoff, crew.clone(), message.clone()),
                );
            }
            CrewError::TaskPanicked {
                crew,
                task: "kickoff".into(),
                message,
            }
        })?
    }
}

impl Stream for CrewStream {
    type Item = StreamChunk;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamChunk>> {
        self.chunks.poll_recv(cx)
    }
}
