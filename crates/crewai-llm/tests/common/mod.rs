//! Shared helpers: CrewAI's recorded OpenAI exchanges as fixtures, and builders for clients
//! pointed at a local server.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::router::BuildOptions;
use crewai_llm::{Llm, LlmConfig, RetryPolicy, build_llm_with};

/// The conformance cases shipped beside the workspace.
pub fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases")
}

/// One recorded exchange of a CrewAI conformance case: (request body, response body).
/// `None` (with a message) when the conformance directory is not there.
pub fn fixture(case: &str, index: usize) -> Option<(String, String)> {
    let dir = conformance_dir();
    if !dir.is_dir() {
        eprintln!(
            "skipping: CrewAI conformance fixtures not found at {}",
            dir.display()
        );
        return None;
    }
    let path = dir.join(case).join("cassette.yaml");
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
    Some((request, response))
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
