//! The OpenAI chat-completions client against a local HTTP server speaking OpenAI's wire format.
//! The tests that replay CrewAI's recorded exchanges are in `crewai_recordings.rs`.

mod common;

use std::time::Duration;

use common::{
    answering, assert_times_out, body_of, build, calculator, calculator_task, hi, json_reply,
    json_status, only_request, openai_at, stream_error,
};
use crewai_llm::{
    FinishReason, LlmConfig, LlmError, LlmRequest, Message, StreamEvent, ToolCall, ToolChoice,
    collect_stream,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn parallel_tool_calls_are_all_returned() {
    let reply = json!({
        "id": "chatcmpl-par", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\":\"1+1\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\":\"2*3\"}"}}
        ]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80}
    });
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_reply(reply.to_string()))
        .mount(&server)
        .await;
    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 0);
    let mut request = LlmRequest::new(calculator_task()).with_tools(vec![calculator()]);
    request.options.tool_choice = Some(ToolChoice::Required);
    let response = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    assert_eq!(
        response.tool_calls[1].arguments,
        json!({"expression": "2*3"})
    );

    let sent = body_of(&only_request(&server).await);
    assert_eq!(sent["tool_choice"], json!("required"));

    // Both calls and both results go back in OpenAI's shape on the next turn.
    let mut messages = calculator_task();
    messages.push(response.to_message());
    messages.push(Message::tool_result("call_a", "calculator", "2"));
    messages.push(Message::tool_result("call_b", "calculator", "6"));
    let body =
        crewai_llm::openai::OpenAiClient::openai(&LlmConfig::new("gpt-4o-mini"), "gpt-4o-mini")
            .unwrap_or_else(|e| panic!("{e}"))
            .request_body(&LlmRequest::new(messages), false);
    assert_eq!(body["messages"][2]["content"], Value::Null);
    assert_eq!(body["messages"][2]["tool_calls"][1]["id"], json!("call_b"));
    assert_eq!(
        body["messages"][4],
        json!({"role": "tool", "tool_call_id": "call_b", "name": "calculator", "content": "6"})
    );
}

#[tokio::test]
async fn forced_tool_choice_names_the_function() {
    let server = MockServer::start().await;
    let reply = json!({"id": "x", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]});
    Mock::given(method("POST"))
        .and(body_partial_json(
            json!({"tool_choice": {"type": "function", "function": {"name": "calculator"}}}),
        ))
        .respond_with(json_reply(reply.to_string()))
        .expect(1)
        .mount(&server)
        .await;
    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 0);
    let mut request = LlmRequest::new(calculator_task()).with_tools(vec![calculator()]);
    request.options.tool_choice = Some(ToolChoice::Tool("calculator".into()));
    let response = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    // No usage in the reply: still one successful request counted.
    assert_eq!(response.usage.successful_requests, 1);
}

#[tokio::test]
async fn streamed_tool_call_deltas_assemble() {
    let chunks = [
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_x", "type": "function", "function": {"name": "calculator", "arguments": ""}}]}}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"expr"}}]}}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_y", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]}}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "ession\":\"3+4\"}"}}]}}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 9, "total_tokens": 19}}),
    ];
    let mut sse: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    let server = answering(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")).await;
    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 0);
    let stream = llm
        .stream(LlmRequest::new(calculator_task()).with_tools(vec![calculator()]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut tool_deltas = Vec::new();
    let response = collect_stream(stream, |event| {
        if let StreamEvent::ToolCallDelta {
            index,
            arguments_delta,
            ..
        } = event
        {
            tool_deltas.push((*index, arguments_delta.clone()));
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tool_deltas.len(), 4);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall::from_raw_arguments("call_x", "calculator", "{\"expression\":\"3+4\"}"),
            ToolCall::from_raw_arguments("call_y", "calculator", "{}"),
        ]
    );
    assert_eq!(response.usage.total_tokens, 19);
}

#[tokio::test]
async fn stop_words_are_cut_on_the_client_and_not_sent() {
    let reply = json!({"id": "s", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
        "content": "Thought: use the tool\nAction: calculator\nAction Input: {\"expression\": \"1+1\"}\nObservation: 2 (made up)"}}]});
    let server = answering(json_reply(reply.to_string())).await;
    let config = openai_at(&server.uri(), "gpt-4o-mini").with_stop(vec!["\nObservation:".into()]);
    let response = build(&config, 0)
        .call(LlmRequest::new(vec![Message::user("1+1?")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        response.content.as_deref(),
        Some("Thought: use the tool\nAction: calculator\nAction Input: {\"expression\": \"1+1\"}")
    );
    assert_eq!(response.finish_reason, FinishReason::StopSequence);
    assert!(body_of(&only_request(&server).await).get("stop").is_none());
}

/// An OpenAI error reply.
fn openai_error(status: u16, message: &str, kind: &str, code: &str) -> ResponseTemplate {
    json_status(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

#[tokio::test]
async fn error_statuses_become_typed_errors() {
    let server = MockServer::start().await;
    let invalid = "invalid_request_error";
    let cases = [
        (
            "auth",
            401,
            "Incorrect API key provided: sk-test.",
            "invalid_api_key",
        ),
        (
            "missing",
            404,
            "The model `gpt-9` does not exist or you do not have access to it.",
            "model_not_found",
        ),
        (
            "overflow",
            400,
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
            "context_length_exceeded",
        ),
        (
            "bad",
            400,
            "Invalid value for 'temperature'.",
            "invalid_value",
        ),
    ];
    for (prefix, status, message, code) in cases {
        Mock::given(method("POST"))
            .and(path(format!("/{prefix}/v1/chat/completions")))
            .respond_with(openai_error(status, message, invalid, code))
            .mount(&server)
            .await;
    }
    let call = |prefix: &str| {
        let llm = build(
            &openai_at(&format!("{}/{prefix}", server.uri()), "gpt-9"),
            2,
        );
        async move { common::call_error(llm.as_ref(), hi()).await }
    };
    assert_matches!(call("auth").await, LlmError::Authentication { provider, hint, message }
        if provider == "openai" && hint == "OPENAI_API_KEY" && message.starts_with("Incorrect API key"));
    assert_matches!(call("missing").await, LlmError::ModelNotFound { model, .. } if model == "gpt-9");
    let overflow = call("overflow").await;
    assert!(overflow.is_context_length(), "{overflow:?}");
    assert_matches!(call("bad").await, LlmError::InvalidRequest { status: 400, message, .. }
        if message.contains("temperature"));
    // Non-retryable errors are not retried.
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 4);
}

#[tokio::test]
async fn rate_limit_is_retried_after_retry_after() {
    let server = MockServer::start().await;
    let limited = openai_error(
        429,
        "Rate limit reached for gpt-4o-mini",
        "requests",
        "rate_limit_exceeded",
    )
    .insert_header("retry-after-ms", "20");
    let failed = openai_error(500, "The server had an error", "server_error", "");
    for once in [limited, failed] {
        Mock::given(method("POST"))
            .respond_with(once)
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    let ok = json!({"id": "ok", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "finally"}}]});
    Mock::given(method("POST"))
        .respond_with(json_reply(ok.to_string()))
        .mount(&server)
        .await;

    let response = build(&openai_at(&server.uri(), "gpt-4o-mini"), 2)
        .call(hi())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.content.as_deref(), Some("finally"));
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        3
    );
}

#[tokio::test]
async fn retries_are_bounded_and_the_last_error_is_kept() {
    let limited = openai_error(429, "slow down", "requests", "rate_limit_exceeded");
    let server = answering(limited.insert_header("retry-after", "1")).await;
    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 2);
    let error = common::call_error(llm.as_ref(), hi()).await;
    assert_matches!(error, LlmError::RateLimited { retry_after: Some(wait), message, .. }
        if *wait == Duration::from_secs(1) && message == "slow down");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        3,
        "one call and two retries"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = answering(common::never_answering(&json!({}))).await;
    let config = openai_at(&server.uri(), "gpt-4o-mini").with_timeout(0.2);
    let llm = build(&config, 0);
    // The timeout, not the server's 30 s delay, ends it.
    let error = assert_times_out(Duration::from_millis(200), llm.call(hi())).await;
    assert_matches!(error, LlmError::Timeout { provider, .. } if provider == "openai");
}

#[tokio::test]
async fn nothing_listening_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    drop(listener);
    let llm = build(&openai_at(&format!("http://{address}"), "gpt-4o-mini"), 0);
    let error = common::call_error(llm.as_ref(), hi()).await;
    assert_matches!(error, LlmError::Connection { .. });
    // The socket's error is the cause, shown after what failed.
    let text = crewai_llm::error_chain(&error);
    assert!(text.starts_with("openai: connection failed: "), "{text}");
}

#[tokio::test]
async fn malformed_bodies_are_reported() {
    let server = MockServer::start().await;
    let cut = ResponseTemplate::new(200).set_body_raw(
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n",
        "text/event-stream",
    );
    let replies = [
        (
            "html",
            ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html"),
        ),
        ("empty", json_reply(r#"{"id":"x","choices":[]}"#)),
        ("cut", cut),
    ];
    for (prefix, reply) in replies {
        Mock::given(method("POST"))
            .and(path(format!("/{prefix}/v1/chat/completions")))
            .respond_with(reply)
            .mount(&server)
            .await;
    }
    let at = |prefix: &str| {
        build(
            &openai_at(&format!("{}/{prefix}", server.uri()), "gpt-4o-mini"),
            0,
        )
    };
    for prefix in ["html", "empty"] {
        let error = common::call_error(at(prefix).as_ref(), hi()).await;
        assert_matches!(error, LlmError::MalformedResponse { .. });
    }
    let error = stream_error(at("cut").as_ref(), hi()).await;
    assert_matches!(error, LlmError::MalformedResponse { .. });
}

#[tokio::test]
async fn azure_uses_deployment_urls_and_api_key_header() {
    let server = MockServer::start().await;
    let reply = json!({"id": "az", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "from azure"}}]});
    Mock::given(method("POST"))
        .and(path("/openai/deployments/my-gpt4o/chat/completions"))
        .and(query_param("api-version", "2024-08-01-preview"))
        .and(header("api-key", "azure-secret"))
        .respond_with(json_reply(reply.to_string()))
        .expect(1)
        .mount(&server)
        .await;
    let options = crewai_llm::BuildOptions::new()
        .with_env_vars([
            ("AZURE_API_KEY", "azure-secret"),
            ("AZURE_API_BASE", server.uri().as_str()),
            ("AZURE_API_VERSION", "2024-08-01-preview"),
        ])
        .with_retry_policy(common::fast_retries(0));
    let llm = crewai_llm::build_llm_with(&LlmConfig::new("azure/my-gpt4o"), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    let response = llm.call(hi()).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.content.as_deref(), Some("from azure"));
    let request = only_request(&server).await;
    assert!(request.headers.get("authorization").is_none());
    assert!(
        body_of(&request).get("model").is_none(),
        "Azure names the deployment in the URL"
    );
}

#[tokio::test]
async fn ollama_and_local_servers_work_without_a_key() {
    let server = MockServer::start().await;
    let reply = json!({"id": "ol", "model": "llama3.1", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "local"}}]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_reply(reply.to_string()))
        .mount(&server)
        .await;
    let address = server.address().to_string(); // OLLAMA_HOST is often given without a scheme
    let options =
        crewai_llm::BuildOptions::new().with_env_vars([("OLLAMA_HOST", address.as_str())]);
    let llm = crewai_llm::build_llm_with(&LlmConfig::new("ollama/llama3.1"), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        llm.call(hi())
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .content
            .as_deref(),
        Some("local")
    );

    let options = crewai_llm::BuildOptions::new()
        .with_env_vars([("OPENAI_BASE_URL", format!("{}/v1", server.uri()))]);
    let llm = crewai_llm::build_llm_with(&LlmConfig::new("my-local-model"), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    llm.call(hi()).await.unwrap_or_else(|e| panic!("{e}"));
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 2);
    assert!(
        requests
            .iter()
            .all(|r| r.headers.get("authorization").is_none())
    );
    assert_eq!(body_of(&requests[0])["model"], json!("llama3.1"));
    assert_eq!(body_of(&requests[1])["model"], json!("my-local-model"));
}

#[tokio::test]
async fn extra_headers_and_body_params_are_sent() {
    let server = MockServer::start().await;
    let reply = json!({"id": "e", "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "trunc"}}]});
    Mock::given(method("POST"))
        .and(header("x-team", "research"))
        .and(body_partial_json(
            json!({"seed": 7, "user": "crew-1", "temperature": 0.1}),
        ))
        .respond_with(json_reply(reply.to_string()))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = openai_at(&server.uri(), "gpt-4o-mini").with_temperature(0.1);
    config.seed = Some(7);
    config
        .extra_headers
        .insert("x-team".into(), "research".into());
    config.extra_body.insert("user".into(), json!("crew-1"));
    let response = build(&config, 0)
        .call(hi())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.finish_reason, FinishReason::Length);
}

#[tokio::test]
async fn compatible_servers_get_stop_words_in_the_body() {
    let server = MockServer::start().await;
    let reply = json!({"id": "o", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Thought: done\nObservation: extra"}}]});
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stop": ["\nObservation:"]})))
        .respond_with(json_reply(reply.to_string()))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = LlmConfig::new("ollama/qwen3").with_base_url(format!("{}/v1", server.uri()));
    config.stop = vec!["\nObservation:".into()];
    let response = build(&config, 0)
        .call(LlmRequest::new(vec![Message::user("go")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A server ignoring `stop` is still cut on the client.
    assert_eq!(response.content.as_deref(), Some("Thought: done"));
}

#[tokio::test]
async fn stream_true_in_config_streams_under_a_plain_call() {
    let sse = "data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n\
               data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n\
               data: {\"id\":\"s1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n\
               data: [DONE]\n\n";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let config = openai_at(&server.uri(), "gpt-4o-mini").with_stream(true);
    let response = build(&config, 0)
        .call(hi())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.content.as_deref(), Some("Hello"));
    assert_eq!(
        response.usage.total_tokens, 5,
        "streamed calls report usage (CrewAI reports 0)"
    );
}
