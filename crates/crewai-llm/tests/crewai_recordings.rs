//! The tests that replay CrewAI's own recorded exchanges (the shared conformance cases in
//! `../shared/conformance/cases`): our OpenAI client sends CrewAI's bytes and reads its
//! replies (`openai::`), and the cassette replayer plays CrewAI's recordings (`cassette::`). The
//! rest of the OpenAI and cassette tests, which need nothing outside the repository, are in
//! `openai.rs` and `cassette.rs`.
//!
//! Without the cases these tests are reported as skipped, and fail under `CI=true` (see
//! `crewai_testkit::prereq`). `harness = false`: every test is registered in `main`.

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use common::{
    body_of, build, calculator, calculator_task, conformance_cases, conformance_dir, fixture,
    json_reply, only_request, openai_at,
};
use crewai_llm::cassette::{Cassette, CassetteReplayer, MatchOn, replay_llm_from};
use crewai_llm::{
    FinishReason, LlmConfig, LlmRequest, Message, ResponseFormat, StreamEvent, collect_stream,
};
use crewai_testkit::prereq::Suite;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn main() -> ExitCode {
    let cases = conformance_cases();
    Suite::new()
        .async_test_needing(
            "openai::tool_call_round_trip_matches_crewai_bytes",
            &[&cases],
            tool_call_round_trip_matches_crewai_bytes,
        )
        .async_test_needing(
            "openai::structured_output_sends_strict_json_schema",
            &[&cases],
            structured_output_sends_strict_json_schema,
        )
        .async_test_needing(
            "openai::streaming_yields_deltas_and_final_usage",
            &[&cases],
            streaming_yields_deltas_and_final_usage,
        )
        .async_test_needing(
            "openai::o_series_rules_apply_on_the_wire",
            &[&cases],
            o_series_rules_apply_on_the_wire,
        )
        .async_test_needing(
            "cassette::crewai_recordings_replay_through_our_client",
            &[&cases],
            crewai_recordings_replay_through_our_client,
        )
        .async_test_needing(
            "cassette::body_matching_replays_requests_in_any_order",
            &[&cases],
            body_matching_replays_requests_in_any_order,
        )
        .run()
}

async fn tool_call_round_trip_matches_crewai_bytes() {
    let (first_request, first_reply) = fixture("openai_native_tool_calling_token_usage", 0);
    let (second_request, second_reply) = fixture("openai_native_tool_calling_token_usage", 1);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .and(header("content-type", "application/json"))
        .and(body_partial_json(json!({"tool_choice": "auto"})))
        .respond_with(json_reply(first_reply))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    common::mount_at(&server, "/v1/chat/completions", json_reply(second_reply)).await;

    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 0);
    let mut messages = calculator_task();
    let first = llm
        .call(LlmRequest::new(messages.clone()).with_tools(vec![calculator()]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.content, None);
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].id, "call_rZQU4F2cauxK3VUKfLtXoNVC");
    assert_eq!(
        first.tool_calls[0].arguments,
        json!({"expression": "100 / 4"})
    );
    assert_eq!(
        first.response_id.as_deref(),
        Some("chatcmpl-D0vm0KDdT8cWRCVIeG67pB46jQQih")
    );
    assert_eq!(
        (
            first.usage.prompt_tokens,
            first.usage.completion_tokens,
            first.usage.total_tokens
        ),
        (127, 17, 144)
    );

    messages.push(first.to_message());
    let mut result = Message::tool_result(
        "call_rZQU4F2cauxK3VUKfLtXoNVC",
        "calculator",
        "The result of 100 / 4 is 25.0",
    );
    result.name = None; // this CrewAI version sent tool results without a name
    messages.push(result);
    messages.push(Message::user("Analyze the tool result. If requirements are met, provide the Final Answer. Otherwise, call the next tool. Deliver only the answer without meta-commentary."));
    let second = llm
        .call(LlmRequest::new(messages).with_tools(vec![calculator()]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.content.as_deref(), Some("25.0"));

    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&requests[0].body),
        first_request,
        "first request body differs from CrewAI's"
    );
    assert_eq!(
        String::from_utf8_lossy(&requests[1].body),
        second_request,
        "second request body differs from CrewAI's"
    );
}

async fn structured_output_sends_strict_json_schema() {
    let (crewai_request, reply) = fixture("lite_agent_structured_output", 2);
    let crewai: Value = serde_json::from_str(&crewai_request).unwrap_or_default();
    let server = common::answering_at("/v1/chat/completions", json_reply(reply)).await;
    let llm = build(&openai_at(&server.uri(), "gpt-4o-mini"), 0);
    let format_json = &crewai["response_format"]["json_schema"];
    let format = ResponseFormat {
        name: format_json["name"].as_str().unwrap_or_default().to_string(),
        schema: format_json["schema"].clone(),
        strict: true,
    };
    let response = llm
        .call(
            LlmRequest::new(vec![Message::user("What is the population of Tokyo?")])
                .with_response_format(format),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let parsed: Value =
        serde_json::from_str(response.content.as_deref().unwrap_or_default()).unwrap_or_default();
    assert_eq!(parsed["confidence"], json!(90));
    let sent = body_of(&only_request(&server).await);
    assert_eq!(
        sent["response_format"], crewai["response_format"],
        "response_format must be exactly CrewAI's"
    );
}

async fn streaming_yields_deltas_and_final_usage() {
    let (_, recorded) = fixture("basic_crew_streaming_from_docs", 0);
    // CrewAI's recording has no usage chunk (it did not ask); append the one include_usage adds.
    let usage_chunk = r#"data: {"id":"chatcmpl-CfXBrOETPJvWq2aM1TvlZ5la5eSNR","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":200,"completion_tokens":150,"total_tokens":350,"prompt_tokens_details":{"cached_tokens":128},"completion_tokens_details":{"reasoning_tokens":0}}}"#;
    let sse = recorded.replace("data: [DONE]", &format!("{usage_chunk}\n\ndata: [DONE]"));
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("accept", "text/event-stream"))
        .and(body_partial_json(
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let llm = build(&openai_at(&server.uri(), "gpt-4.1-mini"), 0);
    let stream = llm
        .stream(LlmRequest::new(vec![Message::user("Research AI")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut text = String::new();
    let mut deltas = 0;
    let response = collect_stream(stream, |event| {
        if let StreamEvent::TextDelta(delta) = event {
            text.push_str(delta);
            deltas += 1;
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(deltas > 10, "expected many deltas, got {deltas}");
    assert!(text.starts_with("Thought"), "{text}");
    assert!(text.ends_with("intelligent systems."), "{text}");
    assert_eq!(response.content.as_deref(), Some(text.as_str()));
    assert_eq!(response.usage.total_tokens, 350);
    assert_eq!(response.usage.cached_prompt_tokens, 128);
    assert_eq!(
        response.response_id.as_deref(),
        Some("chatcmpl-CfXBrOETPJvWq2aM1TvlZ5la5eSNR")
    );
}

async fn o_series_rules_apply_on_the_wire() {
    let (crewai_request, reply) = fixture("o3_mini_reasoning_effort_low", 0);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_reply(reply))
        .mount(&server)
        .await;
    let mut config = openai_at(&server.uri(), "o3-mini")
        .with_temperature(0.7)
        .with_max_tokens(500);
    config.reasoning_effort = Some("low".into());
    let response = build(&config, 0)
        .call(LlmRequest::new(vec![Message::user(
            "What is the capital of France?",
        )]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        response.content.as_deref(),
        Some("The capital of France is Paris.")
    );
    let sent = body_of(&only_request(&server).await);
    let crewai: Value = serde_json::from_str(&crewai_request).unwrap_or_default();
    assert_eq!(sent["reasoning_effort"], crewai["reasoning_effort"]);
    assert_eq!(sent["max_completion_tokens"], json!(500));
    assert!(
        sent.get("temperature").is_none() && sent.get("max_tokens").is_none(),
        "{sent}"
    );
}

async fn crewai_recordings_replay_through_our_client() {
    let (first_request, _) = fixture("openai_native_tool_calling_token_usage", 0);
    let path = conformance_dir().join("openai_native_tool_calling_token_usage/cassette.yaml");
    let cassette = Cassette::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let replayer =
        CassetteReplayer::with_matching(cassette, "conformance", MatchOn::MethodPathAndBody);
    let llm =
        replay_llm_from(&LlmConfig::new("gpt-4o-mini"), replayer).unwrap_or_else(|e| panic!("{e}"));
    let request: serde_json::Value = serde_json::from_str(&first_request).unwrap_or_default();
    let tool = &request["tools"][0]["function"];
    let tools = vec![crewai_llm::ToolDefinition {
        name: tool["name"].as_str().unwrap_or_default().into(),
        description: tool["description"].as_str().unwrap_or_default().into(),
        parameters: tool["parameters"].clone(),
        strict: false,
    }];
    let messages = vec![
        Message::system(
            request["messages"][0]["content"]
                .as_str()
                .unwrap_or_default(),
        ),
        Message::user(
            request["messages"][1]["content"]
                .as_str()
                .unwrap_or_default(),
        ),
    ];
    let reply = llm
        .call(LlmRequest::new(messages.clone()).with_tools(tools.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.tool_calls[0].name, "calculator");

    // A different request body is refused with a clear message under body matching.
    let changed = llm
        .call(LlmRequest::new(vec![Message::user("something else")]).with_tools(tools))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(changed.contains("request 2 (POST https://api.openai.com/v1/chat/completions) matches no unused recording"), "{changed}");
}

async fn body_matching_replays_requests_in_any_order() {
    let path = conformance_dir().join("openai_native_tool_calling_token_usage/cassette.yaml");
    let mut cassette = Cassette::load(&path).unwrap_or_else(|e| panic!("{e}"));
    cassette.interactions.reverse();
    let bodies: Vec<String> = cassette
        .interactions
        .iter()
        .map(|i| i.request.body.clone().unwrap_or_default())
        .collect();
    let replayer =
        CassetteReplayer::with_matching(cassette, "reversed", MatchOn::MethodPathAndBody);
    let transport: Arc<dyn crewai_llm::http::Transport> = replayer.clone();
    let http = crewai_llm::http::HttpClient::with_transport(
        crewai_llm::http::ErrorContext::new("openai", "gpt-4o-mini", "OPENAI_API_KEY"),
        transport,
    );
    // Send the recordings' own bodies in their original order (reverse of the cassette's).
    for body in bodies.iter().rev() {
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let reply = http
            .post_json("https://api.openai.com/v1/chat/completions", &[], &json)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            reply["id"]
                .as_str()
                .unwrap_or_default()
                .starts_with("chatcmpl-")
        );
    }
    assert_eq!(replayer.remaining(), 0);
}
