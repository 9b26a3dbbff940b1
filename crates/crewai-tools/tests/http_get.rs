//! `http_get` against a real local HTTP server.

use std::time::Duration;

use crewai_tools::builtin::HttpGetTool;
use crewai_tools::{Tool, ToolContext, ToolError};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn get(tool: &HttpGetTool, url: String) -> Result<String, ToolError> {
    tool.run(json!({"url": url}), &ToolContext::default())
        .await
        .map(|output| output.to_text())
}

#[tokio::test]
async fn html_pages_become_readable_text() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/page"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "<html><head><title>Docs</title><script>track()</script></head><body><h1>Hello</h1><p>World &amp; more</p></body></html>",
            "text/html; charset=utf-8",
        ))
        .mount(&server)
        .await;
    let text = get(&HttpGetTool::new(), format!("{}/page", server.uri()))
        .await
        .unwrap();
    assert_eq!(text, "Docs\n\nHello\nWorld & more");
}

#[tokio::test]
async fn other_text_is_returned_as_is_and_binary_is_refused() {
    let server = MockServer::start().await;
    Mock::given(path("/data.json"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(r#"{"a": 1}"#, "application/json"))
        .mount(&server)
        .await;
    Mock::given(path("/image.png"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G'], "image/png"),
        )
        .mount(&server)
        .await;
    let tool = HttpGetTool::new();
    assert_eq!(
        get(&tool, format!("{}/data.json", server.uri()))
            .await
            .unwrap(),
        r#"{"a": 1}"#
    );
    let error = get(&tool, format!("{}/image.png", server.uri()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("image/png"), "{error}");
}

#[tokio::test]
async fn large_bodies_are_cut_at_the_limit() {
    let server = MockServer::start().await;
    Mock::given(path("/big"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("x".repeat(10_000), "text/plain"))
        .mount(&server)
        .await;
    let text = get(
        &HttpGetTool::new().with_max_bytes(100),
        format!("{}/big", server.uri()),
    )
    .await
    .unwrap();
    assert!(text.starts_with(&"x".repeat(100)), "{text}");
    assert!(!text.starts_with(&"x".repeat(101)), "{text}");
    assert!(
        text.ends_with("[The page is longer than 100 bytes; only the start was read.]"),
        "{text}"
    );
}

#[tokio::test]
async fn error_statuses_are_reported() {
    let server = MockServer::start().await;
    Mock::given(path("/missing"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    let error = get(&HttpGetTool::new(), format!("{}/missing", server.uri()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("HTTP 404"), "{error}");
}

#[tokio::test]
async fn slow_servers_hit_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(path("/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(5))
                .set_body_string("late"),
        )
        .mount(&server)
        .await;
    let tool = HttpGetTool::new().with_total_timeout(Duration::from_millis(200));
    let error = get(&tool, format!("{}/slow", server.uri()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("timed out"), "{error}");
}

#[tokio::test]
async fn cancellation_stops_the_request() {
    let server = MockServer::start().await;
    Mock::given(path("/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(5))
                .set_body_string("late"),
        )
        .mount(&server)
        .await;
    let ctx = ToolContext::default();
    ctx.cancellation.cancel();
    let result = HttpGetTool::new()
        .run(json!({"url": format!("{}/slow", server.uri())}), &ctx)
        .await;
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
}

#[tokio::test]
async fn only_http_urls_are_fetched() {
    let tool = HttpGetTool::new();
    for url in ["file:///etc/passwd", "ftp://example.com/x", "not a url"] {
        let error = get(&tool, url.to_string()).await.unwrap_err();
        assert!(
            matches!(error, ToolError::InvalidArguments(_)),
            "{url}: {error:?}"
        );
    }
}
