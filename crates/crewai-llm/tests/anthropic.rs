//! The Anthropic client against a local server speaking the Messages API.

mod common;

use std::time::Duration;

use common::{assert_times_out, call_error, hi, missing_key_error, sent_bodies, stream_error};
use crewai_llm::anthropic::AnthropicLlm;
use crewai_llm::router::{BuildOptions, build_llm_with};
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, ResponseFormat, RetryPolicy,
    StreamEvent, ToolCall, ToolDefinition, collect_stream,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MODEL: &str = "claude-sonnet-4-5";

fn config() -> LlmConfig {
    LlmConfig::new(format!("anthropic/{MODEL}")).with_timeout(5.0)
}

fn client(server: &MockServer, config: &LlmConfig) -> AnthropicLlm {
    AnthropicLlm::new(MODEL, "test-key".into(), Some(&server.uri()), config).expect("client builds")
}

/// A server speaking the Messages API that answers every call with `response`.
async fn serve(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "test-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn search_tool() -> ToolDefinition {
    ToolDefinition {
        name: "Search the web".into(),
        description: "Searches the web".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        strict: false,
    }
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test]
async fn plain_call_sends_system_blocks_cache_breakpoints_and_reads_usage() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Hello there."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 4, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}
        }))).await;
    let config = config()
        .with_temperature(0.2)
        .with_stop(vec!["\nObservation:".into()]);
    let request = LlmRequest::new(vec![
        Message::system("You are terse."),
        Message::user("First question"),
        Message::assistant("First answer"),
        Message::user("Say hello"),
    ]);
    let response = client(&server, &config)
        .call(request)
        .await
        .expect("call succeeds");

    assert_eq!(response.content.as_deref(), Some("Hello there."));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.response_id.as_deref(), Some("msg_01"));
    assert_eq!(
        response.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    assert_eq!(response.usage.prompt_tokens, 132);
    assert_eq!(response.usage.cached_prompt_tokens, 100);
    assert_eq!(response.usage.cache_creation_tokens, 20);
    assert_eq!(response.usage.completion_tokens, 4);
    assert_eq!(response.usage.total_tokens, 136);
    assert_eq!(response.usage.successful_requests, 1);

    let body = &sent_bodies(&server).await[0];
    assert_eq!(
        body,
        &json!({
            "model": MODEL,
            "max_tokens": 4096,
            "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "First question"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "First answer"}]},
                {"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]}
            ],
            "temperature": 0.2,
            "stop_sequences": ["\nObservation:"]
        })
    );
}

#[tokio::test]
async fn parallel_tool_calls_map_names_back_and_results_share_one_user_turn() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_02", "type": "message", "role": "assistant", "model": MODEL,
            "content": [
                {"type": "text", "text": "I'll search twice."},
                {"type": "tool_use", "id": "toolu_a", "name": "Search_the_web", "input": {"query": "rust"}},
                {"type": "tool_use", "id": "toolu_b", "name": "Search_the_web", "input": {"query": "crewai"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 50, "output_tokens": 30}
        }))).await;
    let llm = client(&server, &config());
    let mut conversation = vec![Message::user("Compare rust and crewai")];
    let first = llm
        .call(LlmRequest::new(conversation.clone()).with_tools(vec![search_tool()]))
        .await
        .expect("first call");

    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.content.as_deref(), Some("I'll search twice."));
    assert_eq!(first.tool_calls.len(), 2);
    assert_eq!(first.tool_calls[0].name, "Search the web");
    assert_eq!(first.tool_calls[0].id, "toolu_a");
    assert_eq!(first.tool_calls[1].arguments, json!({"query": "crewai"}));

    conversation.push(first.to_message());
    conversation.push(Message::tool_result(
        "toolu_a",
        "Search the web",
        "Rust is a language",
    ));
    conversation.push(Message::tool_result(
        "toolu_b",
        "Search the web",
        "CrewAI is a framework",
    ));
    llm.call(LlmRequest::new(conversation).with_tools(vec![search_tool()]))
        .await
        .expect("second call");

    let bodies = sent_bodies(&server).await;
    assert_eq!(
        bodies[0]["tools"],
        json!([{
            "name": "Search_the_web", "description": "Searches the web",
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
        }])
    );
    let messages = bodies[1]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "text", "text": "I'll search twice."},
            {"type": "tool_use", "id": "toolu_a", "name": "Search_the_web", "input": {"query": "rust"}},
            {"type": "tool_use", "id": "toolu_b", "name": "Search_the_web", "input": {"query": "crewai"}}
        ])
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Rust is a language"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "CrewAI is a framework", "cache_control": {"type": "ephemeral"}}
        ]})
    );
}

#[tokio::test]
async fn thinking_blocks_come_back_and_are_sent_before_the_tool_use() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_03", "type": "message", "role": "assistant", "model": MODEL,
            "content": [
                {"type": "thinking", "thinking": "The user wants the weather; call the tool.", "signature": "sig-123"},
                {"type": "redacted_thinking", "data": "opaque-blob"},
                {"type": "tool_use", "id": "toolu_w", "name": "weather", "input": {"city": "Paris"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 40}
        }))).await;
    let mut config = config().with_temperature(0.5);
    config.thinking = Some(json!({"type": "enabled", "budget_tokens": 2048}));
    let llm = client(&server, &config);
    let weather = ToolDefinition {
        name: "weather".into(),
        description: "Weather by city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        strict: false,
    };
    let mut conversation = vec![Message::user("Weather in Paris?")];
    let first = llm
        .call(LlmRequest::new(conversation.clone()).with_tools(vec![weather.clone()]))
        .await
        .expect("first call");
    assert_eq!(first.thinking.len(), 2);
    assert_eq!(first.thinking[0].signature.as_deref(), Some("sig-123"));
    assert_eq!(
        first.thinking[1].redacted_data.as_deref(),
        Some("opaque-blob")
    );

    conversation.push(first.to_message());
    conversation.push(Message::tool_result("toolu_w", "weather", "Sunny"));
    llm.call(LlmRequest::new(conversation).with_tools(vec![weather]))
        .await
        .expect("second call");

    let bodies = sent_bodies(&server).await;
    assert_eq!(
        bodies[0]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        bodies[0].get("temperature"),
        None,
        "temperature is not allowed with thinking"
    );
    assert_eq!(
        bodies[1]["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "The user wants the weather; call the tool.", "signature": "sig-123"},
            {"type": "redacted_thinking", "data": "opaque-blob"},
            {"type": "tool_use", "id": "toolu_w", "name": "weather", "input": {"city": "Paris"}}
        ])
    );
}

#[tokio::test]
async fn streaming_yields_text_thinking_and_tool_deltas_then_the_full_response() {
    let events = sse(&[
        json!({"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "model": MODEL, "content": [], "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 5}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me check."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-s"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Search"}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ing."}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_s", "name": "Search_the_web", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"rust\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop"}),
    ]);
    let server = serve(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream")).await;
    let request =
        LlmRequest::new(vec![Message::user("Search rust")]).with_tools(vec![search_tool()]);
    let (seen, response) = common::streamed(&client(&server, &config()), request).await;

    assert!(seen.contains(&StreamEvent::ThinkingDelta("Let me check.".into())));
    assert!(seen.contains(&StreamEvent::TextDelta("Search".into())));
    assert!(seen.contains(&StreamEvent::ToolCallDelta {
        index: 0,
        id: Some("toolu_s".into()),
        name: Some("Search the web".into()),
        arguments_delta: String::new()
    }));
    assert!(seen.contains(&StreamEvent::ToolCallDelta {
        index: 0,
        id: None,
        name: None,
        arguments_delta: "\"rust\"}".into()
    }));
    assert_eq!(response.content.as_deref(), Some("Searching."));
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "toolu_s".into(),
            name: "Search the web".into(),
            arguments: json!({"query": "rust"}),
            signature: None
        }]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.thinking[0].signature.as_deref(), Some("sig-s"));
    assert_eq!(response.usage.prompt_tokens, 30);
    assert_eq!(response.usage.cached_prompt_tokens, 5);
    assert_eq!(response.usage.completion_tokens, 42);
    assert_eq!(response.response_id.as_deref(), Some("msg_s"));
    assert_eq!(sent_bodies(&server).await[0]["stream"], true);
}

#[tokio::test]
async fn structured_output_forces_a_tool_and_returns_its_input_as_json_text() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_04", "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "tool_use", "id": "toolu_f", "name": "Verdict", "input": {"score": 4, "reason": "solid"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 9, "output_tokens": 9}
        }))).await;
    let schema = json!({"type": "object", "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}}, "required": ["score", "reason"]});
    let request = LlmRequest::new(vec![Message::user("Rate the essay")]).with_response_format(
        ResponseFormat {
            name: "Verdict".into(),
            schema: schema.clone(),
            strict: true,
        },
    );
    let response = client(&server, &config())
        .call(request)
        .await
        .expect("call succeeds");
    assert_eq!(
        response.content.as_deref(),
        Some(r#"{"score":4,"reason":"solid"}"#)
    );
    assert!(response.tool_calls.is_empty());
    let body = &sent_bodies(&server).await[0];
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "Verdict"})
    );
    assert_eq!(body["tools"][0]["input_schema"], schema);
}

async fn error_for(status: u16, body: Value, retry_after: Option<&str>) -> LlmError {
    let mut response = ResponseTemplate::new(status).set_body_json(body);
    if let Some(wait) = retry_after {
        response = response.insert_header("retry-after", wait);
    }
    let server = serve(response).await;
    call_error(&client(&server, &config()), hi()).await
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[tokio::test]
async fn error_statuses_become_typed_errors() {
    type Check = fn(&LlmError) -> bool;
    let cases: [(u16, &str, &str, Option<&str>, Check); 7] = [
        (
            401,
            "authentication_error",
            "invalid x-api-key",
            None,
            |e| {
                matches!(e, LlmError::Authentication { hint, message, .. }
                if hint == "ANTHROPIC_API_KEY" && message == "invalid x-api-key")
            },
        ),
        (403, "permission_error", "no access", None, |e| {
            matches!(e, LlmError::PermissionDenied { .. })
        }),
        (
            404,
            "not_found_error",
            "model: claude-x",
            None,
            |e| matches!(e, LlmError::ModelNotFound { model, .. } if model == MODEL),
        ),
        (429, "rate_limit_error", "slow down", Some("7"), |e| {
            matches!(e, LlmError::RateLimited { .. })
                && e.retry_after() == Some(Duration::from_secs(7))
        }),
        (529, "overloaded_error", "Overloaded", None, |e| {
            matches!(e, LlmError::Server { status: 529, .. }) && e.is_retryable()
        }),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            None,
            |e| matches!(e, LlmError::ContextLengthExceeded { .. }) && !e.is_retryable(),
        ),
        (
            400,
            "invalid_request_error",
            "messages: roles must alternate",
            None,
            |e| matches!(e, LlmError::InvalidRequest { message, .. } if message.contains("roles must alternate")),
        ),
    ];
    for (status, kind, message, retry_after, expected) in cases {
        let error = error_for(status, anthropic_error(kind, message), retry_after).await;
        assert!(expected(&error), "{status} {kind}: {error:?}");
    }
}

#[tokio::test]
async fn malformed_bodies_are_reported_not_guessed() {
    let html = ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html");
    let no_content =
        ResponseTemplate::new(200).set_body_json(json!({"id": "msg", "type": "message"}));
    for (reply, says) in [(html, "is not JSON"), (no_content, "content")] {
        let server = serve(reply).await;
        let error = call_error(&client(&server, &config()), hi()).await;
        assert_matches!(error, LlmError::MalformedResponse { .. });
        let text = crewai_llm::error_chain(&error);
        assert!(text.contains(says), "{text}");
    }
}

#[tokio::test]
async fn stream_errors_and_truncated_streams_fail_the_stream() {
    let start = json!({"type": "message_start", "message": {"id": "m", "model": MODEL, "content": [], "usage": {"input_tokens": 1}}});
    let overloaded = sse(&[
        start.clone(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let cut = sse(&[
        start,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}}),
    ]);
    let mut errors = Vec::new();
    for events in [overloaded, cut] {
        let server =
            serve(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream")).await;
        errors.push(stream_error(&client(&server, &config()), hi()).await);
    }
    assert_matches!(errors[0], LlmError::Server { status: 529, .. });
    assert_matches!(errors[1], LlmError::MalformedResponse { message, .. }
        if message.contains("message_stop"));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = serve(common::never_answering(&json!({}))).await;
    let llm = client(&server, &config().with_timeout(0.3));
    // The timeout, not the server's 30 s delay, ends it.
    assert_times_out(Duration::from_millis(300), llm.call(hi())).await;
}

#[tokio::test]
async fn capabilities_report_claude_context_window() {
    let server = MockServer::start().await;
    let capabilities = client(&server, &config()).capabilities();
    assert_eq!(capabilities.context_window, 200_000);
    assert!(capabilities.function_calling && capabilities.stop_words && capabilities.multimodal);
    let mut custom = config();
    custom.context_window_size = Some(1_000_000);
    assert_eq!(
        client(&server, &custom).capabilities().context_window,
        1_000_000
    );
}

#[tokio::test]
async fn the_router_builds_anthropic_from_a_model_string_and_env() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_r", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": "routed"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}
    })))
    .await;
    let options = BuildOptions::new()
        .with_env_vars([
            ("ANTHROPIC_API_KEY", "test-key".to_string()),
            ("ANTHROPIC_BASE_URL", server.uri()),
        ])
        .with_retry_policy(RetryPolicy::none());
    let llm = build_llm_with(&LlmConfig::new("claude-sonnet-4-5"), &options).expect("routes");
    assert_eq!(llm.provider(), "anthropic");
    let response = llm.call(hi()).await.expect("call succeeds");
    assert_eq!(response.content.as_deref(), Some("routed"));
    let error = missing_key_error("anthropic/claude-sonnet-4-5");
    assert!(error.contains("ANTHROPIC_API_KEY"), "{error}");
}

#[tokio::test]
async fn a_recorded_stream_replays_offline_without_the_key() {
    let events = sse(&[
        json!({"type": "message_start", "message": {"id": "msg_c", "model": MODEL, "content": [], "usage": {"input_tokens": 3}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "recorded"}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]);
    let server = serve(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream")).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("claude.yaml");
    let live_config = config()
        .with_base_url(server.uri())
        .with_api_key("test-key");
    let live = crewai_llm::cassette::record_llm(&live_config, &file).expect("recorder builds");
    let recorded = collect_stream(
        live.stream(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .expect("opens"),
        |_| {},
    )
    .await
    .expect("live stream");
    drop(server);

    let cassette = std::fs::read_to_string(&file).expect("cassette written");
    assert!(!cassette.contains("test-key"), "the key is not recorded");
    let offline =
        crewai_llm::cassette::replay_llm(&config().with_base_url("http://127.0.0.1:9"), &file)
            .expect("replayer builds");
    let replayed = collect_stream(
        offline
            .stream(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .expect("opens"),
        |_| {},
    )
    .await
    .expect("replayed stream");
    assert_eq!(replayed.content.as_deref(), Some("recorded"));
    assert_eq!(replayed, recorded);
}

#[tokio::test]
async fn images_and_documents_become_content_blocks() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_i", "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "text", "text": "A chart."}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}
        }))).await;
    let message = Message::user("Describe")
        .with_part(crewai_llm::ContentPart::Image {
            url: "data:image/png;base64,iVBORw0KGgo=".into(),
            media_type: None,
        })
        .with_part(crewai_llm::ContentPart::Image {
            url: "https://example.com/chart.png".into(),
            media_type: None,
        })
        .with_part(crewai_llm::ContentPart::File {
            data_base64: "JVBERi0=".into(),
            media_type: "application/pdf".into(),
            filename: Some("report.pdf".into()),
        });
    client(&server, &config())
        .call(LlmRequest::new(vec![message]))
        .await
        .expect("call succeeds");
    assert_eq!(
        sent_bodies(&server).await[0]["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Describe"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "report.pdf",
             "cache_control": {"type": "ephemeral"}}
        ])
    );
}
