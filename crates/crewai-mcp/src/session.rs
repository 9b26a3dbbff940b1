//! One run of a server process: the child, its MCP session, its stderr and the tools it listed.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use tokio::task::JoinHandle;

use crate::config::McpStdioServer;
use crate::error::McpError;
use crate::stderr::{StderrRing, StderrTail};

/// How long a session's shutdown may take: rmcp closes the child's stdin, waits, sends SIGTERM,
/// waits, then kills the process group (3 s per wait).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// How long a failed start waits for the rest of the server's stderr.
const STDERR_SETTLE: Duration = Duration::from_millis(500);

/// A started server. Dropping it stops the server: the MCP service's drop guard ends the serve
/// loop, which closes the transport, and the transport kills and reaps the child's process
/// group if it has not exited by itself.
pub(crate) struct Session {
    service: RunningService<RoleClient, ClientConfig>,
    stderr: Arc<StderrRing>,
    stderr_reader: JoinHandle<()>,
    pid: Option<u32>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

impl Session {
    /// Spawns the server, completes the handshake and lists its tools, all within the config's
    /// start timeout.
    pub(crate) async fn start(config: &McpStdioServer) -> Result<Session, McpError> {
        let mut command = CommandWrap::with_new(&config.command, |command| {
            command.args(&config.args);
            command.envs(config.env.iter().map(|(k, v)| (k, v)));
            if let Some(cwd) = &config.cwd {
                command.current_dir(cwd);
            }
        });
        // Its own process group, so that whatever the server starts is killed with it.
        command.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| McpError::Spawn {
                server: config.name.clone(),
                command: config.command_line(),
                source,
            })?;
        let pid = transport.id();
        let ring = StderrRing::new(config.stderr_tail_bytes);
        let stderr_reader = match stderr {
            Some(stderr) => ring.collect(config.name.clone(), stderr),
            None => tokio::spawn(async {}),
        };
        let started = tokio::time::timeout(config.start_timeout, async {
            let service = client_info()
                .serve(transport)
                .await
                .map_err(|error| StartFailure::Handshake(Box::new(error)))?;
            let tools = service
                .list_all_tools()
                .await
                .map_err(StartFailure::ListTools)?;
            Ok::<_, StartFailure>((service, tools))
        })
        .await;
        let failure = match started {
            Ok(Ok((service, tools))) => {
                return Ok(Session {
                    service,
                    stderr: ring,
                    stderr_reader,
                    pid,
                    tools,
                });
            }
            Ok(Err(failure)) => failure,
            Err(_elapsed) => {
                stderr_reader.abort();
                return Err(McpError::StartTimeout {
                    server: config.name.clone(),
                    command: config.command_line(),
                    timeout: config.start_timeout,
                    stderr: ring.tail(),
                });
            }
        };
        let stderr = ring.settled_tail(STDERR_SETTLE).await;
        stderr_reader.abort();
        Err(match failure {
            StartFailure::Handshake(source) => McpError::Handshake {
                server: config.name.clone(),
                command: config.command_line(),
                stderr,
                source,
            },
            StartFailure::ListTools(source) => McpError::ListTools {
                server: config.name.clone(),
                stderr,
                source,
            },
        })
    }
    pub(crate) fn service(&self) -> &RunningService<RoleClient, ClientConfig> {
        &self.service
    }

    /// Whether the server is still there to answer (its output has not ended).
    pub(crate) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    pub(crate) fn stderr_tail(&self) -> StderrTail {
        self.stderr.tail()
    }

    /// The stderr tail of a server that stopped, once the rest of it has been read.
    pub(crate) async fn final_stderr_tail(&self) -> StderrTail {
        self.stderr.settled_tail(STDERR_SETTLE).await
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Stops the server and waits (boundedly) until it has exited and been reaped.
    pub(crate) async fn shutdown(mut self) {
        if self.service.close_with_timeout(SHUTDOWN_GRACE).await.is_err() {
            tracing::warn!("the MCP service task ended abnormally during shutdown");
        }
        self.stderr_reader.abort();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stderr_reader.abort();
    }
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("crewai-rs", env!("CARGO_PKG_VERSION")),
    )
}

enum StartFailure {
    Handshake(Box<ClientInitializeError>),
    ListTools(ServiceError),
}
