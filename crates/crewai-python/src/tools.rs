//! [`PythonTools`]: a project's Python tools running in one worker process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use crewai_mcp::{McpConnection, McpError, McpStdioServer, McpTool};
use crewai_tools::{EnvVar, Tool, ToolContext, ToolError, ToolHandle, ToolOutput};
use serde_json::{Map, Value, json};
use tempfile::TempDir;

use crate::error::{PythonError, ToolLoadFailure};

/// The worker script, written to a temporary directory at start.
const WORKER_SCRIPT: &str = include_str!("worker.py");

/// The meta keys the worker reports CrewAI's per-tool settings under.
const RESULT_AS_ANSWER_META: &str = "crewai/resultAsAnswer";
const MAX_USAGE_COUNT_META: &str = "crewai/maxUsageCount";
const ENV_VARS_META: &str = "crewai/envVars";

/// One tool to load from the project's Python.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonToolSpec {
    /// The name the project refers to the tool by; [`PythonTools::handles`] returns it.
    pub key: String,
    /// The dotted module (`my_crew.tools.custom_tool`), imported with `<root>/src` and `<root>`
    /// on `sys.path`.
    pub module: String,
    /// A file to import the module from instead, when it is not under an importable package.
    pub module_file: Option<PathBuf>,
    /// The class (a `BaseTool` subclass) or the `@tool` function in the module.
    pub attr: String,
    /// Keyword arguments for the class's constructor; must be empty for a function.
    pub kwargs: Map<String, Value>,
    /// Whether `attr` names a `@tool` function (`true`) or a class (`false`).
    pub is_function: bool,
}

/// How to run a project's Python tools.
#[derive(Debug, Clone)]
pub struct PythonToolConfig {
    /// The interpreter ([`crate::find_python`]).
    pub python: PathBuf,
    /// The project's root: the worker runs there, with `<root>/src` and `<root>` importable.
    pub project_root: PathBuf,
    pub tools: Vec<PythonToolSpec>,
    /// How long importing the tools and the handshake may take.
    pub start_timeout: Duration,
    /// How long one tool call may take.
    pub call_timeout: Duration,
}

/// The project's Python tools, served by one worker process over MCP.
///
/// The worker is stopped by [`PythonTools::shutdown`], or when this value and every handle from
/// [`PythonTools::handles`] are dropped. If it dies, the next call starts it again once.
pub struct PythonTools {
    connection: McpConnection,
    handles: Vec<(String, ToolHandle)>,
}

impl PythonTools {
    /// Starts the worker and loads every tool; a tool that does not import or construct is an
    /// error naming its module, its class or function, and Python's error.
    pub async fn start(config: PythonToolConfig) -> Result<PythonTools, PythonError> {
        let files = Arc::new(WorkerFiles::write(&config).await?);
        let server = McpStdioServer::new("python-tools", &config.python)
            .arg(files.script())
            .arg(files.spec())
            .cwd(&config.project_root)
            .env("PYTHONIOENCODING", "utf-8")
            .start_timeout(config.start_timeout)
            .call_timeout(config.call_timeout);
        let connection = match McpConnection::connect_stdio(server).await {
            Ok(connection) => connection,
            Err(source) => return Err(files.start_error(&config, source).await),
        };
        let mut handles = Vec::with_capacity(config.tools.len());
        for spec in &config.tools {
            let tool = connection
                .tool(&spec.key)
                .await
                .map_err(|source| PythonError::Start {
                    python: config.python.clone(),
                    source: Box::new(source),
                })?
                .ok_or_else(|| PythonError::NotListed {
                    key: spec.key.clone(),
                })?;
            handles.push((spec.key.clone(), python_handle(tool, &files)));
        }
        Ok(PythonTools {
            connection,
            handles,
        })
    }

    /// Each requested tool by its key, named as its Python `name` says.
    pub fn handles(&self) -> Vec<(String, ToolHandle)> {
        self.handles.clone()
    }

    /// The worker's process id while it runs.
    pub async fn worker_pid(&self) -> Option<u32> {
        self.connection.server_pid().await
    }

    /// How many times the worker has been started again after dying.
    pub async fn restarts(&self) -> u32 {
        self.connection.restarts().await
    }

    /// Stops the worker and waits until it has exited.
    pub async fn shutdown(&self) {
        self.connection.shutdown().await;
    }
}

/// A handle carrying the Python tool's own `name`, `result_as_answer` and `max_usage_count`.
fn python_handle(tool: McpTool, files: &Arc<WorkerFiles>) -> ToolHandle {
    let info = tool.info().clone();
    let display_name = info.title.clone().unwrap_or_else(|| info.name.clone());
    let env_vars = info
        .meta
        .get(ENV_VARS_META)
        .and_then(Value::as_array)
        .map(|vars| vars.iter().filter_map(env_var).collect())
        .unwrap_or_default();
    let mut handle = ToolHandle::from_tool(PythonTool {
        tool: tool.with_name(display_name),
        env_vars,
        _files: Arc::clone(files),
    });
    if info.meta.get(RESULT_AS_ANSWER_META) == Some(&Value::Bool(true)) {
        handle = handle.with_result_as_answer(true);
    }
    if let Some(limit) = info
        .meta
        .get(MAX_USAGE_COUNT_META)
        .and_then(Value::as_u64)
        .and_then(|limit| u32::try_from(limit).ok())
    {
        handle = handle.with_max_usage_count(limit);
    }
    handle
}

/// One of a tool's `env_vars` as the worker reports it.
fn env_var(reported: &Value) -> Option<EnvVar> {
    Some(EnvVar {
        name: reported.get("name")?.as_str()?.to_string(),
        description: reported
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        required: reported
            .get("required")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        default: reported
            .get("default")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// A worker tool with the environment variables its Python class declares; it keeps the
/// worker's files alive, since a restart runs the script again.
struct PythonTool {
    tool: McpTool,
    env_vars: Vec<EnvVar>,
    _files: Arc<WorkerFiles>,
}

#[async_trait]
impl Tool for PythonTool {
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
        self.tool.run(args, ctx).await
    }

    fn env_vars(&self) -> Vec<EnvVar> {
        self.env_vars.clone()
    }
}

/// The worker script, its spec and the file it reports load failures in, in a temporary
/// directory removed when the last tool lets go of it.
struct WorkerFiles {
    dir: TempDir,
}

impl WorkerFiles {
    async fn write(config: &PythonToolConfig) -> Result<WorkerFiles, PythonError> {
        let dir = tokio::task::spawn_blocking(|| {
            tempfile::Builder::new()
                .prefix("crewai-python-worker-")
                .tempdir()
        })
        .await
        .map_err(|source| PythonError::Interrupted { source })?
        .map_err(|source| PythonError::WorkerFiles { source })?;
        let files = WorkerFiles { dir };
        let spec = json!({
            "project_root": config.project_root,
            "load_report": files.load_report(),
            "tools": config.tools.iter().map(|tool| json!({
                "key": tool.key,
                "module": tool.module,
                "module_file": tool.module_file,
                "attr": tool.attr,
                "kwargs": tool.kwargs,
                "is_function": tool.is_function,
            })).collect::<Vec<_>>(),
        });
        let spec =
            serde_json::to_vec_pretty(&spec).map_err(|source| PythonError::Spec { source })?;
        let (script_path, spec_path) = (files.script(), files.spec());
        tokio::task::spawn_blocking(move || {
            std::fs::write(script_path, WORKER_SCRIPT)?;
            std::fs::write(spec_path, spec)
        })
        .await
        .map_err(|source| PythonError::Interrupted { source })?
        .map_err(|source| PythonError::WorkerFiles { source })?;
        Ok(files)
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("crewai_worker.py")
    }

    fn spec(&self) -> PathBuf {
        self.dir.path().join("spec.json")
    }

    fn load_report(&self) -> PathBuf {
        self.dir.path().join("load_report.json")
    }

    /// The error for a worker that did not start: the tools it could not load when it says so,
    /// else the MCP error (which ends with the worker's stderr).
    async fn start_error(&self, config: &PythonToolConfig, source: McpError) -> PythonError {
        let report = self.load_report();
        let failures = tokio::task::spawn_blocking(move || std::fs::read(report))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|bytes| serde_json::from_slice::<Vec<ToolLoadFailure>>(&bytes).ok());
        match failures {
            Some(failures) if !failures.is_empty() => PythonError::ToolLoad { failures },
            _ => PythonError::Start {
                python: config.python.clone(),
                source: Box::new(source),
            },
        }
    }
}
