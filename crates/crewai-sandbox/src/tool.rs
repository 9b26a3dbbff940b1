//! CrewAI's `CodeInterpreterTool` on any backend.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use crewai_tools::{
    CodeExecutionEnd, CodeExecutionStart, Tool, ToolContext, ToolError, ToolOutput, ToolReport,
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::backend::{self, Backend, BackendConfig, Sandbox};
use crate::execution::{Execution, Limits};
use crate::outcome::{ExecutionOutcome, ExitStatus};

/// The tool's name, CrewAI's class name.
pub const CODE_INTERPRETER_TOOL: &str = "CodeInterpreterTool";

/// The first line of every observation in unsafe mode.
const UNSAFE_NOTICE: &str = "UNSAFE MODE: this code ran directly on the host, unconfined.";

/// Which backend runs the code and where the tool puts what the code leaves behind.
#[derive(Debug, Clone)]
pub struct CodeInterpreterConfig {
    pub backend: BackendConfig,
    /// Artifacts of a call are saved under `<artifacts_dir>/<task name>/`.
    pub artifacts_dir: PathBuf,
    /// Files every execution may read (under `/inputs/<file name>`).
    pub inputs: Vec<PathBuf>,
    /// Names of host environment variables passed to the guest; nothing else is.
    pub env_allow: Vec<String>,
    pub limits: Limits,
}

/// Runs the Python a model writes on the configured backend and returns what it printed, its
/// traceback, the limit that stopped it, and where its files were saved, as the observation.
/// The backend is loaded at the first call (the WASI interpreter is compiled on a machine's
/// first use; the bubblewrap backend checks `bwrap` and user namespaces then).
#[derive(Clone)]
pub struct CodeInterpreterTool {
    config: Arc<CodeInterpreterConfig>,
    sandbox: Arc<OnceCell<Sandbox>>,
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
        let backend = config.backend.backend();
        let inputs: Vec<String> = config
            .inputs
            .iter()
            .map(|input| backend::input_shown_as(backend, input))
            .collect();
        let mut description = String::from(match backend {
            Backend::Wasi => {
                "Runs Python 3 code in an isolated sandbox and returns what it printed. Use \
                 print() to show results. numpy, pandas, scipy, scikit-learn and matplotlib are \
                 available; nothing can be installed and there is no network. Files written to \
                 the working directory (a plot saved with savefig, say) are saved."
            }
            Backend::Bubblewrap => {
                "Runs Python 3 code with the project's installed packages in an isolated sandbox \
                 and returns what it printed. Use print() to show results. Nothing can be \
                 installed, there is no network and no new processes; files written to the \
                 working directory are saved."
            }
            Backend::Unsafe => {
                "WARNING: unsafe mode, the code runs directly on the host with the same access \
                 as this program (files, network, processes). Runs Python 3 code with the \
                 project's installed packages and returns what it printed. Use print() to show \
                 results. Files written to the working directory are saved."
            }
        });
        if !inputs.is_empty() {
            description.push_str(&format!(" Readable input files: {}.", inputs.join(", ")));
        }
        CodeInterpreterTool {
            config: Arc::new(config),
            sandbox: Arc::new(OnceCell::new()),
            description,
        }
    }

    /// The backend this tool runs code on.
    pub fn backend(&self) -> Backend {
        self.config.backend.backend()
    }

    /// The tool as a project file's `tools:` entry makes it: CrewAI's constructor arguments are
    /// accepted where they mean something here and refused with the reason where they do not;
    /// `config_for` makes the configuration of the backend they ask for.
    pub fn from_project_args(
        args: &Map<String, Value>,
        config_for: impl FnOnce(Backend) -> Result<CodeInterpreterConfig, String>,
    ) -> Result<Self, String> {
        let backend = backend_from_args(args)?;
        Ok(Self::new(config_for(backend)?))
    }

    async fn sandbox(&self) -> Result<&Sandbox, ToolError> {
        self.sandbox
            .get_or_try_init(|| {
                let config = self.config.clone();
                async move {
                    tokio::task::spawn_blocking(move || Sandbox::load(&config.backend))
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

    /// Runs the code on the backend (loaded at the first call) and saves what it left behind.
    async fn execute(
        &self,
        execution: Execution,
        ctx: &ToolContext,
    ) -> Result<(ExecutionOutcome, Vec<PathBuf>), ToolError> {
        let sandbox = self.sandbox().await?;
        let outcome = sandbox
            .run(execution, &ctx.cancellation)
            .await
            .map_err(|error| ToolError::failed(crewai_llm::error_chain(&error)))?;
        let saved = self.save_artifacts(&outcome, ctx).await?;
        Ok((outcome, saved))
    }
}

/// The backend a `tools:` entry's arguments ask for: `backend:` (`wasi`, `bubblewrap`,
/// `unsafe`) or CrewAI's `unsafe_mode: true`; WASI when neither is given.
pub fn backend_from_args(args: &Map<String, Value>) -> Result<Backend, String> {
    let mut named = None;
    let mut unsafe_mode = false;
    for (name, value) in args {
        match (name.as_str(), value) {
            ("unsafe_mode", Value::Bool(flag)) => unsafe_mode = *flag,
            ("unsafe_mode", _) => return Err("`unsafe_mode` must be true or false".into()),
            ("backend", Value::String(text)) => {
                named = Some(Backend::from_name(text).ok_or_else(|| {
                    format!(
                        "`backend: {text}` is not a backend; write `wasi` (the default), \
                         `bubblewrap` or `unsafe`"
                    )
                })?);
            }
            ("backend", _) => {
                return Err("`backend` must be `wasi`, `bubblewrap` or `unsafe`".into());
            }
            ("user_dockerfile_path" | "user_docker_base_url" | "default_image_tag", _) => {
                return Err(format!(
                    "`{name}`: there is no Docker backend; code runs in the WASI sandbox with \
                     its bundled packages (numpy, pandas, scipy, scikit-learn, matplotlib, ...), \
                     or with the project's own Python under `backend: bubblewrap`; remove `{name}`"
                ));
            }
            (other, _) => {
                return Err(format!(
                    "unknown argument `{other}`; CodeInterpreterTool takes `backend` (`wasi`, \
                     `bubblewrap`, `unsafe`) and `unsafe_mode`"
                ));
            }
        }
    }
    match (named, unsafe_mode) {
        (None, false) => Ok(Backend::Wasi),
        (None, true) | (Some(Backend::Unsafe), _) => Ok(Backend::Unsafe),
        (Some(backend), false) => Ok(backend),
        (Some(backend), true) => Err(format!(
            "`unsafe_mode: true` and `backend: {}` disagree; keep one of them",
            backend.as_str()
        )),
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
pub(crate) fn observation(
    backend: Backend,
    outcome: &ExecutionOutcome,
    saved: &[PathBuf],
) -> String {
    let mut text = if backend == Backend::Unsafe {
        format!("{UNSAFE_NOTICE}\n")
    } else {
        String::new()
    };
    text.push_str(&match &outcome.status {
        ExitStatus::Exited(0) => "The code ran to its end (exit status 0).".to_string(),
        ExitStatus::Exited(code) => format!("The code failed (exit status {code})."),
        ExitStatus::Stopped { reason } => format!("The code was stopped: {reason}."),
    });
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
        let start = CodeExecutionStart {
            backend: self.backend().as_str().to_string(),
            code_sha256: hex::encode(Sha256::digest(code.as_bytes())),
            libraries_used: execution.modules.clone(),
        };
        ctx.report(ToolReport::CodeExecutionStarted(start.clone()));
        let ran = self.execute(execution, ctx).await;
        match &ran {
            Ok((outcome, saved)) => {
                ctx.report(ToolReport::CodeExecutionCompleted(CodeExecutionEnd {
                    start,
                    exit_code: match outcome.status {
                        ExitStatus::Exited(code) => Some(code),
                        ExitStatus::Stopped { .. } => None,
                    },
                    stopped: match &outcome.status {
                        ExitStatus::Exited(_) => None,
                        ExitStatus::Stopped { reason } => Some(reason.clone()),
                    },
                    limit_hit: outcome.limit_hit.map(|limit| limit.as_str().to_string()),
                    duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
                    artifacts: saved.iter().map(|p| p.display().to_string()).collect(),
                }))
            }
            Err(error) => ctx.report(ToolReport::CodeExecutionFailed {
                start,
                error: crewai_llm::error_chain(error),
            }),
        }
        let (outcome, saved) = ran?;
        Ok(ToolOutput::Text(observation(
            self.backend(),
            &outcome,
            &saved,
        )))
    }
}
