//! The project loader reads the YAML users write: any text must give a project or errors with
//! their file and line, never a panic.
//!
//! Input: `agents.yaml`, `tasks.yaml` and `crew.yaml` separated by NUL bytes (missing parts are
//! absent files). The whole input is also read as a JSONC crew file.
#![no_main]

use std::path::Path;

use crewai_project::{Format, Project, SourceFile, ToolRegistry, strip_jsonc};
use libfuzzer_sys::fuzz_target;

/// A folder that does not exist, so schema files named by tasks are never found.
const ROOT: &str = "/nonexistent/crewai-fuzz-project";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let agents = parts.next().unwrap_or_default();
    let tasks = parts.next();
    let crew = parts.next();
    if let Ok(project) = Project::from_yaml_sources(ROOT, agents, tasks, crew) {
        let _ = project.placeholders();
        let _ = project.plan(&project.default_inputs(), &ToolRegistry::new());
    }

    let root = Path::new(ROOT);
    let jsonc = SourceFile::from_text(&root.join("crew.jsonc"), root, Format::Jsonc, text.into());
    let _ = jsonc.parse();
    let stripped = strip_jsonc(text);
    assert_eq!(
        stripped.len(),
        text.len(),
        "stripping JSONC keeps every column"
    );
    assert_eq!(
        stripped.matches('\n').count(),
        text.matches('\n').count(),
        "stripping JSONC keeps every line"
    );
});
