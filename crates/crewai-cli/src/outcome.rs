//! How a command fails: the message and the exit code (1 run error, 2 usage/config error).

use crewai_project::ProjectError;

/// A failed command.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    /// The run itself failed (a model or tool error, a task that could not finish).
    pub fn run(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: 1, error: error.into() }
    }

    /// The command, the project files or the environment are wrong; nothing ran.
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: 2, error: error.into() }
    }

    pub fn not_supported(what: &str) -> Self {
        Failure::config(anyhow::anyhow!("{what} is not supported yet"))
    }

    /// The message shown on stderr: project problems one per line, others with their causes.
    pub fn render(&self) -> String {
        if let Some(ProjectError::Invalid(list)) = self.error.downcast_ref::<ProjectError>() {
            let mut out = String::new();
            for diagnostic in list {
                out.push_str(&format!("error: {diagnostic}\n"));
            }
            out.push_str(&format!("{} problem{} found; nothing was run", list.len(), if list.len() == 1 { "" } else { "s" }));
            return out;
        }
        format!("error: {:#}", self.error)
    }
}

/// Project problems (files, tools, models that cannot be set up) are configuration errors.
impl From<ProjectError> for Failure {
    fn from(err: ProjectError) -> Self {
        Failure::config(err)
    }
}
