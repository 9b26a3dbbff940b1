//! Provider quirks become typed errors inside the adapters: each provider's real error body (a
//! code, a parameter, an error type, or for servers without codes the words they use) is served
//! by a local server, and the call fails with the typed variant callers match on
//! (`ToolsUnsupported`, `ContentFiltered`, `ContextLengthExceeded`, `RateLimited`, ...).

mod common;

use std::time::Duration;

use common::{call_error, hi, stream_error};
use crewai_llm::openai::Auth;
use crewai_llm::{
    AnthropicLlm, FinishReason, GeminiLlm, Llm, LlmConfig, LlmError, LlmRequest, Message,
    OpenAiClient, OpenAiResponsesClient, ToolDefinition,
};
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

fn config() -> LlmConfig {
    LlmConfig::new("m").with_timeout(5.0)
}

fn lookup() -> ToolDefinition {
    ToolDefinition {
        name: "lookup".into(),
        description: "Looks things up".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        strict: false,
    }
}

/// A request that offers a tool, as the executor's native loop sends it.
fn with_tools() -> LlmRequest {
    LlmRequest::new(vec![Message::user("find it")]).with_tools(vec![lookup()])
}

/// A server answering every POST with `status` and the JSON `body`.
async fn answering(status: u16, body: Value) -> MockServer {
    common::answering(common::json_status(status, &body)).await
}

/// A server answering every POST with these server-sent events.
async fn streaming(events: &[Value]) -> MockServer {
    common::answering(common::sse_reply(events)).await
}

/// The error a call of `request` fails with, by the client `client` makes for a server answering
/// `status` and `body`.
async fn error_of<L: Llm>(
    status: u16,
    body: Value,
    client: impl FnOnce(&MockServer) -> L,
    request: LlmRequest,
) -> LlmError {
    let server = answering(status, body).await;
    call_error(&client(&server), request).await
}

/// The error a stream of `request` fails with, by the client `client` makes for a server
/// streaming `events`.
async fn streamed_error_of<L: Llm>(
    events: &[Value],
    client: impl FnOnce(&MockServer) -> L,
    request: LlmRequest,
) -> LlmError {
    let server = streaming(events).await;
    stream_error(&client(&server), request).await
}

fn openai(server: &MockServer, model: &str) -> OpenAiClient {
    let config = config()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-test");
    OpenAiClient::openai(&config, model).expect("client builds")
}

fn compatible(server: &MockServer, provider: &str, model: &str) -> OpenAiClient {
    OpenAiClient::compatible(
        provider,
        model,
        &format!("{}/v1", server.uri()),
        Auth::None,
        "KEY",
        &config(),
    )
    .expect("client builds")
}

fn assert_tools_unsupported(error: &LlmError, provider: &str, model: &str) {
    assert_matches!(error, LlmError::ToolsUnsupported { provider: p, model: m, .. } if p == provider && m == model);
    assert!(error.is_tools_unsupported() && !error.is_retryable());
}

#[tokio::test]
async fn openai_refusing_the_tools_parameter_is_tools_unsupported() {
    // OpenAI's typed form: the parameter and the code name it.
    let error = error_of(400, json!({"error": {"message": "Unsupported parameter: 'tools' is not supported with this model.", "type": "invalid_request_error", "param": "tools", "code": "unsupported_parameter"}}), |s| openai(s, "o1-preview"), with_tools()).await;
    assert_tools_unsupported(&error, "openai", "o1-preview");
}

#[tokio::test]
async fn compatible_servers_that_refuse_tools_in_words_are_tools_unsupported() {
    // Ollama's own error shape: the error is a bare string.
    let error = error_of(
        400,
        json!({"error": "registry.ollama.ai/library/gemma:2b does not support tools"}),
        |s| compatible(s, "ollama", "gemma:2b"),
        with_tools(),
    )
    .await;
    assert_tools_unsupported(&error, "ollama", "gemma:2b");

    // vLLM without a tool parser: a top-level message and a numeric code.
    let error = error_of(400, json!({"object": "error", "message": "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set", "type": "BadRequestError", "param": null, "code": 400}), |s| compatible(s, "hosted_vllm", "qwen"), with_tools()).await;
    assert_tools_unsupported(&error, "hosted_vllm", "qwen");

    // OpenRouter with no provider serving tools for the model: a 404.
    let error = error_of(404, json!({"error": {"message": "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing", "code": 404}}), |s| compatible(s, "openrouter", "some/model"), with_tools()).await;
    assert_tools_unsupported(&error, "openrouter", "some/model");
}

#[tokio::test]
async fn other_invalid_requests_and_missing_models_keep_their_types() {
    let error = error_of(400, json!({"error": {"message": "Invalid value for 'temperature'.", "type": "invalid_request_error", "param": "temperature", "code": "invalid_value"}}), |s| openai(s, "gpt-4o"), with_tools()).await;
    assert_matches!(error, LlmError::InvalidRequest { status: 400, .. });
    assert!(!error.is_tools_unsupported());

    let error = error_of(
        404,
        json!({"error": "model \"llama9\" not found, try pulling it first"}),
        |s| compatible(s, "ollama", "llama9"),
        with_tools(),
    )
    .await;
    assert_matches!(error, LlmError::ModelNotFound { model, .. } if model == "llama9");
}

#[tokio::test]
async fn azure_content_filtering_is_content_filtered() {
    let azure = |server: &MockServer| {
        OpenAiClient::azure(
            &config(),
            "gpt-4o",
            &server.uri(),
            "2024-10-21",
            "azure-key".into(),
        )
        .expect("client builds")
    };
    let error = error_of(400, json!({"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
            "type": null, "param": "prompt", "code": "content_filter", "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {"hate": {"filtered": true, "severity": "high"}}}}}),
        azure, hi()).await;
    assert_matches!(error, LlmError::ContentFiltered { provider, message }
        if provider == "azure" && message.contains("content management policy"));
    assert!(!error.is_retryable());

    // A reply the filter cut short is still an answer, marked as filtered.
    let server = answering(
        200,
        json!({"id": "c", "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "content_filter", "message": {"role": "assistant", "content": "Partial"}}]}),
    )
    .await;
    let response = openai(&server, "gpt-4o")
        .call(hi())
        .await
        .expect("a filtered reply is an answer");
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
}

#[tokio::test]
async fn the_context_length_code_decides_without_the_usual_words() {
    let error = error_of(
        400,
        json!({"error": {"message": "Your request is over the limit for this model.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        |s| openai(s, "gpt-4o"),
        with_tools(),
    )
    .await;
    assert_matches!(error, LlmError::ContextLengthExceeded { .. });
    assert!(error.is_context_length());
}

#[tokio::test]
async fn errors_sent_as_stream_chunks_are_typed() {
    let started = json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Par"}}]});
    let error = streamed_error_of(
        &[
            started.clone(),
            json!({"error": {"message": "Output filtered by policy", "code": "content_filter"}}),
        ],
        |s| openai(s, "gpt-4o"),
        hi(),
    )
    .await;
    assert_matches!(error, LlmError::ContentFiltered { .. });

    let error = streamed_error_of(&[json!({"error": {"message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "code": 400}})], |s| compatible(s, "llamacpp", "local"), hi()).await;
    assert!(error.is_context_length(), "{error:?}");

    let error = streamed_error_of(
        &[
            started,
            json!({"error": {"message": "upstream went away", "type": "server_error"}}),
        ],
        |s| openai(s, "gpt-4o"),
        hi(),
    )
    .await;
    assert_matches!(error, LlmError::Server { status: 200, .. });
    assert!(error.is_retryable());
}

fn responses(server: &MockServer, model: &str) -> OpenAiResponsesClient {
    OpenAiResponsesClient::new(
        &config(),
        model,
        &format!("{}/v1", server.uri()),
        Auth::Bearer("sk-test".into()),
    )
    .expect("client builds")
}

#[tokio::test]
async fn the_responses_api_types_its_errors_too() {
    let error = error_of(400, json!({"error": {"message": "Unsupported parameter: 'tools' is not supported with this model.", "type": "invalid_request_error", "param": "tools", "code": "unsupported_parameter"}}), |s| responses(s, "o1-pro"), with_tools()).await;
    assert_tools_unsupported(&error, "openai", "o1-pro");

    let error = streamed_error_of(&[
        json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
        json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [],
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}),
    ], |s| responses(s, "gpt-4.1"), hi()).await;
    assert_matches!(error, LlmError::ContextLengthExceeded { .. });

    let error = streamed_error_of(&[json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": null, "sequence_number": 1})], |s| responses(s, "gpt-4.1"), hi()).await;
    assert_matches!(error, LlmError::RateLimited { .. });
    assert!(error.is_retryable());
}

fn claude(server: &MockServer) -> AnthropicLlm {
    AnthropicLlm::new(
        "claude-sonnet-4-5",
        "key".into(),
        Some(&server.uri()),
        &config(),
    )
    .expect("client builds")
}

#[tokio::test]
async fn anthropic_stream_errors_are_read_by_their_type() {
    let events: String = [
        json!({"type": "message_start", "message": {"id": "m", "model": "claude", "content": [], "usage": {"input_tokens": 1}}}),
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
    ]
    .iter()
    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or_default()))
    .collect();
    let server =
        common::answering(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream"))
            .await;
    let error = stream_error(&claude(&server), hi()).await;
    assert_matches!(error, LlmError::ContextLengthExceeded { .. });

    let error = error_of(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        claude,
        hi(),
    )
    .await;
    assert_matches!(error, LlmError::RateLimited { .. });
}

fn gemini(server: &MockServer, model: &str) -> GeminiLlm {
    GeminiLlm::new(model, "g-key".into(), Some(&server.uri()), &config()).expect("client builds")
}

fn google_error(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

#[tokio::test]
async fn gemini_errors_are_read_from_their_typed_details() {
    // Gemma on the Gemini API takes no function declarations.
    let error = error_of(
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "Function calling is not enabled for models/gemma-3-27b-it",
            json!([]),
        ),
        |s| gemini(s, "gemma-3-27b-it"),
        with_tools(),
    )
    .await;
    assert_tools_unsupported(&error, "gemini", "gemma-3-27b-it");

    // The wait is in a RetryInfo detail, not in the words.
    let error = error_of(429, google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            json!([
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generate_content_free_tier_requests"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
            ]),
        ), |s| gemini(s, "gemini-2.5-flash"), hi()).await;
    assert_matches!(error, LlmError::RateLimited { .. });
    assert_eq!(error.retry_after(), Some(Duration::from_secs(12)));

    // An invalid key is a 400 whose ErrorInfo reason says so.
    let error = error_of(400, google_error(
            400,
            "INVALID_ARGUMENT",
            "Invalid credentials.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
        ), |s| gemini(s, "gemini-2.5-flash"), hi()).await;
    assert_matches!(error, LlmError::Authentication { .. });

    // The same refusal sent as a stream chunk.
    let error = streamed_error_of(
        &[google_error(
            400,
            "INVALID_ARGUMENT",
            "Function calling is not enabled for models/gemma-3-4b-it",
            json!([]),
        )],
        |s| gemini(s, "gemma-3-4b-it"),
        with_tools(),
    )
    .await;
    assert_tools_unsupported(&error, "gemini", "gemma-3-4b-it");
}

mod bedrock {
    use super::*;
    use crewai_llm::bedrock::{BedrockAuth, BedrockLlm, BedrockRegion};
    use wiremock::Mock;
    use wiremock::matchers::method;

    const MODEL: &str = "amazon.titan-text-express-v1";

    async fn validation_error(message: &str) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(400)
                    .insert_header(
                        "x-amzn-errortype",
                        "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                    )
                    .set_body_raw(json!({"message": message}).to_string(), "application/json"),
            )
            .mount(&server)
            .await;
        server
    }

    fn client(server: &MockServer) -> BedrockLlm {
        BedrockLlm::new(
            MODEL,
            BedrockRegion::Named("us-east-1".into()),
            BedrockAuth::ApiKey("bedrock-key".into()),
            Some(&server.uri()),
            &config(),
        )
        .expect("client builds")
    }

    #[tokio::test]
    async fn validation_errors_are_read_by_what_they_say() {
        let server = validation_error("This model doesn't support tool use.").await;
        let error = call_error(&client(&server), with_tools()).await;
        assert_tools_unsupported(&error, "bedrock", MODEL);

        let server = validation_error("Input is too long for requested model.").await;
        let error = call_error(&client(&server), with_tools()).await;
        assert_matches!(error, LlmError::ContextLengthExceeded { .. });

        let server =
            validation_error("Malformed input request: extraneous key [foo] is not permitted")
                .await;
        let error = call_error(&client(&server), with_tools()).await;
        assert_matches!(error, LlmError::InvalidRequest { message, .. } if message.contains("extraneous key"));
    }
}
