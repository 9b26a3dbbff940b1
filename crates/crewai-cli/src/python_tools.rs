//! The project's own Python tools (`BaseTool` subclasses, `@tool` functions, crewai-tools
//! classes crewai-rs does not have), served by one worker process for the whole command.

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use crewai_project::{Project, ToolRegistry};
use crewai_python::{PythonToolConfig, PythonToolSpec, PythonTools, find_python};

use crate::outcome::Failure;

/// How long importing the project's tool modules and the worker's handshake may take: importing
/// `crewai_tools` or a heavy SDK takes seconds on a cold disk.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one Python tool call may take (a tool that scrapes or searches waits on the network);
/// a task's own deadline (`max_execution_time`) still applies on top.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// The worker of one command, stopped (and its process reaped) by [`ProjectPython::shutdown`]
/// or, on every other way out, when it is dropped.
pub struct ProjectPython {
    tools: Option<PythonTools>,
}

impl ProjectPython {
    /// Starts the worker when the project has Python tools and registers each under its key in
    /// `registry`; a project without any starts nothing and needs no Python.
    pub async fn start(
        project: &Project,
        explicit_python: Option<&Path>,
        registry: &mut ToolRegistry,
    ) -> Result<ProjectPython, Failure> {
        if project.python_tools.is_empty() {
            return Ok(ProjectPython { tools: None });
        }
        let needed_by: Vec<String> = project
            .python_tools
            .iter()
            .map(|tool| format!("{} ({})", tool.attr, tool.module))
            .collect();
        let python = find_python(explicit_python, &project.root, &needed_by)
            .map_err(|error| Failure::config(anyhow!(error)))?;
        let specs = project
            .python_tools
            .iter()
            .map(|tool| PythonToolSpec {
                key: tool.key.clone(),
                module: tool.module.clone(),
                module_file: tool.module_file.clone(),
                attr: tool.attr.clone(),
                kwargs: tool.kwargs.clone(),
                is_function: tool.is_function,
            })
            .collect();
        // The worker imports `src/<pkg>` from the root: give it the root as an absolute path,
        // so it does not depend on where the worker's own files live.
        let project_root =
            std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
        let tools = PythonTools::start(PythonToolConfig {
            python,
            project_root,
            tools: specs,
            start_timeout: START_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
        })
        .await
        .map_err(|error| Failure::config(anyhow!(error)))?;
        for (key, handle) in tools.handles() {
            registry.register_handle_as(&key, handle);
        }
        Ok(ProjectPython { tools: Some(tools) })
    }

    /// Stops the worker and waits for its process to end.
    pub async fn shutdown(self) {
        if let Some(tools) = self.tools {
            tools.shutdown().await;
        }
    }
}
