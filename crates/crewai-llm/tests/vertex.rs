//! Gemini on Vertex AI against a local server that speaks both halves of it: Google's OAuth 2
//! token endpoint (a service account's signed JWT or a user's refresh token traded for an access
//! token) and Vertex AI's `generateContent` / `streamGenerateContent` under
//! `/v1/projects/{project}/locations/{location}/publishers/google/models/{model}`.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{assert_times_out, call_error, hi, requests_to, streamed};
use crewai_llm::router::{BuildOptions, build_llm_with};
use crewai_llm::{FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, RetryPolicy};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

const MODEL: &str = "gemini-2.5-flash";
const TOKEN: &str = "ya29.vertex-test-token";
const CLIENT_EMAIL: &str = "crew@sa-project.iam.gserviceaccount.com";

fn fixture(name: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/vertex")
        .join(name);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// A service-account key whose token endpoint is the test server's.
fn service_account(server: &MockServer) -> Value {
    json!({
        "type": "service_account",
        "project_id": "sa-project",
        "private_key_id": "kid-1",
        "private_key": fixture("test_key.pem"),
        "client_email": CLIENT_EMAIL,
        "client_id": "1234",
        "token_uri": format!("{}/token", server.uri()),
    })
}

/// The form fields of a token request.
fn form(request: &Request) -> Vec<(String, String)> {
    url::form_urlencoded::parse(&request.body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    scope: String,
    aud: String,
    iat: u64,
    exp: u64,
}

/// Google's side of the JWT-bearer grant: the assertion must be signed by the test key, issued
/// by the service account, for this endpoint and the cloud-platform scope.
struct SignedByTestKey {
    audience: String,
}

impl Match for SignedByTestKey {
    fn matches(&self, request: &Request) -> bool {
        let form = form(request);
        if field(&form, "grant_type") != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
            return false;
        }
        let Some(assertion) = field(&form, "assertion") else {
            return false;
        };
        let Ok(key) = DecodingKey::from_rsa_pem(fixture("test_key.pub.pem").as_bytes()) else {
            return false;
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_audience(&[self.audience.as_str()]);
        validation.set_issuer(&[CLIENT_EMAIL]);
        let Ok(token) = jsonwebtoken::decode::<Claims>(assertion, &key, &validation) else {
            return false;
        };
        let claims = token.claims;
        token.header.kid.as_deref() == Some("kid-1")
            && claims.iss == CLIENT_EMAIL
            && claims.aud == self.audience
            && claims.scope == "https://www.googleapis.com/auth/cloud-platform"
            && claims.exp == claims.iat + 3600
    }
}

/// Serves the JWT-bearer grant at `/token`, `expected` times.
async fn serve_jwt_grant(server: &MockServer, expected: u64) {
    Mock::given(method("POST"))
        .and(path("/token"))
        .and(header("content-type", "application/x-www-form-urlencoded"))
        .and(SignedByTestKey {
            audience: format!("{}/token", server.uri()),
        })
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"
        })))
        .expect(expected)
        .mount(server)
        .await;
}

fn model_path(project: &str, location: &str, method_name: &str) -> String {
    format!(
        "/v1/projects/{project}/locations/{location}/publishers/google/models/{MODEL}:{method_name}"
    )
}

/// A mock of one Vertex AI method of [`MODEL`] in `project` and `location`.
fn model_call(project: &str, location: &str, method_name: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(path(model_path(project, location, method_name)))
}

fn text_reply(text: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash-002",
        "createTime": "2026-12-01T10:00:00.000000Z",
        "responseId": "vertex-resp-1"
    })
}

/// Builds `config` with the given environment only (never the process's) and no retries.
fn build(config: &LlmConfig, env: &[(&str, &str)]) -> Result<Arc<dyn Llm>, LlmError> {
    let pairs: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let options = BuildOptions::new()
        .with_env_vars(pairs)
        .with_retry_policy(RetryPolicy::none());
    build_llm_with(config, &options)
}

fn vertex_config(server: &MockServer, credentials: Value) -> LlmConfig {
    let mut config = LlmConfig::new(format!("vertex_ai/{MODEL}"))
        .with_base_url(server.uri())
        .with_timeout(5.0);
    config.vertex_credentials = Some(credentials);
    config.vertex_location = Some("europe-west4".into());
    config
}

#[tokio::test]
async fn a_service_account_signs_a_jwt_and_its_token_is_reused_for_generate_content() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    model_call("sa-project", "europe-west4", "generateContent")
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_reply("Bonjour")))
        .expect(2)
        .mount(&server)
        .await;
    let llm = build(&vertex_config(&server, service_account(&server)), &[]).expect("builds");
    assert_eq!((llm.provider(), llm.model()), ("vertex_ai", MODEL));

    let request = LlmRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Greet me"),
    ]);
    let reply = llm.call(request.clone()).await.expect("first call");
    llm.call(request).await.expect("second call, same token");

    assert_eq!(reply.content.as_deref(), Some("Bonjour"));
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(reply.response_id.as_deref(), Some("vertex-resp-1"));
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (12, 3)
    );
    let calls = requests_to(&server, |path| path.ends_with(":generateContent")).await;
    assert_eq!(
        calls[0].body_json::<Value>().expect("json"),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Greet me"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]}
        }),
        "the Gemini body, unchanged"
    );
    assert!(calls[0].headers.get("x-goog-api-key").is_none());
}

#[tokio::test]
async fn a_stream_carries_text_and_a_tool_call_in_server_sent_events() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Looking"}]}}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}
        ]}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 7, "totalTokenCount": 27}}),
    ];
    let sse: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    model_call("pinned", "europe-west4", "streamGenerateContent")
        .and(query_param("alt", "sse"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    // The configured project wins over the key's own.
    let llm = build(
        &vertex_config(&server, service_account(&server)),
        &[("VERTEXAI_PROJECT", "pinned")],
    )
    .expect("builds");
    let weather = crewai_llm::ToolDefinition {
        name: "weather".into(),
        description: "The weather of a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        strict: false,
    };
    let (events, reply) = streamed(
        llm.as_ref(),
        LlmRequest::new(vec![Message::user("Weather in Oslo?")]).with_tools(vec![weather]),
    )
    .await;

    assert!(
        events
            .iter()
            .any(|e| matches!(e, crewai_llm::StreamEvent::TextDelta(t) if t == "Looking"))
    );
    assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
    assert_eq!(reply.tool_calls[0].name, "weather");
    assert_eq!(reply.tool_calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(reply.usage.total_tokens, 27);
}

#[tokio::test]
async fn gcloud_user_credentials_refresh_at_their_token_uri_and_bill_their_quota_project() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/user-token"))
        .and(RefreshGrant)
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": TOKEN, "expires_in": 3599, "scope": "https://www.googleapis.com/auth/cloud-platform", "token_type": "Bearer"
        })))
        .expect(1)
        .mount(&server)
        .await;
    model_call("quota-project", "us-central1", "generateContent")
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header("x-goog-user-project", "quota-project"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_reply("hello")))
        .expect(1)
        .mount(&server)
        .await;
    // `gcloud auth application-default login` wrote this under the (test) home directory.
    let home = tempfile::tempdir().expect("temp home");
    let gcloud = home.path().join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).expect("gcloud dir");
    let adc = json!({
        "type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
        "client_secret": "user-secret", "refresh_token": "1//user-refresh",
        "quota_project_id": "quota-project", "token_uri": format!("{}/user-token", server.uri()),
    });
    std::fs::write(
        gcloud.join("application_default_credentials.json"),
        adc.to_string(),
    )
    .expect("adc file");
    let config = LlmConfig::new(format!("vertex_ai_beta/{MODEL}")).with_base_url(server.uri());
    let home_dir = home.path().to_string_lossy().to_string();
    let llm = build(&config, &[("HOME", home_dir.as_str())]).expect("builds");

    let reply = llm.call(hi()).await.expect("call");
    assert_eq!(reply.content.as_deref(), Some("hello"));
}

/// The refresh-token grant of the ADC file above.
struct RefreshGrant;

impl Match for RefreshGrant {
    fn matches(&self, request: &Request) -> bool {
        let form = form(request);
        field(&form, "grant_type") == Some("refresh_token")
            && field(&form, "client_id") == Some("cid.apps.googleusercontent.com")
            && field(&form, "client_secret") == Some("user-secret")
            && field(&form, "refresh_token") == Some("1//user-refresh")
    }
}

#[tokio::test]
async fn a_refused_token_is_exchanged_once_more_then_the_refusal_is_an_authentication_error() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 2).await;
    let unauthenticated = json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
        "message": "Request had invalid authentication credentials. Expected OAuth 2 access token."}});
    model_call("sa-project", "europe-west4", "generateContent")
        .respond_with(ResponseTemplate::new(401).set_body_json(unauthenticated))
        .expect(2)
        .mount(&server)
        .await;
    let llm = build(&vertex_config(&server, service_account(&server)), &[]).expect("builds");

    match call_error(llm.as_ref(), hi()).await {
        LlmError::Authentication {
            provider,
            message,
            hint,
        } => {
            assert_eq!(provider, "vertex_ai");
            assert!(
                message.contains("invalid authentication credentials"),
                "{message}"
            );
            assert_eq!(hint, "the credentials of vertex_credentials");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_quota_error_is_a_rate_limit_with_google_s_retry_delay() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    let exhausted = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "Resource exhausted. Please try again later.",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}});
    model_call("sa-project", "europe-west4", "generateContent")
        .respond_with(ResponseTemplate::new(429).set_body_json(exhausted))
        .mount(&server)
        .await;
    let llm = build(&vertex_config(&server, service_account(&server)), &[]).expect("builds");

    let error = call_error(llm.as_ref(), hi()).await;
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error:?}");
    assert_eq!(error.retry_after(), Some(std::time::Duration::from_secs(7)));
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_token_endpoint_refusal_names_the_credentials_it_came_from() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": "invalid_grant", "error_description": "Invalid JWT Signature."
        })))
        .mount(&server)
        .await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    std::fs::write(key_file.path(), service_account(&server).to_string()).expect("write key");
    let key_path = key_file.path().to_string_lossy().to_string();
    let config = LlmConfig::new(format!("vertex_ai/{MODEL}")).with_base_url(server.uri());
    let llm = build(
        &config,
        &[("GOOGLE_APPLICATION_CREDENTIALS", key_path.as_str())],
    )
    .expect("builds");

    match call_error(llm.as_ref(), hi()).await {
        LlmError::Authentication { message, hint, .. } => {
            assert!(
                message.contains("Invalid JWT Signature. (invalid_grant)"),
                "{message}"
            );
            assert!(message.contains("/token"), "{message}");
            assert_eq!(
                hint,
                format!("the credentials of GOOGLE_APPLICATION_CREDENTIALS ({key_path})")
            );
        }
        other => panic!("{other:?}"),
    }
    let model_calls = requests_to(&server, |path| path.contains("/models/")).await;
    assert!(model_calls.is_empty(), "no model call without a token");
}

#[tokio::test]
async fn an_access_token_given_as_api_key_is_sent_as_it_is() {
    let server = MockServer::start().await;
    model_call("p1", "global", "generateContent")
        .and(header(
            "authorization",
            "Bearer from-gcloud-print-access-token",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_reply("ok")))
        .expect(1)
        .mount(&server)
        .await;
    let config = LlmConfig::new(format!("vertex_ai/{MODEL}"))
        .with_base_url(server.uri())
        .with_api_key("from-gcloud-print-access-token");
    let llm = build(
        &config,
        &[("VERTEX_PROJECT", "p1"), ("VERTEX_LOCATION", "global")],
    )
    .expect("builds");
    assert_eq!(
        llm.call(hi()).await.expect("call").content.as_deref(),
        Some("ok")
    );
}

#[test]
fn missing_credentials_and_a_missing_project_say_what_to_set() {
    let none = build(
        &LlmConfig::new(format!("vertex_ai/{MODEL}")),
        &[("HOME", "/nonexistent")],
    );
    match none.err() {
        Some(error @ LlmError::Credentials { .. }) => {
            let text = error.to_string();
            for needed in [
                "VERTEXAI_CREDENTIALS",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "vertex_credentials",
                "gcloud auth application-default login",
            ] {
                assert!(text.contains(needed), "{text}");
            }
        }
        other => panic!("{other:?}"),
    }
    let token_only = LlmConfig::new(format!("vertex_ai/{MODEL}")).with_api_key("tok");
    let text = build(&token_only, &[])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        text.contains("needs a Google Cloud project") && text.contains("VERTEXAI_PROJECT"),
        "{text}"
    );
    let partner = build(
        &LlmConfig::new("vertex_ai/meta/llama-4-maverick-17b-128e-instruct-maas")
            .with_api_key("tok"),
        &[("VERTEXAI_PROJECT", "p")],
    );
    assert!(
        matches!(partner, Err(LlmError::Unsupported(_))),
        "{:?}",
        partner.err()
    );
}

#[tokio::test]
async fn a_token_endpoint_that_never_answers_fails_the_call_on_the_config_s_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(common::never_answering(&json!({"access_token": "late"})))
        .mount(&server)
        .await;
    let config = vertex_config(&server, service_account(&server)).with_timeout(1.0);
    let llm = build(&config, &[]).expect("builds");

    let error = assert_times_out(std::time::Duration::from_secs(1), llm.call(hi())).await;
    let chain = crewai_llm::error_chain(&error);
    assert!(
        chain.contains(&format!("the token request to {}/token", server.uri())),
        "{chain}"
    );
}

#[tokio::test]
async fn a_recorded_cassette_holds_the_model_call_but_never_the_token_exchange() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    model_call("sa-project", "europe-west4", "generateContent")
        .respond_with(ResponseTemplate::new(200).set_body_json(text_reply("taped")))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let cassette = dir.path().join("vertex.yaml");
    let llm = crewai_llm::cassette::record_llm(
        &vertex_config(&server, service_account(&server)),
        &cassette,
    )
    .expect("builds");

    assert_eq!(
        llm.call(hi()).await.expect("call").content.as_deref(),
        Some("taped")
    );
    let text = std::fs::read_to_string(&cassette).expect("cassette written");
    assert_eq!(text.matches("uri:").count(), 1, "{text}");
    assert!(text.contains(":generateContent"), "{text}");
    for secret in ["assertion", TOKEN, "/token"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

/// The path of a Claude method on Vertex AI.
fn claude_path(method_name: &str) -> String {
    format!(
        "/v1/projects/sa-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:{method_name}"
    )
}

fn claude_config(server: &MockServer) -> LlmConfig {
    let mut config = vertex_config(server, service_account(server));
    config.model = "vertex_ai/claude-sonnet-4-5@20250929".into();
    config.vertex_location = Some("us-east5".into());
    config
}

#[tokio::test]
async fn claude_speaks_anthropic_s_format_at_raw_predict_without_a_model_in_the_body() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    Mock::given(method("POST"))
        .and(path(claude_path("rawPredict")))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_vrtx_01", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Hello from Claude"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 14, "output_tokens": 4}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let llm = build(&claude_config(&server), &[]).expect("builds");
    assert_eq!(
        (llm.provider(), llm.model()),
        ("vertex_ai", "claude-sonnet-4-5@20250929")
    );

    let reply = llm
        .call(LlmRequest::new(vec![
            Message::system("Be brief."),
            Message::user("hi"),
        ]))
        .await
        .expect("call");

    assert_eq!(reply.content.as_deref(), Some("Hello from Claude"));
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (14, 4)
    );
    let sent = requests_to(&server, |path| path.ends_with(":rawPredict")).await;
    let body: Value = sent[0].body_json().expect("json");
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert!(
        body.get("model").is_none(),
        "the model is in the URL: {body}"
    );
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(sent[0].headers.get("anthropic-version").is_none());
    assert!(sent[0].headers.get("x-api-key").is_none());
}

#[tokio::test]
async fn claude_streams_anthropic_s_events_from_stream_raw_predict() {
    let server = MockServer::start().await;
    serve_jwt_grant(&server, 1).await;
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_vrtx_02", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "usage": {"input_tokens": 9, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "there"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let sse: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    Mock::given(method("POST"))
        .and(path(claude_path("streamRawPredict")))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let llm = build(&claude_config(&server), &[]).expect("builds");

    let (_, reply) = streamed(llm.as_ref(), hi()).await;

    assert_eq!(reply.content.as_deref(), Some("Hi there"));
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(reply.usage.completion_tokens, 5);
    let sent = requests_to(&server, |path| path.ends_with(":streamRawPredict")).await;
    let body: Value = sent[0].body_json().expect("json");
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
}
