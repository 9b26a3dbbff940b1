//! `crewai mcp serve`: a project's crew (or its declarative flow) as one MCP tool, on rmcp's
//! server over stdio or streamable HTTP. Each `tools/call` is a kickoff made the way `crewai run`
//! makes it (journaled in the project's store, the project's Python tools in a worker), ended
//! by the client's `notifications/cancelled`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use crewai_core::interpolate::Inputs;
use crewai_project::Project;
use crewai_project::flow_v1::AnyFlow;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::cli::ProjectArgs;
use crate::outcome::Failure;

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Serve the project's crew (or flow) as an MCP tool, over stdio or streamable HTTP.
    Serve(McpServeArgs),
}

#[derive(Debug, Args)]
pub struct McpServeArgs {
    /// The project folder (a crew, or a declarative flow).
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// `stdio` (the protocol on stdin/stdout, messages on stderr) or `http` (streamable HTTP
    /// at `http://HOST:PORT/mcp`).
    #[arg(long, value_enum, default_value_t = McpTransportArg::Stdio)]
    pub transport: McpTransportArg,
    /// The port for `--transport http` (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The address `--transport http` listens on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Use this model for every agent, e.g. `openai/gpt-4o-mini`.
    #[arg(long)]
    pub llm: Option<String>,
    /// The Python that runs the project's own tools (default: the project's `.venv`, else
    /// `python3` on `PATH`).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpTransportArg {
    Stdio,
    Http,
}

pub async fn mcp(action: McpAction) -> Result<(), Failure> {
    match action {
        McpAction::Serve(args) => serve(args).await,
    }
}

async fn serve(args: McpServeArgs) -> Result<(), Failure> {
    crate::run::load_env(&args.project)?;
    // Not verbose: stdout is the MCP channel.
    let common = ProjectArgs::served(
        args.project.clone(),
        args.llm.clone(),
        false,
        args.python.clone(),
    );
    let served = Served::load(common)?;
    let tool_name = served.tool.name.to_string();
    let server = CrewServer {
        served: Arc::new(served),
    };
    match args.transport {
        McpTransportArg::Stdio => serve_stdio(server, &tool_name).await,
        McpTransportArg::Http => serve_http(server, &tool_name, &args.host, args.port).await,
    }
}

/// What is served: the crew or the flow, and the tool that runs it.
struct Served {
    what: Runs,
    tool: Tool,
    common: ProjectArgs,
}

enum Runs {
    Crew(Box<Project>),
    Flow(Box<AnyFlow>),
}

impl Served {
    fn load(common: ProjectArgs) -> Result<Served, Failure> {
        let dir = &common.project;
        let is_flow = AnyFlow::is_declaration(dir).unwrap_or(false)
            || (dir.join(crewai_project::flow_yaml::FLOW_FILE).is_file()
                && !dir.join("config").is_dir());
        if is_flow {
            let flow = crate::flow_cmd::load(dir)?;
            let tool = flow_tool(&flow);
            return Ok(Served {
                what: Runs::Flow(Box::new(flow)),
                tool,
                common,
            });
        }
        let project = crate::run::load(dir)?;
        let tool = crew_tool(&project);
        Ok(Served {
            what: Runs::Crew(Box::new(project)),
            tool,
            common,
        })
    }

    /// One kickoff with the call's arguments; `Err` is the text of an `isError` result.
    async fn call(
        &self,
        arguments: Map<String, Value>,
        cancellation: CancellationToken,
    ) -> Result<CallToolResult, String> {
        let given: Inputs = arguments.into_iter().collect();
        match &self.what {
            Runs::Crew(project) => self.kickoff_crew(project, &given, cancellation).await,
            Runs::Flow(flow) => {
                let output = crate::flow_cmd::flow_output(
                    flow,
                    &given,
                    self.common.llm.as_deref(),
                    cancellation,
                )
                .await
                .map_err(|failure| failure.render())?;
                let mut result = CallToolResult::success(vec![ContentBlock::text(
                    crate::flow_cmd::result_text(&output.result),
                )]);
                result.structured_content = output.result.filter(Value::is_object);
                Ok(result)
            }
        }
    }

    async fn kickoff_crew(
        &self,
        project: &Project,
        given: &Inputs,
        cancellation: CancellationToken,
    ) -> Result<CallToolResult, String> {
        let missing: Vec<String> = project
            .check_inputs(&project.effective_inputs(given))
            .iter()
            .map(ToString::to_string)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the crew needs these arguments: {}",
                missing.join("; ")
            ));
        }
        let registry = crate::run::registry_for(project, &project.root);
        let run_id = uuid::Uuid::new_v4().to_string();
        let (_, result) = crate::run::journaled_kickoff(
            project,
            given,
            registry,
            &self.common,
            &run_id,
            crate::run::Start::Kickoff(project.effective_inputs(given)),
            cancellation,
        )
        .await
        .map_err(|failure| failure.render())?;
        let output = result
            .map_err(|error| format!("run {run_id} failed: {}", crewai_llm::error_chain(&error)))?;
        let mut result = CallToolResult::success(vec![ContentBlock::text(output.raw.clone())]);
        if self.tool.output_schema.is_some() {
            result.structured_content = output.json_dict.or(output.pydantic);
        }
        Ok(result)
    }
}

/// The crew's tool: named after the crew, described by its tasks, taking one string per
/// `{placeholder}` (required unless the crew file gives it a default).
fn crew_tool(project: &Project) -> Tool {
    let defaults = project.default_inputs();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for name in project.required_inputs() {
        let mut property = json!({"type": "string"});
        match defaults.get(&name) {
            Some(default) => property["default"] = default.clone(),
            None => required.push(Value::String(name.clone())),
        }
        properties.insert(name, property);
    }
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let steps: Vec<String> = project
        .tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            format!(
                "{}. {}",
                i + 1,
                task.spec.description.as_deref().unwrap_or_default().trim()
            )
        })
        .collect();
    let description = format!(
        "Runs the crew '{}' ({} task(s)) and returns its final output. {}",
        project.name(),
        project.tasks.len(),
        steps.join(" ")
    );
    let mut tool = Tool::new(tool_name(&project.name()), description, object(schema));
    let last_schema = project
        .tasks
        .last()
        .and_then(|task| project.output_schema(&task.key))
        .map(|output| output.schema.clone())
        .filter(|schema| schema["type"] == "object");
    if let Some(schema) = last_schema {
        tool = tool.with_raw_output_schema(Arc::new(object(schema)));
    }
    tool
}

/// The flow's tool: its inputs are merged into the flow's state, so a declaration's state
/// schema is the input schema (fields with defaults not required); a `flow.yaml` takes any
/// fields.
fn flow_tool(flow: &AnyFlow) -> Tool {
    let (schema, description) = match flow {
        AnyFlow::Declaration(declaration) => {
            let mut schema = declaration
                .state
                .json_schema
                .clone()
                .filter(|schema| schema["type"] == "object")
                .unwrap_or_else(|| json!({"type": "object"}));
            if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
                required.retain(|name| {
                    name.as_str()
                        .is_none_or(|name| !declaration.state.defaults.contains_key(name))
                });
            }
            (schema, declaration.description.clone())
        }
        AnyFlow::Yaml(_) => (json!({"type": "object"}), None),
    };
    let description = format!(
        "Runs the flow '{}' with the arguments merged into its state, and returns its result.{}",
        flow.name(),
        description.map(|d| format!(" {d}")).unwrap_or_default()
    );
    Tool::new(tool_name(flow.name()), description, object(schema))
}

/// A tool name MCP clients take: letters, digits, `_`, `-` and `.`, at most 64 characters.
fn tool_name(name: &str) -> String {
    let cleaned: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "crew".to_string()
    } else {
        cleaned
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The MCP server: one tool, each call a kickoff.
#[derive(Clone)]
struct CrewServer {
    served: Arc<Served>,
}

impl ServerHandler for CrewServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("crewai", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Call '{}' to run the crew; each call is a full run, which may take minutes.",
                self.served.tool.name
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            self.served.tool.clone(),
        ]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (self.served.tool.name == name).then(|| self.served.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.served.tool.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool '{}'; this server has '{}'",
                    request.name, self.served.tool.name
                ),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        let result = match self.served.call(arguments, context.ct.clone()).await {
            Ok(result) => result,
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    }
}

async fn serve_stdio(server: CrewServer, tool_name: &str) -> Result<(), Failure> {
    let protocol_out = protocol_stdout().map_err(Failure::run)?;
    eprintln!("Serving MCP tool '{tool_name}' on stdio");
    let running = server
        .serve((tokio::io::stdin(), protocol_out))
        .await
        .map_err(|error| Failure::run(anyhow!(error).context("the MCP client did not connect")))?;
    tokio::select! {
        ended = running.waiting() => {
            ended.map_err(|error| Failure::run(anyhow!(error).context("the MCP service stopped")))?;
        }
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

/// Standard output for the protocol alone: the process's stdout is moved to a descriptor of its
/// own and fd 1 is pointed at stderr, so that nothing else (a verbose crew's console, a
/// library's stray print) can write into the JSON-RPC stream.
#[cfg(unix)]
fn protocol_stdout() -> anyhow::Result<tokio::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: dup and dup2 on the process's own standard descriptors, before any thread of this
    // server writes to them; the duplicate is owned by the File made from it (closed once).
    let protocol = unsafe { libc::dup(libc::STDOUT_FILENO) };
    if protocol < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot duplicate stdout");
    }
    let protocol = unsafe { std::fs::File::from_raw_fd(protocol) };
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot point stdout at stderr");
    }
    Ok(tokio::fs::File::from_std(protocol))
}

#[cfg(not(unix))]
fn protocol_stdout() -> anyhow::Result<tokio::io::Stdout> {
    Ok(tokio::io::stdout())
}

async fn serve_http(
    server: CrewServer,
    tool_name: &str,
    host: &str,
    port: u16,
) -> Result<(), Failure> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))
        .map_err(Failure::config)?;
    let address: SocketAddr = listener
        .local_addr()
        .context("the listening address")
        .map_err(Failure::run)?;
    let shutdown = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = shutdown.child_token();
    if !config.allowed_hosts.iter().any(|allowed| allowed == host) {
        config.allowed_hosts.push(host.to_string());
    }
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    eprintln!("Serving MCP tool '{tool_name}' at http://{address}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        })
        .await
        .context("the HTTP server stopped")
        .map_err(Failure::run)
}
