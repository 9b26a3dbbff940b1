//! Shared helpers: CrewAI's recorded OpenAI exchanges as fixtures, builders for clients pointed
//! at a local server, the calculator exchange the OpenAI tests send, and the checks every
//! provider's tests make (a call that must fail, a timeout that must fire on time).
#![allow(dead_code)]

use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::router::BuildOptions;
use crewai_llm::{
    Llm, LlmConfig, LlmError, LlmRequest, Message, RetryPolicy, ToolDefinition, build_llm_with,
    collect_stream,
};
use crewai_testkit::prereq::Prerequisite;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// `assert!(matches!(value, pattern))` that shows the value when it does not match. The value is
/// matched by reference.
#[macro_export]
macro_rules! assert_matches {
    ($value:expr, $($pattern:pat_param)|+ $(if $guard:expr)? $(,)?) => {
        match &$value {
            $($pattern)|+ $(if $guard)? => {}
            other => panic!(
                "expected {}, got {other:?}",
                stringify!($($pattern)|+ $(if $guard)?)
            ),
        }
    };
}

/// The conformance cases shipped beside the workspace.
pub fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases")
}

/// The shared conformance cases, for the tests that replay CrewAI's recordings (in a
/// `harness = false` binary: skipped locally without them, failed under CI).
pub fn conformance_cases() -> Prerequisite {
    Prerequisite::dir(
        "CrewAI's recorded conformance cases",
        conformance_dir(),
        "put the shared conformance cases at ../shared/conformance/cases (beside this checkout)",
    )
}

/// One recorded exchange of a CrewAI conformance case: (request body, response body). Only for
/// tests gated on [`conformance_cases`].
pub fn fixture(case: &str, index: usize) -> (String, String) {
    let path = conformance_dir().join(case).join("cassette.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cassette: serde_json::Value =
        yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let interaction = &cassette["interactions"][index];
    let request = interaction["request"]["body"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let response = interaction["response"]["body"]["string"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (request, response)
}

/// Retries in milliseconds so tests stay fast.
pub fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy::default()
        .with_max_retries(max_retries)
        .with_delays(Duration::from_millis(1), Duration::from_millis(5))
        .with_max_retry_after(Duration::from_millis(50))
}

/// Builds `config` with a test key and fast retries, without reading the process environment.
pub fn build(config: &LlmConfig, max_retries: u32) -> Arc<dyn Llm> {
    let options = BuildOptions::new()
        .with_env_vars([("OPENAI_API_KEY", "sk-test")])
        .with_retry_policy(fast_retries(max_retries));
    build_llm_with(config, &options).unwrap_or_else(|e| panic!("build failed: {e}"))
}

/// An OpenAI config pointed at `server_uri` (`/v1` appended).
pub fn openai_at(server_uri: &str, model: &str) -> LlmConfig {
    LlmConfig::new(model).with_base_url(format!("{server_uri}/v1"))
}

/// The calculator tool of CrewAI's recorded tool-calling exchange, as it sent it.
pub fn calculator() -> ToolDefinition {
    ToolDefinition {
        name: "calculator".into(),
        description: "Perform mathematical calculations. Use this for any math operations.".into(),
        parameters: json!({
            "properties": {"expression": {"description": "Mathematical expression to evaluate", "title": "Expression", "type": "string"}},
            "required": ["expression"],
            "type": "object"
        }),
        strict: false,
    }
}

/// The calculator agent's task messages from the same recording.
pub fn calculator_task() -> Vec<Message> {
    vec![
        Message::system(
            "You are Calculator. You calculate things.\nYour personal goal is: Perform calculations efficiently",
        ),
        Message::user(
            "\nCurrent Task: What is 100 / 4?\n\nThis is the expected criteria for your final answer: The result\nyou MUST return the actual complete content as the final answer, not a summary.\n\nThis is VERY important to you, your job depends on it!",
        ),
    ]
}

/// A 200 reply with a JSON body.
pub fn json_reply(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.into(), "application/json")
}

/// The one request `server` received (fails when there were more or none).
pub async fn only_request(server: &MockServer) -> Request {
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 1, "expected exactly one request");
    requests
        .into_iter()
        .next()
        .unwrap_or_else(|| unreachable!())
}

/// A recorded request's body as JSON.
pub fn body_of(request: &Request) -> Value {
    serde_json::from_slice(&request.body)
        .unwrap_or_else(|e| panic!("request body is not JSON: {e}"))
}

/// The request most tests send: one user message, `hi`.
pub fn hi() -> LlmRequest {
    LlmRequest::new(vec![Message::user("hi")])
}

/// A server answering every POST with `response`.
pub async fn answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

/// A reply with `status` and the JSON `body`.
pub fn json_status(status: u16, body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_string(), "application/json")
}

/// A 200 reply of server-sent events, one `data:` line a value.
pub fn sse_reply(events: &[Value]) -> ResponseTemplate {
    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A reply that takes 30 s to come: long after any timeout a test sets.
pub fn never_answering(body: &Value) -> ResponseTemplate {
    json_status(200, body).set_delay(Duration::from_secs(30))
}

/// The error a call of `llm` must end with.
pub async fn call_error(llm: &dyn Llm, request: LlmRequest) -> LlmError {
    llm.call(request).await.expect_err("the call fails")
}

/// The error a stream of `llm` must end with, when it opens or while it is read.
pub async fn stream_error(llm: &dyn Llm, request: LlmRequest) -> LlmError {
    match llm.stream(request).await {
        Ok(stream) => collect_stream(stream, |_| {})
            .await
            .expect_err("the stream fails"),
        Err(error) => error,
    }
}

/// The requests `server` received whose path `wanted` accepts, in order.
pub async fn requests_to(server: &MockServer, wanted: impl Fn(&str) -> bool) -> Vec<Request> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .into_iter()
        .filter(|r| wanted(r.url.path()))
        .collect()
}

/// The JSON bodies `server` received, in order.
pub async fn sent_bodies(server: &MockServer) -> Vec<Value> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests.iter().map(body_of).collect()
}

/// Runs `call`, which must end because a timeout of `due` fired (see
/// [`crewai_testkit::timing::assert_ended_on_time`]). Returns the timeout error, checked to be [`LlmError::Timeout`].
pub async fn assert_times_out<T: Debug>(
    due: Duration,
    call: impl Future<Output = Result<T, LlmError>>,
) -> LlmError {
    let started = std::time::Instant::now();
    let error = call.await.expect_err("the call times out");
    let elapsed = started.elapsed();
    crewai_testkit::timing::assert_ended_on_time(elapsed, due, "timeout");
    assert_matches!(error, LlmError::Timeout { .. });
    assert!(error.is_retryable());
    error
}

/// The error `model` fails to build with when the environment has no key, as text with its causes.
pub fn missing_key_error(model: &str) -> String {
    let no_env = BuildOptions::new().with_env_vars(Vec::<(String, String)>::new());
    match build_llm_with(&LlmConfig::new(model), &no_env) {
        Ok(llm) => panic!("{model} built without a key: {}", llm.provider()),
        Err(error) => crewai_llm::error_chain(&error),
    }
}

/// Streams `request` through `llm` to its end: every event seen, and the final response.
pub async fn streamed(
    llm: &dyn Llm,
    request: LlmRequest,
) -> (Vec<crewai_llm::StreamEvent>, crewai_llm::LlmResponse) {
    let stream = llm.stream(request).await.expect("the stream opens");
    let mut seen = Vec::new();
    let response = collect_stream(stream, |event| seen.push(event.clone()))
        .await
        .expect("the stream completes");
    (seen, response)
}

/// A server answering every POST to `route` with `response`.
pub async fn answering_at(route: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    mount_at(&server, route, response).await;
    server
}

/// Makes `server` answer every POST to `route` with `response`.
pub async fn mount_at(server: &MockServer, route: &str, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(wiremock::matchers::path(route))
        .respond_with(response)
        .mount(server)
        .await;
}
