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
    #[error(
        "the bubblewrap backend needs `bwrap` on PATH and there is none; install it (`apt-get install bubblewrap`) or use the default WASI backend"
    )]
    BubblewrapMissing,
    #[error(
        "the bubblewrap backend needs user namespaces, and this kernel refused one (`{bwrap} --unshare-user` said: {stderr}); allow them (sysctl `user.max_user_namespaces` > 0, `kernel.unprivileged_userns_clone=1`, or on Ubuntu `kernel.apparmor_restrict_unprivileged_userns=0`) or use the default WASI backend",
        bwrap = .bwrap.display()
    )]
    NoUserNamespaces { bwrap: PathBuf, stderr: String },
    #[error("the bubblewrap backend is only built for Linux on x86_64 and aarch64 ({0})")]
    UnsupportedPlatform(String),
    /// The project's Python could not be asked where its files are (the folders to bind).
    #[error("cannot use {} as the sandbox's Python: {problem}", .python.display())]
    Python { python: PathBuf, problem: String },
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(String),
    #[error("cannot start {}", .program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
