//! What runs a kickoff's crew: the caller's side of the server (the CLI runs each kickoff
//! through its journaled run path).

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::queue::AttemptEnd;

/// Where a run reports its progress (`task_started`, `task_completed`, ...): each report
/// becomes an event of the kickoff, shown by `GET /status/{id}` and streamed by
/// `GET /runs/{id}/events`.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    sender: mpsc::UnboundedSender<(String, Value)>,
}

impl ProgressSink {
    pub(crate) fn channel() -> (ProgressSink, mpsc::UnboundedReceiver<(String, Value)>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (ProgressSink { sender }, receiver)
    }

    /// Reports one event; after the attempt ended it is dropped (nobody is listening).
    pub fn emit(&self, kind: impl Into<String>, data: Value) {
        // A closed channel means the attempt is over: the report has nowhere to go.
        let _ = self.sender.send((kind.into(), data));
    }
}

/// One attempt at a kickoff, as a worker hands it to the runner.
#[derive(Debug)]
pub struct KickoffJob {
    /// Also the run's id in the journal: a later attempt resumes the run under it.
    pub kickoff_id: String,
    pub inputs: Map<String, Value>,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub progress: ProgressSink,
    /// Cancelled by `POST /runs/{id}/cancel`, a lost lease or the worker shutting down.
    pub cancellation: CancellationToken,
}

/// The crew behind the server.
pub trait KickoffRunner: Send + Sync + 'static {
    /// The inputs the crew's `{placeholders}` use (`GET /inputs`).
    fn required_inputs(&self) -> Vec<String>;
    /// The inputs the crew file gives defaults for.
    fn default_inputs(&self) -> Map<String, Value>;
    /// The task names in order, for per-task progress.
    fn task_names(&self) -> Vec<String>;
    /// What is wrong with `inputs` (empty: nothing), in the words `crewai run` uses.
    fn check_inputs(&self, inputs: &Map<String, Value>) -> Vec<String>;
    /// Runs (or resumes) the kickoff to its end.
    fn run(&self, job: KickoffJob) -> BoxFuture<'static, AttemptEnd>;
}
