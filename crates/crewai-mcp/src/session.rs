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

use crate::config::{McpRemoteServer, McpStdioServer};
use crate::error::McpError;
use crate::server::McpTransport;
use crate::sse;
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
    /// What runs beside the MCP service for this session (the stderr reader, an SSE
    /// transport's reader and writer); stopped with it.
    tasks: Vec<JoinHandle<()>>,
    pid: Option<u32>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

impl Session {
    /// Starts a session over `transport`: the handshake and the tool listing (`listing`, when
    /// given, is an earlier session's, used instead of asking), within the start timeout.
    pub(crate) async fn start(
        transport: &McpTransport,
        listing: Option<Vec<rmcp::model::Tool>>,
    ) -> Result<Session, McpError> {
        match transport {
            McpTransport::Stdio(config) => Session::start_stdio(config, listing).await,
            McpTransport::Http(config) => {
                let transport = streamable_http(config).await?;
                Session::start_remote(config, transport, Vec::new(), listing).await
            }
            McpTransport::Sse(config) => {
                let connected = tokio::time::timeout(config.start_timeout, sse::connect(config))
                    .await
                    .map_err(|_elapsed| McpError::StartTimeout {
                        server: config.name.clone(),
                        command: config.url.clone(),
                        timeout: config.start_timeout,
                        stderr: StderrTail::default(),
                    })??;
                let sse::SseTransport {
                    outgoing,
                    incoming,
                    tasks,
                } = connected;
                Session::start_remote(config, (outgoing, incoming), tasks, listing).await
            }
        }
    }

    /// A session with a server over HTTP; `tasks` carry its transport and stop with it.
    async fn start_remote<T, E, A>(
        config: &McpRemoteServer,
        transport: T,
        tasks: Vec<JoinHandle<()>>,
        listing: Option<Vec<rmcp::model::Tool>>,
    ) -> Result<Session, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let started =
            tokio::time::timeout(config.start_timeout, initialize(transport, listing)).await;
        let failure = match started {
            Ok(Ok((service, tools))) => {
                return Ok(Session {
                    service,
                    stderr: StderrRing::new(0),
                    tasks,
                    pid: None,
                    tools,
                });
            }
            Ok(Err(failure)) => failure,
            Err(_elapsed) => {
                tasks.iter().for_each(JoinHandle::abort);
                return Err(McpError::StartTimeout {
                    server: config.name.clone(),
                    command: config.url.clone(),
                    timeout: config.start_timeout,
                    stderr: StderrTail::default(),
                });
            }
        };
        tasks.iter().for_each(JoinHandle::abort);
        Err(failure.into_error(&config.name, &config.url, StderrTail::default()))
    }

    /// Spawns the server, completes the handshake and lists its tools, all within the config's
    /// start timeout.
    async fn start_stdio(
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
        let started =
            tokio::time::timeout(config.start_timeout, initialize(transport, listing)).await;
        let failure = match started {
            Ok(Ok((service, tools))) => {
                return Ok(Session {
                    service,
                    stderr: ring,
                    tasks: vec![stderr_reader],
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
        Err(failure.into_error(&config.name, &config.command_line(), stderr))
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
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl Drop for Session {
    /// Kills the server's whole process group at once (the server and whatever it started);
    /// rmcp's serve task, ending because the service was dropped, reaps the server.
    fn drop(&mut self) {
        if let Some(pgid) = self.pid.take() {
            kill_process_group(pgid);
        }
        self.tasks.iter().for_each(JoinHandle::abort);
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

impl StartFailure {
    fn into_error(self, server: &str, command: &str, stderr: StderrTail) -> McpError {
        match self {
            StartFailure::Handshake(source) => McpError::Handshake {
                server: server.to_string(),
                command: command.to_string(),
                stderr,
                source,
            },
            StartFailure::ListTools(source) => McpError::ListTools {
                server: server.to_string(),
                stderr,
                source: Box::new(source),
            },
        }
    }
}

/// The MCP handshake over `transport`, then the tool listing unless one is given.
async fn initialize<T, E, A>(
    transport: T,
    listing: Option<Vec<rmcp::model::Tool>>,
) -> Result<
    (
        RunningService<RoleClient, ClientConfig>,
        Vec<rmcp::model::Tool>,
    ),
    StartFailure,
>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
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
    Ok((service, tools))
}

/// rmcp's streamable HTTP client for `config`, its headers marked sensitive.
async fn streamable_http(
    config: &McpRemoteServer,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, McpError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let headers = sse::header_map(config)?;
    let client = reqwest::Client::builder()
        .connect_timeout(config.start_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| McpError::Connect {
            server: config.name.clone(),
            url: config.url.clone(),
            detail: crewai_llm::error_chain(&error),
        })?;
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(config.url.as_str());
    transport_config.custom_headers = headers
        .into_iter()
        .filter_map(|(name, value)| Some((name?, value)))
        .collect();
    if let Some(oauth) = &config.oauth {
        let token = tokio::time::timeout(
            config.start_timeout,
            crate::oauth::access_token(config, oauth),
        )
        .await
        .map_err(|_| McpError::OAuth {
            server: config.name.clone(),
            url: config.url.clone(),
            detail: format!("no token within {}s", config.start_timeout.as_secs_f64()),
        })??;
        transport_config.auth_header = Some(token);
    }
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client,
        transport_config,
    ))
}
