//! [`A2aClient`]: the JSON-RPC calls of A2A 0.3.0 to one remote agent, each bounded in time
//! and in the size of what it reads.

use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use url::Url;

use crate::config::{A2aAuth, A2aClientConfig};
use crate::error::A2aError;
use crate::jsonrpc::{self, RequestId, Version};
use crate::types::{
    AgentCard, MessageSendParams, SendMessageResult, StreamEvent, Task, TaskIdParams,
    TaskQueryParams,
};

/// The older card path (A2A before 0.3), tried when the current one is not found.
const LEGACY_AGENT_CARD_PATH: &str = "/.well-known/agent.json";

/// A connection to one remote agent: its card, and the JSON-RPC endpoint chosen from it.
#[derive(Debug, Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    card: AgentCard,
    rpc_url: Url,
    timeout: Duration,
    max_bytes: usize,
}

impl A2aClient {
    /// Fetches the agent card (bounded by the config's timeout and response limit) and picks
    /// its JSON-RPC endpoint of protocol 0.3.
    pub async fn connect(config: &A2aClientConfig) -> Result<A2aClient, A2aError> {
        let http = reqwest::Client::builder()
            .default_headers(auth_headers(config.auth.as_ref())?)
            .connect_timeout(config.timeout)
            .build()
            .map_err(|source| A2aError::Connect {
                url: config.endpoint.to_string(),
                source,
            })?;
        let card_url = config.card_url();
        let card = match fetch_card(&http, &card_url, config).await {
            Err(A2aError::HttpStatus { status: 404, .. })
                if card_url.path().ends_with(crate::AGENT_CARD_PATH) =>
            {
                let mut legacy = card_url.clone();
                let path = card_url
                    .path()
                    .replace(crate::AGENT_CARD_PATH, LEGACY_AGENT_CARD_PATH);
                legacy.set_path(&path);
                fetch_card(&http, &legacy, config).await?
            }
            other => other?,
        };
        let rpc_url = rpc_endpoint(&card, &card_url)?;
        Ok(A2aClient {
            http,
            card,
            rpc_url,
            timeout: config.timeout,
            max_bytes: config.max_response_bytes,
        })
    }

    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    pub fn rpc_url(&self) -> &Url {
        &self.rpc_url
    }

    /// Whether the card says the agent streams (`capabilities.streaming`).
    pub fn can_stream(&self) -> bool {
        self.card.capabilities.streaming == Some(true)
    }

    /// `message/send`.
    pub async fn send_message(
        &self,
        params: &MessageSendParams,
    ) -> Result<SendMessageResult, A2aError> {
        self.call(jsonrpc::method::SEND, params).await
    }

    /// `tasks/get`.
    pub async fn get_task(&self, id: &str) -> Result<Task, A2aError> {
        let params = TaskQueryParams {
            id: id.to_string(),
            history_length: None,
            metadata: None,
        };
        self.call(jsonrpc::method::GET_TASK, &params).await
    }

    /// `tasks/cancel`.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aError> {
        let params = TaskIdParams {
            id: id.to_string(),
            metadata: None,
        };
        self.call(jsonrpc::method::CANCEL_TASK, &params).await
    }

    /// `message/stream`: the events as they arrive. The stream as a whole is cut at the
    /// response limit; the caller bounds how long it reads (a peer may stream forever).
    pub async fn stream_message(
        &self,
        params: &MessageSendParams,
    ) -> Result<impl Stream<Item = Result<StreamEvent, A2aError>> + Send + use<>, A2aError> {
        let url = self.rpc_url.to_string();
        let request = self
            .http
            .post(self.rpc_url.clone())
            .header(ACCEPT, "text/event-stream")
            .json(&envelope(jsonrpc::method::STREAM, params));
        let response = bounded(&url, self.timeout, request.send())
            .await?
            .map_err(|source| A2aError::Connect {
                url: url.clone(),
                source,
            })?;
        let status = response.status();
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !status.is_success() || !is_sse {
            // A JSON answer here is a JSON-RPC error (or a peer that does not stream).
            let body = read_capped(response, self.max_bytes, &url).await?;
            if !status.is_success() {
                return Err(status_error(&url, status.as_u16(), &body));
            }
            let result: StreamEvent = decode_response(&url, &body)?;
            return Ok(futures::stream::iter([Ok(result)]).boxed());
        }
        Ok(sse_events(response, url, self.max_bytes).boxed())
    }

    async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, A2aError> {
        let url = self.rpc_url.to_string();
        let request = self
            .http
            .post(self.rpc_url.clone())
            .header(ACCEPT, "application/json")
            .json(&envelope(method, params));
        let body = bounded(&url, self.timeout, async {
            let response = request.send().await.map_err(|source| A2aError::Connect {
                url: url.clone(),
                source,
            })?;
            let status = response.status();
            let body = read_capped(response, self.max_bytes, &url).await?;
            if !status.is_success() {
                return Err(status_error(&url, status.as_u16(), &body));
            }
            Ok(body)
        })
        .await??;
        decode_response(&url, &body)
    }
}

fn envelope<P: Serialize>(method: &str, params: P) -> jsonrpc::Request<P> {
    jsonrpc::Request {
        jsonrpc: Version::V2,
        id: RequestId::Text(uuid::Uuid::new_v4().to_string()),
        method: method.to_string(),
        params,
    }
}

async fn fetch_card(
    http: &reqwest::Client,
    url: &Url,
    config: &A2aClientConfig,
) -> Result<AgentCard, A2aError> {
    let shown = url.to_string();
    let body = bounded(&shown, config.timeout, async {
        let response = http
            .get(url.clone())
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|source| A2aError::Connect {
                url: shown.clone(),
                source,
            })?;
        let status = response.status();
        let body = read_capped(response, config.max_response_bytes, &shown).await?;
        if !status.is_success() {
            return Err(status_error(&shown, status.as_u16(), &body));
        }
        Ok(body)
    })
    .await??;
    serde_json::from_slice(&body).map_err(|source| A2aError::InvalidJson {
        url: shown,
        what: "an agent card",
        source,
    })
}

/// The card's JSON-RPC endpoint of protocol 0.3: its `url` when the card's version is 0.3 (or
/// unset), else an A2A 1.0 `supportedInterfaces` entry that speaks 0.3. A relative URL is
/// taken relative to the card's own.
fn rpc_endpoint(card: &AgentCard, card_url: &Url) -> Result<Url, A2aError> {
    let speaks_03 =
        |version: Option<&str>| version.is_none_or(|v| v == "0.3" || v.starts_with("0.3."));
    let jsonrpc =
        |transport: Option<&str>| transport.is_none_or(|t| t.eq_ignore_ascii_case("JSONRPC"));
    let candidate = card
        .url
        .as_deref()
        .filter(|_| {
            speaks_03(card.protocol_version.as_deref())
                && jsonrpc(card.preferred_transport.as_deref())
        })
        .or_else(|| {
            card.supported_interfaces
                .iter()
                .flatten()
                .find_map(|interface| {
                    (speaks_03(interface.protocol_version.as_deref())
                        && jsonrpc(Some(interface.protocol_binding.as_str())))
                    .then_some(interface.url.as_str())
                })
        });
    let Some(url) = candidate else {
        let mut offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .flatten()
            .map(|i| {
                format!(
                    "{} {} at {}",
                    i.protocol_binding,
                    i.protocol_version.as_deref().unwrap_or("?"),
                    i.url
                )
            })
            .collect();
        if let Some(url) = &card.url {
            offered.push(format!(
                "{} {} at {url}",
                card.preferred_transport.as_deref().unwrap_or("JSONRPC"),
                card.protocol_version.as_deref().unwrap_or("0.3.0")
            ));
        }
        return Err(A2aError::NoCompatibleInterface {
            url: card_url.to_string(),
            offered: if offered.is_empty() {
                "no endpoint at all".into()
            } else {
                offered.join("; ")
            },
        });
    };
    card_url.join(url).map_err(|error| {
        A2aError::Config(format!(
            "the agent card's endpoint '{url}' is not a URL: {error}"
        ))
    })
}

fn auth_headers(auth: Option<&A2aAuth>) -> Result<HeaderMap, A2aError> {
    let mut headers = HeaderMap::new();
    let invalid =
        |what: &str| A2aError::Config(format!("the {what} cannot be sent in an HTTP header"));
    match auth {
        None => {}
        Some(A2aAuth::Bearer(token)) => {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| invalid("bearer token"))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Some(A2aAuth::Basic { username, password }) => {
            use base64::Engine as _;
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
                .map_err(|_| invalid("basic credentials"))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Some(A2aAuth::Header { name, value }) => {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| A2aError::Config(format!("'{name}' is not an HTTP header name")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| invalid("header value"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
    }
    Ok(headers)
}

/// `work` under `timeout`, as [`A2aError::Timeout`] when it runs over.
async fn bounded<T>(
    url: &str,
    timeout: Duration,
    work: impl Future<Output = T>,
) -> Result<T, A2aError> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| A2aError::Timeout {
            url: url.to_string(),
            timeout,
        })
}

/// The body, read chunk by chunk and abandoned past `limit` bytes.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
    url: &str,
) -> Result<Vec<u8>, A2aError> {
    let too_large = || A2aError::TooLarge {
        url: url.to_string(),
        limit,
    };
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|source| A2aError::Connect {
        url: url.to_string(),
        source,
    })? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn status_error(url: &str, status: u16, body: &[u8]) -> A2aError {
    let text = String::from_utf8_lossy(body);
    let mut start: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        start.push('…');
    }
    A2aError::HttpStatus {
        url: url.to_string(),
        status,
        body: start,
    }
}

/// A JSON-RPC response body: its `result` as `R`, or its `error` as [`A2aError::Remote`].
fn decode_response<R: DeserializeOwned>(url: &str, body: &[u8]) -> Result<R, A2aError> {
    let response: jsonrpc::Response =
        serde_json::from_slice(body).map_err(|source| A2aError::InvalidJson {
            url: url.to_string(),
            what: "a JSON-RPC response",
            source,
        })?;
    result_of(url, response)
}

fn result_of<R: DeserializeOwned>(url: &str, response: jsonrpc::Response) -> Result<R, A2aError> {
    match (response.result, response.error) {
        (None, Some(error)) => Err(A2aError::Remote {
            url: url.to_string(),
            code: error.code,
            message: error.message,
        }),
        (Some(result), None) => {
            serde_json::from_value(result).map_err(|source| A2aError::InvalidJson {
                url: url.to_string(),
                what: "a result",
                source,
            })
        }
        (Some(_), Some(_)) => Err(A2aError::Protocol {
            url: url.to_string(),
            detail: "the response has both `result` and `error`".into(),
        }),
        (None, None) => Err(A2aError::Protocol {
            url: url.to_string(),
            detail: "the response has neither `result` nor `error`".into(),
        }),
    }
}

/// What cuts an SSE body short.
#[derive(Debug, thiserror::Error)]
enum BodyCut {
    #[error("{0}")]
    Read(#[from] reqwest::Error),
    #[error("too large")]
    TooLarge,
}

/// The SSE body's events, each a JSON-RPC response whose result is a [`StreamEvent`]; the
/// whole stream is cut at `limit` bytes.
fn sse_events(
    response: reqwest::Response,
    url: String,
    limit: usize,
) -> impl Stream<Item = Result<StreamEvent, A2aError>> + Send {
    use eventsource_stream::{EventStreamError, Eventsource};
    let mut seen = 0usize;
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len();
        if seen > limit {
            return Err(BodyCut::TooLarge);
        }
        Ok(chunk)
    });
    bytes.eventsource().map(move |event| match event {
        Ok(event) => decode_response(&url, event.data.as_bytes()),
        Err(EventStreamError::Transport(BodyCut::TooLarge)) => Err(A2aError::TooLarge {
            url: url.clone(),
            limit,
        }),
        Err(error) => Err(A2aError::Stream {
            url: url.clone(),
            detail: error.to_string(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card(value: serde_json::Value) -> AgentCard {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn picks_the_0_3_json_rpc_endpoint() {
        let base = Url::parse("http://h:1/.well-known/agent-card.json").unwrap();
        let legacy = card(json!({"name": "a", "description": "d", "version": "1",
            "url": "/rpc", "protocolVersion": "0.3.0"}));
        assert_eq!(
            rpc_endpoint(&legacy, &base).unwrap().as_str(),
            "http://h:1/rpc"
        );
        let mixed = card(json!({"name": "a", "description": "d", "version": "1",
        "supportedInterfaces": [
            {"url": "http://h:1/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://h:1/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ]}));
        assert_eq!(
            rpc_endpoint(&mixed, &base).unwrap().as_str(),
            "http://h:1/v03"
        );
        let only_v1 = card(json!({"name": "a", "description": "d", "version": "1",
            "supportedInterfaces": [{"url": "http://h:1/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}));
        let error = rpc_endpoint(&only_v1, &base).unwrap_err().to_string();
        assert!(error.contains("JSONRPC 1.0 at http://h:1/v1"), "{error}");
    }

    #[test]
    fn a_response_needs_exactly_one_of_result_and_error() {
        let both = br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#;
        assert!(matches!(
            decode_response::<serde_json::Value>("u", both),
            Err(A2aError::Protocol { .. })
        ));
        let neither = br#"{"jsonrpc":"2.0","id":1}"#;
        assert!(matches!(
            decode_response::<serde_json::Value>("u", neither),
            Err(A2aError::Protocol { .. })
        ));
        assert!(matches!(
            decode_response::<serde_json::Value>("u", b"<html>"),
            Err(A2aError::InvalidJson { .. })
        ));
    }
}
