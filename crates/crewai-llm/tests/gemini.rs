//! The Gemini client against a local server speaking generateContent.

mod common;

use std::time::Duration;

use common::{assert_times_out, call_error, hi, missing_key_error, sent_bodies, stream_error};
use crewai_llm::gemini::GeminiLlm;
use crewai_llm::router::{BuildOptions, build_llm_with};
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, ResponseFormat, RetryPolicy,
    StreamEvent, ToolDefinition,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MODEL: &str = "gemini-2.5-flash";

fn config() -> LlmConfig {
    LlmConfig::new(format!("gemini/{MODEL}")).with_timeout(5.0)
}

fn client(server: &MockServer, config: &LlmConfig) -> GeminiLlm {
    GeminiLlm::new(MODEL, "g-key".into(), Some(&server.uri()), config).expect("client builds")
}

/// A server that answers every `generateContent` call with `response`.
async fn serve(response: ResponseTemplate) -> MockServer {
    serve_method("generateContent", response).await
}

/// A server that answers every call of `method_name` (`generateContent`, `streamGenerateContent`)
/// with `response`.
async fn serve_method(method_name: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/v1beta/models/{MODEL}:{method_name}")))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn text_reply(text: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 6, "cachedContentTokenCount": 16, "thoughtsTokenCount": 10, "totalTokenCount": 56},
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "resp-1"
    })
}

/// A tool schema in the shape crewai-tools produces for OpenAI (titles, strict objects, `$defs`).
fn crewai_style_tool() -> ToolDefinition {
    ToolDefinition {
        name: "Find flights!".into(),
        description: "Finds flights".into(),
        parameters: json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "FindFlightsArgs",
            "type": "object",
            "additionalProperties": false,
            "$defs": {"Airport": {"title": "Airport", "type": "object", "additionalProperties": false,
                "properties": {"code": {"title": "Code", "type": "string", "format": "iata"}}, "required": ["code"]}},
            "properties": {
                "origin": {"$ref": "#/$defs/Airport"},
                "date": {"title": "Date", "type": "string", "format": "date-time"},
                "max_stops": {"title": "Max Stops", "anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}
            },
            "required": ["origin", "date", "max_stops"]
        }),
        strict: true,
    }
}

#[tokio::test]
async fn plain_call_sends_system_instruction_generation_config_and_reads_usage() {
    let server = serve(ResponseTemplate::new(200).set_body_json(text_reply("Hi!"))).await;
    let mut config = config().with_temperature(0.1).with_max_tokens(256);
    config.top_p = Some(0.9);
    config.seed = Some(7);
    config.stop = (1..=6).map(|i| format!("STOP{i}")).collect();
    let request = LlmRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Earlier"),
        Message::assistant("Noted"),
        Message::user("Greet me"),
    ]);
    let response = client(&server, &config)
        .call(request)
        .await
        .expect("call succeeds");

    assert_eq!(response.content.as_deref(), Some("Hi!"));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.response_id.as_deref(), Some("resp-1"));
    assert_eq!(response.model.as_deref(), Some("gemini-2.5-flash-001"));
    assert_eq!(response.usage.prompt_tokens, 40);
    assert_eq!(response.usage.cached_prompt_tokens, 16);
    assert_eq!(
        response.usage.completion_tokens, 16,
        "thinking tokens count as completion"
    );
    assert_eq!(response.usage.reasoning_tokens, 10);
    assert_eq!(response.usage.total_tokens, 56);

    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(
        requests[0].url.query(),
        None,
        "the key travels in a header, not the URL"
    );
    assert_eq!(
        requests[0].body_json::<Value>().expect("json"),
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Earlier"}]},
                {"role": "model", "parts": [{"text": "Noted"}]},
                {"role": "user", "parts": [{"text": "Greet me"}]}
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "generationConfig": {
                "temperature": 0.1, "topP": 0.9, "maxOutputTokens": 256,
                "stopSequences": ["STOP1", "STOP2", "STOP3", "STOP4", "STOP5"], "seed": 7
            }
        })
    );
}

#[tokio::test]
async fn tools_get_cleaned_schemas_and_parallel_calls_round_trip_with_signatures() {
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "Find_flights_", "args": {"origin": {"code": "CDG"}, "date": "2026-12-24T10:00:00Z"}}, "thoughtSignature": "c2lnLTE="},
                {"functionCall": {"name": "Find_flights_", "args": {"origin": {"code": "JFK"}, "date": "2026-12-25T10:00:00Z"}}}
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 30, "totalTokenCount": 110},
            "responseId": "resp-2"
        }))).await;
    let llm = client(&server, &config());
    let tools = vec![crewai_style_tool()];
    let mut conversation = vec![
        Message::system("Travel agent."),
        Message::user("Flights from Paris and New York"),
    ];
    let first = llm
        .call(LlmRequest::new(conversation.clone()).with_tools(tools.clone()))
        .await
        .expect("first call");

    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.tool_calls.len(), 2);
    assert_eq!(first.tool_calls[0].name, "Find flights!");
    assert_eq!(first.tool_calls[0].signature.as_deref(), Some("c2lnLTE="));
    assert_eq!(first.tool_calls[1].signature, None);
    assert_eq!(first.tool_calls[1].arguments["origin"]["code"], "JFK");
    assert_ne!(first.tool_calls[0].id, first.tool_calls[1].id);

    conversation.push(first.to_message());
    conversation.push(Message::tool_result(
        &first.tool_calls[0].id,
        "Find flights!",
        "AF123",
    ));
    conversation.push(Message::tool_result(
        &first.tool_calls[1].id,
        "Find flights!",
        "DL456",
    ));
    llm.call(LlmRequest::new(conversation).with_tools(tools))
        .await
        .expect("second call");

    let bodies = sent_bodies(&server).await;
    assert_eq!(
        bodies[0]["tools"],
        json!([{"functionDeclarations": [{
            "name": "Find_flights_",
            "description": "Finds flights",
            "parameters": {
                "type": "object",
                "required": ["origin", "date", "max_stops"],
                "properties": {
                    "origin": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
                    "date": {"type": "string", "format": "date-time"},
                    "max_stops": {"type": "integer", "nullable": true}
                }
            }
        }]}])
    );
    let contents = bodies[1]["contents"].as_array().expect("contents");
    assert_eq!(contents.len(), 3);
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "c2lnLTE=");
    assert_eq!(
        contents[1]["parts"][0]["functionCall"]["name"],
        "Find_flights_"
    );
    assert_eq!(contents[1]["parts"][1].get("thoughtSignature"), None);
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "Find_flights_", "response": {"output": "AF123"}}},
            {"functionResponse": {"name": "Find_flights_", "response": {"output": "DL456"}}}
        ]})
    );
}

#[tokio::test]
async fn structured_output_asks_for_json_with_a_cleaned_schema() {
    let server =
        serve(ResponseTemplate::new(200).set_body_json(text_reply(r#"{"score": 4}"#))).await;
    let format = ResponseFormat {
        name: "Score".into(),
        schema: json!({"title": "Score", "type": "object", "additionalProperties": false,
            "properties": {"score": {"title": "Score", "type": "integer"}}, "required": ["score"]}),
        strict: true,
    };
    let response = client(&server, &config())
        .call(LlmRequest::new(vec![Message::user("Rate it")]).with_response_format(format))
        .await
        .expect("call succeeds");
    assert_eq!(response.content.as_deref(), Some(r#"{"score": 4}"#));
    let body = &sent_bodies(&server).await[0];
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(
        body["generationConfig"]["responseSchema"],
        json!({"type": "object", "required": ["score"], "properties": {"score": {"type": "integer"}}})
    );
}

#[tokio::test]
async fn streaming_reads_sse_chunks_into_deltas_and_a_final_response() {
    let server = MockServer::start().await;
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Thinking about it", "thought": true}]}}], "responseId": "resp-s"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}], "responseId": "resp-s"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}, "responseId": "resp-s", "modelVersion": MODEL}),
    ];
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    Mock::given(method("POST"))
        .and(path(format!(
            "/v1beta/models/{MODEL}:streamGenerateContent"
        )))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let (seen, response) = common::streamed(
        &client(&server, &config()),
        LlmRequest::new(vec![Message::user("hello")]),
    )
    .await;
    assert_eq!(
        seen[..3],
        [
            StreamEvent::ThinkingDelta("Thinking about it".into()),
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo".into())
        ]
    );
    assert_eq!(response.content.as_deref(), Some("Hello"));
    assert_eq!(response.usage.total_tokens, 7);
    assert_eq!(response.thinking[0].thinking, "Thinking about it");
    assert_eq!(response.response_id.as_deref(), Some("resp-s"));
}

async fn error_for(status: u16, body: Value) -> LlmError {
    let server = serve(ResponseTemplate::new(status).set_body_json(body)).await;
    call_error(&client(&server, &config()), hi()).await
}

/// The error a Google error body with this code, status and message becomes.
async fn google_error(code: u16, status: &str, message: &str) -> LlmError {
    error_for(
        code,
        json!({"error": {"code": code, "message": message, "status": status}}),
    )
    .await
}

#[tokio::test]
async fn error_statuses_become_typed_errors() {
    let key = error_for(400, json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}))
    .await;
    assert_matches!(key, LlmError::Authentication { hint, .. } if hint.contains("GEMINI_API_KEY"));

    type Check = fn(&LlmError) -> bool;
    let cases: [(u16, &str, &str, Check); 7] = [
        (
            400,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received. Unknown name \"foo\"",
            |e| matches!(e, LlmError::InvalidRequest { status: 400, message, .. } if message.contains("Unknown name")),
        ),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            |e| matches!(e, LlmError::ContextLengthExceeded { .. }),
        ),
        (
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota. Please retry in 2.5s.",
            |e| {
                matches!(e, LlmError::RateLimited { .. })
                    && e.retry_after() == Some(Duration::from_millis(2500))
            },
        ),
        (
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers",
            |e| matches!(e, LlmError::PermissionDenied { .. }),
        ),
        (
            404,
            "NOT_FOUND",
            "models/gemini-9 is not found",
            |e| matches!(e, LlmError::ModelNotFound { model, .. } if model == MODEL),
        ),
        (500, "UNAVAILABLE", "The model is overloaded.", |e| {
            matches!(e, LlmError::Server { .. }) && e.is_retryable()
        }),
        (503, "UNAVAILABLE", "The model is overloaded.", |e| {
            matches!(e, LlmError::Server { .. }) && e.is_retryable()
        }),
    ];
    for (code, status, message, expected) in cases {
        let error = google_error(code, status, message).await;
        assert!(expected(&error), "{code} {status}: {error:?}");
    }
}

#[tokio::test]
async fn malformed_and_blocked_replies() {
    let not_json = ResponseTemplate::new(200).set_body_raw("not json", "text/plain");
    let not_an_object = ResponseTemplate::new(200).set_body_json(json!([1, 2]));
    for reply in [not_json, not_an_object] {
        let server = serve(reply).await;
        let error = call_error(&client(&server, &config()), hi()).await;
        assert_matches!(error, LlmError::MalformedResponse { .. });
    }

    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}});
    let server = serve(ResponseTemplate::new(200).set_body_json(blocked)).await;
    let response = client(&server, &config())
        .call(hi())
        .await
        .expect("a blocked prompt is an answer");
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
    assert_eq!(response.content, None);
}

#[tokio::test]
async fn the_router_builds_gemini_from_a_model_string_and_env() {
    let server = serve(ResponseTemplate::new(200).set_body_json(text_reply("routed"))).await;
    let options = BuildOptions::new()
        .with_env_vars([
            ("GOOGLE_API_KEY", "g-key".to_string()),
            ("GEMINI_API_BASE", server.uri()),
        ])
        .with_retry_policy(RetryPolicy::none());
    let llm = build_llm_with(&LlmConfig::new("gemini/gemini-2.5-flash"), &options).expect("routes");
    assert_eq!(llm.provider(), "gemini");
    assert_eq!(llm.capabilities().context_window, 1_048_576);
    let response = llm.call(hi()).await.expect("call succeeds");
    assert_eq!(response.content.as_deref(), Some("routed"));
    let no_key = missing_key_error("gemini/gemini-2.5-flash");
    assert!(no_key.contains("GEMINI_API_KEY"), "{no_key}");
}

#[tokio::test]
async fn streamed_function_calls_and_mid_stream_errors() {
    let calls = common::sse_reply(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "Find_flights_", "args": {"date": "2026-12-24T10:00:00Z"}}, "thoughtSignature": "c2ln"}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12}, "responseId": "resp-f"}),
    ]);
    let server = serve_method("streamGenerateContent", calls).await;
    let request = LlmRequest::new(vec![Message::user("fly")]).with_tools(vec![crewai_style_tool()]);
    let (seen, response) = common::streamed(&client(&server, &config()), request).await;
    assert_matches!(seen[0], StreamEvent::ToolCallDelta { index: 0, name: Some(name), .. }
        if name == "Find flights!");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls[0].signature.as_deref(), Some("c2ln"));
    assert_eq!(
        response.tool_calls[0].arguments["date"],
        "2026-12-24T10:00:00Z"
    );

    let failing = common::sse_reply(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "par"}]}}]}),
        json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
    ]);
    let server = serve_method("streamGenerateContent", failing).await;
    let error = stream_error(&client(&server, &config()), hi()).await;
    assert_matches!(error, LlmError::Server { status: 503, .. });
}

#[tokio::test]
async fn images_travel_inline_or_by_uri() {
    let server = serve(ResponseTemplate::new(200).set_body_json(text_reply("a cat"))).await;
    let message = Message::user("What is this?")
        .with_part(crewai_llm::ContentPart::Image {
            url: "data:image/png;base64,iVBORw0KGgo=".into(),
            media_type: None,
        })
        .with_part(crewai_llm::ContentPart::Image {
            url: "https://example.com/cat.webp".into(),
            media_type: None,
        });
    client(&server, &config())
        .call(LlmRequest::new(vec![message]))
        .await
        .expect("call succeeds");
    assert_eq!(
        sent_bodies(&server).await[0]["contents"][0]["parts"],
        json!([
            {"text": "What is this?"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/cat.webp"}}
        ])
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = serve(common::never_answering(&text_reply("late"))).await;
    let llm = client(&server, &config().with_timeout(0.3));
    // The timeout, not the server's 30 s delay, ends it.
    assert_times_out(Duration::from_millis(300), llm.call(hi())).await;
}
