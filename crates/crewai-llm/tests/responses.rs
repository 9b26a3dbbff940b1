//! The OpenAI Responses API client (`api: responses`) against a local server.

mod common;

use common::{build, openai_at};
use crewai_llm::{
    FinishReason, LlmConfig, LlmRequest, Message, OpenAiApi, ResponseFormat, StreamEvent,
    ToolDefinition, collect_stream,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn responses_config(server: &MockServer, model: &str) -> LlmConfig {
    let mut config = openai_at(&server.uri(), model);
    config.api = Some(OpenAiApi::Responses);
    config
}

#[tokio::test]
async fn function_calls_and_structured_output_over_responses() {
    let server = MockServer::start().await;
    let reply = json!({
        "id": "resp_abc", "object": "response", "status": "completed", "model": "gpt-4.1-mini-2025-04-14",
        "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{\"city\":\"Paris\"}", "status": "completed"}],
        "usage": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52, "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
    });
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer sk-test"))
        .and(body_partial_json(json!({"model": "gpt-4.1-mini", "tool_choice": "auto", "text": {"format": {"type": "json_schema", "name": "Weather", "strict": true}}})))
        .respond_with(ResponseTemplate::new(200).set_body_raw(reply.to_string(), "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let tool = ToolDefinition {
        name: "lookup".into(),
        description: "Looks up weather".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        strict: true,
    };
    let format = ResponseFormat {
        name: "Weather".into(),
        schema: json!({"type": "object", "properties": {"summary": {"type": "string"}}}),
        strict: true,
    };
    let request = LlmRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Weather in Paris?"),
    ])
    .with_tools(vec![tool])
    .with_response_format(format);
    let response = build(&responses_config(&server, "gpt-4.1-mini"), 0)
        .call(request)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls[0].id, "call_1");
    assert_eq!(response.tool_calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(response.response_id.as_deref(), Some("resp_abc"));
    assert_eq!(response.usage.total_tokens, 52);
    let requests = server.received_requests().await.unwrap_or_default();
    let sent: Value = serde_json::from_slice(&requests[0].body).unwrap_or_default();
    assert_eq!(
        sent["input"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(sent["tools"][0]["name"], json!("lookup"));
}

#[tokio::test]
async fn streamed_responses_end_with_the_completed_response() {
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_s", "status": "in_progress", "output": []}}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Bon"}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "jour"}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_s", "status": "completed", "model": "o4-mini",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Bonjour", "annotations": []}]}],
            "usage": {"input_tokens": 9, "output_tokens": 30, "total_tokens": 39, "output_tokens_details": {"reasoning_tokens": 24}}}}),
        ),
    ];
    let sse: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(body_partial_json(
            json!({"stream": true, "reasoning": {"effort": "high"}}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = responses_config(&server, "o4-mini").with_temperature(0.5);
    config.reasoning_effort = Some("high".into());
    let stream = build(&config, 0)
        .stream(LlmRequest::new(vec![Message::user("Say hello in French")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut deltas = Vec::new();
    let response = collect_stream(stream, |event| {
        if let StreamEvent::TextDelta(text) = event {
            deltas.push(text.clone());
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(deltas, ["Bon", "jour"]);
    assert_eq!(response.content.as_deref(), Some("Bonjour"));
    assert_eq!(response.usage.reasoning_tokens, 24);
    let requests = server.received_requests().await.unwrap_or_default();
    let sent: Value = serde_json::from_slice(&requests[0].body).unwrap_or_default();
    assert!(
        sent.get("temperature").is_none(),
        "reasoning models take no temperature"
    );
}
