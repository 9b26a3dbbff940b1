//! Shared helpers: CrewAI's recorded OpenAI exchanges as fixtures, builders for clients pointed
//! at a local server, and the calculator exchange the OpenAI tests send.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::router::BuildOptions;
use crewai_llm::{Llm, LlmConfig, Message, RetryPolicy, ToolDefinition, build_llm_with};
use crewai_testkit::prereq::Prerequisite;
use serde_json::{Value, json};
use wiremock::{MockServer, Request, ResponseTemplate};

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
