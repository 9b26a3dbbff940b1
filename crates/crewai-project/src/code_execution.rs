//! An agent's `allow_code_execution` and `code_execution_mode`: CrewAI gives such an agent its
//! `CodeInterpreterTool`; here that is the tool the registry provides under that name (the CLI
//! registers crewai-sandbox's), made with the arguments the mode stands for: `safe` (the
//! default: the WASI sandbox) none, `bubblewrap` (the project's own Python, confined)
//! `backend: bubblewrap`, `unsafe` (the project's own Python, unconfined) `unsafe_mode: true`.
//! `bubblewrap` is this implementation's: CrewAI knows only `safe` and `unsafe`.

use crewai_tools::ToolHandle;

use crate::error::Diagnostic;
use crate::load::AgentEntry;
use crate::registry::{ToolLookupError, ToolRegistry};
use crate::spec::ToolRef;

/// CrewAI's class name for the code tool.
pub(crate) const CODE_TOOL: &str = "CodeInterpreterTool";

/// What to do when no `CodeInterpreterTool` is registered (a crew built outside the CLI).
pub(crate) fn missing_code_tool_hint() -> String {
    format!(
        "run the project with the crewai CLI (it provides the sandboxed {CODE_TOOL}), or register one in the ToolRegistry"
    )
}

/// The code tool an agent with `allow_code_execution: true` gets, or why it cannot have one.
pub(crate) fn code_tool(
    agent: &AgentEntry,
    registry: &ToolRegistry,
) -> Result<Option<ToolHandle>, Diagnostic> {
    let spec = &agent.spec;
    let origin = spec.origin("allow_code_execution").unwrap_or(&agent.origin);
    let mut args = serde_json::Map::new();
    if let (Some(mode), Some(mode_origin)) = (
        &spec.code_execution_mode,
        spec.origin("code_execution_mode"),
    ) {
        match mode.trim() {
            "safe" => {}
            "bubblewrap" => {
                args.insert("backend".into(), "bubblewrap".into());
            }
            "unsafe" => {
                args.insert("unsafe_mode".into(), true.into());
            }
            other => {
                return Err(mode_origin.diagnostic(format!(
                    "agent '{}' `code_execution_mode` is '{other}'; it must be `safe` (the WASI \
                     sandbox), `bubblewrap` (the project's Python, confined) or `unsafe` (the \
                     project's Python, unconfined)",
                    agent.key
                )));
            }
        }
    }
    if spec.allow_code_execution != Some(true) {
        return Ok(None);
    }
    let tool = ToolRef {
        name: CODE_TOOL.into(),
        args,
    };
    match registry.resolve(&tool) {
        Ok(handle) => Ok(Some(handle)),
        Err(ToolLookupError::Unknown { .. }) => Err(origin
            .diagnostic(format!(
                "agent '{}' has `allow_code_execution: true`, but no {CODE_TOOL} is registered",
                agent.key
            ))
            .with_hint(Some(missing_code_tool_hint()))),
        Err(error) => Err(origin.diagnostic(format!(
            "agent '{}' `allow_code_execution`: {}",
            agent.key,
            crewai_llm::error_chain(&error)
        ))),
    }
}
