//! [`Conversation`]: an agent's talk with one remote agent over a kickoff: one context id for
//! every turn, a task left `input-required` continued by the next message, at most
//! `max_turns` messages, each turn followed to its end by streaming or polling.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::client::A2aClient;
use crate::config::{A2aClientConfig, A2aUpdates, DEFAULT_POLL_INTERVAL};
use crate::error::A2aError;
use crate::types::{
    Artifact, Message, MessageSendConfiguration, MessageSendParams, Role, SendMessageResult,
    StreamEvent, Task, TaskState, parts_text,
};

/// The bound on the `tasks/cancel` sent after the caller gave up.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// How one turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// `Completed` for a direct message as well.
    pub state: TaskState,
    /// The remote agent's answer: the artifacts' text, else its last message's.
    pub text: String,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// The turn this was, from 1.
    pub turn: u32,
}

#[derive(Debug, Default)]
struct Thread {
    context_id: Option<String>,
    /// The task waiting for input, continued by the next message.
    open_task: Option<String>,
    turns: u32,
}

/// A connected remote agent and the state of the conversation with it.
#[derive(Debug)]
pub struct Conversation {
    client: A2aClient,
    config: A2aClientConfig,
    thread: Mutex<Thread>,
}

impl Conversation {
    /// Fetches the card (see [`A2aClient::connect`]).
    pub async fn connect(config: A2aClientConfig) -> Result<Conversation, A2aError> {
        let client = A2aClient::connect(&config).await?;
        Ok(Conversation {
            client,
            config,
            thread: Mutex::new(Thread::default()),
        })
    }

    pub fn client(&self) -> &A2aClient {
        &self.client
    }

    pub fn config(&self) -> &A2aClientConfig {
        &self.config
    }

    /// The remote agent's name, from its card.
    pub fn agent_name(&self) -> &str {
        &self.client.card().name
    }

    /// Sends `text` as the next turn and waits (at most the config's timeout) for the remote
    /// task to end or to ask for input. Failed, rejected, canceled and auth-required tasks are
    /// [`A2aError::TaskEnded`]; `cancel` abandons the turn and asks the remote to cancel.
    pub async fn ask(&self, text: &str, cancel: &CancellationToken) -> Result<Reply, A2aError> {
        // One turn at a time: the context and open task of a turn are the next one's.
        let mut thread = self.thread.lock().await;
        if thread.turns >= self.config.max_turns {
            return Err(A2aError::MaxTurns {
                agent: self.agent_name().to_string(),
                max_turns: self.config.max_turns,
            });
        }
        thread.turns += 1;
        let turn = thread.turns;
        let mut message = Message::new_text(Role::User, text);
        message.context_id = thread.context_id.clone();
        message.task_id = thread.open_task.take();
        let tracker = Tracker::default();
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(self.config.timeout, self.follow(message, &tracker)) => {
                outcome.unwrap_or_else(|_| Err(A2aError::Timeout {
                    url: self.client.rpc_url().to_string(),
                    timeout: self.config.timeout,
                }))
            }
            () = cancel.cancelled() => Err(A2aError::Cancelled { agent: self.agent_name().to_string() }),
        };
        let mut reply = match outcome {
            Ok(reply) => reply,
            Err(error) => {
                if matches!(error, A2aError::Cancelled { .. } | A2aError::Timeout { .. }) {
                    self.abandon(tracker.task_id().await).await;
                }
                return Err(error);
            }
        };
        reply.turn = turn;
        if reply.context_id.is_some() {
            thread.context_id.clone_from(&reply.context_id);
        }
        match reply.state {
            TaskState::Completed => Ok(reply),
            TaskState::InputRequired => {
                thread.open_task.clone_from(&reply.task_id);
                Ok(reply)
            }
            state => Err(A2aError::TaskEnded {
                agent: self.agent_name().to_string(),
                state,
                message: Some(reply.text).filter(|t| !t.is_empty()),
            }),
        }
    }

    /// Asks the remote to cancel a task this side stopped waiting for (bounded; a failure only
    /// leaves the remote task running, which its own server bounds).
    async fn abandon(&self, task_id: Option<String>) {
        if let Some(id) = task_id {
            let cancelled = tokio::time::timeout(CANCEL_GRACE, self.client.cancel_task(&id)).await;
            if !matches!(cancelled, Ok(Ok(_))) {
                tracing::warn!(
                    agent = self.agent_name(),
                    task = id,
                    "the remote task could not be cancelled"
                );
            }
        }
    }

    async fn follow(&self, message: Message, tracker: &Tracker) -> Result<Reply, A2aError> {
        match self.config.updates {
            A2aUpdates::Streaming if self.client.can_stream() => {
                self.follow_stream(message, tracker).await
            }
            A2aUpdates::Streaming => {
                self.follow_polls(message, DEFAULT_POLL_INTERVAL, tracker)
                    .await
            }
            A2aUpdates::Polling { interval } => self.follow_polls(message, interval, tracker).await,
        }
    }

    async fn follow_stream(&self, message: Message, tracker: &Tracker) -> Result<Reply, A2aError> {
        let params = MessageSendParams {
            message,
            configuration: None,
            metadata: None,
        };
        let mut events = std::pin::pin!(self.client.stream_message(&params).await?);
        let mut seen = Seen::default();
        while let Some(event) = events.next().await {
            match event? {
                StreamEvent::Message(message) => return Ok(seen.direct(message)),
                StreamEvent::Task(task) => {
                    tracker.set(&task.id).await;
                    seen.task(task);
                }
                StreamEvent::StatusUpdate(update) => {
                    tracker.set(&update.task_id).await;
                    seen.ids(&update.task_id, &update.context_id);
                    seen.state = update.status.state;
                    if let Some(message) = update.status.message {
                        seen.last_message = Some(message.text());
                    }
                    if update.is_final || seen.state.is_terminal() || seen.state.is_interrupted() {
                        return Ok(seen.reply());
                    }
                }
                StreamEvent::ArtifactUpdate(update) => {
                    tracker.set(&update.task_id).await;
                    seen.ids(&update.task_id, &update.context_id);
                    seen.artifact(update.artifact, update.append == Some(true));
                }
            }
            if seen.state.is_terminal() || seen.state.is_interrupted() {
                return Ok(seen.reply());
            }
        }
        Err(A2aError::StreamEndedEarly {
            url: self.client.rpc_url().to_string(),
            last: seen.state.as_str().to_string(),
        })
    }

    async fn follow_polls(
        &self,
        message: Message,
        interval: Duration,
        tracker: &Tracker,
    ) -> Result<Reply, A2aError> {
        let params = MessageSendParams {
            message,
            configuration: Some(MessageSendConfiguration {
                blocking: Some(false),
                ..MessageSendConfiguration::default()
            }),
            metadata: None,
        };
        let mut task = match self.client.send_message(&params).await? {
            SendMessageResult::Message(message) => return Ok(Seen::default().direct(message)),
            SendMessageResult::Task(task) => task,
        };
        tracker.set(&task.id).await;
        while !(task.status.state.is_terminal() || task.status.state.is_interrupted()) {
            tokio::time::sleep(interval).await;
            task = self.client.get_task(&task.id).await?;
        }
        let mut seen = Seen::default();
        seen.task(task);
        Ok(seen.reply())
    }
}

/// The id of the remote task of the turn in progress, for the cancel on abandon.
#[derive(Default)]
struct Tracker(Mutex<Option<String>>);

impl Tracker {
    async fn set(&self, id: &str) {
        *self.0.lock().await = Some(id.to_string());
    }
    async fn task_id(&self) -> Option<String> {
        self.0.lock().await.clone()
    }
}

/// What a turn has shown so far.
struct Seen {
    state: TaskState,
    task_id: Option<String>,
    context_id: Option<String>,
    artifacts: Vec<Artifact>,
    last_message: Option<String>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            state: TaskState::Submitted,
            task_id: None,
            context_id: None,
            artifacts: Vec::new(),
            last_message: None,
        }
    }
}

impl Seen {
    fn ids(&mut self, task_id: &str, context_id: &str) {
        self.task_id = Some(task_id.to_string());
        self.context_id = Some(context_id.to_string());
    }

    fn task(&mut self, task: Task) {
        self.ids(&task.id, &task.context_id);
        self.state = task.status.state;
        if let Some(message) = &task.status.message {
            self.last_message = Some(message.text());
        } else if let Some(last) = task
            .history
            .iter()
            .flatten()
            .rev()
            .find(|m| m.role == Role::Agent)
        {
            self.last_message = Some(last.text());
        }
        for artifact in task.artifacts.into_iter().flatten() {
            self.artifact(artifact, false);
        }
    }

    /// An artifact replaces one of the same id, or is appended to it (`append: true`).
    fn artifact(&mut self, artifact: Artifact, append: bool) {
        match self
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == artifact.artifact_id)
        {
            Some(existing) if append => existing.parts.extend(artifact.parts),
            Some(existing) => *existing = artifact,
            None => self.artifacts.push(artifact),
        }
    }

    fn direct(self, message: Message) -> Reply {
        Reply {
            state: TaskState::Completed,
            text: message.text(),
            task_id: message.task_id.clone(),
            context_id: message.context_id.clone().or(self.context_id),
            turn: 0,
        }
    }

    fn reply(self) -> Reply {
        let artifacts: Vec<String> = self
            .artifacts
            .iter()
            .map(|a| parts_text(&a.parts))
            .filter(|t| !t.is_empty())
            .collect();
        // An interrupted task's question is its status message, whatever it produced so far.
        let text = if artifacts.is_empty() || self.state != TaskState::Completed {
            self.last_message
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| artifacts.join("\n\n"))
        } else {
            artifacts.join("\n\n")
        };
        Reply {
            state: self.state,
            text,
            task_id: self.task_id,
            context_id: self.context_id,
            turn: 0,
        }
    }
}
