//! [`McpConnection`]: a running server, started again (a bounded number of times) when it dies.

use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde_json::{Map, Value};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::config::McpStdioServer;
use crate::error::McpError;
use crate::server::{McpServer, McpTransport};
use crate::session::Session;
use crate::stderr::StderrTail;
use crate::tool::{DEFAULT_MAX_RESULT_BYTES, McpTool, McpToolInfo, call_outcome};

/// A connection to one MCP server over a child process's stdio.
///
/// Clones share the server. The server stops when the last clone and every tool taken from it
/// are dropped, or at [`McpConnection::shutdown`]. If the server dies, the next call starts it
/// again (handshake, tools listed again) up to [`McpStdioServer::max_restarts`] times; a call in
/// progress when it died fails, since it may have had effects already.
#[derive(Clone)]
pub struct McpConnection {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: McpTransport,
    /// The agent's server entry this connection was opened for: where a kept listing lives.
    server: Option<McpServer>,
    /// The longest tool result kept, in bytes; longer results are cut with a note.
    pub(crate) max_result_bytes: usize,
    state: Mutex<State>,
}

struct State {
    session: Option<Arc<Session>>,
    restarts: u32,
    shut_down: bool,
    /// The stderr tail of the last server that died, for the error once restarts are used up
    /// (the dead session itself is dropped to reap it).
    last_stderr: StderrTail,
}

/// What a call reached: the tool's result, or why it has none.
pub(crate) enum CallError {
    Mcp(McpError),
    Cancelled,
}

impl McpConnection {
    /// Starts the server and lists its tools, within the config's start timeout.
    pub async fn connect_stdio(config: McpStdioServer) -> Result<McpConnection, McpError> {
        McpConnection::connect_with(McpTransport::Stdio(config), None).await
    }

    /// Connects to an agent's server entry; its tool listing is taken from (and kept in) the
    /// entry when it has `cache_tools_list`.
    pub async fn connect_server(server: &McpServer) -> Result<McpConnection, McpError> {
        McpConnection::connect_with(server.transport.clone(), Some(server.clone())).await
    }

    async fn connect_with(
        config: McpTransport,
        server: Option<McpServer>,
    ) -> Result<McpConnection, McpError> {
        let cached = server.as_ref().and_then(McpServer::cached_listing);
        let session = Session::start(&config, cached).await?;
        if let Some(server) = &server {
            server.keep_listing(&session.tools);
        }
        let max_result_bytes = server
            .as_ref()
            .map_or(DEFAULT_MAX_RESULT_BYTES, |server| server.max_result_bytes);
        Ok(McpConnection {
            inner: Arc::new(Inner {
                server,
                max_result_bytes,
                config,
                state: Mutex::new(State {
                    session: Some(Arc::new(session)),
                    restarts: 0,
                    shut_down: false,
                    last_stderr: StderrTail::default(),
                }),
            }),
        })
    }

    /// How the server is reached.
    pub fn config(&self) -> &McpTransport {
        &self.inner.config
    }

    /// The tools the server lists now, as it describes them.
    pub async fn tool_listing(&self) -> Result<Vec<McpToolInfo>, McpError> {
        let session = self.inner.live_session().await?;
        Ok(session.tools.iter().map(McpToolInfo::from_listed).collect())
    }

    /// Every listed tool as a crewai tool named as the server names it.
    pub async fn tools(&self) -> Result<Vec<crewai_tools::ToolHandle>, McpError> {
        Ok(self
            .tool_listing()
            .await?
            .into_iter()
            .map(|info| crewai_tools::ToolHandle::from_tool(McpTool::new(self.inner.clone(), info)))
            .collect())
    }

    /// The listed tool `info` as a crewai tool of this connection.
    pub fn tool_from(&self, info: McpToolInfo) -> McpTool {
        McpTool::new(self.inner.clone(), info)
    }

    /// One listed tool, by the name the server gives it.
    pub async fn tool(&self, name: &str) -> Result<Option<McpTool>, McpError> {
        Ok(self
            .tool_listing()
            .await?
            .into_iter()
            .find(|info| info.name == name)
            .map(|info| McpTool::new(self.inner.clone(), info)))
    }

    /// The server process's id while it runs (for diagnostics and tests).
    pub async fn server_pid(&self) -> Option<u32> {
        let state = self.inner.state.lock().await;
        state.session.as_ref().and_then(|session| session.pid())
    }

    /// How many times the server has been started again.
    pub async fn restarts(&self) -> u32 {
        self.inner.state.lock().await.restarts
    }

    /// Stops the server and waits until it has exited (bounded: closing its stdin, then
    /// SIGTERM, then killing its process group). Later calls fail with
    /// [`McpError::ShutDown`].
    pub async fn shutdown(&self) {
        let session = {
            let mut state = self.inner.state.lock().await;
            state.shut_down = true;
            state.session.take()
        };
        if let Some(session) = session {
            match Arc::try_unwrap(session) {
                Ok(session) => session.shutdown().await,
                // A call still holds it: end the MCP session now (the call fails at once and
                // lets go of it; the last holder's drop kills the process group).
                Err(shared) => shared.close_now(),
            }
        }
    }
}

impl Inner {
    /// The running session, starting the server again if it died and restarts are left.
    pub(crate) async fn live_session(&self) -> Result<Arc<Session>, McpError> {
        let mut state = self.state.lock().await;
        if state.shut_down {
            return Err(McpError::ShutDown {
                server: self.config.name().to_string(),
            });
        }
        if let Some(session) = &state.session
            && session.is_alive()
        {
            return Ok(Arc::clone(session));
        }
        if let Some(dead) = state.session.take() {
            // Dropping the dead session kills what is left of its process group and reaps it.
            state.last_stderr = dead.stderr_tail();
        }
        if state.restarts >= self.config.max_restarts() {
            return Err(McpError::RestartsExhausted {
                server: self.config.name().to_string(),
                restarts: state.restarts,
                stderr: state.last_stderr.clone(),
            });
        }
        state.restarts += 1;
        tracing::warn!(
            server = %self.config.name(),
            restart = state.restarts,
            "the MCP server stopped; starting it again"
        );
        let cached = self.server.as_ref().and_then(McpServer::cached_listing);
        let session = Arc::new(Session::start(&self.config, cached).await?);
        state.session = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Calls `tool` with `arguments` under the call timeout and `cancellation` (which also
    /// ends a wait for a restart).
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        cancellation: &CancellationToken,
    ) -> Result<crate::tool::CallOutcome, CallError> {
        tokio::select! {
            biased;
            () = cancellation.cancelled() => Err(CallError::Cancelled),
            outcome = self.call_uncancelled(tool, arguments) => outcome.map_err(CallError::Mcp),
        }
    }

    async fn call_uncancelled(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<crate::tool::CallOutcome, McpError> {
        let session = self.live_session().await?;
        if !session.tools.iter().any(|listed| listed.name == tool) {
            return Err(McpError::ToolGone {
                server: self.config.name().to_string(),
                tool: tool.to_string(),
            });
        }
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        // Dropping the request future (timeout, cancellation) sends `notifications/cancelled`.
        let call = session.service().call_tool(params);
        match tokio::time::timeout(self.config.call_timeout(), call).await {
            Err(_elapsed) => Err(McpError::CallTimeout {
                server: self.config.name().to_string(),
                tool: tool.to_string(),
                timeout: self.config.call_timeout(),
            }),
            Ok(Ok(result)) => Ok(call_outcome(result, self.max_result_bytes)),
            Ok(Err(source @ (ServiceError::McpError(_) | ServiceError::UnexpectedResponse))) => {
                Err(McpError::CallRefused {
                    server: self.config.name().to_string(),
                    tool: tool.to_string(),
                    source: Box::new(source),
                })
            }
            Ok(Err(source)) => Err(McpError::ServerStopped {
                server: self.config.name().to_string(),
                tool: tool.to_string(),
                stderr: session.final_stderr_tail().await,
                source: Box::new(source),
            }),
        }
    }
}
