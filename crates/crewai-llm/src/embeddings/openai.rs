//! OpenAI's `/embeddings` endpoint, and the servers that copy it (Azure OpenAI deployments,
//! OpenRouter, vLLM, LM Studio, ...).

use serde_json::{Value, json};

use super::client::{EmbeddingApi, HttpEmbedder, reply_array, vector};
use crate::adapter_support;
use crate::error::LlmError;

/// OpenAI's own endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The default OpenAI embedding model (CrewAI's knowledge default).
pub const OPENAI_DEFAULT_MODEL: &str = "text-embedding-3-small";
/// The Azure OpenAI API version used when none is configured.
pub const AZURE_DEFAULT_API_VERSION: &str = "2024-10-21";

/// The `/embeddings` request and reply.
#[derive(Debug, Clone)]
pub struct OpenAiEmbeddings {
    /// Azure takes the model from the deployment in the URL.
    send_model: bool,
}

/// A client of OpenAI's `/embeddings` or a server that copies it.
pub type OpenAiEmbedder = HttpEmbedder<OpenAiEmbeddings>;

impl EmbeddingApi for OpenAiEmbeddings {
    /// OpenAI accepts at most this many inputs per request.
    const BATCH: usize = 2048;

    fn body(&self, model: &str, dimensions: Option<usize>, batch: &[String]) -> Value {
        let mut body = json!({"input": batch, "encoding_format": "float"});
        if self.send_model {
            body["model"] = json!(model);
        }
        if let Some(dimensions) = dimensions {
            body["dimensions"] = json!(dimensions);
        }
        body
    }

    fn vectors(&self, provider: &str, reply: &Value) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut indexed = reply_array(provider, reply, "data")?
            .iter()
            .enumerate()
            .map(|(position, item)| {
                let index = item
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(position, |i| i as usize);
                let embedding = vector(provider, item.get("embedding").unwrap_or(&Value::Null))?;
                Ok((index, embedding))
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        // The order of `data` is not promised; `index` is.
        indexed.sort_by_key(|(index, _)| *index);
        Ok(indexed.into_iter().map(|(_, v)| v).collect())
    }

    fn prompt_tokens(&self, reply: &Value) -> Option<u64> {
        reply
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
    }
}

fn bearer(key: &str) -> (String, String) {
    ("authorization".to_string(), format!("Bearer {key}"))
}

impl HttpEmbedder<OpenAiEmbeddings> {
    /// OpenAI, or another server at `base_url` (the part before `/embeddings`, such as
    /// `https://api.openai.com/v1`).
    pub fn openai(model: &str, api_key: String, base_url: Option<&str>) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(base_url.unwrap_or(OPENAI_BASE_URL));
        Self::with_api(
            OpenAiEmbeddings { send_model: true },
            "openai",
            model,
            "OPENAI_API_KEY",
            format!("{base}/embeddings"),
            vec![bearer(&api_key)],
        )
    }

    /// Any OpenAI-compatible server; `api_key` is sent as a bearer token when given.
    pub fn compatible(
        provider: &str,
        model: &str,
        base_url: &str,
        api_key: Option<String>,
    ) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(base_url);
        Self::with_api(
            OpenAiEmbeddings { send_model: true },
            provider,
            model,
            "api_key",
            format!("{base}/embeddings"),
            api_key.iter().map(|k| bearer(k)).collect(),
        )
    }

    /// An Azure OpenAI deployment: `{endpoint}/openai/deployments/{deployment}/embeddings`.
    pub fn azure(
        deployment: &str,
        endpoint: &str,
        api_version: &str,
        api_key: String,
    ) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(endpoint);
        let base = base.strip_suffix("/openai").unwrap_or(&base);
        Self::with_api(
            OpenAiEmbeddings { send_model: false },
            "azure",
            deployment,
            "AZURE_API_KEY",
            format!("{base}/openai/deployments/{deployment}/embeddings?api-version={api_version}"),
            vec![("api-key".to_string(), api_key)],
        )
    }
}
