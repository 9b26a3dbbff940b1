//! Bedrock Converse against a local server: SigV4 headers, the Converse body, replies.
#![cfg(feature = "bedrock")]

mod common;

use std::sync::Arc;

use crewai_llm::bedrock::{AwsCredentials, SigningInput, sign_v4};
use crewai_llm::router::BuildOptions;
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, ResponseFormat, ToolDefinition,
    build_llm_with,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MODEL_PATH: &str = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse";

fn bedrock_config(server: &MockServer) -> LlmConfig {
    LlmConfig::new("bedrock/anthropic.claude-3-haiku-20240307-v1:0")
        .with_base_url(server.uri())
        .with_max_tokens(256)
}

/// The model at `server`, built from an environment with AWS credentials.
fn bedrock(server: &MockServer) -> Arc<dyn Llm> {
    build_llm_with(&bedrock_config(server), &aws_env()).unwrap_or_else(|e| panic!("{e}"))
}

fn aws_env() -> BuildOptions {
    BuildOptions::new()
        .with_env_vars([
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_SESSION_TOKEN", "session-token"),
            ("AWS_REGION", "us-west-2"),
        ])
        .with_retry_policy(common::fast_retries(0))
}

#[tokio::test]
async fn signed_converse_call_with_tools() {
    let server = MockServer::start().await;
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [
            {"text": "Let me look."},
            {"toolUse": {"toolUseId": "tooluse_1", "name": "web_search", "input": {"query": "rust"}}}
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42, "cacheReadInputTokens": 8}
    });
    Mock::given(method("POST"))
        .and(path(MODEL_PATH))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("x-amzn-requestid", "req-123")
                .set_body_raw(reply.to_string(), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let llm = bedrock(&server);
    let tool = ToolDefinition {
        name: "web search".into(),
        description: "Searches".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        strict: false,
    };
    let request = LlmRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Find rust news"),
    ])
    .with_tools(vec![tool])
    .with_stop(vec!["\nObservation:".into()]);
    let response = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls[0].name, "web search",
        "the original tool name comes back"
    );
    assert_eq!(response.tool_calls[0].arguments, json!({"query": "rust"}));
    assert_eq!(response.usage.cached_prompt_tokens, 8);
    assert_eq!(response.response_id.as_deref(), Some("req-123"));

    let requests = server.received_requests().await.unwrap_or_default();
    let sent = &requests[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap_or_default();
    assert_eq!(body["system"], json!([{"text": "Be brief."}]));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"text": "Find rust news"}]}])
    );
    assert_eq!(
        body["inferenceConfig"],
        json!({"maxTokens": 256, "stopSequences": ["\nObservation:"]})
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["name"],
        json!("web_search")
    );
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"auto": {}}));

    // The signature the server got is the one these exact bytes, headers and URL produce.
    let header = |name: &str| {
        sent.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header("x-amz-security-token"), "session-token");
    let url =
        url::Url::parse(&format!("{}{MODEL_PATH}", server.uri())).unwrap_or_else(|e| panic!("{e}"));
    let credentials = AwsCredentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: Some("session-token".into()),
    };
    let expected = sign_v4(&SigningInput {
        method: "POST",
        url: &url,
        headers: &[("content-type".to_string(), "application/json".to_string())],
        body: &sent.body,
        credentials: &credentials,
        region: "us-west-2",
        service: "bedrock",
        amz_date: &header("x-amz-date"),
    });
    let authorization = expected
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert_eq!(header("authorization"), authorization);
    assert!(authorization.contains("/us-west-2/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,"));
}

#[tokio::test]
async fn structured_output_uses_a_forced_tool() {
    let server = MockServer::start().await;
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "Score", "input": {"score": 4}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 5, "outputTokens": 5, "totalTokens": 10}
    });
    Mock::given(method("POST"))
        .and(path(MODEL_PATH))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(reply.to_string(), "application/json"),
        )
        .mount(&server)
        .await;
    let llm = bedrock(&server);
    let format = ResponseFormat {
        name: "Score".into(),
        schema: json!({"type": "object", "properties": {"score": {"type": "integer"}}}),
        strict: true,
    };
    let response = llm
        .call(LlmRequest::new(vec![Message::user("Rate it")]).with_response_format(format))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.content.as_deref(), Some(r#"{"score":4}"#));
    assert!(response.tool_calls.is_empty());
    let body: Value =
        serde_json::from_slice(&server.received_requests().await.unwrap_or_default()[0].body)
            .unwrap_or_default();
    assert_eq!(
        body["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "Score"}})
    );
}

#[tokio::test]
async fn throttling_and_missing_credentials_are_typed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_raw(
            r#"{"message":"Too many requests, please wait before trying again."}"#,
            "application/json",
        ))
        .mount(&server)
        .await;
    let error = common::call_error(bedrock(&server).as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::RateLimited { message, .. }
        if message.starts_with("Too many requests"));

    let bare = BuildOptions::new().with_env_vars([("AWS_REGION", "us-east-1")]);
    match build_llm_with(&bedrock_config(&server), &bare).err() {
        Some(LlmError::MissingApiKey { provider, env_var }) => {
            assert_eq!(provider, "bedrock");
            assert!(env_var.contains("AWS_ACCESS_KEY_ID"));
        }
        other => panic!("{other:?}"),
    }
}
