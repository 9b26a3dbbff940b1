//! The server itself: its builder, its state (the script, the mix, the log) and the accept loop.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::net::{TcpListener, TcpStream};

use super::answer::answer;
use super::http::read_request;
use super::{Fault, FaultKind, FaultMix};
use crate::scripted::{RecordedRequest, Reply};
use crate::serve::{self, Running, Stopped};

/// Decides the healthy reply to a request.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// One request and what it got.
#[derive(Debug, Clone)]
pub struct ServedRequest {
    /// 1-based arrival number.
    pub number: usize,
    pub request: RecordedRequest,
    pub fault: Fault,
}

pub(super) struct State {
    pub(super) script: VecDeque<Fault>,
    pub(super) mix: FaultMix,
    pub(super) rng: StdRng,
    pub(super) served: Vec<ServedRequest>,
    pub(super) next_call_id: u64,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) responder: Responder,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        serve::lock(&self.state)
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
        let shared = self.shared();
        let server_shared = shared.clone();
        FaultServer {
            running: Running::spawn(SERVER, |listener, stopped| {
                accept_loop(listener, server_shared, stopped)
            })
            .await,
            shared,
        }
    }

    /// Starts the server on its own thread and runtime, for synchronous tests (spawning a binary).
    pub fn start_blocking(self) -> FaultServer {
        let shared = self.shared();
        let server_shared = shared.clone();
        FaultServer {
            running: Running::on_own_thread(SERVER, |listener, stopped| {
                accept_loop(listener, server_shared, stopped)
            }),
            shared,
        }
    }
}

/// The server's name in its panic messages.
const SERVER: &str = "fault server";

/// A running fault server; dropping it closes the listener and every connection (held requests
/// included).
pub struct FaultServer {
    running: Running,
    shared: Arc<Shared>,
}

impl FaultServer {
    /// See [`FaultServerBuilder`].
    pub fn builder() -> FaultServerBuilder {
        FaultServerBuilder::default()
    }

    /// The socket address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.running.address()
    }

    /// The OpenAI-style base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address())
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

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stopped: Stopped) {
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

/// Serves requests on one kept-alive connection until the client closes it or a fault ends it.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buffer).await {
        if !answer(&mut stream, &shared, request).await {
            return;
        }
    }
}
