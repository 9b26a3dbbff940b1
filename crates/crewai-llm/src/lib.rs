//! # crewai-llm
//!
//! The model layer of crewai-rs: one [`Llm`] trait, real HTTP clients for the providers CrewAI
//! users have (OpenAI chat completions and Responses, Anthropic messages, Gemini, Vertex AI,
//! Azure OpenAI, IBM watsonx.ai, Ollama and any OpenAI-compatible server), and the layers that
//! make every call bounded: timeouts, retries with backoff and jitter that honour
//! `Retry-After`, fallback models, and shared rate limits.
//!
//! ## Layers
//!
//! Everything around a call that is not a provider's wire format is an [`LlmLayer`], and
//! [`LayeredLlm`] runs a model under a stack of them (outermost first). [`build_llm`] makes
//! `fallbacks → rate limit → retries → stop words → client` from a config; crewai-core adds the
//! run's own layers (hooks, budget, rate limit, events and usage) on top, and users can add
//! theirs. What a layer needs to know about a call travels in [`LlmRequest::extensions`].
//! See [`layer`] for the trait, the order and why the design is not tower's.
//!
//! ## Calling OpenAI with a tool
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::{build_llm, LlmConfig, LlmRequest, Message, ToolDefinition};
//! use serde_json::json;
//!
//! // Reads OPENAI_API_KEY (and OPENAI_BASE_URL if set); retries twice on 429/5xx.
//! let llm = build_llm(&LlmConfig::new("openai/gpt-4o-mini"))?;
//! let weather = ToolDefinition {
//!     name: "get_weather".into(),
//!     description: "Current weather of a city".into(),
//!     parameters: json!({
//!         "type": "object",
//!         "properties": {"city": {"type": "string"}},
//!         "required": ["city"],
//!         "additionalProperties": false
//!     }),
//!     strict: true,
//! };
//! let mut messages = vec![Message::user("What's the weather in Paris?")];
//! let reply = llm.call(LlmRequest::new(messages.clone()).with_tools(vec![weather.clone()])).await?;
//! messages.push(reply.to_message());
//! for call in &reply.tool_calls {
//!     // Run the tool with call.arguments, then hand its result back with the call's id.
//!     messages.push(Message::tool_result(&call.id, &call.name, "18°C and sunny"));
//! }
//! let answer = llm.call(LlmRequest::new(messages).with_tools(vec![weather])).await?;
//! println!("{} ({} tokens)", answer.content.unwrap_or_default(), answer.usage.total_tokens);
//! # Ok(()) }
//! ```
//!
//! ## The same with Anthropic
//!
//! Only the model string changes; the request and the reply are provider-neutral. Tool results go
//! back as `tool_result` blocks, and the system prompt and last user turn carry prompt-cache
//! breakpoints.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::{build_llm, LlmConfig, LlmRequest, Message, ToolDefinition};
//! use serde_json::json;
//!
//! // Reads ANTHROPIC_API_KEY.
//! let llm = build_llm(&LlmConfig::new("anthropic/claude-sonnet-4-5").with_max_tokens(1024))?;
//! let weather = ToolDefinition {
//!     name: "get_weather".into(),
//!     description: "Current weather of a city".into(),
//!     parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!     strict: false,
//! };
//! let question = vec![Message::system("You are a weather assistant."), Message::user("Weather in Oslo?")];
//! let reply = llm.call(LlmRequest::new(question.clone()).with_tools(vec![weather.clone()])).await?;
//! let mut messages = question;
//! messages.push(reply.to_message());
//! for call in &reply.tool_calls {
//!     messages.push(Message::tool_result(&call.id, &call.name, "-3°C, snow"));
//! }
//! let answer = llm.call(LlmRequest::new(messages).with_tools(vec![weather])).await?;
//! println!("{}", answer.content.unwrap_or_default());
//! # Ok(()) }
//! ```
//!
//! ## Testing without a network
//!
//! [`ScriptedLlm`] answers from a queue and records what it was asked; [`cassette`] records the
//! HTTP exchanges of a real run to a YAML file and replays them later, in order.

#[doc(hidden)]
#[macro_use]
pub mod setters;

mod access_token;
mod adapter_support;
pub mod anthropic;
pub mod bedrock;
pub mod budget;
pub mod cassette;
pub mod config;
pub mod context_window;
pub mod embeddings;
pub mod error;
pub mod extensions;
pub mod fallback;
pub mod gemini;
mod google_auth;
pub mod http;
pub mod layer;
pub mod litellm_models;
pub mod openai;
pub mod openai_responses;
pub mod pricing;
pub mod providers;
pub mod rate_limit;
pub mod retry;
pub mod router;
pub mod scripted;
pub mod stop_words;
pub mod tokens;
pub mod traits;
pub mod types;
pub mod watsonx;
pub mod wire;

pub use anthropic::AnthropicLlm;
pub use async_trait::async_trait;
pub use budget::{BudgetExceeded, BudgetLimit};
pub use config::{DEFAULT_MODEL, LlmConfig, OpenAiApi};
pub use context_window::context_window_size;
pub use embeddings::{Embedder, EmbedderConfig, EmbedderSettings, HashEmbedder, build_embedder};
pub use error::{LlmError, error_chain, looks_like_context_overflow};
pub use extensions::Extensions;
pub use fallback::FallbackLayer;
pub use gemini::GeminiLlm;
pub use layer::{LayeredLlm, LayeredLlmBuilder, LlmLayer, Next};
pub use openai::OpenAiClient;
pub use openai_responses::OpenAiResponsesClient;
pub use pricing::{ModelPrice, PriceTable, PriceTableError};
pub use providers::{Provider, ProviderDescriptor, ProviderFactory, ProviderRegistry};
pub use rate_limit::{Clock, RateLimitLayer, RateLimiter, TokioClock, VirtualClock};
pub use retry::{RetryLayer, RetryPolicy};
pub use router::{BuildOptions, LOCAL_PROVIDER, build_llm, build_llm_with, default_llm};
pub use scripted::ScriptedLlm;
pub use stop_words::StopWordsLayer;
pub use traits::{Llm, LlmStream, collect_stream};
pub use types::*;
