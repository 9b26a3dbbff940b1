//! A VCR cassette replay server.
//!
//! [`Cassette`] reads the VCR.py cassettes CrewAI's test suite records
//! (`interactions: [{request: {body, headers, method, uri}, response: {body: {string}, headers,
//! status: {code, message}}}]`). [`ReplayServer`] serves one on `127.0.0.1` (random port) the way
//! CrewAI's VCR setup matches requests: on method and URL path only, never on the body or the
//! host, so each request gets the first not-yet-played interaction recorded for its method and
//! path (a FIFO queue per path). Telemetry and tracing traffic (see [`is_telemetry`]) is dropped
//! when the cassette is loaded, since our engine never sends it.
//!
//! A request with nothing left to play gets HTTP 599 and is recorded as a failure. Every request
//! received is kept (method, path, parsed JSON body) so a test can compare what it sent with what
//! CrewAI sent ([`Interaction::request_body`]).
//!
//! ```
//! use crewai_testkit::replay::{Cassette, ReplayServer};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let cassette = Cassette::from_yaml_str(r#"
//! interactions:
//! - request: {body: '{"model":"gpt-4o"}', headers: {}, method: POST, uri: "https://api.openai.com/v1/chat/completions"}
//!   response:
//!     body: {string: '{"choices":[]}'}
//!     headers: {Content-Type: [application/json]}
//!     status: {code: 200, message: OK}
//! "#).unwrap();
//! let server = ReplayServer::start(cassette).await.unwrap();
//! assert_eq!(server.recorded(), 1);
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! assert_eq!(server.played(), 0);
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The status a request gets when its path has no recorded response left.
pub const EXHAUSTED_STATUS: u16 = 599;

/// Why a cassette could not be loaded or served.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read cassette {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cassette {origin} is not valid YAML")]
    Yaml {
        origin: String,
        #[source]
        source: yaml_serde::Error,
    },
    #[error("cassette {origin}: `interactions` must be a list")]
    InteractionsNotAList { origin: String },
    #[error("cassette {origin}: interaction {index}: {message}")]
    Interaction {
        origin: String,
        index: usize,
        message: String,
    },
    #[error("cannot bind the replay server on 127.0.0.1")]
    Bind(#[source] std::io::Error),
}

/// One recorded request/response pair of an LLM provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// Position in the cassette file, 0-based, counting telemetry interactions too.
    pub cassette_index: usize,
    /// Upper-case HTTP method.
    pub method: String,
    /// The full recorded URI.
    pub uri: String,
    /// The URI's host (without port), lower-case.
    pub host: String,
    /// The URI's path, without the query.
    pub path: String,
    /// The request body as recorded (text), if any.
    pub request_text: Option<String>,
    pub status: u16,
    pub content_type: Option<String>,
    pub response_body: String,
}

impl Interaction {
    /// The recorded request body parsed as JSON (None when absent or not JSON).
    pub fn request_body(&self) -> Option<Value> {
        self.request_text
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
    }

    /// True when the recorded response is a server-sent-event stream.
    pub fn is_event_stream(&self) -> bool {
        self.content_type
            .as_deref()
            .is_some_and(|ct| ct.starts_with("text/event-stream"))
    }
}

/// The LLM interactions of one cassette, in recorded order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cassette {
    pub interactions: Vec<Interaction>,
    /// How many telemetry/tracing interactions were dropped.
    pub skipped_telemetry: usize,
}

/// True for traffic our engine never sends and the replay therefore ignores: CrewAI's tracing
/// and telemetry (any host under `crewai.com`, any path under `/crewai_plus/` or containing
/// `/tracing/`, and OpenTelemetry's `/v1/traces`, `/v1/metrics`, `/v1/logs` exports).
pub fn is_telemetry(host: &str, path: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "crewai.com"
        || host.ends_with(".crewai.com")
        || path.contains("/crewai_plus/")
        || path.contains("/tracing/")
        || matches!(path, "/v1/traces" | "/v1/metrics" | "/v1/logs")
}

/// Splits an absolute URI into (host, path) without pulling in a URL parser.
fn host_and_path(uri: &str) -> (String, String) {
    let without_scheme = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let (authority, rest) = match without_scheme.find('/') {
        Some(i) => (&without_scheme[..i], &without_scheme[i..]),
        None => (without_scheme, "/"),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let path = rest.split(['?', '#']).next().unwrap_or("/");
    (
        host,
        if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        },
    )
}

/// Reads a YAML scalar that holds text: a plain string, or a tagged one (`!!binary` telemetry).
fn yaml_text(value: &yaml_serde::Value) -> Option<String> {
    match value {
        yaml_serde::Value::String(s) => Some(s.clone()),
        yaml_serde::Value::Tagged(tagged) => yaml_text(&tagged.value),
        yaml_serde::Value::Null => None,
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn get<'a>(value: &'a yaml_serde::Value, key: &str) -> Option<&'a yaml_serde::Value> {
    value.as_mapping().and_then(|m| m.get(key))
}

/// The first value of a header recorded as `Name: [value]` (case-insensitive name).
fn header_value(headers: Option<&yaml_serde::Value>, name: &str) -> Option<String> {
    let mapping = headers?.as_mapping()?;
    mapping.iter().find_map(|(key, value)| {
        let key = key.as_str()?;
        if !key.eq_ignore_ascii_case(name) {
            return None;
        }
        match value {
            yaml_serde::Value::Sequence(items) => items.first().and_then(yaml_text),
            other => yaml_text(other),
        }
    })
}

impl Cassette {
    /// Loads a cassette file.
    pub fn load(path: impl AsRef<Path>) -> Result<Cassette, ReplayError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses cassette YAML text.
    pub fn from_yaml_str(text: &str) -> Result<Cassette, ReplayError> {
        Self::parse(text, "<text>")
    }

    fn parse(text: &str, origin: &str) -> Result<Cassette, ReplayError> {
        let root: yaml_serde::Value =
            yaml_serde::from_str(text).map_err(|source| ReplayError::Yaml {
                origin: origin.to_string(),
                source,
            })?;
        let items = match get(&root, "interactions") {
            Some(yaml_serde::Value::Sequence(items)) => items.as_slice(),
            Some(yaml_serde::Value::Null) | None => &[],
            Some(_) => {
                return Err(ReplayError::InteractionsNotAList {
                    origin: origin.to_string(),
                });
            }
        };
        let mut cassette = Cassette::default();
        for (index, item) in items.iter().enumerate() {
            let bad = |message: &str| ReplayError::Interaction {
                origin: origin.to_string(),
                index,
                message: message.to_string(),
            };
            let request = get(item, "request").ok_or_else(|| bad("missing `request`"))?;
            let response = get(item, "response").ok_or_else(|| bad("missing `response`"))?;
            let uri = get(request, "uri")
                .and_then(yaml_text)
                .ok_or_else(|| bad("missing `request.uri`"))?;
            let method = get(request, "method")
                .and_then(yaml_text)
                .unwrap_or_else(|| "GET".into())
                .to_ascii_uppercase();
            let (host, path) = host_and_path(&uri);
            if is_telemetry(&host, &path) {
                cassette.skipped_telemetry += 1;
                continue;
            }
            let status = get(response, "status")
                .and_then(|s| get(s, "code"))
                .and_then(|c| c.as_u64())
                .and_then(|c| u16::try_from(c).ok())
                .ok_or_else(|| bad("missing or invalid `response.status.code`"))?;
            let response_body = match get(response, "body") {
                Some(body @ yaml_serde::Value::Mapping(_)) => {
                    get(body, "string").and_then(yaml_text).unwrap_or_default()
                }
                Some(other) => yaml_text(other).unwrap_or_default(),
                None => String::new(),
            };
            cassette.interactions.push(Interaction {
                cassette_index: index,
                method,
                uri,
                host,
                path,
                request_text: get(request, "body").and_then(yaml_text),
                status,
                content_type: header_value(get(response, "headers"), "content-type"),
                response_body,
            });
        }
        Ok(cassette)
    }
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// 1-based arrival number.
    pub number: usize,
    pub method: String,
    pub path: String,
    /// The body parsed as JSON, or None when it is empty or not JSON (see `raw_body`).
    pub body: Option<Value>,
    pub raw_body: String,
    /// Index into [`Cassette::interactions`] of the interaction that answered it; None when exhausted.
    pub answered_by: Option<usize>,
}

#[derive(Debug, Default)]
struct Replay {
    interactions: Vec<Interaction>,
    /// Per (method, path): indices of the interactions still to play, in order.
    queues: HashMap<(String, String), VecDeque<usize>>,
    received: Vec<ReceivedRequest>,
    failures: Vec<String>,
    played: usize,
}

type Shared = Arc<Mutex<Replay>>;

fn lock(shared: &Shared) -> MutexGuard<'_, Replay> {
    // A panic while holding the lock cannot leave the replay state half-updated in a way that
    // matters to a reader, so a poisoned lock is still usable.
    crate::serve::lock(shared)
}

/// A running replay server; stops when dropped.
#[derive(Debug)]
pub struct ReplayServer {
    addr: SocketAddr,
    state: Shared,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ReplayServer {
    /// Starts serving `cassette` on `127.0.0.1` on a free port.
    pub async fn start(cassette: Cassette) -> Result<ReplayServer, ReplayError> {
        let mut queues: HashMap<(String, String), VecDeque<usize>> = HashMap::new();
        for (i, interaction) in cassette.interactions.iter().enumerate() {
            queues
                .entry((interaction.method.clone(), interaction.path.clone()))
                .or_default()
                .push_back(i);
        }
        let state: Shared = Arc::new(Mutex::new(Replay {
            interactions: cassette.interactions,
            queues,
            ..Default::default()
        }));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(ReplayError::Bind)?;
        let addr = listener.local_addr().map_err(ReplayError::Bind)?;
        let app = Router::new().fallback(answer).with_state(state.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = server.await {
                tracing::warn!(%error, "replay server stopped with an error");
            }
        });
        Ok(ReplayServer {
            addr,
            state,
            shutdown: Some(shutdown),
            task: Some(task),
        })
    }

    /// Loads a cassette file and serves it.
    pub async fn from_file(path: impl AsRef<Path>) -> Result<ReplayServer, ReplayError> {
        Self::start(Cassette::load(path)?).await
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `base_url` + `path` (e.g. `/v1`, the OpenAI base URL).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url(), path)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many LLM interactions the cassette holds.
    pub fn recorded(&self) -> usize {
        lock(&self.state).interactions.len()
    }

    /// How many of them have been played.
    pub fn played(&self) -> usize {
        lock(&self.state).played
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.state).received.clone()
    }

    /// The recorded interactions (telemetry excluded), in cassette order.
    pub fn interactions(&self) -> Vec<Interaction> {
        lock(&self.state).interactions.clone()
    }

    /// One message per request that found nothing left to play.
    pub fn failures(&self) -> Vec<String> {
        lock(&self.state).failures.clone()
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn answer(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let path = uri.path().to_string();
    let mut replay = lock(&state);
    let number = replay.received.len() + 1;
    let key = (method.as_str().to_ascii_uppercase(), path.clone());
    let next = replay.queues.get_mut(&key).and_then(VecDeque::pop_front);
    replay.received.push(ReceivedRequest {
        number,
        method: key.0.clone(),
        path: path.clone(),
        body: serde_json::from_str(&raw_body).ok(),
        raw_body,
        answered_by: next,
    });
    match next.and_then(|i| replay.interactions.get(i).cloned()) {
        Some(interaction) => {
            replay.played += 1;
            drop(replay);
            recorded_response(&interaction)
        }
        None => {
            let message = format!("ran out of recorded responses at request {number} ({path})");
            replay.failures.push(message.clone());
            drop(replay);
            exhausted_response(&message)
        }
    }
}

fn recorded_response(interaction: &Interaction) -> Response {
    let status =
        StatusCode::from_u16(interaction.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = Response::new(Body::from(interaction.response_body.clone()));
    *response.status_mut() = status;
    let content_type = interaction
        .content_type
        .as_deref()
        .unwrap_or("application/json");
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn exhausted_response(message: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "replay_exhausted", "code": "replay_exhausted"}});
    let mut response = Response::new(Body::from(body.to_string()));
    // 599 is inside http's valid range, so this cannot fail; fall back to 500 regardless.
    *response.status_mut() =
        StatusCode::from_u16(EXHAUSTED_STATUS).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_uris() {
        assert_eq!(
            host_and_path("https://api.openai.com/v1/chat/completions"),
            ("api.openai.com".into(), "/v1/chat/completions".into())
        );
        assert_eq!(
            host_and_path("https://telemetry.crewai.com:4319/v1/traces?x=1"),
            ("telemetry.crewai.com".into(), "/v1/traces".into())
        );
        assert_eq!(
            host_and_path("http://localhost:3000"),
            ("localhost".into(), "/".into())
        );
    }

    #[test]
    fn recognises_telemetry() {
        assert!(is_telemetry(
            "app.crewai.com",
            "/crewai_plus/api/v1/tracing/batches"
        ));
        assert!(is_telemetry(
            "localhost",
            "/crewai_plus/api/v1/tracing/batches/1/events"
        ));
        assert!(is_telemetry("telemetry.crewai.com", "/v1/traces"));
        assert!(!is_telemetry("api.openai.com", "/v1/chat/completions"));
        assert!(!is_telemetry("api.anthropic.com", "/v1/messages"));
    }

    #[test]
    fn parses_and_skips_telemetry() {
        let cassette = Cassette::from_yaml_str(
            r#"
interactions:
- request: {body: null, headers: {}, method: POST, uri: "https://app.crewai.com/crewai_plus/api/v1/tracing/batches"}
  response: {body: {string: "{}"}, headers: {}, status: {code: 401, message: Unauthorized}}
- request:
    body: !!binary |
      CoAGCiQK
    method: POST
    uri: https://telemetry.crewai.com:4319/v1/traces
  response: {body: {string: ""}, headers: {}, status: {code: 200, message: OK}}
- request: {body: '{"model":"gpt-4o"}', headers: {}, method: post, uri: "https://api.openai.com/v1/chat/completions"}
  response:
    body: {string: "data: {}\n\ndata: [DONE]\n\n"}
    headers: {content-type: [text/event-stream; charset=utf-8]}
    status: {code: 200, message: OK}
"#,
        )
        .unwrap();
        assert_eq!(cassette.skipped_telemetry, 2);
        assert_eq!(cassette.interactions.len(), 1);
        let only = &cassette.interactions[0];
        assert_eq!(
            (
                only.cassette_index,
                only.method.as_str(),
                only.path.as_str()
            ),
            (2, "POST", "/v1/chat/completions")
        );
        assert!(only.is_event_stream());
        assert_eq!(
            only.request_body(),
            Some(serde_json::json!({"model": "gpt-4o"}))
        );
    }

    #[test]
    fn reports_broken_cassettes() {
        let error =
            Cassette::from_yaml_str("interactions:\n- request: {method: POST}\n  response: {}\n")
                .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("interaction 0: missing `request.uri`"),
            "{error}"
        );
        assert!(matches!(
            Cassette::from_yaml_str("interactions: 3"),
            Err(ReplayError::InteractionsNotAList { .. })
        ));
        let error = Cassette::from_yaml_str("interactions: [").unwrap_err();
        assert_eq!(error.to_string(), "cassette <text> is not valid YAML");
        assert!(std::error::Error::source(&error).is_some(), "{error:?}");
    }
}
