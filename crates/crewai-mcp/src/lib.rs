//! # crewai-mcp
//!
//! An MCP client on the official Rust SDK (`rmcp`): a server started as a child process, its
//! tools as crewai [`crewai_tools::Tool`]s.
//!
//! ```no_run
//! # async fn example() -> Result<(), crewai_mcp::McpError> {
//! use std::time::Duration;
//! use crewai_mcp::{McpConnection, McpStdioServer};
//!
//! let server = McpStdioServer::new("files", "mcp-server-filesystem")
//!     .arg("/tmp")
//!     .call_timeout(Duration::from_secs(20));
//! let connection = McpConnection::connect_stdio(server).await?;
//! let tools = connection.tools().await?; // ToolHandles for an agent
//! # drop(tools);
//! connection.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! What it guarantees:
//! - every wait is bounded: starting (spawn, handshake, `tools/list`) by
//!   [`McpStdioServer::start_timeout`], each call by [`McpStdioServer::call_timeout`]; a call
//!   abandoned by timeout or by the [`crewai_tools::ToolContext`]'s cancellation is cancelled on
//!   the server (`notifications/cancelled`);
//! - the server runs in its own process group, which is killed and reaped on every exit path:
//!   [`McpConnection::shutdown`], dropping the last handle, a failed start;
//! - a server that died is started again by the next call, at most
//!   [`McpStdioServer::max_restarts`] times; errors end with the tail of its stderr.

mod config;
mod connection;
mod error;
mod oauth;
mod server;
mod session;
mod sse;
mod stderr;
mod tool;

pub use config::{McpOAuth, McpRemoteServer, McpStdioServer};
pub use connection::McpConnection;
pub use error::McpError;
pub use server::{DEFAULT_MCP_TIMEOUT, McpServer, McpTransport};
pub use stderr::StderrTail;
pub use tool::{DEFAULT_MAX_RESULT_BYTES, McpTool, McpToolInfo};
