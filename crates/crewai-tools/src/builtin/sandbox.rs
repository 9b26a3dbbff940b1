//! Keeping file tools inside their root directory.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::tool::ToolError;

/// A root directory and the rules for paths a model names under it: relative paths only below
/// it, absolute paths only if they are inside it, no `..`, and no symbolic link leading out.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        Sandbox { root: root.into() }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The root, with symbolic links resolved.
    pub(crate) fn canonical_root(&self) -> Result<PathBuf, ToolError> {
        self.root.canonicalize().map_err(|error| {
            ToolError::caused(
                format!(
                    "the tool's root directory {} cannot be used",
                    self.root.display()
                ),
                error,
            )
        })
    }

    /// The path relative to the root, after the lexical checks.
    fn relative(&self, requested: &str, canonical_root: &Path) -> Result<PathBuf, ToolError> {
        let requested = requested.trim();
        if requested.is_empty() {
            return Err(ToolError::InvalidArguments(
                "the path is empty: give a path inside the allowed directory".into(),
            ));
        }
        let path = Path::new(requested);
        if path
            .components()
            .any(|component| component == Component::ParentDir)
        {
            return Err(ToolError::InvalidArguments(format!(
                "the path '{requested}' contains '..': only paths inside the allowed directory can be used"
            )));
        }
        if path.is_absolute() {
            let inside = path
                .strip_prefix(canonical_root)
                .or_else(|_| path.strip_prefix(&self.root))
                .map_err(|_| outside(requested))?;
            return Ok(inside.to_path_buf());
        }
        Ok(path
            .components()
            .filter(|component| *component != Component::CurDir)
            .collect())
    }

    /// An existing path inside the root, symbolic links resolved.
    pub(crate) fn existing(&self, requested: &str) -> Result<PathBuf, ToolError> {
        let canonical_root = self.canonical_root()?;
        let relative = self.relative(requested, &canonical_root)?;
        let candidate = canonical_root.join(&relative);
        let resolved = candidate
            .canonicalize()
            .map_err(|error| match error.kind() {
                io::ErrorKind::NotFound if candidate.symlink_metadata().is_ok() => {
                    ToolError::Failed(format!(
                        "'{requested}' is a symbolic link whose target does not exist"
                    ))
                }
                io::ErrorKind::NotFound => {
                    ToolError::Failed(format!("'{requested}' does not exist"))
                }
                _ => ToolError::caused(format!("'{requested}' cannot be accessed"), error),
            })?;
        if !resolved.starts_with(&canonical_root) {
            return Err(outside(requested));
        }
        Ok(resolved)
    }

    /// A path inside the root that may not exist yet: its deepest existing ancestor is resolved
    /// and checked, and what follows it contains no links (it does not exist yet).
    pub(crate) fn creatable(&self, requested: &str) -> Result<PathBuf, ToolError> {
        let canonical_root = self.canonical_root()?;
        let relative = self.relative(requested, &canonical_root)?;
        let candidate = canonical_root.join(&relative);
        if candidate.symlink_metadata().is_ok() {
            return self.existing(requested);
        }
        let mut existing = candidate.as_path();
        let mut missing = Vec::new();
        while existing.symlink_metadata().is_err() {
            let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                return Err(outside(requested));
            };
            missing.push(name.to_os_string());
            existing = parent;
        }
        let mut resolved = existing.canonicalize().map_err(|error| {
            ToolError::caused(format!("'{requested}' cannot be accessed"), error)
        })?;
        if !resolved.starts_with(&canonical_root) {
            return Err(outside(requested));
        }
        resolved.extend(missing.iter().rev());
        Ok(resolved)
    }

    /// How a resolved path is shown to the model: relative to the root.
    pub(crate) fn display(&self, resolved: &Path) -> String {
        let shown = self
            .canonical_root()
            .ok()
            .and_then(|root| resolved.strip_prefix(root).ok().map(Path::to_path_buf))
            .unwrap_or_else(|| resolved.to_path_buf());
        let text = shown.display().to_string();
        if text.is_empty() {
            ".".to_string()
        } else {
            text
        }
    }
}

fn outside(requested: &str) -> ToolError {
    ToolError::InvalidArguments(format!(
        "'{requested}' is outside the allowed directory: use a path relative to it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let sandbox = Sandbox::new(dir.path());
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(sandbox.existing("a.txt").unwrap(), root.join("a.txt"));
        assert_eq!(sandbox.existing("./a.txt").unwrap(), root.join("a.txt"));
        assert_eq!(
            sandbox
                .existing(root.join("a.txt").to_str().unwrap())
                .unwrap(),
            root.join("a.txt")
        );
        assert!(
            sandbox
                .existing("../a.txt")
                .unwrap_err()
                .to_string()
                .contains("'..'")
        );
        assert!(
            sandbox
                .existing("/etc/passwd")
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        assert!(
            sandbox
                .existing("missing.txt")
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        assert!(sandbox.existing("  ").is_err());
        assert_eq!(
            sandbox.creatable("new/dir/b.txt").unwrap(),
            root.join("new/dir/b.txt")
        );
        assert_eq!(sandbox.display(&root.join("new/b.txt")), "new/b.txt");
        assert_eq!(sandbox.display(&root), ".");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_cannot_lead_out() {
        let outside_dir = tempfile::tempdir().unwrap();
        std::fs::write(outside_dir.path().join("secret.txt"), "secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside_dir.path(), dir.path().join("escape")).unwrap();
        std::os::unix::fs::symlink(
            outside_dir.path().join("secret.txt"),
            dir.path().join("link.txt"),
        )
        .unwrap();
        let sandbox = Sandbox::new(dir.path());
        assert!(
            sandbox
                .existing("escape/secret.txt")
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        assert!(
            sandbox
                .existing("link.txt")
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        assert!(
            sandbox
                .creatable("escape/new.txt")
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        assert!(
            sandbox
                .creatable("link.txt")
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
    }

    #[test]
    fn a_missing_root_is_reported() {
        let sandbox = Sandbox::new("/definitely/not/a/real/root");
        assert!(
            sandbox
                .existing("a")
                .unwrap_err()
                .to_string()
                .contains("root directory")
        );
    }
}
