//! What one execution ended as.

use std::time::Duration;

/// Which limit stopped an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The wall-clock deadline passed (or the caller cancelled).
    Deadline,
    /// The guest asked for more memory than the cap; Python saw a `MemoryError`.
    Memory,
    /// stdout or stderr reached the output cap; later writes failed in the guest.
    Output,
}

impl LimitHit {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitHit::Deadline => "deadline",
            LimitHit::Memory => "memory",
            LimitHit::Output => "output",
        }
    }
}

/// How the interpreter stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code (0 when the code ran to its end; 1 after an uncaught exception).
    Exited(i32),
    /// The runtime stopped it: the deadline, a cancellation, or a trap (`reason`).
    Stopped { reason: String },
}

/// A file the code left in its scratch folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Its path inside the scratch folder, with `/` separators.
    pub path: String,
    pub bytes: Vec<u8>,
}

/// The result of one execution: always a value, whatever the code did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionOutcome {
    pub status: ExitStatus,
    pub stdout: String,
    /// The guest's stderr: an uncaught exception's traceback ends up here.
    pub stderr: String,
    pub limit_hit: Option<LimitHit>,
    /// Regular files written to the scratch folder (symlinks and other kinds are never read).
    pub artifacts: Vec<Artifact>,
    /// Files left out of `artifacts` because they were not regular files or over the size cap.
    pub skipped_artifacts: Vec<String>,
    pub duration: Duration,
}

impl ExecutionOutcome {
    /// True when the code ran to its end and exited 0 within every limit.
    pub fn succeeded(&self) -> bool {
        self.status == ExitStatus::Exited(0) && self.limit_hit.is_none()
    }
}
