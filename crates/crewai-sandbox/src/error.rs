//! Errors of the sandbox itself (never of the guest's code: that is an [`ExecutionOutcome`]).
//!
//! [`ExecutionOutcome`]: crate::ExecutionOutcome

use std::path::PathBuf;

/// What kept the sandbox from running an execution.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    #[error(
        "the sandboxed Python interpreter is not downloaded (looked for {}); run `crewai models pull python-wasm`",
        .path.display()
    )]
    NotPulled { path: PathBuf },
    #[error("cannot {action} {}", .path.display())]
    Io {
        /// `create`, `read`, `link`, `write`.
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// wasmtime refused the engine, module or instance: `step` says which.
    #[error("the WebAssembly runtime failed to {step}")]
    Runtime {
        step: &'static str,
        #[source]
        source: wasmtime::Error,
    },
    #[error("the sandbox's execution thread stopped without a result")]
    ThreadLost,
}

impl SandboxError {
    pub(crate) fn io(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl Fn(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| SandboxError::Io {
            action,
            path: path.clone(),
            source,
        }
    }

    pub(crate) fn runtime(step: &'static str) -> impl Fn(wasmtime::Error) -> Self {
        move |source| SandboxError::Runtime { step, source }
    }
}
