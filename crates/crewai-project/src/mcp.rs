//! An agent's `mcps:` as written in a project, read into [`McpServer`]s: URL strings
//! (`https://host/path`, `...#tool` for one tool) and mappings for stdio (`command`, `args`,
//! `env`), streamable HTTP (`url`, `headers`, `streamable`, `auth`: OAuth client credentials)
//! and SSE (`url`, `transport: sse`),
//! each with `tool_filter`, `cache_tools_list`, `connect_timeout`, `call_timeout`,
//! `max_result_bytes` and `prefix_tool_names` (`false`: the server's own tool names, as
//! crew.py's `get_mcp_tools()` gives them).

use std::path::Path;
use std::time::Duration;

use crewai_core::mcp::{McpOAuth, McpServer, McpTransport};
use serde_json::{Map, Value};

use crate::error::Diagnostic;
use crate::spec::{Origin, describe};

/// Every field an `mcps:` mapping takes.
const FIELDS: &[&str] = &[
    "command",
    "args",
    "env",
    "url",
    "headers",
    "auth",
    "streamable",
    "transport",
    "tool_filter",
    "cache_tools_list",
    "connect_timeout",
    "call_timeout",
    "max_result_bytes",
    "prefix_tool_names",
];

/// Reads `mcps` (written at `origin`); stdio servers run in `root`. Every problem is reported,
/// each at its entry.
pub(crate) fn read_mcps(
    value: &Value,
    origin: &Origin,
    root: &Path,
) -> Result<Vec<McpServer>, Vec<Diagnostic>> {
    let Value::Array(entries) = value else {
        return Err(vec![origin.diagnostic(format!(
            "`mcps` is a list of MCP servers (URLs or mappings with `command` or `url`), not {}",
            describe(value)
        ))]);
    };
    let mut servers = Vec::new();
    let mut problems = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let at = origin.child(index);
        match read_entry(entry, root) {
            Ok(server) => servers.push(server),
            Err(message) => problems.push(at.diagnostic(format!("mcps[{index}]: {message}"))),
        }
    }
    if problems.is_empty() {
        Ok(servers)
    } else {
        Err(problems)
    }
}

fn read_entry(entry: &Value, root: &Path) -> Result<McpServer, String> {
    match entry {
        Value::String(text) => read_url_string(text),
        Value::Object(fields) => read_mapping(fields, root),
        other => Err(format!(
            "an MCP server is a URL or a mapping with `command` or `url`, not {}",
            describe(other)
        )),
    }
}

fn read_url_string(text: &str) -> Result<McpServer, String> {
    let text = text.trim();
    if text.starts_with("https://") || text.starts_with("http://") {
        let (url, tool) = match text.split_once('#') {
            Some((url, tool)) => (url, Some(tool)),
            None => (text, None),
        };
        let server = http_server(url, Vec::new(), true)?;
        return Ok(match tool.filter(|tool| !tool.is_empty()) {
            Some(tool) => server.tool_filter([tool]),
            None => server,
        });
    }
    Err(format!(
        "'{text}' is not a server URL; CrewAI's registry slugs ('notion', 'crewai-amp:...') need CrewAI's hosted service, which crewai-rs does not reach: give the server's `https://` URL, or a mapping with `command` (stdio) or `url`"
    ))
}

fn read_mapping(fields: &Map<String, Value>, root: &Path) -> Result<McpServer, String> {
    if let Some(unknown) = fields.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(format!(
            "unknown field `{unknown}`; an MCP server takes {}",
            FIELDS.join(", ")
        ));
    }
    let transport = optional_text(fields, "transport")?;
    let server = match (fields.get("command"), fields.get("url")) {
        (Some(_), Some(_)) => {
            return Err("give either `command` (a stdio server) or `url`, not both".into());
        }
        (Some(command), None) => {
            if let Some(transport) = transport.filter(|t| *t != "stdio") {
                return Err(format!(
                    "a server with `command` speaks stdio, not `{transport}`"
                ));
            }
            for http_only in ["headers", "streamable", "auth"] {
                if fields.contains_key(http_only) {
                    return Err(format!("`{http_only}` is for servers with a `url`"));
                }
            }
            stdio_server(command, fields, root)?
        }
        (None, Some(url)) => {
            if fields.contains_key("args") || fields.contains_key("env") {
                return Err("`args` and `env` are for servers with a `command`".into());
            }
            let Value::String(url) = url else {
                return Err(format!("`url` is text, not {}", describe(url)));
            };
            let headers = string_map(fields, "headers")?;
            match transport {
                Some("sse") => {
                    if fields.contains_key("streamable") {
                        return Err("`streamable` is for HTTP servers, not `transport: sse`".into());
                    }
                    sse_server(url, headers)?
                }
                None | Some("http" | "streamable-http" | "streamable_http") => {
                    let streamable = match fields.get("streamable") {
                        None => true,
                        Some(Value::Bool(flag)) => *flag,
                        Some(other) => {
                            return Err(format!(
                                "`streamable` is true or false, not {}",
                                describe(other)
                            ));
                        }
                    };
                    http_server(url, headers, streamable)?
                }
                Some(other) => {
                    return Err(format!(
                        "unknown transport `{other}`; a `url` server takes `http` (streamable HTTP, the default) or `sse`"
                    ));
                }
            }
        }
        (None, None) => {
            return Err("an MCP server needs `command` (stdio) or `url` (HTTP, SSE)".into());
        }
    };
    let server = match oauth(fields)? {
        Some(oauth) => server.oauth(oauth),
        None => server,
    };
    common_fields(server, fields)
}

/// Every field `auth:` takes.
const AUTH_FIELDS: &[&str] = &[
    "client_id",
    "client_secret",
    "client_secret_env",
    "scopes",
    "resource",
];

/// `auth:` of an HTTP server: OAuth client credentials, the secret written out or (better) named
/// by the environment variable holding it.
fn oauth(fields: &Map<String, Value>) -> Result<Option<McpOAuth>, String> {
    let Some(auth) = fields.get("auth") else {
        return Ok(None);
    };
    let Value::Object(auth) = auth else {
        return Err(format!(
            "`auth` is a mapping of OAuth client credentials ({}), not {}",
            AUTH_FIELDS.join(", "),
            describe(auth)
        ));
    };
    if let Some(unknown) = auth.keys().find(|key| !AUTH_FIELDS.contains(&key.as_str())) {
        return Err(format!(
            "`auth` has no field `{unknown}`; it takes {} (the OAuth client-credentials flow)",
            AUTH_FIELDS.join(", ")
        ));
    }
    let text = |key: &str| match auth.get(key) {
        None => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.clone())),
        Some(other) => Err(format!("`auth.{key}` is text, not {}", describe(other))),
    };
    let client_id = text("client_id")?.ok_or("`auth` needs `client_id`")?;
    let client_secret = match (text("client_secret")?, text("client_secret_env")?) {
        (Some(secret), None) => secret,
        (None, Some(variable)) => std::env::var(&variable).map_err(|_| {
            format!(
                "`auth.client_secret_env` names `{variable}`, which is not set: export it with the client's secret"
            )
        })?,
        (Some(_), Some(_)) => {
            return Err("give `auth.client_secret` or `auth.client_secret_env`, not both".into());
        }
        (None, None) => {
            return Err(
                "`auth` needs the client's secret: `client_secret_env: VARIABLE` (the variable holding it) or `client_secret`"
                    .into(),
            );
        }
    };
    let scopes = match auth.get("scopes") {
        None => Vec::new(),
        Some(Value::String(list)) => list.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(scope) => Ok(scope.clone()),
                other => Err(format!("`auth.scopes` holds text, not {}", describe(other))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "`auth.scopes` is a list of scopes, not {}",
                describe(other)
            ));
        }
    };
    Ok(Some(McpOAuth {
        client_id,
        client_secret,
        scopes,
        resource: text("resource")?,
    }))
}

fn stdio_server(
    command: &Value,
    fields: &Map<String, Value>,
    root: &Path,
) -> Result<McpServer, String> {
    let Value::String(command) = command else {
        return Err(format!("`command` is text, not {}", describe(command)));
    };
    if command.trim().is_empty() {
        return Err("`command` is empty".into());
    }
    let args = match fields.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Number(number) => Ok(number.to_string()),
                other => Err(format!("`args` holds text, not {}", describe(other))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("`args` is a list, not {}", describe(other))),
    };
    let mut server = McpServer::stdio(command.clone(), args);
    let env = string_map(fields, "env")?;
    if let McpTransport::Stdio(config) = &mut server.transport {
        config.cwd = Some(root.to_path_buf());
        config.env.extend(
            env.into_iter()
                .map(|(key, value)| (key.into(), value.into())),
        );
    }
    Ok(server)
}

fn http_server(
    url: &str,
    headers: Vec<(String, String)>,
    streamable: bool,
) -> Result<McpServer, String> {
    if !streamable {
        return Err(
            "`streamable: false` asks for the older HTTP+SSE protocol: write `transport: sse` (with the server's /sse URL) instead"
                .into(),
        );
    }
    remote_server(url, headers, false)
}

fn sse_server(url: &str, headers: Vec<(String, String)>) -> Result<McpServer, String> {
    remote_server(url, headers, true)
}

fn remote_server(
    url: &str,
    headers: Vec<(String, String)>,
    sse: bool,
) -> Result<McpServer, String> {
    let server = McpServer::http(url, sse).map_err(|error| error.to_string())?;
    Ok(headers
        .into_iter()
        .fold(server, |server, (name, value)| server.header(name, value)))
}

fn common_fields(mut server: McpServer, fields: &Map<String, Value>) -> Result<McpServer, String> {
    match fields.get("tool_filter") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            let names = names
                .iter()
                .map(|name| match name {
                    Value::String(name) => Ok(name.clone()),
                    other => Err(format!(
                        "`tool_filter` lists tool names, not {}",
                        describe(other)
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            server = server.tool_filter(names);
        }
        Some(other) => {
            return Err(format!(
                "`tool_filter` is a list of the server's tool names to give the agent, not {} (a Python filter function cannot run here)",
                describe(other)
            ));
        }
    }
    match fields.get("cache_tools_list") {
        None => {}
        Some(Value::Bool(flag)) => server = server.cache_tools_list(*flag),
        Some(other) => {
            return Err(format!(
                "`cache_tools_list` is true or false, not {}",
                describe(other)
            ));
        }
    }
    match fields.get("prefix_tool_names") {
        None => {}
        Some(Value::Bool(flag)) => server = server.prefix_tool_names(*flag),
        Some(other) => {
            return Err(format!(
                "`prefix_tool_names` is true or false, not {}",
                describe(other)
            ));
        }
    }
    if let Some(timeout) = seconds(fields, "connect_timeout")? {
        server = server.connect_timeout(timeout);
    }
    if let Some(timeout) = seconds(fields, "call_timeout")? {
        server = server.call_timeout(timeout);
    }
    match fields.get("max_result_bytes") {
        None => {}
        Some(value) => match value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
        {
            Some(max) => server = server.max_result_bytes(max),
            None => {
                return Err(format!(
                    "`max_result_bytes` is a positive whole number, not {value}"
                ));
            }
        },
    }
    Ok(server)
}

fn optional_text<'a>(
    fields: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.as_str())),
        Some(other) => Err(format!("`{name}` is text, not {}", describe(other))),
    }
}

/// A mapping of names to text (`env`, `headers`); numbers and booleans are written as text.
fn string_map(fields: &Map<String, Value>, name: &str) -> Result<Vec<(String, String)>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(entries)) => entries
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key.clone(), text.clone())),
                Value::Number(_) | Value::Bool(_) => Ok((key.clone(), value.to_string())),
                // The value itself is never shown: it may be a secret.
                other => Err(format!("`{name}.{key}` is text, not {}", describe(other))),
            })
            .collect(),
        Some(other) => Err(format!(
            "`{name}` is a mapping of names to text, not {}",
            describe(other)
        )),
    }
}

fn seconds(fields: &Map<String, Value>, name: &str) -> Result<Option<Duration>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_f64().filter(|s| s.is_finite() && *s > 0.0) {
            Some(seconds) => Ok(Some(Duration::from_secs_f64(seconds))),
            None => Err(format!(
                "`{name}` is a number of seconds above zero, not {value}"
            )),
        },
    }
}
