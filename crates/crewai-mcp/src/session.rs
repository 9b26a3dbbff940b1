//! One run of a server process: the child, its MCP session, its stderr and the tools it listed.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
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
    /// `listing`, when given, is the tool listing of an earlier session, used instead of asking.
    pub(crate) async fn start(
        config: &McpStdioServer,
        listing: Option<Vec<rmcp::model::Tool>>,
    ) -> Result<Session, McpError> {
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
            let tools = match listing {
                Some(tools) => tools,
                None => service
                    .list_all_tools()
                    .await
                    .map_err(StartFailure::ListTools)?,
            };
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

    /// Ends the MCP session without waiting: calls in progress fail with a closed transport,
    /// and rmcp's serve task shuts the child down.
    pub(crate) fn close_now(&self) {
        self.service.cancellation_token().cancel();
    }

    /// Stops the server and waits (boundedly) until it has exited and been reaped, then kills
    /// whatever it started that is still running in its process group.
    pub(crate) async fn shutdown(mut self) {
        if self
            .service
            .close_with_timeout(SHUTDOWN_GRACE)
            .await
            .is_err()
        {
            tracing::warn!("the MCP service task ended abnormally during shutdown");
        }
        if let Some(pgid) = self.pid.take() {
            kill_process_group(pgid);
        }
        self.stderr_reader.abort();
    }
}

impl Drop for Session {
    /// Kills the server's whole process group at once (the server and whatever it started);
    /// rmcp's serve task, ending because the service was dropped, reaps the server.
    fn drop(&mut self) {
        if let Some(pgid) = self.pid.take() {
            kill_process_group(pgid);
        }
        self.stderr_reader.abort();
    }
}

/// SIGKILL to every process in the group `pgid` (the server's own: it was started as the
/// group's leader). The server exiting by itself does not end the processes it started, which
/// stay in its group. Linux does not hand out a pid while a process group of that id exists,
/// so the signal cannot reach an unrelated process while any member is alive.
#[cfg(unix)]
fn kill_process_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    // SAFETY: killpg takes plain integers and touches no memory of ours; a group that no longer
    // exists is reported as ESRCH, which is the expected case after a clean exit.
    let _ = unsafe { libc::killpg(pgid, libc::SIGKILL) };
}

#[cfg(not(unix))]
fn kill_process_group(_pgid: u32) {
    // process-wrap's job object wrapper would be the Windows counterpart; the server itself is
    // still killed on drop by KillOnDrop.
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
