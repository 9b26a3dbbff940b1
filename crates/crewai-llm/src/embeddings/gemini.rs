//! Gemini's `:batchEmbedContents`.

use serde_json::{Value, json};

use super::client::{EmbeddingApi, HttpEmbedder, reply_array, vector};
use crate::error::LlmError;

/// The default Gemini embedding model.
pub const GEMINI_DEFAULT_MODEL: &str = "gemini-embedding-001";

/// The `:batchEmbedContents` request and reply.
#[derive(Debug, Clone, Default)]
pub struct GeminiEmbeddings {
    /// What the vectors are for (`taskType`).
    task_type: Option<String>,
}

/// A client of Gemini's `:batchEmbedContents`.
pub type GeminiEmbedder = HttpEmbedder<GeminiEmbeddings>;

impl EmbeddingApi for GeminiEmbeddings {
    /// Gemini takes at most this many texts per batch request.
    const BATCH: usize = 100;

    fn body(&self, model: &str, dimensions: Option<usize>, batch: &[String]) -> Value {
        let requests: Vec<Value> = batch
            .iter()
            .map(|text| {
                let mut request =
                    json!({"model": format!("models/{model}"), "content": {"parts": [{"text": text}]}});
                if let Some(dimensions) = dimensions {
                    request["outputDimensionality"] = json!(dimensions);
                }
                if let Some(task) = &self.task_type {
                    request["taskType"] = json!(task);
                }
                request
            })
            .collect();
        json!({ "requests": requests })
    }

    fn vectors(&self, provider: &str, reply: &Value) -> Result<Vec<Vec<f32>>, LlmError> {
        reply_array(provider, reply, "embeddings")?
            .iter()
            .map(|e| vector(provider, e.get("values").unwrap_or(&Value::Null)))
            .collect()
    }
}

impl HttpEmbedder<GeminiEmbeddings> {
    /// `model` with or without `models/`; `base_url` defaults to Google's endpoint.
    pub fn new(model: &str, api_key: String, base_url: Option<&str>) -> Result<Self, LlmError> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        let root = crate::gemini::api_root(base_url);
        HttpEmbedder::with_api(
            GeminiEmbeddings::default(),
            "gemini",
            model,
            "GEMINI_API_KEY or GOOGLE_API_KEY",
            format!("{root}/models/{model}:batchEmbedContents"),
            vec![("x-goog-api-key".to_string(), api_key)],
        )
    }

    /// What the vectors are for (`RETRIEVAL_DOCUMENT`, `RETRIEVAL_QUERY`, `SEMANTIC_SIMILARITY`, ...).
    pub fn with_task_type(mut self, task_type: impl Into<String>) -> Self {
        self.api_mut().task_type = Some(task_type.into());
        self
    }
}
