//! CrewAI's `CodeInterpreterTool` on the WASI sandbox.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use crewai_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

use crate::outcome::{ExecutionOutcome, ExitStatus};
use crate::wasi::{Execution, InterpreterFiles, Limits, WasiSandbox};

/// The tool's name, CrewAI's class name.
pub const CODE_INTERPRETER_TOOL: &str = "CodeInterpreterTool";

/// Where the tool finds its interpreter and puts what the code leaves behind.
#[derive(Debug, Clone)]
pub struct CodeInterpreterConfig {
    pub interpreter: InterpreterFiles,
    /// Where the compiled interpreter is cached (outside any project).
    pub cache_dir: PathBuf,
    /// Artifacts of a call are saved under `<artifacts_dir>/<task name>/`.
    pub artifacts_dir: PathBuf,
    /// Files every execution may read (under `/inputs/<file name>`).
    pub inputs: Vec<PathBuf>,
    /// Names of host environment variables passed to the guest; nothing else is.
    pub env_allow: Vec<String>,
    pub limits: Limits,
}

/// Runs the Python a model writes in the WASI sandbox and returns what it printed, its
/// traceback, the limit that stopped it, and where its files were saved, as the observation.
/// The interpreter is loaded (compiled on a machine's first use) at the first call.
#[derive(Clone)]
pub struct CodeInterpreterTool {
    config: Arc<CodeInterpreterConfig>,
    sandbox: Arc<OnceCell<WasiSandbox>>,
    description: String,
}

impl std::fmt::Debug for CodeInterpreterTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeInterpreterTool")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CodeInterpreterTool {
    pub fn new(config: CodeInterpreterConfig) -> Self {
        let inputs: Vec<String> = config
            .inputs
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| format!("/inputs/{}", n.to_string_lossy()))
            .collect();
        let mut description = String::from(
            "Runs Python 3 code in an isolated sandbox and returns what it printed. Use print() \
             to show results. numpy, pandas, scipy and scikit-learn are available; \
             nothing can be installed and there is no network. Files written to the working \
             directory are saved.",
        );
        if !inputs.is_empty() {
            description.push_str(&format!(" Readable input files: {}.", inputs.join(", ")));
        }
        CodeInterpreterTool {
            config: Arc::new(config),
            sandbox: Arc::new(OnceCell::new()),
            description,
        }
    }

    /// The tool as a project file's `tools:` entry makes it: CrewAI's constructor arguments are
    /// accepted where they mean something here and refused with the reason where they do not.
    pub fn from_project_args(
        args: &Map<String, Value>,
        config: CodeInterpreterConfig,
    ) -> Result<Self, String> {
        for (name, value) in args {
            match name.as_str() {
                "unsafe_mode" if value == &Value::Bool(false) => {}
                "unsafe_mode" => {
                    return Err(
                        "`unsafe_mode: true` (running code on the host) is not available: code \
                         runs in the WASI sandbox; remove `unsafe_mode`"
                            .into(),
                    );
                }
                "user_dockerfile_path" | "user_docker_base_url" | "default_image_tag" => {
                    return Err(format!(
                        "`{name}`: there is no Docker backend; code runs in the WASI sandbox with \
                         its bundled packages (numpy, pandas, scipy, scikit-learn, matplotlib, \
                         ...); remove `{name}`"
                    ));
                }
                other => {
                    return Err(format!(
                        "unknown argument `{other}`; CodeInterpreterTool takes `unsafe_mode: false`"
                    ));
                }
            }
        }
        Ok(Self::new(config))
    }

    async fn sandbox(&self) -> Result<&WasiSandbox, ToolError> {
        self.sandbox
            .get_or_try_init(|| {
                let config = self.config.clone();
                async move {
                    tokio::task::spawn_blocking(move || {
                        WasiSandbox::load(&config.interpreter, &config.cache_dir)
                    })
                    .await
                    .map_err(|error| {
                        ToolError::failed(format!("the sandbox could not start: {error}"))
                    })?
                    .map_err(|error| ToolError::failed(crewai_llm::error_chain(&error)))
                }
            })
            .await
    }

    /// Saves the artifacts under the task's folder; returns their paths.
    async fn save_artifacts(
        &self,
        outcome: &ExecutionOutcome,
        ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, ToolError> {
        if outcome.artifacts.is_empty() {
            return Ok(Vec::new());
        }
        let folder = self
            .config
            .artifacts_dir
            .join(folder_name(ctx.task_name.as_deref()));
        let artifacts = outcome.artifacts.clone();
        tokio::task::spawn_blocking(move || {
            let mut saved = Vec::new();
            for artifact in artifacts {
                let relative = Path::new(&artifact.path);
                if !relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
                {
                    continue;
                }
                let target = folder.join(relative);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|source| ToolError::Io {
                        action: format!("'{}' cannot be created", parent.display()),
                        source,
                    })?;
                }
                std::fs::write(&target, &artifact.bytes).map_err(|source| ToolError::Io {
                    action: format!("'{}' cannot be written", target.display()),
                    source,
                })?;
                saved.push(target);
            }
            Ok(saved)
        })
        .await
        .map_err(|error| ToolError::failed(format!("saving the artifacts failed: {error}")))?
    }
}

/// A task name as a folder name: letters, digits, `-` and `_`.
fn folder_name(task: Option<&str>) -> String {
    let name: String = task
        .unwrap_or("code")
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() { "code".into() } else { name }
}

/// The observation the model reads.
pub(crate) fn observation(outcome: &ExecutionOutcome, saved: &[PathBuf]) -> String {
    let mut text = match &outcome.status {
        ExitStatus::Exited(0) => "The code ran to its end (exit status 0).".to_string(),
        ExitStatus::Exited(code) => format!("The code failed (exit status {code})."),
        ExitStatus::Stopped { reason } => format!("The code was stopped: {reason}."),
    };
    if let Some(limit) = outcome.limit_hit {
        text.push_str(&format!(" Limit reached: {}.", limit.as_str()));
    }
    text.push_str(&format!("\nstdout:\n{}", outcome.stdout));
    if !outcome.stderr.trim().is_empty() {
        text.push_str(&format!("\nstderr:\n{}", outcome.stderr));
    }
    if !saved.is_empty() {
        let names: Vec<String> = saved.iter().map(|p| p.display().to_string()).collect();
        text.push_str(&format!("\nfiles saved: {}", names.join(", ")));
    }
    if !outcome.skipped_artifacts.is_empty() {
        text.push_str(&format!(
            "\nfiles not saved (not regular files, or over the size cap): {}",
            outcome.skipped_artifacts.join(", ")
        ));
    }
    text
}

#[async_trait]
impl Tool for CodeInterpreterTool {
    fn name(&self) -> &str {
        CODE_INTERPRETER_TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "Python 3 code to run; print() what you want to see"
                },
                "libraries_used": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Modules the code imports (only bundled ones can be used)"
                }
            },
            "required": ["code"]
        })
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let code = args.get("code").and_then(Value::as_str).ok_or_else(|| {
            ToolError::InvalidArguments("`code` must be a string of Python".into())
        })?;
        let modules = match args.get("libraries_used") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_string).ok_or_else(|| {
                        ToolError::InvalidArguments(
                            "`libraries_used` must be a list of module names".into(),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(Value::String(list)) => list
                .split(',')
                .map(|name| name.trim().to_string())
                .filter(|name| !name.is_empty())
                .collect(),
            Some(_) => {
                return Err(ToolError::InvalidArguments(
                    "`libraries_used` must be a list of module names".into(),
                ));
            }
        };
        let env = self
            .config
            .env_allow
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
            .collect();
        let execution = Execution {
            code: code.to_string(),
            modules,
            inputs: self.config.inputs.clone(),
            env,
            limits: self.config.limits,
        };
        let sandbox = self.sandbox().await?;
        let outcome = sandbox
            .run(execution, &ctx.cancellation)
            .await
            .map_err(|error| ToolError::failed(crewai_llm::error_chain(&error)))?;
        let saved = self.save_artifacts(&outcome, ctx).await?;
        Ok(ToolOutput::Text(observation(&outcome, &saved)))
    }
}
