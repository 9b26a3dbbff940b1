//! Provider quirks become typed errors inside the adapters: each provider's real error body (a
//! code, a parameter, an error type, or for servers without codes the words they use) is served
//! by a local server, and the call fails with the typed variant callers match on
//! (`ToolsUnsupported`, `ContentFiltered`, `ContextLengthExceeded`, `RateLimited`, ...).

use std::time::Duration;

use crewai_llm::openai::Auth;
use crewai_llm::{
    AnthropicLlm, FinishReason, GeminiLlm, Llm, LlmConfig, LlmError, LlmRequest, Message,
    OpenAiClient, OpenAiResponsesClient, ToolDefinition, collect_stream,
};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(status).set_body_raw(body.to_string(), "application/json"),
        )
        .mount(&server)
        .await;
    server
}

/// A server answering every POST with these server-sent events.
async fn streaming(events: &[Value]) -> MockServer {
    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    server
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

async fn call_error(llm: &dyn Llm, request: LlmRequest) -> LlmError {
    llm.call(request).await.expect_err("the call fails")
}

async fn stream_error(llm: &dyn Llm, request: LlmRequest) -> LlmError {
    match llm.stream(request).await {
        Ok(stream) => collect_stream(stream, |_| {})
            .await
            .expect_err("the stream fails"),
        Err(error) => error,
    }
}

fn assert_tools_unsupported(error: &LlmError, provider: &str, model: &str) {
    assert!(
        matches!(error, LlmError::ToolsUnsupported { provider: p, model: m, .. } if p == provider && m == model),
        "{error:?}"
    );
    assert!(error.is_tools_unsupported() && !error.is_retryable());
}

#[tokio::test]
async fn openai_refusing_the_tools_parameter_is_tools_unsupported() {
    // OpenAI's typed form: the parameter and the code name it.
    let server = answering(
        400,
        json!({"error": {"message": "Unsupported parameter: 'tools' is not supported with this model.", "type": "invalid_request_error", "param": "tools", "code": "unsupported_parameter"}}),
    )
    .await;
    let error = call_error(&openai(&server, "o1-preview"), with_tools()).await;
    assert_tools_unsupported(&error, "openai", "o1-preview");
}

#[tokio::test]
async fn compatible_servers_that_refuse_tools_in_words_are_tools_unsupported() {
    // Ollama's own error shape: the error is a bare string.
    let ollama = answering(
        400,
        json!({"error": "registry.ollama.ai/library/gemma:2b does not support tools"}),
    )
    .await;
    let error = call_error(&compatible(&ollama, "ollama", "gemma:2b"), with_tools()).await;
    assert_tools_unsupported(&error, "ollama", "gemma:2b");

    // vLLM without a tool parser: a top-level message and a numeric code.
    let vllm = answering(
        400,
        json!({"object": "error", "message": "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set", "type": "BadRequestError", "param": null, "code": 400}),
    )
    .await;
    let error = call_error(&compatible(&vllm, "hosted_vllm", "qwen"), with_tools()).await;
    assert_tools_unsupported(&error, "hosted_vllm", "qwen");

    // OpenRouter with no provider serving tools for the model: a 404.
    let openrouter = answering(
        404,
        json!({"error": {"message": "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing", "code": 404}}),
    )
    .await;
    let error = call_error(
        &compatible(&openrouter, "openrouter", "some/model"),
        with_tools(),
    )
    .await;
    assert_tools_unsupported(&error, "openrouter", "some/model");
}

#[tokio::test]
async fn other_invalid_requests_and_missing_models_keep_their_types() {
    let server = answering(
        400,
        json!({"error": {"message": "Invalid value for 'temperature'.", "type": "invalid_request_error", "param": "temperature", "code": "invalid_value"}}),
    )
    .await;
    let error = call_error(&openai(&server, "gpt-4o"), with_tools()).await;
    assert!(
        matches!(error, LlmError::InvalidRequest { status: 400, .. }),
        "{error:?}"
    );
    assert!(!error.is_tools_unsupported());

    let server = answering(
        404,
        json!({"error": "model \"llama9\" not found, try pulling it first"}),
    )
    .await;
    let error = call_error(&compatible(&server, "ollama", "llama9"), with_tools()).await;
    assert!(
        matches!(&error, LlmError::ModelNotFound { model, .. } if model == "llama9"),
        "{error:?}"
    );
}

#[tokio::test]
async fn azure_content_filtering_is_content_filtered() {
    let server = answering(
        400,
        json!({"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
            "type": null, "param": "prompt", "code": "content_filter", "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {"hate": {"filtered": true, "severity": "high"}}}}}),
    )
    .await;
    let azure = OpenAiClient::azure(
        &config(),
        "gpt-4o",
        &server.uri(),
        "2024-10-21",
        "azure-key".into(),
    )
    .expect("client builds");
    let error = call_error(&azure, LlmRequest::new(vec![Message::user("hi")])).await;
    assert!(
        matches!(&error, LlmError::ContentFiltered { provider, message } if provider == "azure" && message.contains("content management policy")),
        "{error:?}"
    );
    assert!(!error.is_retryable());

    // A reply the filter cut short is still an answer, marked as filtered.
    let server = answering(
        200,
        json!({"id": "c", "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "content_filter", "message": {"role": "assistant", "content": "Partial"}}]}),
    )
    .await;
    let response = openai(&server, "gpt-4o")
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect("a filtered reply is an answer");
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
}

#[tokio::test]
async fn the_context_length_code_decides_without_the_usual_words() {
    let server = answering(
        400,
        json!({"error": {"message": "Your request is over the limit for this model.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
    )
    .await;
    let error = call_error(&openai(&server, "gpt-4o"), with_tools()).await;
    assert!(
        matches!(error, LlmError::ContextLengthExceeded { .. }),
        "{error:?}"
    );
    assert!(error.is_context_length());
}

#[tokio::test]
async fn errors_sent_as_stream_chunks_are_typed() {
    let started = json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Par"}}]});
    let filtered = streaming(&[
        started.clone(),
        json!({"error": {"message": "Output filtered by policy", "code": "content_filter"}}),
    ])
    .await;
    let error = stream_error(
        &openai(&filtered, "gpt-4o"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(
        matches!(error, LlmError::ContentFiltered { .. }),
        "{error:?}"
    );

    let overflow = streaming(&[json!({"error": {"message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "code": 400}})]).await;
    let error = stream_error(
        &compatible(&overflow, "llamacpp", "local"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(error.is_context_length(), "{error:?}");

    let broken = streaming(&[
        started,
        json!({"error": {"message": "upstream went away", "type": "server_error"}}),
    ])
    .await;
    let error = stream_error(
        &openai(&broken, "gpt-4o"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(
        matches!(error, LlmError::Server { status: 200, .. }) && error.is_retryable(),
        "{error:?}"
    );
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
    let server = answering(
        400,
        json!({"error": {"message": "Unsupported parameter: 'tools' is not supported with this model.", "type": "invalid_request_error", "param": "tools", "code": "unsupported_parameter"}}),
    )
    .await;
    let error = call_error(&responses(&server, "o1-pro"), with_tools()).await;
    assert_tools_unsupported(&error, "openai", "o1-pro");

    let failed = streaming(&[
        json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
        json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [],
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}),
    ])
    .await;
    let error = stream_error(
        &responses(&failed, "gpt-4.1"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(
        matches!(error, LlmError::ContextLengthExceeded { .. }),
        "{error:?}"
    );

    let limited = streaming(&[json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": null, "sequence_number": 1})]).await;
    let error = stream_error(
        &responses(&limited, "gpt-4.1"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(
        matches!(error, LlmError::RateLimited { .. }) && error.is_retryable(),
        "{error:?}"
    );
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
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream"))
        .mount(&server)
        .await;
    let claude = AnthropicLlm::new(
        "claude-sonnet-4-5",
        "key".into(),
        Some(&server.uri()),
        &config(),
    )
    .expect("client builds");
    let error = stream_error(&claude, LlmRequest::new(vec![Message::user("hi")])).await;
    assert!(
        matches!(error, LlmError::ContextLengthExceeded { .. }),
        "{error:?}"
    );

    let limited = answering(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
    )
    .await;
    let claude = AnthropicLlm::new(
        "claude-sonnet-4-5",
        "key".into(),
        Some(&limited.uri()),
        &config(),
    )
    .expect("client builds");
    let error = call_error(&claude, LlmRequest::new(vec![Message::user("hi")])).await;
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error:?}");
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
    let server = answering(
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "Function calling is not enabled for models/gemma-3-27b-it",
            json!([]),
        ),
    )
    .await;
    let error = call_error(&gemini(&server, "gemma-3-27b-it"), with_tools()).await;
    assert_tools_unsupported(&error, "gemini", "gemma-3-27b-it");

    // The wait is in a RetryInfo detail, not in the words.
    let server = answering(
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            json!([
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generate_content_free_tier_requests"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
            ]),
        ),
    )
    .await;
    let error = call_error(
        &gemini(&server, "gemini-2.5-flash"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error:?}");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(12)));

    // An invalid key is a 400 whose ErrorInfo reason says so.
    let server = answering(
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "Invalid credentials.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
        ),
    )
    .await;
    let error = call_error(
        &gemini(&server, "gemini-2.5-flash"),
        LlmRequest::new(vec![Message::user("hi")]),
    )
    .await;
    assert!(
        matches!(error, LlmError::Authentication { .. }),
        "{error:?}"
    );

    // The same refusal sent as a stream chunk.
    let server = streaming(&[google_error(
        400,
        "INVALID_ARGUMENT",
        "Function calling is not enabled for models/gemma-3-4b-it",
        json!([]),
    )])
    .await;
    let error = stream_error(&gemini(&server, "gemma-3-4b-it"), with_tools()).await;
    assert_tools_unsupported(&error, "gemini", "gemma-3-4b-it");
}

#[cfg(feature = "bedrock")]
mod bedrock {
    use super::*;
    use crewai_llm::bedrock::{BedrockAuth, BedrockLlm};

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
            "us-east-1",
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
        assert!(
            matches!(error, LlmError::ContextLengthExceeded { .. }),
            "{error:?}"
        );

        let server =
            validation_error("Malformed input request: extraneous key [foo] is not permitted")
                .await;
        let error = call_error(&client(&server), with_tools()).await;
        assert!(
            matches!(&error, LlmError::InvalidRequest { message, .. } if message.contains("extraneous key")),
            "{error:?}"
        );
    }
}
