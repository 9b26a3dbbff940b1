//! The server's tasks: each one's current [`Task`], the events of its run for streams, and the
//! token that cancels its kickoff.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::types::{
    Artifact, ArtifactUpdateKind, Message, Role, StatusUpdateKind, StreamEvent, Task,
    TaskArtifactUpdateEvent, TaskKind, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// How many tasks are remembered; past it the oldest finished ones are forgotten.
const KEPT_TASKS: usize = 1024;
/// Events buffered for a slow stream reader before it misses some.
const EVENT_BUFFER: usize = 256;

/// One task and its run.
pub(crate) struct TaskEntry {
    task: Mutex<Task>,
    /// The task as it was created, the first event of its stream.
    submitted: Task,
    events: broadcast::Sender<StreamEvent>,
    /// Flips to `true` when the task reaches a final state.
    settled: watch::Sender<bool>,
    pub(crate) cancellation: CancellationToken,
}

impl TaskEntry {
    fn lock(&self) -> MutexGuard<'_, Task> {
        // A panic while the lock was held leaves a task that is still whole (each update is one
        // assignment), so a poisoned lock is used as it is.
        self.task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn snapshot(&self, history_length: Option<u32>) -> Task {
        let mut task = self.lock().clone();
        if let (Some(limit), Some(history)) = (history_length, task.history.as_mut()) {
            let keep = usize::try_from(limit).unwrap_or(usize::MAX);
            let skip = history.len().saturating_sub(keep);
            history.drain(..skip);
        }
        task
    }

    pub(crate) fn submitted(&self) -> Task {
        self.submitted.clone()
    }

    pub(crate) fn state(&self) -> TaskState {
        self.lock().status.state
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<StreamEvent> {
        self.events.subscribe()
    }

    /// Waits until the task is in a final state.
    pub(crate) async fn settled(&self) {
        let mut settled = self.settled.subscribe();
        // An error means the sender is gone, which happens only with the entry itself.
        let _ = settled.wait_for(|done| *done).await;
    }

    /// Moves the task to `state`; a message from the agent goes into its status and history.
    /// A final state is kept: nothing moves a task out of it.
    pub(crate) fn set_state(&self, state: TaskState, text: Option<String>) {
        let update = {
            let mut task = self.lock();
            if task.status.state.is_terminal() {
                return;
            }
            let message = text.map(|text| {
                let mut message = Message::new_text(Role::Agent, text);
                message.task_id = Some(task.id.clone());
                message.context_id = Some(task.context_id.clone());
                message
            });
            if let Some(message) = &message {
                task.history
                    .get_or_insert_with(Vec::new)
                    .push(message.clone());
            }
            task.status = TaskStatus::now(state, message);
            TaskStatusUpdateEvent {
                kind: StatusUpdateKind::StatusUpdate,
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
                is_final: state.is_terminal(),
                metadata: None,
            }
        };
        // No subscriber is fine: nobody streams this task.
        let _ = self.events.send(StreamEvent::StatusUpdate(update));
        if state.is_terminal() {
            self.settled.send_replace(true);
        }
    }

    pub(crate) fn add_artifact(&self, artifact: Artifact) {
        let update = {
            let mut task = self.lock();
            task.artifacts
                .get_or_insert_with(Vec::new)
                .push(artifact.clone());
            TaskArtifactUpdateEvent {
                kind: ArtifactUpdateKind::ArtifactUpdate,
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append: Some(false),
                last_chunk: Some(true),
                metadata: None,
            }
        };
        let _ = self.events.send(StreamEvent::ArtifactUpdate(update));
    }
}

/// Every task the server knows, by id.
#[derive(Default)]
pub(crate) struct Tasks {
    inner: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    by_id: HashMap<String, Arc<TaskEntry>>,
    order: VecDeque<String>,
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new `submitted` task for `message` (which opens its history).
    pub(crate) fn create(&self, mut message: Message) -> Arc<TaskEntry> {
        let id = uuid::Uuid::new_v4().to_string();
        let context_id = message
            .context_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        message.task_id = Some(id.clone());
        message.context_id = Some(context_id.clone());
        let task = Task {
            kind: TaskKind::Task,
            id: id.clone(),
            context_id,
            status: TaskStatus::now(TaskState::Submitted, None),
            artifacts: None,
            history: Some(vec![message]),
            metadata: None,
        };
        let entry = Arc::new(TaskEntry {
            submitted: task.clone(),
            task: Mutex::new(task),
            events: broadcast::channel(EVENT_BUFFER).0,
            settled: watch::channel(false).0,
            cancellation: CancellationToken::new(),
        });
        let mut known = self.lock();
        known.by_id.insert(id.clone(), Arc::clone(&entry));
        known.order.push_back(id);
        if known.order.len() > KEPT_TASKS {
            let finished = known.order.iter().position(|id| {
                known
                    .by_id
                    .get(id)
                    .is_some_and(|entry| entry.state().is_terminal())
            });
            if let Some(index) = finished
                && let Some(old) = known.order.remove(index)
            {
                known.by_id.remove(&old);
            }
        }
        entry
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<TaskEntry>> {
        self.lock().by_id.get(id).cloned()
    }
}
