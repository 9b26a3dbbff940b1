//! A tool's reports ([`ToolReport`]) as the run's events: what the executor emits, under the
//! tool call's own event, when a tool says what it did inside the call.

use crewai_tools::{CodeExecutionStart, ToolReport};

use super::kind::EventKind;

impl EventKind {
    /// The event of a tool's report, attributed to the agent and task that made the call. One
    /// match with no catch-all: a new kind of report does not compile until it has its event.
    pub fn from_tool_report(
        report: ToolReport,
        agent_role: Option<String>,
        task_name: Option<String>,
    ) -> EventKind {
        match report {
            ToolReport::CodeExecutionStarted(CodeExecutionStart {
                backend,
                code_sha256,
                libraries_used,
            }) => EventKind::CodeExecutionStarted {
                backend,
                code_sha256,
                libraries_used,
                agent_role,
                task_name,
            },
            ToolReport::CodeExecutionCompleted(end) => EventKind::CodeExecutionCompleted {
                backend: end.start.backend,
                code_sha256: end.start.code_sha256,
                exit_code: end.exit_code,
                stopped: end.stopped,
                limit_hit: end.limit_hit,
                duration_ms: end.duration_ms,
                artifacts: end.artifacts,
                agent_role,
                task_name,
            },
            ToolReport::CodeExecutionFailed { start, error } => EventKind::CodeExecutionFailed {
                backend: start.backend,
                code_sha256: start.code_sha256,
                agent_role,
                task_name,
                error,
            },
        }
    }
}
