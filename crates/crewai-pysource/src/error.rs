//! What can go wrong reading a project's Python: a file that cannot be read or parsed (an
//! error), and constructs the reader cannot follow (each a [`PyDiagnostic`] at its line).

use std::fmt;
use std::path::PathBuf;

/// A file could not be read or parsed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PySourceError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Python that does not parse (as CPython would refuse it too).
    #[error("{}:{line}: invalid Python: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: invalid TOML", path.display())]
    Toml {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    /// `pyproject.toml` says this is a CrewAI project but no package folder holds its code.
    #[error("{}: [tool.crewai] project, but no package folder src/<name>/ was found (looked for: {})", pyproject.display(), looked_for.join(", "))]
    PackageNotFound {
        pyproject: PathBuf,
        looked_for: Vec<String>,
    },
}

/// How much a diagnostic matters: an error stops the project from loading, a warning does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One construct the reader could not follow, or followed with a caveat, at its file and line,
/// with what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyDiagnostic {
    pub severity: Severity,
    /// The file, as given to the reader (absolute when the reader was given absolute paths).
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    pub message: String,
    /// What to do (`write it in config/crew.yaml`).
    pub hint: Option<String>,
}

impl fmt::Display for PyDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}
