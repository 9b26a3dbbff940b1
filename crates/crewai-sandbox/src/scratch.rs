//! The folders one execution gets, whatever the backend: a fresh scratch folder (its working
//! directory and where its artifacts come from), a private temporary folder and the granted
//! inputs, all removed when the [`Workspace`] is dropped.

use std::path::{Path, PathBuf};

use crate::error::SandboxError;
use crate::outcome::Artifact;

pub(crate) struct Workspace {
    root: tempfile::TempDir,
}

impl Workspace {
    /// Creates the folders and copies each granted input into `inputs/` under its file name
    /// (a copy, so the code can never change the original). Blocking.
    pub(crate) fn create(inputs: &[PathBuf]) -> Result<Self, SandboxError> {
        let root = tempfile::Builder::new()
            .prefix("crewai-sandbox-")
            .tempdir()
            .map_err(SandboxError::io(
                "create a scratch folder in",
                &std::env::temp_dir(),
            ))?;
        let workspace = Workspace { root };
        for dir in [workspace.scratch(), workspace.tmp(), workspace.inputs()] {
            std::fs::create_dir(&dir).map_err(SandboxError::io("create", &dir))?;
        }
        copy_inputs(inputs, &workspace.inputs())?;
        Ok(workspace)
    }

    pub(crate) fn scratch(&self) -> PathBuf {
        self.root.path().join("scratch")
    }

    pub(crate) fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    pub(crate) fn inputs(&self) -> PathBuf {
        self.root.path().join("inputs")
    }

    /// A place for the runner's own files (the seccomp programs), never shown to the code.
    pub(crate) fn private(&self) -> &Path {
        self.root.path()
    }

    /// The regular files the code left in the scratch folder (blocking).
    pub(crate) fn artifacts(
        &self,
        budget: u64,
    ) -> Result<(Vec<Artifact>, Vec<String>), SandboxError> {
        collect_artifacts(&self.scratch(), budget)
    }
}

/// Copies each granted input into `dir` under its file name; only regular files are granted.
fn copy_inputs(inputs: &[PathBuf], dir: &Path) -> Result<(), SandboxError> {
    for input in inputs {
        let name = input.file_name().ok_or_else(|| SandboxError::Io {
            action: "grant",
            path: input.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        })?;
        let metadata = std::fs::metadata(input).map_err(SandboxError::io("read", input))?;
        if !metadata.is_file() {
            return Err(SandboxError::Io {
                action: "grant",
                path: input.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        let target = dir.join(name);
        std::fs::copy(input, &target).map_err(SandboxError::io("copy", input))?;
    }
    Ok(())
}

/// The regular files under `scratch` (never following a symlink the code made), up to
/// `budget` bytes in all; the rest are named as skipped.
fn collect_artifacts(
    scratch: &Path,
    budget: u64,
) -> Result<(Vec<Artifact>, Vec<String>), SandboxError> {
    let mut artifacts = Vec::new();
    let mut skipped = Vec::new();
    let mut used = 0u64;
    let mut pending = vec![scratch.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(SandboxError::io("list", &dir))?;
        for entry in entries {
            let entry = entry.map_err(SandboxError::io("list", &dir))?;
            let path = entry.path();
            let relative = path
                .strip_prefix(scratch)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            let metadata =
                std::fs::symlink_metadata(&path).map_err(SandboxError::io("read", &path))?;
            if metadata.is_dir() {
                pending.push(path);
            } else if metadata.is_file() && used + metadata.len() <= budget {
                used += metadata.len();
                let bytes = std::fs::read(&path).map_err(SandboxError::io("read", &path))?;
                artifacts.push(Artifact {
                    path: relative,
                    bytes,
                });
            } else {
                skipped.push(relative);
            }
        }
    }
    artifacts.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort();
    Ok((artifacts, skipped))
}
