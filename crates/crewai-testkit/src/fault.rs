//! A fault-injecting OpenAI-compatible chat-completions server on `127.0.0.1`.
//!
//! It speaks HTTP/1.1 itself over a raw TCP listener (so it can misbehave below HTTP: hold a request
//! forever, or reset the connection halfway through a body) and decides per request what goes
//! wrong: first from a scripted queue of [`Fault`]s, then from a seeded random [`FaultMix`]. When a
//! request is answered properly, the answer comes from a *responder* (a function from the request
//! to a [`Reply`] of [`crate::scripted`]; by default the text `ok`), rendered exactly like the
//! scripted server renders it: chat-completions JSON, or server-sent events when the request has
//! `"stream": true`. Every request is logged with the fault it got ([`FaultServer::served`]).
//!
//! # Faults
//!
//! | [`Fault`] | On the wire |
//! |---|---|
//! | `None` | the responder's reply |
//! | `NeverAnswer` | the request is read and never answered; the connection stays open until the server stops |
//! | `Slow(d)` | the responder's reply after `d` |
//! | `RateLimited` | 429, OpenAI's rate-limit error, `retry-after: N` |
//! | `ServerError(s)` | `s` (500, 502, 503, ...) with OpenAI's server-error body |
//! | `ResetMidBody` | the status line, headers (full `content-length`) and half the body, then a TCP reset |
//! | `MalformedJson` | 200 `application/json` whose body is a proxy's HTML page; in a stream, an event whose data is not JSON |
//! | `TruncatedStream` | the reply's first half and no more: a stream without its finish chunk and `[DONE]`, or a JSON body cut in the middle (both well-formed HTTP) |
//! | `NoChoices` | a 200 completion with `choices: []` (a stream of chunks without choices, then `[DONE]`) |
//! | `UnknownTool` | a call of a tool the request did not offer |
//! | `InvalidArguments` | a call of the first offered tool with arguments that miss its parameters |
//!
//! The random policy never draws `UnknownTool` or `InvalidArguments` for a request that offers no
//! tools (a model cannot call tools it was not given); it serves a healthy reply instead, logged as
//! `None`. Scripted faults are served as given. Connections are kept alive between requests, as
//! OpenAI's are, so clients also meet resets on pooled connections. Request bodies are read by
//! their `content-length` (as reqwest sends them); chunked request bodies are not supported.
//!
//! ```
//! use std::time::Duration;
//! use crewai_testkit::fault::{Fault, FaultKind, FaultMix, FaultServer};
//! use crewai_testkit::scripted::Reply;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // One 503, then a seeded mix: mostly healthy, 5% rate limits, 5% slow answers.
//! let server = FaultServer::builder()
//!     .script([Fault::ServerError(503)])
//!     .mix(FaultMix::healthy().with_rate(FaultKind::RateLimited, 0.05).with_rate(FaultKind::Slow, 0.05))
//!     .seed(7)
//!     .responder(|_request| Reply::text("All good."))
//!     .start()
//!     .await;
//! // Point an OpenAI client at server.base_url() and run the code under test; then:
//! assert_eq!(server.request_count(), 0);
//! assert!(server.base_url().ends_with("/v1"));
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::scripted::{RecordedRequest, RenderedReply, Reply};

/// What goes wrong with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: the responder's reply.
    None,
    /// Read the request, never answer, keep the connection open.
    NeverAnswer,
    /// The responder's reply after this pause.
    Slow(Duration),
    /// HTTP 429 with `retry-after` in whole seconds.
    RateLimited { retry_after_seconds: u64 },
    /// An HTTP 5xx status (500, 502, 503 are the usual ones).
    ServerError(u16),
    /// Half the body, then a TCP reset.
    ResetMidBody,
    /// A 200 whose body is not JSON (an event that is not JSON in a stream).
    MalformedJson,
    /// The reply's first half, well-formed HTTP: a stream without its end, or JSON cut short.
    TruncatedStream,
    /// A completion with an empty `choices` array.
    NoChoices,
    /// A call of a tool the request did not offer.
    UnknownTool,
    /// A call of an offered tool with arguments that do not fit its parameters.
    InvalidArguments,
}

impl Fault {
    /// The fault's kind (its variant without parameters).
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::None => FaultKind::None,
            Fault::NeverAnswer => FaultKind::NeverAnswer,
            Fault::Slow(_) => FaultKind::Slow,
            Fault::RateLimited { .. } => FaultKind::RateLimited,
            Fault::ServerError(_) => FaultKind::ServerError,
            Fault::ResetMidBody => FaultKind::ResetMidBody,
            Fault::MalformedJson => FaultKind::MalformedJson,
            Fault::TruncatedStream => FaultKind::TruncatedStream,
            Fault::NoChoices => FaultKind::NoChoices,
            Fault::UnknownTool => FaultKind::UnknownTool,
            Fault::InvalidArguments => FaultKind::InvalidArguments,
        }
    }
}

/// A [`Fault`] without its parameters: the unit of a [`FaultMix`] and of the served counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    None,
    NeverAnswer,
    Slow,
    RateLimited,
    ServerError,
    ResetMidBody,
    MalformedJson,
    TruncatedStream,
    NoChoices,
    UnknownTool,
    InvalidArguments,
}

impl FaultKind {
    /// Every kind that is a fault (all but `None`).
    pub const FAULTS: [FaultKind; 10] = [
        FaultKind::NeverAnswer,
        FaultKind::Slow,
        FaultKind::RateLimited,
        FaultKind::ServerError,
        FaultKind::ResetMidBody,
        FaultKind::MalformedJson,
        FaultKind::TruncatedStream,
        FaultKind::NoChoices,
        FaultKind::UnknownTool,
        FaultKind::InvalidArguments,
    ];

    /// A snake_case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::None => "none",
            FaultKind::NeverAnswer => "never_answer",
            FaultKind::Slow => "slow",
            FaultKind::RateLimited => "rate_limited",
            FaultKind::ServerError => "server_error",
            FaultKind::ResetMidBody => "reset_mid_body",
            FaultKind::MalformedJson => "malformed_json",
            FaultKind::TruncatedStream => "truncated_stream",
            FaultKind::NoChoices => "no_choices",
            FaultKind::UnknownTool => "unknown_tool",
            FaultKind::InvalidArguments => "invalid_arguments",
        }
    }

    fn needs_tools(self) -> bool {
        matches!(self, FaultKind::UnknownTool | FaultKind::InvalidArguments)
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The random policy: the probability of each fault kind per request, and the parameters of the
/// drawn faults. The rest of the probability (one minus the sum) is a healthy reply.
///
/// ```
/// use crewai_testkit::fault::{FaultKind, FaultMix};
/// let mix = FaultMix::realistic();
/// assert!(mix.total_rate() < 0.25, "most requests are fine");
/// assert!(FaultKind::FAULTS.iter().all(|kind| mix.rate(*kind) > 0.0), "every kind appears");
/// assert_eq!(mix.clone().scaled(0.5).rate(FaultKind::ServerError), mix.rate(FaultKind::ServerError) / 2.0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FaultMix {
    rates: BTreeMap<FaultKind, f64>,
    slow_min: Duration,
    slow_max: Duration,
    retry_after_seconds: u64,
    server_statuses: Vec<u16>,
}

impl Default for FaultMix {
    fn default() -> Self {
        Self::healthy()
    }
}

impl FaultMix {
    /// No faults at all.
    pub fn healthy() -> Self {
        FaultMix {
            rates: BTreeMap::new(),
            slow_min: Duration::from_millis(100),
            slow_max: Duration::from_millis(800),
            retry_after_seconds: 1,
            server_statuses: vec![500, 502, 503],
        }
    }

    /// A bad day at a provider: 15% of requests go wrong, every kind represented, transient
    /// failures (5xx, 429, slow and hung requests) more often than broken replies.
    pub fn realistic() -> Self {
        Self::healthy()
            .with_rate(FaultKind::NeverAnswer, 0.01)
            .with_rate(FaultKind::Slow, 0.03)
            .with_rate(FaultKind::RateLimited, 0.02)
            .with_rate(FaultKind::ServerError, 0.03)
            .with_rate(FaultKind::ResetMidBody, 0.01)
            .with_rate(FaultKind::MalformedJson, 0.01)
            .with_rate(FaultKind::TruncatedStream, 0.01)
            .with_rate(FaultKind::NoChoices, 0.01)
            .with_rate(FaultKind::UnknownTool, 0.01)
            .with_rate(FaultKind::InvalidArguments, 0.01)
    }

    /// Sets the probability of `kind` (clamped to 0..=1; `None` is ignored: it is the remainder).
    pub fn with_rate(mut self, kind: FaultKind, probability: f64) -> Self {
        if kind != FaultKind::None {
            self.rates.insert(kind, probability.clamp(0.0, 1.0));
        }
        self
    }

    /// Multiplies every rate by `factor` (a less faulty fallback server: `scaled(0.2)`).
    pub fn scaled(mut self, factor: f64) -> Self {
        for rate in self.rates.values_mut() {
            *rate = (*rate * factor).clamp(0.0, 1.0);
        }
        self
    }

    /// How long `Slow` faults wait: uniformly between `min` and `max`.
    pub fn with_slow_range(mut self, min: Duration, max: Duration) -> Self {
        self.slow_min = min.min(max);
        self.slow_max = max.max(min);
        self
    }

    /// The `retry-after` of `RateLimited` faults.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = seconds;
        self
    }

    /// The probability of `kind`.
    pub fn rate(&self, kind: FaultKind) -> f64 {
        match kind {
            FaultKind::None => (1.0 - self.total_rate()).max(0.0),
            kind => self.rates.get(&kind).copied().unwrap_or(0.0),
        }
    }

    /// The probability that a request goes wrong.
    pub fn total_rate(&self) -> f64 {
        self.rates.values().sum()
    }

    /// Draws the fault of one request.
    fn draw(&self, rng: &mut StdRng, offers_tools: bool) -> Fault {
        let mut roll: f64 = rng.random();
        let mut drawn = FaultKind::None;
        for (kind, rate) in &self.rates {
            if roll < *rate {
                drawn = *kind;
                break;
            }
            roll -= rate;
        }
        if drawn.needs_tools() && !offers_tools {
            return Fault::None;
        }
        match drawn {
            FaultKind::None => Fault::None,
            FaultKind::NeverAnswer => Fault::NeverAnswer,
            FaultKind::Slow => Fault::Slow(if self.slow_min == self.slow_max {
                self.slow_min
            } else {
                rng.random_range(self.slow_min..=self.slow_max)
            }),
            FaultKind::RateLimited => Fault::RateLimited {
                retry_after_seconds: self.retry_after_seconds,
            },
            FaultKind::ServerError => Fault::ServerError(
                self.server_statuses
                    .get(rng.random_range(0..self.server_statuses.len().max(1)))
                    .copied()
                    .unwrap_or(500),
            ),
            FaultKind::ResetMidBody => Fault::ResetMidBody,
            FaultKind::MalformedJson => Fault::MalformedJson,
            FaultKind::TruncatedStream => Fault::TruncatedStream,
            FaultKind::NoChoices => Fault::NoChoices,
            FaultKind::UnknownTool => Fault::UnknownTool,
            FaultKind::InvalidArguments => Fault::InvalidArguments,
        }
    }
}

/// Decides the healthy reply to a request.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// The name of the tool `UnknownTool` faults call (never offered by anyone).
pub const UNKNOWN_TOOL_NAME: &str = "purge_customer_records";

/// One request and what it got.
#[derive(Debug, Clone)]
pub struct ServedRequest {
    /// 1-based arrival number.
    pub number: usize,
    pub request: RecordedRequest,
    pub fault: Fault,
}

struct State {
    script: VecDeque<Fault>,
    mix: FaultMix,
    rng: StdRng,
    served: Vec<ServedRequest>,
    next_call_id: u64,
}

struct Shared {
    state: Mutex<State>,
    responder: Responder,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock must not hide its failure behind poison.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Builds a [`FaultServer`]: the scripted faults, the random mix and its seed, the responder.
pub struct FaultServerBuilder {
    script: VecDeque<Fault>,
    mix: FaultMix,
    seed: u64,
    responder: Responder,
}

impl Default for FaultServerBuilder {
    fn default() -> Self {
        FaultServerBuilder {
            script: VecDeque::new(),
            mix: FaultMix::healthy(),
            seed: 0,
            responder: Arc::new(|_| Reply::text("ok")),
        }
    }
}

impl FaultServerBuilder {
    /// Faults served first, one per request, in order (before the mix is consulted).
    pub fn script(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.script.extend(faults);
        self
    }

    /// The random policy for requests after the script (healthy unless set).
    pub fn mix(mut self, mix: FaultMix) -> Self {
        self.mix = mix;
        self
    }

    /// The seed of the mix's draws: the same seed and request sequence give the same faults.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The healthy reply to a request (the text `ok` unless set).
    pub fn responder(
        mut self,
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> Self {
        self.responder = Arc::new(responder);
        self
    }

    fn shared(self) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                script: self.script,
                mix: self.mix,
                rng: StdRng::seed_from_u64(self.seed),
                served: Vec::new(),
                next_call_id: 0,
            }),
            responder: self.responder,
        })
    }

    /// Starts the server on a random port of 127.0.0.1 in the current tokio runtime.
    ///
    /// Panics if no port can be bound (a broken test machine, not a test outcome).
    pub async fn start(self) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0 for the fault server");
        let address = listener
            .local_addr()
            .expect("local address of the fault server");
        let shared = self.shared();
        let (shutdown, stopped) = watch::channel(false);
        tokio::spawn(accept_loop(listener, shared.clone(), stopped));
        FaultServer {
            address,
            shared,
            shutdown,
            background: None,
        }
    }

    /// Starts the server on its own thread and runtime, for synchronous tests (spawning a binary).
    pub fn start_blocking(self) -> FaultServer {
        let shared = self.shared();
        let (shutdown, stopped) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server_shared = shared.clone();
        let background = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime for the fault server");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1:0 for the fault server");
                let address = listener
                    .local_addr()
                    .expect("local address of the fault server");
                let _ = ready_tx.send(address);
                accept_loop(listener, server_shared, stopped).await;
            });
        });
        let address = ready_rx.recv().expect("the fault server thread started");
        FaultServer {
            address,
            shared,
            shutdown,
            background: Some(background),
        }
    }
}

/// A running fault server; dropping it closes the listener and every connection (held requests
/// included).
pub struct FaultServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    background: Option<std::thread::JoinHandle<()>>,
}

impl FaultServer {
    /// See [`FaultServerBuilder`].
    pub fn builder() -> FaultServerBuilder {
        FaultServerBuilder::default()
    }

    /// The socket address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The OpenAI-style base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// Queues one more scripted fault (served before the mix is consulted again).
    pub fn push(&self, fault: Fault) -> &Self {
        self.shared.lock().script.push_back(fault);
        self
    }

    /// Every request so far with the fault it got, in arrival order.
    pub fn served(&self) -> Vec<ServedRequest> {
        self.shared.lock().served.clone()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.shared.lock().served.len()
    }

    /// How many requests got each kind (kinds never served are absent).
    pub fn fault_counts(&self) -> BTreeMap<FaultKind, usize> {
        let mut counts = BTreeMap::new();
        for served in &self.shared.lock().served {
            *counts.entry(served.fault.kind()).or_insert(0) += 1;
        }
        counts
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        // The background thread ends once its accept loop sees the shutdown; it is detached rather
        // than joined so that dropping stays prompt.
        drop(self.background.take());
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = serve_connection(stream, shared) => {}
                _ = stopped.wait_for(|stop| *stop) => {}
            }
        });
    }
}

/// One parsed HTTP request.
struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Requests larger than this are refused (a test bug, not a workload).
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Serves requests on one kept-alive connection until the client closes it or a fault ends it.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buffer).await {
        if !answer(&mut stream, &shared, request).await {
            return;
        }
    }
}

/// Reads one request; `None` when the connection ends or the request cannot be parsed.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<HttpRequest> {
    let header_end = loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            break end;
        }
        if buffer.len() > MAX_REQUEST_BYTES || !read_more(stream, buffer).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let target = request_line.next()?;
    let path = target.split('?').next().unwrap_or(target).to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let body_start = header_end + 4;
    if length > MAX_REQUEST_BYTES {
        return None;
    }
    while buffer.len() < body_start + length {
        if !read_more(stream, buffer).await {
            return None;
        }
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    Some(HttpRequest {
        method,
        path,
        headers,
        body,
    })
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(read) => {
            buffer.extend_from_slice(&chunk[..read]);
            true
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Decides and serves the answer to one request; returns whether the connection stays usable.
async fn answer(stream: &mut TcpStream, shared: &Shared, request: HttpRequest) -> bool {
    let body_json = if request.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&request.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()))
    };
    let recorded = RecordedRequest {
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: body_json,
    };
    let offers_tools = !recorded.tool_names().is_empty();
    let (fault, number) = {
        let mut state = shared.lock();
        let fault = match state.script.pop_front() {
            Some(fault) => fault,
            None => {
                let State { mix, rng, .. } = &mut *state;
                mix.draw(rng, offers_tools)
            }
        };
        let number = state.served.len() + 1;
        state.served.push(ServedRequest {
            number,
            request: recorded.clone(),
            fault: fault.clone(),
        });
        (fault, number)
    };
    let response_id = format!("chatcmpl-fault-{number}");
    let streaming = recorded.body["stream"].as_bool().unwrap_or(false);

    let healthy = |reply: Reply| -> RenderedReply {
        let call_ids = reply.assign_call_ids(&mut shared.lock().next_call_id);
        reply.render(&recorded.body, &response_id, call_ids)
    };
    let rendered = match fault {
        Fault::NeverAnswer => {
            // Held until the client gives up or the server stops (the caller's select ends it).
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
            return false;
        }
        Fault::Slow(pause) => {
            tokio::time::sleep(pause).await;
            healthy(respond(shared, &recorded).await)
        }
        Fault::None => healthy(respond(shared, &recorded).await),
        Fault::RateLimited {
            retry_after_seconds,
        } => healthy(Reply::rate_limited(retry_after_seconds)),
        Fault::ServerError(status) => healthy(Reply::error(
            status,
            "The server had an error while processing your request. Sorry about that!",
        )),
        Fault::ResetMidBody => {
            let rendered = healthy(respond(shared, &recorded).await);
            let head = response_head(&rendered, rendered.body.len());
            let half = &rendered.body.as_bytes()[..rendered.body.len() / 2];
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(half).await;
            let _ = stream.flush().await;
            // SO_LINGER 0: closing sends RST instead of FIN, as a crashed proxy would.
            let _ = stream.set_zero_linger();
            return false;
        }
        Fault::MalformedJson => {
            if streaming {
                healthy(Reply::raw_sse([
                    json!({"id": response_id, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}).to_string(),
                    "{\"id\": \"chatcmpl-broken\", \"choices\": [{\"delta\": {\"content\": \"hal".to_string(),
                    "[DONE]".to_string(),
                ]))
            } else {
                healthy(Reply::raw(
                    200,
                    "application/json",
                    "<html><head><title>502 Bad Gateway</title></head><body>upstream connect error</body></html>",
                ))
            }
        }
        Fault::TruncatedStream => {
            let mut rendered = healthy(respond(shared, &recorded).await);
            rendered.body = if streaming {
                let events: Vec<&str> = rendered.body.split_inclusive("\n\n").collect();
                // Keep the role chunk and the first half of the content: no finish reason, no [DONE].
                let keep = (events.len() / 2)
                    .max(1)
                    .min(events.len().saturating_sub(3).max(1));
                events[..keep].concat()
            } else {
                let cut = rendered.body.len() / 2;
                let cut = (0..=cut)
                    .rev()
                    .find(|i| rendered.body.is_char_boundary(*i))
                    .unwrap_or(0);
                rendered.body[..cut].to_string()
            };
            rendered
        }
        Fault::NoChoices => {
            let model = recorded.body["model"].as_str().unwrap_or("fault-model");
            let usage = json!({"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10});
            if streaming {
                healthy(Reply::raw_sse([
                    json!({"id": response_id, "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": []}).to_string(),
                    json!({"id": response_id, "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": [], "usage": usage}).to_string(),
                    "[DONE]".to_string(),
                ]))
            } else {
                healthy(Reply::raw(
                    200,
                    "application/json",
                    json!({"id": response_id, "object": "chat.completion", "created": 1_700_000_000u64, "model": model, "choices": [], "usage": usage}).to_string(),
                ))
            }
        }
        Fault::UnknownTool => healthy(Reply::tool_call(
            UNKNOWN_TOOL_NAME,
            json!({"confirm": true}),
        )),
        Fault::InvalidArguments => {
            let tool = recorded
                .tool_names()
                .into_iter()
                .next()
                .unwrap_or_else(|| UNKNOWN_TOOL_NAME.to_string());
            healthy(Reply::tool_call(
                tool,
                json!({"unexpected_argument": [1, 2, 3]}),
            ))
        }
    };
    let head = response_head(&rendered, rendered.body.len());
    stream.write_all(head.as_bytes()).await.is_ok()
        && stream.write_all(rendered.body.as_bytes()).await.is_ok()
        && stream.flush().await.is_ok()
}

/// The responder's reply, after the pause it asks for ([`Reply::delayed`]).
async fn respond(shared: &Shared, request: &RecordedRequest) -> Reply {
    let reply = (shared.responder)(request);
    if let Some(pause) = reply.delay() {
        tokio::time::sleep(pause).await;
    }
    reply
}

/// The status line and headers of a response whose body has `length` bytes.
fn response_head(rendered: &RenderedReply, length: usize) -> String {
    let reason = http::StatusCode::from_u16(rendered.status)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or("Unknown");
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {length}\r\nconnection: keep-alive\r\n",
        rendered.status, rendered.content_type
    );
    for (name, value) in &rendered.headers {
        if !name.contains(['\r', '\n']) && !value.contains(['\r', '\n']) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(timeout: Duration) -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .expect("a reqwest client")
    }

    fn chat_body(stream: bool, tools: bool) -> Value {
        let mut body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "count the words"}]});
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        if tools {
            body["tools"] = json!([{"type": "function", "function": {"name": "word_count", "description": "Counts words", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]);
        }
        body
    }

    async fn scripted(fault: Fault) -> FaultServer {
        FaultServer::builder()
            .script([fault])
            .responder(|_| Reply::text("The text has four words."))
            .start()
            .await
    }

    async fn post(
        server: &FaultServer,
        body: &Value,
        timeout: Duration,
    ) -> Result<(u16, Vec<(String, String)>, String), reqwest::Error> {
        let response = client(timeout)
            .post(format!("{}/chat/completions", server.base_url()))
            .json(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        Ok((status, headers, response.text().await?))
    }

    fn data_events(body: &str) -> Vec<String> {
        body.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    #[tokio::test]
    async fn healthy_requests_get_the_responders_reply_and_are_logged() {
        let server = scripted(Fault::None).await;
        let (status, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(status, 200);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "The text has four words."
        );
        assert_eq!(body["model"], "gpt-4o-mini");
        // The same connection serves the next request (after the script: the healthy mix).
        let (status, _, _) = post(&server, &chat_body(true, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(status, 200);
        let served = server.served();
        assert_eq!(served.len(), 2);
        assert_eq!(served[0].fault, Fault::None);
        assert_eq!(served[1].request.body["stream"], true);
        assert_eq!(served[1].number, 2);
    }

    #[tokio::test]
    async fn never_answer_holds_the_request_until_the_client_gives_up() {
        let server = scripted(Fault::NeverAnswer).await;
        let error = post(
            &server,
            &chat_body(false, false),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        assert!(error.is_timeout(), "{error}");
        assert_eq!(server.fault_counts()[&FaultKind::NeverAnswer], 1);
    }

    #[tokio::test]
    async fn slow_answers_arrive_after_the_pause() {
        let server = scripted(Fault::Slow(Duration::from_millis(400))).await;
        let too_impatient = post(
            &server,
            &chat_body(false, false),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert!(too_impatient.is_timeout(), "{too_impatient}");
        server.push(Fault::Slow(Duration::from_millis(50)));
        let (status, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert!(body.contains("four words"), "{body}");
    }

    #[tokio::test]
    async fn rate_limits_say_when_to_come_back() {
        let server = scripted(Fault::RateLimited {
            retry_after_seconds: 2,
        })
        .await;
        let (status, headers, body) =
            post(&server, &chat_body(false, false), Duration::from_secs(5))
                .await
                .unwrap();
        assert_eq!(status, 429);
        assert!(headers.contains(&("retry-after".to_string(), "2".to_string())));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["type"], "rate_limit_error");
    }

    #[tokio::test]
    async fn server_errors_carry_their_status() {
        for status in [500, 502, 503] {
            let server = scripted(Fault::ServerError(status)).await;
            let (got, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(got, status);
            let body: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(body["error"]["type"], "server_error");
        }
    }

    #[tokio::test]
    async fn a_reset_mid_body_fails_while_the_body_is_read() {
        let server = scripted(Fault::ResetMidBody).await;
        let response = client(Duration::from_secs(5))
            .post(format!("{}/chat/completions", server.base_url()))
            .json(&chat_body(false, false))
            .send()
            .await
            .expect("the headers arrive intact");
        assert_eq!(response.status().as_u16(), 200);
        let error = response.text().await.unwrap_err();
        assert!(error.is_body() || error.is_decode(), "{error:?}");
    }

    #[tokio::test]
    async fn malformed_json_is_not_json() {
        let server = scripted(Fault::MalformedJson).await;
        let (status, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");

        server.push(Fault::MalformedJson);
        let (_, _, body) = post(&server, &chat_body(true, false), Duration::from_secs(5))
            .await
            .unwrap();
        let events = data_events(&body);
        assert!(
            events
                .iter()
                .any(|e| e != "[DONE]" && serde_json::from_str::<Value>(e).is_err()),
            "{body}"
        );
    }

    #[tokio::test]
    async fn truncated_streams_end_without_finish_or_done() {
        let server = scripted(Fault::TruncatedStream).await;
        let (status, _, body) = post(&server, &chat_body(true, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(status, 200);
        let events = data_events(&body);
        assert!(!events.is_empty(), "some events arrive");
        assert!(!events.iter().any(|e| e == "[DONE]"), "{body}");
        assert!(!body.contains("\"finish_reason\":\"stop\""), "{body}");

        server.push(Fault::TruncatedStream);
        let (_, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(body.starts_with('{') && serde_json::from_str::<Value>(&body).is_err());
    }

    #[tokio::test]
    async fn no_choices_is_a_completion_without_choices() {
        let server = scripted(Fault::NoChoices).await;
        let (_, _, body) = post(&server, &chat_body(false, false), Duration::from_secs(5))
            .await
            .unwrap();
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["choices"], json!([]));
        server.push(Fault::NoChoices);
        let (_, _, body) = post(&server, &chat_body(true, false), Duration::from_secs(5))
            .await
            .unwrap();
        let events = data_events(&body);
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        assert!(!body.contains("delta"), "{body}");
    }

    #[tokio::test]
    async fn tool_faults_call_what_cannot_run() {
        let server = scripted(Fault::UnknownTool).await;
        server.push(Fault::InvalidArguments);
        let (_, _, unknown) = post(&server, &chat_body(false, true), Duration::from_secs(5))
            .await
            .unwrap();
        let unknown: Value = serde_json::from_str(&unknown).unwrap();
        let call = &unknown["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], UNKNOWN_TOOL_NAME);
        assert_eq!(unknown["choices"][0]["finish_reason"], "tool_calls");

        let (_, _, invalid) = post(&server, &chat_body(true, true), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(invalid.contains("\"name\":\"word_count\""), "{invalid}");
        assert!(invalid.contains("unexpected_ar"), "{invalid}");
    }

    #[tokio::test]
    async fn the_mix_is_seeded_and_spares_requests_without_tools_from_tool_faults() {
        let mix = FaultMix::realistic().scaled(2.0);
        let draws = |seed: u64, tools: bool| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..500)
                .map(|_| mix.draw(&mut rng, tools))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(3, true), draws(3, true));
        assert_ne!(draws(3, true), draws(4, true));
        let with_tools = draws(3, true);
        for kind in FaultKind::FAULTS {
            assert!(
                with_tools.iter().any(|f| f.kind() == kind),
                "{kind} is drawn"
            );
        }
        assert!(
            !draws(3, false).iter().any(|f| f.kind().needs_tools()),
            "no tool faults without tools"
        );
        let healthy = with_tools.iter().filter(|f| **f == Fault::None).count();
        assert!(healthy > 200, "most requests are fine: {healthy}");
    }

    #[test]
    fn the_blocking_server_serves_from_its_own_thread() {
        let server = FaultServer::builder()
            .script([Fault::ServerError(502)])
            .start_blocking();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (status, _, _) = runtime
            .block_on(post(
                &server,
                &chat_body(false, false),
                Duration::from_secs(5),
            ))
            .unwrap();
        assert_eq!(status, 502);
    }
}
