//! [`McpServer`]: one entry of an agent's `mcps:`, in any of CrewAI's forms, and the names its
//! tools get.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{McpRemoteServer, McpStdioServer};
use crate::error::McpError;
use crate::tool::McpToolInfo;

/// How long connecting to a server of an agent's `mcps:` may take, and each call, unless set.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(30);

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A child process speaking over its stdin and stdout.
    Stdio(McpStdioServer),
    /// Streamable HTTP (MCP 2025-03-26 and later), on rmcp's client.
    Http(McpRemoteServer),
    /// The older HTTP+SSE protocol (MCP 2024-11-05), on a transport of this crate's own.
    Sse(McpRemoteServer),
}

impl McpTransport {
    /// The transport's name in events (`stdio`, `streamable_http`, `sse`).
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio(_) => "stdio",
            McpTransport::Http(_) => "streamable_http",
            McpTransport::Sse(_) => "sse",
        }
    }

    /// The server's name in messages and events.
    pub fn name(&self) -> &str {
        match self {
            McpTransport::Stdio(config) => &config.name,
            McpTransport::Http(config) | McpTransport::Sse(config) => &config.name,
        }
    }

    /// The command line or the URL (never a header or an environment value).
    pub fn location(&self) -> String {
        match self {
            McpTransport::Stdio(config) => config.command_line(),
            McpTransport::Http(config) | McpTransport::Sse(config) => config.url.clone(),
        }
    }

    pub fn call_timeout(&self) -> Duration {
        match self {
            McpTransport::Stdio(config) => config.call_timeout,
            McpTransport::Http(config) | McpTransport::Sse(config) => config.call_timeout,
        }
    }

    pub fn max_restarts(&self) -> u32 {
        match self {
            McpTransport::Stdio(config) => config.max_restarts,
            McpTransport::Http(config) | McpTransport::Sse(config) => config.max_restarts,
        }
    }
}

/// An MCP server an agent uses (CrewAI's `MCPServerStdio`, `MCPServerHTTP`, `MCPServerSSE`, or a
/// URL string): how to reach it, which of its tools the agent gets, and whether the listing is
/// kept between sessions.
///
/// ```
/// use crewai_mcp::McpServer;
/// let server = McpServer::stdio("python3", ["server.py"]).tool_filter(["add"]);
/// assert_eq!(server.server_name(), "python3_server_py");
/// assert_eq!(server.tool_name("add"), "python3_server_py_add");
/// ```
#[derive(Debug, Clone)]
pub struct McpServer {
    pub transport: McpTransport,
    /// Only these tools (by the server's names) are given to the agent; `None`: every tool.
    pub tool_filter: Option<Vec<String>>,
    /// Keep the first session's tool listing for the sessions after it (later kickoffs, a
    /// restart), so that they skip `tools/list` (CrewAI's `cache_tools_list`).
    pub cache_tools_list: bool,
    /// The longest tool result given to the model, in bytes; longer ones are cut with a note.
    pub max_result_bytes: usize,
    /// Offer the tools as `{server_name}_{tool}` (an agent's `mcps`, the default) or under the
    /// server's own names (what crewai-tools' `MCPServerAdapter`, behind `@CrewBase`'s
    /// `get_mcp_tools`, does).
    pub prefix_tool_names: bool,
    /// The listing kept when `cache_tools_list` is set; shared by clones of this value.
    listing: Arc<Mutex<Option<Vec<rmcp::model::Tool>>>>,
}

impl McpServer {
    /// A server from its transport, with every tool and no listing cache.
    pub fn new(transport: McpTransport) -> Self {
        McpServer {
            transport,
            tool_filter: None,
            cache_tools_list: false,
            max_result_bytes: crate::tool::DEFAULT_MAX_RESULT_BYTES,
            prefix_tool_names: true,
            listing: Arc::default(),
        }
    }

    /// A server run as `command args...`, named as CrewAI names it (`command_args`), with 30 s
    /// to start and 30 s per call.
    pub fn stdio<I, S>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let command = command.into();
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let name = stdio_server_name(&command, &args);
        McpServer::new(McpTransport::Stdio(
            McpStdioServer::new(name, command)
                .args(args)
                .start_timeout(DEFAULT_MCP_TIMEOUT)
                .call_timeout(DEFAULT_MCP_TIMEOUT),
        ))
    }

    /// A server at `url` over streamable HTTP (`sse: false`) or HTTP+SSE (`sse: true`), named
    /// as CrewAI names it: the host with `.` made `_`, then the path with `/` made `_`.
    ///
    /// ```
    /// use crewai_mcp::McpServer;
    /// let server = McpServer::http("https://api.example.com/v1/mcp", false)?
    ///     .header("Authorization", "Bearer secret");
    /// assert_eq!(server.server_name(), "api_example_com_v1_mcp");
    /// assert!(!format!("{server:?}").contains("secret"));
    /// # Ok::<(), crewai_mcp::McpError>(())
    /// ```
    pub fn http(url: &str, sse: bool) -> Result<Self, McpError> {
        let parsed = reqwest::Url::parse(url).map_err(|error| {
            McpError::InvalidServer(format!("'{url}' is not a server URL: {error}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(McpError::InvalidServer(format!(
                "'{url}' is not an http:// or https:// URL"
            )));
        }
        let host = parsed.host_str().unwrap_or_default().replace('.', "_");
        let path = parsed.path().trim_matches('/').replace('/', "_");
        let port = parsed
            .port()
            .map(|port| format!("_{port}"))
            .unwrap_or_default();
        let name = name_part(&if path.is_empty() {
            format!("{host}{port}")
        } else {
            format!("{host}{port}_{path}")
        });
        let config = McpRemoteServer::new(name, url)
            .start_timeout(DEFAULT_MCP_TIMEOUT)
            .call_timeout(DEFAULT_MCP_TIMEOUT);
        Ok(McpServer::new(if sse {
            McpTransport::Sse(config)
        } else {
            McpTransport::Http(config)
        }))
    }

    /// Sends `name: value` with every request to an HTTP or SSE server (a stdio server has
    /// no headers: this does nothing to it).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http(config) | McpTransport::Sse(config) = &mut self.transport {
            config.headers.push((name.into(), value.into()));
        }
        self
    }

    /// Gets an OAuth token (client credentials) before each session with an HTTP server; a
    /// stdio server has no use for one and keeps none.
    pub fn oauth(mut self, oauth: crate::config::McpOAuth) -> Self {
        if let McpTransport::Http(config) | McpTransport::Sse(config) = &mut self.transport {
            config.oauth = Some(oauth);
        }
        self
    }

    crewai_llm::setters! {
        pub fn cache_tools_list(cache: bool) => cache_tools_list = cache;
        pub fn max_result_bytes(max: usize) => max_result_bytes = max;
        pub fn prefix_tool_names(prefix: bool) => prefix_tool_names = prefix;
    }

    /// Gives the agent only these tools (the server's names).
    pub fn tool_filter<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tool_filter = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Sets how long connecting (start, handshake, listing) may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        match &mut self.transport {
            McpTransport::Stdio(config) => config.start_timeout = timeout,
            McpTransport::Http(config) | McpTransport::Sse(config) => {
                config.start_timeout = timeout;
            }
        }
        self
    }

    /// Sets how long one tool call may take.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        match &mut self.transport {
            McpTransport::Stdio(config) => config.call_timeout = timeout,
            McpTransport::Http(config) | McpTransport::Sse(config) => {
                config.call_timeout = timeout;
            }
        }
        self
    }

    /// The server's name: the prefix of its tools' names, and what messages and events call it.
    pub fn server_name(&self) -> &str {
        self.transport.name()
    }

    /// Where the server is, for events: the command line or the URL, never a header or an
    /// environment value.
    pub fn location(&self) -> String {
        self.transport.location()
    }

    /// The name the model sees for the server's tool `tool`: `{server_name}_{tool}`, or `tool`
    /// itself without [`McpServer::prefix_tool_names`].
    pub fn tool_name(&self, tool: &str) -> String {
        if self.prefix_tool_names {
            format!("{}_{}", self.server_name(), tool)
        } else {
            tool.to_string()
        }
    }

    /// Whether the agent gets the server's tool `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.tool_filter
            .as_ref()
            .is_none_or(|names| names.iter().any(|name| name == tool))
    }

    /// The same number for this value and its clones, different for any other entry: what a
    /// run's sessions are keyed by (one session per server entry per kickoff).
    pub fn entry_id(&self) -> usize {
        Arc::as_ptr(&self.listing) as *const () as usize
    }

    /// The listing kept from an earlier session, when `cache_tools_list` is set.
    pub(crate) fn cached_listing(&self) -> Option<Vec<rmcp::model::Tool>> {
        if !self.cache_tools_list {
            return None;
        }
        self.listing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub(crate) fn keep_listing(&self, tools: &[rmcp::model::Tool]) {
        if self.cache_tools_list {
            *self
                .listing
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(tools.to_vec());
        }
    }

    /// Connects and returns the connection with the agent's tools: the ones the filter allows,
    /// named `{server_name}_{tool}`. A filter naming a tool the server does not list is an error
    /// naming the tools it has.
    pub async fn open(&self) -> Result<(crate::McpConnection, Vec<crate::McpTool>), McpError> {
        let connection = crate::McpConnection::connect_server(self).await?;
        let listing = connection.tool_listing().await?;
        if let Some(filter) = &self.tool_filter {
            let missing: Vec<&String> = filter
                .iter()
                .filter(|wanted| !listing.iter().any(|tool| &tool.name == *wanted))
                .collect();
            if !missing.is_empty() {
                let error = McpError::FilteredToolMissing {
                    server: self.server_name().to_string(),
                    missing: missing.iter().map(|name| name.to_string()).collect(),
                    listed: listing.iter().map(|tool| tool.name.clone()).collect(),
                };
                connection.shutdown().await;
                return Err(error);
            }
        }
        let tools = listing
            .into_iter()
            .filter(|info: &McpToolInfo| self.allows(&info.name))
            .map(|info| {
                let name = self.tool_name(&info.name);
                connection.tool_from(info).with_name(name)
            })
            .collect();
        Ok((connection, tools))
    }
}

/// CrewAI's name for a stdio server: the command and its arguments joined by `_`, every
/// character other than a letter, a digit, `_` or `-` made `_` (models take only those in tool
/// names), and the path of a command or script reduced to its last part.
fn stdio_server_name(command: &str, args: &[String]) -> String {
    let last_part = |text: &str| text.rsplit(['/', '\\']).next().unwrap_or(text).to_string();
    let joined = std::iter::once(last_part(command))
        .chain(args.iter().map(|arg| last_part(arg)))
        .collect::<Vec<_>>()
        .join("_");
    name_part(&joined)
}

/// `text` with every character a model does not take in a tool name made `_`.
pub(crate) fn name_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_servers_are_named_after_their_command_line() {
        let server = McpServer::stdio("/usr/bin/python3", ["/srv/tools/my server.py", "--x"]);
        assert_eq!(server.server_name(), "python3_my_server_py_--x");
        assert!(server.allows("anything"));
        let filtered = server.tool_filter(["add"]);
        assert!(filtered.allows("add") && !filtered.allows("sub"));
    }

    #[test]
    fn url_servers_are_named_after_host_and_path() {
        let server = McpServer::http("http://127.0.0.1:8123/mcp/", false).unwrap();
        assert_eq!(server.server_name(), "127_0_0_1_8123_mcp");
        assert_eq!(server.transport.kind(), "streamable_http");
        let sse = McpServer::http("https://tools.example.org/sse", true).unwrap();
        assert_eq!(sse.tool_name("echo"), "tools_example_org_sse_echo");
        assert_eq!(sse.prefix_tool_names(false).tool_name("echo"), "echo");
        assert!(McpServer::http("ftp://x", false).is_err());
    }
}
