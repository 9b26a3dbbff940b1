//! Context window sizes of known models (overridable with `context_window_size` in the config).
//! Each provider declares the windows of its own models in its descriptor
//! ([`crate::providers`]); this is the lookup over every built-in provider's table, for clients
//! that were given no size.
//!
//! ```
//! use crewai_llm::context_window::context_window_size;
//! assert_eq!(context_window_size("openai/gpt-4o-mini"), 128_000);
//! assert_eq!(context_window_size("gpt-4.1-mini-2025-04-14"), 1_047_576);
//! ```

use crate::litellm_models::LitellmModels;
use crate::providers::ProviderRegistry;

/// The size used for a model no table knows.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 8_192;

/// The context window of `model` (with or without a `provider/` prefix), or
/// [`DEFAULT_CONTEXT_WINDOW`] when unknown.
pub fn context_window_size(model: &str) -> u64 {
    known_context_window(model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The context window of `model` if a built-in provider declares it (the longest matching
/// model-name prefix over all of them wins), else LiteLLM's `max_input_tokens` for it
/// ([`crate::litellm_models`]).
pub fn known_context_window(model: &str) -> Option<u64> {
    ProviderRegistry::builtin_ref()
        .known_context_window(model)
        .or_else(|| LitellmModels::get().context_window(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(context_window_size("gpt-4"), 8_192);
        assert_eq!(context_window_size("gpt-4o-2024-08-06"), 128_000);
        assert_eq!(context_window_size("o1-mini"), 128_000);
        assert_eq!(context_window_size("anthropic/claude-sonnet-4-5"), 200_000);
        assert_eq!(context_window_size("ollama/llama3.1:8b"), 131_072);
        assert_eq!(context_window_size("gemini-1.5-pro-002"), 2_097_152);
        assert_eq!(context_window_size("deepseek/deepseek-chat"), 128_000);
        assert_eq!(context_window_size("something-new"), DEFAULT_CONTEXT_WINDOW);
    }
}
