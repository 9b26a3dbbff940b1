//! What a tool tells its caller about the work it does inside a call. The run turns each report
//! into an event under the tool call's own (`tool_usage_started`), so traces, OpenTelemetry and
//! the CLI's progress show what happened inside the tool, not only that it was called.

use std::sync::Arc;

/// One thing a tool reports. Typed, and deliberately not `#[non_exhaustive]`: the run maps every
/// report to an event without a catch-all arm, so a new kind does not compile until the run
/// has an event for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolReport {
    /// Code is about to run in a sandbox.
    CodeExecutionStarted(CodeExecutionStart),
    /// The code ran and ended, by itself or stopped by a limit: `CodeExecutionEnd` says which.
    CodeExecutionCompleted(CodeExecutionEnd),
    /// The code could not run: the sandbox did not start or failed itself.
    CodeExecutionFailed {
        start: CodeExecutionStart,
        error: String,
    },
}

/// Which code runs where. The code itself is not reported, its hash is: a model's code can be
/// long and hold what the prompt held; the tool call's own event carries it in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeExecutionStart {
    /// `wasi`, `bubblewrap` or `unsafe`.
    pub backend: String,
    /// SHA-256 of the code, lowercase hex.
    pub code_sha256: String,
    /// The modules the model said the code imports.
    pub libraries_used: Vec<String>,
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeExecutionEnd {
    pub start: CodeExecutionStart,
    /// The interpreter's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// Why the runtime stopped it, when it did (the deadline, a cancellation, a trap).
    pub stopped: Option<String>,
    /// The limit it hit: `deadline`, `memory` or `output`.
    pub limit_hit: Option<String>,
    pub duration_ms: u64,
    /// Where the files it wrote were saved.
    pub artifacts: Vec<String>,
}

/// A function that receives a tool's reports.
type Report = dyn Fn(ToolReport) + Send + Sync;

/// Where a tool sends its reports (see [`ToolContext::report`](crate::ToolContext::report)).
#[derive(Clone)]
pub struct ToolReporter(Arc<Report>);

impl ToolReporter {
    pub fn new(report: impl Fn(ToolReport) + Send + Sync + 'static) -> Self {
        ToolReporter(Arc::new(report))
    }

    pub fn report(&self, report: ToolReport) {
        (self.0)(report)
    }
}

impl std::fmt::Debug for ToolReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolReporter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> CodeExecutionStart {
        CodeExecutionStart {
            backend: "wasi".into(),
            code_sha256: "ab".into(),
            libraries_used: vec![],
        }
    }

    #[test]
    fn a_reporter_hands_each_report_to_its_function() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let reporter = ToolReporter::new(move |report| sink.lock().unwrap().push(report));
        reporter.report(ToolReport::CodeExecutionStarted(start()));
        assert_eq!(
            *seen.lock().unwrap(),
            vec![ToolReport::CodeExecutionStarted(start())]
        );
    }
}
