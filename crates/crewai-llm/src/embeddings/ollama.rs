//! Ollama's `/api/embed`.

use serde_json::{Value, json};

use super::client::{EmbeddingApi, HttpEmbedder, reply_array, vector};
use crate::adapter_support;
use crate::error::LlmError;

/// The default Ollama embedding model.
pub const OLLAMA_DEFAULT_MODEL: &str = "nomic-embed-text";
/// Where Ollama listens unless `OLLAMA_HOST` says otherwise.
pub const OLLAMA_DEFAULT_HOST: &str = "http://localhost:11434";

/// The `/api/embed` request and reply.
#[derive(Debug, Clone, Default)]
pub struct OllamaEmbeddings;

/// A client of Ollama's `/api/embed`.
pub type OllamaEmbedder = HttpEmbedder<OllamaEmbeddings>;

impl EmbeddingApi for OllamaEmbeddings {
    /// Texts per request, to keep each one well inside the timeout.
    const BATCH: usize = 256;

    fn body(&self, model: &str, dimensions: Option<usize>, batch: &[String]) -> Value {
        let mut body = json!({"model": model, "input": batch});
        if let Some(dimensions) = dimensions {
            body["dimensions"] = json!(dimensions);
        }
        body
    }

    fn vectors(&self, provider: &str, reply: &Value) -> Result<Vec<Vec<f32>>, LlmError> {
        reply_array(provider, reply, "embeddings")?
            .iter()
            .map(|e| vector(provider, e))
            .collect()
    }

    fn prompt_tokens(&self, reply: &Value) -> Option<u64> {
        reply.get("prompt_eval_count").and_then(Value::as_u64)
    }
}

impl HttpEmbedder<OllamaEmbeddings> {
    /// `host` like `http://localhost:11434` (a scheme-less `0.0.0.0:11434`, as `OLLAMA_HOST`
    /// often holds, and a trailing `/api` or `/v1` are accepted).
    pub fn new(model: &str, host: &str) -> Result<Self, LlmError> {
        let host = if host.contains("://") {
            host.to_string()
        } else {
            format!("http://{host}")
        };
        let host = adapter_support::trim_base(&host);
        let host = ["/api/embed", "/api/embeddings", "/api", "/v1"]
            .iter()
            .find_map(|s| host.strip_suffix(s))
            .unwrap_or(&host);
        HttpEmbedder::with_api(
            OllamaEmbeddings,
            "ollama",
            model,
            "OLLAMA_API_KEY",
            format!("{host}/api/embed"),
            Vec::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_hosts_are_normalised() {
        assert_eq!(
            OllamaEmbedder::new("m", "0.0.0.0:11434").unwrap().url(),
            "http://0.0.0.0:11434/api/embed"
        );
        assert_eq!(
            OllamaEmbedder::new("m", "http://h:1/api/").unwrap().url(),
            "http://h:1/api/embed"
        );
    }
}
