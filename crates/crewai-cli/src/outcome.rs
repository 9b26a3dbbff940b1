//! How a command fails: the message and the exit code (1 run error, 2 usage/config error, 130
//! interrupted by Ctrl-C).

use std::io::Write;

use crewai_project::ProjectError;

/// A failed command.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
    /// What to do next, printed on its own line after the error.
    pub hint: Option<String>,
}

impl Failure {
    /// The run itself failed (a model or tool error, a task that could not finish).
    pub fn run(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 1,
            error: error.into(),
            hint: None,
        }
    }

    /// The user stopped the run (Ctrl-C): the shell's code for SIGINT.
    pub fn interrupted(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 130,
            error: error.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The command, the project files or the environment are wrong; nothing ran.
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: error.into(),
            hint: None,
        }
    }

    /// Only the commands a build without the `local` feature lacks say this.
    #[cfg(not(feature = "local"))]
    pub fn not_supported(what: &str) -> Self {
        Failure::config(anyhow::anyhow!("{what} is not supported yet"))
    }

    /// The message shown on stderr: project problems one per line, others with their causes
    /// (`error: outer: cause: root`).
    pub fn render(&self) -> String {
        if let Some(ProjectError::Invalid(list)) = self.error.downcast_ref::<ProjectError>() {
            let mut out = String::new();
            for diagnostic in list {
                out.push_str(&format!("error: {diagnostic}\n"));
            }
            out.push_str(&format!(
                "{} problem{} found; nothing was run",
                list.len(),
                if list.len() == 1 { "" } else { "s" }
            ));
            return out;
        }
        // Every library error says only what failed at its level and keeps its cause as
        // `source()`, so the whole chain is printed: `outer: cause: root`.
        let message = format!("{:#}", self.error);
        match &self.hint {
            Some(hint) => format!("error: {message}\n{hint}"),
            None => format!("error: {message}"),
        }
    }
}

/// Project problems (files, tools, models that cannot be set up) are configuration errors.
impl From<ProjectError> for Failure {
    fn from(err: ProjectError) -> Self {
        Failure::config(err)
    }
}

/// Writes a line to stdout; a reader that went away (`| head`) is not an error.
pub fn print_out(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::run(
            anyhow::Error::new(err).context("cannot write to stdout"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("agent 'Waiter' timed out after 3s")]
    struct Root;

    #[derive(Debug, thiserror::Error)]
    #[error("task 'wait' failed")]
    struct Task {
        #[source]
        source: Root,
    }

    #[test]
    fn the_whole_chain_is_printed_outer_first() {
        let failure =
            Failure::run(anyhow::Error::new(Task { source: Root }).context("the run failed"));
        assert_eq!(
            failure.render(),
            "error: the run failed: task 'wait' failed: agent 'Waiter' timed out after 3s"
        );
    }

    #[test]
    fn the_hint_follows_on_its_own_line() {
        let failure = Failure::run(anyhow::Error::new(Root).context("the run failed"))
            .with_hint("resume with: crewai run --resume r1");
        assert_eq!(
            failure.render(),
            "error: the run failed: agent 'Waiter' timed out after 3s\nresume with: crewai run --resume r1"
        );
    }
}
