//! The `CodeInterpreterTool` a project's `tools:` and `allow_code_execution` get: by default
//! the WASI sandbox (the interpreter pulled by `crewai models pull python-wasm`, its compiled
//! form cached beside it); `backend: bubblewrap` or `unsafe_mode: true` (an agent's
//! `code_execution_mode: bubblewrap` / `unsafe`) run the project's own Python instead, found as
//! for its Python tools (`.venv`, then `python3` on PATH). The project's `inputs/` and
//! `knowledge/` files are readable, artifacts are saved under `output/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_local::cache::{PYTHON_WASM, PYTHON_WASM_SHA256};
use crewai_project::ToolRegistry;
use crewai_sandbox::{
    Backend, BackendConfig, CODE_INTERPRETER_TOOL, CodeInterpreterConfig, CodeInterpreterTool,
    InterpreterFiles, Limits,
};
use crewai_tools::ToolHandle;

/// The project folders whose files (top level only) the code may read under `/inputs`.
const INPUT_FOLDERS: &[&str] = &["inputs", "knowledge"];

/// Registers the tool under CrewAI's name; it loads its backend at its first call.
pub fn register(registry: &mut ToolRegistry, root: &Path) {
    let root = root.to_path_buf();
    registry.register_factory(
        CODE_INTERPRETER_TOOL,
        Arc::new(move |args| {
            CodeInterpreterTool::from_project_args(args, |backend| config(backend, &root))
                .map(|tool| ToolHandle::new(Arc::new(tool)))
                .map_err(Into::into)
        }),
    );
}

fn config(backend: Backend, root: &Path) -> Result<CodeInterpreterConfig, String> {
    let project_python = || {
        crewai_python::find_python(None, root, &[CODE_INTERPRETER_TOOL.to_string()])
            .map_err(|error| error.to_string())
    };
    let backend = match backend {
        Backend::Wasi => {
            let dir = PYTHON_WASM.path_in(&crewai_local::models_dir());
            BackendConfig::Wasi {
                interpreter: InterpreterFiles::in_dir(&dir, PYTHON_WASM_SHA256),
                cache_dir: dir.join("compiled"),
            }
        }
        Backend::Bubblewrap => BackendConfig::Bubblewrap {
            python: project_python()?,
        },
        Backend::Unsafe => {
            let python = project_python()?;
            eprintln!(
                "warning: {CODE_INTERPRETER_TOOL} in UNSAFE mode: the model's code runs with {} \
                 directly on this machine, unconfined (files, network, processes); only the \
                 deadline and the output caps apply",
                python.display()
            );
            BackendConfig::Unsafe { python }
        }
    };
    Ok(CodeInterpreterConfig {
        backend,
        artifacts_dir: root.join("output"),
        inputs: input_files(root),
        env_allow: Vec::new(),
        limits: Limits::default(),
    })
}

fn input_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = INPUT_FOLDERS
        .iter()
        .filter_map(|folder| std::fs::read_dir(root.join(folder)).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}
