//! `SerperDevTool` reads `SERPER_API_KEY` at each call. This is the only test in its binary, so
//! setting the variable cannot race with another test.

use crewai_tools::{ToolContext, ToolError};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, ResponseTemplate};

mod common;
use common::{built, run_text, server_with};

#[tokio::test]
async fn the_key_comes_from_serper_api_key() {
    let server = server_with([Mock::given(method("POST"))
        .and(path("/search"))
        .and(header("X-API-KEY", "from-env"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"organic": []})))
        .expect(1)])
    .await;
    let tool = built(
        "SerperDevTool",
        json!({"base_url": server.uri()}),
        &std::env::temp_dir(),
    );
    // SAFETY: no other thread of this test binary reads or writes the environment.
    unsafe { std::env::remove_var("SERPER_API_KEY") };
    let error = tool
        .run(json!({"search_query": "x"}), &ToolContext::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ToolError::MissingEnvVar { ref var, .. } if var == "SERPER_API_KEY"),
        "{error}"
    );
    // SAFETY: as above.
    unsafe { std::env::set_var("SERPER_API_KEY", "from-env") };
    let output = run_text(tool.as_ref(), json!({"search_query": "nothing here"})).await;
    assert_eq!(output, "No results found for 'nothing here'.");
}
