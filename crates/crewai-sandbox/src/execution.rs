//! What one execution is: the code, what it is granted, and its limits.

use std::path::PathBuf;
use std::time::Duration;

/// The limits of one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time from the interpreter's start (its own start-up included).
    pub deadline: Duration,
    /// Memory: the WASI guest's linear memory, the host process's address space
    /// (`RLIMIT_AS`); growing past it is a `MemoryError` in Python.
    pub memory_bytes: usize,
    /// Each of stdout and stderr.
    pub output_bytes: usize,
    /// All artifacts together; files past it are listed in `skipped_artifacts`. The host
    /// backends also cap each file the code writes at this size (`RLIMIT_FSIZE`).
    pub artifact_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            output_bytes: 1 << 20,
            artifact_bytes: 32 << 20,
        }
    }
}

/// One piece of code to run and what it is granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Execution {
    pub code: String,
    /// Modules the code says it imports (CrewAI's `libraries_used`), checked before it runs.
    pub modules: Vec<String>,
    /// Host files the code may read, copied into `/inputs/<file name>` for this execution.
    pub inputs: Vec<PathBuf>,
    /// Environment variables the code sees besides the runner's own few; the caller
    /// decides which (an allow-list), nothing is inherited.
    pub env: Vec<(String, String)>,
    pub limits: Limits,
}

impl Execution {
    pub fn new(code: impl Into<String>) -> Self {
        Execution {
            code: code.into(),
            ..Execution::default()
        }
    }
}
