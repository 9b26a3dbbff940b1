//! Errors of project loading: each points at a file, a line and a field.

use std::fmt;
use std::path::PathBuf;

use crate::source::SourceFile;

/// One problem found in a project, shown as `file:line: message; hint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, relative to the project (`config/tasks.yaml`).
    pub file: String,
    /// 1-based line, when the problem is at a specific place.
    pub line: Option<usize>,
    /// What is wrong, naming the agent/task and field.
    pub message: String,
    /// What to do about it (`did you mean 'writer'?`).
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(file: &SourceFile, line: Option<usize>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.display.clone(),
            line,
            message: message.into(),
            hint: None,
        }
    }

    /// A problem that belongs to a file but no single line of it.
    pub fn in_file(file: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.into(),
            line: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message)?,
            None => write!(f, "{}: {}", self.file, self.message)?,
        }
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

/// Everything that can stop a project from loading, validating or building. The variants that
/// wrap a lower-level error say what failed at the project's level and keep that error as their
/// source (render the whole chain with `crewai_llm::error_chain`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectError {
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The folder holds no project in a layout we know.
    #[error(
        "{} holds no CrewAI project: expected config/agents.yaml and config/tasks.yaml (classic layout) or crew.jsonc with agents/*.jsonc",
        .0.display()
    )]
    NotAProject(PathBuf),
    /// One or more problems in the project files, each with file and line.
    #[error("{}", Diagnostics(.0))]
    Invalid(Vec<Diagnostic>),
    /// A model client could not be created for an agent or the manager.
    #[error("{context}: the model client cannot be created")]
    Llm {
        context: String,
        #[source]
        source: crewai_llm::LlmError,
    },
    /// An agent the caller asked for is not in the project.
    #[error("agent '{key}': is not defined (defined agents: {})", .defined.join(", "))]
    UnknownAgent { key: String, defined: Vec<String> },
    /// The engine refused the agent, task, crew or flow built from the files.
    #[error("{context} cannot be built")]
    Build {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ProjectError {
    /// The engine refused what `context` names (`crew 'research' (config/crew.yaml)`).
    pub(crate) fn build(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ProjectError::Build {
            context: context.into(),
            source: Box::new(source),
        }
    }
}

impl ProjectError {
    /// The problems found in the files, if that is what this error is.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ProjectError::Invalid(list) => list,
            _ => &[],
        }
    }
}

struct Diagnostics<'a>(&'a [Diagnostic]);

impl fmt::Display for Diagnostics<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, diagnostic) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{diagnostic}")?;
        }
        Ok(())
    }
}

/// The nearest of `candidates` to a misspelt `name`, if one is close enough to be a likely typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (c, strsim::jaro_winkler(&lower, &c.to_lowercase())))
        .filter(|(_, score)| *score >= 0.8)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// `did you mean 'x'?` for the nearest candidate, if any is close.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean '{c}'?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(closest("writter", ["writer", "researcher"]), Some("writer"));
        assert_eq!(closest("Writer", ["writer"]), Some("writer"));
        assert_eq!(closest("zzz", ["writer", "researcher"]), None);
    }

    #[test]
    fn renders_file_line_message_and_hint() {
        let d = Diagnostic {
            file: "config/tasks.yaml".into(),
            line: Some(12),
            message: "bad".into(),
            hint: Some("did you mean 'x'?".into()),
        };
        assert_eq!(
            d.to_string(),
            "config/tasks.yaml:12: bad; did you mean 'x'?"
        );
        let e = ProjectError::Invalid(vec![
            d.clone(),
            Diagnostic::in_file("config/crew.yaml", "worse"),
        ]);
        assert_eq!(
            e.to_string(),
            "config/tasks.yaml:12: bad; did you mean 'x'?\nconfig/crew.yaml: worse"
        );
    }
}
