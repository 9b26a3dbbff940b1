//! The HTTP API (see [`crate::openapi`] for the document that describes it).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::QueueError;
use crate::queue::{KickoffEvent, KickoffQueue, KickoffRecord, KickoffState, Submitted};
use crate::runner::KickoffRunner;

/// Requests larger than this are refused with 413 unless set otherwise.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// The longest `Idempotency-Key` accepted.
const MAX_IDEMPOTENCY_KEY: usize = 255;
/// How often an event stream looks for new events.
const EVENT_POLL: Duration = Duration::from_millis(200);
/// What a 503 tells the client to wait.
const RETRY_AFTER_SECONDS: u64 = 2;

/// The API over a queue and a crew.
#[derive(Clone)]
pub struct KickoffApi {
    queue: Arc<dyn KickoffQueue>,
    runner: Arc<dyn KickoffRunner>,
    token: Option<Arc<str>>,
    max_request_bytes: usize,
}

impl KickoffApi {
    pub fn new(queue: Arc<dyn KickoffQueue>, runner: Arc<dyn KickoffRunner>) -> Self {
        KickoffApi {
            queue,
            runner,
            token: None,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }

    /// Every request but `GET /openapi.json` must send `Authorization: Bearer <token>`.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Arc::from(token.into()));
        self
    }

    pub fn max_request_bytes(mut self, limit: usize) -> Self {
        self.max_request_bytes = limit;
        self
    }

    pub fn router(self) -> Router {
        let limit = self.max_request_bytes;
        let protected = Router::new()
            .route("/inputs", get(inputs))
            .route("/kickoff", post(kickoff))
            .route("/status/{id}", get(status))
            .route("/runs/{id}/events", get(events))
            .route("/runs/{id}/cancel", post(cancel))
            .route("/runs/{id}/resume", post(resume))
            .route_layer(middleware::from_fn_with_state(self.clone(), authorize));
        Router::new()
            .route("/openapi.json", get(openapi))
            .merge(protected)
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(limit))
            .with_state(self)
    }
}

/// A typed error answer: `{"error": {"code", "message"}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    fn unknown_kickoff(id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_kickoff",
            format!("no kickoff has id '{id}'"),
        )
    }
}

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> Self {
        let (status, code) = match &error {
            QueueError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            QueueError::IdempotencyConflict { .. } => {
                (StatusCode::CONFLICT, "idempotency_conflict")
            }
            QueueError::NotResumable { .. } => (StatusCode::CONFLICT, "not_resumable"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "queue_failed"),
        };
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ApiError::new(status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if let Some(details) = self.details {
            body["error"]["details"] = details;
        }
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

async fn authorize(
    State(api): State<KickoffApi>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(expected) = &api.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        use subtle::ConstantTimeEq as _;
        let matches = given.len() == expected.len()
            && bool::from(given.as_bytes().ct_eq(expected.as_bytes()));
        if !matches {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send the server's token as `Authorization: Bearer <token>`",
            ));
        }
    }
    Ok(next.run(request).await)
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; GET /openapi.json lists them",
    )
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

async fn inputs(State(api): State<KickoffApi>) -> Json<Value> {
    Json(json!({
        "inputs": api.runner.required_inputs(),
        "defaults": api.runner.default_inputs(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KickoffRequest {
    #[serde(default)]
    inputs: Map<String, Value>,
}

async fn kickoff(
    State(api): State<KickoffApi>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "unreadable_body"
        };
        ApiError::new(status, code, rejection.body_text())
    })?;
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not_json",
            "send the kickoff as `Content-Type: application/json`",
        ));
    }
    let request: KickoffRequest = serde_json::from_slice(&body).map_err(|error| {
        let (status, code) = match error.classify() {
            serde_json::error::Category::Data => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
            }
            _ => (StatusCode::BAD_REQUEST, "malformed_json"),
        };
        ApiError::new(
            status,
            code,
            format!("the body must be {{\"inputs\": {{...}}}}: {error}"),
        )
    })?;
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|k| !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY);
            Some(key.ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_idempotency_key",
                    format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
                )
            })?.to_string())
        }
    };
    let mut effective = api.runner.default_inputs();
    effective.extend(request.inputs.clone());
    let problems = api.runner.check_inputs(&effective);
    if !problems.is_empty() {
        let mut error = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "missing_inputs",
            format!(
                "the crew needs inputs it was not given: {}",
                problems.join("; ")
            ),
        );
        error.details = Some(json!(problems));
        return Err(error);
    }
    let submitted = api.queue.submit(request.inputs, key).await?;
    let status = match submitted {
        Submitted::Created(_) => StatusCode::ACCEPTED,
        Submitted::Existing(_) => StatusCode::OK,
    };
    Ok((status, Json(json!({"kickoff_id": submitted.kickoff_id()}))).into_response())
}

/// Each task's progress from the kickoff's events: `pending`, `running`, `completed` or
/// `failed` (a retried or resumed attempt starts them over; finished tasks it skips stay
/// completed).
fn task_progress(task_names: &[String], events: &[KickoffEvent]) -> Vec<Value> {
    let mut states: Vec<&str> = vec!["pending"; task_names.len()];
    for event in events {
        let state = match event.kind.as_str() {
            "task_started" => "running",
            "task_completed" => "completed",
            "task_failed" => "failed",
            _ => continue,
        };
        let named = event.data.get("task").and_then(Value::as_str);
        if let Some(index) = named.and_then(|name| task_names.iter().position(|t| t == name))
            && (states[index] != "completed" || state == "completed")
        {
            states[index] = state;
        }
    }
    task_names
        .iter()
        .zip(states)
        .map(|(name, state)| json!({"name": name, "state": state}))
        .collect()
}

async fn status(
    State(api): State<KickoffApi>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record: KickoffRecord = api
        .queue
        .status(&id)
        .await?
        .ok_or_else(|| ApiError::unknown_kickoff(&id))?;
    let events = api.queue.events_after(&id, 0).await?;
    let tasks = task_progress(&api.runner.task_names(), &events);
    let mut body = serde_json::to_value(&record).unwrap_or_else(|_| json!({}));
    body["tasks"] = Value::Array(tasks);
    Ok(Json(body))
}

/// A queue operation on one kickoff that answers its state after the request (`None`: unknown).
type KickoffOperation = for<'a> fn(
    &'a dyn KickoffQueue,
    &'a str,
) -> BoxFuture<'a, Result<Option<KickoffState>, QueueError>>;

/// `POST /runs/{id}/cancel` and `POST /runs/{id}/resume`: the operation, then 202 with the
/// kickoff's state.
async fn change_state(
    api: KickoffApi,
    id: String,
    operation: KickoffOperation,
) -> Result<Response, ApiError> {
    let state = operation(&*api.queue, &id)
        .await?
        .ok_or_else(|| ApiError::unknown_kickoff(&id))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"kickoff_id": id, "state": state})),
    )
        .into_response())
}

async fn cancel(
    State(api): State<KickoffApi>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    change_state(api, id, |queue, id| queue.cancel(id)).await
}

async fn resume(
    State(api): State<KickoffApi>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    change_state(api, id, |queue, id| queue.resume(id)).await
}

async fn events(
    State(api): State<KickoffApi>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    if api.queue.status(&id).await?.is_none() {
        return Err(ApiError::unknown_kickoff(&id));
    }
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    struct Cursor {
        api: KickoffApi,
        id: String,
        after: u64,
        pending: std::collections::VecDeque<KickoffEvent>,
        done: bool,
    }
    let cursor = Cursor {
        api,
        id,
        after,
        pending: Default::default(),
        done: false,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        loop {
            if let Some(event) = cursor.pending.pop_front() {
                cursor.after = event.seq;
                let sse = Event::default()
                    .id(event.seq.to_string())
                    .event(event.kind.clone())
                    .data(event.data.to_string());
                return Some((Ok(sse), cursor));
            }
            if cursor.done {
                return None;
            }
            // Read the state before the events: a final state seen here means every event up
            // to it is already written, so the stream ends after draining them.
            let finished = match cursor.api.queue.status(&cursor.id).await {
                Ok(Some(record)) => record.state.is_final(),
                Ok(None) => true,
                Err(_) => false,
            };
            // When the database is away for a moment the client keeps its place.
            if let Ok(events) = cursor
                .api
                .queue
                .events_after(&cursor.id, cursor.after)
                .await
            {
                cursor.pending.extend(events);
            }
            if finished {
                cursor.done = true;
            } else if cursor.pending.is_empty() {
                tokio::time::sleep(EVENT_POLL).await;
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_progress_follows_the_events_and_keeps_finished_tasks_finished() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let event = |seq, kind: &str, task: &str| KickoffEvent {
            seq,
            kind: kind.to_string(),
            data: json!({"task": task}),
        };
        let events = [
            event(1, "task_started", "a"),
            event(2, "task_completed", "a"),
            event(3, "task_started", "b"),
            // A resumed attempt reports the journaled task again as started: it stays done.
            event(4, "task_started", "a"),
            event(5, "task_failed", "b"),
            event(6, "task_started", "unknown"),
        ];
        let states: Vec<Value> = task_progress(&names, &events)
            .into_iter()
            .map(|t| t["state"].clone())
            .collect();
        assert_eq!(
            states,
            [json!("completed"), json!("failed"), json!("pending")]
        );
    }
}
