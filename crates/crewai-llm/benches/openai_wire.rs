//! Micro-benchmarks of the OpenAI wire format: encoding a chat request and decoding a completion,
//! with the benchmark crew's shapes (a tool offered, a tool call answered).
//! Run: `cargo bench -p crewai-llm --bench openai_wire`.

use crewai_llm::openai::{OpenAiClient, parse_completion, parse_completion_bytes};
use crewai_llm::{LlmConfig, LlmRequest, Message, ToolDefinition};
use divan::{Bencher, black_box};
use serde_json::json;

fn main() {
    divan::main();
}

fn researcher_request() -> LlmRequest {
    let system = "You are Rust async runtimes Senior Researcher. You are a meticulous researcher who always checks \
the length of what you collected before handing it on.\n\nYour personal goal is: Collect the key facts about Rust async runtimes";
    let user = "Current Task: Research Rust async runtimes. Write short notes with the most relevant facts, then use \
the word_counter tool once to count the words in your notes.\n\nThis is the expected criteria for your final answer: \
Research notes about Rust async runtimes (a few sentences) and their word count.";
    let tool = ToolDefinition {
        name: "word_counter".to_string(),
        description:
            "Counts the words (whitespace-separated tokens) in a text and returns the count."
                .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {"text": {"type": "string", "title": "Text", "description": "The text whose words should be counted."}},
            "required": ["text"],
            "additionalProperties": false
        }),
        strict: true,
    };
    LlmRequest::new(vec![Message::system(system), Message::user(user)]).with_tools(vec![tool])
}

fn researcher_client() -> OpenAiClient {
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url("http://127.0.0.1:1/v1")
        .with_api_key("x");
    match OpenAiClient::openai(&config, "gpt-4o-mini") {
        Ok(client) => client,
        Err(error) => panic!("client for the benchmark: {error}"),
    }
}

/// The body bytes as a call sends them: the typed request written straight out.
#[divan::bench]
fn encode_request_bytes(bencher: Bencher) {
    let client = researcher_client();
    let request = researcher_request();
    bencher.bench_local(|| client.request_bytes(black_box(&request), false));
}

#[divan::bench]
fn encode_request(bencher: Bencher) {
    let client = researcher_client();
    let request = researcher_request();
    bencher.bench_local(|| serde_json::to_vec(&client.request_body(black_box(&request), false)));
}

const TOOL_CALL_RESPONSE: &str = r#"{"id":"chatcmpl-0123456789abcdef01234567","object":"chat.completion","created":1764579600,"model":"gpt-4o-mini","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_0123456789abcdef","type":"function","function":{"name":"word_counter","arguments":"{\"text\": \"x\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":160,"completion_tokens":4,"total_tokens":164,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#;
const TEXT_RESPONSE: &str = r#"{"id":"chatcmpl-0123456789abcdef01234567","object":"chat.completion","created":1764579600,"model":"gpt-4o-mini","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":"ANSWER 733eb2f3","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":4,"total_tokens":254,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#;

/// Bytes off the wire to an `LlmResponse`, as a call reads them (typed, no `Value` between).
fn decode_bytes(body: &str) -> Option<crewai_llm::LlmResponse> {
    parse_completion_bytes("openai", black_box(body.as_bytes())).ok()
}

#[divan::bench]
fn decode_tool_call_response_bytes() -> Option<crewai_llm::LlmResponse> {
    decode_bytes(TOOL_CALL_RESPONSE)
}

#[divan::bench]
fn decode_text_response_bytes() -> Option<crewai_llm::LlmResponse> {
    decode_bytes(TEXT_RESPONSE)
}

/// Bytes off the wire to a `Value`, then to an `LlmResponse`.
fn decode(body: &str) -> Option<crewai_llm::LlmResponse> {
    let value: serde_json::Value = serde_json::from_slice(black_box(body.as_bytes())).ok()?;
    parse_completion("openai", &value).ok()
}

#[divan::bench]
fn decode_tool_call_response() -> Option<crewai_llm::LlmResponse> {
    decode(TOOL_CALL_RESPONSE)
}

#[divan::bench]
fn decode_text_response() -> Option<crewai_llm::LlmResponse> {
    decode(TEXT_RESPONSE)
}
