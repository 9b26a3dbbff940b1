//! The A2A server for a crew (cargo feature `server`): the agent card, and JSON-RPC at `/` with
//! `message/send`, `message/stream` (SSE), `tasks/get` and `tasks/cancel`. Each A2A task is
//! one kickoff, run by the caller's [`CrewRunner`]; `tasks/cancel` cancels it through the
//! token the runner is handed.
//!
//! Requests are limited in size ([`A2aServer::max_request_bytes`], 413 past it); with a bearer
//! token set, every JSON-RPC call must carry `Authorization: Bearer <token>` (compared in
//! constant time; the card stays public and names the scheme).

mod inputs;
mod tasks;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use inputs::InputSpec;
use tasks::{TaskEntry, Tasks};

use crate::jsonrpc::{self, ErrorObject, RequestId, Version, code};
use crate::types::{
    AgentCard, Artifact, MessageSendParams, Part, StreamEvent, TaskIdParams, TaskQueryParams,
    TaskState,
};

/// The default request size limit.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// How long `tasks/cancel` waits for the kickoff to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// One kickoff the server asks for.
pub struct CrewRun {
    /// The A2A task id (a fresh id; the runner may use it as its run id).
    pub task_id: String,
    pub inputs: Map<String, Value>,
    /// Reports progress ("task 'research' started") as `working` status updates.
    pub progress: Progress,
    /// Cancelled by `tasks/cancel`; the kickoff must stop and return.
    pub cancellation: CancellationToken,
}

/// How a kickoff ended, when it did not give its output.
#[derive(Debug, Clone)]
pub enum RunFailure {
    Failed(String),
    Cancelled(String),
}

/// Runs the crew. `crewai a2a serve` implements it with the journaled run of `crewai run`.
pub trait CrewRunner: Send + Sync + 'static {
    /// Runs one kickoff to its end: the crew's final output, or why there is none.
    fn run(&self, run: CrewRun) -> BoxFuture<'static, Result<String, RunFailure>>;
}

/// Sends progress lines of a run to its task.
#[derive(Clone)]
pub struct Progress(mpsc::UnboundedSender<String>);

impl Progress {
    /// One `working` status update with `text` as the agent's message.
    pub fn working(&self, text: impl Into<String>) {
        // The task is gone only when the server is: nothing to report to.
        let _ = self.0.send(text.into());
    }
}

/// The server's settings; [`A2aServer::router`] makes the axum app.
pub struct A2aServer {
    card: AgentCard,
    inputs: InputSpec,
    runner: Arc<dyn CrewRunner>,
    token: Option<String>,
    max_request_bytes: usize,
}

impl A2aServer {
    /// `card` is served as it is, except that a bearer token adds its security scheme.
    pub fn new(card: AgentCard, inputs: InputSpec, runner: Arc<dyn CrewRunner>) -> A2aServer {
        A2aServer {
            card,
            inputs,
            runner,
            token: None,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }

    crewai_llm::setters! {
        /// Every JSON-RPC call must send `Authorization: Bearer <token>`.
        pub fn bearer_token(token: impl Into<String>) => token = Some(token.into());
        /// Requests larger than this are refused (413).
        pub fn max_request_bytes(limit: usize) => max_request_bytes = limit;
    }

    pub fn router(self) -> Router {
        let mut card = self.card;
        if self.token.is_some() {
            card.security_schemes = Some(
                json!({"bearer": {"type": "http", "scheme": "bearer"}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            card.security = Some(vec![
                json!({"bearer": []})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ]);
        }
        let card = Arc::new(card);
        let state = Arc::new(Shared {
            inputs: self.inputs,
            runner: self.runner,
            token: self.token,
            tasks: Tasks::default(),
        });
        let serve_card = move || {
            let card = Arc::clone(&card);
            async move { Json(card.as_ref().clone()) }
        };
        Router::new()
            .route(crate::AGENT_CARD_PATH, get(serve_card.clone()))
            // The path before A2A 0.3, still read by older clients.
            .route("/.well-known/agent.json", get(serve_card))
            .route("/", post(rpc))
            .layer(DefaultBodyLimit::max(self.max_request_bytes))
            .with_state(state)
    }
}

struct Shared {
    inputs: InputSpec,
    runner: Arc<dyn CrewRunner>,
    token: Option<String>,
    tasks: Tasks,
}

fn authorized(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(expected) = token else {
        return true;
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    use subtle::ConstantTimeEq as _;
    // Lengths differ for most wrong tokens; the comparison of equal lengths is constant-time.
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

async fn rpc(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(shared.token.as_deref(), &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({"error": "this A2A server needs `Authorization: Bearer <token>`"})),
        )
            .into_response();
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => {
            return failure(
                &RequestId::Null,
                ErrorObject::new(code::PARSE_ERROR, format!("the body is not JSON: {error}")),
            );
        }
    };
    let (id, method, params) = match envelope_parts(value) {
        Ok(parts) => parts,
        Err(refused) => {
            let (id, error) = *refused;
            return failure(&id, error);
        }
    };
    match method.as_str() {
        jsonrpc::method::SEND => match parse_params::<MessageSendParams>(params) {
            Ok(params) => send(&shared, &id, params).await,
            Err(error) => failure(&id, error),
        },
        jsonrpc::method::STREAM => match parse_params::<MessageSendParams>(params) {
            Ok(params) => stream(&shared, id, params),
            Err(error) => failure(&id, error),
        },
        jsonrpc::method::GET_TASK => match parse_params::<TaskQueryParams>(params) {
            Ok(params) => match shared.tasks.get(&params.id) {
                Some(entry) => success(&id, entry.snapshot(params.history_length)),
                None => failure(&id, task_not_found(&params.id)),
            },
            Err(error) => failure(&id, error),
        },
        jsonrpc::method::CANCEL_TASK => match parse_params::<TaskIdParams>(params) {
            Ok(params) => cancel(&shared, &id, &params.id).await,
            Err(error) => failure(&id, error),
        },
        "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => failure(
            &id,
            ErrorObject::new(
                code::PUSH_NOTIFICATION_NOT_SUPPORTED,
                "push notifications are not supported by this server (capabilities.pushNotifications is false)",
            ),
        ),
        "tasks/resubscribe" | "agent/getAuthenticatedExtendedCard" => failure(
            &id,
            ErrorObject::new(
                code::UNSUPPORTED_OPERATION,
                format!("`{method}` is not supported by this server"),
            ),
        ),
        other => failure(
            &id,
            ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "no method `{other}`; this A2A {} server answers message/send, message/stream, tasks/get and tasks/cancel",
                    crate::PROTOCOL_VERSION
                ),
            ),
        ),
    }
}

/// The id, method and params of a JSON-RPC request, or the error for a malformed one.
fn envelope_parts(
    value: Value,
) -> Result<(RequestId, String, Value), Box<(RequestId, ErrorObject)>> {
    let Value::Object(mut object) = value else {
        return Err(Box::new((
            RequestId::Null,
            ErrorObject::new(code::INVALID_REQUEST, "a JSON-RPC request is an object"),
        )));
    };
    let id = match object.remove("id") {
        None | Some(Value::Null) => RequestId::Null,
        Some(Value::String(text)) => RequestId::Text(text),
        Some(Value::Number(number)) if number.is_i64() => {
            RequestId::Number(number.as_i64().unwrap_or_default())
        }
        Some(_) => {
            return Err(Box::new((
                RequestId::Null,
                ErrorObject::new(code::INVALID_REQUEST, "`id` is a string or an integer"),
            )));
        }
    };
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(Box::new((
            id,
            ErrorObject::new(code::INVALID_REQUEST, "`jsonrpc` must be \"2.0\""),
        )));
    }
    let Some(Value::String(method)) = object.remove("method") else {
        return Err(Box::new((
            id,
            ErrorObject::new(code::INVALID_REQUEST, "`method` is missing or not text"),
        )));
    };
    Ok((id, method, object.remove("params").unwrap_or(Value::Null)))
}

fn parse_params<P: DeserializeOwned>(params: Value) -> Result<P, ErrorObject> {
    serde_json::from_value(params)
        .map_err(|error| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {error}")))
}

fn task_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(code::TASK_NOT_FOUND, format!("no task '{id}'"))
}

fn success(id: &RequestId, result: impl Serialize) -> Response {
    Json(jsonrpc::Success {
        jsonrpc: Version::V2,
        id,
        result,
    })
    .into_response()
}

fn failure(id: &RequestId, error: ErrorObject) -> Response {
    Json(jsonrpc::Failure {
        jsonrpc: Version::V2,
        id,
        error,
    })
    .into_response()
}

/// Checks the params and starts the task's kickoff; the receiver, subscribed before the run
/// starts, sees every update of it.
fn start(
    shared: &Arc<Shared>,
    params: MessageSendParams,
) -> Result<(Arc<TaskEntry>, broadcast::Receiver<StreamEvent>), ErrorObject> {
    if params
        .configuration
        .as_ref()
        .is_some_and(|c| c.push_notification_config.is_some())
    {
        return Err(ErrorObject::new(
            code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported by this server",
        ));
    }
    if let Some(task_id) = &params.message.task_id {
        // Each task is one kickoff, never left waiting for input: there is nothing to continue.
        return Err(match shared.tasks.get(task_id) {
            Some(entry) => ErrorObject::new(
                code::UNSUPPORTED_OPERATION,
                format!(
                    "task '{task_id}' is {}; a kickoff cannot be continued, send a new message without `taskId`",
                    entry.state().as_str()
                ),
            ),
            None => task_not_found(task_id),
        });
    }
    let inputs = shared
        .inputs
        .inputs_from(&params.message)
        .map_err(|message| ErrorObject::new(code::INVALID_PARAMS, message))?;
    let entry = shared.tasks.create(params.message);
    let updates = entry.subscribe();
    tokio::spawn(drive(Arc::clone(shared), Arc::clone(&entry), inputs));
    Ok((entry, updates))
}

/// Runs the kickoff of a task and moves the task along: working, the output as an artifact,
/// completed (or failed, or canceled).
async fn drive(shared: Arc<Shared>, entry: Arc<TaskEntry>, inputs: Map<String, Value>) {
    let (sender, mut lines) = mpsc::unbounded_channel();
    let task_id = entry.snapshot(Some(0)).id;
    entry.set_state(TaskState::Working, None);
    let run = shared.runner.run(CrewRun {
        task_id,
        inputs,
        progress: Progress(sender),
        cancellation: entry.cancellation.clone(),
    });
    // A runner that panics fails its task: a waiting `message/send` must not wait forever.
    let run = std::panic::AssertUnwindSafe(run)
        .catch_unwind()
        .map(|outcome| {
            outcome.unwrap_or_else(|_| {
                Err(RunFailure::Failed(
                    "the kickoff crashed (it panicked)".into(),
                ))
            })
        });
    tokio::pin!(run);
    let outcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            Some(line) = lines.recv() => entry.set_state(TaskState::Working, Some(line)),
        }
    };
    while let Ok(line) = lines.try_recv() {
        entry.set_state(TaskState::Working, Some(line));
    }
    match outcome {
        Ok(output) => {
            entry.add_artifact(Artifact {
                artifact_id: uuid::Uuid::new_v4().to_string(),
                name: Some("result".into()),
                description: Some("the crew's final output".into()),
                parts: vec![Part::text(output)],
                metadata: None,
                extensions: None,
            });
            entry.set_state(TaskState::Completed, None);
        }
        Err(RunFailure::Cancelled(why)) => entry.set_state(TaskState::Canceled, Some(why)),
        Err(RunFailure::Failed(why)) => entry.set_state(TaskState::Failed, Some(why)),
    }
}

async fn send(shared: &Arc<Shared>, id: &RequestId, params: MessageSendParams) -> Response {
    let blocking = params
        .configuration
        .as_ref()
        .and_then(|c| c.blocking)
        .unwrap_or(true);
    let history_length = params.configuration.as_ref().and_then(|c| c.history_length);
    match start(shared, params) {
        Ok((entry, _)) => {
            if blocking {
                entry.settled().await;
            }
            success(id, entry.snapshot(history_length))
        }
        Err(error) => failure(id, error),
    }
}

fn stream(shared: &Arc<Shared>, id: RequestId, params: MessageSendParams) -> Response {
    let (entry, updates) = match start(shared, params) {
        Ok(started) => started,
        Err(error) => return failure(&id, error),
    };
    // The task as it was created (submitted); the updates since follow it.
    let first = StreamEvent::Task(entry.submitted());
    let events = task_events(first, updates, entry);
    let id = Arc::new(id);
    let frames = events.map(move |event| {
        let frame = serde_json::to_string(&jsonrpc::Success {
            jsonrpc: Version::V2,
            id: id.as_ref(),
            result: event,
        })
        .unwrap_or_else(|error| {
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": code::INTERNAL_ERROR, "message": error.to_string()}})
                .to_string()
        });
        Ok::<_, Infallible>(Event::default().data(frame))
    });
    Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `first`, then the task's updates up to the final one.
fn task_events(
    first: StreamEvent,
    updates: broadcast::Receiver<StreamEvent>,
    entry: Arc<TaskEntry>,
) -> impl Stream<Item = StreamEvent> + Send {
    let rest = futures::stream::unfold(
        (updates, entry, false),
        |(mut updates, entry, done)| async move {
            if done {
                return None;
            }
            loop {
                match updates.recv().await {
                    Ok(event) => {
                        let last = matches!(&event, StreamEvent::StatusUpdate(u) if u.is_final);
                        return Some((event, (updates, entry, last)));
                    }
                    // A reader that fell behind skips what it missed; the final state still
                    // comes (or is read from the task below).
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    futures::stream::iter([first]).chain(rest)
}

async fn cancel(shared: &Arc<Shared>, id: &RequestId, task_id: &str) -> Response {
    let Some(entry) = shared.tasks.get(task_id) else {
        return failure(id, task_not_found(task_id));
    };
    let state = entry.state();
    if state.is_terminal() {
        return failure(
            id,
            ErrorObject::new(
                code::TASK_NOT_CANCELABLE,
                format!("task '{task_id}' is already {}", state.as_str()),
            ),
        );
    }
    entry.cancellation.cancel();
    if tokio::time::timeout(CANCEL_WAIT, entry.settled())
        .await
        .is_err()
    {
        tracing::warn!(
            task = task_id,
            "the kickoff did not stop within {CANCEL_WAIT:?} of its cancel"
        );
    }
    success(id, entry.snapshot(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_compared_whole() {
        let mut headers = HeaderMap::new();
        assert!(authorized(None, &headers));
        assert!(!authorized(Some("s3cret"), &headers));
        headers.insert(header::AUTHORIZATION, "Bearer s3cre".parse().unwrap());
        assert!(!authorized(Some("s3cret"), &headers));
        headers.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(authorized(Some("s3cret"), &headers));
    }

    #[test]
    fn malformed_envelopes_are_named() {
        let (_, error) = *envelope_parts(json!([1])).unwrap_err();
        assert_eq!(error.code, code::INVALID_REQUEST);
        let (id, error) =
            *envelope_parts(json!({"id": 3, "jsonrpc": "1.0", "method": "x"})).unwrap_err();
        assert_eq!(
            (id, error.code),
            (RequestId::Number(3), code::INVALID_REQUEST)
        );
        let (_, method, _) =
            envelope_parts(json!({"id": "a", "jsonrpc": "2.0", "method": "tasks/get"})).unwrap();
        assert_eq!(method, "tasks/get");
    }
}
