//! [`A2aClientConfig`]: CrewAI's `A2AClientConfig` fields for one remote agent.

use std::fmt;
use std::time::Duration;

use url::Url;

use crate::error::A2aError;

/// How long a card fetch or one turn (send and wait) may take: CrewAI's default, 120 s.
pub const DEFAULT_A2A_TIMEOUT: Duration = Duration::from_secs(120);
/// CrewAI's default `max_turns`.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// The largest answer (a JSON body, or a whole event stream) read from a peer.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// How often `tasks/get` is asked when updates are polled.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Credentials sent with every request to the remote agent (card fetch included).
#[derive(Clone, PartialEq, Eq)]
pub enum A2aAuth {
    /// `Authorization: Bearer <token>` (CrewAI's `BearerTokenAuth`).
    Bearer(String),
    /// `Authorization: Basic ...` (CrewAI's `HTTPBasicAuth`).
    Basic { username: String, password: String },
    /// A header of the caller's naming (CrewAI's `APIKeyAuth` with `location="header"`).
    Header { name: String, value: String },
}

// Secrets never reach a log: only the kind of credential is shown.
impl fmt::Debug for A2aAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            A2aAuth::Bearer(_) => f.write_str("Bearer(***)"),
            A2aAuth::Basic { username, .. } => write!(f, "Basic({username}:***)"),
            A2aAuth::Header { name, .. } => write!(f, "Header({name}: ***)"),
        }
    }
}

/// How the client follows a task to its end (CrewAI's `updates`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum A2aUpdates {
    /// `message/stream`, reading the SSE events; agents whose card says they cannot stream are
    /// polled instead.
    #[default]
    Streaming,
    /// `message/send` without blocking, then `tasks/get` every `interval` until the task ends.
    Polling { interval: Duration },
}

/// One remote agent an agent may delegate to.
#[derive(Debug, Clone)]
pub struct A2aClientConfig {
    /// The agent's base URL (its card is at `/.well-known/agent-card.json` under it) or the
    /// card's own URL (ending in `.json`).
    pub endpoint: Url,
    pub auth: Option<A2aAuth>,
    /// The bound on the card fetch and on each turn (send and wait for the end).
    pub timeout: Duration,
    /// Messages the agent may send in one kickoff's conversation with this remote agent.
    pub max_turns: u32,
    /// `true`: a remote agent whose card cannot be fetched stops the task; `false`: the agent
    /// works without it (a warning is logged and an `a2a_delegation_failed` event emitted).
    pub fail_fast: bool,
    pub updates: A2aUpdates,
    /// `true`: a `completed` answer of the remote agent is the task's final answer as it is.
    pub trust_remote_completion_status: bool,
    pub max_response_bytes: usize,
}

impl A2aClientConfig {
    /// CrewAI's defaults for `endpoint`.
    pub fn new(endpoint: &str) -> Result<A2aClientConfig, A2aError> {
        let endpoint = Url::parse(endpoint.trim()).map_err(|error| {
            A2aError::Config(format!("`endpoint` '{endpoint}' is not a URL: {error}"))
        })?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(A2aError::Config(format!(
                "`endpoint` '{endpoint}' is not an http(s) URL (the gRPC transport is not supported)"
            )));
        }
        Ok(A2aClientConfig {
            endpoint,
            auth: None,
            timeout: DEFAULT_A2A_TIMEOUT,
            max_turns: DEFAULT_MAX_TURNS,
            fail_fast: true,
            updates: A2aUpdates::default(),
            trust_remote_completion_status: false,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Where the agent card is: the endpoint itself when it names a `.json` file, else the
    /// well-known path under it.
    pub fn card_url(&self) -> Url {
        if self.endpoint.path().ends_with(".json") {
            return self.endpoint.clone();
        }
        let mut url = self.endpoint.clone();
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}{}", crate::AGENT_CARD_PATH));
        url
    }

    crewai_llm::setters! {
        pub fn auth(auth: A2aAuth) => auth = Some(auth);
        pub fn timeout(timeout: Duration) => timeout = timeout;
        pub fn max_turns(max_turns: u32) => max_turns = max_turns;
        pub fn fail_fast(fail_fast: bool) => fail_fast = fail_fast;
        pub fn updates(updates: A2aUpdates) => updates = updates;
        pub fn trust_remote_completion_status(trust: bool) => trust_remote_completion_status = trust;
        pub fn max_response_bytes(limit: usize) => max_response_bytes = limit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_is_under_the_endpoint_unless_the_endpoint_is_the_card() {
        let base = A2aClientConfig::new("http://127.0.0.1:9/agents/one/").unwrap();
        assert_eq!(
            base.card_url().as_str(),
            "http://127.0.0.1:9/agents/one/.well-known/agent-card.json"
        );
        let card = A2aClientConfig::new("https://x.example/.well-known/agent.json").unwrap();
        assert_eq!(
            card.card_url().as_str(),
            "https://x.example/.well-known/agent.json"
        );
        assert!(A2aClientConfig::new("grpc://x:1").is_err());
        assert!(A2aClientConfig::new("not a url").is_err());
    }

    #[test]
    fn credentials_are_not_shown() {
        let auth = A2aAuth::Header {
            name: "X-Key".into(),
            value: "secret".into(),
        };
        assert_eq!(format!("{auth:?}"), "Header(X-Key: ***)");
        assert!(!format!("{:?}", A2aAuth::Bearer("secret".into())).contains("secret"));
    }
}
