//! The Gemini client against a local server speaking generateContent.

use std::time::Duration;

use crewai_llm::gemini::GeminiLlm;
use crewai_llm::router::{BuildOptions, build_llm_with};
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, ResponseFormat, RetryPolicy,
    StreamEvent, ToolDefinition, collect_stream,
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

async fn mount(server: &MockServer, method_name: &str, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(format!("/v1beta/models/{MODEL}:{method_name}")))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(response)
        .mount(server)
        .await;
}

async fn sent_bodies(server: &MockServer) -> Vec<Value> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| r.body_json::<Value>().expect("the client sends JSON"))
        .collect()
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

/// The call ended because its timeout fired, on the wall clock: not before it was due, and within a
/// second after (the slack covers clock granularity: its timer starts after the test's clock).
fn assert_ended_on_time(elapsed: Duration, due: Duration) {
    assert!(
        elapsed + Duration::from_millis(20) >= due && elapsed <= due + Duration::from_secs(1),
        "ended after {elapsed:?}; a {due:?} timeout should end it within a second of being due"
    );
}

#[tokio::test]
async fn plain_call_sends_system_instruction_generation_config_and_reads_usage() {
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(text_reply("Hi!")),
    )
    .await;
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
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "Find_flights_", "args": {"origin": {"code": "CDG"}, "date": "2026-12-24T10:00:00Z"}}, "thoughtSignature": "c2lnLTE="},
                {"functionCall": {"name": "Find_flights_", "args": {"origin": {"code": "JFK"}, "date": "2026-12-25T10:00:00Z"}}}
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 30, "totalTokenCount": 110},
            "responseId": "resp-2"
        })),
    )
    .await;
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
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(text_reply(r#"{"score": 4}"#)),
    )
    .await;
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
    let stream = client(&server, &config())
        .stream(LlmRequest::new(vec![Message::user("hello")]))
        .await
        .expect("opens");
    let mut seen = Vec::new();
    let response = collect_stream(stream, |e| seen.push(e.clone()))
        .await
        .expect("completes");
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
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(status).set_body_json(body),
    )
    .await;
    client(&server, &config())
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect_err("the call fails")
}

fn google_error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

#[tokio::test]
async fn error_statuses_become_typed_errors() {
    let key = error_for(400, json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}))
    .await;
    assert!(
        matches!(&key, LlmError::Authentication { hint, .. } if hint.contains("GEMINI_API_KEY")),
        "{key:?}"
    );

    let invalid = error_for(
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received. Unknown name \"foo\"",
        ),
    )
    .await;
    assert!(
        matches!(&invalid, LlmError::InvalidRequest { status: 400, message, .. } if message.contains("Unknown name")),
        "{invalid:?}"
    );

    let overflow = error_for(400, google_error(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).")).await;
    assert!(
        matches!(overflow, LlmError::ContextLengthExceeded { .. }),
        "{overflow:?}"
    );

    let limited = error_for(
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota. Please retry in 2.5s.",
        ),
    )
    .await;
    assert!(
        matches!(limited, LlmError::RateLimited { .. }),
        "{limited:?}"
    );
    assert_eq!(limited.retry_after(), Some(Duration::from_millis(2500)));

    let denied = error_for(
        403,
        google_error(
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers",
        ),
    )
    .await;
    assert!(
        matches!(denied, LlmError::PermissionDenied { .. }),
        "{denied:?}"
    );

    let missing = error_for(
        404,
        google_error(404, "NOT_FOUND", "models/gemini-9 is not found"),
    )
    .await;
    assert!(
        matches!(&missing, LlmError::ModelNotFound { model, .. } if model == MODEL),
        "{missing:?}"
    );

    for status in [500, 503] {
        let server_error = error_for(
            status,
            google_error(status, "UNAVAILABLE", "The model is overloaded."),
        )
        .await;
        assert!(
            matches!(server_error, LlmError::Server { .. }) && server_error.is_retryable(),
            "{server_error:?}"
        );
    }
}

#[tokio::test]
async fn malformed_and_blocked_replies() {
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_raw("not json", "text/plain"),
    )
    .await;
    let error = client(&server, &config())
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect_err("not JSON");
    assert!(
        matches!(error, LlmError::MalformedResponse { .. }),
        "{error:?}"
    );

    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(json!([1, 2])),
    )
    .await;
    let error = client(&server, &config())
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect_err("not an object");
    assert!(
        matches!(error, LlmError::MalformedResponse { .. }),
        "{error:?}"
    );

    let server = MockServer::start().await;
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}});
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(blocked),
    )
    .await;
    let response = client(&server, &config())
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect("a blocked prompt is an answer");
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
    assert_eq!(response.content, None);
}

#[tokio::test]
async fn the_router_builds_gemini_from_a_model_string_and_env() {
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(text_reply("routed")),
    )
    .await;
    let options = BuildOptions::new()
        .with_env_vars([
            ("GOOGLE_API_KEY", "g-key".to_string()),
            ("GEMINI_API_BASE", server.uri()),
        ])
        .with_retry_policy(RetryPolicy::none());
    let llm = build_llm_with(&LlmConfig::new("gemini/gemini-2.5-flash"), &options).expect("routes");
    assert_eq!(llm.provider(), "gemini");
    assert_eq!(llm.capabilities().context_window, 1_048_576);
    let response = llm
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect("call succeeds");
    assert_eq!(response.content.as_deref(), Some("routed"));

    let no_env = BuildOptions::new().with_env_vars(Vec::<(String, String)>::new());
    let no_key = build_llm_with(&LlmConfig::new("gemini/gemini-2.5-flash"), &no_env).err();
    assert!(no_key.is_some_and(|e| e.to_string().contains("GEMINI_API_KEY")));
}

#[tokio::test]
async fn streamed_function_calls_and_mid_stream_errors() {
    let server = MockServer::start().await;
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "Find_flights_", "args": {"date": "2026-12-24T10:00:00Z"}}, "thoughtSignature": "c2ln"}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12}, "responseId": "resp-f"}),
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    Mock::given(method("POST"))
        .and(path(format!(
            "/v1beta/models/{MODEL}:streamGenerateContent"
        )))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let request = LlmRequest::new(vec![Message::user("fly")]).with_tools(vec![crewai_style_tool()]);
    let stream = client(&server, &config())
        .stream(request)
        .await
        .expect("opens");
    let mut seen = Vec::new();
    let response = collect_stream(stream, |e| seen.push(e.clone()))
        .await
        .expect("completes");
    assert!(
        matches!(&seen[0], StreamEvent::ToolCallDelta { index: 0, name: Some(name), .. } if name == "Find flights!"),
        "{seen:?}"
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls[0].signature.as_deref(), Some("c2ln"));
    assert_eq!(
        response.tool_calls[0].arguments["date"],
        "2026-12-24T10:00:00Z"
    );

    let server = MockServer::start().await;
    let failing = format!(
        "data: {}\n\ndata: {}\n\n",
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "par"}]}}]}),
        json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})
    );
    Mock::given(method("POST"))
        .and(path(format!(
            "/v1beta/models/{MODEL}:streamGenerateContent"
        )))
        .respond_with(ResponseTemplate::new(200).set_body_raw(failing, "text/event-stream"))
        .mount(&server)
        .await;
    let stream = client(&server, &config())
        .stream(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect("opens");
    let error = collect_stream(stream, |_| {})
        .await
        .expect_err("fails mid-stream");
    assert!(
        matches!(error, LlmError::Server { status: 503, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn images_travel_inline_or_by_uri() {
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200).set_body_json(text_reply("a cat")),
    )
    .await;
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
    let server = MockServer::start().await;
    mount(
        &server,
        "generateContent",
        ResponseTemplate::new(200)
            .set_delay(Duration::from_secs(30))
            .set_body_json(text_reply("late")),
    )
    .await;
    let llm = client(&server, &config().with_timeout(0.3));
    let started = std::time::Instant::now();
    let error = llm
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .expect_err("times out");
    // The timeout, not the server's 30 s delay, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(300));
    assert!(matches!(error, LlmError::Timeout { .. }), "{error:?}");
}
