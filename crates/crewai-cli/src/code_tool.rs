//! The sandboxed `CodeInterpreterTool` a project's `tools:` and `allow_code_execution` get: the
//! interpreter pulled by `crewai models pull python-wasm`, its compiled form cached beside it,
//! the project's `inputs/` and `knowledge/` files readable, artifacts saved under `output/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_local::cache::{PYTHON_WASM, PYTHON_WASM_SHA256};
use crewai_project::ToolRegistry;
use crewai_sandbox::{
    CODE_INTERPRETER_TOOL, CodeInterpreterConfig, CodeInterpreterTool, InterpreterFiles, Limits,
};
use crewai_tools::ToolHandle;

/// The project folders whose files (top level only) the code may read under `/inputs`.
const INPUT_FOLDERS: &[&str] = &["inputs", "knowledge"];

/// Registers the tool under CrewAI's name; it loads the interpreter at its first call.
pub fn register(registry: &mut ToolRegistry, root: &Path) {
    let config = config(root);
    registry.register_factory(
        CODE_INTERPRETER_TOOL,
        Arc::new(move |args| {
            CodeInterpreterTool::from_project_args(args, config.clone())
                .map(|tool| ToolHandle::new(Arc::new(tool)))
                .map_err(Into::into)
        }),
    );
}

fn config(root: &Path) -> CodeInterpreterConfig {
    let dir = PYTHON_WASM.path_in(&crewai_local::models_dir());
    CodeInterpreterConfig {
        interpreter: InterpreterFiles::in_dir(&dir, PYTHON_WASM_SHA256),
        cache_dir: dir.join("compiled"),
        artifacts_dir: root.join("output"),
        inputs: input_files(root),
        env_allow: Vec::new(),
        limits: Limits::default(),
    }
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
