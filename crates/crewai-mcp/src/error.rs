//! [`McpError`]: what can go wrong talking to an MCP server.

use std::time::Duration;

use rmcp::service::{ClientInitializeError, ServiceError};

use crate::stderr::StderrTail;

/// An MCP server could not be started or did not answer as it should. Messages name the server
/// and end with the tail of its stderr when it wrote any (tracebacks included).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The program could not be started at all.
    #[error("MCP server '{server}' could not be started with `{command}`")]
    Spawn {
        server: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The program started but the MCP handshake (`initialize`) failed; usually it exited.
    #[error("MCP server '{server}' (`{command}`) did not complete the MCP handshake{stderr}")]
    Handshake {
        server: String,
        command: String,
        stderr: StderrTail,
        #[source]
        source: Box<ClientInitializeError>,
    },
    /// Starting (handshake and tool listing) took longer than the start timeout.
    #[error(
        "MCP server '{server}' (`{command}`) did not start within {timeout:?} (raise the start timeout if it is slow to load){stderr}"
    )]
    StartTimeout {
        server: String,
        command: String,
        timeout: Duration,
        stderr: StderrTail,
    },
    /// `tools/list` failed.
    #[error("MCP server '{server}' did not list its tools{stderr}")]
    ListTools {
        server: String,
        stderr: StderrTail,
        #[source]
        source: Box<ServiceError>,
    },
    /// A `tools/call` took longer than the call timeout; it was cancelled on the server.
    #[error(
        "the tool '{tool}' on MCP server '{server}' did not finish within {timeout:?}; the call was abandoned"
    )]
    CallTimeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    /// The server stopped answering during a call (it exited or closed its output).
    #[error("MCP server '{server}' stopped during the call to '{tool}'{stderr}")]
    ServerStopped {
        server: String,
        tool: String,
        stderr: StderrTail,
        #[source]
        source: Box<ServiceError>,
    },
    /// The server answered the call with a protocol error (an unknown tool, bad parameters).
    #[error("MCP server '{server}' refused the call to '{tool}'")]
    CallRefused {
        server: String,
        tool: String,
        #[source]
        source: Box<ServiceError>,
    },
    /// The server died again after using up its restarts.
    #[error(
        "MCP server '{server}' stopped and has already been restarted {restarts} time(s), so it is not started again{stderr}"
    )]
    RestartsExhausted {
        server: String,
        restarts: u32,
        stderr: StderrTail,
    },
    /// After a restart the server no longer lists a tool it listed before.
    #[error("MCP server '{server}' no longer lists the tool '{tool}' after it was restarted")]
    ToolGone { server: String, tool: String },
    /// An agent's `tool_filter` names tools the server does not list.
    #[error(
        "MCP server '{server}' does not list the tool(s) {missing:?} named in tool_filter; it lists {listed:?}"
    )]
    FilteredToolMissing {
        server: String,
        missing: Vec<String>,
        listed: Vec<String>,
    },
    /// An HTTP server could not be reached, or its event stream did not open as it should.
    #[error("MCP server '{server}' at {url} could not be reached: {detail}")]
    Connect {
        server: String,
        url: String,
        detail: String,
    },
    /// The OAuth flow for an HTTP server failed: its metadata could not be discovered, or the
    /// authorization server refused the client's credentials.
    #[error("MCP server '{server}' at {url}: OAuth failed: {detail}")]
    OAuth {
        server: String,
        url: String,
        detail: String,
    },
    /// An `mcps:` entry cannot be used as written.
    #[error("{0}")]
    InvalidServer(String),
    /// The connection was shut down.
    #[error("the connection to MCP server '{server}' is shut down")]
    ShutDown { server: String },
}

impl crewai_tools::tool::CauseOfToolError for McpError {
    fn into_tool_error(self, action: String) -> crewai_tools::ToolError {
        crewai_tools::ToolError::Service {
            action,
            source: Box::new(self),
        }
    }
}
