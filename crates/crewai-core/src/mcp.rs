//! An agent's MCP servers (`mcps:`) in a run: one session per server per kickoff, opened when
//! the first task of an agent that lists the server starts, and closed when the kickoff ends
//! (however it ends: the sessions' drop kills and reaps what a shutdown did not reach).
//!
//! ```no_run
//! use crewai_core::Agent;
//! use crewai_core::mcp::McpServer;
//! # fn demo(llm: std::sync::Arc<dyn crewai_llm::Llm>) -> Result<(), crewai_core::AgentError> {
//! let agent = Agent::builder()
//!     .role("Clerk")
//!     .goal("Tell the time")
//!     .backstory("Asks the clock.")
//!     .llm(llm)
//!     .mcp(McpServer::stdio("uvx", ["mcp-server-time"]).tool_filter(["get_current_time"]))
//!     .build()?;
//! # drop(agent); Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use async_trait::async_trait;
use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput, ToolSet};
use serde_json::Value;
use uuid::Uuid;

pub use crewai_mcp::{
    DEFAULT_MAX_RESULT_BYTES, DEFAULT_MCP_TIMEOUT, McpConnection, McpError, McpOAuth, McpServer,
    McpStdioServer, McpTransport,
};

use crate::events::{EventBus, EventKind};
use crate::kickoff_slots::KickoffSlots;

/// The sessions of one kickoff, by server entry. Clones share them.
#[derive(Clone, Default)]
pub(crate) struct McpSessions {
    sessions: KickoffSlots<usize, OpenServer>,
}

/// A server's session in this kickoff and the tools the agent gets from it.
struct OpenServer {
    connection: McpConnection,
    tools: Vec<ToolHandle>,
}

/// Who is asking for a server's tools, for the events.
pub(crate) struct McpRequester<'a> {
    pub agent_role: &'a str,
    pub task_name: Option<&'a str>,
    pub parent: Option<Uuid>,
}

impl McpSessions {
    /// `tools` with the tools of every server in `servers` added (a name already taken gets a
    /// numeric suffix), opening the sessions this kickoff does not have yet. A server that
    /// cannot be reached is an error: the agent would otherwise work without tools it was
    /// promised.
    pub(crate) async fn add_tools(
        &self,
        servers: &[McpServer],
        tools: &mut ToolSet,
        events: &EventBus,
        requester: &McpRequester<'_>,
    ) -> Result<(), McpError> {
        for server in servers {
            let open = self
                .sessions
                .get_or_open(server.entry_id(), || opening(server, events, requester))
                .await?;
            for tool in &open.tools {
                tools.insert(tool.clone());
            }
        }
        Ok(())
    }

    /// Closes every session (bounded; see [`McpConnection::shutdown`]).
    pub(crate) async fn shutdown(&self) {
        for open in self.sessions.drain().await {
            open.connection.shutdown().await;
        }
    }
}

/// [`open_server`] behind a trait object: the transports' futures are deep, and erasing the
/// type here keeps every future that awaits an agent's run (`Send` checks, layouts) shallow.
fn opening<'a>(
    server: &'a McpServer,
    events: &'a EventBus,
    requester: &'a McpRequester<'a>,
) -> Pin<Box<dyn Future<Output = Result<OpenServer, McpError>> + Send + 'a>> {
    Box::pin(open_server(server, events, requester))
}

async fn open_server(
    server: &McpServer,
    events: &EventBus,
    requester: &McpRequester<'_>,
) -> Result<OpenServer, McpError> {
    let server_name = server.server_name().to_string();
    let server_url = server.location();
    let transport_type = server.transport.kind().to_string();
    let agent_role = Some(requester.agent_role.to_string());
    let task_name = requester.task_name.map(str::to_string);
    let started = events.emit_with(requester.parent, || EventKind::McpConnectionStarted {
        server_name: server_name.clone(),
        server_url: server_url.clone(),
        transport_type: transport_type.clone(),
        agent_role: agent_role.clone(),
        task_name: task_name.clone(),
    });
    let clock = Instant::now();
    match server.open().await {
        Ok((connection, listed)) => {
            let tools: Vec<ToolHandle> = listed
                .into_iter()
                .map(|tool| {
                    ToolHandle::from_tool(ObservedMcpTool {
                        tool,
                        server_name: server_name.clone(),
                        events: events.clone(),
                    })
                })
                .collect();
            events.emit_with(Some(started), || EventKind::McpConnectionCompleted {
                server_name: server_name.clone(),
                server_url: server_url.clone(),
                transport_type: transport_type.clone(),
                agent_role: agent_role.clone(),
                task_name: task_name.clone(),
                connection_duration_ms: elapsed_ms(clock),
                tool_count: u32::try_from(tools.len()).unwrap_or(u32::MAX),
            });
            Ok(OpenServer { connection, tools })
        }
        Err(error) => {
            events.emit_with(Some(started), || EventKind::McpConnectionFailed {
                server_name: server_name.clone(),
                server_url: server_url.clone(),
                transport_type: transport_type.clone(),
                agent_role: agent_role.clone(),
                task_name: task_name.clone(),
                error: crewai_llm::error_chain(&error),
            });
            Err(error)
        }
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// An MCP tool that reports its calls as `mcp_tool_execution_*` events on the run's bus.
struct ObservedMcpTool {
    tool: crewai_mcp::McpTool,
    server_name: String,
    events: EventBus,
}

#[async_trait]
impl Tool for ObservedMcpTool {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> Value {
        self.tool.parameters()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let server_name = &self.server_name;
        let tool_name = &self.tool.info().name;
        let parent = ctx
            .parent_event_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok());
        let started = self
            .events
            .emit_with(parent, || EventKind::McpToolExecutionStarted {
                server_name: server_name.clone(),
                tool_name: tool_name.clone(),
                tool_args: args.clone(),
                agent_role: ctx.agent_role.clone(),
                task_name: ctx.task_name.clone(),
            });
        let clock = Instant::now();
        let result = self.tool.run(args.clone(), ctx).await;
        match &result {
            Ok(output) => {
                self.events
                    .emit_with(Some(started), || EventKind::McpToolExecutionCompleted {
                        server_name: server_name.clone(),
                        tool_name: tool_name.clone(),
                        tool_args: args.clone(),
                        agent_role: ctx.agent_role.clone(),
                        task_name: ctx.task_name.clone(),
                        result: output.to_text(),
                        execution_duration_ms: elapsed_ms(clock),
                    })
            }
            Err(error) => {
                self.events
                    .emit_with(Some(started), || EventKind::McpToolExecutionFailed {
                        server_name: server_name.clone(),
                        tool_name: tool_name.clone(),
                        tool_args: args.clone(),
                        agent_role: ctx.agent_role.clone(),
                        task_name: ctx.task_name.clone(),
                        error: crewai_llm::error_chain(error),
                    })
            }
        };
        result
    }
}
