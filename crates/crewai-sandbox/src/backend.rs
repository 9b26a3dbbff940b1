//! The backends behind one interface: the same [`Execution`] in, the same [`ExecutionOutcome`]
//! out, whichever runs it.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::error::SandboxError;
use crate::execution::Execution;
use crate::host::HostSandbox;
use crate::outcome::ExecutionOutcome;
use crate::wasi::{InterpreterFiles, WasiSandbox};

/// Which backend runs the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CPython compiled to WASI in wasmtime: no host access at all (the default).
    Wasi,
    /// The project's own Python in bubblewrap's namespaces, rlimits and seccomp filters.
    Bubblewrap,
    /// The project's own Python with no confinement (CrewAI's unsafe mode).
    Unsafe,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Wasi => "wasi",
            Backend::Bubblewrap => "bubblewrap",
            Backend::Unsafe => "unsafe",
        }
    }

    /// The backend a project names (`safe`/`wasi`, `bubblewrap`, `unsafe`), if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim() {
            "safe" | "wasi" => Some(Backend::Wasi),
            "bubblewrap" => Some(Backend::Bubblewrap),
            "unsafe" => Some(Backend::Unsafe),
            _ => None,
        }
    }
}

/// What a backend is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendConfig {
    Wasi {
        interpreter: InterpreterFiles,
        /// Where the compiled interpreter is cached (outside any project).
        cache_dir: PathBuf,
    },
    /// `python` is the project's (see crewai-python's `find_python`).
    Bubblewrap {
        python: PathBuf,
    },
    Unsafe {
        python: PathBuf,
    },
}

impl BackendConfig {
    pub fn backend(&self) -> Backend {
        match self {
            BackendConfig::Wasi { .. } => Backend::Wasi,
            BackendConfig::Bubblewrap { .. } => Backend::Bubblewrap,
            BackendConfig::Unsafe { .. } => Backend::Unsafe,
        }
    }
}

/// A loaded backend; cheap to clone.
#[derive(Debug, Clone)]
pub enum Sandbox {
    Wasi(WasiSandbox),
    Host(HostSandbox),
}

impl Sandbox {
    /// Loads the backend (blocking): the WASI interpreter (compiled on a machine's first use),
    /// or the checks the bubblewrap backend refuses to start without.
    pub fn load(config: &BackendConfig) -> Result<Self, SandboxError> {
        Ok(match config {
            BackendConfig::Wasi {
                interpreter,
                cache_dir,
            } => Sandbox::Wasi(WasiSandbox::load(interpreter, cache_dir)?),
            BackendConfig::Bubblewrap { python } => Sandbox::Host(HostSandbox::bubblewrap(python)?),
            BackendConfig::Unsafe { python } => Sandbox::Host(HostSandbox::unconfined(python)),
        })
    }

    pub fn backend(&self) -> Backend {
        match self {
            Sandbox::Wasi(_) => Backend::Wasi,
            Sandbox::Host(host) if host.is_confined() => Backend::Bubblewrap,
            Sandbox::Host(_) => Backend::Unsafe,
        }
    }

    pub async fn run(
        &self,
        execution: Execution,
        cancellation: &CancellationToken,
    ) -> Result<ExecutionOutcome, SandboxError> {
        match self {
            Sandbox::Wasi(wasi) => wasi.run(execution, cancellation).await,
            Sandbox::Host(host) => host.run(execution, cancellation).await,
        }
    }
}

/// Where code run by `backend` finds a granted input: its copy under `/inputs` in a sandbox;
/// in unsafe mode the code sees the host as it is, so the file itself.
pub(crate) fn input_shown_as(backend: Backend, input: &Path) -> String {
    match backend {
        Backend::Wasi | Backend::Bubblewrap => {
            let name = input.file_name().map(|n| n.to_string_lossy().into_owned());
            format!(
                "{}/{}",
                crate::prelude::SANDBOX_INPUTS,
                name.unwrap_or_default()
            )
        }
        Backend::Unsafe => input.display().to_string(),
    }
}
