//! Record and replay: keep every HTTP exchange of a real run in a VCR-style YAML cassette, and
//! play it back later, in order, without a network.
//!
//! The cassette format is the one CrewAI's own test suite uses (`interactions:` with
//! `request: {method, uri, body, headers}` and `response: {status: {code, message}, headers,
//! body: {string}}`), so CrewAI's recorded cassettes replay here too. Secrets are never written:
//! authentication headers are dropped and `key=` query parameters are masked.
//!
//! Recording and replaying work at the HTTP level, as [`Transport`]s, so every provider client
//! gets them. The usual entry points build a whole model:
//!
//! ```no_run
//! # fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::LlmConfig;
//! use crewai_llm::cassette::{record_llm, replay_llm};
//! let config = LlmConfig::new("openai/gpt-4o-mini");
//! // First run: real calls, each exchange appended to the file as it completes.
//! let live = record_llm(&config, "tests/cassettes/greeting.yaml")?;
//! // Later runs: the same answers, offline, no API key needed.
//! let offline = replay_llm(&config, "tests/cassettes/greeting.yaml")?;
//! # let _ = (live, offline); Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{
    ErrorContext, HttpRequest, HttpResponse, NetworkTransport, ResponseBody, Transport,
};
use crate::retry::RetryPolicy;
use crate::router::{BuildOptions, build_llm_with};
use crate::traits::Llm;

/// Headers never written to a cassette.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
    "openai-organization",
];

/// A recorded run: its HTTP exchanges in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    pub interactions: Vec<Interaction>,
    #[serde(default = "format_version")]
    pub version: u32,
}

fn format_version() -> u32 {
    1
}

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    pub request: RecordedRequest,
    pub response: RecordedResponse,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The body as sent (JSON text), if any.
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, Vec<String>>,
    pub method: String,
    pub uri: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedResponse {
    pub body: RecordedBody,
    #[serde(default)]
    pub headers: BTreeMap<String, Vec<String>>,
    pub status: RecordedStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedBody {
    pub string: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedStatus {
    pub code: u16,
    #[serde(default)]
    pub message: String,
}

/// A cassette file that could not be read or written: `what` failed, `cause` says why.
fn cassette_error(path: &Path, what: &str, cause: impl Into<crate::error::BoxError>) -> LlmError {
    LlmError::invalid_config(format!("cassette {}: {what}", path.display()), cause)
}

impl Cassette {
    /// Reads a cassette file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|e| cassette_error(path, "cannot read it", e))?;
        yaml_serde::from_str(&text).map_err(|e| cassette_error(path, "not a cassette", e))
    }

    /// Writes the cassette (creating parent directories).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), LlmError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| cassette_error(path, "cannot create its folder", e))?;
        }
        let text =
            yaml_serde::to_string(self).map_err(|e| cassette_error(path, "cannot serialise", e))?;
        std::fs::write(path, text).map_err(|e| cassette_error(path, "cannot write it", e))
    }
}

fn header_map(headers: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if SECRET_HEADERS.contains(&name.as_str()) {
            continue;
        }
        map.entry(name).or_default().push(value.clone());
    }
    map
}

/// The URL with any `key=` query value masked (Gemini accepts keys in the query).
fn redact_uri(uri: &str) -> String {
    let Ok(mut url) = url::Url::parse(uri) else {
        return uri.to_string();
    };
    if url.query().is_none() {
        return uri.to_string();
    }
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| {
            let masked = if k.eq_ignore_ascii_case("key") {
                "REDACTED".to_string()
            } else {
                v.into_owned()
            };
            (k.into_owned(), masked)
        })
        .collect();
    url.query_pairs_mut().clear().extend_pairs(pairs);
    url.to_string()
}

fn reason_phrase(code: u16) -> String {
    http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or_default()
        .to_string()
}

/// Records every exchange that passes through it and rewrites the cassette file after each one,
/// so an interrupted run keeps what it did.
pub struct CassetteRecorder {
    inner: Arc<dyn Transport>,
    path: PathBuf,
    cassette: Arc<Mutex<Cassette>>,
}

impl CassetteRecorder {
    /// Records what `inner` (usually the network) exchanges into a new cassette at `path`.
    pub fn new(inner: Arc<dyn Transport>, path: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(CassetteRecorder {
            inner,
            path: path.into(),
            cassette: Arc::default(),
        })
    }

    /// Records into the same cassette what `inner` exchanges (one tap per model client, so
    /// each keeps its own transport and timeouts).
    pub fn tap(&self, inner: Arc<dyn Transport>) -> Arc<Self> {
        Arc::new(CassetteRecorder {
            inner,
            path: self.path.clone(),
            cassette: self.cassette.clone(),
        })
    }

    /// The interactions recorded so far.
    pub fn cassette(&self) -> Cassette {
        self.cassette
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn append(
        cassette: &Mutex<Cassette>,
        path: &Path,
        interaction: Interaction,
    ) -> Result<(), LlmError> {
        let mut cassette = cassette.lock().unwrap_or_else(|p| p.into_inner());
        cassette.interactions.push(interaction);
        cassette.save(path)
    }
}

#[async_trait]
impl Transport for CassetteRecorder {
    async fn send(
        &self,
        request: HttpRequest,
        context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError> {
        let recorded_request = RecordedRequest {
            body: (!request.body.is_empty())
                .then(|| String::from_utf8_lossy(&request.body).into_owned()),
            headers: header_map(&request.headers),
            method: request.method.clone(),
            uri: redact_uri(&request.url),
        };
        let response = self.inner.send(request, context).await?;
        let status = RecordedStatus {
            code: response.status,
            message: reason_phrase(response.status),
        };
        let headers = header_map(&response.headers);
        match response.body {
            ResponseBody::Complete(bytes) => {
                let interaction = Interaction {
                    request: recorded_request,
                    response: RecordedResponse {
                        body: RecordedBody {
                            string: String::from_utf8_lossy(&bytes).into_owned(),
                        },
                        headers,
                        status,
                    },
                };
                Self::append(&self.cassette, &self.path, interaction)?;
                Ok(HttpResponse {
                    status: response.status,
                    headers: response.headers,
                    body: ResponseBody::Complete(bytes),
                })
            }
            ResponseBody::Streaming(stream) => {
                // Chunks pass on as they arrive; the interaction is written once the consumer is
                // done with the body (the stream is dropped), however far it read.
                let mut pending = PendingRecording {
                    cassette: self.cassette.clone(),
                    path: self.path.clone(),
                    request: Some(recorded_request),
                    status,
                    headers,
                    body: Vec::new(),
                };
                let tee = stream.map(move |chunk| {
                    if let Ok(bytes) = &chunk {
                        pending.body.extend_from_slice(bytes);
                    }
                    chunk
                });
                Ok(HttpResponse {
                    status: response.status,
                    headers: response.headers,
                    body: ResponseBody::Streaming(Box::pin(tee)),
                })
            }
        }
    }
}

/// A streamed exchange being recorded; written to the cassette when dropped.
struct PendingRecording {
    cassette: Arc<Mutex<Cassette>>,
    path: PathBuf,
    request: Option<RecordedRequest>,
    status: RecordedStatus,
    headers: BTreeMap<String, Vec<String>>,
    body: Vec<u8>,
}

impl Drop for PendingRecording {
    fn drop(&mut self) {
        let Some(request) = self.request.take() else {
            return;
        };
        let response = RecordedResponse {
            body: RecordedBody {
                string: String::from_utf8_lossy(&self.body).into_owned(),
            },
            headers: std::mem::take(&mut self.headers),
            status: self.status.clone(),
        };
        if let Err(error) = CassetteRecorder::append(
            &self.cassette,
            &self.path,
            Interaction { request, response },
        ) {
            tracing::warn!(
                error = %crate::error_chain(&error),
                "a streamed exchange could not be written to the cassette"
            );
        }
    }
}

/// How strictly a replayed request must match its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchOn {
    /// Strictly in order, each request matching its recording's method and URL path (the host
    /// may differ: a recording against a local server replays against any base URL).
    #[default]
    MethodAndPath,
    /// The first unused recording with the same method, path and JSON body (compared as JSON,
    /// so key order and spacing do not matter). Concurrent calls, which may reach the server in
    /// a different order on each run, replay correctly.
    MethodPathAndBody,
}

/// Answers requests with recorded responses.
pub struct CassetteReplayer {
    source: String,
    interactions: Vec<Interaction>,
    state: Mutex<ReplayState>,
    match_on: MatchOn,
}

#[derive(Debug, Default)]
struct ReplayState {
    used: Vec<bool>,
    requests: usize,
}

impl CassetteReplayer {
    /// Replays the cassette at `path`, strictly in order.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Arc<Self>, LlmError> {
        let path = path.as_ref();
        Ok(Self::new(Cassette::load(path)?, path.display().to_string()))
    }

    /// Replays `cassette` strictly in order; `source` names it in errors.
    pub fn new(cassette: Cassette, source: impl Into<String>) -> Arc<Self> {
        Self::with_matching(cassette, source, MatchOn::default())
    }

    /// Replays `cassette` with the given matching rule.
    pub fn with_matching(
        cassette: Cassette,
        source: impl Into<String>,
        match_on: MatchOn,
    ) -> Arc<Self> {
        let state = ReplayState {
            used: vec![false; cassette.interactions.len()],
            requests: 0,
        };
        Arc::new(CassetteReplayer {
            source: source.into(),
            interactions: cassette.interactions,
            state: Mutex::new(state),
            match_on,
        })
    }

    /// Interactions not replayed yet.
    pub fn remaining(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .used
            .iter()
            .filter(|used| !**used)
            .count()
    }

    /// The index of the recording that answers `request`, marked as used.
    fn take(&self, request: &HttpRequest) -> Result<usize, LlmError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.requests += 1;
        let number = state.requests;
        let same_route = |recorded: &RecordedRequest| {
            recorded.method.eq_ignore_ascii_case(&request.method)
                && path_of(&recorded.uri) == path_of(&request.url)
        };
        let found = match self.match_on {
            MatchOn::MethodAndPath => {
                let Some(index) = state.used.iter().position(|used| !used) else {
                    return Err(LlmError::Config(format!(
                        "cassette {} has {} interactions but request {number} was made ({} {}); record the cassette again",
                        self.source,
                        self.interactions.len(),
                        request.method,
                        request.url
                    )));
                };
                let recorded = &self.interactions[index].request;
                if !same_route(recorded) {
                    return Err(LlmError::Config(format!(
                        "cassette {}: request {number} does not match the recording: expected {} {}, got {} {}; record the cassette again",
                        self.source, recorded.method, recorded.uri, request.method, request.url
                    )));
                }
                index
            }
            MatchOn::MethodPathAndBody => {
                let sent: Option<serde_json::Value> = serde_json::from_slice(&request.body).ok();
                let matches = |recorded: &RecordedRequest| {
                    same_route(recorded)
                        && recorded
                            .body
                            .as_deref()
                            .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
                            == sent
                };
                (0..self.interactions.len()).find(|&i| !state.used[i] && matches(&self.interactions[i].request)).ok_or_else(|| {
                    LlmError::Config(format!(
                        "cassette {}: request {number} ({} {}) matches no unused recording with the same body; record the cassette again",
                        self.source, request.method, request.url
                    ))
                })?
            }
        };
        state.used[found] = true;
        Ok(found)
    }
}

fn path_of(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(url) => url.path().to_string(),
        Err(_) => uri.split('?').next().unwrap_or(uri).to_string(),
    }
}

#[async_trait]
impl Transport for CassetteReplayer {
    async fn send(
        &self,
        request: HttpRequest,
        _context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError> {
        let recorded = &self.interactions[self.take(&request)?].response;
        let headers = recorded
            .headers
            .iter()
            .flat_map(|(name, values)| {
                values
                    .iter()
                    .map(move |v| (name.to_ascii_lowercase(), v.clone()))
            })
            .collect();
        Ok(HttpResponse {
            status: recorded.status.code,
            headers,
            body: ResponseBody::Complete(Bytes::from(recorded.body.string.clone())),
        })
    }
}

/// A model whose real HTTP exchanges are recorded to `path` (retries are recorded too, each as
/// its own interaction).
///
/// To record several models (a crew's agents) into one cassette, share a recorder instead:
/// `BuildOptions::new().with_recorder(CassetteRecorder::new(network, path))`.
pub fn record_llm(config: &LlmConfig, path: impl Into<PathBuf>) -> Result<Arc<dyn Llm>, LlmError> {
    let network = NetworkTransport::new(config.connect_timeout(), config.request_timeout())?;
    let recorder = CassetteRecorder::new(Arc::new(network), path);
    build_llm_with(config, &BuildOptions::new().with_recorder(recorder))
}

/// A model answering from the cassette at `path`, offline. No API key is needed. Retries happen
/// as in the recorded run (a recorded 429 followed by a success replays as a retry) but without
/// waiting.
pub fn replay_llm(config: &LlmConfig, path: impl AsRef<Path>) -> Result<Arc<dyn Llm>, LlmError> {
    let replayer = CassetteReplayer::from_file(path)?;
    replay_llm_from(config, replayer)
}

/// Like [`replay_llm`] with a replayer you built (to choose [`MatchOn`] or keep a handle on it).
pub fn replay_llm_from(
    config: &LlmConfig,
    replayer: Arc<CassetteReplayer>,
) -> Result<Arc<dyn Llm>, LlmError> {
    let mut config = config.clone();
    if config.api_key.is_none() {
        config.api_key = Some("cassette-replay".into());
    }
    let instant = RetryPolicy::default()
        .with_delays(Duration::ZERO, Duration::ZERO)
        .with_max_retry_after(Duration::ZERO);
    let options = BuildOptions::new()
        .with_transport(replayer)
        .with_retry_policy(instant);
    build_llm_with(&config, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_not_recorded() {
        let headers = vec![
            ("Authorization".to_string(), "Bearer sk".to_string()),
            ("content-type".to_string(), "application/json".to_string()),
        ];
        let map = header_map(&headers);
        assert!(!map.contains_key("authorization"));
        assert_eq!(map["content-type"], vec!["application/json".to_string()]);
        let uri =
            redact_uri("https://g.example/v1beta/models/m:generateContent?key=secret&alt=sse");
        assert!(
            uri.contains("key=REDACTED") && uri.contains("alt=sse") && !uri.contains("secret"),
            "{uri}"
        );
    }

    #[test]
    fn cassette_yaml_round_trips() {
        let cassette = Cassette {
            interactions: vec![Interaction {
                request: RecordedRequest {
                    body: Some("{\"a\":1}".into()),
                    headers: BTreeMap::new(),
                    method: "POST".into(),
                    uri: "http://x/v1/chat/completions".into(),
                },
                response: RecordedResponse {
                    body: RecordedBody {
                        string: "{\"ok\":true}\n".into(),
                    },
                    headers: BTreeMap::new(),
                    status: RecordedStatus {
                        code: 200,
                        message: "OK".into(),
                    },
                },
            }],
            version: 1,
        };
        let text = yaml_serde::to_string(&cassette).unwrap_or_default();
        let back: Cassette = yaml_serde::from_str(&text).unwrap_or_default();
        assert_eq!(back, cassette);
    }
}
