//! Token counts of calls not made yet: what a budget check and a token rate limit count before
//! the provider reports the real usage.
//!
//! A model whose tokenizer tiktoken knows (OpenAI's: `gpt-4o`, `gpt-4.1`, `o3`, `gpt-3.5-turbo`,
//! the `text-embedding-*` models, ...) is counted with it; any other is estimated at four bytes a
//! token, the rule of thumb for English text that providers quote.

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::Tokenizer;

use crate::types::LlmRequest;

/// Bytes of text per token where no tokenizer is known.
const BYTES_PER_TOKEN: u64 = 4;

/// The tokenizer of `model` (with or without its provider prefix: `openai/gpt-4o-mini`), when
/// tiktoken knows it. Each table is parsed once per process, on first use, by tiktoken-rs.
fn tokenizer(model: &str) -> Option<&'static CoreBPE> {
    let name = model.rsplit('/').next().unwrap_or(model);
    Some(match tiktoken_rs::tokenizer::get_tokenizer(name)? {
        Tokenizer::O200kHarmony => tiktoken_rs::o200k_harmony_singleton(),
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        Tokenizer::P50kBase => tiktoken_rs::p50k_base_singleton(),
        Tokenizer::P50kEdit => tiktoken_rs::p50k_edit_singleton(),
        Tokenizer::R50kBase | Tokenizer::Gpt2 => tiktoken_rs::r50k_base_singleton(),
    })
}

/// The tokens of `texts` for `model`: counted with its tokenizer when one is known, else
/// estimated from their length.
///
/// ```
/// use crewai_llm::tokens::estimate_text_tokens;
/// // gpt-4o's tokenizer reads "hello world" as two tokens.
/// assert_eq!(estimate_text_tokens("openai/gpt-4o", ["hello world"]), 2);
/// // No tokenizer is known for this model: 11 bytes at four a token.
/// assert_eq!(estimate_text_tokens("anthropic/claude-sonnet-4-5", ["hello world"]), 3);
/// ```
pub fn estimate_text_tokens<'t>(model: &str, texts: impl IntoIterator<Item = &'t str>) -> u64 {
    match tokenizer(model) {
        Some(bpe) => texts
            .into_iter()
            .map(|text| bpe.encode_ordinary(text).len() as u64)
            .sum(),
        None => texts
            .into_iter()
            .map(|text| text.len() as u64)
            .sum::<u64>()
            .div_ceil(BYTES_PER_TOKEN),
    }
}

/// The prompt of `request` to `model` in tokens (messages and tool definitions).
pub fn estimate_prompt_tokens(model: &str, request: &LlmRequest) -> u64 {
    let messages: Vec<String> = request.messages.iter().map(|m| m.text()).collect();
    let schemas: Vec<String> = request
        .tools
        .iter()
        .map(|t| t.parameters.to_string())
        .collect();
    let texts = messages.iter().chain(&schemas).map(String::as_str).chain(
        request
            .tools
            .iter()
            .flat_map(|t| [t.name.as_str(), t.description.as_str()]),
    );
    estimate_text_tokens(model, texts)
}

/// The tokens a call may use, reserved on a token rate limit before it is made: the estimated
/// prompt plus the reply's `max_tokens`.
pub fn estimate_tokens(model: &str, request: &LlmRequest) -> u64 {
    estimate_prompt_tokens(model, request) + request.options.max_tokens.map(u64::from).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Message, ToolDefinition};

    #[test]
    fn openai_models_are_counted_and_others_estimated() {
        let text = "The quick brown fox jumps over the lazy dog.";
        assert_eq!(estimate_text_tokens("gpt-4o-mini", [text]), 10);
        assert_eq!(estimate_text_tokens("azure/gpt-35-turbo-16k", [text]), 10);
        assert_eq!(estimate_text_tokens("text-embedding-3-small", [text]), 10);
        assert_eq!(estimate_text_tokens("ollama/llama3.2", [text]), 11);
        assert_eq!(estimate_text_tokens("gpt-4o", std::iter::empty()), 0);
    }

    #[test]
    fn a_prompt_counts_its_messages_tools_and_reply_budget() {
        let mut request = LlmRequest::new(vec![Message::system("12345678"), Message::user("1234")]);
        assert_eq!(estimate_prompt_tokens("m", &request), 3);
        request.tools.push(ToolDefinition {
            name: "abcd".into(),
            description: "abcd".into(),
            parameters: serde_json::json!({}),
            strict: false,
        });
        // 12 bytes of messages, 4 + 4 + 2 for the tool's name, description and `{}`.
        assert_eq!(estimate_prompt_tokens("m", &request), 6);
        request.options.max_tokens = Some(100);
        assert_eq!(estimate_tokens("m", &request), 106);
    }
}
