//! Context window sizes of common models (overridable with `context_window_size` in the config).
//!
//! ```
//! use crewai_llm::context_window::context_window_size;
//! assert_eq!(context_window_size("openai/gpt-4o-mini"), 128_000);
//! assert_eq!(context_window_size("gpt-4.1-mini-2025-04-14"), 1_047_576);
//! ```

/// The size used for a model this table does not know.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 8_192;

/// Model-name prefixes and their windows; the longest matching prefix wins.
const WINDOWS: &[(&str, u64)] = &[
    // OpenAI
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3-mini", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Anthropic
    ("claude-3", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-", 200_000),
    // Google
    ("gemini-2.5", 1_048_576),
    ("gemini-2.0", 1_048_576),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-flash", 1_048_576),
    ("gemini-", 1_048_576),
    // Others commonly reached through OpenAI-compatible servers
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    ("llama-3.1", 131_072),
    ("llama-3.3", 131_072),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3", 8_192),
    ("mixtral-8x7b", 32_768),
    ("qwen2.5", 32_768),
    ("qwen3", 40_960),
];

/// The context window of `model` (with or without a `provider/` prefix), or
/// [`DEFAULT_CONTEXT_WINDOW`] when unknown.
pub fn context_window_size(model: &str) -> u64 {
    known_context_window(model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The context window of `model` if this table knows it.
pub fn known_context_window(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    WINDOWS
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, size)| *size)
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
        assert_eq!(context_window_size("something-new"), DEFAULT_CONTEXT_WINDOW);
    }
}
