//! [`McpStdioServer`]: how to start an MCP server as a child process and how long to wait for it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// An MCP server that speaks over its stdin and stdout, started as a child process.
///
/// ```
/// use std::time::Duration;
/// use crewai_mcp::McpStdioServer;
///
/// let server = McpStdioServer::new("files", "npx")
///     .arg("-y")
///     .arg("@modelcontextprotocol/server-filesystem")
///     .env("LOG_LEVEL", "warn")
///     .call_timeout(Duration::from_secs(30));
/// assert_eq!(server.name, "files");
/// assert_eq!(server.max_restarts, 1);
/// ```
#[derive(Debug, Clone)]
pub struct McpStdioServer {
    /// What the server is called in messages (`MCP server 'files'`).
    pub name: String,
    /// The program to run.
    pub command: PathBuf,
    pub args: Vec<OsString>,
    /// Variables set for the child on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// The child's working directory (the parent's when `None`).
    pub cwd: Option<PathBuf>,
    /// How long starting may take: spawning, the MCP handshake and listing the tools.
    pub start_timeout: Duration,
    /// How long one `tools/call` may take before it is abandoned (and cancelled on the server).
    pub call_timeout: Duration,
    /// How many times a server that died is started again, over the connection's life.
    pub max_restarts: u32,
    /// How much of the end of the server's stderr is kept for error messages, in bytes.
    pub stderr_tail_bytes: usize,
}

impl McpStdioServer {
    /// A server run as `command` with no arguments; 30 s to start, 60 s per call, one restart,
    /// the last 8 KiB of stderr kept.
    pub fn new(name: impl Into<String>, command: impl Into<PathBuf>) -> Self {
        McpStdioServer {
            name: name.into(),
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_restarts: 1,
            stderr_tail_bytes: 8 * 1024,
        }
    }

    crewai_llm::setters! {
        /// Adds one argument.
        pub fn arg(arg: impl Into<OsString>) => |server| server.args.push(arg.into());
        /// Sets one environment variable for the child.
        pub fn env(key: impl Into<OsString>, value: impl Into<OsString>) => |server| server.env.push((key.into(), value.into()));
        /// Runs the child in `cwd`.
        pub fn cwd(cwd: impl Into<PathBuf>) => cwd = Some(cwd.into());
        pub fn start_timeout(start_timeout: Duration) => start_timeout = start_timeout;
        pub fn call_timeout(call_timeout: Duration) => call_timeout = call_timeout;
        pub fn max_restarts(max_restarts: u32) => max_restarts = max_restarts;
        pub fn stderr_tail_bytes(stderr_tail_bytes: usize) => stderr_tail_bytes = stderr_tail_bytes;
    }

    /// Adds several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The command line as a person would type it, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.to_string_lossy().into_owned())
            .chain(
                self.args
                    .iter()
                    .map(|arg| arg.to_string_lossy().into_owned()),
            )
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An MCP server reached over HTTP: streamable HTTP ([`crate::McpTransport::Http`]) or the
/// older HTTP+SSE protocol ([`crate::McpTransport::Sse`]). Header values are secrets: they are
/// sent, never shown (`Debug` prints their names only).
#[derive(Clone)]
pub struct McpRemoteServer {
    /// What the server is called in messages.
    pub name: String,
    /// The endpoint: the MCP URL for streamable HTTP, the `/sse` URL for HTTP+SSE.
    pub url: String,
    /// Sent with every request (`Authorization`, API keys).
    pub headers: Vec<(String, String)>,
    /// How long connecting may take: the first request, the handshake and listing the tools.
    pub start_timeout: Duration,
    /// How long one `tools/call` may take.
    pub call_timeout: Duration,
    /// How many times a session that ended is opened again, over the connection's life.
    pub max_restarts: u32,
    /// OAuth for the server, when it needs it: a token is got before each session opens.
    pub oauth: Option<McpOAuth>,
}

/// OAuth 2.0 client credentials for an MCP server (the MCP spec's machine-to-machine flow,
/// SEP-1046): the authorization server is discovered from the server's protected-resource
/// metadata, and the token asked for `resource` (default: the server's URL) with `scopes`.
/// The secret is sent, never shown (`Debug` hides it).
#[derive(Clone)]
pub struct McpOAuth {
    pub client_id: String,
    pub client_secret: String,
    pub scopes: Vec<String>,
    /// The resource the token is for (RFC 8707); `None`: the server's URL.
    pub resource: Option<String>,
}

impl std::fmt::Debug for McpOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOAuth")
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl McpRemoteServer {
    /// A server at `url`; 30 s to connect, 30 s per call, one reconnection.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpRemoteServer {
            name: name.into(),
            url: url.into(),
            headers: Vec::new(),
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(30),
            max_restarts: 1,
            oauth: None,
        }
    }

    crewai_llm::setters! {
        /// Sends `name: value` with every request.
        pub fn header(name: impl Into<String>, value: impl Into<String>) => |server| server.headers.push((name.into(), value.into()));
        pub fn start_timeout(start_timeout: Duration) => start_timeout = start_timeout;
        pub fn call_timeout(call_timeout: Duration) => call_timeout = call_timeout;
        pub fn max_restarts(max_restarts: u32) => max_restarts = max_restarts;
        /// Gets an OAuth token (client credentials) before each session.
        pub fn oauth(oauth: McpOAuth) => oauth = Some(oauth);
    }
}

impl std::fmt::Debug for McpRemoteServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("McpRemoteServer")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("headers", &header_names)
            .field("start_timeout", &self.start_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_restarts", &self.max_restarts)
            .field("oauth", &self.oauth)
            .finish()
    }
}
