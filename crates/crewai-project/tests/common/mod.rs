//! Helpers shared by the integration tests (not every test binary uses every one).
#![allow(dead_code)]

use std::path::Path;

use crewai_core::crew::Crew;
use crewai_project::Project;

/// Writes `files` (relative path, text) below `dir`, creating folders as needed.
pub fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A new folder holding `yaml` as its `flow.yaml`, and the declaration loaded from it.
pub fn declaration(yaml: &str) -> (tempfile::TempDir, crewai_project::flow_v1::FlowDeclaration) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("flow.yaml", yaml)]);
    let flow = crewai_project::flow_v1::FlowDeclaration::load(dir.path().join("flow.yaml"))
        .unwrap_or_else(|err| panic!("should load:\n{err}"));
    (dir, flow)
}

/// A new folder holding `files`, and the project loaded from it.
pub fn load(files: &[(&str, &str)]) -> (tempfile::TempDir, Project) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), files);
    let project =
        Project::load(dir.path()).unwrap_or_else(|err| panic!("project should load:\n{err}"));
    (dir, project)
}

/// The names of the crew's tasks, in run order.
pub fn task_names(crew: &Crew) -> Vec<String> {
    crew.tasks()
        .iter()
        .map(|t| t.name().unwrap_or_default().to_string())
        .collect()
}
