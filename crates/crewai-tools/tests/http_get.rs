//! `http_get` against a real local HTTP server.

use std::time::Duration;

use crewai_testkit::timing::assert_ended_on_time;
use crewai_tools::builtin::HttpGetTool;
use crewai_tools::{Tool, ToolContext, ToolError};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

mod common;
use common::server_with;

/// The tests' servers listen on 127.0.0.1, which the tool refuses unless told otherwise.
fn local_tool() -> HttpGetTool {
    HttpGetTool::new().allow_private_network(true)
}

async fn get(tool: &HttpGetTool, url: String) -> Result<String, ToolError> {
    tool.run(json!({"url": url}), &ToolContext::default())
        .await
        .map(|output| output.to_text())
}

/// A page that answers after 5 s.
fn slow_page() -> Mock {
    Mock::given(path("/slow")).respond_with(
        ResponseTemplate::new(200)
            .set_delay(Duration::from_secs(5))
            .set_body_string("late"),
    )
}

#[tokio::test]
async fn html_pages_become_readable_text() {
    let server = server_with([Mock::given(method("GET")).and(path("/page")).respond_with(
        ResponseTemplate::new(200).set_body_raw(
            "<html><head><title>Docs</title><script>track()</script></head><body><h1>Hello</h1><p>World &amp; more</p></body></html>",
            "text/html; charset=utf-8",
        ),
    )])
    .await;
    let text = get(&local_tool(), format!("{}/page", server.uri()))
        .await
        .unwrap();
    assert_eq!(text, "Docs\n\n# Hello\nWorld & more");
}

#[tokio::test]
async fn other_text_is_returned_as_is_and_binary_is_refused() {
    let server = server_with([
        Mock::given(path("/data.json")).respond_with(
            ResponseTemplate::new(200).set_body_raw(r#"{"a": 1}"#, "application/json"),
        ),
        Mock::given(path("/image.png")).respond_with(
            ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G'], "image/png"),
        ),
    ])
    .await;
    let tool = local_tool();
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
    let server = server_with([Mock::given(path("/big"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("x".repeat(10_000), "text/plain"))])
    .await;
    let text = get(
        &local_tool().with_max_bytes(100),
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
    let server =
        server_with([Mock::given(path("/missing")).respond_with(ResponseTemplate::new(404))]).await;
    let error = get(&local_tool(), format!("{}/missing", server.uri()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("HTTP 404"), "{error}");
}

#[tokio::test]
async fn slow_servers_hit_the_deadline() {
    let server = server_with([slow_page()]).await;
    let tool = local_tool().with_total_timeout(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let error = get(&tool, format!("{}/slow", server.uri()))
        .await
        .unwrap_err();
    // The timeout, not the server's 5 s delay, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(200), "timeout");
    assert!(error.to_string().contains("timed out"), "{error}");
}

#[tokio::test]
async fn cancellation_stops_the_request() {
    let server = server_with([slow_page()]).await;
    let ctx = ToolContext::default();
    ctx.cancellation.cancel();
    let result = local_tool()
        .run(json!({"url": format!("{}/slow", server.uri())}), &ctx)
        .await;
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
}

#[tokio::test]
async fn only_http_urls_are_fetched() {
    let tool = local_tool();
    for url in ["file:///etc/passwd", "ftp://example.com/x", "not a url"] {
        let error = get(&tool, url.to_string()).await.unwrap_err();
        assert!(
            matches!(error, ToolError::InvalidArguments(_)),
            "{url}: {error:?}"
        );
    }
}

async fn refusal(url: &str) -> String {
    match get(
        &HttpGetTool::new().allow_private_network(false),
        url.to_string(),
    )
    .await
    {
        Err(ToolError::Failed(message)) => message,
        other => panic!("{url} was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn internal_addresses_are_refused_with_the_reason() {
    for (url, kind) in [
        ("http://127.0.0.1:9/", "loopback"),
        ("http://10.0.0.7/admin", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::1]:9/", "loopback"),
        ("http://[::ffff:127.0.0.1]:9/", "loopback"),
        ("http://0.0.0.0:9/", "unspecified"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://localhost:9/", "loopback"),
    ] {
        let message = refusal(url).await;
        assert!(message.contains("was refused"), "{url}: {message}");
        assert!(message.contains(kind), "{url}: {message}");
        assert!(
            message.contains("CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK"),
            "{url}: {message}"
        );
    }
}

#[tokio::test]
async fn a_running_local_server_is_refused_unless_allowed() {
    let server = server_with([Mock::given(path("/secret"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("internal", "text/plain"))])
    .await;
    let url = format!("{}/secret", server.uri());
    let hostname_url = url.replace("127.0.0.1", "localhost");
    assert!(refusal(&url).await.contains("loopback"));
    assert!(refusal(&hostname_url).await.contains("loopback"));
    assert_eq!(get(&local_tool(), url).await.unwrap(), "internal");
    assert_eq!(get(&local_tool(), hostname_url).await.unwrap(), "internal");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}
