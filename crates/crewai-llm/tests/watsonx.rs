//! IBM watsonx.ai against a local server that speaks both halves of it: IBM Cloud IAM's token
//! endpoint (an API key traded for a bearer token) and the chat API (`/ml/v1/text/chat`,
//! `/ml/v1/text/chat_stream`, `/ml/v1/deployments/{id}/text/chat`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{calculator, call_error, hi, requests_to, streamed};
use crewai_llm::router::{BuildOptions, build_llm_with};
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, RetryPolicy, StreamEvent,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const MODEL: &str = "ibm/granite-4-h-small";
const API_KEY: &str = "wx-api-key-0123456789";
const TOKEN: &str = "iam-bearer-token";

/// Serves IAM's API-key grant for [`API_KEY`] at `/identity/token`, `expected` times.
async fn serve_iam(server: &MockServer, expected: u64) {
    Mock::given(method("POST"))
        .and(path("/identity/token"))
        .and(header("content-type", "application/x-www-form-urlencoded"))
        .and(body_string_contains(
            "grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey",
        ))
        .and(body_string_contains(format!("apikey={API_KEY}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": TOKEN, "refresh_token": "not_supported", "token_type": "Bearer",
            "expires_in": 3600, "expiration": 1_900_000_000u64, "scope": "ibm openid"
        })))
        .expect(expected)
        .mount(server)
        .await;
}

/// The environment of a project-scoped account whose IAM is the test server.
fn account(server: &MockServer) -> Vec<(String, String)> {
    vec![
        ("WATSONX_URL".into(), server.uri()),
        ("WATSONX_APIKEY".into(), API_KEY.into()),
        ("WATSONX_PROJECT_ID".into(), "proj-1".into()),
        (
            "WATSONX_IAM_URL".into(),
            format!("{}/identity/token", server.uri()),
        ),
    ]
}

fn build_with(config: &LlmConfig, env: Vec<(String, String)>) -> Result<Arc<dyn Llm>, LlmError> {
    let options = BuildOptions::new()
        .with_env_vars(env)
        .with_retry_policy(RetryPolicy::none());
    build_llm_with(config, &options)
}

fn config() -> LlmConfig {
    LlmConfig::new(format!("watsonx/{MODEL}")).with_timeout(5.0)
}

/// A chat reply in watsonx's shape (OpenAI's, with watsonx's extra fields).
fn chat_reply(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-wx-1", "model_id": MODEL, "model": MODEL, "created": 1_765_000_000,
        "model_version": "4.0.0", "created_at": "2026-12-06T10:00:00.000Z",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"completion_tokens": 9, "prompt_tokens": 31, "total_tokens": 40},
        "system": {"warnings": []}
    })
}

fn chat_path() -> &'static str {
    "/ml/v1/text/chat"
}

async fn chat_requests(server: &MockServer) -> Vec<Request> {
    requests_to(server, |path| path.starts_with("/ml/")).await
}

#[tokio::test]
async fn an_api_key_is_exchanged_at_iam_once_and_the_chat_body_is_watsonx_s() {
    let server = MockServer::start().await;
    serve_iam(&server, 1).await;
    Mock::given(method("POST"))
        .and(path(chat_path()))
        .and(query_param("version", "2024-03-13"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_reply(
            json!({"role": "assistant", "content": "Hello from Granite"}),
            "stop",
        )))
        .expect(2)
        .mount(&server)
        .await;
    let mut config = config().with_temperature(0.2).with_max_tokens(300);
    config.stop = vec!["\nObservation:".into()];
    let llm = build_with(&config, account(&server)).expect("builds");
    assert_eq!((llm.provider(), llm.model()), ("watsonx", MODEL));

    let request = LlmRequest::new(vec![Message::system("Be brief."), Message::user("hi")]);
    let reply = llm.call(request.clone()).await.expect("first call");
    llm.call(request).await.expect("second call, same token");

    assert_eq!(reply.content.as_deref(), Some("Hello from Granite"));
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(
        (
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            reply.usage.total_tokens
        ),
        (31, 9, 40)
    );
    let sent = chat_requests(&server).await;
    assert_eq!(
        sent[0].body_json::<Value>().expect("json"),
        json!({
            "model_id": MODEL,
            "project_id": "proj-1",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
            "max_tokens": 300,
            "temperature": 0.2,
            "stop": ["\nObservation:"]
        })
    );
}

#[tokio::test]
async fn tools_go_in_openai_s_shape_and_a_tool_call_comes_back() {
    let server = MockServer::start().await;
    serve_iam(&server, 1).await;
    let call = json!({"role": "assistant", "content": "", "tool_calls": [{
        "id": "chatcmpl-tool-1", "type": "function",
        "function": {"name": "calculator", "arguments": "{\"expression\": \"100 / 4\"}"}
    }]});
    Mock::given(method("POST"))
        .and(path(chat_path()))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_reply(call, "tool_calls")))
        .mount(&server)
        .await;
    let llm = build_with(&config(), account(&server)).expect("builds");

    let reply = llm
        .call(LlmRequest::new(common::calculator_task()).with_tools(vec![calculator()]))
        .await
        .expect("call");

    assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
    assert_eq!(reply.tool_calls[0].id, "chatcmpl-tool-1");
    assert_eq!(reply.tool_calls[0].name, "calculator");
    assert_eq!(
        reply.tool_calls[0].arguments,
        json!({"expression": "100 / 4"})
    );
    let body: Value = chat_requests(&server).await[0].body_json().expect("json");
    assert_eq!(body["tool_choice_option"], "auto");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "calculator");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["expression"])
    );
}

#[tokio::test]
async fn the_stream_endpoint_sends_openai_chunks_with_usage_at_the_end() {
    let server = MockServer::start().await;
    serve_iam(&server, 1).await;
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "chat-s-1", "model_id": MODEL, "created": 1_765_000_000,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut last = chunk(json!({"content": ""}), Some("stop"));
    last["usage"] = json!({"completion_tokens": 4, "prompt_tokens": 11, "total_tokens": 15});
    let events = [
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        last,
    ];
    // watsonx numbers its events and names them `message`; it sends no `[DONE]`.
    let sse: String = events
        .iter()
        .enumerate()
        .map(|(i, e)| format!("id: {}\nevent: message\ndata: {e}\n\n", i + 1))
        .collect();
    Mock::given(method("POST"))
        .and(path("/ml/v1/text/chat_stream"))
        .and(query_param("version", "2024-03-13"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let llm = build_with(&config(), account(&server)).expect("builds");

    let (seen, reply) = streamed(llm.as_ref(), hi()).await;

    let text: String = seen
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
    assert_eq!(reply.content.as_deref(), Some("Hello"));
    assert_eq!(reply.usage.total_tokens, 15);
    let body: Value = chat_requests(&server).await[0].body_json().expect("json");
    assert!(
        body.get("stream").is_none(),
        "the endpoint streams; the body says nothing of it"
    );
}

#[tokio::test]
async fn a_deployment_posts_to_its_own_url_with_a_given_token_and_no_model_or_project() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/ml/v1/deployments/dep-42/text/chat"))
        .and(query_param("version", "2025-02-11"))
        .and(header("authorization", "Bearer given-token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_reply(
            json!({"role": "assistant", "content": "deployed"}),
            "stop",
        )))
        .expect(1)
        .mount(&server)
        .await;
    // A given token wins over an API key, as in LiteLLM: no exchange at all.
    let mut config = LlmConfig::new("watsonx/deployment/dep-42")
        .with_base_url(server.uri())
        .with_api_key("an-api-key-left-unused");
    config.api_version = Some("2025-02-11".into());
    let llm = build_with(
        &config,
        vec![("WATSONX_TOKEN".into(), "given-token".into())],
    )
    .expect("builds without a project");

    assert_eq!(
        llm.call(hi()).await.expect("call").content.as_deref(),
        Some("deployed")
    );
    let body: Value = chat_requests(&server).await[0].body_json().expect("json");
    assert!(
        body.get("model_id").is_none() && body.get("project_id").is_none(),
        "{body}"
    );
    let iam_calls = requests_to(&server, |path| path == "/identity/token").await;
    assert!(iam_calls.is_empty(), "a given token needs no exchange");
}

/// A watsonx error reply.
fn wx_error(status: u16, code: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "errors": [{"code": code, "message": message, "more_info": "https://cloud.ibm.com/apidocs/watsonx-ai"}],
        "trace": "7f3c", "status_code": status
    }))
}

#[tokio::test]
async fn an_expired_token_is_exchanged_once_more_then_reported_as_an_authentication_error() {
    let server = MockServer::start().await;
    serve_iam(&server, 2).await;
    Mock::given(method("POST"))
        .and(path(chat_path()))
        .respond_with(wx_error(
            401,
            "authentication_token_expired",
            "Failed to authenticate the request due to an expired token",
        ))
        .expect(2)
        .mount(&server)
        .await;
    let llm = build_with(&config(), account(&server)).expect("builds");

    match call_error(llm.as_ref(), hi()).await {
        LlmError::Authentication {
            provider,
            message,
            hint,
        } => {
            assert_eq!(provider, "watsonx");
            assert!(message.contains("expired token"), "{message}");
            assert_eq!(hint, "WATSONX_APIKEY");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn rate_limits_and_unknown_models_are_typed_errors() {
    let server = MockServer::start().await;
    // Two clients, each with its own token.
    serve_iam(&server, 2).await;
    Mock::given(method("POST"))
        .and(path(chat_path()))
        .and(body_string_contains("ibm/granite-4-h-small"))
        .respond_with(
            wx_error(
                429,
                "token_quota_reached",
                "You have reached the rate limit",
            )
            .insert_header("retry-after", "3"),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(chat_path()))
        .and(body_string_contains("ibm/no-such-model"))
        .respond_with(wx_error(
            404,
            "model_not_supported",
            "Model 'ibm/no-such-model' is not supported",
        ))
        .mount(&server)
        .await;
    let llm = build_with(&config(), account(&server)).expect("builds");
    let error = call_error(llm.as_ref(), hi()).await;
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error:?}");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(3)));
    assert!(error.to_string().contains("rate limit"), "{error}");

    let missing = build_with(
        &LlmConfig::new("watsonx/ibm/no-such-model"),
        account(&server),
    )
    .expect("builds");
    match call_error(missing.as_ref(), hi()).await {
        LlmError::ModelNotFound { model, message, .. } => {
            assert_eq!(model, "ibm/no-such-model");
            assert!(message.contains("not supported"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_api_key_iam_does_not_know_is_an_authentication_error_naming_its_variable() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/identity/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "errorCode": "BXNIM0415E", "errorMessage": "Provided API key could not be found.",
            "context": {"requestId": "r-1"}
        })))
        .mount(&server)
        .await;
    let mut env = account(&server);
    env.retain(|(k, _)| k != "WATSONX_APIKEY");
    env.push(("WX_API_KEY".into(), API_KEY.into()));
    let llm = build_with(&config(), env).expect("builds");

    match call_error(llm.as_ref(), hi()).await {
        LlmError::Authentication { message, hint, .. } => {
            assert!(
                message.contains("Provided API key could not be found. (BXNIM0415E)"),
                "{message}"
            );
            assert!(
                !message.contains(API_KEY),
                "the key stays out of messages: {message}"
            );
            assert_eq!(hint, "WX_API_KEY");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        chat_requests(&server).await.is_empty(),
        "no chat call without a token"
    );
}

#[test]
fn missing_settings_say_which_variables_to_set() {
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let url = ("WATSONX_URL", "https://us-south.ml.cloud.ibm.com");
    match build_with(&config(), env(&[url, ("WATSONX_PROJECT_ID", "p")])).err() {
        Some(LlmError::MissingApiKey { provider, env_var }) => {
            assert_eq!(provider, "watsonx");
            assert!(
                env_var.contains("WATSONX_APIKEY") && env_var.contains("WATSONX_TOKEN"),
                "{env_var}"
            );
        }
        other => panic!("{other:?}"),
    }
    let no_url = build_with(
        &config(),
        env(&[("WATSONX_APIKEY", "k"), ("WATSONX_PROJECT_ID", "p")]),
    );
    let text = no_url.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("WATSONX_URL"), "{text}");
    let no_project = build_with(&config(), env(&[url, ("WATSONX_APIKEY", "k")]));
    let text = no_project.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("WATSONX_PROJECT_ID") && text.contains("WATSONX_SPACE_ID"),
        "{text}"
    );
    let text_endpoint = build_with(
        &LlmConfig::new("watsonx_text/ibm/granite-13b-instruct-v2"),
        env(&[url]),
    );
    let text = text_endpoint
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(text.contains("watsonx/<model>"), "{text}");
}

#[test]
fn context_windows_and_prices_come_from_litellm_s_watsonx_entries() {
    let llm = build_with(
        &config(),
        vec![
            (
                "WATSONX_URL".into(),
                "https://us-south.ml.cloud.ibm.com".into(),
            ),
            ("WATSONX_TOKEN".into(), "t".into()),
            ("WATSONX_SPACE_ID".into(), "s".into()),
        ],
    )
    .expect("builds");
    assert_eq!(llm.capabilities().context_window, 131_072);
    let prices = crewai_llm::PriceTable::builtin();
    assert!(prices.lookup(&format!("watsonx/{MODEL}")).is_some());
}
