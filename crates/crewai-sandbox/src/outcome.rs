//! What one execution ended as.

use std::time::Duration;

/// Which limit stopped an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The wall-clock deadline passed (or the caller cancelled).
    Deadline,
    /// The code asked for more memory than the cap; Python saw a `MemoryError` (WASI: the
    /// store's limiter refused to grow memory; host: the address-space rlimit, reported when an
    /// uncaught `MemoryError` ended the code).
    Memory,
    /// stdout or stderr reached the output cap: later writes failed in the WASI guest; the
    /// host backends stopped the process.
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

/// Why a runner stopped the code before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Deadline(Duration),
    Cancelled,
    /// The output cap (bytes) was reached: host backends stop the process then.
    OutputCap(usize),
}

impl Stop {
    pub(crate) fn status(self) -> ExitStatus {
        let reason = match self {
            Stop::Deadline(deadline) => format!("the deadline of {deadline:?} passed"),
            Stop::Cancelled => "the run was cancelled".into(),
            Stop::OutputCap(bytes) => format!("the output cap of {bytes} bytes was reached"),
        };
        ExitStatus::Stopped { reason }
    }
}

/// The limit an execution hit, in the order they are reported: the deadline, then the output
/// cap, then memory.
pub(crate) fn limit_hit(deadline: bool, output: bool, memory: bool) -> Option<LimitHit> {
    if deadline {
        Some(LimitHit::Deadline)
    } else if output {
        Some(LimitHit::Output)
    } else if memory {
        Some(LimitHit::Memory)
    } else {
        None
    }
}
