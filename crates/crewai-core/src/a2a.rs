//! An agent's remote A2A agents (`a2a:`) in a run: each one a tool the agent delegates to,
//! named and described from the remote agent's card. The card is fetched when a task of the
//! agent first needs it, once per kickoff; the conversation (its context id, its turns) lasts
//! the kickoff.
//!
//! ```no_run
//! use crewai_core::Agent;
//! use crewai_core::a2a::A2aClientConfig;
//! # fn demo(llm: std::sync::Arc<dyn crewai_llm::Llm>) -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder()
//!     .role("Coordinator")
//!     .goal("Get the research done")
//!     .backstory("Knows who to ask.")
//!     .llm(llm)
//!     .a2a(A2aClientConfig::new("http://127.0.0.1:8000")?.max_turns(3))
//!     .build()?;
//! # drop(agent); Ok(()) }
//! ```
//!
//! What the remote agent's answers become (CrewAI's mapping): a completed task's artifacts (or
//! a direct message) are the tool's result, the task's final answer as it is with
//! `trust_remote_completion_status`; an `input-required` task's question is the result, and the
//! next call continues that task; `failed`, `rejected`, `canceled` and `auth-required` are
//! tool errors naming the state and the remote's message, as are timeouts, a peer outside the
//! protocol and the end of `max_turns`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput, ToolSet};
use serde_json::{Value, json};
use uuid::Uuid;

use crewai_a2a::types::TaskState;
pub use crewai_a2a::{
    A2aAuth, A2aClientConfig, A2aError, A2aUpdates, Conversation, DEFAULT_A2A_TIMEOUT,
    DEFAULT_MAX_TURNS, DEFAULT_POLL_INTERVAL, PROTOCOL_VERSION, Reply,
};

use crate::events::{EventBus, EventKind};
use crate::kickoff_slots::KickoffSlots;

/// The kickoff's conversations, by (agent, entry of its `a2a:` list). `None`: a remote agent
/// without `fail_fast` that could not be reached, which the agent works without.
#[derive(Clone, Default)]
pub(crate) struct A2aSessions {
    remotes: KickoffSlots<(Uuid, usize), Option<Arc<Conversation>>>,
}

/// Who is asking for the remote agents, for the events.
pub(crate) struct A2aRequester<'a> {
    pub agent_id: Uuid,
    pub agent_role: &'a str,
    pub task_name: Option<&'a str>,
    pub parent: Option<Uuid>,
}

impl A2aSessions {
    /// `tools` with a delegation tool for each remote agent of `remotes`, connecting to those
    /// this kickoff has not reached yet.
    pub(crate) async fn add_tools(
        &self,
        remotes: &[A2aClientConfig],
        tools: &mut ToolSet,
        events: &EventBus,
        requester: &A2aRequester<'_>,
    ) -> Result<(), A2aError> {
        for (index, config) in remotes.iter().enumerate() {
            let connected = self
                .remotes
                .get_or_open((requester.agent_id, index), || {
                    connect(config, events, requester)
                })
                .await?;
            if let Some(conversation) = connected.as_ref() {
                let tool = RemoteAgentTool::new(Arc::clone(conversation), events.clone());
                tools.insert(
                    ToolHandle::from_tool(tool)
                        .with_result_as_answer(config.trust_remote_completion_status),
                );
            }
        }
        Ok(())
    }
}

async fn connect(
    config: &A2aClientConfig,
    events: &EventBus,
    requester: &A2aRequester<'_>,
) -> Result<Option<Arc<Conversation>>, A2aError> {
    match Conversation::connect(config.clone()).await {
        Ok(conversation) => Ok(Some(Arc::new(conversation))),
        Err(error) => {
            events.emit_with(requester.parent, || EventKind::A2aDelegationFailed {
                endpoint: config.endpoint.to_string(),
                a2a_agent_name: None,
                turn_number: 0,
                agent_role: Some(requester.agent_role.to_string()),
                task_name: requester.task_name.map(str::to_string),
                error: crewai_llm::error_chain(&error),
            });
            if config.fail_fast {
                return Err(error);
            }
            tracing::warn!(
                endpoint = %config.endpoint,
                "agent '{}' works without the remote A2A agent (fail_fast is false): {}",
                requester.agent_role,
                crewai_llm::error_chain(&error)
            );
            Ok(None)
        }
    }
}

/// The delegation tool of one remote agent.
struct RemoteAgentTool {
    conversation: Arc<Conversation>,
    events: EventBus,
    description: String,
}

impl RemoteAgentTool {
    fn new(conversation: Arc<Conversation>, events: EventBus) -> RemoteAgentTool {
        let card = conversation.client().card();
        let skills: Vec<String> = card
            .skills
            .iter()
            .map(|skill| format!("{} ({})", skill.name, skill.description.trim()))
            .collect();
        let skills = if skills.is_empty() {
            String::new()
        } else {
            format!(" Its skills: {}.", skills.join("; "))
        };
        let description = format!(
            "Delegate to the remote agent '{}' (A2A): {}{skills} Put the whole request, with \
             the context it needs, in `message`; it answers with its result, or asks a \
             question you answer by calling again (at most {} messages in this run).",
            card.name,
            card.description.trim(),
            conversation.config().max_turns
        );
        RemoteAgentTool {
            conversation,
            events,
            description,
        }
    }
}

#[async_trait]
impl Tool for RemoteAgentTool {
    fn name(&self) -> &str {
        self.conversation.agent_name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "What to ask the remote agent, self-contained."
                }
            },
            "required": ["message"]
        })
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(message) = args.get("message").and_then(Value::as_str) else {
            return Err(ToolError::InvalidArguments(
                "`message` (text) is required: what to ask the remote agent".into(),
            ));
        };
        let endpoint = self.conversation.client().rpc_url().to_string();
        let agent_name = self.conversation.agent_name().to_string();
        let parent = ctx
            .parent_event_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok());
        let started = self
            .events
            .emit_with(parent, || EventKind::A2aDelegationStarted {
                endpoint: endpoint.clone(),
                a2a_agent_name: agent_name.clone(),
                message: message.to_string(),
                agent_role: ctx.agent_role.clone(),
                task_name: ctx.task_name.clone(),
            });
        let clock = Instant::now();
        match self.conversation.ask(message, &ctx.cancellation).await {
            Ok(reply) => {
                self.events
                    .emit_with(Some(started), || EventKind::A2aDelegationCompleted {
                        endpoint: endpoint.clone(),
                        a2a_agent_name: agent_name.clone(),
                        context_id: reply.context_id.clone(),
                        state: reply.state.as_str().to_string(),
                        result: reply.text.clone(),
                        turn_number: reply.turn,
                        agent_role: ctx.agent_role.clone(),
                        task_name: ctx.task_name.clone(),
                        duration_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
                    });
                self.observation(reply)
            }
            Err(error) => {
                self.events
                    .emit_with(Some(started), || EventKind::A2aDelegationFailed {
                        endpoint: endpoint.clone(),
                        a2a_agent_name: Some(agent_name.clone()),
                        turn_number: 0,
                        agent_role: ctx.agent_role.clone(),
                        task_name: ctx.task_name.clone(),
                        error: crewai_llm::error_chain(&error),
                    });
                Err(match error {
                    A2aError::Cancelled { .. } => ToolError::Cancelled,
                    other => ToolError::Service {
                        action: format!("the remote agent '{agent_name}' gave no answer"),
                        source: Box::new(other),
                    },
                })
            }
        }
    }
}

impl RemoteAgentTool {
    fn observation(&self, reply: Reply) -> Result<ToolOutput, ToolError> {
        if reply.state == TaskState::Completed {
            return Ok(ToolOutput::Text(reply.text));
        }
        let question = format!(
            "The remote agent '{}' needs more input before it can finish: {}\nCall '{}' again \
             with your answer to continue ({} of {} messages used).",
            self.conversation.agent_name(),
            reply.text,
            self.conversation.agent_name(),
            reply.turn,
            self.conversation.config().max_turns
        );
        // With `trust_remote_completion_status` a result is the task's answer; a question must
        // not be, so it comes back as a tool error the agent reads and acts on.
        if self.conversation.config().trust_remote_completion_status {
            Err(ToolError::Failed(question))
        } else {
            Ok(ToolOutput::Text(question))
        }
    }
}
