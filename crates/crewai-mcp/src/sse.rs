//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer has: a `GET` opens an
//! event stream whose first `endpoint` event names the URL to `POST` messages to; the server's
//! messages arrive as `message` events on the stream.
//!
//! Two tasks carry it: one reads the stream, one posts. Either ending (the stream closed, a
//! message that is not JSON-RPC, a refused or timed-out post) ends the other, which closes the
//! MCP session: calls in progress fail at once instead of waiting for their timeout.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::channel::mpsc;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use rmcp::service::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::McpRemoteServer;
use crate::error::McpError;

/// How many messages may wait to be posted or read.
const QUEUE: usize = 64;

/// A connected HTTP+SSE transport: what rmcp serves over, and the tasks to stop with it.
pub(crate) struct SseTransport {
    pub outgoing: mpsc::Sender<TxJsonRpcMessage<RoleClient>>,
    pub incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    pub tasks: Vec<JoinHandle<()>>,
}

/// The headers of every request: the server's own and `Accept`. A header that is not valid
/// HTTP is an error naming it (never its value, which may be a secret).
pub(crate) fn header_map(config: &McpRemoteServer) -> Result<HeaderMap, McpError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let invalid = || {
            McpError::InvalidServer(format!(
                "MCP server '{}': the header '{name}' is not a valid HTTP header (its value is not shown)",
                config.name
            ))
        };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        let mut header_value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        header_value.set_sensitive(true);
        headers.insert(header_name, header_value);
    }
    Ok(headers)
}

/// Opens the event stream and waits for the `endpoint` event (the caller bounds the wait).
pub(crate) async fn connect(config: &McpRemoteServer) -> Result<SseTransport, McpError> {
    let failed = |detail: String| McpError::Connect {
        server: config.name.clone(),
        url: config.url.clone(),
        detail,
    };
    let mut headers = header_map(config)?;
    if let Some(oauth) = &config.oauth {
        let token = crate::oauth::access_token(config, oauth).await?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| failed("the OAuth token is not a valid header value".into()))?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(config.start_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| failed(crewai_llm::error_chain(&error)))?;
    let base = reqwest::Url::parse(&config.url)
        .map_err(|error| failed(format!("the URL is not valid: {error}")))?;
    let response = client
        .get(base.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|error| failed(crewai_llm::error_chain(&error)))?;
    if !response.status().is_success() {
        return Err(failed(format!(
            "the event stream was refused with HTTP {}",
            response.status()
        )));
    }
    let mut events = response.bytes_stream().eventsource();
    let endpoint = loop {
        match events.next().await {
            Some(Ok(event)) if event.event == "endpoint" => {
                break base.join(event.data.trim()).map_err(|error| {
                    failed(format!("the announced endpoint is not a URL: {error}"))
                })?;
            }
            Some(Ok(_)) => continue,
            Some(Err(error)) => return Err(failed(format!("the event stream broke: {error}"))),
            None => {
                return Err(failed(
                    "the event stream ended before naming its endpoint".into(),
                ));
            }
        }
    };
    if endpoint.origin() != base.origin() {
        return Err(failed(format!(
            "the announced endpoint {endpoint} is on another origin than the event stream"
        )));
    }

    let stop = CancellationToken::new();
    let (to_rmcp, incoming) = mpsc::channel(QUEUE);
    let (outgoing, from_rmcp) = mpsc::channel(QUEUE);
    let server = config.name.clone();
    let reader = {
        let stop = stop.clone();
        let server = server.clone();
        tokio::spawn(async move {
            let mut to_rmcp = to_rmcp;
            let read = async {
                while let Some(event) = events.next().await {
                    let event = match event {
                        Ok(event) => event,
                        Err(error) => {
                            tracing::warn!(server = %server, error = %error, "the MCP event stream broke");
                            return;
                        }
                    };
                    if !(event.event.is_empty() || event.event == "message") {
                        continue;
                    }
                    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                        Ok(message) => {
                            if futures::SinkExt::send(&mut to_rmcp, message).await.is_err() {
                                return;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(server = %server, error = %error, "the MCP server sent a message that is not JSON-RPC; closing the session");
                            return;
                        }
                    }
                }
            };
            tokio::select! {
                () = read => {}
                () = stop.cancelled() => {}
            }
            stop.cancel();
        })
    };
    let writer = {
        let stop = stop.clone();
        let timeout = config.call_timeout;
        tokio::spawn(async move {
            let mut from_rmcp = from_rmcp;
            let write = async {
                while let Some(message) = from_rmcp.next().await {
                    let posted = client
                        .post(endpoint.clone())
                        .headers(headers.clone())
                        .timeout(timeout)
                        .json(&message)
                        .send()
                        .await;
                    match posted {
                        Ok(response) if response.status().is_success() => {}
                        Ok(response) => {
                            tracing::warn!(server = %server, status = %response.status(), "the MCP server refused a message; closing the session");
                            return;
                        }
                        Err(error) => {
                            tracing::warn!(server = %server, error = %crewai_llm::error_chain(&error), "a message could not be posted to the MCP server; closing the session");
                            return;
                        }
                    }
                }
            };
            tokio::select! {
                () = write => {}
                () = stop.cancelled() => {}
            }
            stop.cancel();
        })
    };
    Ok(SseTransport {
        outgoing,
        incoming,
        tasks: vec![reader, writer],
    })
}
